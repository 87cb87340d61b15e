"""Starting a run's workers on this node through torch's elastic launch API (torchrun's machinery).

:func:`launch_workers` starts ``nprocs`` processes of ``fn(*args)`` with the rendezvous on
127.0.0.1, no restarts, and the agent watching them every 0.1 s: when one dies (killed, or
an exception) the agent stops the others at once and :class:`WorkerFailed` names the rank
and the cause. Workers other than local rank 0 write their output to files in a temporary
folder, so the console shows rank 0 alone. Ctrl-C (SIGINT) or SIGTERM stops every worker
and arrives here as :class:`KeyboardInterrupt` / :class:`WorkersStopped`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing.spawn
import os
import shlex
import signal
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, SignalException, Std
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from cnnbench.distributed.torch_compat import supported_fields
from cnnbench.oom import is_out_of_memory_text

log = logging.getLogger(__name__)

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
SHUTDOWN_GRACE_S = 5
# Errors a worker gets because another worker failed (Gloo, NCCL, the c10d store).
_PEER_FAILURE_WORDS = ("connection closed by peer", "connection reset by peer", "remote worker",
                       "broken pipe", "timed out", "timeout", "nccl communicator was aborted",
                       "socket closed", "recvvalue failed", "failed to recv", "connection refused")
_QUIETED = ("torch.distributed.elastic", "torch.multiprocessing")


class WorkerFailed(RuntimeError):
    """A worker of the run failed; the others were stopped."""

    def __init__(self, rank: int, cause: str) -> None:
        super().__init__(f"worker rank {rank} failed: {cause}")
        self.rank = rank
        self.cause = cause

    @property
    def out_of_memory(self) -> bool:
        return is_out_of_memory_text(self.cause)


class WorkersStopped(RuntimeError):
    """The launcher was asked to stop (SIGTERM, SIGHUP); every worker was stopped."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}; every worker was stopped")
        self.signum = signum


def launch_workers(fn: Callable[..., Any], args: tuple[Any, ...], *, nprocs: int, timeout_s: float,
                   log_dir: str | None = None, notes_dir: str | None = None) -> dict[int, Any]:
    """Run ``fn(*args)`` in ``nprocs`` worker processes; returns each rank's return value.

    ``notes_dir``: a folder where failing workers leave ``rank<N>.json`` notes (``{"rank",
    "time", "error"}``, see :func:`cnnbench.engine.multidevice.worker.write_failure_note`); when
    given, the first note that is not a consequence of another worker's failure names the
    failed rank.
    """
    with tempfile.TemporaryDirectory(prefix="cnnbench-workers-") as tmp:
        logs = DefaultLogsSpecs(log_dir=log_dir or tmp, redirects={r: Std.ALL for r in range(1, nprocs)})
        config = LaunchConfig(
            min_nodes=1, max_nodes=1, nproc_per_node=nprocs, run_id=uuid.uuid4().hex,
            rdzv_backend="c10d", rdzv_endpoint="127.0.0.1:0", rdzv_configs={"timeout": max(1, int(timeout_s))},
            max_restarts=0, monitor_interval=0.1, start_method="spawn", logs_specs=logs,
            **supported_fields(LaunchConfig, {"shutdown_timeout": SHUTDOWN_GRACE_S}),
        )
        saved = {s: signal.getsignal(s) for s in _SIGNALS}
        loggers = [logging.getLogger(name) for name in _quieted_loggers()]
        levels = [lg.level for lg in loggers]
        if not log.isEnabledFor(logging.DEBUG):
            for lg in loggers:  # their failure reports are ours to make, in one line
                lg.setLevel(logging.CRITICAL)
        try:
            with _workers_start_deaf_to_ctrl_c(tmp), _workers_without_main():
                return elastic_launch(config, fn)(*args)
        except ChildFailedError as exc:
            raise WorkerFailed(*_root_cause(exc.failures, notes_dir, nprocs)) from None
        except SignalException as exc:
            if exc.sigval == signal.SIGINT:
                raise KeyboardInterrupt from None
            raise WorkersStopped(int(exc.sigval)) from None
        finally:
            for lg, level in zip(loggers, levels, strict=True):
                lg.setLevel(level)
            for sig, handler in saved.items():  # the agent leaves its own handlers installed
                signal.signal(sig, handler)


@contextlib.contextmanager
def _workers_start_deaf_to_ctrl_c(folder: str) -> Iterator[None]:
    """Workers start with SIGINT ignored, from their first instruction.

    Ctrl-C reaches every process of the terminal's group. A worker ignores it once its entry
    runs (the agent stops the workers itself), but before that, while its interpreter imports
    torch, Python would turn it into a KeyboardInterrupt traceback from multiprocessing's spawn,
    one per worker. An ignored signal stays ignored across exec, and Python then leaves SIGINT
    alone: so the workers are spawned through a two-line shell script that ignores SIGINT and
    execs this Python. The launcher keeps its own handler and stops the workers itself.
    """
    if os.name != "posix" or not os.path.exists("/bin/sh"):
        yield
        return
    script = os.path.join(folder, "python-ignoring-sigint")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\ntrap '' INT\nexec {shlex.quote(sys.executable)} \"$@\"\n")
    os.chmod(script, 0o755)
    before = multiprocessing.spawn.get_executable()
    multiprocessing.spawn.set_executable(script)
    try:
        yield
    finally:
        multiprocessing.spawn.set_executable(before)


@contextlib.contextmanager
def _workers_without_main() -> Iterator[None]:
    """Workers spawned meanwhile do not import the caller's ``__main__``.

    A spawned process normally runs the parent's main script again first (as ``__mp_main__``),
    which fails where there is no script file (``python -``, some notebook kernels: "No such
    file or directory: '<stdin>'") and starts the run again where the script has no
    ``if __name__ == "__main__"`` guard. The workers run :mod:`cnnbench`'s own functions and
    need nothing from ``__main__``, so the spawn's preparation leaves it out.
    """
    prepare = multiprocessing.spawn.get_preparation_data

    def without_main(name: str) -> dict[str, Any]:
        data = prepare(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    multiprocessing.spawn.get_preparation_data = without_main
    try:
        yield
    finally:
        multiprocessing.spawn.get_preparation_data = prepare


def _quieted_loggers() -> list[str]:
    """torch's elastic and multiprocessing loggers (each has its own level)."""
    names = set(_QUIETED)
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(tuple(p + "." for p in _QUIETED)):
            names.add(name)
    return sorted(names)


def _root_cause(failures: dict[int, Any], notes_dir: str | None, nprocs: int = 0) -> tuple[int, str]:
    """The failure that started it, as (rank, cause).

    When a worker dies its peers fail too, with errors about a lost connection or a
    collective that timed out: those are consequences, named only when nothing else is
    known. A worker's own note (written before it tore anything down) is preferred to
    what the agent saw, which misses a worker it stopped while that one was still failing.
    When every failure is a consequence, the workers that neither failed nor left a note were
    still working while the others timed out waiting for them: they are the slow ones.
    """
    known: dict[int, tuple[str, float]] = {rank: (_cause(f), float(f.timestamp)) for rank, f in failures.items()}
    notes, blamers = _notes(notes_dir)
    for rank in blamers - notes.keys():  # it failed because another worker was slow
        known.pop(rank, None)
    known.update(notes)
    rank, (cause, _) = min(known.items(), key=lambda kv: (_is_consequence(kv[1][0]), kv[1][1], kv[0]))
    busy = [r for r in range(nprocs) if r not in known]
    if _is_consequence(cause) and busy:
        who = "it" if len(busy) == 1 else f"ranks {', '.join(map(str, busy))}"
        return busy[0], f"too slow: the other workers gave up waiting for {who} ({cause})"
    return rank, cause


def _notes(notes_dir: str | None) -> tuple[dict[int, tuple[str, float]], set[int]]:
    """Each failed rank's (cause, time) from the notes, and the ranks whose note named another."""
    out: dict[int, tuple[str, float]] = {}
    blamers: set[int] = set()
    if notes_dir is None:
        return out, blamers
    for path in Path(notes_dir).glob("rank*.json"):
        try:
            note = json.loads(path.read_text())
            rank, by = int(note["rank"]), int(note.get("by", note["rank"]))
            out[rank] = (str(note["error"]), float(note["time"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if by != rank:
            blamers.add(by)
    return out, blamers


def _is_consequence(cause: str) -> bool:
    lowered = cause.lower()
    return any(words in lowered for words in _PEER_FAILURE_WORDS)


def _cause(failure: Any) -> str:
    """One line saying why a worker failed: its exception, or the signal that killed it. An
    exception the worker recorded (its error file) is the cause even when a signal ended the
    process after it (Gloo aborting as the failed worker tears its group down)."""
    data = getattr(failure, "error_file_data", None)
    recorded = isinstance(data, dict) and data.get("message") not in (None, "", "<NONE>")  # torch's "no file"
    if failure.exitcode is not None and failure.exitcode < 0 and not recorded:
        return f"killed by {failure.signal_name()}"
    message = failure.message
    if isinstance(message, dict):
        message = message.get("message") or ""
    text = str(message or "").strip()
    if not text or text.startswith("To enable traceback"):
        return f"exited with code {failure.exitcode}"
    first = text.splitlines()[0]
    return first if len(first) <= 500 else first[:499] + "…"
