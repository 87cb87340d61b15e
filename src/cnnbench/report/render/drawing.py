"""Drawing a report's plots in worker processes while the rest of the report is made.

matplotlib takes much of a report's time: importing it (about half a second) and 0.1–0.3 s
per figure. :func:`prepare_drawing` starts the drawing processes before the records are read
(up to the usable CPUs but one, at least one, at most :data:`MAX_WORKERS`); each imports
matplotlib at once, so the import overlaps reading the records and building the tables.
:meth:`DrawingPool.draw_ahead` hands them each figure of the plot budget as soon as the report
knows it (its scaling, training, throughput, bandwidth and history plots, as each of those kinds
is built: ``build_report``'s ``on_figures``), which they draw into memory while the rest of the
report is built. :func:`start_drawing` then hands them the figures not
drawn yet and returns at once, and the tables are written meanwhile; :meth:`Drawing.wait`
writes the plots drawn ahead (those whose figure is still the same, by :func:`figure_key`) and
collects the plot paths. With one usable CPU, or when
no process can be started, the figures are drawn here, one after the other. The parent never
imports matplotlib unless it draws itself. Objects of the parent are frozen out of the garbage
collector while workers are forked, so that their collections do not copy the parent's memory
page by page; the workers ignore Ctrl-C, which is the parent's to handle.

A plot whose content did not change since the previous report in the same folder is not drawn
again: each SVG carries the SHA-256 of what it shows (:func:`figure_key`: the figure's kind,
name, title and numbers, the drawing code and matplotlib's version) in its metadata, and a file
that carries the key of the figure to draw is kept as it is. A changed number, title or drawing
code changes the key, and the plot is drawn again.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import json
import logging
import multiprocessing
import os
import signal
import stat
from collections.abc import Sequence
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from cnnbench.machine.host import usable_cpus
from cnnbench.report.document import Figure

log = logging.getLogger(__name__)

MAX_WORKERS = 8


def _cpus() -> int:
    return len(usable_cpus())


def _draw(figure: Figure, outdir: Path, key: str | None = None) -> Path:
    """``figure`` drawn in this process, the cycle collector running meanwhile (a reading command
    pauses it: a figure's cycles would be kept to the end)."""
    from cnnbench.report.render.plots import draw
    from cnnbench.results.gc_pause import collector_running

    with collector_running():
        return draw(figure, outdir, key)


def _render(figure: Figure, key: str) -> bytes:
    from cnnbench.report.render.plots import render

    return render(figure, key)


KEY_MARK = "cnnbench-plot-key:"
"""What precedes a plot's :func:`figure_key` in its SVG's metadata (``dc:description``)."""
_HEAD = 4096


@functools.cache
def _code_key() -> bytes:
    """What a plot's look depends on besides its figure: the drawing modules' source (those the
    registered kinds of table name: :mod:`cnnbench.report.kinds`) and matplotlib's version (read
    from its metadata: the parent never imports matplotlib)."""
    from importlib.metadata import PackageNotFoundError, version
    from importlib.util import find_spec

    from cnnbench.report.kinds import drawing_modules

    digest = hashlib.sha256()
    modules = dict.fromkeys(["cnnbench.report.render.plots", "cnnbench.report.render.plot_style", *drawing_modules()])
    for module in modules:
        spec = find_spec(module)  # found, not imported
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError(f"no module {module} (a kind of table's draw)")
        digest.update(Path(spec.origin).read_bytes())
    try:
        digest.update(version("matplotlib").encode())
    except PackageNotFoundError:
        pass
    return digest.digest()


def figure_key(figure: Figure) -> str:
    """The SHA-256 of what a plot shows: its kind, name, title and data, and the drawing code."""
    text = json.dumps([figure.kind, figure.name, figure.title, figure.data], sort_keys=True, default=repr,
                      separators=(",", ":"))
    return hashlib.sha256(_code_key() + text.encode()).hexdigest()


def already_drawn(path: Path, key: str) -> bool:
    """Does the regular file ``path`` (not a symlink) hold the plot of ``key``?"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return f"{KEY_MARK}{key}".encode() in os.read(fd, _HEAD)
    except OSError:
        return False
    finally:
        os.close(fd)


def _start_worker() -> None:
    """A drawing process's start: Ctrl-C is the parent's to handle (no traceback per worker),
    the cycle collector runs (matplotlib's figures are cycles; a pool started while a report
    is built, its collector paused, would inherit it paused), and what drawing needs is imported
    before there is a figure."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.enable()
    import matplotlib.backends.backend_agg
    import matplotlib.backends.backend_svg
    import matplotlib.figure  # noqa: F401

    import cnnbench.report.render.plots  # noqa: F401
    from cnnbench.report.kinds import registered

    registered()  # the kinds of table, which name what draws their figures


def _ready() -> None:
    """A task that makes the pool start its processes now."""


def _fork_pool(workers: int) -> ProcessPoolExecutor | None:
    """A pool of ``workers`` forked processes, started now (``None`` when none can be started).
    The parent's objects are frozen out of the garbage collector while the processes fork (at
    the first task), so that the children's collections do not copy its memory page by page;
    not where objects are frozen already (a caller's own ``gc.freeze()``, or CPython 3.12's
    objects of its own), whose freeze ``gc.unfreeze()`` would undo."""
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    ours = not gc.get_freeze_count()
    if ours:
        gc.freeze()
    pool = None
    try:
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_start_worker)
        for _ in range(workers):
            pool.submit(_ready)
        return pool
    except (OSError, RuntimeError, BrokenProcessPool) as exc:  # no processes here: draw in this one
        log.debug("plots drawn in this process: %s", exc)
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        return None
    finally:
        if ours:
            gc.unfreeze()


class DrawingPool:
    """Drawing processes started ahead of the figures (see :func:`prepare_drawing`), or, with
    ``ahead=False``, when the first figure that needs drawing comes (:meth:`start`)."""

    def __init__(self, workers: int, ahead: bool = True) -> None:
        self.workers = workers
        self.pool = _fork_pool(workers) if workers > 0 and ahead else None
        self.processes = workers if self.pool is not None else 0
        """How many processes were started."""
        self._later = workers > 0 and not ahead
        self.ahead: dict[str, Future[bytes]] = {}
        """The SVGs being drawn ahead, by :func:`figure_key`."""

    def start(self, figures: int) -> None:
        """Start the processes not started ahead, for ``figures`` figures (one: drawn here)."""
        if self._later:
            self._later = False
            if figures > 1:
                self.pool = _fork_pool(min(figures, self.workers))
                self.processes = min(figures, self.workers) if self.pool is not None else 0

    def draw_ahead(self, figures: Sequence[Figure], outdir: Path) -> None:
        """Start drawing ``figures``, the report's to be written into ``outdir``, into memory now
        (each unless ``outdir`` holds its plot already); :func:`start_drawing` takes those whose
        figure is the same then. Nothing is drawn ahead without processes (or for one figure,
        where they would be started for it: it is drawn here, later)."""
        todo = {}
        for f in figures:
            key = figure_key(f)
            if key not in self.ahead and not already_drawn(outdir / f.path, key):
                todo[key] = f
        if self._later and len(todo) < 2:
            return
        self.start(max(len(todo), self.workers))  # as many as ahead: more figures may come
        if self.pool is None:
            return
        try:
            for key, f in todo.items():
                self.ahead[key] = self.pool.submit(_render, f, key)
        except (OSError, RuntimeError, BrokenProcessPool) as exc:  # drawn later, here
            log.debug("plots drawn in this process: %s", exc)
            self.close()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
        self.ahead = {}

    def __enter__(self) -> DrawingPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def prepare_drawing(workers: int | None = None, reusing: Path | None = None) -> DrawingPool:
    """Start the drawing processes now (``workers``: how many; default: the usable CPUs but one,
    at least one, at most :data:`MAX_WORKERS`; 0: draw in this process). Use it as a context
    manager, so that the processes end with it. ``reusing``: the report folder; when it holds
    plots of an earlier report (which may all be kept), the processes are started only once a
    figure needs drawing, so that a report of unchanged results never imports matplotlib."""
    n = workers if workers is not None else (min(_cpus() - 1, MAX_WORKERS) if _cpus() > 1 else 0)
    return DrawingPool(max(0, n), ahead=reusing is None or not _has_keyed_plots(reusing))


def _has_keyed_plots(outdir: Path) -> bool:
    try:
        return any(already_drawn(p, "") for p in (outdir / "plots").glob("*.svg"))
    except OSError:
        return False


class Drawing:
    """Figures being drawn; :meth:`wait` returns their paths, in the figures' order."""

    def __init__(self, figures: Sequence[Figure], outdir: Path, pool: DrawingPool | None) -> None:
        self.figures = list(figures)
        self.outdir = outdir
        self._pool = pool
        self._keys = [figure_key(f) for f in self.figures]
        self.reused = [already_drawn(outdir / f.path, k) for f, k in zip(self.figures, self._keys, strict=True)]
        """Per figure: its file from an earlier report shows the same (kept, not drawn again)."""
        ahead = pool.ahead if pool is not None else {}
        self._ahead: dict[int, Future[bytes]] = {i: ahead[k] for i, k in enumerate(self._keys)
                                                 if k in ahead and not self.reused[i]}
        """Per figure: its SVG drawn ahead (:meth:`DrawingPool.draw_ahead`), to be written here."""
        self._futures: dict[int, Future[Path]] = {}
        todo = [i for i, reused in enumerate(self.reused) if not reused and i not in self._ahead]
        if pool is not None:
            pool.start(len(todo))
        if pool is not None and pool.pool is not None and todo:
            try:
                self._futures = {i: pool.pool.submit(_draw, self.figures[i], outdir, self._keys[i]) for i in todo}
            except (OSError, RuntimeError, BrokenProcessPool) as exc:  # draw in this one
                log.debug("plots drawn in this process: %s", exc)
                self._close()

    def _close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        self._futures = {}
        self._ahead = {}

    def wait(self) -> list[Path]:
        paths: list[Path] = []
        try:
            for i, fig in enumerate(self.figures):
                if self.reused[i]:
                    paths.append(self.outdir / fig.path)
                    continue
                try:
                    if i in self._ahead:
                        from cnnbench.report.render.plots import save

                        paths.append(save(fig, self.outdir, self._ahead[i].result()))
                        continue
                    if i in self._futures:
                        paths.append(self._futures[i].result())
                        continue
                except (BrokenProcessPool, CancelledError) as exc:  # a worker died (out of memory...)
                    log.debug("plot workers stopped (%s); drawing the rest here", exc)
                    self._close()
                paths.append(_draw(fig, self.outdir, self._keys[i]))
        finally:
            self._close()
        return paths


def start_drawing(figures: Sequence[Figure], outdir: Path, pool: DrawingPool | None = None) -> Drawing:
    """Start drawing ``figures`` into ``outdir/plots`` in ``pool``'s processes (default: a pool
    started now, see :func:`prepare_drawing`; a pool with no process: drawn here, on
    :meth:`Drawing.wait`). The pool is closed when the drawing ends."""
    if pool is None:
        todo = sum(not already_drawn(outdir / f.path, figure_key(f)) for f in figures)  # reused ones need none
        pool = prepare_drawing(min(todo, _cpus() - 1, MAX_WORKERS) if todo > 1 else 0)
    return Drawing(figures, outdir, pool)
