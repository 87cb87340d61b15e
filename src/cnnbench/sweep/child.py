"""The child's side of a case process: set itself apart, run the function, report, leave.

The child becomes the leader of its own process group and asks the kernel to kill it
if its parent dies (:mod:`cnnbench.lifetime`), writes its stdout and stderr to a log
file, sends JSON messages to the parent over a pipe (``send``), the last one its
result, and leaves with ``os._exit``. See :mod:`cnnbench.sweep.isolation`.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cnnbench.lifetime import die_with_parent
from cnnbench.words import OneLineFormatter

Send = Callable[[dict[str, Any]], None]
ChildFn = Callable[..., dict[str, Any]]
"""``fn(send, *args)`` runs in the child; may ``send(message)`` for progress; returns the result."""


def child_main(fn: ChildFn, args: tuple[Any, ...], conn: Any, log_path: str, level: int,
               server_pid: int | None = None) -> None:
    code = 1
    try:
        try:
            os.setpgid(0, 0)
        except OSError:
            pass
        die_with_parent(server_pid)
        _release_the_server()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _redirect_output(Path(log_path), level)
        code = _run(fn, args, conn)
    except BaseException as exc:  # failure while setting up: tell the parent, never the terminal
        # (the usual cause is a parent that has gone, Ctrl-C during a sweep's start-up, and
        # taken the case's log folder with it; the case's stderr is still the terminal's)
        try:
            conn.send_bytes(json.dumps({"kind": "exception", "type": type(exc).__name__,
                                        "message": f"the case process could not start: {exc}"}).encode())
        except BaseException:
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        os._exit(code)


def _run(fn: ChildFn, args: tuple[Any, ...], conn: Any) -> int:
    """Run ``fn(send, *args)`` and send its result, or the exception it raised; the exit code."""

    def send(message: dict[str, Any]) -> None:
        conn.send_bytes(json.dumps(message, separators=(",", ":"), default=str).encode())

    try:
        result = fn(send, *args)
        send({"kind": "result", "result": result})
        return 0
    except BaseException as exc:  # everything, KeyboardInterrupt and SystemExit included
        traceback.print_exc()
        send({"kind": "exception", "type": type(exc).__name__, "message": str(exc)})
        return exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1


def _release_the_server() -> None:
    """Close this case's copy of the fork server's "alive" pipe.

    multiprocessing hands every process forked by the server the write end of the pipe
    whose end-of-file tells the server that the process that started it (the sweep) is
    gone. A case that kept it would keep the server alive after the sweep was killed, and
    the server would keep the case alive (the case dies with its parent): nothing would end.
    A case never starts processes through the fork server itself.
    """
    server: Any = multiprocessing.forkserver._forkserver
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
        server._forkserver_alive_fd = None


def _redirect_output(log_path: Path, level: int) -> None:
    # in the case's own temporary folder, never in the store; still never through a link at its name
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    # A crash in native code (a segfault) leaves a Python traceback in the case's output.
    faulthandler.enable(sys.stderr, all_threads=True)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)
