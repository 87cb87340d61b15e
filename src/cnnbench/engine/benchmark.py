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

One :class:`Measurement` carries the run through these phases: the :class:`ResolvedRun` every
phase reads, and what each phase leaves for the later ones (the strategy and the hooks, the
prepared model and input, the metrics so far).

On one device, a failure after the start (out of memory, an exception in the model) still
yields a record, with status ``oom`` or ``error``, the error's text, and what was measured
so far. In a worker of a multi-device run a failure propagates instead: the process that
started the workers (``cnnbench run``, or torchrun's rank 0) stops them all and records it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from cnnbench.config import RunConfig
from cnnbench.config.training_options import scaled_learning_rate
from cnnbench.data.source import Batch
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
from cnnbench.engine.loop import Progress, timed_loop, warm_up
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
    start_process_group(world, run.config.all_reduce or "gloo", run.device, run.config.timeout)
    record = _run(run, emit, extra, keep_failures=False)
    # Only after success: on a failure the process is about to end, and tearing the group
    # down could wait on a peer that is gone.
    stop_process_group()
    return record


@dataclass
class Measurement:
    """One run on its way through the phases: the resolved run (which every phase reads), what
    its start made, and what each phase leaves for the later ones (the outcome, ``status`` and
    ``error``, set only when the run fails)."""

    run: ResolvedRun
    emit: Emit
    started_at: str
    run_id: str
    environment: dict[str, Any]
    strategy: ParallelStrategy
    hooks: HookSet
    """The measurement hooks, the strategy's among them."""
    metrics: dict[str, Any] = field(default_factory=dict)
    """What was measured so far (kept when a run fails midway)."""
    status: str = "ok"
    error: str | None = None
    prepared: Prepared = field(init=False, repr=False)
    """Input, model, optimizer and step, once :func:`_measure` has prepared them."""
    first_step_s: float | None = None
    first_epoch: Iterator[Batch] | None = None
    """Epoch 1's batches, begun by the untimed first step of a training-to-accuracy run."""
    epochs: list[EpochMeasure] = field(default_factory=list)
    split: dict[str, Any] = field(default_factory=dict)
    """The forward/backward split, measured after the timed window."""

    @classmethod
    def start(cls, run: ResolvedRun, emit: Emit) -> Measurement:
        """The run's start: its time and id, the environment, the strategy and the hooks."""
        started_at, run_id = now_iso(), new_run_id()
        environment = capture_environment(run.device, run.config.machine_label)
        strategy = make_strategy(StrategyContext(run.config, run.world, run.device))
        hooks = HookSet([*default_hooks(run.device, run.world), *strategy.measurement_hooks()])
        return cls(run, emit, started_at, run_id, environment, strategy, hooks)


def _run(run: ResolvedRun, emit: Emit, extra: Mapping[str, Any] | None, *, keep_failures: bool) -> Record:
    m = Measurement.start(run, emit)
    try:
        _measure(m)
    except Exception as exc:  # on one device, every failure becomes a record
        if not keep_failures:
            raise
        m.status = "oom" if is_out_of_memory(exc) else "error"
        m.error = error_text(exc)
        log.debug("run failed", exc_info=True)  # the traceback on lines of its own
        m.hooks.stop()
        m.metrics.update(m.hooks.metrics())
    return _record(m, extra)


def _measure(m: Measurement) -> None:
    """Prepare, print the header, warm up, run the timed steps between the hooks' start and
    stop, measure the forward/backward split; rank 0 then turns every worker's measure into
    the run's metrics."""
    run = m.run
    device, world = run.device, run.world
    barrier_fn = (lambda: barrier(device)) if world.process_group else None
    slowest = (lambda times: max_over_workers(times, device)) if world.process_group else None
    m.prepared = prepare(run, strategy=m.strategy)
    m.metrics.update(m.prepared.notes())
    try:
        _print_header(m)
        progress = _progress(m)
        if run.trains_epochs:
            _first_step_untimed(m)
        else:
            _warm_up_and_profile(m)
        m.emit("Step\tImg/sec\ttotal_loss")
        m.hooks.start()
        try:
            if run.trains_epochs:
                def total(values: list[float]) -> list[float]:
                    return sum_over_workers(values, device) if world.process_group else values

                loop, m.epochs = train_epochs(m.prepared, run, emit=m.emit, on_progress=progress, barrier=barrier_fn,
                                              total=total, slowest=slowest, first_epoch=m.first_epoch)
            else:
                loop = timed_loop(m.prepared, run.timed_steps, device, display_every=run.config.display_every,
                                  on_progress=progress, barrier=barrier_fn, slowest=slowest)
        finally:
            m.hooks.stop()
        mine = WorkerMeasure.of(loop, m.hooks.metrics(), m.prepared.source.metrics(), threads=torch.get_num_threads())
        m.split = _phase_split(m)  # after the timed window: its figures are final
    finally:
        m.prepared.close()
    workers = gather_to_main(mine, world) if world.process_group else [mine]
    if workers is not None:  # else not rank 0: its measure went to rank 0
        _metrics(m, workers)


def _print_header(m: Measurement) -> None:
    """The run's header (tf_cnn_benchmarks' lines, with the input, the threads and the notes)."""
    run = m.run
    threads = None
    if run.device.type == "cpu":
        threads = log_format.threads_text(torch.get_num_threads(), cpu_count_available(), run.world.local_world_size,
                                          fixed=run.config.threads_per_worker is not None)
    for line in log_format.header_lines(run.config.recorded(), framework=f"torch {m.environment['torch_version']}",
                                        dataset=m.prepared.source.description, threads=threads,
                                        notes=m.prepared.notes()):
        m.emit(line)


def _progress(m: Measurement) -> Progress:
    """The timed loop's progress line (with an ETA on a terminal, for a run of so many steps)."""
    emit, timed_steps, images_per_step = m.emit, m.run.timed_steps, m.run.images_per_step
    with_eta = not m.run.trains_epochs and log_format.eta_shown()

    def progress(step: int, times: list[float], loss: float) -> None:
        eta = log_format.eta_s(step, timed_steps, times) if with_eta else None
        emit(log_format.step_line(step, throughput_stats(times, images_per_step), loss, eta))

    return progress


def _warm_up_and_profile(m: Measurement) -> None:
    """The untimed steps, then, with ``--profile-steps``, the profiled ones (rank 0 writes the
    trace); each an uneven phase with several workers. Keeps the first step's time."""
    run, prepared, emit = m.run, m.prepared, m.emit
    device, world, timeout = run.device, run.world, run.config.timeout
    emit("Running warm up")
    with uneven_phase(world, "warm-up (compilation)" if run.config.compile else "warm-up", timeout):
        m.first_step_s = warm_up(prepared, run.warmup_steps, device)
    emit("Done warm up")
    steps = run.config.profile_steps
    if steps:
        emit(f"Profiling {steps} steps")
        with uneven_phase(world, "profiling (rank 0 writes the trace)", timeout):
            if world.is_main:
                profiled = profile_steps(prepared, steps, device, run.config.results_dir, m.run_id)
                m.metrics.update(profiled.as_metrics())
            else:
                run_steps(prepared, steps, device)
        emit("Done profiling")


def _first_step_untimed(m: Measurement) -> None:
    """A training-to-accuracy run has no warm-up: one untimed step, in the same uneven phase,
    takes compilation out of epoch 1. Keeps epoch 1's batches and the step's time."""
    run = m.run
    with_compile = " (compilation)" if run.config.compile else ""
    m.first_epoch, m.first_step_s = untimed_first_step(
        m.prepared, run.device, lambda: uneven_phase(run.world, f"the first step{with_compile}", run.config.timeout))


def _phase_split(m: Measurement) -> dict[str, Any]:
    """The forward/backward split (:mod:`cnnbench.engine.phase_split`) where the run measures it;
    a failure there is a warning, never the run's failure."""
    run, prepared = m.run, m.prepared
    if prepared.phases is None or not splits_phases(training=not run.config.forward_only,
                                                    world_size=run.world.world_size, epochs=run.trains_epochs):
        return {}
    try:
        split = measure_phase_split(prepared.phases, prepared.source, run.device)
    except Exception as exc:  # out of memory in the unfused phases, ...
        m.emit(f"Forward/backward split not measured: {error_text(exc)}")
        return {"phase_split_error": error_text(exc)}
    m.emit(split_line(split))
    return split


def _metrics(m: Measurement, workers: list[WorkerMeasure]) -> None:
    """On rank 0: every worker's measure, the epochs and the split, as the run's metrics."""
    run = m.run
    m.metrics.update(measured_metrics(workers, run.batch_size, first_step_s=m.first_step_s,
                                      compiled=run.config.compile, check_spread=not run.trains_epochs))
    if run.trains_epochs:
        m.metrics.update(epoch_metrics(m.epochs))
    m.metrics.update(m.split)
    rate, scaling = run.config.learning_rate, run.config.lr_scaling
    if rate is not None and scaling not in (None, "none"):
        # training under --lr-scaling: the rate the optimizer started from (the record's config keeps the one given)
        m.metrics["learning_rate"] = scaled_learning_rate(rate, scaling, run.config.num_devices or 1)
    # The closing `total images/sec` block is printed by whoever reports the record
    # (log_format.closing_lines), after its warnings and path: tf_cnn_benchmarks' logs end so.


def _record(m: Measurement, extra: Mapping[str, Any] | None) -> Record:
    """The run's record: what was measured, with the oversubscription warning and the model's
    cost and FLOP figures added (on a failure too)."""
    run, metrics = m.run, m.metrics
    oversubscribed = oversubscribed_note(run)
    if oversubscribed:
        metrics.setdefault("warnings", []).append(oversubscribed)
    extra_fields = dict(extra or {})
    cost = model_cost(run)
    if cost is not None:
        extra_fields.setdefault("model_cost", cost)
        metrics.update(flop_metrics(cost, run, m.environment, metrics.get("total_images_per_sec"),
                                    metrics.get("gpu_devices")))
    return Record(config=run.config.recorded(), environment=m.environment, metrics=metrics, status=m.status,
                  error=m.error, run_id=m.run_id, started_at=m.started_at, extra=extra_fields)
