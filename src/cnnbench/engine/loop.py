"""The warm-up and the timed loop: run steps, time them, and nothing else.

The timed loop takes the next batch (timed as input wait: on CUDA the GPU's, from the
timer's events, see :mod:`cnnbench.engine.timer`), runs the step, and marks the step's end on
the step timer. Every ``display_every`` steps it calls ``on_progress``
(which synchronises to read the loss and prints a line); the time from the moment the
device (with several workers: every worker) has caught up to the end of the progress line
is kept out of every step time and out of the wall clock (``progress_time_s`` says how much
it was). Losses stay on the device until the loop ends.

With several workers every worker takes part in each progress line: the step times so far
are replaced by their per-step maxima over workers (``slowest``, the record's definition of
a step; rank 0 waiting there for a slower worker is counted, as that worker's steps are), and
after rank 0 has printed, a ``barrier`` lets no worker start its next step
before rank 0 does; the whole span, on every worker, is progress time, so the printing of
rank 0 cannot land in another worker's next step (waiting at that step's collective).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from cnnbench.data.source import Batch
from cnnbench.engine.prepare import Prepared
from cnnbench.engine.timer import make_step_timer, synchronize

Progress = Callable[[int, list[float], float], None]
"""``on_progress(step, step_times_so_far, loss)``: called every ``display_every`` steps."""

Slowest = Callable[[list[float]], list[float]]
"""``slowest(times)``: each step's time, maximum over workers (a collective every worker calls)."""


@dataclass(frozen=True)
class LoopResult:
    """What the timed loop measured."""

    step_times_s: list[float]
    losses: list[float]
    input_wait_s: float
    """Time spent waiting for the next batch, summed over the steps: the device's wait where
    the timer measures it (CUDA events, :meth:`~cnnbench.engine.timer.StepTimer.input_wait`),
    else the host's."""
    wall_time_s: float
    """The timed span by the wall clock, progress lines excluded."""
    progress_time_s: float
    """Time the progress lines took (kept out of ``wall_time_s`` and every step time)."""
    correct: list[float] | None = None
    """Right top-1 predictions per step, when the step counts them (training to accuracy)."""
    images: int = 0
    """Images this worker stepped through."""

    @property
    def input_wait_fraction(self) -> float | None:
        return self.input_wait_s / self.wall_time_s if self.wall_time_s > 0 else None


def warm_up(prepared: Prepared, num_steps: int, device: torch.device,
            batches: Iterator[Batch] | None = None) -> float | None:
    """Untimed steps; returns the duration of the first (compilation, with ``--compile``).

    ``batches`` defaults to the endless input source."""
    source: Iterator[Batch] = batches if batches is not None else prepared.source  # type: ignore[assignment]
    first_step_s = None
    for i in range(num_steps):
        t0 = time.perf_counter()
        prepared.step(*next(source))
        if i == 0:
            synchronize(device)
            first_step_s = time.perf_counter() - t0
    synchronize(device)
    return first_step_s


def timed_loop(
    prepared: Prepared,
    num_steps: int,
    device: torch.device,
    *,
    display_every: int = 0,
    on_progress: Progress | None = None,
    barrier: Callable[[], None] | None = None,
    batches: Iterator[Batch] | None = None,
    after_step: Callable[[], None] | None = None,
    slowest: Slowest | None = None,
) -> LoopResult:
    """Run ``num_steps`` timed steps (fewer if ``batches`` ends first).

    ``batches`` defaults to the endless input source (an epoch's batches for training to
    accuracy); ``barrier`` (many workers) marks a common start and end, and the end of each
    progress line; ``slowest`` (many workers) gives the progress line the per-step maxima over
    workers; ``after_step`` runs after each step (a learning-rate schedule).
    """
    step, timer, perf_counter = prepared.step, make_step_timer(device), time.perf_counter
    source: Iterator[Batch] = batches if batches is not None else prepared.source  # type: ignore[assignment]
    outputs: list[torch.Tensor] = []
    input_wait = progress_time = 0.0
    shown: list[float] = []  # the step times progress lines report (maxima over workers)
    images_seen = 0
    if barrier is not None:
        barrier()
    wall_start = perf_counter()
    timer.start()
    for i in range(1, num_steps + 1):
        t_in = perf_counter()
        try:
            images, labels = next(source)
        except StopIteration:
            break
        input_wait += perf_counter() - t_in
        timer.input_ready()
        outputs.append(step(images, labels))
        images_seen += int(labels.shape[0])
        if after_step is not None:
            after_step()
        timer.mark()
        if on_progress is not None and (i == 1 or i % display_every == 0):
            times = timer.step_times(upto=i)  # waits for step i on an asynchronous device
            loss = float(outputs[-1].reshape(-1)[0])
            new = times[len(shown):]
            # Waiting here for slower workers is their steps' time, not the line's: the mark
            # comes after it, once every worker has caught up.
            shown += slowest(new) if slowest is not None else new
            caught_up = perf_counter()
            on_progress(i, shown, loss)
            if barrier is not None:
                barrier()  # no worker starts its next step while rank 0 prints
            timer.restart()
            progress_time += perf_counter() - caught_up
    synchronize(device)
    if barrier is not None:
        barrier()
    wall = perf_counter() - wall_start - progress_time  # the time of the steps alone
    device_wait = timer.input_wait()
    return _loop_result(timer.step_times(), outputs, input_wait if device_wait is None else device_wait, wall,
                        progress_time, images_seen)


def _loop_result(step_times: list[float], outputs: list[torch.Tensor], input_wait: float, wall: float,
                 progress_time: float, images_seen: int) -> LoopResult:
    """The loop's figures, once its steps are done: each step's loss (and correct count) read back."""
    values = torch.stack(outputs).float().cpu() if outputs else torch.empty(0)
    losses = values.reshape(len(outputs), -1)[:, 0].tolist() if outputs else []
    correct = values[:, 1].tolist() if outputs and values.ndim == 2 else None
    return LoopResult(step_times, losses, input_wait, wall, progress_time, correct, images_seen)
