"""``python -m cnnbench.sweep.slurm.node_worker CASE.pickle``: one torchrun worker of a multi-node case.

Started by torch's elastic launcher on each node (:mod:`cnnbench.sweep.slurm.multinode`); runs its
part of the case as ``cnnbench run`` does under torchrun. Rank 0 appends the record (or the
failure of any rank); an exception leaves with a non-zero status, which torchrun reports.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path


def main(path: str) -> int:
    from cnnbench.engine.multidevice.worker import run_under_torchrun

    config, extra = pickle.loads(Path(path).read_bytes())
    run_under_torchrun(config, emit=lambda line: print(line, flush=True), extra=extra)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
