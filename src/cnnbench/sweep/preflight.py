"""Checking a suite's cases before any runs: each through the checks ``cnnbench run`` makes
before any work (:func:`cnnbench.engine.resolve.preflight`), in a process of the fork server."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cnnbench.config.run_config import RunConfig
from cnnbench.sweep.defaults import PROBE_TIMEOUT_S
from cnnbench.sweep.failure import why
from cnnbench.sweep.isolation import Send, run_in_child
from cnnbench.sweep.suite import Case, Suite, SuiteError


@dataclass(frozen=True)
class InvalidCase:
    """A case ``cnnbench run`` would refuse on this machine, and why."""

    case: Case
    error: str
    """The check's one line, naming the flag (``--image-size: 40 is too small for ...``)."""

    def message(self, suite: Suite) -> str:
        return f"{suite.where}: case {self.case.description}: {self.error}"


def _preflight_cases(send: Send, configs: list[tuple[int, RunConfig]]) -> dict[str, Any]:
    """In a case process: :func:`~cnnbench.engine.resolve.preflight`'s verdict on each configuration."""
    from cnnbench.config.errors import ConfigError
    from cnnbench.engine.resolve import preflight

    errors: dict[str, str] = {}
    for index, config in configs:
        try:
            preflight(config)
        except ConfigError as exc:
            errors[str(index)] = str(exc)
        except Exception as exc:  # a model that cannot even be built is no valid case either
            first = (str(exc).strip().splitlines() or [""])[0]
            errors[str(index)] = f"cannot be prepared: {type(exc).__name__}: {first}".rstrip(": ")
    return {"errors": errors}


def check_cases(suite: Suite) -> list[InvalidCase]:
    """The suite's cases that ``cnnbench run`` would refuse here, each with the reason.

    Every configuration goes through the very checks ``cnnbench run`` makes before any work
    (:func:`cnnbench.engine.resolve.preflight`: the model name, the image size the model
    takes, the precision the device has, CUDA present, the device count), in a process of
    the fork server (where torch is loaded). Raises :class:`SuiteError` when the checks
    themselves cannot run.
    """
    distinct = suite.distinct_cases()
    configs = [(c.index, c.config) for c in distinct]
    with tempfile.TemporaryDirectory(prefix="cnnbench-check-") as tmp:
        outcome = run_in_child(_preflight_cases, (configs,), timeout_s=PROBE_TIMEOUT_S,
                               log_path=Path(tmp) / "out.log")
    if not isinstance(outcome.result, dict):
        raise SuiteError(f"{suite.where}: could not check the cases ({why(outcome, PROBE_TIMEOUT_S)})")
    errors = outcome.result["errors"]
    return [InvalidCase(c, errors[str(c.index)]) for c in distinct if str(c.index) in errors]
