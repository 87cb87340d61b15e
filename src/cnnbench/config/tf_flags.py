"""tf_cnn_benchmarks' command-line vocabulary, translated to cnnbench's.

Users bring command lines like ``--num_gpus=8 --use_fp16 --variable_update=replicated
--all_reduce_spec=nccl --nodistortions``. :func:`translate` turns such arguments into
cnnbench's own flags before they are parsed, so the record holds cnnbench's fields
(``num_devices``, ``precision: amp_fp16``, ...):

* every spelling absl allows: ``--flag=value``, ``--flag value``, ``--flag`` and ``--noflag``
  for booleans, ``--flag=true|false`` (also ``True``, ``1``, ``0``); for cnnbench's own
  switches too (``--forward-only=false``);
* tf's names and values that have a counterpart are mapped (:data:`TF_FLAGS`);
* a tf flag whose feature cnnbench has not built is one :class:`TfFlagError` line saying
  so; one that only tunes TensorFlow itself is left out, with a note.

No torch here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cnnbench.config.options import field_types
from cnnbench.config.run_config import RunConfig
from cnnbench.config.strategy_rules import VARIABLE_UPDATES
from cnnbench.words import plural

_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}


class TfFlagError(ValueError):
    """A tf_cnn_benchmarks flag that cannot be honoured here (one line)."""


@dataclass(frozen=True)
class TfFlag:
    """How one tf_cnn_benchmarks flag becomes cnnbench arguments."""

    translate: Callable[[str], list[str]]
    """From the flag's value (``"true"``/``"false"`` for booleans) to cnnbench arguments."""
    boolean: bool = False


def _value(flag: str, mapping: dict[str, str] | None = None) -> TfFlag:
    """``--flag value`` as cnnbench's ``flag``; ``mapping`` renames tf's values (``gpu`` → ``cuda``).

    Values the mapping does not name pass through unchanged: they may be cnnbench's own
    (``--device cuda``, ``--local-parameter-device device``), and the parser names the
    allowed values when they are not.
    """
    def translate(value: str) -> list[str]:
        if mapping is None:
            return [flag, value]
        return [flag, mapping.get(value.strip().lower(), value)]
    return TfFlag(translate)


def _switch(on: list[str], off: list[str]) -> TfFlag:
    return TfFlag(lambda value: on if _boolean(value) else off, boolean=True)


def _not_built(why: str) -> TfFlag:
    def translate(value: str) -> list[str]:
        raise TfFlagError(why)
    return TfFlag(translate)


def _whole_epochs(value: str) -> list[str]:
    number = float(value)
    if number != int(number) or number < 1:
        raise TfFlagError(f"--num_epochs={value}: cnnbench trains whole epochs (1 or more)")
    return ["--num-epochs", str(int(number))]


def _all_reduce_spec(value: str) -> list[str]:
    spec = value.strip().lower()
    if spec in ("nccl", "gloo"):
        return ["--all-reduce", spec]
    raise TfFlagError(f"--all_reduce_spec={value}: cnnbench all-reduces through torch.distributed back ends: "
                      "nccl or gloo (--all-reduce)")


_ACROSS_MACHINES = ("runs across machines in TensorFlow's own way; here run `cnnbench run` under torchrun on "
                    "every machine with --variable-update replicated")


def _variable_update(value: str) -> list[str]:
    key = value.strip().lower()
    if key in VARIABLE_UPDATES:  # tf's values, and cnnbench's own fsdp (--variable-update passes here too)
        return ["--variable-update", key]
    if key in ("distributed_replicated", "distributed_all_reduce", "collective_all_reduce", "horovod"):
        raise TfFlagError(f"--variable_update={value} {_ACROSS_MACHINES}")
    raise TfFlagError(f"--variable_update={value}: cnnbench takes parameter_server, replicated, independent "
                      "(or fsdp: --variable-update fsdp)")


def _resize_method(value: str) -> list[str]:
    key = value.strip().lower()
    if key in ("round_robin", "area"):
        raise TfFlagError(f"--resize_method={value}: cnnbench resizes with bilinear, bicubic or nearest "
                          "(--resize-method)")
    return ["--resize-method", key]


def _fixed(flag: str, value_we_use: float, what: str) -> TfFlag:
    def translate(value: str) -> list[str]:
        if float(value) == value_we_use:
            return []
        raise TfFlagError(f"--{flag}={value}: cnnbench's {what} is fixed at {value_we_use:g} (not built as an option)")
    return TfFlag(translate)


# tf_cnn_benchmarks flags with a counterpart, or a one-line reason why not.
TF_FLAGS: dict[str, TfFlag] = {
    "num_gpus": _value("--num-devices"),
    "device": _value("--device", {"gpu": "cuda", "cpu": "cpu", "cuda": "cuda", "auto": "auto"}),
    "use_fp16": _switch(["--precision", "amp_fp16"], ["--precision", "fp32"]),
    "xla": _switch(["--compile"], []),
    "xla_compile": _switch(["--compile"], []),
    "local_parameter_device": _value("--local-parameter-device", {"gpu": "device", "cpu": "cpu", "device": "device"}),
    "all_reduce_spec": TfFlag(_all_reduce_spec),
    "variable_update": TfFlag(_variable_update),
    "num_epochs": TfFlag(_whole_epochs),
    "resize_method": TfFlag(_resize_method),
    "train_dir": _value("--results-dir"),
    "init_learning_rate": _value("--learning-rate"),
    "tf_random_seed": _value("--seed"),
    "rmsprop_momentum": _value("--momentum"),
    "rmsprop_decay": _fixed("rmsprop_decay", 0.9, "RMSprop decay"),
    "rmsprop_epsilon": _fixed("rmsprop_epsilon", 1.0, "RMSprop epsilon"),
    "eval": _not_built("--eval: evaluation-only runs are not built; --num-epochs evaluates after every epoch"),
    "trace_file": _not_built("--trace_file: a TensorFlow timeline; use --profile-steps N (a torch.profiler "
                             "Chrome trace in the results folder)"),
    "use_chrome_trace_format": _not_built("--use_chrome_trace_format: --profile-steps N writes Chrome trace "
                                          "JSON already"),
    "piecewise_learning_rate_schedule": _not_built(
        "--piecewise_learning_rate_schedule is not built; use --num-epochs-per-decay and "
        "--learning-rate-decay-factor"),
    "minimum_learning_rate": _not_built("--minimum_learning_rate is not built"),
    "gradient_clip": _not_built("--gradient_clip is not built"),
    "num_intra_threads": _not_built("--num_intra_threads: cnnbench splits the host's cores among workers "
                                    "itself (torch threads)"),
    "job_name": _not_built(f"--job_name {_ACROSS_MACHINES}"),
    "ps_hosts": _not_built(f"--ps_hosts {_ACROSS_MACHINES}"),
    "worker_hosts": _not_built(f"--worker_hosts {_ACROSS_MACHINES}"),
    "task_index": _not_built(f"--task_index {_ACROSS_MACHINES}"),
    "controller_host": _not_built(f"--controller_host {_ACROSS_MACHINES}"),
    "horovod_device": _not_built(f"--horovod_device {_ACROSS_MACHINES}"),
    "fp16_loss_scale": _not_built("--fp16_loss_scale: amp_fp16 scales the loss dynamically "
                                  "(torch.amp.GradScaler); a fixed scale is not built"),
    "fp16_vars": _not_built("--fp16_vars: use --precision fp16 (weights and inputs in float16)"),
}

# tf_cnn_benchmarks flags that tune TensorFlow itself (its graph, runtime, input pipeline,
# summaries and checkpoints): they change nothing cnnbench measures, so a command line that
# carries them still runs, with a note that they were left out.
TENSORFLOW_TUNING = frozenset({
    "autotune_threshold", "display_perf_ewma", "use_datasets", "input_preprocessor", "gpu_thread_mode",
    "per_gpu_thread_count", "hierarchical_copy", "gradient_repacking", "compact_gradient_transfer",
    "variable_consistency", "num_inter_threads", "use_numa_affinity", "tfprof_file", "graph_file",
    "partitioned_graph_file_prefix", "gpu_memory_frac_for_testing", "use_unified_memory", "timestamped_allocator",
    "gpu_kt_max_interval", "gpu_kt_max_bytes", "gpu_kt_max_pending", "use_tf_layers", "debugger",
    "use_python32_barrier", "datasets_use_prefetch", "datasets_prefetch_buffer_size",
    "datasets_num_private_threads", "datasets_use_caching", "datasets_parallel_interleave_cycle_length",
    "datasets_sloppy_parallel_interleave", "datasets_parallel_interleave_prefetch", "winograd_nonfused",
    "sync_on_finish", "staged_vars", "force_gpu_compatible", "allow_growth", "fuse_decode_and_crop",
    "enable_optimizations", "rewriter_config", "single_l2_loss_op", "use_resource_vars", "compute_lr_on_cpu",
    "sparse_to_dense_grads", "mkl", "kmp_blocktime", "kmp_affinity", "kmp_settings", "agg_small_grads_max_bytes",
    "agg_small_grads_max_group", "allreduce_merge_scope", "server_protocol", "cross_replica_sync",
    "summary_verbosity", "save_summaries_steps", "save_model_secs", "save_model_steps", "max_ckpts_to_keep",
    "eval_dir", "benchmark_log_dir", "benchmark_test_id", "loss_type_to_report", "batch_group_size",
    "print_training_accuracy", "freeze_when_forward_only",
})

# tf_cnn_benchmarks features cnnbench has not built: one line says so.
NOT_BUILT = frozenset({
    "eval_interval_secs", "eval_during_training_every_n_steps", "eval_during_training_every_n_epochs",
    "eval_during_training_at_specified_steps", "eval_during_training_at_specified_epochs", "eval_batch_size",
    "num_eval_batches", "num_eval_epochs", "stop_at_top_1_accuracy", "collect_eval_results_async",
    "resnet_base_lr", "adam_beta1", "adam_beta2", "adam_epsilon", "fp16_enable_auto_loss_scale",
    "fp16_inc_loss_scale_every_n", "trt_mode", "trt_max_workspace_size_bytes", "ml_perf",
    "datasets_repeat_cached_sample", "distort_color_in_yiq", "backbone_model_path",
})


@dataclass(frozen=True)
class _Typed:
    """A flag as the user typed it (``--data_name=cifar10``, ``--data-name cifar10``), its name
    (``data_name``, ``data-name``) and its value."""

    text: str
    name: str
    value: str


@dataclass
class Translation:
    """cnnbench arguments, and notes on what tf's flags meant here."""

    args: list[str]
    notes: list[str] = dataclasses.field(default_factory=list)
    gpus_without_device: _Typed | None = None
    """tf's ``--num_gpus``, given without ``--device``: GPUs are meant (see :func:`check_machine`)."""

    def check_machine(self) -> None:
        """Refuse (one line) what this machine cannot honour: ``--num_gpus`` without a GPU here,
        unless ``--device=cpu`` asks for CPU workers (tf's flag counts GPUs; running CPU workers
        instead would be a silent change of what is measured)."""
        if self.gpus_without_device is not None:
            _check_gpus(self.gpus_without_device)


_TRAINING_ONLY = ("optimizer", "learning_rate", "momentum", "weight_decay")


def translate(argv: Sequence[str]) -> list[str]:
    """cnnbench arguments for ``argv`` written with tf_cnn_benchmarks' names and forms."""
    return translate_with_notes(argv).args


def translate_with_notes(argv: Sequence[str]) -> Translation:
    """:func:`translate`, with notes for the user.

    ``--forward_only`` spelled as tf spells it keeps tf's meaning where cnnbench is stricter:
    training options given with it are left out, as tf ignores them, and a note says so, naming
    each as it was typed (``--forward-only``, cnnbench's spelling, refuses them, whatever the
    spelling of the other flags).
    """
    args, ignored, gpus = _translate(argv)
    notes: list[str] = []
    if ignored:
        notes.append(f"left out TensorFlow-only tuning flags, which change nothing cnnbench measures: "
                     f"{', '.join(ignored)}")
    tf_style = any(t.partition("=")[0] == "--forward_only" for t in argv)
    typed = {t.partition("=")[0][2:].replace("-", "_"): t.partition("=")[0] for t in argv if t.startswith("--")}
    if tf_style and "--forward-only" in args:
        kept: list[str] = []
        i = 0
        while i < len(args):
            flag = args[i].partition("=")[0]
            name = flag[2:].replace("-", "_") if flag.startswith("--") else ""
            if name in _TRAINING_ONLY:
                notes.append(f"{typed.get(name, flag)} is not used with --forward_only (tf_cnn_benchmarks ignores "
                             "it too); the record says null")
                i += 1 if "=" in args[i] else 2
                continue
            kept.append(args[i])
            i += 1
        args = kept
    return Translation(args, notes, gpus)


@dataclass
class _Scan:
    """What :func:`_translate` gathers while it reads the flags."""

    ours: set[str]  # cnnbench run's fields
    booleans: set[str]  # its switches
    out: list[str] = dataclasses.field(default_factory=list)
    ignored: list[str] = dataclasses.field(default_factory=list)
    data_name: _Typed | None = None
    data_dir_flag: str | None = None
    device_given: bool = False
    gpus: _Typed | None = None


def _translate(argv: Sequence[str]) -> tuple[list[str], list[str], _Typed | None]:
    types = field_types(RunConfig)
    scan = _Scan(ours={f.name for f in dataclasses.fields(RunConfig)},
                 booleans={name for name, (base, _) in types.items() if base is bool})
    i = 0
    while i < len(argv):
        token = argv[i]
        read = _read_flag(argv, i + 1, token, scan)
        if read is None:
            scan.out.append(token)  # not a flag, a flag without its value, or unknown: argparse names it
            i += 1
            continue
        key, name, value, eq, i = read
        _take(scan, key, name, value, token, token if eq else f"{token} {value}")
    if scan.data_name is not None:
        scan.out += _data_name(scan.data_name, scan.data_dir_flag)
    return scan.out, scan.ignored, (scan.gpus if not scan.device_given else None)


def _read_flag(argv: Sequence[str], i: int, token: str,
               scan: _Scan) -> tuple[str, str, str, bool, int] | None:
    """``(key, name, value, given inline, index of the next token)`` of the flag at ``token``
    (its value may be the next token, from ``argv[i]``); None for a token passed on as it is."""
    if not token.startswith("--") or token == "--":
        return None
    name, eq, inline = token[2:].partition("=")
    key = name.replace("-", "_")
    negated = key.startswith("no") and (key[2:] in scan.booleans or key[2:] in _TF_BOOLEANS)
    if negated:
        if eq:
            raise TfFlagError(f"--{name} takes no value (got {token!r})")
        return key[2:], name, "false", True, i
    if eq:
        return key, name, inline, True, i
    if key in scan.booleans or key in _TF_BOOLEANS:
        return key, name, "true", False, i
    if key in TF_FLAGS or key in scan.ours:
        if i >= len(argv):
            return None  # argparse says what is missing
        return key, name, argv[i], False, i + 1
    if key in TENSORFLOW_TUNING or key in NOT_BUILT:
        if i < len(argv) and not argv[i].startswith("--"):
            return key, name, argv[i], False, i + 1
        return key, name, inline, False, i
    return None


def _take(scan: _Scan, key: str, name: str, value: str, token: str, typed: str) -> None:
    """Add one flag's translation to ``scan`` (``typed``: the flag and its value as typed)."""
    if key == "data_name":
        scan.data_name = _Typed(typed, name, value)
        return  # decided at the end, when --data_dir is known
    if key == "data_dir":
        scan.data_dir_flag = "--" + name
    if key == "device":
        scan.device_given = True
    if key == "num_gpus":
        scan.gpus = _Typed(typed, name, value)
    if key in TF_FLAGS:
        try:
            scan.out += TF_FLAGS[key].translate(value)
        except _BadBoolean as exc:
            raise TfFlagError(f"--{name}: {exc}") from None
    elif key in NOT_BUILT:
        raise TfFlagError(f"--{name}: this tf_cnn_benchmarks feature is not built in cnnbench")
    elif key in TENSORFLOW_TUNING:
        scan.ignored.append(f"--{key}")
    elif key in scan.booleans:
        try:
            on = _boolean(value)
        except _BadBoolean as exc:
            raise TfFlagError(f"--{name}: {exc}") from None
        if on:
            scan.out.append("--" + key.replace("_", "-"))
    elif key in scan.ours:
        flag = "--" + key.replace("_", "-")
        scan.out += [f"{flag}={value}"] if value.startswith("-") else [flag, value]  # -inf is no flag
    else:
        scan.out.append(token)


def _data_name(flag: _Typed, data_dir_flag: str | None) -> list[str]:
    """tf names the data set even for synthetic input (``--data_name=imagenet`` shapes it)."""
    key = flag.value.strip().lower()
    if data_dir_flag is None:
        if key == "imagenet":
            return []  # synthetic ImageNet-shaped input is cnnbench's own default
        data_dir = "--data_dir" if "_" in flag.name else "--data-dir"
        raise TfFlagError(f"{flag.text} without {data_dir}: the data set is read from a folder (give "
                          f"{data_dir} DIR); synthetic input here is ImageNet-shaped (for CIFAR-sized synthetic "
                          "input use --image-size 32)")
    return ["--data-name", "imagefolder" if key == "imagenet" else key]


def _check_gpus(flag: _Typed) -> None:
    """tf's ``--num_gpus`` counts GPUs: without one here, CPU workers must be asked for (``--device=cpu``),
    not started silently."""
    from cnnbench.machine.devices import cuda_available

    if cuda_available():
        return
    try:
        count = int(flag.value)
    except ValueError:
        return  # no count: the run's parser names the bad value
    spelled = "--device=cpu" if "_" in flag.name else "--device cpu"
    raise TfFlagError(f"{flag.text}: this machine has no CUDA GPU (tf_cnn_benchmarks' --num_gpus counts GPUs); "
                      f"add {spelled} to run {plural(count, 'CPU worker')}")


_TF_BOOLEANS = frozenset({
    "use_fp16", "xla", "xla_compile", "eval", "use_chrome_trace_format", "use_datasets", "hierarchical_copy",
    "compact_gradient_transfer", "use_numa_affinity", "use_unified_memory", "timestamped_allocator", "use_tf_layers",
    "use_python32_barrier", "datasets_use_prefetch", "datasets_use_caching", "datasets_sloppy_parallel_interleave",
    "winograd_nonfused", "sync_on_finish", "staged_vars", "force_gpu_compatible", "allow_growth",
    "fuse_decode_and_crop", "enable_optimizations", "single_l2_loss_op", "use_resource_vars", "compute_lr_on_cpu",
    "sparse_to_dense_grads", "mkl", "cross_replica_sync", "print_training_accuracy", "freeze_when_forward_only",
    "collect_eval_results_async", "fp16_enable_auto_loss_scale", "ml_perf", "datasets_repeat_cached_sample",
    "distort_color_in_yiq", "fp16_vars",
})


class _BadBoolean(ValueError):
    """Not a boolean; the caller names the flag."""


def _boolean(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise _BadBoolean(f"expected true or false, got {value!r}")
