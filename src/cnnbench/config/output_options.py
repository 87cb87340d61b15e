"""Where results go (not part of what is measured, so not in the record's ``config``)."""

from __future__ import annotations

from dataclasses import dataclass

from cnnbench.config.errors import ConfigError
from cnnbench.config.options import option

MAX_MACHINE_LABEL = 128
"""Longest machine label: it names the results file (``<label>.jsonl``), and file names are short."""


def check_label_text(name: str, text: str) -> None:
    """A :class:`ConfigError` for a label that is not Unicode text: a byte of the command line that
    is not UTF-8 (Python keeps it as a lone surrogate), which a results store would read back as
    U+FFFD (:mod:`cnnbench.results.lines`), so the label would never match its own records."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigError(name, f"is not UTF-8 text (character {exc.start + 1} is a byte of another encoding); "
                                "name the machine in UTF-8") from None


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
        if not self.results_dir.strip():
            raise ConfigError("results_dir", "is empty; name a folder (the default is results)")
        if self.machine_label is not None:
            if not self.machine_label.strip():
                raise ConfigError("machine_label", "is empty; leave it out to name the machine from its CPU and GPU")
            if len(self.machine_label) > MAX_MACHINE_LABEL:
                raise ConfigError("machine_label", f"is {len(self.machine_label)} characters long; at most "
                                                   f"{MAX_MACHINE_LABEL} (it names the results file)")
            check_label_text("machine_label", self.machine_label)
