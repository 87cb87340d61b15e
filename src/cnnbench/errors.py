"""The one error type for invalid configuration.

A leaf module (no cnnbench imports), so that every layer can raise it, ``machine`` below
``config`` included; :mod:`cnnbench.config.errors` is its home for the rest of the code.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """An invalid option value or combination, found before any work starts.

    ``field`` is the configuration field at fault (``batch_size``); ``flag`` spells it
    as the command line does (``--batch-size``), so messages read the way users typed.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.reason = message  # what is wrong, without the flag (for messages that name the field otherwise)
        super().__init__(f"{flag_for(field)}: {message}")

    @property
    def flag(self) -> str:
        return flag_for(self.field)


def flag_for(field: str) -> str:
    """``batch_size`` -> ``--batch-size``."""
    return "--" + field.replace("_", "-")
