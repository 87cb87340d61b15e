"""How long ``cnnbench sweep --executor slurm`` takes to submit, show and cancel many cases (issue 23).

    .venv/bin/python benchmarks/slurm_submit.py --cases 1000

Starts the tests' local Slurm cluster (tests/slurm_cluster.py; as root, Debian's slurm-wlm,
slurmdbd, munge, mariadb-server), or uses the one ``SLURM_CONF`` names. The suite's cases are
submitted held back (``--slurm-arg begin=now+1hour``), so that the cluster runs none of them and
the figures are the submit's own; then ``--status`` (all pending), then ``--cancel``. Each step is
the command as a user types it, timed from outside (a fresh interpreter each).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, out.stdout


def measure(cases: int, env: dict[str, str], folder: Path) -> None:
    suite = folder / "many.yaml"
    suite.write_text(yaml.safe_dump({
        "name": "many", "timeout_s": 60, "executor": {"time_min": 2},
        "base": {"model": "trivial", "device": "cpu", "num_batches": 2, "image_size": 32},
        "matrix": {"batch_size": list(range(1, cases + 1))}}))
    cnnbench = [sys.executable, "-m", "cnnbench", "sweep", str(suite), "--results-dir", str(folder / "results")]
    version = subprocess.run(["sinfo", "--version"], env=env, capture_output=True, text=True).stdout.strip()
    submit_s, out = timed([*cnnbench, "--executor", "slurm", "--slurm-arg", "begin=now+1hour"], env)
    print(out.strip().splitlines()[-2])
    status_s, out = timed([*cnnbench, "--status"], env)
    print(out.strip().splitlines()[-1])
    cancel_s, out = timed([*cnnbench, "--cancel"], env)
    print(out.strip().splitlines()[0][:80])
    print(f"{version}, {cases} cases: submit {submit_s:.2f} s, --status {status_s:.2f} s, --cancel {cancel_s:.2f} s "
          "(each a fresh `cnnbench` process)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cnnbench-slurm-bench-") as tmp:
        if os.environ.get("SLURM_CONF"):
            measure(args.cases, dict(os.environ), Path(tmp))
            return
        from tests.slurm_cluster import SlurmCluster

        cluster = SlurmCluster()
        try:
            cluster.start()
            measure(args.cases, cluster.env, Path(tmp))
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
