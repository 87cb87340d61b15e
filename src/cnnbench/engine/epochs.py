"""Training to accuracy: epochs of the training split, an evaluation on the validation split after each.

:func:`train_epochs` walks the input source's epochs (:class:`~cnnbench.data.source.EpochSource`:
each worker its own shard), timing every step like the benchmark loop, then evaluates the
model (evaluation mode, no gradients) on the validation split. Before epoch 1's timed steps,
one untimed step (:func:`untimed_first_step`) takes compilation and set-up out of them.
Losses, right predictions and image counts are summed over workers, so every figure is the
whole run's. The per-epoch results become the record's ``metrics.epochs``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from cnnbench.data.source import Batch, EpochSource
from cnnbench.engine.loop import LoopResult, Progress, Slowest, timed_loop, warm_up
from cnnbench.engine.prepare import Prepared
from cnnbench.engine.resolve import ResolvedRun
from cnnbench.engine.schedule import make_schedule
from cnnbench.engine.step import correct_predictions
from cnnbench.words import duration

Sum = Callable[[list[float]], list[float]]
"""Sums a list of numbers over every worker (the identity with one worker)."""

Phase = Callable[[], AbstractContextManager[object]]
"""A phase around the untimed first step: with several workers an uneven phase
(:func:`~cnnbench.distributed.phases.uneven_phase`), as warm-up is."""


@dataclass(frozen=True)
class EpochMeasure:
    """One epoch of the whole run (every worker's share together)."""

    epoch: int
    time_s: float
    """Training time of the epoch by the wall clock (progress lines excluded)."""
    eval_time_s: float
    images: int
    train_loss: float | None
    train_accuracy: float | None
    test_accuracy: float | None
    learning_rate: float | None
    test_images: int = 0
    """Validation images evaluated, over every worker (the whole split, once)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "time_s": self.time_s,
            "eval_time_s": self.eval_time_s,
            "images_per_sec": self.images / self.time_s if self.time_s > 0 else None,
            "train_loss": self.train_loss,
            "train_accuracy": self.train_accuracy,
            "test_accuracy": self.test_accuracy,
            "test_images": self.test_images,
            "learning_rate": self.learning_rate,
        }


def train_epochs(prepared: Prepared, run: ResolvedRun, *, emit: Callable[[str], None],
                 on_progress: Progress | None, barrier: Callable[[], None] | None,
                 total: Sum, slowest: Slowest | None = None,
                 first_epoch: Iterator[Batch] | None = None) -> tuple[LoopResult, list[EpochMeasure]]:
    """Train ``run.config.num_epochs`` epochs; returns this worker's steps (all epochs joined)
    and the run's per-epoch figures. ``first_epoch``: epoch 1's batches, when the caller has
    begun them (:func:`untimed_first_step`)."""
    source = epoch_source(prepared)
    cfg, device = run.config, run.device
    num_epochs = cfg.num_epochs or 0
    schedule = make_schedule(cfg, prepared.optimizer, source.steps_per_epoch)
    loops: list[LoopResult] = []
    epochs: list[EpochMeasure] = []
    for index in range(num_epochs):
        batches = first_epoch if index == 0 and first_epoch is not None else source.epoch(index)
        loop = timed_loop(prepared, source.steps_per_epoch, device, display_every=cfg.display_every,
                          on_progress=on_progress, barrier=barrier, batches=batches,
                          after_step=schedule.step if schedule is not None else None, slowest=slowest)
        loops.append(loop)
        eval_start = _now()
        right, seen = evaluate(prepared, source.eval_batches(), device)
        loss_sum, steps, correct, images, test_right, test_seen = total(
            [sum(loop.losses), len(loop.losses), sum(loop.correct or []), loop.images, right, seen])
        eval_time = _now() - eval_start
        rate = prepared.optimizer.param_groups[0]["lr"] if prepared.optimizer is not None else None
        epoch = EpochMeasure(
            epoch=index + 1, time_s=loop.wall_time_s, eval_time_s=eval_time, images=int(images),
            train_loss=loss_sum / steps if steps else None, train_accuracy=correct / images if images else None,
            test_accuracy=test_right / test_seen if test_seen else None, learning_rate=rate,
            test_images=int(test_seen),
        )
        epochs.append(epoch)
        emit(epoch_line(epoch, num_epochs))
    return join_loops(loops), epochs


def epoch_source(prepared: Prepared) -> EpochSource:
    source = prepared.source
    if not isinstance(source, EpochSource):
        raise TypeError(f"{source.description} has no epochs: training to accuracy needs a data set")
    return source


def untimed_first_step(prepared: Prepared, device: torch.device,
                       phase: Phase = nullcontext) -> tuple[Iterator[Batch], float | None]:
    """One untimed step on epoch 1's first batch, inside ``phase``, before the timed window
    (the measurement hooks start after it, as they do after warm-up).

    Compilation (``--compile``), cuDNN's autotuning and the allocator's first pass land in this
    step, not in epoch 1's time; with several workers ``phase`` is the uneven phase warm-up has,
    so a worker that compiles minutes longer than the others does not trip ``--timeout``.
    The step moves no weight and leaves no optimizer state (:func:`_weights_held`), so epoch 1
    trains as it would without it. Returns epoch 1's batches, that first one still first (the epoch
    trains on it, timed, like every batch of every epoch), and the step's time (None for an empty
    epoch).
    """
    batches = epoch_source(prepared).epoch(0)
    with phase():  # every worker enters it and leaves it, whatever its shard holds
        first = next(batches, None)
        if first is None:
            return batches, None
        with _weights_held(prepared.optimizer):
            first_step_s = warm_up(prepared, 1, device, batches=iter([first]))
    return itertools.chain([first], batches), first_step_s


@contextmanager
def _weights_held(optimizer: torch.optim.Optimizer | None) -> Iterator[None]:
    """The untimed step trains nothing: every group's learning rate is 0 for it (so no weight
    moves: not at the base rate before a warm-up schedule exists), and the optimizer's state it
    made (momentum, Adam's moments and step count) is dropped after it. Only batch norm's running
    statistics see the batch once more, as they do in a benchmark's warm-up."""
    if optimizer is None:
        yield
        return
    rates = [group["lr"] for group in optimizer.param_groups]
    for group in optimizer.param_groups:
        if isinstance(group["lr"], torch.Tensor):
            group["lr"] = group["lr"].clone().fill_(0.0)
        else:
            group["lr"] = 0.0
    try:
        yield
    finally:
        for group, rate in zip(optimizer.param_groups, rates, strict=True):
            group["lr"] = rate
        optimizer.state.clear()


@torch.no_grad()
def evaluate(prepared: Prepared, batches: Iterator[Batch], device: torch.device) -> tuple[int, int]:
    """Right top-1 predictions and images over this worker's share of the validation split."""
    model = getattr(prepared.model, "module", prepared.model)  # DDP's own module: no collective per batch
    was_training = model.training
    model.eval()
    right = torch.zeros((), device=device)
    seen = 0
    try:
        with prepared.policy.autocast(device.type):
            for images, labels in batches:
                right += correct_predictions(model(images), labels)
                seen += int(labels.shape[0])
    finally:
        model.train(was_training)
    return int(right.item()), seen


def join_loops(loops: list[LoopResult]) -> LoopResult:
    """One loop result for several epochs: steps joined, times added."""
    return LoopResult(
        step_times_s=[t for lp in loops for t in lp.step_times_s],
        losses=[x for lp in loops for x in lp.losses],
        input_wait_s=sum(lp.input_wait_s for lp in loops),
        wall_time_s=sum(lp.wall_time_s for lp in loops),
        progress_time_s=sum(lp.progress_time_s for lp in loops),
        correct=[x for lp in loops for x in (lp.correct or [])],
        images=sum(lp.images for lp in loops),
    )


def epoch_metrics(epochs: list[EpochMeasure]) -> dict[str, Any]:
    """The record's training-to-accuracy figures."""
    last = epochs[-1] if epochs else None
    return {
        "epochs": [e.as_dict() for e in epochs],
        "total_time_s": sum(e.time_s + e.eval_time_s for e in epochs),
        "mean_epoch_time_s": sum(e.time_s for e in epochs) / len(epochs) if epochs else None,
        "final_train_accuracy": last.train_accuracy if last else None,
        "final_test_accuracy": last.test_accuracy if last else None,
    }


def epoch_line(epoch: EpochMeasure, num_epochs: int) -> str:
    def fmt(value: float | None, digits: int = 3) -> str:
        return "—" if value is None else f"{value:.{digits}f}"

    rate = epoch.images / epoch.time_s if epoch.time_s > 0 else 0.0
    return (f"Epoch {epoch.epoch}/{num_epochs}: {duration(epoch.time_s)}, {rate:.1f} images/sec, "
            f"train loss {fmt(epoch.train_loss)}, train accuracy {fmt(epoch.train_accuracy)}, "
            f"test accuracy {fmt(epoch.test_accuracy)} (evaluation {duration(epoch.eval_time_s)})")


def _now() -> float:
    import time

    return time.perf_counter()
