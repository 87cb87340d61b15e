"""Where results go (not part of what is measured, so not in the record's ``config``)."""

from __future__ import annotations

from dataclasses import dataclass

from cnnbench.config.options import option


@dataclass(frozen=True)
class OutputOptions:
    """output"""

    results_dir: str = option("results", "Folder of the results store.", recorded=False, metavar="DIR")
    machine_label: str | None = option(
        None,
        "Name of this machine in the results (default: derived from CPU and GPU names).",
        recorded=False,
        metavar="LABEL",
    )

    def check_output_options(self) -> None:
        pass
