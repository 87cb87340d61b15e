"""The machine a case runs on: ``device: auto`` made concrete and the machine's label and
environment, as the engine would say them, probed once per (device, label) in a process
of the fork server. Records the sweep makes itself (time-outs, crashes) carry them too."""

from __future__ import annotations

import dataclasses
import logging
import socket
import tempfile
from pathlib import Path
from typing import Any

from cnnbench.sweep.defaults import PROBE_TIMEOUT_S, Probe
from cnnbench.sweep.failure import why
from cnnbench.sweep.isolation import Send, StopFlag, run_in_child
from cnnbench.sweep.suite import Case

log = logging.getLogger("cnnbench.sweep.runner")  # the name its messages have always had


class Machines:
    """What the probe says about each (device, machine label), asked once each."""

    def __init__(self, probe: Probe, stop: StopFlag, grace_s: float) -> None:
        self.probe = probe
        self.stop = stop
        self.grace_s = grace_s
        self._envs: dict[tuple[str, str | None], dict[str, Any]] = {}

    def environment(self, device: str, label: str | None) -> dict[str, Any]:
        """``{"device": concrete, "environment": {...}}`` for ``device`` and ``label``."""
        key = (device, label)
        if key not in self._envs:
            with tempfile.TemporaryDirectory(prefix="cnnbench-probe-") as tmp:
                outcome = run_in_child(_probe_main, (self.probe, device, label), timeout_s=PROBE_TIMEOUT_S,
                                       log_path=Path(tmp) / "output.log", stop=self.stop, grace_s=self.grace_s)
            info = outcome.result if isinstance(outcome.result, dict) else None
            if info is None:
                if not outcome.stopped:
                    log.warning("could not probe the machine (%s); naming it from the CPU only",
                                why(outcome, PROBE_TIMEOUT_S))
                info = _cpu_only(device, label)
            self._envs[key] = info
        return self._envs[key]

    def concrete(self, case: Case) -> Case:
        """The case with ``device: auto`` resolved as the engine would."""
        if case.config.device != "auto":
            return case
        info = self.environment("auto", case.config.machine_label)
        device = str(info["device"])
        self._envs.setdefault((device, case.config.machine_label), info)
        return dataclasses.replace(case, config=case.config.replace(device=device))

    def machine(self, case: Case) -> str:
        """The machine label the case's records carry."""
        env = self.environment(case.config.device, case.config.machine_label)["environment"]
        return str(env.get("machine") or "unknown")


def _cpu_only(device: str, label: str | None) -> dict[str, Any]:
    """What can be said without a probe: the machine named from its CPU."""
    from cnnbench.machine.environment import cpu_model, derive_machine_label

    cpu = cpu_model()
    return {
        "device": "cpu" if device == "auto" else device,
        "environment": {"machine": label or derive_machine_label(cpu, None, 0),
                        "hostname": socket.gethostname(), "cpu_model": cpu},
    }


def _probe_main(send: Send, probe: Probe, device: str, label: str | None) -> dict[str, Any]:
    """In a case process: what the probe says about the machine."""
    return probe(device, label)
