"""What telemetry costs: the environment capture at start-up, and the sampler beside the timed loop.

    .venv/bin/python benchmarks/telemetry.py                  # CPU: resnet18 at 64x64, batch 16
    .venv/bin/python benchmarks/telemetry.py --device cuda --model resnet50 --image-size 224 --batch-size 64

1. **Capture**: in fresh processes (``--captures`` of them), after torch and torchvision are
   imported (a run imports them anyway), the time of the first ``capture_environment``
   call, split into the part that was there before the host/GPU facts were added (CPU model,
   core counts, versions) and the part they add (:func:`host_facts`, and on CUDA
   :func:`gpu_facts`: NVML), plus a second, warm call.
2. **One sample's cost**: the CPU time (``time.thread_time``, so other load on the machine
   does not count) of ``--samples`` samples taken one after another, host and (on CUDA) GPU;
   over the 0.5 s interval this is the share of one core the sampler takes.
3. **Sampler beside the loop**: the same training steps timed with and without the telemetry
   sampler running beside them (the default 0.5 s interval, and 0.05 s to magnify any
   effect), alternating ``--rounds`` times in one process so that drifts hit every side
   alike. Prints each round's images/sec ratio (with sampler / without) and the medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CAPTURE = r"""
import json, sys, time
import torch, torchvision, psutil
device = sys.argv[1]
from cnnbench.machine import environment, sysinfo
t0 = time.perf_counter(); environment.cpu_model(); psutil.cpu_count(logical=False); psutil.virtual_memory()
if device == "cuda":
    torch.cuda.get_device_name(0)
t1 = time.perf_counter(); sysinfo.host_facts()
t2 = time.perf_counter()
if device == "cuda":
    sysinfo.gpu_facts([environment._cuda_uuid(i) for i in range(torch.cuda.device_count())])
t3 = time.perf_counter(); environment.capture_environment(device)
t4 = time.perf_counter(); environment.capture_environment(device)
t5 = time.perf_counter()
print(json.dumps({"before": t1 - t0, "host": t2 - t1, "gpu": t3 - t2, "first": t4 - t3, "warm": t5 - t4}))
"""


def capture_costs(device: str, n: int) -> None:
    rows = []
    for _ in range(n):
        out = subprocess.run([sys.executable, "-c", CAPTURE, device], capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"environment capture on {device}, {n} fresh processes (ms, median [min-max]):")
    for key, what in (("before", "CPU model, cores, memory (as before)"), ("host", "host facts added (cold)"),
                      ("gpu", "GPU facts added (NVML, cold)"), ("first", "whole capture, right after"),
                      ("warm", "whole capture, again")):
        xs = [r[key] * 1000 for r in rows]
        print(f"  {what:<38} {statistics.median(xs):8.2f}  [{min(xs):.2f}-{max(xs):.2f}]")


def sample_cost(device: str, n: int) -> None:
    import torch

    from cnnbench.engine.hooks import nvml_indices
    from cnnbench.engine.telemetry import DEFAULT_INTERVAL_S, TelemetrySampler
    from cnnbench.machine.host import usable_cpus

    gpus = nvml_indices(torch.device(device))
    sampler = TelemetrySampler(gpus, host_cpus=usable_cpus())
    sampler._open()
    sampler.sample()
    t0, w0 = time.thread_time(), time.perf_counter()
    for _ in range(n):
        sampler.sample()
    cpu, wall = (time.thread_time() - t0) / n, (time.perf_counter() - w0) / n
    print(f"one sample ({len(gpus)} GPU(s), host: {len(usable_cpus())} cores): {cpu * 1000:.3f} ms CPU, "
          f"{wall * 1000:.3f} ms wall; every {DEFAULT_INTERVAL_S} s that is {cpu / DEFAULT_INTERVAL_S:.3%} of one core")
    if sampler._nv is not None:
        sampler._nv.close()


def sampler_ratio(args: argparse.Namespace) -> None:
    import torch

    from cnnbench.engine.hooks import nvml_indices
    from cnnbench.engine.telemetry import TelemetrySampler
    from cnnbench.machine.host import usable_cpus
    from cnnbench.models import create_model

    device = torch.device(args.device)
    torch.manual_seed(0)
    with torch.device(device):
        model = create_model(args.model, image_size=args.image_size)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.005)
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size, device=device)
    labels = torch.randint(0, 1000, (args.batch_size,), device=device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(images), labels).backward()
        opt.step()

    def timed(interval: float | None) -> float:
        sampler = None
        if interval is not None:
            gpus = nvml_indices(device)
            sampler = TelemetrySampler(gpus, host_cpus=usable_cpus(), interval_s=interval)
            sampler.start()
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - t0
        if sampler is not None:
            sampler.stop()
        return args.steps * args.batch_size / elapsed

    for _ in range(args.warmup):
        step()
    sides = {"off": None, "0.5 s": 0.5, "0.05 s": 0.05}
    ratios: dict[str, list[float]] = {"0.5 s": [], "0.05 s": []}
    print(f"sampler beside the loop: {args.model} {args.image_size}px batch {args.batch_size} on {args.device}, "
          f"{args.steps} steps per side")
    for r in range(args.rounds):
        ips = {name: timed(interval) for name, interval in sides.items()}
        for name in ratios:
            ratios[name].append(ips[name] / ips["off"])
        print(f"  round {r + 1}: off {ips['off']:.1f} img/s; with / without: 0.5 s {ratios['0.5 s'][-1]:.3f}, "
              f"0.05 s {ratios['0.05 s'][-1]:.3f}")
    for name, xs in ratios.items():
        print(f"  median ratio, sampler every {name}: {statistics.median(xs):.3f} (span {min(xs):.3f}-{max(xs):.3f})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", default="resnet18")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--captures", type=int, default=5)
    p.add_argument("--samples", type=int, default=500)
    args = p.parse_args()
    capture_costs(args.device, args.captures)
    sample_cost(args.device, args.samples)
    if args.rounds:
        sampler_ratio(args)


if __name__ == "__main__":
    main()
