"""``results query`` over a store read by DuckDB (:func:`cnnbench.results.sql._engine_views`) sees
what it sees over the checked reader's records: the same ``runs`` (columns, their order and types,
rows in the store's order, values) and the same ``steps``, the same lines named as unreadable."""

from __future__ import annotations

import pytest

from cnnbench.results import engine, sql
from tests.test_store_engine import ODD, good, line, write


@pytest.fixture(autouse=True)
def _every_store_through_the_engine(monkeypatch):
    for threshold in ("SMALL_STORE", "SMALL_FILES", "WIDE_STORE", "FRAME_STORE"):
        monkeypatch.setattr(engine, threshold, 0)


def answer(store, query: str, *, engine_allowed: bool, monkeypatch):
    real = ENGINE_VIEWS
    used: list[bool] = []

    def views(paths, wanted):
        if not engine_allowed:
            return None
        made = real(paths, wanted)
        used.append(made is not None)
        return made

    monkeypatch.setattr(sql, "_engine_views", views)
    got = sql.run_query(query, [store])
    rows = [tuple(sql.cell_value(v) for v in row) for row in got.rows]
    return (got.columns, [_kind(t) for t in got.types], rows, [str(p) for p in got.problems]), any(used)


def _kind(kind: str) -> str:
    """DuckDB's type of a column, the integer types as one (the checked path's reader finds HUGEINT
    or UBIGINT where the engine's read gives BIGINT), a list of nulls alone as a list of JSON."""
    return {"HUGEINT": "BIGINT", "UBIGINT": "BIGINT", '"NULL"[]': "JSON[]"}.get(kind, kind)


ENGINE_VIEWS = sql._engine_views


def same(store, query, monkeypatch, *, by_engine: bool | None = True):
    new, used = answer(store, query, engine_allowed=True, monkeypatch=monkeypatch)
    old, _ = answer(store, query, engine_allowed=False, monkeypatch=monkeypatch)
    assert by_engine is None or used == by_engine
    assert new == old
    return new


@pytest.mark.parametrize("name", list(ODD))
def test_each_odd_line_is_seen_as_the_checked_reader_sees_it(tmp_path, monkeypatch, name):
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(0)), ODD[name], line(good(1))])
    write(store / "other.jsonl", [line(good(2, machine="other"))])
    # both views named: the checked path reads the step times too, and checks them (read alone,
    # runs gives the checked reader's records without their step times, unchecked)
    both = "SELECT *, (SELECT count(*) FROM steps) AS steps FROM runs"
    columns, _, rows, _ = same(store, both, monkeypatch, by_engine=None)
    assert len(rows) >= 3 and "config.model" in columns
    same(store, "SELECT *, (SELECT count(*) FROM runs) AS runs FROM steps", monkeypatch, by_engine=None)


def test_columns_of_every_kind(tmp_path, monkeypatch):
    store = tmp_path / "results"
    shapes = [
        {"source": {"tool": "tf_cnn_benchmarks", "log": {"lines": [1, 2]}}},
        {"suite_name": None, "labels": []},
        {"labels": ["x", "y"], "mixed": 1},
        {"mixed": "one", "gpus": [{"index": 0, "name": "H100", "clocks": {"sm": 1980}}]},
        {"big": 10**20, "small": 1e-05, "neg": -3, "flag": False, "when": "2026-01-01T00:00:00+00:00"},
        {"flag": True, "neg": 4, "gpus": [{"index": 1, "name": "H100", "clocks": {"sm": 1755}}]},
    ]
    write(store / "b.jsonl", [line(good(i, **extra)) for i, extra in enumerate(shapes)])
    write(store / "a.jsonl", [line(good(9, machine="a"))])
    columns, types, rows, _ = same(store, "SELECT * FROM runs", monkeypatch)
    kinds = dict(zip(columns, types, strict=True))
    assert kinds["neg"] == "BIGINT" and kinds["flag"] == "BOOLEAN" and kinds["mixed"] == "JSON"
    assert kinds["when"] == "VARCHAR" and kinds["small"] == "DOUBLE"
    assert kinds["metrics.energy_j"] == "DOUBLE"  # a contract column no run holds, typed as the contract says
    same(store, "SELECT run_id, step, seconds FROM steps ORDER BY run_id, step", monkeypatch)
    same(store, 'SELECT "config.model", avg("metrics.total_images_per_sec") FROM runs GROUP BY 1 ORDER BY 1',
         monkeypatch)


def test_step_times_that_are_not_all_numbers_are_no_steps(tmp_path, monkeypatch):
    store = tmp_path / "results"
    records = [good(0), good(1), good(2), good(3)]
    records[1]["metrics"]["step_times_s"] = [0.1, "x"]
    records[2]["metrics"]["step_times_s"] = []
    records[3]["metrics"]["step_times_s"] = [True, 0.5]
    write(store / "box.jsonl", [line(r) for r in records])
    _, _, rows, _ = same(store, "SELECT * FROM steps", monkeypatch, by_engine=None)
    assert {row[0] for row in rows} == {records[0]["run_id"], records[3]["run_id"]}


def test_the_sandbox_holds_over_the_engine_read(tmp_path, monkeypatch):
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(3)])
    with sql.Store([store]) as opened:
        assert "scanned" not in {row[0] for row in opened.query("SHOW TABLES").rows}
        for hostile in ("SELECT * FROM read_csv('/etc/passwd')", f"SELECT * FROM read_json('{store}/box.jsonl')"):
            with pytest.raises(sql.QueryError):
                opened.query(hostile)


@pytest.mark.parametrize("threshold", [0, 1 << 40])
def test_no_progress_bar_is_drawn_into_the_output(tmp_path, threshold):
    """DuckDB draws a progress bar on standard output for a statement of 2 s or more (into a CSV a
    command writes there, or a notebook's output): every connection that runs the store's statements
    has it off, the engine's (a query's views are made in its scan's) and the checked path's. In a
    process of its own: under pytest DuckDB draws none anyway."""
    import subprocess
    import sys

    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(3)])
    code = ("import sys; from cnnbench.results import engine, sql\n"
            f"engine.SMALL_STORE = engine.SMALL_FILES = engine.WIDE_STORE = engine.FRAME_STORE = {threshold}\n"
            "q = \"SELECT current_setting('enable_progress_bar') AS bar\"\n"
            "print(engine.connect().execute(q).fetchall())\n"
            "with sql.Store([sys.argv[1]]) as s:\n    print(s.query(q).rows)\n")
    out = subprocess.run([sys.executable, "-c", code, str(store)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[(False,)]", "[(False,)]"]


def test_the_step_times_are_held_once(tmp_path):
    """A query of both views: the engine's table, which ``runs`` is a view of, keeps no step times
    beside ``steps`` (it is in the catalog, read-only, as ``_engine.scanned``)."""
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(good(i)) for i in range(3)])
    with sql.Store([store]) as opened:
        assert opened.query("SELECT count(*) FROM steps").rows == [(6,)]
        cells = [c for row in opened.query("SELECT * FROM _engine.scanned").rows for c in row]
        assert len(cells) > 30 and [0.1, 0.2] not in cells
        assert opened.query('SELECT count("metrics.total_images_per_sec") FROM runs').rows == [(3,)]


@pytest.mark.parametrize("case", ["step 1e300", "list objects alike but for case", "seed of 19 digits",
                                  "minus 18 nines", "empty object beside a number", "empty lists only"])
def test_values_the_engine_must_not_type_alone(tmp_path, monkeypatch, case):
    """Each found by a review: the engine's views give what the checked path gives."""
    records = [good(0), good(1), good(2)]
    if case == "step 1e300":
        records[1]["metrics"]["step_times_s"] = [1e300, 0.2]
    elif case == "list objects alike but for case":
        records[1]["metrics"]["l"] = [{"a": 1}, {"A": 2}]
    elif case == "seed of 19 digits":
        records[1]["config"]["seed"] = 1234567890123456789
    elif case == "minus 18 nines":
        records[1]["metrics"]["x"] = -999999999999999999
    elif case == "empty object beside a number":
        records[0]["metrics"]["x"] = {}
        records[1]["metrics"]["x"] = 3
    else:
        for r in records:
            r["metrics"]["l"] = []
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(r) for r in records])
    both = "SELECT *, (SELECT count(*) FROM steps) AS steps FROM runs"
    if case == "list objects alike but for case":  # no view DuckDB can type: the checked path says so
        with pytest.raises(sql.QueryError, match="cannot make the views of the store"):
            sql.run_query(both, [store])
        return
    same(store, both, monkeypatch, by_engine=None)
    same(store, "SELECT *, (SELECT count(*) FROM runs) AS runs FROM steps", monkeypatch, by_engine=None)
    same(store, "SELECT * FROM steps", monkeypatch, by_engine=None)  # step times read alone


WHOLE_NUMBERS = {
    "beyond 64 bits, and one a double cannot hold": [2**63, 123456789012345678, 256],
    "both signs beyond 64 bits": [-1, 2**63],
    "one missing": [2**63, None],
    "the least of 64 bits": [-2**63, 5],
    "the largest unsigned": [2**64 - 1, 1],
    "beyond 64 bits unsigned": [2**64, 10**40, 3],
}


def as_read(values):
    """The values as the checked reader reads them: a whole number beyond 64 bits (signed or
    unsigned) a float, as orjson reads it."""
    return [v if v is None or -2**63 <= v < 2**64 else float(v) for v in values]


def whole_number_store(tmp_path, case: str):
    """A store of a run per value of ``WHOLE_NUMBERS[case]``, each in the field ``tag`` (none for None)."""
    records = [good(i) for i in range(len(WHOLE_NUMBERS[case]))]
    for r, value in zip(records, WHOLE_NUMBERS[case], strict=True):
        if value is not None:
            r["tag"] = value
    store = tmp_path / "results"
    write(store / "box.jsonl", [line(r) for r in records])
    return store


@pytest.mark.parametrize("case", list(WHOLE_NUMBERS))
def test_whole_numbers_beyond_64_bits_keep_every_digit(tmp_path, monkeypatch, case):
    """A column with a whole number beyond 64 bits is HUGEINT, as the checked path types it (it was
    DOUBLE: 123456789012345678 beside 2**63 read as 1.2345678901234568e+17, a probe's finding)."""
    store = whole_number_store(tmp_path, case)
    _, _, rows, _ = same(store, 'SELECT "tag" FROM runs', monkeypatch)  # types as _kind has them
    assert [row[0] for row in rows] == as_read(WHOLE_NUMBERS[case])
