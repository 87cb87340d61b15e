"""The one error type for invalid configuration (defined in the leaf :mod:`cnnbench.errors`)."""

from cnnbench.errors import ConfigError, flag_for

__all__ = ["ConfigError", "flag_for"]
