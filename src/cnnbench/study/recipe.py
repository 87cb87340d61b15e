"""A study file: a suite (:mod:`cnnbench.sweep.suite`) with a ``layout:`` and a ``smoke:`` section.

    name: host-cpus
    description: One line that `cnnbench study --list` prints.
    base: {...}; matrix: {...}; repeats: 2; timeout_s: 1800     # the full size, as in any suite
    layout:                        # the report's shape (the `cnnbench report` flags of the same names)
      title: Host CPUs
      rows: [model]                # fields of the throughput tables' rows ...
      columns: [machine, host_cpus]  # ... and columns (one that holds a single value is left out)
      effects: [host_cpus]         # one-factor effect tables (default: every field with two values)
      baselines: {host_cpus: 4}    # the value the others are compared with
      ignore: []                   # fields results may differ in and still pair
      observations: [effects, fastest]   # kinds of observation (default: every kind)
    smoke:                         # `--smoke`: each suite key given here replaces the study's own,
      base: {...}                  # layout keys replace one by one; sized for 2 CPU cores
      matrix: {...}
      make_dataset: {kind: cifar10, images_per_class: 20}   # made once; "{dataset}" in a value names it

Nothing here imports torch; the suite is checked as ``cnnbench sweep`` checks it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from cnnbench.analysis import fields as F
from cnnbench.config.run_config import RunConfig
from cnnbench.data.layouts import GENERATED_KINDS
from cnnbench.report.options import OBSERVATION_KINDS
from cnnbench.sweep.suite import (
    STUDY_KEYS,
    TOP_LEVEL_KEYS,
    Suite,
    SuiteError,
    checked_name,
    parse_suite,
    read_suite_data,
    suite_yaml,
)
from cnnbench.words import quoted, shortened

LAYOUT_KEYS = ("title", "rows", "columns", "effects", "baselines", "ignore", "observations")
DATASET_KEYS = ("kind", "num_classes", "images_per_class", "val_images_per_class", "image_size", "seed")
SMOKE_KEYS = (*(k for k in TOP_LEVEL_KEYS if k not in ("name",)), "layout", "make_dataset")
_CONFIG_FIELDS = frozenset(f.name for f in dataclasses.fields(RunConfig))
DATASET_MARK = "{dataset}"
"""A value in a study that stands for the folder of the data set ``make_dataset`` makes."""


class StudyError(SuiteError):
    """A study that cannot be run: an unknown name, or a file with a bad section (one line)."""


@dataclass(frozen=True)
class StudyLayout:
    """How a study's report is laid out (the :class:`~cnnbench.report.ReportOptions` of the same names)."""

    title: str
    rows: tuple[str, ...] = ("model",)
    columns: tuple[str, ...] = ("machine",)
    effects: tuple[str, ...] | None = None
    baselines: Mapping[str, str] = field(default_factory=dict)
    ignore: tuple[str, ...] = ()
    observations: tuple[str, ...] | None = None


@dataclass(frozen=True)
class DataSetRecipe:
    """A generated data set a study runs on (``make_dataset``: the arguments of ``cnnbench make-dataset``)."""

    kind: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def folder(self, root: Path) -> Path:
        """Where it is made under ``root`` (the same arguments, the same folder)."""
        name = "-".join(str(p) for p in [self.kind, *(f"{k}{v}" for k, v in sorted(self.options.items()))])
        if "/" in name or name in (".", ".."):  # a name, never a path (the kind is checked when the file is read)
            raise ValueError(f"not a folder name: {name!r}")
        return root / name


@dataclass(frozen=True)
class Study:
    """A parsed, checked study at one size (full or smoke)."""

    name: str
    description: str
    suite: Suite
    layout: StudyLayout
    smoke: bool = False
    dataset: DataSetRecipe | None = None
    """The data set to make before the sweep (its folder is in the suite already)."""
    source: str = ""
    """Where the study came from: ``shipped`` or its file."""


def recipes() -> Any:
    """The shipped study files (package data, a :class:`importlib.resources.abc.Traversable`)."""
    return resources.files("cnnbench.study") / "recipes"


def shipped_studies() -> dict[str, str]:
    """``{name: one-line description}`` of every shipped study, by name."""
    out: dict[str, str] = {}
    for entry in sorted(recipes().iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            data = suite_yaml(entry.read_text(encoding="utf-8"), entry.name)
            out[entry.name[: -len(".yaml")]] = str(data.get("description") or "").strip()
    return out


def load_study(name_or_file: str, *, smoke: bool = False, data_root: Path | None = None) -> Study:
    """The study named ``name_or_file`` (a shipped one) or written in that file, at its full size or,
    with ``smoke``, its smoke size; ``data_root``: where its ``make_dataset`` goes (default
    ``data``). Raises :class:`StudyError` / :class:`SuiteError`, naming the file and the place."""
    path = Path(name_or_file)
    shipped = shipped_studies()
    if name_or_file in shipped and not path.is_file():
        text = (recipes() / f"{name_or_file}.yaml").read_text(encoding="utf-8")
        data, where, source = suite_yaml(text, f"{name_or_file}.yaml"), f"study {name_or_file}", "shipped"
    elif path.suffix in (".yaml", ".yml") or path.is_file() or "/" in name_or_file:
        data, where, source = read_suite_data(path), str(path), str(path)
    else:
        raise StudyError(f"no study {quoted(name_or_file)}: the studies are {', '.join(shipped)}, or give a study "
                         "file (FILE.yaml)")
    if not isinstance(data, Mapping):
        raise StudyError(f"{where}: a study is a mapping (a suite with layout: and smoke: sections)")
    return _study(dict(data), where, source, smoke, data_root or Path("data"))


def _study(data: dict[str, Any], where: str, source: str, smoke: bool, data_root: Path) -> Study:
    def fail(msg: str) -> StudyError:
        return StudyError(f"{where}: {msg}")

    layout_data = _mapping(data.get("layout"), "layout", fail)
    smoke_data = _mapping(data.get("smoke"), "smoke", fail)
    for key in smoke_data:
        if key not in SMOKE_KEYS:
            raise fail(f"smoke.{shortened(str(key), 60)}: not a smoke key (known: {', '.join(SMOKE_KEYS)})")
    if "layout" not in data:
        raise fail("a study needs a layout: section (rows, columns, ...); without one it is a plain suite "
                   "(cnnbench sweep)")
    if "smoke" not in data:
        raise fail("a study needs a smoke: section (a size that runs in minutes on 2 CPU cores)")
    dataset_data = None
    if smoke:
        data = {k: v for k, v in data.items() if k not in STUDY_KEYS}
        for key, value in smoke_data.items():
            if key == "layout":
                layout_data = {**layout_data, **_mapping(value, "smoke.layout", fail)}
            elif key == "make_dataset":
                dataset_data = _mapping(value, "smoke.make_dataset", fail)
            else:
                data[key] = value
        name = checked_name(data.get("name") or Path(where).stem, fail)  # as written, before its -smoke
        data["name"] = f"{name.strip()}-smoke"
    dataset = _dataset(dataset_data, fail) if dataset_data is not None else None
    data = _fill_dataset(data, dataset.folder(data_root).resolve() if dataset else None, fail)
    suite = parse_suite({k: v for k, v in data.items() if k not in STUDY_KEYS}, source=where)
    suite = dataclasses.replace(suite, path=Path(source) if source != "shipped" else None)
    layout = _layout(layout_data, suite, fail)
    return Study(suite.name, suite.description, suite, layout, smoke, dataset, source)


def _mapping(value: Any, place: str, fail: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise fail(f"{place}: must be a mapping")
    return dict(value)


def _names(value: Any, place: str, fail: Any) -> tuple[str, ...]:
    """A field name, a comma-separated list of them, or a YAML list of them."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise fail(f"layout.{place}: must be a field name or a list of them (got {quoted(value)})")
    names = tuple(p.strip() for i in items for p in i.split(","))
    if not names or not all(names):
        raise fail(f"layout.{place}: an empty field name in {quoted(value)}")
    return names


def _layout(data: Mapping[str, Any], suite: Suite, fail: Any) -> StudyLayout:
    for key in data:
        if key not in LAYOUT_KEYS:
            raise fail(f"layout.{shortened(str(key), 60)}: not a layout key (known: {', '.join(LAYOUT_KEYS)})")
    title = data.get("title") or suite.description or suite.name
    if not isinstance(title, str):
        raise fail("layout.title: must be text")
    baselines = _mapping(data.get("baselines"), "layout.baselines", fail)
    for key, value in baselines.items():
        if not isinstance(key, str) or isinstance(value, (list, dict)) or value is None:
            raise fail(f"layout.baselines: {quoted(key)}: give FIELD: VALUE (one value)")
    lists = {k: _names(data[k], k, fail) for k in ("rows", "columns", "effects", "ignore", "observations")
             if data.get(k) is not None}
    for key, names in lists.items():
        for name in (names if key != "observations" else ()):
            _check_field(name, f"layout.{key}", fail)
    unknown = [kind for kind in lists.get("observations", ()) if kind not in OBSERVATION_KINDS]
    if unknown:  # checked here, before any case runs, and named as the file names it
        raise fail(f"layout.observations: unknown kind {', '.join(map(quoted, unknown[:3]))}; choose from "
                   f"{', '.join(OBSERVATION_KINDS)}")
    for name in baselines:
        _check_field(name, "layout.baselines", fail)
    return StudyLayout(title=title, rows=lists.get("rows", ("model",)), columns=lists.get("columns", ("machine",)),
                       effects=lists.get("effects"), ignore=lists.get("ignore", ()),
                       observations=lists.get("observations"),
                       baselines={k: _text(v) for k, v in baselines.items()})


def _check_field(name: str, place: str, fail: Any) -> None:
    """A layout names record fields: an alias (model, machine, cpu, ...), a top-level field, a
    configuration field (host_cpus) or a dotted name in a record section (environment.gpu_model)."""
    section, dot, rest = name.partition(".")
    dotted = dot and section in F.SECTIONS and all(rest.split("."))  # no empty part: environment..x names nothing
    if name in F.ALIASES or name in F.TOP_LEVEL or name in _CONFIG_FIELDS or dotted:
        return
    raise fail(f"{place}: {quoted(name)} is not a record field (an alias such as model, machine, cpu, num_devices, "
               "a configuration field such as host_cpus, or a dotted name such as environment.gpu_model)")


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _dataset(data: Mapping[str, Any], fail: Any) -> DataSetRecipe:
    for key in data:
        if key not in DATASET_KEYS:
            raise fail(f"smoke.make_dataset.{shortened(str(key), 60)}: not an argument of make-dataset "
                       f"(known: {', '.join(DATASET_KEYS)})")
    kind = data.get("kind")
    if kind not in GENERATED_KINDS:  # a name, never a path: it names the data set's folder
        raise fail(f"smoke.make_dataset.kind: {', '.join(GENERATED_KINDS)} (got {quoted(kind)})")
    options = {k: v for k, v in data.items() if k != "kind"}
    for key, value in options.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(f"smoke.make_dataset.{key}: must be a whole number (got {quoted(value)})")
    from cnnbench.data.generate import GenerateError, generate_options

    size = options.get("image_size")
    try:  # before any folder is made (its name holds these numbers)
        generate_options(kind, **{k: v for k, v in options.items() if k != "image_size"},
                         image_size=(size, size) if size else None)
    except GenerateError as exc:
        raise fail(f"smoke.make_dataset: {shortened(str(exc), 200)}") from None
    return DataSetRecipe(kind, options)


def _fill_dataset(data: dict[str, Any], folder: Path | None, fail: Any) -> dict[str, Any]:
    """``data`` with every ``"{dataset}"`` value (in base, matrix, include) replaced by ``folder``."""

    def fill(value: Any, place: str) -> Any:
        if isinstance(value, list):
            return [fill(v, place) for v in value]
        if isinstance(value, Mapping):
            return {k: fill(v, f"{place}.{k}") for k, v in value.items()}
        if value == DATASET_MARK:
            if folder is None:
                raise fail(f"{place}: {DATASET_MARK} names the data set of make_dataset, which this size has "
                           "none of")
            return str(folder)
        return value

    return {k: fill(v, k) if k in ("base", "matrix", "include") else v for k, v in data.items()}
