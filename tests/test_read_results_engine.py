"""``cnnbench.read_results`` of a store read by DuckDB (:func:`cnnbench.results.sql.runs_frame`)
gives what it gives over the checked reader's records: the same columns in the same order, the
same rows in the store's order, the same values (lists as lists, a column of nulls as None), the
same ``--where`` choice and the same lines named as unreadable."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import cnnbench
from cnnbench.results import engine, sql
from tests.test_results_sql_engine import WHOLE_NUMBERS, as_read, whole_number_store
from tests.test_store_engine import ODD, good, line, write


@pytest.fixture(autouse=True)
def _every_store_through_the_engine(monkeypatch):
    for threshold in ("SMALL_STORE", "SMALL_FILES", "WIDE_STORE", "FRAME_STORE"):
        monkeypatch.setattr(engine, threshold, 0)


def _plain(value):
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, float) and math.isnan(value):
        return None
    return value


def frames(store, monkeypatch, exact=True, **kw):
    """The engine's frame and the checked reader's (as comparable plain values), and whether the
    engine read it."""
    real = sql.runs_frame
    used: list[bool] = []

    def through_engine(*a, **k):
        made = real(*a, **k)
        used.append(made is not None)
        return made

    monkeypatch.setattr(sql, "runs_frame", through_engine)
    new = cnnbench.read_results(store, **kw)
    monkeypatch.setattr(sql, "runs_frame", lambda *a, **k: None)
    old = cnnbench.read_results(store, **kw)
    monkeypatch.setattr(sql, "runs_frame", real)

    def plain(frame):
        rows = [[_plain(v) for v in row] for row in frame.itertuples(index=False)]
        return list(frame.columns), rows, [str(p) for p in frame.attrs["problems"]]

    # the same frame: columns, their types, every cell (None and NaN where the other has them)
    if exact:
        pd.testing.assert_frame_equal(new, old, check_exact=True)
    return plain(new), plain(old), any(used), (new, old)


@pytest.mark.parametrize("step_times", [True, False])
@pytest.mark.parametrize("name", list(ODD))
def test_each_odd_line_reads_as_the_checked_reader_reads_it(tmp_path, monkeypatch, name, step_times):
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(0)), ODD[name], line(good(1))])
    write(store / "other.jsonl", [line(good(2, machine="other"))])
    new, old, _, _ = frames(store, monkeypatch, step_times=step_times)
    assert new == old and len(new[1]) >= 3


SHAPES = [
    {"source": {"tool": "tf_cnn_benchmarks", "log": {"lines": [1, 2]}}, "null_once": None},
    {"suite_name": None, "labels": []},
    {"labels": ["x", "y"], "mixed": 1},
    {"mixed": "one", "gpus": [{"index": 0, "name": "H100", "clocks": {"sm": 1980}}]},
    {"big": 10**20, "small": 1e-05, "neg": -3, "flag": False, "when": "2026-01-01T00:00:00+00:00"},
    {"flag": True, "neg": 4, "gpus": [{"index": 1, "name": "H100", "clocks": {"sm": 1755}}]},
]


@pytest.mark.parametrize(("where", "by_engine"), [
    ((), True), (("model=resnet1*",), True), (("batch_size!=9", "machine=box"), True), (("model=nothing",), True),
    (("status=ok", "precision!=fp16", "config.num_devices=1"), True),
    (("neg=4",), False), (("flag=true",), False),  # a bare name: the checked reader looks it up in each section
])
@pytest.mark.parametrize("step_times", [True, False])
def test_columns_of_every_kind_and_where(tmp_path, monkeypatch, where, by_engine, step_times):
    store = tmp_path / "results"
    records = [good(i, **extra) for i, extra in enumerate(SHAPES)]
    records[2]["metrics"]["step_times_s"] = None
    records[1]["suite_name"] = "s"  # as null, a --where that leaves it out is the known gap below
    write(store / "b.jsonl", [line(r) for r in records])
    write(store / "a.jsonl", [line(good(9, machine="a"))])
    new, old, used, (frame, _) = frames(store, monkeypatch, where=list(where), step_times=step_times)
    assert used == by_engine and new == old
    if not where:
        assert len(frame) == 7 and frame["config.batch_size"].tolist() == [17, 8, 9, 10, 11, 12, 13]  # a.jsonl first
        assert ("metrics.step_times_s" in frame.columns) == step_times
        if step_times:
            assert frame["metrics.step_times_s"][0] == [0.1, 0.2] and frame["metrics.step_times_s"][3] is None
        assert frame["labels"][3] == ["x", "y"] and frame["gpus"][4][0]["clocks"] == {"sm": 1980}
        assert frame["labels"][0] is None and frame["neg"].tolist()[5:] == [-3.0, 4.0]
        # a cell missing is None beside text, lists or true/false (a field not there and a null alike)
        assert frame["null_once"].tolist() == [None] * 7 and frame["flag"].tolist() == [None] * 5 + [False, True]
        assert frame["mixed"].tolist() == [None, None, None, 1, "one", None, None] and frame["neg"].isna().sum() == 5


def test_a_field_null_in_runs_left_out_alone_is_an_empty_column(tmp_path, monkeypatch):
    """Known: DuckDB reads a null as it reads a field not there, so a field that only runs
    ``where`` leaves out hold (as null) is a column of nulls here, and no column in the checked
    reader's frame; every other column and value is the same."""
    store = tmp_path / "results"
    records = [good(i) for i in range(3)]
    records[0]["suite_name"] = None
    write(store / "b.jsonl", [line(r) for r in records])
    new, old, used, (frame, _) = frames(store, monkeypatch, exact=False, where=["batch_size!=8"])
    assert used and "suite_name" not in old[0] and frame["suite_name"].tolist() == [None, None]
    assert [c for c in new[0] if c != "suite_name"] == old[0]
    assert [[v for c, v in zip(new[0], row, strict=True) if c != "suite_name"] for row in new[1]] == old[1]


def test_problems_are_named_and_told_as_the_checked_reader_tells_them(tmp_path, monkeypatch, capsys):
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(0)), "{torn", line(good(1)), ODD["figure NaN"]])
    write(store / "big.jsonl", [line(good(i, machine="big")) for i in range(2, 6)])
    new, old, used, _ = frames(store, monkeypatch)
    assert used and new == old and len(new[2]) == 2 and f"{store / 'box.jsonl'}:2" in new[2][0]
    capsys.readouterr()
    cnnbench.read_results(store, verbose=True)
    assert f"{store / 'box.jsonl'}:2" in capsys.readouterr().err


def test_a_where_name_the_engine_does_not_resolve_is_the_checked_readers(tmp_path, monkeypatch):
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(3)])
    new, old, used, _ = frames(store, monkeypatch, where=["total_images_per_sec=101"])  # a bare metric name
    assert not used and new == old and len(new[1]) == 1
    with pytest.raises(ValueError):
        cnnbench.read_results(store, where=["no condition"])


def test_plain_cells_makes_each_cell_one_way():
    """Whatever made a frame (pandas from Python values, DuckDB's nullable types and NumPy arrays):
    whole numbers stay whole, beside a missing cell floats; true/false beside one objects; a list is
    a list wherever it stands; a missing cell None outside a column of numbers."""
    from cnnbench.results.flatten import plain_cells

    frame = pd.DataFrame({"whole": pd.array([1, 2], dtype="Int64"), "gap": pd.array([1, None], dtype="Int64"),
                          "lists": ["x", np.array([1.0, 2.0])], "flags": pd.array([True, None], dtype="boolean"),
                          "none": [None, np.nan], "floats": [1.5, np.nan]})
    cells = plain_cells(frame)
    assert {k: str(v) for k, v in cells.dtypes.items()} == {"whole": "int64", "gap": "float64", "lists": "object",
                                                            "flags": "object", "none": "object", "floats": "float64"}
    assert cells["lists"].tolist() == ["x", [1.0, 2.0]] and type(cells["lists"][1]) is list
    assert cells["flags"].tolist() == [True, None] and cells["none"].tolist() == [None, None]
    assert cells["gap"].tolist()[0] == 1.0 and math.isnan(cells["gap"].tolist()[1])


@pytest.mark.parametrize("case", list(WHOLE_NUMBERS))
def test_whole_numbers_beyond_64_bits_keep_every_digit_in_the_frame(tmp_path, monkeypatch, case):
    """As the checked reader's frame has them: pandas' type of the Python ints (uint64, objects, or
    floats where one is missing), never DuckDB's HUGEINT made floats."""
    store = whole_number_store(tmp_path, case)
    new, old, used, (frame, _) = frames(store, monkeypatch)
    assert used and new == old
    if None not in WHOLE_NUMBERS[case]:
        assert frame["tag"].tolist() == as_read(WHOLE_NUMBERS[case])
