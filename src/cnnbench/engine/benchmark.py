"""The timed loop: build, warm up, time ``num_batches`` steps, and make the record.

    record = run_benchmark(RunConfig(model="resnet18", image_size=64, device="cpu"), emit=print)

Warm-up steps are excluded from every figure. Step times come from a :mod:`timer`
(CUDA events on GPUs, so no step waits for the device); the only synchronisations in
the timed span are the progress lines every ``display_every`` steps, which read one loss.
``total_images_per_sec`` is images over wall-clock time from the end of warm-up to the
end of the last step. A failure after start (out of memory, an exception in the model)
still yields a record, with status ``oom`` or ``error`` and the error's text.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from cnnbench.config import RunConfig
from cnnbench.data.synthetic import BatchShape, SyntheticInput
from cnnbench.engine import log_format
from cnnbench.engine.memory import is_out_of_memory, peak_device_memory, peak_host_memory, reset_device_peak
from cnnbench.engine.precision import PrecisionPolicy, precision_policy
from cnnbench.engine.resolve import ResolvedRun, resolve
from cnnbench.engine.stats import throughput_stats
from cnnbench.engine.timer import make_step_timer, synchronize
from cnnbench.models.registry import DEFAULT_NUM_CLASSES
from cnnbench.results.environment import capture_environment
from cnnbench.results.record import Record, now_iso

log = logging.getLogger(__name__)

Emit = Callable[[str], None]
AUX_LOSS_WEIGHT = 0.3  # weight of auxiliary classifier losses (GoogLeNet, Inception v3)


def _silent(_: str) -> None:
    pass


def make_optimizer(config: RunConfig, params: Any) -> torch.optim.Optimizer:
    lr, wd = config.learning_rate, config.weight_decay
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=wd)
    if config.optimizer == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=config.momentum, weight_decay=wd)
    if config.optimizer == "rmsprop":  # tf_cnn_benchmarks defaults: decay 0.9, epsilon 1.0
        return torch.optim.RMSprop(params, lr=lr, alpha=0.9, eps=1.0, momentum=config.momentum, weight_decay=wd)
    if config.optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=wd)
    raise ValueError(f"unknown optimizer {config.optimizer!r}")


def classification_loss(output: Any, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on the logits; auxiliary heads (a tuple of outputs) add with a small weight."""
    if isinstance(output, tuple):
        main, *aux = output
        loss = nn.functional.cross_entropy(main.float(), labels)
        for a in aux:
            if a is not None:
                loss = loss + AUX_LOSS_WEIGHT * nn.functional.cross_entropy(a.float(), labels)
        return loss
    return nn.functional.cross_entropy(output.float(), labels)


def make_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None,
    policy: PrecisionPolicy,
    device_type: str,
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """One step: forward (+ backward and update when training). Returns the detached loss."""
    if optimizer is None:

        def infer(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            with torch.inference_mode(), policy.autocast(device_type):
                return classification_loss(model(images), labels)

        return infer

    scaler = policy.scaler(device_type, forward_only=False)

    def train(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with policy.autocast(device_type):
            loss = classification_loss(model(images), labels)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss.detach()

    return train


def run_benchmark(config: RunConfig, *, emit: Emit | None = None, extra: Mapping[str, Any] | None = None) -> Record:
    """Run one benchmark in this process and return its record (not yet stored).

    Raises :class:`~cnnbench.config.ConfigError` before any work for what this machine
    cannot do; failures after the start are returned as records with status oom/error.
    """
    emit = emit or _silent
    started_at = now_iso()
    run = resolve(config)
    cfg = run.config
    environment = capture_environment(cfg.device, cfg.machine_label)
    metrics: dict[str, Any] = {}  # what the loop measured so far (kept when a run fails midway)
    status, error = "ok", None
    try:
        _run_loop(run, emit, metrics, framework=environment["torch_version"])
    except Exception as exc:
        status = "oom" if is_out_of_memory(exc) else "error"
        error = f"{type(exc).__name__}: {exc}".strip()
        log.debug("run failed:\n%s", traceback.format_exc())
    finally:
        metrics.update(peak_device_memory(run.device))
        metrics["peak_host_memory_bytes"] = peak_host_memory()
    extra_fields = dict(extra or {})
    cost = _model_cost(run)
    if cost is not None:
        extra_fields.setdefault("model_cost", cost)
        metrics.update(_flop_metrics(cost, cfg, environment, metrics))
    return Record(
        config=cfg.recorded(),
        environment=environment,
        metrics=metrics,
        status=status,
        error=error,
        started_at=started_at,
        extra=extra_fields,
    )


def _model_cost(run: ResolvedRun) -> dict[str, Any] | None:
    """The model's cost at the run's image size (shape-only trace; None if it cannot be traced)."""
    from cnnbench.models.cost import model_cost

    try:
        return model_cost(run.spec.name, run.config.image_size).to_dict()
    except Exception as exc:
        log.warning("no model cost for %s at %s px: %s", run.spec.name, run.config.image_size, exc)
        return None


def _flop_metrics(cost: Mapping[str, Any], cfg: RunConfig, environment: Mapping[str, Any],
                  metrics: Mapping[str, Any]) -> dict[str, Any]:
    """FLOPs per image, achieved TFLOP/s and, on a GPU with a known peak, MFU."""
    from cnnbench.models.peaks import achieved_flops_per_s, mfu

    per_image = cost["forward_flops"] if cfg.forward_only else cost["train_flops"]
    achieved = achieved_flops_per_s(per_image, metrics.get("total_images_per_sec"))
    gpu = environment.get("gpu_model") if cfg.device == "cuda" else None
    return {
        "train_flops_per_image": cost["train_flops"],
        "forward_flops_per_image": cost["forward_flops"],
        "achieved_tflops": achieved / 1e12 if achieved is not None else None,
        # fp32 runs turn TF32 off explicitly (PrecisionPolicy), so the fp32 peak is the right one.
        "mfu": mfu(achieved, gpu, cfg.precision, num_devices=cfg.num_devices) if achieved is not None else None,
    }


def _run_loop(run: ResolvedRun, emit: Emit, metrics: dict[str, Any], *, framework: str) -> None:
    cfg, device = run.config, run.device
    policy = precision_policy(cfg.precision)
    policy.apply_backend_flags()
    torch.manual_seed(cfg.seed)
    reset_device_peak(device)

    with torch.device(device):
        model = run.spec.build(num_classes=DEFAULT_NUM_CLASSES, image_size=cfg.image_size)
    model = model.to(dtype=policy.param_dtype)
    if cfg.data_format == "NHWC":
        model = model.to(memory_format=torch.channels_last)
    model.train(not cfg.forward_only)
    optimizer = None if cfg.forward_only else make_optimizer(cfg, model.parameters())
    runnable = torch.compile(model) if cfg.compile else model
    step = make_step(runnable, optimizer, policy, device.type)

    batches = SyntheticInput(
        cfg.synthetic_location,
        BatchShape(cfg.batch_size, cfg.image_size, DEFAULT_NUM_CLASSES),
        device,
        dtype=policy.param_dtype,
        channels_last=cfg.data_format == "NHWC",
        seed=cfg.seed,
        loader_workers=cfg.loader_workers,
    )
    images_per_step = cfg.batch_size * cfg.num_devices
    dataset = f"{cfg.data_name} ({cfg.synthetic_location})"
    for line in log_format.header_lines(cfg.recorded(), framework=f"torch {framework}", dataset=dataset):
        emit(line)
    try:
        # Warm-up: untimed. The first step (compilation with --compile) is timed on its own.
        first_step_s = None
        for i in range(cfg.num_warmup_batches):
            t0 = time.perf_counter()
            step(*next(batches))
            if i == 0:
                synchronize(device)
                first_step_s = time.perf_counter() - t0
        synchronize(device)
        emit("Done warm up")
        emit("Step\tImg/sec\ttotal_loss")

        timer = make_step_timer(device)
        losses: list[torch.Tensor] = []
        input_wait = 0.0
        display = cfg.display_every
        perf_counter = time.perf_counter
        wall_start = perf_counter()
        timer.mark()
        for i in range(1, cfg.num_batches + 1):
            t_in = perf_counter()
            images, labels = next(batches)
            input_wait += perf_counter() - t_in
            losses.append(step(images, labels))
            timer.mark()
            if i == 1 or i % display == 0:
                stats = throughput_stats(timer.step_times(upto=i), images_per_step)
                emit(log_format.step_line(i, stats, float(losses[-1])))
        synchronize(device)
        wall = perf_counter() - wall_start
    finally:
        batches.close()

    step_times = timer.step_times()
    stats = throughput_stats(step_times, images_per_step)
    total = images_per_step * cfg.num_batches / wall
    for line in log_format.total_lines(total):
        emit(line)
    metrics.update(
        {
            "total_images_per_sec": total,
            **stats.as_metrics(),
            "step_times_s": step_times,
            "wall_time_s": wall,
            "first_step_time_s": first_step_s,
            "compile_time_s": first_step_s if cfg.compile else None,
            "input_wait_fraction": input_wait / wall if wall > 0 else None,
            "loss_first": float(losses[0]),
            "loss_last": float(losses[-1]),
        }
    )
