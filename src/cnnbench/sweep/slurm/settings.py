"""Scheduler options: the suite's ``executor:`` block, per machine label too, and the command line.

    executor:
      partition: cpu            # every option below may be left out
      account: bench
      qos: normal
      constraint: avx512
      mem: 16G                  # --mem of every job (default: the partition's)
      startup_s: 300            # added to the suite's timeout_s for the job's time limit
      time_min: 60              # or the time limit itself, in minutes
      max_concurrent: 8         # job array tasks at once (Slurm's %N)
      slurm_args: {container-image: nvcr.io#nvidia/pytorch:24.05-py3}   # any other sbatch option
      machines:                 # one entry per machine label, each its own options
        epyc-7763: {partition: epyc}
        xeon-8380: {partition: xeon}

With ``machines``, a case whose ``machine_label`` is unset runs once on each of them, labelled so
(the partition names the hardware; the record names the label); a case whose label is listed runs
there only. Without it, the machine label is taken on the node, as for a local sweep. The command
line's options win over the block's. No torch here.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cnnbench.words import quoted, shortened

DEFAULT_STARTUP_S = 300.0
"""Added to a suite's per-case time limit for a job's Slurm time limit: queue-to-first-step work
(the Python environment, importing torch on a cold node, the machine probe)."""
TEXT_OPTIONS = ("partition", "account", "qos", "constraint", "mem")
KEYS = (*TEXT_OPTIONS, "startup_s", "time_min", "max_concurrent", "slurm_args")
"""The options of a job, in the block and in each of its ``machines``."""
BLOCK_KEYS = (*KEYS, "machines")
"""The keys of a suite's ``executor:`` block that are Slurm's (the others are other executors')."""
_ARG_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_CNNBENCH_SETS = ("output", "error", "input", "chdir", "array", "wrap", "job-name", "parsable", "signal", "open-mode",
                  "requeue", "no-requeue")
"""sbatch options cnnbench (through submitit) sets itself: where a job's log goes (the store's
``.slurm/``, read back by ``--status``), the folder it runs in, the array and its name, the signal
before the time limit, and no requeue (a job Slurm ends is recorded as such, never rerun behind the
sweep's back). Given again, sbatch would write a job's log or run it elsewhere (``output:
/etc/passwd``, ``chdir: /``), submitit would not find its jobs, or a lost node's case would run
twice. sbatch takes a long option's unique beginning for it (``chd``), and submitit writes
``job_name`` as ``job-name``: both are refused too."""
NEEDS_VALUE = frozenset({
    "account", "acctg-freq", "batch", "bb", "begin", "clusters", "comment", "constraint", "container",
    "container-id", "container-image", "container-mounts", "container-name", "container-workdir", "core-spec",
    "cores-per-socket", "cpu-freq", "cpus-per-gpu", "cpus-per-task", "deadline", "delay-boot", "dependency",
    "distribution", "exclude", "export", "export-file", "extra", "gid", "gpu-bind", "gpu-freq", "gpus",
    "gpus-per-node", "gpus-per-socket", "gpus-per-task", "gres", "gres-flags", "hint", "kill-on-invalid-dep",
    "licenses", "mail-type", "mail-user", "mcs-label", "mem", "mem-bind", "mem-per-cpu", "mem-per-gpu",
    "mincpus", "network", "nodefile", "nodelist", "nodes", "ntasks", "ntasks-per-core", "ntasks-per-gpu",
    "ntasks-per-node", "ntasks-per-socket", "partition", "power", "prefer", "priority", "profile", "qos",
    "reservation", "resv-ports", "segment", "sockets-per-node", "switches", "thread-spec", "threads-per-core",
    "time", "time-min", "tmp", "tres-bind", "tres-per-task", "uid", "wckey",
})
"""sbatch options that take a value: one given alone (``--slurm-arg partition``) would be ``#SBATCH
--partition``, which sbatch refuses, so it is refused here in one line. Any other word given alone is
a flag (``exclusive``, ``contiguous``, ``hold``, ``stepmgr``, a plugin's such as Pyxis'
``container-writable``): ``#SBATCH --exclusive``."""
REFUSED_FLAGS = frozenset({"wait", "test-only"})
"""Flags a submit cannot take: with ``--wait`` sbatch returns when the job ends, ``--test-only``
submits nothing."""
_CNNBENCH_SHORT = frozenset("oeiDaJ")
"""Their one-letter forms."""


def _cnnbench_sets(key: str) -> bool:
    spelled = key.replace("_", "-")
    return key in _CNNBENCH_SHORT if len(key) == 1 else any(name.startswith(spelled) for name in _CNNBENCH_SETS)


class SettingsError(ValueError):
    """An option that Slurm cannot be given; the message names it."""


@dataclass(frozen=True)
class SlurmSettings:
    """Options of the jobs of one machine (or of every machine)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    mem: str | None = None
    startup_s: float | None = None
    time_min: int | None = None
    max_concurrent: int | None = None
    slurm_args: Mapping[str, str | bool] = field(default_factory=dict)

    def over(self, base: SlurmSettings) -> SlurmSettings:
        """These settings, what they leave unset taken from ``base`` (``slurm_args`` merged)."""
        values = {f.name: getattr(self, f.name) if getattr(self, f.name) is not None else getattr(base, f.name)
                  for f in dataclasses.fields(self) if f.name != "slurm_args"}
        return SlurmSettings(**values, slurm_args={**base.slurm_args, **self.slurm_args})


@dataclass(frozen=True)
class ExecutorBlock:
    """A suite's ``executor:`` block: options for every job, and per machine label."""

    default: SlurmSettings = field(default_factory=SlurmSettings)
    machines: Mapping[str, SlurmSettings] = field(default_factory=dict)

    def labels_for(self, label: str | None) -> list[str | None]:
        """The machine labels a case with ``label`` runs as: its own; with ``machines`` and no label,
        each of them; a label not listed, its own (the block's defaults apply)."""
        if label is None and self.machines:
            return list(self.machines)
        return [label]

    def for_label(self, label: str | None) -> SlurmSettings:
        own = self.machines.get(label) if label is not None else None
        return own.over(self.default) if own is not None else self.default


def parse_executor(value: Mapping[str, Any] | None) -> ExecutorBlock:
    """Slurm's part of a suite's ``executor:`` block (plain data from YAML), checked: its :data:`BLOCK_KEYS`
    only, the others being other executors' (the suite reader refused a key no executor owns);
    :class:`SettingsError` names the key."""
    value = {key: v for key, v in (value or {}).items() if key in BLOCK_KEYS}
    machines_raw = value.get("machines") or {}
    if not isinstance(machines_raw, Mapping):
        raise SettingsError("executor.machines: must map machine labels to their options")
    machines = {}
    for label, options in machines_raw.items():
        if not isinstance(label, str) or not label.strip():
            raise SettingsError(f"executor.machines: a machine label is non-empty text (got {quoted(label)})")
        machines[label] = parse_settings(options or {}, f"executor.machines.{shortened(label, 60)}")
    default = parse_settings({k: v for k, v in value.items() if k != "machines"}, "executor")
    return ExecutorBlock(default, machines)


def parse_settings(value: Any, place: str) -> SlurmSettings:
    if not isinstance(value, Mapping):
        raise SettingsError(f"{place}: must be a mapping of Slurm options")
    for key in value:
        if key not in KEYS:
            raise SettingsError(f"{place}: unknown key {quoted(key)} (known: {', '.join(KEYS)})")
    out: dict[str, Any] = {}
    for key in TEXT_OPTIONS:
        if value.get(key) is not None:
            out[key] = _text(value[key], f"{place}.{key}")
    if value.get("startup_s") is not None:
        out["startup_s"] = _number(value["startup_s"], f"{place}.startup_s", whole=False, most=MAX_TIME_MIN * 60)
    for key, most in (("time_min", MAX_TIME_MIN), ("max_concurrent", MAX_CONCURRENT)):
        if value.get(key) is not None:
            out[key] = int(_number(value[key], f"{place}.{key}", whole=True, most=most))
    out["slurm_args"] = slurm_args(value.get("slurm_args") or {}, f"{place}.slurm_args")
    return SlurmSettings(**out)


def slurm_args(value: Any, place: str) -> dict[str, str | bool]:
    """``{key: value}`` of sbatch options (``container-image: ...``), each key checked; ``True`` for
    an option given without a value (``exclusive``, ``--slurm-arg exclusive``): ``#SBATCH --exclusive``."""
    if isinstance(value, (list, tuple)):  # KEY=VALUE or KEY words (the command line's --slurm-arg)
        pairs: dict[str, Any] = {}
        for word in value:
            key, eq, val = str(word).partition("=")
            pairs[key.strip().lstrip("-")] = val if eq else True
        value = pairs
    if not isinstance(value, Mapping):
        raise SettingsError(f"{place}: must map sbatch options to values")
    out = {}
    for key, val in value.items():
        if not isinstance(key, str) or not _ARG_KEY.match(key):
            raise SettingsError(f"{place}: {quoted(key)} is not an sbatch option name (letters, digits, - and _)")
        if _cnnbench_sets(key):
            raise SettingsError(f"{place}: {key} is set by cnnbench (each job's log goes to the results folder's "
                                ".slurm/, where --status reads it)")
        if val is True and key.replace("_", "-") in NEEDS_VALUE:
            raise SettingsError(f"{place}: expected KEY=VALUE for {quoted(key)}, an sbatch option that takes a value")
        if val is True and key.replace("_", "-") in REFUSED_FLAGS:
            why = "sbatch would wait for the job to end" if key == "wait" else "nothing would be submitted"
            raise SettingsError(f"{place}: {key} is not for a submit: {why}")
        if val is False or val is None:
            raise SettingsError(f"{place}.{key}: an option given without a value is true (leave out one not wanted)")
        out[key] = True if val is True else _text(val, f"{place}.{key}")
    return out


def _text(value: Any, place: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or not str(value).strip():
        raise SettingsError(f"{place}: must be non-empty text (got {quoted(value)})")
    text = str(value).strip()
    if any(ord(c) < 32 or ord(c) == 127 for c in text):  # a line break, a carriage return, a NUL: no #SBATCH line
        raise SettingsError(f"{place}: must be one line of text, without control characters")
    return text


MAX_TIME_MIN = 366 * 24 * 60
"""The longest time limit asked of Slurm: a year (a time of 10**300 minutes is no limit Slurm takes)."""
MAX_CONCURRENT = 1_000_000
"""The most tasks of an array run at once (Slurm's own ``MaxArraySize`` is far lower)."""


def _number(value: Any, place: str, *, whole: bool, most: float) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and 0 < value <= most
    if not ok or (whole and value != int(value)):
        kind = "a whole number" if whole else "a number"
        raise SettingsError(f"{place}: must be {kind} > 0 and at most {most:,.0f} (got {quoted(value)})")
    return float(value)
