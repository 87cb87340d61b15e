"""From a validated :class:`RunConfig` to a runnable one, checked against this machine.

Fills defaults that depend on other options (:meth:`RunConfig.with_derived_defaults`),
on the model (image size, batch size), on the data set (its name, guessed from the folder;
CIFAR's 32-pixel images) or on the machine (device, loader processes from the cores the run
may use), and rejects what this machine cannot do (CUDA absent, a precision the device lacks,
an image too small for the model, a data folder that holds no data set, more ``--host-cpus``
than there are) with a :class:`ConfigError` before any work starts.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from cnnbench.config import ConfigError, RunConfig
from cnnbench.config.input_options import InputOptions
from cnnbench.distributed.world import World
from cnnbench.engine.backend import cuda_compiler_missing
from cnnbench.engine.precision import unsupported_reason
from cnnbench.machine.affinity import check_host_cpus, cpu_count_available
from cnnbench.machine.devices import cuda_available, resolve_device_kind
from cnnbench.models import ModelSpec, get_model_spec
from cnnbench.words import plural

if TYPE_CHECKING:
    from cnnbench.data.catalog import DataSetFacts

log = logging.getLogger(__name__)

CIFAR_IMAGE_SIZE = 32


@dataclass(frozen=True)
class ResolvedRun:
    """A run with every choice made: what the engine's phases work from."""

    config: RunConfig
    """The configuration as recorded: every default filled, ``None`` only for unused options."""
    spec: ModelSpec
    device: torch.device
    """This worker's device (``cuda:<local rank>`` or ``cpu``)."""
    batch_size: int
    """Images per step on this worker."""
    image_size: int
    world: World
    warmup_steps: int
    """Untimed steps before the timed ones (none in a training-to-accuracy run)."""

    @property
    def timed_steps(self) -> int:
        """Timed steps of a benchmark run (0 for a training-to-accuracy run, which counts epochs)."""
        return self.config.num_batches or 0

    @property
    def trains_epochs(self) -> bool:
        """A training-to-accuracy run (``--num-epochs``): timed epochs, after one untimed step instead of a warm-up."""
        return self.config.num_epochs is not None

    @property
    def images_per_step(self) -> int:
        """Images per step over all workers."""
        return self.batch_size * self.world.world_size


def resolve(config: RunConfig, world: World | None = None) -> ResolvedRun:
    """The runnable form of ``config`` for this worker; raises :class:`ConfigError`."""
    world = world or World.single()
    spec = get_model_spec(config.model)
    device_kind = resolve_device_kind(config.device)
    config = config.replace(device=device_kind).with_derived_defaults()
    world_size, num_nodes = _check_world(config, world)
    _check_cpu_workers(config, world, device_kind)
    device = _device(config, world, device_kind, world_size)
    check_host_cpus(config.host_cpus)

    if config.gradient_compression == "powersgd" and config.all_reduce == "gloo" and world_size > 1:
        # PowerSGD chains its all-reduces in future callbacks, which Gloo completes on its own
        # threads: two buckets' next all-reduces can start in different orders on different
        # ranks, and the ranks then abort on mismatched sizes (seen here in 1 of 3 runs;
        # torch tests this hook on NCCL only).
        raise ConfigError("gradient_compression", "powersgd needs --all-reduce nccl (CUDA devices): over gloo "
                                                  "its chained all-reduces can run in different orders on "
                                                  "different workers and abort; use fp16 or bf16 here")
    reason = unsupported_reason(config.precision, device)
    if reason:
        raise ConfigError("precision", f"{config.precision} on {device_kind}: {reason}")
    has_compiler = any(shutil.which(cc) for cc in ("g++", "c++", "clang++"))
    if config.compile and device_kind == "cpu" and not has_compiler:
        raise ConfigError("compile", "torch.compile on CPU needs a C++ compiler (g++ or clang++) on PATH")
    missing = cuda_compiler_missing() if config.compile and device_kind == "cuda" else None
    if missing:
        raise ConfigError("compile", missing)

    batch_size = config.batch_size or spec.default_batch_size
    image_size = config.image_size or spec.default_image_size
    if config.real_data():
        config, image_size = _resolve_data_set(config, spec, world, world_size, batch_size)
    elif config.image_size is not None:
        _check_image_size(spec, image_size)
    resolved = config.replace(batch_size=batch_size, image_size=image_size, num_devices=world_size,
                              num_nodes=num_nodes)
    return ResolvedRun(config=resolved, spec=spec, device=device, batch_size=batch_size,
                       image_size=image_size, world=world, warmup_steps=resolved.warmup_steps())


def preflight(config: RunConfig) -> ResolvedRun:
    """Every check ``cnnbench run`` makes before any work, outside torchrun: for several
    devices, as the process that starts the workers makes them (rank 0's view)."""
    n = config.requested_devices()
    world = World(world_size=n, local_world_size=n, process_group=True) if n > 1 else World.single()
    return resolve(config, world)


def _resolve_data_set(config: RunConfig, spec: ModelSpec, world: World, world_size: int,
                      batch_size: int) -> tuple[RunConfig, int]:
    """A run's data set: :func:`resolve_data_set`, then its image size (CIFAR's own 32 pixels
    unless --image-size says otherwise)."""
    facts, workers = resolve_data_set(config, batch_size=batch_size, world_size=world_size,
                                      local_world_size=world.local_world_size,
                                      model_on_cpu=config.device == "cpu", warn=world.is_main)
    if config.num_epochs is not None and facts.val_size == 0:
        raise ConfigError("num_epochs", f"evaluates on the validation split after every epoch, but {facts.root} "
                                        "has no validation images (val/<class>/... in the ImageNet layout)")
    if config.image_size is not None:
        image_size = config.image_size
        _check_image_size(spec, image_size)
    elif facts.name.startswith("cifar"):
        image_size = CIFAR_IMAGE_SIZE
        try:
            _check_image_size(spec, image_size)
        except ConfigError as exc:
            raise ConfigError("image_size", f"CIFAR's images are {CIFAR_IMAGE_SIZE} px, too small for {spec.name}: "
                                            f"give --image-size (they are resized to it) ({exc})") from None
    else:
        image_size = spec.default_image_size
    return config.replace(data_name=facts.name, data_dir=facts.root, num_workers=workers), image_size


def resolve_data_set(config: InputOptions, *, batch_size: int, world_size: int, local_world_size: int,
                     model_on_cpu: bool, warn: bool = True) -> tuple[DataSetFacts, int]:
    """The data set in ``config.data_dir`` (its name guessed when not given) and the loader
    processes per worker (``--num-workers``, or a default from the cores this process may use),
    checked: a folder that holds a data set that the input pipeline serves, enough training images
    for one batch on every worker. Raises :class:`ConfigError`; logs a warning when the loader
    leaves the model no core."""
    from cnnbench.data.catalog import data_set_facts
    from cnnbench.data.layouts import DataSetError
    from cnnbench.data.loader import default_num_workers, too_few_cores
    from cnnbench.data.pipelines import check_pipeline

    assert config.data_dir is not None
    try:
        facts = data_set_facts(config.data_name, config.data_dir)
    except DataSetError as exc:
        raise ConfigError("data_dir", str(exc)) from None
    check_pipeline(config, facts)
    if facts.train_size < batch_size * world_size:
        raise ConfigError("batch_size", f"{batch_size} per device on {plural(world_size, 'device')} needs "
                                        f"{batch_size * world_size} training images; {facts.root} has "
                                        f"{facts.train_size}")
    cores = max(1, cpu_count_available() // max(1, local_world_size))
    workers = config.num_workers
    if workers is None:
        workers = default_num_workers(cores, model_on_cpu=model_on_cpu)
    warning = too_few_cores(workers, cores, model_on_cpu=model_on_cpu)
    if warning and warn:
        log.warning("%s", warning)
    return facts, workers


def _cpu_workers(config: RunConfig, world: World, device_kind: str) -> tuple[int, int]:
    """CPU workers on this node and the cores they may use (0 workers off CPU)."""
    if device_kind != "cpu":
        return 0, 0
    return world.local_world_size, config.host_cpus or cpu_count_available()


def _workers_text(workers: int, threads: int | None) -> str:
    """``2 CPU workers``, or ``2 CPU workers x 2 threads`` with --threads-per-worker."""
    return plural(workers, "CPU worker") + (f" x {plural(threads, 'thread')}" if threads else "")


def _check_cpu_workers(config: RunConfig, world: World, device_kind: str) -> None:
    """More CPU workers on this node than usable cores (with ``--threads-per-worker``: more of
    their threads): refused (each would get no core of its own), unless ``--oversubscribe``."""
    fixed = config.threads_per_worker
    workers, cores = _cpu_workers(config, world, device_kind)
    if config.oversubscribe or workers * (fixed or 1) <= cores:
        return
    anyway = "or --oversubscribe to run them anyway (tests, scaling studies)"
    if fixed and workers <= cores:
        raise ConfigError("threads_per_worker", f"{_workers_text(workers, fixed)} need {workers * fixed} cores, "
                                                f"but this run may use {plural(cores, 'core')}: threads would take "
                                                f"turns; use at most {cores // workers} per worker, {anyway}")
    raise ConfigError("num_devices", f"{workers} CPU workers, but this run may use {plural(cores, 'core')}: "
                                     f"each worker would get no core of its own; use at most {cores}, {anyway}")


def oversubscribed_note(run: ResolvedRun) -> str | None:
    """The record's warning for a run that ``--oversubscribe`` let start more CPU workers (or, with
    ``--threads-per-worker``, more of their threads) than cores."""
    workers, cores = _cpu_workers(run.config, run.world, run.device.type)
    fixed = run.config.threads_per_worker
    if workers * (fixed or 1) > cores:
        return (f"oversubscribed: {_workers_text(workers, fixed)} shared {plural(cores, 'core')} "
                "(--oversubscribe); the figures measure their contention, not the scaling")
    return None


def _check_world(config: RunConfig, world: World) -> tuple[int, int]:
    """The device and node counts of the run, checked against the process layout."""
    if world.process_group:
        if config.num_devices is not None and config.num_devices != world.world_size:
            raise ConfigError("num_devices", f"is {config.num_devices}, but torchrun started "
                                             f"{world.world_size} workers (leave it out under torchrun)")
        if config.num_nodes is not None and config.num_nodes not in (1, world.num_nodes):
            raise ConfigError("num_nodes", f"is {config.num_nodes}, but torchrun started {world.num_nodes} nodes")
        return world.world_size, world.num_nodes
    if config.num_nodes not in (None, 1):
        raise ConfigError("num_nodes", "is set by torchrun (run the same command under "
                                       "torchrun --nnodes M on every node)")
    if config.requested_devices() > 1:
        raise ConfigError("num_devices", "several devices need worker processes: run through "
                                         "`cnnbench run`, which starts them, or torchrun")
    return 1, 1


def _device(config: RunConfig, world: World, device_kind: str, world_size: int) -> torch.device:
    """This worker's device: ``cpu``, or the GPU of its local rank (``--gpu-indices`` picks)."""
    if device_kind != "cuda":
        return torch.device("cpu")
    if not cuda_available():
        raise ConfigError("device", "cuda requested but no CUDA device is available here (use --device cpu)")
    indices = config.gpu_index_list() or list(range(world.local_world_size))
    count = torch.cuda.device_count()
    missing = [i for i in indices if i >= count]
    if missing:
        raise ConfigError("gpu_indices" if config.gpu_indices else "num_devices",
                          f"needs GPU {missing[0]}, but this machine has {plural(count, 'GPU')} (0..{count - 1})")
    if len(indices) < world.local_world_size:
        raise ConfigError("gpu_indices", f"names {len(indices)} GPUs for {world.local_world_size} workers "
                                         "on this node")
    return torch.device("cuda", indices[world.local_rank])


def _check_image_size(spec: ModelSpec, size: int) -> None:
    """Reject sizes the model cannot take: a shape-only forward on the meta device, no compute."""
    if size < spec.min_image_size:
        raise ConfigError("image_size", f"{size} is too small for {spec.name} (minimum {spec.min_image_size})")
    try:
        with torch.device("meta"):
            model = spec.build(image_size=size).eval()
            with torch.no_grad():
                model(torch.empty(1, 3, size, size))
    except (RuntimeError, ValueError, AssertionError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError("image_size", f"{size} does not fit {spec.name}: {first}") from None
