"""The strategies (``--variable-update``), declared: each one's name and what it takes, refuses and is.

This is where a strategy is registered, torch-free: its name in :data:`VariableUpdate`, and its
:class:`DeclaredStrategy` in :data:`STRATEGY_RULES`: the name, the options that apply to it
alone, its own rules (checked before anything runs), its words in ``--variable-update``'s help,
and the pattern of its exchange that ``cnnbench predict`` models (:data:`Exchange`). The strategy
of :mod:`cnnbench.distributed` that implements the name, in a module of that package (which
:func:`~cnnbench.distributed.strategy.registered_strategies` finds by itself), declares it as
its ``declared``: the rules are read next to it, and stay torch-free for the configuration, which
sits below ``distributed``. The options a strategy takes and leaves unset get their values from
the same declaration (:func:`strategy_defaults`).
:meth:`~cnnbench.config.parallel_options.ParallelOptions.check_parallel_options` applies them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from cnnbench.config.choices import Declared
from cnnbench.config.errors import ConfigError

VariableUpdate = Literal["replicated", "parameter_server", "independent", "fsdp"]
VARIABLE_UPDATES: tuple[VariableUpdate, ...] = get_args(VariableUpdate)
"""The strategies, in the order ``--help`` lists them (each has its declaration in :data:`STRATEGY_RULES`)."""

Exchange = Literal["none", "bucketed_all_reduce", "parameter_server", "sharded"]
"""How a strategy's workers exchange, as ``cnnbench predict`` models it (:mod:`cnnbench.predict.model`
has a formula for each): ``none``, nothing; ``bucketed_all_reduce``, gradients all-reduced in buckets
as the backward pass fills them (DDP); ``parameter_server``, gradients to one master copy of the
weights and the weights back; ``sharded``, weights all-gathered before the forward and the backward
pass, gradients reduce-scattered after it (FSDP)."""
EXCHANGES: tuple[Exchange, ...] = get_args(Exchange)


@dataclass(frozen=True, kw_only=True)
class DeclaredStrategy(Declared[VariableUpdate]):
    """One strategy's declaration: a :class:`~cnnbench.config.choices.Declared`, with what the
    strategy is in ``--variable-update``'s help and in ``cnnbench predict``."""

    help: str
    """What it does, in the parentheses after its name in ``--variable-update``'s help."""
    exchange: Exchange
    """The pattern of its exchange, which ``cnnbench predict`` models."""


DDP_OPTIONS = ("bucket_cap_mb", "gradient_as_bucket_view", "static_graph", "gradient_compression",
               "broadcast_buffers")
"""DistributedDataParallel's knobs: options of ``replicated`` alone."""
ON_UNLESS_TURNED_OFF = frozenset({"broadcast_buffers"})
"""Switches on by default (as in DDP): given when turned off; recorded as None where they do not apply."""
STRATEGY_OPTIONS = ("all_reduce", "local_parameter_device", *DDP_OPTIONS)
"""Every option that applies to some strategies only, in the order they are checked."""
DEFAULT_BUCKET_CAP_MB = 25.0  # DistributedDataParallel's own default
POWERSGD_MIN_WARMUP = 3
"""PowerSGD starts compressing at the last warm-up step, which torch requires to be step 2 or later
(``start_powerSGD_iter > 1``, steps counted from 0): so 3 warm-up steps or more."""

OPTION_DEFAULTS: dict[str, Callable[[str], Any]] = {
    "all_reduce": lambda device_kind: {"cuda": "nccl", "cpu": "gloo"}.get(device_kind),
    "local_parameter_device": lambda device_kind: "device",
    "bucket_cap_mb": lambda device_kind: DEFAULT_BUCKET_CAP_MB,
    "gradient_compression": lambda device_kind: "none",
}
"""What a strategy option left unset is, on a device kind, wherever the run's strategy takes it
(``None``: left unset, as the back end while ``--device auto`` is undecided). Switches (off when
unset) need no entry."""

_REFUSALS = {
    "all_reduce": "{vu} workers exchange nothing, so there is no all-reduce",
    "local_parameter_device": "applies to --variable-update {owners} (got {vu})",
    **{name: "is an option of DistributedDataParallel: applies to --variable-update {owners} (got {vu})"
       for name in DDP_OPTIONS},
    "broadcast_buffers": "off (--no-broadcast-buffers) is an option of DistributedDataParallel: applies to "
                         "--variable-update {owners} (got {vu})",
}


def given(config: Any, name: str) -> bool:
    """Whether an option was set (not left ``None``, and not a switch left off)."""
    value = getattr(config, name)
    if name in ON_UNLESS_TURNED_OFF:
        return value is False
    return value is not None and value is not False


def _replicated(config: Any) -> None:
    if config.forward_only:
        for name in DDP_OPTIONS:
            if given(config, name):
                raise ConfigError(name, "has no effect with --forward-only (no gradients to exchange)")
    if config.gradient_compression == "powersgd" and config.warmup_steps() < POWERSGD_MIN_WARMUP:
        if getattr(config, "num_epochs", None) is not None:
            raise ConfigError("gradient_compression", f"powersgd needs {POWERSGD_MIN_WARMUP} or more warm-up "
                                                      "steps, which a --num-epochs run does not have")
        raise ConfigError("num_warmup_batches", f"must be >= {POWERSGD_MIN_WARMUP} with --gradient-compression "
                                                "powersgd (PowerSGD starts compressing at the last warm-up step, "
                                                "which torch requires to be step 2 or later, counting from 0)")


def _parameter_server(config: Any) -> None:
    if config.forward_only:
        raise ConfigError("variable_update", "parameter_server updates weights; with --forward-only "
                                             "there are no gradients to send to it (use replicated)")
    if config.device == "cpu" and config.local_parameter_device == "cpu":
        raise ConfigError("local_parameter_device", "has no effect on a CPU run: rank 0's device is the CPU, "
                                                    "so the master weights are in host memory either way")
    if config.precision == "amp_fp16":
        raise ConfigError("precision", "amp_fp16's gradient scaler is not built for parameter_server; "
                                       "use amp_bf16, bf16 or fp32")


def _fsdp(config: Any) -> None:
    if config.data_format == "NHWC":
        raise ConfigError("data_format", "NHWC keeps weights channels_last, which FSDP2 cannot shard (it "
                                         "holds each weight as a contiguous flat shard); use NCHW with "
                                         "--variable-update fsdp")


def _independent(config: Any) -> None:
    if getattr(config, "lr_scaling", None) == "linear":
        raise ConfigError("lr_scaling", "linear follows the global batch, and independent trains one model per "
                                        "device on its own batch: the batch a model sees does not grow with the "
                                        "device count (use none)")


REPLICATED = DeclaredStrategy(("replicated",), ("all_reduce", *DDP_OPTIONS), _replicated, training_only=DDP_OPTIONS,
                              help="DistributedDataParallel: gradients all-reduced", exchange="bucketed_all_reduce")
PARAMETER_SERVER = DeclaredStrategy(("parameter_server",), ("all_reduce", "local_parameter_device"), _parameter_server,
                                    help="one master copy of the weights on rank 0's --local-parameter-device: "
                                         "gradients reduced to it, updated weights broadcast back",
                                    exchange="parameter_server")
INDEPENDENT = DeclaredStrategy(("independent",), validate=_independent,
                               help="no exchange: the upper bound of scaling", exchange="none")
FSDP = DeclaredStrategy(("fsdp",), ("all_reduce",), _fsdp, help="FSDP2: weights sharded", exchange="sharded")

STRATEGY_RULES: dict[VariableUpdate, DeclaredStrategy] = {
    d.name: d for d in (REPLICATED, PARAMETER_SERVER, INDEPENDENT, FSDP)
}
"""Every strategy's declaration, by name, in the order of :data:`VARIABLE_UPDATES`."""


def strategies_help() -> str:
    """Every strategy with its line of help, in ``--help``'s order: ``name (help), ...``."""
    return ", ".join(f"{name} ({STRATEGY_RULES[name].help})" for name in VARIABLE_UPDATES)


def check_strategy_options(config: Any) -> None:
    """The options of other strategies refused, then the run's strategy's own rules."""
    vu = config.variable_update
    declared = STRATEGY_RULES[vu]
    for name in STRATEGY_OPTIONS:
        if given(config, name) and name not in declared.options:
            owners = " / ".join(d.name for d in STRATEGY_RULES.values() if name in d.options)
            raise ConfigError(name, _REFUSALS[name].format(vu=vu, owners=owners))
    declared.validate(config)


def strategy_defaults(config: Any, device_kind: str, forward_only: bool) -> dict[str, Any]:
    """The values of the options the run's strategy takes (its ``declared.options``) that were left
    unset, from :data:`OPTION_DEFAULTS`; with ``forward_only``, not those of training alone."""
    declared = STRATEGY_RULES[config.variable_update]
    filled: dict[str, Any] = {}
    for name in declared.options:
        if getattr(config, name) is not None or name not in OPTION_DEFAULTS:
            continue
        if forward_only and name in declared.training_only:
            continue
        value = OPTION_DEFAULTS[name](device_kind)
        if value is not None:
            filled[name] = value
    for name in ON_UNLESS_TURNED_OFF:  # the record says null where the switch does nothing
        unused = name not in declared.options or (forward_only and name in declared.training_only)
        if unused and getattr(config, name) is not None:
            filled[name] = None
    return filled
