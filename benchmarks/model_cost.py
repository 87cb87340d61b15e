"""How long ``cnnbench models`` takes over the whole torchvision zoo (SPEC C8: "the whole zoo is quick").

    .venv/bin/python benchmarks/model_cost.py                   # every torchvision model, default sizes
    .venv/bin/python benchmarks/model_cost.py --pattern 'resnet*' --no-cli
    .venv/bin/python benchmarks/model_cost.py --pattern 'resnet*' --baseline

1. In this process (imports timed apart): ``model_cost(name)`` for every torchvision model
   matching ``--pattern`` at its default size, in name order, as ``cnnbench models`` does;
   prints seconds per model (slowest first) and in total.
2. Unless ``--no-cli``: ``cnnbench models PATTERN --format json`` as a subprocess, wall clock
   from start to exit (interpreter start and imports included).
3. With ``--baseline``: the same models traced with ``torch.utils.flop_counter.FlopCounterMode``
   (eval forward + training step on meta, the straightforward way), side by side, with the
   ratio of the two times; the FLOP totals are checked to be equal.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pattern", default="*", help="Wildcard over torchvision model names (default: all).")
    parser.add_argument("--no-cli", action="store_true", help="Skip the end-to-end CLI timing.")
    parser.add_argument("--baseline", action="store_true", help="Also time torch's FlopCounterMode on the same models.")
    args = parser.parse_args()

    t0 = time.perf_counter()
    from cnnbench.models import get_model_spec, list_models
    from cnnbench.models.cost import model_cost

    names = [n for n in list_models(args.pattern, include_aliases=False) if get_model_spec(n).source == "torchvision"]
    print(f"imports: {time.perf_counter() - t0:.2f} s; {len(names)} torchvision models")

    seconds: dict[str, float] = {}
    flops: dict[str, tuple[int, int]] = {}
    start = time.perf_counter()
    for name in names:
        t = time.perf_counter()
        cost = model_cost(name)
        seconds[name] = time.perf_counter() - t
        flops[name] = (cost.forward_flops, cost.train_flops)
    total = time.perf_counter() - start
    for name in sorted(seconds, key=seconds.__getitem__, reverse=True):
        print(f"  {name:22s} {seconds[name]:6.2f} s")
    print(f"model_cost, in process: {total:.1f} s in total, {total / len(names):.2f} s per model (mean)")

    if not args.no_cli:
        exe = shutil.which("cnnbench") or f"{sys.prefix}/bin/cnnbench"
        t = time.perf_counter()
        subprocess.run([exe, "models", args.pattern, "--format", "json"], check=True, stdout=subprocess.DEVNULL)
        print(f"`cnnbench models {args.pattern} --format json`, end to end: {time.perf_counter() - t:.1f} s")

    if args.baseline:
        base = 0.0
        for name in names:
            t = time.perf_counter()
            assert _flop_counter_mode(name) == flops[name], name
            base += time.perf_counter() - t
        print(f"FlopCounterMode baseline: {base:.1f} s; ratio baseline / model_cost = {base / total:.1f}")


def _flop_counter_mode(name: str) -> tuple[int, int]:
    """(forward FLOPs, train FLOPs per image) the straightforward way, with the same conv-backward formula."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from cnnbench.models import get_model_spec
    from cnnbench.models.cost import TRAIN_BATCH, _build
    from cnnbench.models.meta_trace import conv_backward_flop, tensors

    spec = get_model_spec(name)
    size = spec.default_image_size
    model = _build(spec, size, real=False)
    mapping = {torch.ops.aten.convolution_backward: conv_backward_flop}
    image = torch.zeros(1, 3, size, size, device="meta")
    with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=mapping) as forward:
        model.eval()(image)
    batch = torch.zeros(TRAIN_BATCH, 3, size, size, device="meta")
    with FlopCounterMode(display=False, custom_mapping=mapping) as train:
        outputs = [t for t in tensors(model.train()(batch)) if t.is_floating_point()]
        torch.stack([t.sum() for t in outputs]).sum().backward()
    return forward.get_total_flops(), train.get_total_flops() // TRAIN_BATCH


if __name__ == "__main__":
    main()
