"""``cnnbench data``: the input pipeline of a data set, measured alone (no model).

The same source a training run reads (:mod:`cnnbench.data.loader`: this worker's shard,
decoding and augmentation in ``--num-workers`` loader processes, the uint8 batch copied to
``--device`` and normalised there) is drained for ``--num-warmup-batches`` untimed batches,
then ``--num-batches`` timed ones. Each batch's time is the wait for it (on a GPU, until
its normalisation has finished); ``total_images_per_sec`` is the images over the wall
clock of the timed batches. The record adds what the comparison of host CPUs needs: the
rate per loading process (``images_per_sec_per_worker``: per loader process, or, with
``--num-workers 0``, of the main process, which then loads; ``loading_processes`` says how
many) and per core this run could use (``images_per_sec_per_core``, with ``available_cpus``
in the environment).

The measurement hooks of ``cnnbench run`` (:func:`cnnbench.engine.hooks.default_hooks`: peak
memory, the telemetry sampler, the busy-machine guard) watch the timed batches the same way,
and the batch times get the same spread check, so a data record carries the same
``metrics.warnings`` and host telemetry as a run record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import torch

from cnnbench.config import ConfigError
from cnnbench.config.data_bench import DEFAULT_DATA_IMAGE_SIZE, DataBenchConfig
from cnnbench.data.loader import PREFETCH_BATCHES
from cnnbench.data.source import InputRequest, make_input
from cnnbench.engine.hooks import HookSet, default_hooks
from cnnbench.engine.log_format import RULE
from cnnbench.engine.metrics import input_warnings
from cnnbench.engine.resolve import CIFAR_IMAGE_SIZE, resolve_data_set
from cnnbench.engine.stability import block_means, spread_warnings
from cnnbench.engine.stats import throughput_stats
from cnnbench.engine.timer import synchronize
from cnnbench.machine.affinity import cpu_count_available
from cnnbench.machine.devices import cuda_available, resolve_device_kind
from cnnbench.machine.environment import capture_environment
from cnnbench.results.error_text import error_text
from cnnbench.results.record import Record
from cnnbench.results.stamps import now_iso
from cnnbench.words import one_line, plural

log = logging.getLogger(__name__)

Emit = Callable[[str], None]


def resolve_data_bench(config: DataBenchConfig) -> DataBenchConfig:
    """Every choice made (device, data set name and folder, image size, loader processes); raises
    :class:`ConfigError` before any work."""
    device = resolve_device_kind(config.device)
    if device == "cuda" and not cuda_available():
        raise ConfigError("device", "cuda requested but no CUDA device is available here (use --device cpu)")
    facts, workers = resolve_data_set(config, batch_size=config.batch_size, world_size=1, local_world_size=1,
                                      model_on_cpu=False)
    image_size = config.image_size or (CIFAR_IMAGE_SIZE if facts.name.startswith("cifar") else DEFAULT_DATA_IMAGE_SIZE)
    return config.replace(device=device, data_name=facts.name, data_dir=facts.root, num_workers=workers,
                          image_size=image_size, **config.input_defaults())


def run_data_benchmark(config: DataBenchConfig, *, emit: Emit | None = None) -> Record:
    """Measure the input pipeline of ``config`` (resolved or not) and return its record.

    Raises :class:`ConfigError` for what is wrong before any work; a failure while reading
    (a bad image without --skip-bad-images) becomes a record with status ``error``.
    """
    emit = emit or (lambda _: None)
    cfg = resolve_data_bench(config)
    started_at = now_iso()
    environment = capture_environment(cfg.device, cfg.machine_label)
    hooks = HookSet(default_hooks(torch.device(cfg.device)))  # the guard takes its first look now
    metrics: dict[str, Any] = {}
    status, error = "ok", None
    try:
        _measure(cfg, emit, metrics, hooks)
    except Exception as exc:
        status, error = "error", error_text(exc)
        log.debug("data run failed", exc_info=True)  # the traceback on lines of its own
        hooks.stop()
        metrics.update(hooks.metrics())
    return Record(config=cfg.recorded(), environment=environment, metrics=metrics, status=status, error=error,
                  started_at=started_at)


def _measure(cfg: DataBenchConfig, emit: Emit, metrics: dict[str, Any], hooks: HookSet) -> None:
    assert cfg.image_size is not None and cfg.num_workers is not None
    device = torch.device(cfg.device)
    cores = cpu_count_available()
    source = make_input(InputRequest(config=cfg, batch_size=cfg.batch_size, image_size=cfg.image_size,
                                     device=device, dtype=torch.float32, channels_last=False, seed=cfg.seed))
    try:
        for line in header_lines(cfg, source.description, cores):
            emit(line)
        for _ in range(cfg.num_warmup_batches):
            next(source)
        synchronize(device)
        emit("Done warm up")
        emit("Step\tImg/sec")
        times: list[float] = []
        images = 0
        # k loader processes deliver batches in bursts of k, and hand over the first ones timed made
        # already (PREFETCH_BATCHES each, while the warm-up's were taken): a line's figures are those
        # of blocks of k steps after those (_steady), and a line comes once a block of them is whole;
        # step 1 only where the main process loads (no batch made ahead)
        block = loading_processes(cfg.num_workers)
        ahead = PREFETCH_BATCHES * cfg.num_workers
        hooks.start()
        try:
            wall_start = last = time.perf_counter()
            progress = 0.0
            for step in range(1, cfg.num_batches + 1):
                _, labels = next(source)
                synchronize(device)
                now = time.perf_counter()
                times.append(now - last)
                images += int(labels.shape[0])
                if (step == 1 and cfg.num_workers == 0 or step % cfg.display_every == 0) and step >= ahead + block:
                    stats = throughput_stats(_steady(times, ahead, block), cfg.batch_size)
                    emit(f"{step}\timages/sec: {stats.mean:.1f} +/- {stats.stderr:.1f} (jitter = {stats.jitter:.1f})")
                    progress += time.perf_counter() - now
                last = time.perf_counter()
            wall = last - wall_start - progress
        finally:
            hooks.stop()
    finally:
        source_metrics = dict(source.metrics())
        source.close()
    total = images / wall
    loading = block
    metrics.update({
        "total_images_per_sec": total,
        **throughput_stats(_steady(times, ahead, block), cfg.batch_size).as_metrics(),
        "images_per_sec_per_worker": total / loading,
        "images_per_sec_per_core": total / cores,
        "loader_workers": cfg.num_workers,
        "loading_processes": loading,
        "images": images,
        "step_times_s": times,
        "wall_time_s": wall,
        "progress_time_s": progress,
        **source_metrics,
        **hooks.metrics(),
    })
    # k loader processes deliver batches in bursts of k: the spread is that of blocks of k, past those
    # made ahead; the images --skip-bad-images left out are said as a run's record says them
    metrics["warnings"] = (list(metrics.get("warnings") or [])
                           + spread_warnings(_past(times, ahead, block), block=loading)
                           + input_warnings(metrics, [source_metrics]))
    emit(RULE)
    emit(f"total images/sec: {total:.2f}")
    emit(f"per loading process: {total / loading:.2f} ({loaders_text(cfg.num_workers)}); "
         f"per core: {total / cores:.2f} ({plural(cores, 'core')})")
    emit(RULE)


def _past(times: list[float], ahead: int, block: int) -> list[float]:
    """The step times past the first ``ahead`` (batches made ahead, taken at no cost), where enough
    are left for a block of ``block``; else all of them."""
    return times[ahead:] if len(times) >= ahead + block else times


def _steady(times: list[float], ahead: int, block: int) -> list[float]:
    """The step times the pipeline's rate and spread are told from: the means of blocks of ``block``
    steps (the bursts of ``block`` loader processes), past those made ahead (:func:`_past`)."""
    return block_means(_past(times, ahead, block), block)


def loading_processes(num_workers: int) -> int:
    """Processes that decode and augment: the loader processes, or the main process alone."""
    return num_workers if num_workers > 0 else 1


def loaders_text(num_workers: int) -> str:
    """Who loads, in words: ``2 loader processes``, or the main process with ``--num-workers 0``."""
    if num_workers == 0:
        return "the main process: --num-workers 0"
    return plural(num_workers, "loader process", "loader processes")


def header_lines(cfg: DataBenchConfig, dataset: str, cores: int) -> list[str]:
    rows = [
        ("Mode:", "input pipeline alone (no model)"),
        ("Dataset:", dataset),
        ("Image size:", f"{cfg.image_size}x{cfg.image_size}"),
        ("Batch size:", str(cfg.batch_size)),
        ("Preprocess:", "distortions (random resized crop, flip, colour jitter)" if cfg.distortions
         else "resize and centre crop"),
        ("Resize:", str(cfg.resize_method)),
        ("Num batches:", str(cfg.num_batches)),
        ("Num warmup:", str(cfg.num_warmup_batches)),
        ("Loading:", loaders_text(cfg.num_workers or 0)),
        ("Cores:", f"{cores}" + (f" (--host-cpus {cfg.host_cpus})" if cfg.host_cpus else "")),
        ("Device:", cfg.device),
    ]
    return [f"{k:<12} {one_line(v)}" for k, v in rows] + ["=========="]  # a data folder's name as it shows
