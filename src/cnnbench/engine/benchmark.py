"""One benchmark run, phase by phase: resolve → prepare → warm up → timed loop → metrics → record.

    record = resolve_and_measure(RunConfig(model="resnet18", image_size=64, device="cpu"), emit=print)

* :func:`~cnnbench.engine.resolve.resolve` fills every default and checks the machine
  (a :class:`ConfigError` here means nothing ran);
* the run's strategy (:mod:`cnnbench.distributed`) is made, and with several workers the
  process group is joined;
* :func:`~cnnbench.engine.prepare.prepare` builds input, model (wrapped by the strategy),
  optimizer and step;
* :func:`~cnnbench.engine.loop.warm_up` runs the untimed steps (with ``--profile-steps``,
  :mod:`cnnbench.engine.profile` profiles a few more; with several workers, each of these
  phases is an :func:`~cnnbench.distributed.phases.uneven_phase`), then the measurement hooks
  (:mod:`cnnbench.engine.hooks`, the strategy among them) start,
  :func:`~cnnbench.engine.loop.timed_loop` runs the timed ones between two barriers, and
  the hooks stop;
* every worker's measure is gathered on rank 0, and :mod:`cnnbench.engine.metrics` turns
  them into the record's metrics.

On one device, a failure after the start (out of memory, an exception in the model) still
yields a record, with status ``oom`` or ``error``, the error's text, and what was measured
so far. In a worker of a multi-device run a failure propagates instead: the process that
started the workers (``cnnbench run``, or torchrun's rank 0) stops them all and records it.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import torch

from cnnbench.config import RunConfig
from cnnbench.config.training_options import scaled_learning_rate
from cnnbench.distributed.phases import uneven_phase
from cnnbench.distributed.process_group import (
    barrier,
    gather_to_main,
    max_over_workers,
    start_process_group,
    stop_process_group,
    sum_over_workers,
)
from cnnbench.distributed.strategy import ParallelStrategy, StrategyContext, make_strategy
from cnnbench.distributed.world import World
from cnnbench.engine import log_format
from cnnbench.engine.backend import make_current
from cnnbench.engine.epochs import EpochMeasure, epoch_metrics, train_epochs, untimed_first_step
from cnnbench.engine.hooks import HookSet, default_hooks
from cnnbench.engine.loop import timed_loop, warm_up
from cnnbench.engine.metrics import WorkerMeasure, flop_metrics, measured_metrics, model_cost
from cnnbench.engine.phase_split import measure_phase_split, split_line, splits_phases
from cnnbench.engine.prepare import Prepared, prepare
from cnnbench.engine.profile import profile_steps, run_steps
from cnnbench.engine.resolve import ResolvedRun, oversubscribed_note, resolve
from cnnbench.engine.stats import throughput_stats
from cnnbench.machine.affinity import cpu_count_available
from cnnbench.machine.environment import capture_environment
from cnnbench.oom import is_out_of_memory
from cnnbench.results.error_text import error_text
from cnnbench.results.record import Record
from cnnbench.results.stamps import new_run_id, now_iso

log = logging.getLogger(__name__)

Emit = Callable[[str], None]


def _silent(_: str) -> None:
    pass


def resolve_and_measure(config: RunConfig, *, emit: Emit | None = None, extra: Mapping[str, Any] | None = None,
                        world: World | None = None) -> Record:
    """Resolve ``config`` and measure it in this process (one worker of it, with ``world``);
    return its record.

    Raises :class:`~cnnbench.config.ConfigError` before any work for what this machine
    cannot do. With one device, failures after the start are returned as records with
    status oom/error; a worker of a process group lets them propagate. Only rank 0's
    record holds the run's figures.
    """
    world = world or World.single()
    run = resolve(config, world)
    make_current(run.device)  # before anything touches CUDA: nothing lands on GPU 0 by default
    emit = (emit or _silent) if world.is_main else _silent
    if not world.process_group:
        return _run(run, emit, extra, keep_failures=True)
    cfg = run.config
    start_process_group(world, cfg.all_reduce or "gloo", run.device, cfg.timeout)
    record = _run(run, emit, extra, keep_failures=False)
    # Only after success: on a failure the process is about to end, and tearing the group
    # down could wait on a peer that is gone.
    stop_process_group()
    return record


def _run(run: ResolvedRun, emit: Emit, extra: Mapping[str, Any] | None, *, keep_failures: bool) -> Record:
    cfg = run.config
    started_at = now_iso()
    run_id = new_run_id()
    environment = capture_environment(run.device, cfg.machine_label)
    strategy = make_strategy(StrategyContext(cfg, run.world, run.device))
    hooks = HookSet([*default_hooks(run.device, run.world), *strategy.measurement_hooks()])
    metrics: dict[str, Any] = {}  # what was measured so far (kept when a run fails midway)
    status, error = "ok", None
    try:
        _measure(run, strategy, hooks, emit, metrics, framework=environment["torch_version"], run_id=run_id)
    except Exception as exc:  # on one device, every failure becomes a record
        if not keep_failures:
            raise
        status = "oom" if is_out_of_memory(exc) else "error"
        error = error_text(exc)
        log.debug("run failed:\n%s", traceback.format_exc())
        hooks.stop()
        metrics.update(hooks.metrics())
    oversubscribed = oversubscribed_note(run)
    if oversubscribed:
        metrics.setdefault("warnings", []).append(oversubscribed)
    extra_fields = dict(extra or {})
    cost = model_cost(run)
    if cost is not None:
        extra_fields.setdefault("model_cost", cost)
        metrics.update(flop_metrics(cost, run, environment, metrics.get("total_images_per_sec"),
                                    metrics.get("gpu_devices")))
    return Record(config=cfg.recorded(), environment=environment, metrics=metrics, status=status,
                  error=error, run_id=run_id, started_at=started_at, extra=extra_fields)


def _measure(run: ResolvedRun, strategy: ParallelStrategy, hooks: HookSet, emit: Emit,
             metrics: dict[str, Any], *, framework: str, run_id: str) -> None:
    cfg, device, world = run.config, run.device, run.world
    barrier_fn = (lambda: barrier(device)) if world.process_group else None
    slowest = (lambda times: max_over_workers(times, device)) if world.process_group else None
    epochs: list[EpochMeasure] = []
    prepared = prepare(run, strategy=strategy)
    metrics.update(prepared.notes())
    try:
        threads = None
        if device.type == "cpu":
            threads = log_format.threads_text(torch.get_num_threads(), cpu_count_available(), world.local_world_size,
                                              fixed=cfg.threads_per_worker is not None)
        for line in log_format.header_lines(cfg.recorded(), framework=f"torch {framework}",
                                            dataset=prepared.source.description, threads=threads,
                                            notes=prepared.notes()):
            emit(line)

        with_eta = cfg.num_epochs is None and log_format.eta_shown()

        def progress(step: int, times: list[float], loss: float) -> None:
            eta = log_format.eta_s(step, run.timed_steps, times) if with_eta else None
            emit(log_format.step_line(step, throughput_stats(times, run.images_per_step), loss, eta))

        first_step_s = None
        first_epoch = None
        if cfg.num_epochs is None:
            first_step_s = _warm_up_and_profile(run, prepared, emit, metrics, run_id)
        else:  # no warm-up: one untimed step, in the same uneven phase, takes compilation out of epoch 1
            with_compile = " (compilation)" if cfg.compile else ""
            first_epoch, first_step_s = untimed_first_step(
                prepared, device, lambda: uneven_phase(world, f"the first step{with_compile}", cfg.timeout))
        emit("Step\tImg/sec\ttotal_loss")
        hooks.start()
        try:
            if cfg.num_epochs is None:
                loop = timed_loop(prepared, run.timed_steps, device, display_every=cfg.display_every,
                                  on_progress=progress, barrier=barrier_fn, slowest=slowest)
            else:
                def total(values: list[float]) -> list[float]:
                    return sum_over_workers(values, device) if world.process_group else values

                loop, epochs = train_epochs(prepared, run, emit=emit, on_progress=progress, barrier=barrier_fn,
                                            total=total, slowest=slowest, first_epoch=first_epoch)
        finally:
            hooks.stop()
        mine = WorkerMeasure.of(loop, hooks.metrics(), prepared.source.metrics(), threads=torch.get_num_threads())
        split = _phase_split(run, prepared, emit)  # after the timed window: its figures are final
    finally:
        prepared.close()
    workers = gather_to_main(mine, world) if world.process_group else [mine]
    if workers is None:  # not rank 0: its measure went to rank 0
        return
    metrics.update(measured_metrics(workers, run.batch_size, first_step_s=first_step_s, compiled=cfg.compile,
                                    check_spread=cfg.num_epochs is None))
    if cfg.num_epochs is not None:
        metrics.update(epoch_metrics(epochs))
    metrics.update(split)
    if cfg.learning_rate is not None and cfg.lr_scaling not in (None, "none"):
        # training under --lr-scaling: the rate the optimizer started from (the record's config keeps the one given)
        metrics["learning_rate"] = scaled_learning_rate(cfg.learning_rate, cfg.lr_scaling, cfg.num_devices or 1)
    # The closing `total images/sec` block is printed by whoever reports the record
    # (log_format.closing_lines), after its warnings and path: tf_cnn_benchmarks' logs end so.


def _phase_split(run: ResolvedRun, prepared: Prepared, emit: Emit) -> dict[str, Any]:
    """The forward/backward split (:mod:`cnnbench.engine.phase_split`) where the run measures it;
    a failure there is a warning, never the run's failure."""
    cfg = run.config
    if prepared.phases is None or not splits_phases(training=not cfg.forward_only, world_size=run.world.world_size,
                                                    epochs=cfg.num_epochs is not None):
        return {}
    try:
        split = measure_phase_split(prepared.phases, prepared.source, run.device)
    except Exception as exc:  # out of memory in the unfused phases, ...
        emit(f"Forward/backward split not measured: {error_text(exc)}")
        return {"phase_split_error": error_text(exc)}
    emit(split_line(split))
    return split


def _warm_up_and_profile(run: ResolvedRun, prepared: Prepared, emit: Emit, metrics: dict[str, Any],
                         run_id: str) -> float | None:
    """The untimed steps, then, with ``--profile-steps``, the profiled ones (rank 0 writes the
    trace); each an uneven phase with several workers. Returns the first step's time."""
    cfg, device, world = run.config, run.device, run.world
    emit("Running warm up")
    with uneven_phase(world, "warm-up (compilation)" if cfg.compile else "warm-up", cfg.timeout):
        first_step_s = warm_up(prepared, run.warmup_steps, device)
    emit("Done warm up")
    if cfg.profile_steps:
        emit(f"Profiling {cfg.profile_steps} steps")
        with uneven_phase(world, "profiling (rank 0 writes the trace)", cfg.timeout):
            if world.is_main:
                profiled = profile_steps(prepared, cfg.profile_steps, device, cfg.results_dir, run_id)
                metrics.update(profiled.as_metrics())
            else:
                run_steps(prepared, cfg.profile_steps, device)
        emit("Done profiling")
    return first_step_s
