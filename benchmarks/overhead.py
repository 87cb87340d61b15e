"""Overhead of ``cnnbench run`` against a bare hand-written PyTorch training loop.

    .venv/bin/python benchmarks/overhead.py                    # resnet18, 64x64, batch 16, CPU
    .venv/bin/python benchmarks/overhead.py --device cuda --model resnet50 --image-size 224 \
        --batch-size 128 --precision amp_bf16 --data-format NHWC

Both run in this process on the same model, batch, image size, optimizer (SGD, lr 0.005,
weight decay 4e-5) and one device-resident synthetic batch, alternating cnnbench and the
bare loop ``--rounds`` times so that drifts in machine speed hit both alike. Each side
reports images/sec over the wall clock of its timed steps (warm-up excluded). Prints
each round and the median ratio cnnbench / bare (1.00 = no overhead).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from cnnbench.config import RunConfig
from cnnbench.engine import run_in_process
from cnnbench.engine.precision import precision_policy
from cnnbench.models import create_model


def bare_loop(args: argparse.Namespace) -> float:
    """The loop a user would write by hand: no timers, no logging, no records."""
    device = torch.device(args.device)
    policy = precision_policy(args.precision)
    policy.apply_backend_flags()
    torch.manual_seed(1234)
    with torch.device(device):
        model = create_model(args.model, image_size=args.image_size)
    model = model.to(dtype=policy.param_dtype)
    fmt = torch.channels_last if args.data_format == "NHWC" else torch.contiguous_format
    model = model.to(memory_format=fmt).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.005, weight_decay=4e-5)
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size, device=device)
    images = images.to(dtype=policy.param_dtype, memory_format=fmt)
    labels = torch.randint(0, 1000, (args.batch_size,), device=device)
    scaler = policy.scaler(device.type, forward_only=False)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with policy.autocast(device.type):
            loss = torch.nn.functional.cross_entropy(model(images).float(), labels)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    for _ in range(args.warmup):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return args.batch_size * args.steps / (time.perf_counter() - t0)


def cnnbench_loop(args: argparse.Namespace) -> float:
    config = RunConfig(
        model=args.model, image_size=args.image_size, batch_size=args.batch_size, device=args.device,
        num_batches=args.steps, num_warmup_batches=args.warmup, precision=args.precision,
        data_format=args.data_format, optimizer="sgd", synthetic_location="device",
    )
    record = run_in_process(config)
    if record.status != "ok":
        raise SystemExit(f"cnnbench run failed: {record.error}")
    return float(record.metrics["total_images_per_sec"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--data-format", default="NCHW")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()

    ratios = []
    print(f"{args.model} {args.image_size}px batch {args.batch_size} {args.precision} {args.data_format} "
          f"on {args.device}, {args.steps} timed steps, torch {torch.__version__}, {torch.get_num_threads()} threads")
    for r in range(args.rounds):
        ours = cnnbench_loop(args)
        bare = bare_loop(args)
        ratios.append(ours / bare)
        print(f"round {r + 1}: cnnbench {ours:9.1f} img/s   bare {bare:9.1f} img/s   ratio {ours / bare:.3f}")
    print(f"median ratio cnnbench / bare: {statistics.median(ratios):.3f} over {args.rounds} rounds")


if __name__ == "__main__":
    main()
