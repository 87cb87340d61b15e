"""Suite files: a matrix of ``cnnbench run`` configurations, read and checked before anything runs.

    name: quick-cpu
    base:        {device: cpu, num_batches: 10}       # fields every case shares
    matrix:      {model: [resnet18, alexnet], batch_size: [8, 16]}   # the cross product
    exclude:     [{model: alexnet, batch_size: 16}]   # drop cases matching every key
    include:     [{model: trivial, batch_size: 64}]   # extra cases: base + the entry
    repeats: 2                                        # each case this many times
    timeout_s: 300                                    # time limit of one case
    auto_batch: false                                 # on out-of-memory, retry with half the batch
    layout: {...}                                     # a study's report layout and smoke size:
    smoke: {...}                                      #   cnnbench.study reads them; a sweep passes over them

Every key of ``base``, ``matrix``, ``exclude`` and ``include`` is a configuration field
of ``cnnbench run`` (``batch_size``, not ``--batch-size``), and every case is built as a
:class:`~cnnbench.config.RunConfig`, so an unknown field, a bad value or a contradictory
combination fails here with a :class:`SuiteError` that names the file, the place and the
flag. Model names are checked by the runner (that needs the model registry).
This module does not import torch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cnnbench.config.errors import ConfigError
from cnnbench.config.run_config import RunConfig
from cnnbench.results.files import NAME_RULE, name_problem, read_regular
from cnnbench.sweep.executors import checked_block
from cnnbench.words import one_line, quoted, shortened

TOP_LEVEL_KEYS = ("name", "description", "base", "matrix", "exclude", "include", "repeats", "timeout_s", "auto_batch",
                  "executor")
FIELD_ALIASES = {"nodes": "num_nodes"}  # nodes a case spreads over (on a cluster: --executor slurm)
STUDY_KEYS = ("layout", "smoke")
"""A study's own sections (:mod:`cnnbench.study` reads them): a study file is a suite, so
``cnnbench sweep`` runs its full size and passes over them; anything else is an unknown key."""
DEFAULT_TIMEOUT_S = 1800.0
_NOT_IN_SUITES = {"results_dir": "the results folder is chosen with `cnnbench sweep --results-dir`"}
_CONFIG_FIELDS = {f.name for f in dataclasses.fields(RunConfig)}

Assignment = Mapping[str, Any]


MAX_REPEATS = 1000
"""Most ``repeats`` a suite may ask for (a statistic settles long before)."""
MAX_CASES = 100_000
"""Most runs (configurations × repeats) one suite may hold; a cluster sweep of thousands fits.
Counted before any case is built, so a suite past it is refused at once, naming the count."""


class SuiteError(ValueError):
    """A suite file that cannot be run; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Suite:
    """A parsed, checked suite."""

    name: str
    base: Mapping[str, Any]
    matrix: Mapping[str, tuple[Any, ...]]
    exclude: tuple[Assignment, ...] = ()
    include: tuple[Assignment, ...] = ()
    repeats: int = 1
    timeout_s: float = DEFAULT_TIMEOUT_S
    auto_batch: bool = False
    description: str = ""
    executor: Mapping[str, Any] = field(default_factory=dict)
    """The ``executor:`` block, each key checked by the executor that owns it
    (:func:`cnnbench.sweep.executors.checked_block`; Slurm's: :mod:`cnnbench.sweep.slurm.settings`)."""
    path: Path | None = None
    cases: tuple[Case, ...] = field(default=(), repr=False)
    """Every case, repeats included, in run order: repeat 1 of all cases, then repeat 2, ..."""

    @property
    def where(self) -> str:
        """The suite's file (or its name), as messages name it."""
        return str(self.path) if self.path is not None else self.name

    def distinct_cases(self) -> list[Case]:
        """One case per configuration (the first repeat of each)."""
        seen: dict[int, Case] = {}
        for case in self.cases:
            seen.setdefault(case.index, case)
        return list(seen.values())

    def without(self, indices: set[int]) -> Suite:
        """The suite less the configurations at ``indices`` (every repeat of each)."""
        return dataclasses.replace(self, cases=tuple(c for c in self.cases if c.index not in indices))


@dataclass(frozen=True)
class Case:
    """One run of a suite: a configuration and which repeat it is."""

    index: int
    """Position of the configuration among the suite's distinct cases (0-based)."""
    repeat: int
    """1 .. ``suite.repeats``."""
    settings: Mapping[str, Any]
    """The fields the suite sets for this case (base, then the matrix or include values)."""
    assignment: Mapping[str, Any]
    """The matrix (or include) values that make this case differ from the others."""
    config: RunConfig
    key: str
    """Stable identity: a hash of the suite name, ``settings`` and ``repeat``; how a re-run
    recognises cases already done."""

    @property
    def label(self) -> str:
        """Short human name: the assignment and the repeat."""
        return f"{self.description} #{self.repeat}"

    @property
    def description(self) -> str:
        """The assignment that makes this case differ from the others (``model=vgg16 batch_size=8``)."""
        return _describe(self.assignment)


def _fmt(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


MAX_SUITE_BYTES = 1 << 20
"""Largest suite file read (a suite is a few lines of YAML; one generated with 4,000 includes holds
about 290 KB). PyYAML's parser, in Python, took 17 s and 380 MB for 1 MiB of junk on this project's
machine, and 33 s and 700 MB for 2 MB."""


def load_suite(path: str | Path) -> Suite:
    """Read and check a suite file; raises :class:`SuiteError` (never anything else for bad input)."""
    return parse_suite(read_suite_data(path), source=Path(path))


def read_suite_data(path: str | Path) -> Any:
    """A suite file's YAML as plain data, unchecked (:class:`SuiteError` for a file that cannot be
    read, is not UTF-8 or not YAML); :func:`parse_suite` checks it."""
    p = Path(path)
    try:
        raw = read_regular(p, MAX_SUITE_BYTES)  # a FIFO or /dev/zero is refused, never read
    except OSError as exc:
        raise SuiteError(f"{p}: cannot read the suite file ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SuiteError(f"{p}: not UTF-8 text (byte {raw[exc.start:exc.start + 1]!r} on line {line}); "
                         "save the suite file as UTF-8") from None
    return suite_yaml(text, p)


def suite_yaml(text: str, where: str | Path) -> Any:
    """Suite text as plain data, unchecked (:class:`SuiteError` naming ``where`` for text that is not YAML)."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader (below)
    except _AliasRefused as exc:
        raise SuiteError(f"{where}: line {exc.mark.line + 1}, column {exc.mark.column + 1}: a YAML alias "
                         f"(*{shortened(str(exc.anchor), 40)}); suite and study files take no aliases: write the "
                         "value out (base: holds what every case shares)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [""])[0]
        raise SuiteError(f"{where}: not valid YAML{at}: {shortened(problem)}") from None
    except RecursionError:
        raise SuiteError(f"{where}: nested too deeply to be a suite") from None
    except ValueError as exc:  # a number of 5,000 digits, a date on the 13th month
        raise SuiteError(f"{where}: a value YAML cannot read: {shortened(str(exc))}") from None


def yaml_value(text: str, where: str) -> Any:
    """A value written in YAML on a command line (``--set FIELD=VALUE``), read as a suite reads its
    values: an alias or nesting too deep is a :class:`SuiteError` naming ``where`` (nine levels of
    aliases in 250 characters stood for a record line of gigabytes); text that YAML cannot read, or
    reads as no value it can make (a date on the 13th month, a number of 5,000 digits), is that text."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except _AliasRefused:
        if "&" not in text:  # no anchor for it to stand for: no alias, text (*nightly, *A100)
            return text
        raise SuiteError(f"{where}: a YAML alias (*name) stands for another value; write the value out") from None
    except RecursionError:
        raise SuiteError(f"{where}: nested too deeply") from None
    except (yaml.YAMLError, ValueError):
        return text


class _AliasRefused(yaml.YAMLError):
    """An alias (``*name``) in a suite or study file: refused, never expanded."""

    def __init__(self, anchor: Any, mark: Any) -> None:
        super().__init__(anchor)
        self.anchor, self.mark = anchor, mark


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key written twice in one mapping is an error
    (PyYAML would keep the last value silently), and that an alias (``*name``, ``<<: *name``)
    is refused where it is met: nine nested levels of ten aliases each stand for a billion
    values, which whatever walks or prints them (an error message) would expand. A suite's
    ``base:`` already holds what its cases share, and no shipped suite or study uses one."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _AliasRefused(event.anchor, event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {quoted(key)} written twice (lines {seen[key]} and {line})",
                        key_node.start_mark)
                seen[key] = line
            except TypeError:  # an unhashable key: the base class says so
                continue
        return super().construct_mapping(node, deep=deep)


def parse_suite(data: Any, source: Path | str | None = None) -> Suite:
    """Check a suite given as plain data (what ``yaml.safe_load`` gives)."""
    where = str(source) if source is not None else "suite"

    def fail(msg: str) -> SuiteError:
        return SuiteError(f"{where}: {msg}")

    if not isinstance(data, Mapping):
        raise fail("a suite is a mapping with keys " + ", ".join(TOP_LEVEL_KEYS))
    for key in data:
        if key in STUDY_KEYS:
            if not isinstance(data[key], Mapping):
                raise fail(f"{key}: must be a mapping (a study's {key} section)")
        elif key not in TOP_LEVEL_KEYS:
            raise fail(f"unknown key {quoted(key)} (known: {', '.join(TOP_LEVEL_KEYS)}; a study adds "
                       f"{' and '.join(STUDY_KEYS)})")
    name, description = _name_and_description(data, source, fail)
    base, matrix, exclude, include = _settings(data, fail)
    repeats, timeout_s, auto_batch = _limits(data, fail)
    suite = Suite(
        name=name.strip(),
        base=base,
        matrix=matrix,
        exclude=tuple(exclude),
        include=tuple(include),
        repeats=repeats,
        timeout_s=float(timeout_s),
        auto_batch=auto_batch,
        description=description,
        executor=checked_block(data.get("executor"), fail),
        path=Path(source) if source is not None else None,
    )
    return dataclasses.replace(suite, cases=tuple(_expand(suite, fail)))


def _name_and_description(data: Mapping[str, Any], source: Path | str | None, fail: Any) -> tuple[str, str]:
    default_name = Path(source).stem if source is not None else "suite"
    name = checked_name(data.get("name", default_name), fail,
                        "name" if "name" in data else "name (none given: the file's name)")
    description = data.get("description") or ""
    if not isinstance(description, str):
        raise fail("description: must be text")
    return name, description


def checked_name(name: Any, fail: Any, place: str = "name") -> str:
    """A suite's or study's ``name:``, checked to be a name and not a path (a study's name names its
    results and report folders): :func:`~cnnbench.results.files.name_problem`, before any work."""
    if not isinstance(name, str) or not name.strip():
        raise fail(f"{place}: must be non-empty text")
    why = name_problem(name.strip())
    if why:
        raise fail(f"{place}: {quoted(name.strip())} {why}; {NAME_RULE}")
    return name


def _settings(data: Mapping[str, Any], fail: Any) -> tuple[
        dict[str, Any], dict[str, tuple[Any, ...]], list[dict[str, Any]], list[dict[str, Any]]]:
    """``base``, ``matrix``, ``exclude`` and ``include``, each checked."""
    base = _assignment(data.get("base") or {}, "base", fail)
    if "matrix" in data and isinstance(data["matrix"], Mapping) and not data["matrix"]:
        raise fail("matrix: is empty; list values for at least one field, or leave matrix out")
    matrix = _matrix(data.get("matrix") or {}, fail)
    for key in matrix:
        if key in base:
            raise fail(f"matrix: {quoted(key)} is also set in base; set it in one place")
    exclude = _assignment_list(data.get("exclude"), "exclude", fail)
    include = _assignment_list(data.get("include"), "include", fail)
    return base, matrix, exclude, include


def _limits(data: Mapping[str, Any], fail: Any) -> tuple[int, float, bool]:
    """``repeats``, ``timeout_s`` and ``auto_batch``, each checked."""
    repeats = data.get("repeats", 1)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise fail(f"repeats: must be a whole number >= 1 (got {quoted(repeats)})")
    if repeats > MAX_REPEATS:
        raise fail(f"repeats: {repeats:,} is more than {MAX_REPEATS:,}")
    timeout_s = data.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not (0 < timeout_s < math.inf):
        raise fail(f"timeout_s: must be a number of seconds > 0 (got {quoted(timeout_s)})")
    auto_batch = data.get("auto_batch", False)
    if not isinstance(auto_batch, bool):
        raise fail(f"auto_batch: must be true or false (got {quoted(auto_batch)})")
    return repeats, timeout_s, auto_batch


def _check_field(key: Any, place: str, fail: Any) -> str:
    if not isinstance(key, str):
        raise fail(f"{place}: field names are text, got {quoted(key)}")
    key = FIELD_ALIASES.get(key, key)
    if key in _NOT_IN_SUITES:
        raise fail(f"{place}: {quoted(key)} cannot be set in a suite ({_NOT_IN_SUITES[key]})")
    if key not in _CONFIG_FIELDS:
        err = ConfigError(shortened(key, 40), f"unknown configuration field {quoted(key)}")
        raise fail(f"{place}: {err} (fields are `cnnbench run` options in snake_case)")
    return key


def _scalar(value: Any, place: str, fail: Any) -> Any:
    if value is not None and not isinstance(value, (str, int, float, bool)):
        raise fail(f"{place}: values are single numbers, text or true/false, got {quoted(value)}")
    return value


def _assignment(value: Any, place: str, fail: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise fail(f"{place}: must be a mapping of configuration fields to values")
    return {_check_field(k, place, fail): _scalar(v, f"{place}.{k}", fail) for k, v in value.items()}


def _matrix(value: Any, fail: Any) -> dict[str, tuple[Any, ...]]:
    if not isinstance(value, Mapping):
        raise fail("matrix: must be a mapping of configuration fields to lists of values")
    out: dict[str, tuple[Any, ...]] = {}
    for key, values in value.items():
        key = _check_field(key, "matrix", fail)
        if not isinstance(values, list) or not values:
            raise fail(f"matrix.{key}: must be a non-empty list of values (got {quoted(values)})")
        if len(values) > MAX_CASES:  # refused before each value is looked at
            raise fail(f"matrix.{key}: lists {len(values):,} values, more than the {MAX_CASES:,} cases a suite may "
                       "hold; split it into several suites")
        seen: set[tuple[type, Any]] = set()  # a set: a list searched for each value took minutes for 200,000
        for v in values:
            _scalar(v, f"matrix.{key}", fail)
            if _typed(v) in seen:
                raise fail(f"matrix.{key}: lists {quoted(v)} twice")
            seen.add(_typed(v))
        out[key] = tuple(values)
    return out


def _assignment_list(value: Any, place: str, fail: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise fail(f"{place}: must be a list of mappings (field: value)")
    out = []
    for i, item in enumerate(value, 1):
        entry = _assignment(item, f"{place}[{i}]", fail)
        if not entry:
            raise fail(f"{place}[{i}]: is empty")
        out.append(entry)
    return out


def _typed(value: Any) -> tuple[type, Any]:
    """A scalar as a key that tells apart what YAML tells apart (``1`` from ``1.0`` and ``true``)."""
    return type(value), value


def _expand(suite: Suite, fail: Any) -> list[Case]:
    assignments = _combinations(suite, fail) + [dict(entry) for entry in suite.include]
    if not assignments:
        raise fail("the suite has no cases (empty matrix and no include, or everything excluded)")
    total = len(assignments) * suite.repeats
    if total > MAX_CASES:
        raise fail(f"the suite has {total:,} cases ({len(assignments):,} configurations × {suite.repeats:,} "
                   f"repeats), more than {MAX_CASES:,}; split it into several suites")
    distinct = _distinct(suite, assignments, fail)
    cases = []
    for repeat in range(1, suite.repeats + 1):
        for index, (settings, assignment, config) in enumerate(distinct):
            key = case_key(suite.name, settings, repeat)
            cases.append(Case(index, repeat, settings, assignment, config, key))
    return cases


def _combinations(suite: Suite, fail: Any) -> list[dict[str, Any]]:
    """The matrix's combinations that no ``exclude`` pattern matches (each pattern must match one)."""
    keys = list(suite.matrix)
    combinations = math.prod(len(v) for v in suite.matrix.values())  # counted, not made
    if combinations > MAX_CASES:
        sizes = " × ".join(str(len(v)) for v in suite.matrix.values())
        raise fail(f"matrix: makes {combinations:,} combinations ({sizes}), more than the {MAX_CASES:,} cases a "
                   "suite may hold; split it into several suites")
    combos = [dict(zip(keys, values, strict=False)) for values in itertools.product(*(suite.matrix[k] for k in keys))]
    held = {k: {_typed(v) for v in values} for k, values in suite.matrix.items()}
    # the patterns by the fields they name: a case is left out when its values of those fields are one
    # pattern's (a pattern tried on each case took a minute for 300 patterns and 100,000 cases)
    excluded: dict[tuple[str, ...], set[tuple[tuple[type, Any], ...]]] = {}
    for i, pattern in enumerate(suite.exclude, 1):
        for k in pattern:
            if k not in suite.matrix:
                raise fail(f"exclude[{i}]: {quoted(k)} is not a matrix field (matrix: {', '.join(keys) or 'none'})")
        if not all(_typed(v) in held[k] for k, v in pattern.items()):  # the matrix makes every combination
            raise fail(f"exclude[{i}]: {shortened(_describe(pattern))} matches no case of the matrix")
        named = tuple(sorted(pattern))
        excluded.setdefault(named, set()).add(tuple(_typed(pattern[k]) for k in named))
    return [c for c in combos if not any(tuple(_typed(c[k]) for k in named) in patterns
                                         for named, patterns in excluded.items())]


def _distinct(suite: Suite, assignments: list[dict[str, Any]], fail: Any,
              ) -> list[tuple[dict[str, Any], dict[str, Any], RunConfig]]:
    """(settings, assignment, configuration) of each configuration; one written twice is an error."""
    distinct: list[tuple[dict[str, Any], dict[str, Any], RunConfig]] = []
    seen: dict[RunConfig, dict[str, Any]] = {}  # by the configuration made: learning_rate 1 and 1.0 are one
    for assignment in assignments:
        settings = {**suite.base, **assignment}
        try:
            config = RunConfig.from_mapping(settings)
        except ConfigError as exc:
            raise fail(f"case {shortened(_describe(assignment))}: {exc}") from None
        if config in seen:
            first = seen[config]
            if _canonical(first) == _canonical(assignment):
                raise fail(f"case {shortened(_describe(assignment))} appears twice (check include)")
            raise fail(f"cases {shortened(_describe(first))} and {shortened(_describe(assignment))} make the same "
                       "configuration (values alike, such as 1 and 1.0); give it once")
        seen[config] = assignment
        distinct.append((settings, assignment, config))
    return distinct


def _describe(assignment: Mapping[str, Any]) -> str:
    """The assignment in words, on one line a terminal shows as it is (a value's escape sequence, line
    break or mark of direction written as its escape: the case's label is shown, never stored)."""
    return one_line(" ".join(f"{k}={_fmt(v)}" for k, v in assignment.items())) or "(base)"


def _canonical(settings: Mapping[str, Any]) -> str:
    return json.dumps(settings, sort_keys=True, separators=(",", ":"))


def case_key(suite_name: str, settings: Mapping[str, Any], repeat: int) -> str:
    """The stable identity of a case run (suite, the fields it sets, repeat)."""
    identity = {"suite": suite_name, "settings": settings, "repeat": repeat}
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(blob.encode()).hexdigest()[:16]
