"""A case over several nodes: one Slurm job of N nodes, one launcher per node, workers meeting in a rendezvous.

``srun`` (through submitit, one task per node) runs :func:`~cnnbench.sweep.slurm.job.run_job` on
every node; for a case with ``nodes > 1`` each of them calls :func:`run_nodes`, which starts
torch's elastic launcher (``python -m torch.distributed.run``, what ``torchrun`` is) for that
node's ``num_devices / nodes`` workers. The launchers meet through torchrun's c10d rendezvous on
the first node: its task picks a free port, hosts the store and leaves ``host:port`` in the job's
folder, where the other nodes' tasks read it. Each worker runs the case as ``cnnbench run`` does
under torchrun (:func:`cnnbench.engine.multidevice.worker.run_under_torchrun`): rank 0 appends
the record (a worker that fails is recorded by rank 0, naming its rank), which names every node
(``slurm.node_names``). Past the suite's ``timeout_s`` the first node stops its launcher and
records ``timeout``; the other launchers end with the rendezvous.
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cnnbench.results import files
from cnnbench.results.record import Record
from cnnbench.results.store import append_record
from cnnbench.sweep.slurm.ledger import FOLDER, read_job_file
from cnnbench.sweep.suite import Suite

RENDEZVOUS_WAIT_S = 600.0


def node_names() -> list[str]:
    """Every node of the job (``scontrol show hostnames``), else the node list as Slurm wrote it."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST", "")
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=60)
        names = out.stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        names = []
    return names or [nodelist or socket.gethostname()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _endpoint(root: Path, names: tuple[str, ...], first: bool) -> str:
    """The rendezvous endpoint: chosen and written by the first node's task, read by the others
    (``root``: the store; ``names``: the real folders in its ``.slurm/`` that hold the file)."""
    path = root.joinpath(FOLDER, *names, "rendezvous")
    if first:
        endpoint = f"{socket.gethostname()}:{_free_port()}"
        files.write_replacing(path, endpoint.encode(), root)
        return endpoint
    end = time.monotonic() + RENDEZVOUS_WAIT_S
    while time.monotonic() < end:
        # read as the store's files are: never through a link, never waited on (a FIFO)
        data = read_job_file(root, *names, path.name, most=4096)
        if data:
            return data.decode("utf-8", errors="replace")
        time.sleep(0.2)
    raise TimeoutError(f"the first node did not write {path} within {RENDEZVOUS_WAIT_S:g} s")


def run_nodes(suite: Suite, results_dir: str, section: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """This node's launcher of the case (see the module documentation); what happened, for submitit."""
    (case,) = suite.cases
    config = case.config.replace(results_dir=results_dir)
    nodes = config.num_nodes or 1
    rank = int(os.environ.get("SLURM_PROCID", "0"))
    root = Path(results_dir)
    names = ("nodes", section["job_id"])
    folder = files.real_folder_inside(root, FOLDER, *names)  # real folders, never links
    endpoint = _endpoint(root, names, rank == 0)
    spec = folder / f"case.{rank}.pickle"
    files.write_replacing(spec, pickle.dumps((config, {**extra, "slurm": {**section, "node_names": node_names()}})),
                          root)
    command = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nodes}",
               f"--nproc-per-node={config.requested_devices() // nodes}", "--rdzv-backend=c10d",
               f"--rdzv-endpoint={endpoint}", f"--rdzv-id=cnnbench-{section['job_id']}",
               f"--rdzv-conf=is_host={1 if rank == 0 else 0}", "-m", "cnnbench.sweep.slurm.node_worker", str(spec)]
    started = time.monotonic()
    try:
        code = subprocess.run(command, timeout=suite.timeout_s).returncode
    except subprocess.TimeoutExpired:
        if rank == 0:
            append_record(results_dir, Record(
                config=config.recorded(), environment={"machine": config.machine_label or "unknown",
                                                       "hostname": socket.gethostname()},
                metrics={}, status="timeout",
                error=f"the case ran past its time limit of {suite.timeout_s:g} s on {nodes} nodes and was stopped",
                extra={**extra, "slurm": {**section, "node_names": node_names()}}).to_dict())
        return {"status": "timeout", "node_rank": rank}
    return {"exit_code": code, "node_rank": rank, "seconds": time.monotonic() - started}
