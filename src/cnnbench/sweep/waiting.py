"""The parent's side of a case process: waiting on it, stopping it, reading how it ended.

The parent waits on the pipe, on the child's exit and on a wake-up pipe that signal
handlers write to (:class:`~cnnbench.sweep.stopping.StopFlag`), so a stop request or a
time-out is acted on at once: SIGTERM to the child's group, then SIGKILL after a grace
period.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cnnbench.sweep.stopping import StopFlag

log = logging.getLogger("cnnbench.sweep.isolation")  # the name its messages have always had

TAIL_LINES = 40
TAIL_CHARS = 6000


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


@dataclass
class _Watch:
    """What the parent waits on, and what it has read."""

    process: Any
    reader: Any
    stop: StopFlag | None
    on_message: Callable[[dict[str, Any]], None] | None
    finals: list[dict[str, Any]]
    pipe_open: bool = True

    def drain(self) -> bool:
        """Read every message waiting; False once the pipe is closed."""
        while self.reader.poll():
            try:
                data = self.reader.recv_bytes()
            except (EOFError, OSError):
                return False
            _dispatch(data, self.finals, self.on_message)
        return True

    def select(self, timeout: float) -> bool:
        """Wait up to ``timeout`` and read what came; True once the child has ended."""
        watch = [self.process.sentinel] + ([self.reader.fileno()] if self.pipe_open else [])
        if self.stop is not None:
            watch.append(self.stop.fd)
        ready, _, _ = select.select(watch, [], [], timeout)
        if self.stop is not None and self.stop.fd in ready:
            _drain_fd(self.stop.fd)
        if self.pipe_open and self.reader.fileno() in ready:
            self.pipe_open = self.drain()
        if self.process.sentinel in ready:
            self.process.join()
            return True
        return False


def wait_for_child(
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
    """Wait until the child ends, runs past ``timeout_s`` or is to stop; how it ended."""
    outcome = ChildOutcome()
    watch = _Watch(process, reader, stop, on_message, [])
    deadline = started + timeout_s
    while True:
        if stop:
            outcome.stopped = True
            terminate(process, grace_s)
            break
        now = time.monotonic()
        if now >= deadline:
            outcome.timed_out = True
            terminate(process, grace_s)
            break
        if watch.select(max(min(tick_s, deadline - now), 0.0)):
            break
        if on_tick is not None:
            on_tick()
    if watch.pipe_open:
        watch.drain()  # what the child sent just before it ended
    outcome.seconds = time.monotonic() - started
    _ending(outcome, process.exitcode, watch.finals)
    outcome.output_tail = read_tail(log_path)
    return outcome


def _ending(outcome: ChildOutcome, code: int | None, finals: list[dict[str, Any]]) -> None:
    """Fill in the exit status (or signal) and the child's last message."""
    if code is not None and code < 0:
        outcome.signal = -code
    else:
        outcome.exit_code = code
    for message in finals:
        if message.get("kind") == "result":
            outcome.result = message.get("result")
        elif message.get("kind") == "exception":
            outcome.exception = {"type": message.get("type"), "message": message.get("message")}


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


def kill_group(pid: int | None, sig: int, leader_alive: bool = True) -> None:
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


def terminate(process: Any, grace_s: float) -> None:
    """SIGTERM the child's group, SIGKILL it after ``grace_s``; waits for the child."""
    kill_group(process.pid, signal.SIGTERM)
    process.join(grace_s)
    if process.exitcode is None:
        kill_group(process.pid, signal.SIGKILL)
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
