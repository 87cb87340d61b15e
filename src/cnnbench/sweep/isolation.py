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
"""

from __future__ import annotations

import faulthandler
import json
import logging
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import pickle
import select
import signal
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cnnbench.lifetime import die_with_parent

log = logging.getLogger(__name__)

Send = Callable[[dict[str, Any]], None]
ChildFn = Callable[..., dict[str, Any]]
"""``fn(send, *args)`` runs in the child; may ``send(message)`` for progress; returns the result."""

TAIL_LINES = 40
TAIL_CHARS = 6000
SERVER_PRELOAD: tuple[str, ...] = ("cnnbench.sweep.preload",)
"""What the fork server imports once (besides the modules the main script imported)."""


@dataclass
class ChildOutcome:
    """How a child ended."""

    result: dict[str, Any] | None = None
    """The function's returned message (None when it raised, crashed or was stopped)."""
    exception: dict[str, Any] | None = None
    """``{"type", "message"}`` when the function raised."""
    exit_code: int | None = None
    """Exit status when it exited; None when killed by a signal."""
    signal: int | None = None
    """The signal that killed it, if one did."""
    timed_out: bool = False
    stopped: bool = False
    """Ended because the parent was asked to stop (Ctrl-C, SIGTERM)."""
    seconds: float = 0.0
    output_tail: str = ""


class StopFlag:
    """Set by signal handlers; wakes a waiting parent through a pipe."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)

    @property
    def fd(self) -> int:
        return self._r

    def set(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum
        try:
            os.write(self._w, b"x")
        except OSError:  # the pipe is full (already woken) or closed
            pass

    def __bool__(self) -> bool:
        return self.signum is not None

    def close(self) -> None:
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass


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
    try:
        multiprocessing.forkserver.ensure_running()
        _server_started = True
    finally:
        signal.signal(signal.SIGINT, previous)


_server_started = False


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
    process = ctx.Process(target=_child, args=(fn, args, writer, str(log_path), level, server_pid),
                          name="cnnbench-case", daemon=False)
    started = time.monotonic()
    try:
        process.start()
    finally:
        writer.close()
    try:
        return _wait(process, reader, started, timeout_s, log_path, stop, on_message, on_tick, grace_s, tick_s)
    finally:
        reader.close()
        if process.exitcode is None:  # the wait itself failed: do not leave the case running
            _terminate(process, grace_s)
        _kill_group(process.pid, signal.SIGKILL, leader_alive=False)  # helpers it may have left behind
        process.close()


# --------------------------------------------------------------------------- child side


def _child(fn: ChildFn, args: tuple[Any, ...], conn: Any, log_path: str, level: int,
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

        def send(message: dict[str, Any]) -> None:
            conn.send_bytes(json.dumps(message, separators=(",", ":"), default=str).encode())

        try:
            result = fn(send, *args)
            send({"kind": "result", "result": result})
            code = 0
        except BaseException as exc:  # everything, KeyboardInterrupt and SystemExit included
            traceback.print_exc()
            send({"kind": "exception", "type": type(exc).__name__, "message": str(exc)})
            code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1
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
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
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
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)


# --------------------------------------------------------------------------- parent side


def _wait(
    process: Any,
    reader: Any,
    started: float,
    timeout_s: float,
    log_path: Path,
    stop: StopFlag | None,
    on_message: Callable[[dict[str, Any]], None] | None,
    on_tick: Callable[[], None] | None,
    grace_s: float,
    tick_s: float,
) -> ChildOutcome:
    outcome = ChildOutcome()
    finals: list[dict[str, Any]] = []
    deadline = started + timeout_s
    pipe_open = True

    def drain() -> bool:
        """Read every message waiting; False once the pipe is closed."""
        while reader.poll():
            try:
                data = reader.recv_bytes()
            except (EOFError, OSError):
                return False
            _dispatch(data, finals, on_message)
        return True

    while True:
        if stop:
            outcome.stopped = True
            _terminate(process, grace_s)
            break
        now = time.monotonic()
        if now >= deadline:
            outcome.timed_out = True
            _terminate(process, grace_s)
            break
        watch = [process.sentinel] + ([reader.fileno()] if pipe_open else [])
        if stop is not None:
            watch.append(stop.fd)
        ready, _, _ = select.select(watch, [], [], max(min(tick_s, deadline - now), 0.0))
        if stop is not None and stop.fd in ready:
            _drain_fd(stop.fd)
        if pipe_open and reader.fileno() in ready:
            pipe_open = drain()
        if process.sentinel in ready:
            process.join()
            break
        if on_tick is not None:
            on_tick()
    if pipe_open:
        drain()  # what the child sent just before it ended
    outcome.seconds = time.monotonic() - started
    code = process.exitcode
    if code is not None and code < 0:
        outcome.signal = -code
    else:
        outcome.exit_code = code
    outcome.output_tail = read_tail(log_path)
    for message in finals:
        if message.get("kind") == "result":
            outcome.result = message.get("result")
        elif message.get("kind") == "exception":
            outcome.exception = {"type": message.get("type"), "message": message.get("message")}
    return outcome


def _dispatch(data: bytes, finals: list[dict[str, Any]], on_message: Callable[[dict[str, Any]], None] | None) -> None:
    try:
        message = json.loads(data)
    except ValueError:
        log.debug("ignored a garbled message from a case process: %r", data[:200])
        return
    if not isinstance(message, dict):
        return
    if message.get("kind") in ("result", "exception"):
        finals.append(message)
    elif on_message is not None:
        on_message(message)


def _drain_fd(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except (BlockingIOError, OSError):
        pass


def _kill_group(pid: int | None, sig: int, leader_alive: bool = True) -> None:
    """Signal the child's process group; while the child is known to be alive (not yet
    reaped, so its pid cannot be reused) also the child alone, in case it has not made its
    group yet."""
    if pid is None:
        return
    try:
        os.killpg(pid, sig)
        return
    except (ProcessLookupError, PermissionError):
        pass
    if leader_alive:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _terminate(process: Any, grace_s: float) -> None:
    """SIGTERM the child's group, SIGKILL it after ``grace_s``; waits for the child."""
    _kill_group(process.pid, signal.SIGTERM)
    process.join(grace_s)
    if process.exitcode is None:
        _kill_group(process.pid, signal.SIGKILL)
        process.join()


def read_tail(path: Path, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last lines of a log file (empty when there is none)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - chars))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:]).strip()


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:  # pragma: no cover
        return f"signal {signum}"
