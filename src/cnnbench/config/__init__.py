"""Configuration: one typed, validated tree; CLI flags, suite fields and the names of the choices derive from it.
Bottom layer, torch-free: imports only ``machine`` and the leaf modules (``cnnbench.errors``, ``cnnbench.words``).

The choices that implementations register against (``--variable-update``, ``--data-name``)
are named once in :mod:`~cnnbench.config.choices`; what each one takes and refuses is
declared in :mod:`~cnnbench.config.strategy_rules` and :mod:`~cnnbench.config.input_rules`.
"""

from cnnbench.config.errors import ConfigError, flag_for
from cnnbench.config.run_config import RunConfig, config_fields, identity_fields

__all__ = ["ConfigError", "RunConfig", "config_fields", "flag_for", "identity_fields"]
