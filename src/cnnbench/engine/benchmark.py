"""One benchmark run, phase by phase: resolve → prepare → warm up → timed loop → metrics → record.

    record = run_benchmark(RunConfig(model="resnet18", image_size=64, device="cpu"), emit=print)

* :func:`~cnnbench.engine.resolve.resolve` fills every default and checks the machine
  (a :class:`ConfigError` here means nothing ran);
* :func:`~cnnbench.engine.prepare.prepare` builds input, model (wrapped by the strategy),
  optimizer and step;
* :func:`~cnnbench.engine.loop.warm_up` runs the untimed steps, then the measurement hooks
  (:mod:`cnnbench.engine.hooks`) start, :func:`~cnnbench.engine.loop.timed_loop` runs the
  timed ones, and the hooks stop;
* :mod:`cnnbench.engine.metrics` turns the loop's result and the hooks' fields into metrics.

A failure after the start (out of memory, an exception in the model) still yields a
record, with status ``oom`` or ``error``, the error's text, and what was measured so far.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cnnbench.config import RunConfig
from cnnbench.distributed.world import World
from cnnbench.engine import log_format
from cnnbench.engine.hooks import MeasurementHook, default_hooks, merge_hook_metrics
from cnnbench.engine.loop import timed_loop, warm_up
from cnnbench.engine.memory import is_out_of_memory
from cnnbench.engine.metrics import flop_metrics, loop_metrics, model_cost
from cnnbench.engine.prepare import prepare
from cnnbench.engine.resolve import ResolvedRun, resolve
from cnnbench.engine.stats import throughput_stats
from cnnbench.machine.environment import capture_environment
from cnnbench.results.record import Record, error_text, now_iso

log = logging.getLogger(__name__)

Emit = Callable[[str], None]


def _silent(_: str) -> None:
    pass


def run_benchmark(config: RunConfig, *, emit: Emit | None = None, extra: Mapping[str, Any] | None = None,
                  world: World | None = None) -> Record:
    """Run one benchmark in this process and return its record (not yet stored).

    Raises :class:`~cnnbench.config.ConfigError` before any work for what this machine
    cannot do; failures after the start are returned as records with status oom/error.
    """
    emit = emit or _silent
    started_at = now_iso()
    run = resolve(config, world)
    cfg = run.config
    environment = capture_environment(cfg.device, cfg.machine_label)
    hooks = default_hooks(run.device)
    metrics: dict[str, Any] = {}  # what was measured so far (kept when a run fails midway)
    status, error = "ok", None
    try:
        _measure(run, hooks, emit, metrics, framework=environment["torch_version"])
    except Exception as exc:  # every failure becomes a record
        status = "oom" if is_out_of_memory(exc) else "error"
        error = error_text(exc)
        log.debug("run failed:\n%s", traceback.format_exc())
    finally:
        for hook in hooks:
            hook.stop()  # also when the run failed before the timed steps: what it saw so far
        merge_hook_metrics(metrics, hooks)
    extra_fields = dict(extra or {})
    cost = model_cost(run)
    if cost is not None:
        extra_fields.setdefault("model_cost", cost)
        metrics.update(flop_metrics(cost, run, environment, metrics.get("total_images_per_sec")))
    return Record(config=cfg.recorded(), environment=environment, metrics=metrics, status=status,
                  error=error, started_at=started_at, extra=extra_fields)


def _measure(run: ResolvedRun, hooks: Sequence[MeasurementHook], emit: Emit, metrics: dict[str, Any], *,
             framework: str) -> None:
    cfg, device = run.config, run.device
    prepared = prepare(run)
    try:
        for line in log_format.header_lines(cfg.recorded(), framework=f"torch {framework}",
                                            dataset=prepared.source.description):
            emit(line)
        emit("Running warm up")
        first_step_s = warm_up(prepared, cfg.num_warmup_batches, device)
        emit("Done warm up")
        emit("Step\tImg/sec\ttotal_loss")

        def progress(step: int, times: list[float], loss: float) -> None:
            emit(log_format.step_line(step, throughput_stats(times, run.images_per_step), loss))

        for hook in hooks:
            hook.start()
        loop = timed_loop(prepared, cfg.num_batches, device, display_every=cfg.display_every,
                          on_progress=progress)
    finally:
        metrics.update(prepared.source.metrics())
        prepared.close()
    metrics.update(loop_metrics(loop, run.images_per_step, first_step_s=first_step_s, compiled=cfg.compile))
    for line in log_format.total_lines(metrics["total_images_per_sec"]):
        emit(line)
