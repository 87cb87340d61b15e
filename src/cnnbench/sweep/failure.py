"""A case that gave no record: its status (``error``, ``oom``, ``timeout``) and error text.

The text ends with the tail of the case's output, C++ stack traces left out; a time-out
says what the case printed last before the tracebacks that stopping it makes.
"""

from __future__ import annotations

import signal

from cnnbench.oom import is_out_of_memory_text
from cnnbench.results.error_text import clip, without_native_stack
from cnnbench.sweep.waiting import ChildOutcome, signal_name


def failure_of(outcome: ChildOutcome, timeout_s: float) -> tuple[str, str]:
    """Status and error text for an attempt that gave no record (without C++ stack traces)."""
    tail = without_native_stack(outcome.output_tail)
    tail_text = f"\n--- last lines of the case's output ---\n{tail}" if tail else ""
    if outcome.timed_out:
        return "timeout", _timed_out(tail, timeout_s)
    if outcome.exception is not None:
        kind = str(outcome.exception.get("type") or "Exception")
        message = clip(without_native_stack(str(outcome.exception.get("message") or "")))
        text = f"{kind}: {message}"
        status = "oom" if is_out_of_memory_text(text) else "error"
        return status, f"{kind}: {message}{tail_text}"
    if outcome.signal is not None:
        name = signal_name(outcome.signal)
        if outcome.signal == signal.SIGKILL:
            return "oom", (f"the case process was killed by {name} from outside cnnbench "
                           f"(usually the kernel's out-of-memory killer){tail_text}")
        return "error", f"the case process was killed by {name}{tail_text}"
    if outcome.exit_code:
        return "error", f"the case process exited with status {outcome.exit_code}{tail_text}"
    return "error", f"the case process ended without a record{tail_text}"


def _timed_out(tail: str, timeout_s: float) -> str:
    # One line: stopping a case makes its processes print what they were doing when the
    # signal came (a multi-device case's agent and workers: tracebacks), which is not the cause.
    # What it printed before those tracebacks follows the first line, as for other failures
    # (for a hang, the only clue to where it stopped).
    last = last_output_line(tail)
    before = output_before_traceback(tail)
    return (f"the case ran past its time limit of {timeout_s:g} s and was stopped"
            + (f" (last output: {clip(last, 200)})" if last else "")
            + (f"\n--- last lines of the case's output ---\n{before}" if before else ""))


def output_before_traceback(tail: str) -> str:
    """What a case printed before any traceback (trailing blank lines and a rank's traceback
    prefix dropped)."""
    before = tail.split("Traceback (most recent call last):", 1)[0]
    lines = before.rstrip().splitlines()
    if lines and lines[-1].strip().startswith("[rank") and lines[-1].rstrip().endswith(":"):
        lines.pop()
    return "\n".join(lines).rstrip()


def last_output_line(tail: str) -> str:
    """The last line a case printed before any traceback, whitespace collapsed ("" if none)."""
    lines = [" ".join(line.split()) for line in output_before_traceback(tail).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def why(outcome: ChildOutcome, timeout_s: float) -> str:
    """The first line of :func:`failure_of`: why a helper process (a probe, the checks) gave nothing."""
    return failure_of(outcome, timeout_s)[1].splitlines()[0]
