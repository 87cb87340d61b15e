"""``results export`` through DuckDB (:func:`cnnbench.results.engine.export_scan`) writes what the
checked reader's export writes: the same columns in the same order, the same runs in the store's
order, the same cells (a list's JSON may be spelled otherwise: the same value), every text cell made
safe for a spreadsheet, and every unusable line named the same way; as CSV, as JSON (a field null
in a run is left out of its object) and as Parquet (each column of the same type)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from cnnbench.cli import main
from cnnbench.results import engine
from cnnbench.results.csv_out import is_number_text
from tests.test_store_engine import ODD, good, line, use_sidecars, write

REAL = engine.export_scan


@pytest.fixture
def sidecar_cache(monkeypatch, tmp_path):
    return use_sidecars(monkeypatch, tmp_path)


@pytest.fixture(autouse=True)
def _every_store_through_the_engine(monkeypatch):
    for threshold in ("SMALL_STORE", "SMALL_FILES", "WIDE_STORE", "FRAME_STORE"):
        monkeypatch.setattr(engine, threshold, 0)


def export(capsys, monkeypatch, args, *, engine_allowed: bool, fmt: str = "csv"):
    """What ``results export --format FMT ARGS`` printed (output, warnings), and whether the engine
    wrote it; for Parquet, the output is the file written (beside the first of ``args``)."""
    used: list[bool] = []

    def spy(*a, **k):
        if not engine_allowed:
            raise engine.EngineCannot("the checked reader, for the comparison")
        rows = REAL(*a, **k)
        used.append(True)
        return rows

    monkeypatch.setattr(engine, "export_scan", spy)
    target = f"{args[0]}.{'engine' if engine_allowed else 'checked'}.parquet"
    capsys.readouterr()
    assert main(["results", "export", "--format", fmt, *args, *(["-o", target] if fmt == "parquet" else [])]) == 0
    out, err = capsys.readouterr()
    return (target if fmt == "parquet" else out), err.replace(target, "FILE"), bool(used)


def table(text: str) -> list[list]:
    def value(cell: str):
        if cell and cell[0] in "[{":
            return json.loads(cell)
        if is_number_text(cell):  # DuckDB spells some numbers otherwise (1e-05 as 0.00001): the same value
            return float(cell)
        return cell

    rows = list(csv.reader(io.StringIO(text, newline="")))
    return [rows[0]] + [[value(c) for c in row] for row in rows[1:]]


def json_table(text: str) -> list[list]:
    """The JSON export as :func:`table` gives a CSV one: the columns met with a value, then each
    run's values (a field null in a run, or not in it, as None)."""
    runs = json.loads(text)
    columns = list(dict.fromkeys(name for run in runs for name, value in run.items() if value is not None))
    return [columns] + [[run.get(name) for name in columns] for run in runs]


def parquet_table(path: str) -> list[list]:
    """The Parquet export as :func:`table` gives a CSV one, each column's name with its type (a
    list's element type as pyarrow names it: ``item``), text that is JSON read as its value."""
    import pyarrow.parquet as pq

    read = pq.read_table(path)
    columns = [f"{f.name}: {str(f.type).replace('element: ', 'item: ')}" for f in read.schema]
    cells = [[json.loads(v) if isinstance(v, str) and v[:1] in "[{" else v for v in read.column(i).to_pylist()]
             for i in range(read.num_columns)]
    return [columns] + [list(row) for row in zip(*cells, strict=True)]


READ = {"csv": table, "json": json_table, "parquet": parquet_table}
FORMATS = list(READ)


def both(capsys, monkeypatch, args, fmt="csv"):
    new = export(capsys, monkeypatch, args, engine_allowed=True, fmt=fmt)
    old = export(capsys, monkeypatch, args, engine_allowed=False, fmt=fmt)
    return new, old


def same(capsys, monkeypatch, args, *, by_engine: bool | None = True, fmt: str = "csv"):
    """The export's table through the engine, once seen to be the checked reader's; ``by_engine``:
    whether the engine wrote it (None: either)."""
    (new_out, new_err, used), (old_out, old_err, _) = both(capsys, monkeypatch, args, fmt)
    assert by_engine is None or used == by_engine
    assert READ[fmt](new_out) == READ[fmt](old_out)
    assert new_err == old_err
    return READ[fmt](new_out)


@pytest.mark.parametrize("name", list(ODD))
def test_each_odd_line_is_exported_as_the_checked_reader_exports_it(tmp_path, capsys, monkeypatch, name):
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(0)), ODD[name], line(good(1))])
    write(store / "other.jsonl", [line(good(2, machine="other"))])
    rows = same(capsys, monkeypatch, [str(store)], by_engine=None)  # a file it cannot vouch for: the checked reader
    assert len(rows) >= 4


CELLS = ["=cmd|' /C calc'!A0", "+1+1", "-2", "-1.5e-3", "@SUM(A1)", "\tx", "\r=x", "'=x", "''-1", "", "a,b",
         'say "hi"', "two\nlines", "é ü", "-", "+", "1e999", "-inf", "'", "plain"]


def test_text_cells_are_made_safe_as_the_one_writer_makes_them(tmp_path, capsys, monkeypatch):
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i, case_name=text)) for i, text in enumerate(CELLS)])
    rows = same(capsys, monkeypatch, [str(store)])
    column = rows[0].index("case_name")
    written = [row[column] for row in rows[1:]]
    assert written[0] == "'=cmd|' /C calc'!A0" and written[2] == -2.0 and written[7] == "''=x"
    assert written[9] == "" and written[12] == "two\nlines"


@pytest.mark.parametrize("fmt", FORMATS)
def test_fields_of_every_shape_and_the_store_order(tmp_path, capsys, monkeypatch, fmt):
    store = tmp_path / "results"
    shapes = [
        {"source": {"tool": "tf_cnn_benchmarks", "log": {"path": "a.log", "lines": [1, 2]}}},
        {"suite_name": None, "labels": []},
        {"labels": ["x", {"k": [1, 2.5, None, True]}]},
        {"empty": {}},
        {"gpus": [{"index": 0, "name": "H100", "clocks": {"sm": 1980}}]},
        {"big": 10**20, "small": 1e-05, "neg": -0.0, "flag": False},
    ]
    write(store / "b.jsonl", [line(good(i, **extra)) for i, extra in enumerate(shapes)])
    write(store / "a.jsonl", [line(good(9, machine="a", note="first file"))])
    rows = same(capsys, monkeypatch, [str(store)], fmt=fmt)
    names = [name.split(":")[0] for name in rows[0]]
    assert [row[names.index("run_id")] for row in rows[1:]][0]  # every run has its id
    assert "source.log.lines" in names and "empty" not in names


def test_a_field_that_is_a_section_in_another_run_is_left_to_the_checked_reader(tmp_path, capsys, monkeypatch):
    store = tmp_path / "results"
    write(store / "b.jsonl", [line(good(0, source={"tool": "x"})), line(good(1, source="flat text"))])
    rows = same(capsys, monkeypatch, [str(store)], by_engine=False)
    assert "source" in rows[0] and "source.tool" in rows[0]


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_step_times_and_where(tmp_path, capsys, monkeypatch, fmt):
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(6)])
    write(store / "other.jsonl", [line(good(i, machine="other")) for i in range(3)])
    with_steps = same(capsys, monkeypatch, [str(store)], fmt=fmt)
    assert "metrics.step_times_s" in str(with_steps[0])
    without = same(capsys, monkeypatch, [str(store), "--no-step-times"], fmt=fmt)
    assert "metrics.step_times_s" not in str(without[0]) and len(without) == 10
    kept = same(capsys, monkeypatch, [str(store), "--where", "machine=other", "--where", "batch_size!=9"], fmt=fmt)
    assert len(kept) == 3
    same(capsys, monkeypatch, [str(store), "--where", "model=resnet2*"], fmt=fmt)


def test_step_times_that_break_the_contract_and_no_step_times(tmp_path, capsys, monkeypatch):
    """The checked reader reads a store without step times leaving them unread, so a line whose step
    times are no list is kept there; the engine reads such a file so too (it had refused the line)."""
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(0)), ODD["step times not a list"], line(good(1))])
    assert len(same(capsys, monkeypatch, [str(store), "--no-step-times"])) == 4
    assert len(same(capsys, monkeypatch, [str(store)])) == 3


def test_an_appended_line_after_a_sidecar_and_no_step_times(tmp_path, capsys, monkeypatch, sidecar_cache):
    home, served = sidecar_cache
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(3)])
    assert len(same(capsys, monkeypatch, [str(store)])) == 4 and not served  # the sidecar written
    with open(store / "box.jsonl", "a") as f:
        f.write(ODD["step times not a list"] + "\n")
    assert len(same(capsys, monkeypatch, [str(store), "--no-step-times"])) == 5 and served == ["box.jsonl"]
    assert len(same(capsys, monkeypatch, [str(store)])) == 4  # refused where its step times are read


def test_step_times_only_appended_lines_hold_are_not_lost_to_a_sidecar(tmp_path, capsys, monkeypatch,
                                                                       sidecar_cache):
    """A read without step times writes the sidecar again after appended lines: it must not say that
    the file holds no step times when only those lines do (a read with them would get none)."""
    home, served = sidecar_cache
    store = tmp_path / "results"
    bare = [good(i) for i in range(3)]
    for r in bare:
        del r["metrics"]["step_times_s"]
    write(store / "box.jsonl", [line(r) for r in bare])
    assert "metrics.step_times_s" not in same(capsys, monkeypatch, [str(store)])[0]
    with open(store / "box.jsonl", "a") as f:
        f.write(line(good(7)) + "\n")
    same(capsys, monkeypatch, [str(store), "--no-step-times"])
    rows = same(capsys, monkeypatch, [str(store)])
    assert rows[-1][rows[0].index("metrics.step_times_s")] == [0.1, 0.2]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_run_in_two_files_and_an_older_record(tmp_path, capsys, monkeypatch, fmt):
    store = tmp_path / "results"
    write(store / "a.jsonl", [line({**good(0), "run_id": "twice"}), line(good(1))])
    write(store / "b.jsonl", [line({**good(5), "run_id": "twice"}), ODD["older schema (1)"]])
    rows = same(capsys, monkeypatch, [str(store)], fmt=fmt)  # the older record upgraded by the checked reader
    assert len(rows) == 4


@pytest.mark.parametrize("records", [[{"Path": 1, "PATH": 2}], [{"Path": 1}, {"PATH": 2}]])
def test_names_alike_but_for_case_are_left_to_the_checked_reader(tmp_path, capsys, monkeypatch, records):
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i, extra=extra)) for i, extra in enumerate(records)] + [line(good(5))])
    rows = same(capsys, monkeypatch, [str(store)], by_engine=False)
    assert "extra.Path" in rows[0] and "extra.PATH" in rows[0]


def test_a_csv_file_and_its_message(tmp_path, capsys, monkeypatch):
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(3)])
    out = tmp_path / "runs.csv"
    used = export(capsys, monkeypatch, [str(store), "-o", str(out)], engine_allowed=True)
    assert used[2] and "wrote 3 runs x" in used[1]
    first = out.read_text()
    export(capsys, monkeypatch, [str(store), "-o", str(out)], engine_allowed=False)
    assert table(out.read_text()) == table(first)
    assert first.endswith("\n") and "\r" not in first


def test_sidecars_serve_an_export_and_a_field_appended_later(tmp_path, capsys, monkeypatch):
    from cnnbench.results import cache

    monkeypatch.setenv("CNNBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(4)])
    write(store / "other.jsonl", [line(good(i, machine="other")) for i in range(2)])
    first = same(capsys, monkeypatch, [str(store)])
    described: list = []
    real = engine._described
    monkeypatch.setattr(engine, "_described", lambda con, fd: described.append(fd) or real(con, fd))
    assert same(capsys, monkeypatch, [str(store)]) == first
    assert not described  # each file's fields from its sidecar
    with open(store / "box.jsonl", "a", encoding="utf-8") as f:
        f.write(line(good(7, added_later={"x": 1})) + "\n")
    rows = same(capsys, monkeypatch, [str(store)])
    assert "added_later.x" in rows[0] and len(rows) == 8
    # a list read between: its sidecar keeps the fields of the file
    assert main(["results", "list", str(store)]) == 0
    assert same(capsys, monkeypatch, [str(store)]) == rows



@pytest.mark.parametrize("records", [[{"a.b": "v"}], [{"Tag": "v"}, {"tag": "t"}], [{"inner": {"x.y": 1}}]])
def test_names_the_engine_cannot_name_as_they_are(tmp_path, capsys, monkeypatch, records):
    """A dotted name reads as a nested path to the engine; DuckDB renames a name alike but for case
    met in another record (``tag_1``): the checked export writes these."""
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i, **extra)) for i, extra in enumerate(records)] + [line(good(5))])
    same(capsys, monkeypatch, [str(store)], by_engine=False)


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_columns_are_those_of_the_runs_kept(tmp_path, capsys, monkeypatch, fmt):
    store = tmp_path / "results"
    write(store / "a.jsonl", [line({**good(0), "run_id": "r0"}), line(good(1, tag="x"))])
    write(store / "b.jsonl", [line({**good(0, tag="dup"), "run_id": "r0"}), line(good(2))])
    rows = same(capsys, monkeypatch, [str(store), "--where", "model=resnet18"], fmt=fmt)
    names = [name.split(":")[0] for name in rows[0]]
    assert "tag" not in names and ("error" in names) == (fmt != "json") and len(rows) == 2
    rows = same(capsys, monkeypatch, [str(store), "--where", "model!=resnet19"], fmt=fmt)
    assert "tag" not in str(rows[0])  # the repeat of r0 in b.jsonl is not exported: nor is its field


@pytest.mark.parametrize("case", ["step 1e300", "empty object beside a number"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_values_a_review_found(tmp_path, capsys, monkeypatch, case, fmt):
    records = [good(0), good(1), good(2)]
    if case == "step 1e300":
        records[1]["metrics"]["step_times_s"] = [1e300, 0.2]
    else:
        records[0]["metrics"]["x"] = {}
        records[1]["metrics"]["x"] = 3
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(r) for r in records])
    same(capsys, monkeypatch, [str(store)], by_engine=None, fmt=fmt)


@pytest.mark.parametrize(("steps", "checked"), [([0.0016978024783322835, 0.002132074878779606], False),
                                                ([0.1, 12345678901234567890123], True), ([0.1, 1e300], True)])
def test_lists_the_engine_vouches_for(tmp_path, capsys, monkeypatch, steps, checked):
    """Step times as runs write them (fractions of 19 digits) are the engine's to read; a list
    holding a figure past the limit sends its file to the checked reader."""
    records = [good(0), good(1)]
    records[1]["metrics"]["step_times_s"] = steps
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(r) for r in records])
    read: list = []
    real = engine._read_checked
    monkeypatch.setattr(engine, "_read_checked", lambda *a, **k: (read.append(a[2].name), real(*a, **k)))
    same(capsys, monkeypatch, [str(store)])
    assert bool(read) == checked


def test_a_dotted_key_beside_a_torn_line_is_the_checked_export(tmp_path, capsys, monkeypatch):
    """A file DuckDB cannot find the fields of (a torn line) has them from the checked reader's
    records: a key with a dot in it there leaves the store to the checked export too."""
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(0, **{"a.b": "v"})), line(good(1)), line(good(2))[:40]], end="")
    rows = same(capsys, monkeypatch, [str(store)], by_engine=False)
    assert rows[1][rows[0].index("a.b")] == "v"


PARQUET_VALUES = {
    "keys alike but for case in a list's objects": [[{"A": 1}], [{"a": 2}]],
    "an empty key in a list's objects": [[{"": 1}], [{"": 2}]],
    "19 digits within 64 bits": [1234567890123456789, 5],
    "a minus and 18 digits": [-123456789012345678, 5],
    "the least 64-bit number": [-2 ** 63, 5],
    "beyond 64 bits": [10 ** 20, 5],
    "a list element beyond 63 bits": [[2 ** 63], [1]],
    "a list beside an empty object": [[1], {}],
    "lists of objects beside an empty object": [[{"a": 1}], {}],
    "lists of numbers beside an empty object": [[1, 2.5], {}, [3]],
    "beyond 2**53 beside a fraction": [1.5, 2 ** 53 + 1],
    "beyond 2**53 alone": [2 ** 53 + 1, 3],
    "lists of empty objects": [[{}], [{}]],
    "beyond 63 bits, within 64 unsigned": [2 ** 63, 5],
    "the greatest 64-bit unsigned number": [2 ** 64 - 1, 5],
    "beyond 64 unsigned bits": [2 ** 64, 5],
    "a list element of 19 digits within 64 bits": [[1234567890123456789], [1]],
    "the least 64-bit number in a list": [[-2 ** 63], [1]],
    "long digits in a list's text": [["ts 1733345678123456789"], ["b"]],
    "long digits in a list's object key": [[{"1234567890123456789": 1}], [{"1234567890123456789": 2}]],
    "a list element beyond 64 unsigned bits": [[2 ** 64], [1]],
    "lists of whole numbers of both signs": [[-1], [2]],
    "lists of objects of whole numbers of both signs": [[{"a": -1}], [{"a": 2}]],
    "nested lists of both signs": [[[-1], [2]], [[3]]],
    "a list beyond 2**53 beside a fraction": [[2 ** 53 + 1, 1.5], [1]],
    "64 bits unsigned beside 1e20": [2 ** 63, 1e20],
    "64 bits unsigned beside 1e-05": [2 ** 63, 1e-05],
    "beyond 64 unsigned bits beside 64 bits unsigned": [2 ** 64, 2 ** 63],
    "text beside 1e-05": [1e-05, "x"],
    "text beside a list": ["a", [1, "b"]],
}


@pytest.mark.parametrize("name", list(PARQUET_VALUES))
def test_parquet_columns_of_values_a_review_found(tmp_path, capsys, monkeypatch, name):
    """Each Parquet column as the checked export types it (where DuckDB cannot type a list's
    objects, the checked export writes the file), one warning each, and no traceback."""
    store = tmp_path / "results"
    runs = [line(good(i, v=v)) for i, v in enumerate(PARQUET_VALUES[name])]
    write(store / "box.jsonl", [*runs, line(good(9)), "{torn"])
    rows = same(capsys, monkeypatch, [str(store)], by_engine=None, fmt="parquet")
    assert len(rows) == len(runs) + 2


def test_a_parquet_export_of_no_run_is_the_checked_one(tmp_path, capsys, monkeypatch):
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(3)])
    rows = same(capsys, monkeypatch, [str(store), "--where", "model=nothing"], by_engine=None, fmt="parquet")
    assert rows == [[]]


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_export_of_no_run_has_no_column_in_any_format(tmp_path, capsys, monkeypatch, fmt):
    """No run kept: no column, as the checked export writes none (the engine wrote a header of the
    fields every run holds as null: a probe's finding)."""
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(3)])  # error: null in each
    rows = same(capsys, monkeypatch, [str(store), "--where", "model=nothing"], by_engine=None, fmt=fmt)
    assert rows in ([], [[]])
