"""How much of the host a run may use: its CPU cores.

``--host-cpus N`` restricts the whole run (the process that starts it, every worker and every
DataLoader worker) to N of the cores it may use, by CPU affinity, so that one machine can
stand in for hosts with fewer cores (a table of models × CPU cores from one machine). It is
applied by :func:`cnnbench.machine.affinity.restrict_host_cpus` before any work.
"""

from __future__ import annotations

from dataclasses import dataclass

from cnnbench.config.options import option

MAX_HOST_CPUS = 65536


@dataclass(frozen=True)
class HostOptions:
    """host"""

    host_cpus: int | None = option(
        None,
        "Restrict the whole run (this process, every worker and every DataLoader worker) to this many CPU "
        "cores by CPU affinity: the first N of the cores it may use [default: all of them].",
        metavar="N", minimum=1, maximum=MAX_HOST_CPUS,
    )

    def check_host_options(self) -> None:
        """The range is checked with the field; how many cores there are is the machine's to say."""
