"""``cnnbench models [PATTERN ...]``: what models cost, or only their names (``--list``).

The models and their costs come from :mod:`cnnbench.models.lookup` (each model's from
:func:`cnnbench.models.cost.model_cost`: shapes traced
on the meta device, nothing allocated). ``--format table`` (rich) and ``md`` show readable
units; ``csv`` and ``json`` keep the exact integers under the field names of
:class:`~cnnbench.models.cost.ModelCost`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cnnbench.cli.common import UserError
from cnnbench.config.errors import ConfigError

if TYPE_CHECKING:
    from cnnbench.models.cost import ModelCost

FORMATS = ("table", "md", "csv", "json")

DEFINITIONS = """\
What is counted (one image, fp32; MiB = 2^20 bytes; G = 10^9):
  params            parameter elements (buffers such as batch-norm statistics excluded);
                    param memory = params x 4 bytes.
  feature memory    convnet-burden's definition: the total size of every
                    intermediate tensor of one forward pass at batch 1 in evaluation mode,
                    with no memory reuse. Views and in-place activations (relu_) add
                    nothing; residual additions (also `out += x`) and concatenations count
                    like any layer; the input image and auxiliary outputs (max-pool
                    indices, batch-norm statistics saved for backward) do not.
  forward MACs      multiply-accumulates of convolutions, matrix products and attention,
                    counted per ATen operator. Not counted: bias, batch norm, activations,
                    pooling, softmax and other elementwise work (a few percent).
  forward FLOPs     2 x forward MACs.
  train FLOPs       the same operators over a training step, per image: forward in training
                    mode (auxiliary heads included) + backward (input and weight gradients).
  top-1/top-5 err.  100 - the ImageNet accuracy torchvision publishes for the model's first
                    weights, shown only at the size those were measured at; nothing is
                    downloaded.
Shapes are traced on PyTorch's meta device (nothing allocated or computed); a model that
cannot be traced that way is run for real at batch 1 on the CPU and marked with *.
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "models",
        help="Show what models cost (params, memory, FLOPs, error), or list their names.",
        description="One row per model matching a PATTERN (a name or a shell-style wildcard over registry\n"
        "names: torchvision models, tf_cnn_benchmarks aliases, timm/<name> when timm is installed,\n"
        "trivial), in the order the patterns are given: parameters, parameter and feature memory,\n"
        "forward MACs and FLOPs, training FLOPs per image and reference ImageNet error. With --list,\n"
        "only the matching names.",
        epilog=DEFINITIONS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("patterns", nargs="*", default=["*"], metavar="PATTERN",
                   help="Model names or shell-style wildcards, e.g. resnet50 vgg19 'timm/efficient*' "
                   "(default: every model).")
    p.add_argument("--list", action="store_true", help="Only list matching names (aliases included), one per line.")
    p.add_argument("--no-aux", action="store_true",
                   help="Cost inception_v3 and googlenet without their auxiliary heads, as published "
                   "cost tables do (they train with them, but do not infer with them).")
    p.add_argument(
        "--image-size", type=_positive_int, default=None, metavar="N",
        help="Input side in pixels (default: each model's own, e.g. 224, or 299 for inception_v3).",
    )
    p.add_argument("--format", choices=FORMATS, default="table", help="Output format (default: table).")
    p.set_defaults(handler=handle)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of pixels, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def handle(args: argparse.Namespace) -> int:
    from cnnbench.models.lookup import NoModelMatches, matching_models, model_costs

    try:
        names = matching_models(args.patterns)
    except NoModelMatches as exc:
        raise UserError(f"no model matches {exc.pattern!r} (try `cnnbench models --list`)") from None
    except ConfigError as exc:  # a name given here, not through a --model flag
        raise UserError(str(exc).removeprefix("--model: ")) from None
    if args.list:
        print("\n".join(names))
        return 0
    try:
        result = model_costs(names, args.image_size, progress=_progress, aux=not args.no_aux)
    except ConfigError as exc:  # the one name given: an alias whose target cannot be built here
        raise UserError(str(exc)) from None
    if len(result.models) == 1 and result.errors:
        raise UserError(result.errors[0])
    if result.costs:
        _print(result.costs, args.format, aux=not args.no_aux)
    for line in result.errors:
        print(f"cnnbench models: error: {line}", file=sys.stderr)
    return 2 if result.errors else 0


def _progress(models: Sequence[str]) -> Any:
    """Iterate ``models``, with a transient progress bar on an interactive stderr."""
    if len(models) < 3 or not sys.stderr.isatty():
        return models
    from rich.console import Console
    from rich.progress import track

    from cnnbench.terminal import rich_environ

    return track(models, description="Tracing models", console=Console(stderr=True, _environ=rich_environ()),
                 transient=True)


# --- rendering ---------------------------------------------------------------------------

READABLE_HEADER = (
    "model", "input", "params (M)", "param mem (MiB)", "feat. mem (MiB)", "fwd GMACs", "fwd GFLOPs",
    "train GFLOPs/img", "top-1 err (%)", "top-5 err (%)",
)
UNITS_NOTE = (
    "Per image, fp32. MiB = 2^20 bytes; GMACs = 10^9 multiply-accumulates; GFLOPs = 10^9 floating-point "
    "operations = 2 x MACs; train = forward + backward (input and weight gradients). "
    "Errors: torchvision's reference ImageNet figures at the size they were measured at."
)
FALLBACK_NOTE = "* counted with a real forward at batch 1 (the model could not be traced on the meta device)."
NO_AUX_NOTE = "{names}: without auxiliary heads (--no-aux), in every figure, parameters included."


def _print(costs: Sequence[ModelCost], fmt: str, *, aux: bool = True) -> None:
    if fmt == "json":
        print(json.dumps([c.to_dict() for c in costs], indent=2))
    elif fmt == "csv":
        sys.stdout.write(render_csv(costs))
    elif fmt == "md":
        print(render_markdown(costs, aux=aux))
    else:
        _print_rich(costs, aux=aux)


def _g(value: float) -> str:
    """A readable magnitude: 3-4 significant digits, never scientific notation."""
    if value == 0:
        return "0"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def readable_row(cost: ModelCost) -> list[str]:
    def err(v: float | None) -> str:
        return "—" if v is None else f"{v:.2f}"

    mark = " *" if cost.method != "meta" else ""
    return [
        cost.name + mark,
        f"{cost.input_size[1]}x{cost.input_size[2]}",
        _g(cost.params / 1e6),
        f"{cost.param_memory_mib:.1f}",
        f"{cost.feature_memory_mib:.1f}",
        _g(cost.forward_macs / 1e9),
        _g(cost.forward_flops / 1e9),
        _g(cost.train_flops / 1e9),
        err(cost.top1_error),
        err(cost.top5_error),
    ]


def _notes(costs: Sequence[ModelCost], aux: bool = True) -> list[str]:
    from cnnbench.models.cost import has_aux_heads

    without = [c.name for c in costs if not aux and has_aux_heads(c.name)]
    return ([UNITS_NOTE] + ([FALLBACK_NOTE] if any(c.method != "meta" for c in costs) else [])
            + ([NO_AUX_NOTE.format(names=", ".join(without))] if without else []))


def render_markdown(costs: Sequence[ModelCost], *, aux: bool = True) -> str:
    rule = "|" + "|".join(["---"] + ["---:"] * (len(READABLE_HEADER) - 1)) + "|"
    lines = ["| " + " | ".join(READABLE_HEADER) + " |", rule]
    lines += ["| " + " | ".join(readable_row(c)) + " |" for c in costs]
    return "\n".join(lines + [""] + _notes(costs, aux))


def render_csv(costs: Sequence[ModelCost]) -> str:
    from cnnbench.results.csv_out import csv_text

    rows = [c.to_dict() for c in costs]
    for row in rows:
        row["input_size"] = "x".join(str(v) for v in row["input_size"])
    columns = list(rows[0])
    return csv_text(columns, ([row[c] for c in columns] for row in rows))  # None: an empty cell


def _print_rich(costs: Sequence[ModelCost], *, aux: bool = True) -> None:
    from rich.table import Table

    from cnnbench.terminal import print_table

    table = Table(*READABLE_HEADER, caption="\n".join(_notes(costs, aux)), caption_justify="left")
    for column in table.columns[1:]:
        column.justify = "right"
    for cost in costs:
        table.add_row(*readable_row(cost))
    print_table(table)
