"""What one case asks of Slurm: nodes, GPUs per node, CPUs, a time limit and the scheduler options.

``num_devices`` stays the world size; ``num_nodes`` (``nodes:`` in a suite) spreads it, so each
node gets ``num_devices / nodes`` devices (GPUs, on ``device: cuda``; a count that does not divide
is refused before anything is submitted). CPUs per task: ``host_cpus`` when the case sets it, else
one per worker plus its loader processes. The time limit: the suite's ``timeout_s`` plus the
start-up allowance, in whole minutes (Slurm's unit), unless the options give ``time_min``.
Cases with equal :class:`Resources` go in one job array. No torch here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cnnbench.sweep.slurm.settings import DEFAULT_STARTUP_S, MAX_TIME_MIN, SlurmSettings
from cnnbench.sweep.suite import Case, Suite


class ResourceError(ValueError):
    """A case Slurm cannot be asked for; the message names the case."""


@dataclass(frozen=True)
class Resources:
    """One job's request (hashable: cases with equal requests share a job array)."""

    nodes: int
    gpus_per_node: int
    cpus_per_task: int
    time_min: int
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    mem: str | None = None
    slurm_args: tuple[tuple[str, str | bool], ...] = ()

    def submitit_parameters(self) -> dict[str, object]:
        """:class:`submitit.SlurmExecutor` parameters (one task per node: a launcher each; ``--no-requeue``)."""
        params: dict[str, object] = {"nodes": self.nodes, "ntasks_per_node": 1, "cpus_per_task": self.cpus_per_task,
                                     "time": self.time_min}
        if self.gpus_per_node:
            params["gpus_per_node"] = self.gpus_per_node
        for key in ("partition", "account", "qos", "constraint", "mem"):
            if getattr(self, key) is not None:
                params[key] = getattr(self, key)
        # A job Slurm ends (a lost node) is recorded as such, not silently requeued; a preempted one
        # is submitted again by the next submit, once (cnnbench.sweep.slurm.follow).
        params["additional_parameters"] = {"no_requeue": True, **{k.replace("-", "_"): v for k, v in self.slurm_args}}
        return params

    def describe(self) -> str:
        gpus = f", {self.gpus_per_node} GPU(s)/node" if self.gpus_per_node else ""
        where = f" on {self.partition}" if self.partition else ""
        return f"{self.nodes} node(s){gpus}, {self.cpus_per_task} CPU(s), {self.time_min} min{where}"


def case_resources(suite: Suite, case: Case, settings: SlurmSettings) -> Resources:
    """The resources of ``case`` under ``settings`` (:class:`ResourceError` for a count that does not divide)."""
    config = case.config
    nodes = config.num_nodes or 1
    world = config.requested_devices()
    if world % nodes:
        raise ResourceError(f"{suite.where}: case {case.description}: num_devices {world} does not divide over "
                            f"{nodes} nodes (each node runs num_devices / nodes workers)")
    per_node = world // nodes
    gpus = per_node if config.device == "cuda" else 0
    loaders = config.num_workers or 0
    cpus = config.host_cpus or per_node * (1 + loaders)
    startup = settings.startup_s if settings.startup_s is not None else DEFAULT_STARTUP_S
    time_min = settings.time_min or max(1, math.ceil(min((suite.timeout_s + startup) / 60, MAX_TIME_MIN + 1)))
    if time_min > MAX_TIME_MIN:
        raise ResourceError(f"{suite.where}: timeout_s {suite.timeout_s:g} and the executor's startup_s {startup:g} "
                            f"make a time limit over a year; set executor.time_min (at most {MAX_TIME_MIN:,})")
    return Resources(nodes=nodes, gpus_per_node=gpus, cpus_per_task=cpus, time_min=time_min,
                     partition=settings.partition, account=settings.account, qos=settings.qos,
                     constraint=settings.constraint, mem=settings.mem,
                     slurm_args=tuple(sorted(settings.slurm_args.items())))
