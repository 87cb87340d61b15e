"""One step of the timed loop: the loss, the optimizer, forward (+ backward and update).

:func:`make_step` returns ``step(images, labels) -> loss`` (detached, still on the device:
nothing here waits for it). Training: zero the gradients, forward under the precision
policy's autocast, backward (scaled for amp_fp16 on CUDA), then the strategy's optimizer
step (where gradients are exchanged and the weights updated). Inference: forward in
``torch.inference_mode`` (``torch.no_grad`` for FSDP: :func:`~cnnbench.engine.backend.inference_context`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from cnnbench.config import RunConfig
from cnnbench.config.training_options import scaled_learning_rate
from cnnbench.distributed.strategy import ParallelStrategy
from cnnbench.engine.backend import first_device_type, inference_context, optimizer_implementation, optimizer_kwargs
from cnnbench.engine.precision import PrecisionPolicy

AUX_LOSS_WEIGHT = 0.3  # weight of auxiliary classifier losses (GoogLeNet, Inception v3)

Step = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def make_optimizer(config: RunConfig, params: Iterable[nn.Parameter], *,
                   host_update: bool = False) -> torch.optim.Optimizer:
    """The ``--optimizer`` of a resolved training configuration (every hyperparameter set),
    starting from ``--learning-rate`` as ``--lr-scaling`` scales it for the device count,
    in the implementation :func:`~cnnbench.engine.backend.optimizer_implementation` picks for
    where the parameters live (fused on CUDA where torch has one; ``host_update``: host
    weights updated for a GPU run, fused or foreach on the host too)."""
    if config.optimizer is None or config.learning_rate is None or config.weight_decay is None:
        raise ValueError("make_optimizer needs a resolved training configuration")
    lr = scaled_learning_rate(config.learning_rate, config.lr_scaling, config.num_devices or 1)
    wd = config.weight_decay
    device_type, sharded, listed = first_device_type(params)
    impl: dict[str, Any] = optimizer_kwargs(optimizer_implementation(config.optimizer, device_type, sharded,
                                                                     host_update=host_update))
    if config.optimizer == "sgd":
        return torch.optim.SGD(listed, lr=lr, weight_decay=wd, **impl)
    if config.optimizer == "momentum":
        return torch.optim.SGD(listed, lr=lr, momentum=_momentum(config), weight_decay=wd, **impl)
    if config.optimizer == "rmsprop":  # tf_cnn_benchmarks defaults: decay 0.9, epsilon 1.0
        return torch.optim.RMSprop(listed, lr=lr, alpha=0.9, eps=1.0, momentum=_momentum(config), weight_decay=wd,
                                   **impl)
    if config.optimizer == "adam":
        return torch.optim.Adam(listed, lr=lr, weight_decay=wd, **impl)
    raise ValueError(f"unknown optimizer {config.optimizer!r}")


def _momentum(config: RunConfig) -> float:
    if config.momentum is None:
        raise ValueError(f"--optimizer {config.optimizer} needs a momentum")
    return config.momentum


def classification_loss(output: Any, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on the logits; auxiliary heads (a tuple of outputs) add with a small weight."""
    if isinstance(output, tuple):
        main, *aux = output
        loss = nn.functional.cross_entropy(main.float(), labels)
        for a in aux:
            if a is not None:
                loss = loss + AUX_LOSS_WEIGHT * nn.functional.cross_entropy(a.float(), labels)
        return loss
    return nn.functional.cross_entropy(output.float(), labels)


def make_step(
    model: Callable[[torch.Tensor], Any],
    module: nn.Module,
    optimizer: torch.optim.Optimizer | None,
    policy: PrecisionPolicy,
    device_type: str,
    strategy: ParallelStrategy,
    *,
    training: bool,
    count_correct: bool = False,
    phases: TrainPhases | None = None,
) -> Step:
    """One step: forward (+ backward and update when ``training``).

    The step returns the loss; with ``count_correct``, ``[loss, correct predictions]``
    (both on the device: nothing waits for them).

    ``model`` is what the step calls (maybe compiled), ``module`` the wrapped model whose
    gradients are zeroed; ``optimizer`` may be ``None`` on a worker that updates no weight
    itself (a parameter server's other ranks): the strategy's step does the update.
    A training step runs ``phases`` (made here unless given: :func:`make_train_phases`).
    """
    if not training:

        grad_free = inference_context(strategy.name)

        def infer(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            with grad_free(), policy.autocast(device_type):
                return classification_loss(model(images), labels)

        return infer

    phases = phases or make_train_phases(model, module, optimizer, policy, device_type, strategy)

    def train(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        output, loss = phases.forward(images, labels)
        phases.backward(loss)
        phases.update()
        if count_correct:
            return torch.stack([loss.detach().float(), correct_predictions(output, labels)])
        return loss.detach()

    return train


@dataclass(frozen=True)
class TrainPhases:
    """A training step in its three phases, the very calls the step makes: ``forward``
    (gradients zeroed, forward and loss under autocast), ``backward`` (scaled for amp_fp16),
    ``update`` (the strategy's optimizer step). :mod:`cnnbench.engine.phase_split` times them apart."""

    forward: Callable[[torch.Tensor, torch.Tensor], tuple[Any, torch.Tensor]]
    backward: Callable[[torch.Tensor], None]
    update: Callable[[], None]


def make_train_phases(model: Callable[[torch.Tensor], Any], module: nn.Module, optimizer: torch.optim.Optimizer | None,
                      policy: PrecisionPolicy, device_type: str, strategy: ParallelStrategy) -> TrainPhases:
    """The phases of one training step (one gradient scaler shared by backward and update)."""
    scaler = policy.scaler(device_type, forward_only=False)

    def forward(images: torch.Tensor, labels: torch.Tensor) -> tuple[Any, torch.Tensor]:
        module.zero_grad(set_to_none=True)
        with policy.autocast(device_type):
            output = model(images)
            return output, classification_loss(output, labels)

    def backward(loss: torch.Tensor) -> None:
        if scaler is not None:
            scaler.scale(loss).backward()
        else:
            loss.backward()

    def update() -> None:
        strategy.optimizer_step(optimizer, scaler)

    return TrainPhases(forward, backward, update)


def correct_predictions(output: Any, labels: torch.Tensor) -> torch.Tensor:
    """How many of the main head's top-1 predictions are right (a float tensor, on the device)."""
    logits = output[0] if isinstance(output, tuple) else output
    return (logits.argmax(dim=1) == labels).sum().float()
