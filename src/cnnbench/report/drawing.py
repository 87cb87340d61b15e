"""Drawing a report's plots in worker processes while the tables are written.

matplotlib takes most of a report's time: importing it (about a second) and about 0.3 s
per figure. :func:`start_drawing` hands the figures to a pool of processes (one per
figure, up to the usable CPUs but one, which writes the tables meanwhile, and at most
:data:`MAX_WORKERS`) and returns at once; :meth:`Drawing.wait` collects the PNG paths.
With two usable CPUs or fewer (where workers each importing matplotlib cost more than they
save: measured in benchmarks/README.md), or when no process can be started, the figures
are drawn here, one after the other. The parent never imports matplotlib unless it draws
itself. The parent's objects are frozen out of the garbage collector before the workers are
forked, so that their collections do not copy the parent's memory page by page.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from cnnbench.report.document import Figure

log = logging.getLogger(__name__)

MAX_WORKERS = 8


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _draw(figure: Figure, outdir: Path) -> Path:
    from cnnbench.report.plots import draw

    return draw(figure, outdir)


class Drawing:
    """Figures being drawn; :meth:`wait` returns their paths, in the figures' order."""

    def __init__(self, figures: Sequence[Figure], outdir: Path, workers: int) -> None:
        self.figures = list(figures)
        self.outdir = outdir
        self._pool: ProcessPoolExecutor | None = None
        self._futures: list[Future[Path]] = []
        self._frozen = False
        if workers >= 2 and len(self.figures) > 1:
            methods = multiprocessing.get_all_start_methods()
            context = multiprocessing.get_context("fork" if "fork" in methods else None)
            try:
                gc.freeze()
                self._frozen = True
                self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
                self._futures = [self._pool.submit(_draw, f, outdir) for f in self.figures]
            except (OSError, RuntimeError) as exc:  # no processes here: draw in this one
                log.debug("plots drawn in this process: %s", exc)
                self._close()

    def _close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._frozen:
            gc.unfreeze()
            self._frozen = False
        self._pool = None
        self._futures = []

    def wait(self) -> list[Path]:
        paths: list[Path] = []
        try:
            for i, fig in enumerate(self.figures):
                if i < len(self._futures):
                    try:
                        paths.append(self._futures[i].result())
                        continue
                    except BrokenProcessPool as exc:  # a worker died (out of memory...): draw the rest here
                        log.debug("plot workers stopped (%s); drawing the rest here", exc)
                        self._close()
                paths.append(_draw(fig, self.outdir))
        finally:
            self._close()
        return paths


def start_drawing(figures: Sequence[Figure], outdir: Path, workers: int | None = None) -> Drawing:
    """Start drawing ``figures`` into ``outdir/plots`` (``workers``: processes; default: one per
    figure, up to the usable CPUs but one and :data:`MAX_WORKERS`; 1 or fewer draws here, on
    :meth:`Drawing.wait`)."""
    n = workers if workers is not None else min(len(figures), usable_cpus() - 1, MAX_WORKERS)
    return Drawing(figures, outdir, n)
