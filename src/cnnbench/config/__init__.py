"""Configuration: one typed, validated tree; CLI flags and suite fields derive from it."""

from cnnbench.config.errors import ConfigError, flag_for
from cnnbench.config.run_config import RunConfig, config_fields, identity_fields

__all__ = ["ConfigError", "RunConfig", "config_fields", "flag_for", "identity_fields"]
