"""Running one function in its own process, with a time limit and a way to stop it.

The sweep runs every case in its own process so that a crash, a leak or an
out-of-memory kill ends that case only. A fresh interpreter per case would spend
seconds importing torch and torchvision; instead, cases are forked from a *fork
server* (:mod:`multiprocessing`'s ``forkserver``): one clean interpreter, started once,
that imports torch, torchvision and the engine (:mod:`cnnbench.sweep.preload`) and
never runs anything itself. A case forked from it starts in milliseconds, warm, and is
as isolated as a fresh interpreter. Forking the sweep's own process instead would be
unsafe once it has run any torch operation (a forked child hangs in OpenMP's thread
pool) or touched CUDA (which cannot be used in a child forked after that); the server
has done neither, whatever the calling process has done.

Because the server forks the cases, the function and its arguments travel pickled:
the function must be importable by name (a module-level function, not a lambda).

The child:

* becomes the leader of its own process group (so Ctrl-C at the terminal reaches only
  the parent, which decides what to stop, and so its helper processes, e.g. DataLoader
  workers, are stopped with it), and asks the kernel to kill it if its parent dies
  (:mod:`cnnbench.lifetime`): the server, which ends when the sweep's process does, so
  a sweep killed with SIGKILL takes its case, and the case's workers, with it;
* writes its stdout and stderr (Python's and the C libraries') to a log file, whose
  tail the parent reports when the child fails;
* sends JSON messages to the parent over a pipe (``send``), the last one its result,
  and leaves with ``os._exit``.

The parent waits on the pipe, on the child's exit and on a wake-up pipe that signal
handlers write to, so a stop request or a time-out is acted on at once: SIGTERM to the
child's group, then SIGKILL after a grace period.

This module holds the fork server and :func:`run_in_child`; the child's side is
:mod:`cnnbench.sweep.child`, the parent's wait :mod:`cnnbench.sweep.waiting`, the stop
flag :mod:`cnnbench.sweep.stopping`.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import pickle
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cnnbench.sweep.child import ChildFn, Send, child_main
from cnnbench.sweep.stopping import StopFlag
from cnnbench.sweep.waiting import ChildOutcome, kill_group, read_tail, signal_name, terminate, wait_for_child

log = logging.getLogger(__name__)

__all__ = ["ChildFn", "ChildOutcome", "Send", "StopFlag", "check_picklable", "read_tail", "run_in_child",
           "signal_name", "start_server", "stop_server", "wait_for_server"]

SERVER_PRELOAD: tuple[str, ...] = ("cnnbench.sweep.preload",)
"""What the fork server imports once (besides the modules the main script imported)."""


# --------------------------------------------------------------------------- the fork server


def start_server(preload: Sequence[str] | None = None) -> None:
    """Start the fork server now, so no case pays for it; it imports ``preload`` once
    (default :data:`SERVER_PRELOAD`) and the modules the main script has imported. The
    server is one per process; when it already runs, this does nothing."""
    global _server_started
    modules = list(SERVER_PRELOAD if preload is None else preload) + _main_imports()
    multiprocessing.set_forkserver_preload(modules)
    if _server_started or threading.current_thread() is not threading.main_thread():
        multiprocessing.forkserver.ensure_running()
        return
    # The server inherits an ignored SIGINT, so that Ctrl-C while it imports torch stops the
    # sweep (which says so in one line) and not the server with a traceback of its own; it
    # ignores SIGINT afterwards anyway, and each case sets its own handler.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The server dies with this process (cnnbench.sweep.preload asks the kernel, reading the
    # pid from its environment), at once: left to notice its "alive" pipe's end-of-file, it
    # would first shut down an interpreter holding torch, seconds on a loaded machine.
    os.environ[SERVER_PARENT_ENV] = str(os.getpid())
    try:
        multiprocessing.forkserver.ensure_running()
        _server_started = True
    finally:
        os.environ.pop(SERVER_PARENT_ENV, None)
        signal.signal(signal.SIGINT, previous)


_server_started = False
SERVER_PARENT_ENV = "CNNBENCH_FORK_SERVER_PARENT"
"""Set while the fork server starts: the pid it must die with."""


def stop_server() -> None:
    """Stop the fork server now, even while it is still importing (Ctrl-C during a sweep's
    start-up): left alone, it would finish its imports first, holding the terminal's output."""
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    pid = getattr(server, "_forkserver_pid", None)
    if server is None or pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
        server._stop()  # closes its "alive" pipe, reaps it, removes its socket
    except (OSError, AttributeError):  # pragma: no cover - already gone, or another Python
        pass


def _main_imports() -> list[str]:
    """Modules the main script refers to at top level.

    multiprocessing re-runs the main script in every process it starts (so that
    functions defined there can be found); whatever that script imports, the server
    imports once, so that re-running it in a case costs next to nothing.
    """
    main = sys.modules.get("__main__")
    if main is None or not getattr(main, "__file__", None):
        return []
    names = set()
    for value in vars(main).values():
        if isinstance(value, types.ModuleType):
            names.add(value.__name__)
        else:
            module = getattr(value, "__module__", None)
            if isinstance(module, str) and module in sys.modules:
                names.add(module)
    names.discard("__main__")
    names.discard("builtins")
    return sorted(names)


def wait_for_server(timeout_s: float = 600.0) -> None:
    """Start the fork server and return once it is ready (its imports done)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="cnnbench-server-") as tmp:
        run_in_child(_ready, timeout_s=timeout_s, log_path=Path(tmp) / "out.log")


def _ready(send: Send) -> dict[str, Any]:
    return {}


def check_picklable(fn: Any, what: str) -> None:
    """``TypeError`` naming ``what`` when ``fn`` cannot be sent to a case process."""
    try:
        pickle.dumps(fn)
    except Exception as exc:
        raise TypeError(f"the {what} must be a module-level function (it is sent to each case's "
                        f"process by name): {exc}") from None


def run_in_child(
    fn: ChildFn,
    args: tuple[Any, ...] = (),
    *,
    timeout_s: float,
    log_path: Path,
    stop: StopFlag | None = None,
    on_message: Callable[[dict[str, Any]], None] | None = None,
    on_tick: Callable[[], None] | None = None,
    grace_s: float = 3.0,
    tick_s: float = 0.25,
) -> ChildOutcome:
    """Run ``fn(send, *args)`` in a process forked from the fork server, within ``timeout_s``."""
    start_server()
    ctx = multiprocessing.get_context("forkserver")
    reader, writer = ctx.Pipe(duplex=False)
    level = logging.getLogger().getEffectiveLevel()
    server_pid = getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None)
    process = ctx.Process(target=child_main, args=(fn, args, writer, str(log_path), level, server_pid),
                          name="cnnbench-case", daemon=False)
    started = time.monotonic()
    try:
        process.start()
    finally:
        writer.close()
    try:
        return wait_for_child(process, reader, started, timeout_s, log_path, stop, on_message, on_tick,
                              grace_s, tick_s)
    finally:
        reader.close()
        if process.exitcode is None:  # the wait itself failed: do not leave the case running
            terminate(process, grace_s)
        kill_group(process.pid, signal.SIGKILL, leader_alive=False)  # helpers it may have left behind
        process.close()
