"""Data-parallel strategies on this machine's CPUs: each as a ratio of ``independent``, and
cnnbench's ``replicated`` against a bare hand-written DistributedDataParallel loop.

    .venv/bin/python benchmarks/distributed.py                 # resnet18, 64x64, batch 16, 2 workers
    .venv/bin/python benchmarks/distributed.py --rounds 3 --steps 30 --variants replicated,independent

Every variant runs on the same number of worker processes (``--workers``, default 2), each
with the same batch and the same torch threads (the host's cores split among the workers),
started the same way (torch's elastic launch API, Gloo). cnnbench variants go through the
tool's own launcher and engine (``run_on_workers``); the bare loop is the DDP loop a user
writes by hand (no hooks, no timers, no records), started by the same launcher. Rounds
interleave all variants, so drifts of machine speed hit them alike; the medians over rounds
are printed, with each variant as a ratio of ``independent`` (no gradient exchange: the upper
bound) and cnnbench ``replicated`` as a ratio of the bare loop.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import torch

from cnnbench.config import RunConfig
from cnnbench.engine.multidevice.launch import launch_workers
from cnnbench.engine.multidevice.workers import run_on_workers

VARIANTS: dict[str, dict[str, Any]] = {
    "independent": {"variable_update": "independent"},
    "replicated": {"variable_update": "replicated"},
    "replicated bucket 100MB": {"variable_update": "replicated", "bucket_cap_mb": 100.0},
    "replicated bucket 5MB": {"variable_update": "replicated", "bucket_cap_mb": 5.0},
    "replicated bucket view": {"variable_update": "replicated", "gradient_as_bucket_view": True},
    "replicated static graph": {"variable_update": "replicated", "static_graph": True},
    "replicated fp16 compression": {"variable_update": "replicated", "gradient_compression": "fp16"},
    "replicated bf16 compression": {"variable_update": "replicated", "gradient_compression": "bf16"},
    "parameter_server": {"variable_update": "parameter_server"},
    "fsdp": {"variable_update": "fsdp"},
}


def bare_ddp(model_name: str, image_size: int, batch: int, warmup: int, steps: int) -> float:
    """One worker of the hand-written loop: DDP over Gloo, SGD, one fixed synthetic batch."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from cnnbench.distributed.world import World
    from cnnbench.engine.multidevice.worker import split_host_threads
    from cnnbench.models import create_model

    split_host_threads(World.from_env())
    dist.init_process_group("gloo")
    torch.manual_seed(1234)
    model = DistributedDataParallel(create_model(model_name, image_size=image_size).train())
    opt = torch.optim.SGD(model.parameters(), lr=0.005, weight_decay=4e-5)
    g = torch.Generator().manual_seed(1234 + dist.get_rank())
    images = torch.randn(batch, 3, image_size, image_size, generator=g)
    labels = torch.randint(0, 1000, (batch,), generator=g)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(images), labels).backward()
        opt.step()

    for _ in range(warmup):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dist.barrier()
    wall = time.perf_counter() - t0
    dist.destroy_process_group()
    return batch * dist_world() * steps / wall


def dist_world() -> int:
    return int(os.environ["WORLD_SIZE"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--variants", default=",".join(VARIANTS), help="Comma-separated names (default: all).")
    args = p.parse_args()

    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    base = RunConfig(model=args.model, image_size=args.image_size, batch_size=args.batch_size, device="cpu",
                     num_devices=args.workers, num_batches=args.steps, num_warmup_batches=args.warmup,
                     display_every=10**6)
    print(f"{args.model} {args.image_size}px, batch {args.batch_size} per worker, {args.workers} CPU workers "
          f"({max(1, len(os.sched_getaffinity(0)) // args.workers)} threads each), {args.steps} timed steps, "
          f"torch {torch.__version__}")
    results: dict[str, list[float]] = {name: [] for name in [*names, "bare DDP loop"]}
    for r in range(1, args.rounds + 1):
        for name in names:
            record = run_on_workers(base.replace(**VARIANTS[name]))
            if record.status != "ok":
                raise SystemExit(f"{name}: {record.status}: {record.error}")
            results[name].append(float(record.metrics["total_images_per_sec"]))
            print(f"round {r}: {name:<28} {results[name][-1]:8.1f} img/s", flush=True)
        out = launch_workers(bare_ddp, (args.model, args.image_size, args.batch_size, args.warmup, args.steps),
                             nprocs=args.workers, timeout_s=300)
        results["bare DDP loop"].append(float(out[0]))
        print(f"round {r}: {'bare DDP loop':<28} {results['bare DDP loop'][-1]:8.1f} img/s", flush=True)

    med = {name: statistics.median(xs) for name, xs in results.items() if xs}
    ind = med.get("independent")
    print()
    print(f"{'variant':<28} {'images/sec':>10} {'/ independent':>14}")
    for name, value in med.items():
        ratio = f"{value / ind:14.3f}" if ind else f"{'—':>14}"
        print(f"{name:<28} {value:10.1f} {ratio}")
    if "replicated" in med:
        print(f"\ncnnbench replicated / bare DDP loop: {med['replicated'] / med['bare DDP loop']:.3f} "
              f"(median over {args.rounds} rounds)")


if __name__ == "__main__":
    main()
