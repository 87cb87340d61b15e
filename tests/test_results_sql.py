"""``cnnbench results query`` and ``cnnbench.query``: SQL over the views ``runs`` and ``steps`` of a
store, read-only and sandboxed; the store's guarantees (lines named, schema upgraded, special
files refused) hold on this path as on every reader's."""

from __future__ import annotations

import csv
import io
import json
import os

import pytest

import cnnbench
from cnnbench.cli import main
from cnnbench.results.sql import QueryError, Store, run_query
from cnnbench.results.store import append_record
from tests.test_store import make_record


@pytest.fixture
def store(tmp_path):
    folder = tmp_path / "results"
    for i in range(3):
        append_record(folder, make_record(i, machine="box-a"))
    append_record(folder, make_record(3, machine="box-b", status="oom"))
    return folder


def _query(capsys, sql, *args):
    code = main(["results", "query", sql, *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_runs_has_the_dotted_columns_of_an_export_typed_from_their_values_in_its_order(store):
    with Store(store) as db:
        types = dict(db.query("SELECT column_name, column_type FROM (DESCRIBE runs)").rows)
        assert types["config.model"] == "VARCHAR"
        assert types["config.batch_size"] == "BIGINT"
        assert types["config.forward_only"] == "BOOLEAN"
        assert types["metrics.total_images_per_sec"] == "DOUBLE"
        assert "metrics.step_times_s" not in types  # they are the steps view
        assert types["started_at"] == types["run_id"] == "VARCHAR"  # text, as in every store
        assert types["kind"] == "VARCHAR" and types["environment.gpu_model"] == "VARCHAR"  # in every store
        rows = db.query('SELECT "config.batch_size", "metrics.total_images_per_sec" FROM runs '
                        "WHERE status = 'ok' ORDER BY 1").rows
        names = db.query("SELECT column_name FROM (DESCRIBE runs)").rows
    assert rows == [(8, 100.0), (16, 101.0), (24, 102.0)]
    assert [n for (n,) in names][:5] == ["started_at", "environment.machine", "case_name", "config.model",
                                         "config.batch_size"]


def test_a_column_of_mixed_values_is_json(tmp_path):
    folder = tmp_path / "results"
    append_record(folder, make_record(0, note=1.5))
    append_record(folder, make_record(1, note="text"))
    append_record(folder, make_record(2, note=[1, "x"]))
    result = run_query('SELECT note FROM runs ORDER BY "config.batch_size"', folder)
    assert result.types == ["JSON"]
    assert [row[0] for row in result.rows] == [1.5, "text", [1, "x"]]


def test_steps_has_every_timed_step_of_every_run_numbered_from_1(store):
    result = run_query("SELECT step, seconds FROM steps JOIN runs USING (run_id) "
                       'WHERE "config.batch_size" = 16 ORDER BY step', store)
    assert result.rows == [(k + 1, pytest.approx(0.01 * (k + 1))) for k in range(5)]
    assert run_query("SELECT count(*) FROM steps", store).rows == [(15,)]  # the oom run has none


def test_the_cli_prints_a_table_csv_or_json(store, capsys):
    sql = 'SELECT "config.batch_size" AS batch, "metrics.total_images_per_sec" AS ips FROM runs ' \
          "WHERE status = 'ok' ORDER BY batch"
    code, out, _ = _query(capsys, sql, store)
    assert code == 0 and "batch" in out and "3 rows" in out
    code, out, _ = _query(capsys, sql, store, "--format", "csv")
    assert code == 0
    assert list(csv.reader(io.StringIO(out))) == [["batch", "ips"], ["8", "100.0"], ["16", "101.0"], ["24", "102.0"]]
    code, out, _ = _query(capsys, sql, store, "--format", "json")
    assert code == 0
    assert json.loads(out) == [{"batch": 8, "ips": 100.0}, {"batch": 16, "ips": 101.0}, {"batch": 24, "ips": 102.0}]
    code, out, _ = _query(capsys, "SELECT 1 AS one WHERE false", store, "--format", "json")
    assert code == 0 and json.loads(out) == []


def test_csv_cells_from_the_store_cannot_be_formulas(tmp_path, capsys):
    folder = tmp_path / "results"
    append_record(folder, make_record(0, machine="=HYPERLINK(\"http://x\")"))
    code, out, _ = _query(capsys, 'SELECT "environment.machine" FROM runs', folder, "--format", "csv")
    assert code == 0
    assert out.splitlines()[1].startswith("\"'=HYPERLINK")


def test_a_bad_line_is_named_and_the_other_runs_are_read(store, capsys):
    path = next(store.glob("box-a*.jsonl"))
    with open(path, "a") as f:
        f.write('{"status": "ok", "trunc\n')
    code, out, err = _query(capsys, "SELECT count(*) AS n FROM runs", store, "--format", "json")
    assert code == 0 and json.loads(out) == [{"n": 4}]
    assert f"warning: skipped {path}:4: malformed line" in err


def test_an_older_schema_is_upgraded_on_this_path_too(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    old = {"config": {"model": "alexnet"}, "metrics": {"total_images_per_sec": 12.5}, "environment": {"machine": "m"}}
    (folder / "old.jsonl").write_text(json.dumps(old) + "\n")
    assert run_query('SELECT schema_version, status, "config.model" FROM runs', folder).rows == [(2, "ok", "alexnet")]


def test_a_fifo_in_the_store_is_refused_not_waited_on(store, capsys):
    os.mkfifo(store / "swapped.jsonl")
    code, out, err = _query(capsys, "SELECT count(*) AS n FROM runs", store, "--format", "json")
    assert code == 0 and json.loads(out) == [{"n": 4}]
    assert "swapped.jsonl" in err


HOSTILE = [
    "COPY runs TO '{target}'",
    "COPY (SELECT * FROM runs) TO '{target}' (FORMAT csv)",
    "ATTACH '{target}' AS other",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "CREATE TABLE kept AS SELECT * FROM runs",
    "DROP TABLE runs",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('{store}/box-a.jsonl')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT 1; COPY runs TO '{target}'",
]


@pytest.mark.parametrize("statement", HOSTILE)
def test_a_hostile_statement_is_refused_in_one_line_and_leaves_nothing(store, tmp_path, capsys, statement):
    target = tmp_path / "out" / "stolen"
    target.parent.mkdir()
    before = sorted(os.listdir(store))
    code, out, err = _query(capsys, statement.format(target=target, store=store), store)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and "query:" in err
    assert os.listdir(target.parent) == [] and sorted(os.listdir(store)) == before
    assert not os.path.exists(".tmp")


@pytest.mark.parametrize("statement", ["COPY runs TO '{target}'", "ATTACH '{target}' AS other", "INSTALL httpfs",
                                       "SET enable_external_access = true", "SET lock_configuration = false",
                                       "SELECT * FROM read_csv('/etc/passwd')"])
def test_the_engine_itself_refuses_what_the_statement_check_lets_through(store, tmp_path, statement):
    """The sandbox is the engine's own settings: a statement given to the connection directly,
    past the check of its kind, is refused by DuckDB."""
    import duckdb

    target = tmp_path / "stolen"
    with Store(store) as db, pytest.raises(duckdb.Error):
        db._con.execute(statement.format(target=target))
    assert not target.exists()


def test_a_statement_that_is_no_query_is_refused_before_the_store_is_read(tmp_path, capsys):
    code, _, err = _query(capsys, "DELETE FROM runs", tmp_path / "nowhere")
    assert code == 2 and "not a DELETE statement" in err  # not "no results at": nothing was read


def test_a_wrong_query_is_duckdbs_reason_in_one_line(store, capsys):
    code, _, err = _query(capsys, "SELECT nothing_here FROM runs", store)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert 'Referenced column "nothing_here" not found' in err


def test_the_python_api_returns_a_dataframe_with_the_problems(store):
    frame = cnnbench.query('SELECT "config.model" AS model, count(*) AS runs FROM runs GROUP BY 1', store)
    assert list(frame.columns) == ["model", "runs"]
    assert frame.to_dict("records") == [{"model": "resnet18", "runs": 4}]
    assert frame.attrs["problems"] == []
    with pytest.raises(ValueError, match="not a COPY statement"):
        cnnbench.query("COPY runs TO 'x.csv'", store)
    with pytest.raises(ValueError, match="give one SQL query as text"):
        cnnbench.query(42, store)  # type: ignore[arg-type]
    with pytest.raises(QueryError):
        cnnbench.query("SELECT * FROM nowhere", store)


def test_a_store_without_runs_has_both_views_with_the_contracts_columns(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = _query(capsys, 'SELECT kind, "metrics.total_images_per_sec" FROM runs', empty, "--format", "json")
    assert (code, json.loads(out)) == (0, [])
    assert run_query("SELECT count(*) FROM steps", empty).rows == [(0,)]
    with Store(empty) as db:
        assert {"run_id", "kind", "environment.gpu_model", "config.batch_size"} <= {
            n for (n,) in db.query("SELECT column_name FROM (DESCRIBE runs)").rows}


def test_a_store_of_failed_runs_has_no_steps_and_answers_from_python_too(tmp_path):
    folder = tmp_path / "results"
    append_record(folder, make_record(0, status="oom"))
    append_record(folder, make_record(1, status="error"))
    assert run_query("SELECT count(*) FROM steps", folder).rows == [(0,)]
    assert cnnbench.query("SELECT count(*) AS n FROM runs", folder).to_dict("records") == [{"n": 2}]
    assert run_query("SELECT run_id, max(seconds) FROM steps GROUP BY 1", folder).rows == []


def test_keys_empty_or_told_apart_only_by_case_keep_their_values(tmp_path):
    folder = tmp_path / "results"
    append_record(folder, make_record(0, Note=1, **{"": "empty"}))
    append_record(folder, make_record(1, note="x"))
    with Store(folder) as db:
        names = [n for (n,) in db.query("SELECT column_name FROM (DESCRIBE runs)").rows]
        assert "Note" in names and "note_1" in names and "_" in names
        rows = db.query('SELECT status, "Note", note_1, "_" FROM runs ORDER BY "config.batch_size"').rows
    assert rows == [("ok", 1, None, "empty"), ("ok", None, "x", None)]


def test_json_inside_lists_and_structs_reads_as_values(tmp_path, capsys):
    folder = tmp_path / "results"
    append_record(folder, make_record(0, items=[{"a": 1}], tags=[1, "x", None]))
    append_record(folder, make_record(1, items=[{"a": "y"}], tags=["z"]))
    code, out, _ = _query(capsys, 'SELECT items, tags FROM runs ORDER BY "config.batch_size"', folder,
                          "--format", "json")
    assert code == 0
    assert json.loads(out) == [{"items": [{"a": 1}], "tags": [1, "x", None]}, {"items": [{"a": "y"}], "tags": ["z"]}]
    frame = cnnbench.query('SELECT tags FROM runs ORDER BY "config.batch_size"', folder)
    assert frame["tags"].tolist() == [[1, "x", None], ["z"]]


def test_json_inside_maps_reads_as_values(tmp_path):
    """A map's JSON values (and keys) read as values, from a query and a DataFrame, and in the
    ``{"key": [...], "value": [...]}`` shape older DuckDB versions give a map in."""
    import duckdb

    from cnnbench.results.sql import _decode

    folder = tmp_path / "results"
    append_record(folder, make_record(0, tags=[1, "x"]))
    sql = "SELECT MAP(['k1', 'k2'], [tags[1], tags[2]]) AS m FROM runs"
    assert run_query(sql, folder).rows == [({"k1": 1, "k2": "x"},)]
    assert cnnbench.query(sql, folder)["m"].tolist() == [{"k1": 1, "k2": "x"}]
    kind = duckdb.connect(":memory:").execute("SELECT MAP(['1'::JSON], ['\"x\"'::JSON])").description[0][1]
    assert _decode({"key": ["1"], "value": ['"x"']}, kind) == {"key": [1], "value": ["x"]}


def test_a_record_of_many_megabytes_is_read(tmp_path):
    folder = tmp_path / "results"
    append_record(folder, make_record(0, blob="x" * (17 << 20)))
    assert run_query("SELECT length(blob) FROM runs", folder).rows == [(17 << 20,)]


def test_integers_beyond_64_bits_are_written_as_json_numbers(store, capsys):
    code, out, _ = _query(capsys, "SELECT 170141183460469231731687303715884105727::HUGEINT AS big", store,
                          "--format", "json")
    assert code == 0 and json.loads(out) == [{"big": 170141183460469231731687303715884105727}]


def test_the_catalog_shows_both_views(store):
    assert sorted(run_query("SHOW TABLES", store).rows) == [("runs",), ("steps",)]


def test_a_store_read_through_its_cache_gives_both_views(tmp_path):
    """A file of 1 MiB or more is read through its cache, whose step times are views, not lists."""
    from cnnbench.results import cache
    from cnnbench.results.store import append_records

    folder = tmp_path / "results"
    append_records(folder, [make_record(i) for i in range(3000)])
    assert sum(p.stat().st_size for p in folder.glob("*.jsonl")) >= cache.MIN_BYTES
    for _ in range(2):  # the cache written, then read
        assert run_query("SELECT count(*), count(DISTINCT run_id) FROM steps JOIN runs USING (run_id)",
                         folder).rows == [(15000, 3000)]


def test_a_runaway_query_stops_at_a_ctrl_c_in_one_line(tmp_path):
    """A cross join of steps ran on for 90 s after a ^C (DuckDB looks for Python's signals only now
    and then) and ended, when it did, in a traceback and exit 1: it stops at once, 'interrupted', 130."""
    import signal
    import subprocess
    import sys
    import time

    record = make_record(0)
    record["metrics"]["step_times_s"] = [0.01 + k * 1e-7 for k in range(20_000)]
    folder = tmp_path / "results"
    append_record(folder, record)
    env = {**os.environ, "CNNBENCH_CACHE_DIR": str(tmp_path / "cache")}
    sql = "SELECT sum(a.seconds * b.seconds * c.seconds) FROM steps a, steps b, steps c"  # 8e12 rows: hours
    proc = subprocess.Popen([sys.executable, "-m", "cnnbench", "results", "query", sql, str(folder)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # until the query has run a while (the store read, the join begun)
            with open(f"/proc/{proc.pid}/stat") as f:
                ticks = sum(map(int, f.read().rsplit(")", 1)[1].split()[11:13]))
            if ticks > 3 * os.sysconf("SC_CLK_TCK") or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)  # at once: the old code needed 30 s or more, on a quiet machine
    finally:
        proc.kill()
    assert proc.returncode == 130 and err.strip() == "cnnbench results: interrupted", err


def test_json_keeps_every_column_of_a_name_given_twice_and_csv_spells_booleans_as_export(store, capsys):
    """A name given twice kept one value of the JSON row (SELECT 1 AS a, 2 AS a gave {"a": 2}): the
    keys are made distinct as the DataFrame's are; CSV wrote Python's True where results export
    writes true."""
    code, out, _ = _query(capsys, 'SELECT 1 AS a, 2 AS a, 3 AS "A", true AS t', store, "--format", "json")
    assert code == 0 and json.loads(out) == [{"a": 1, "a_1": 2, "A_2": 3, "t": True}], out
    code, out, _ = _query(capsys, 'SELECT 1 AS "é", 2 AS "É"', store, "--format", "json")  # two names to DuckDB
    assert code == 0 and json.loads(out) == [{"é": 1, "É": 2}] and list(cnnbench.query('SELECT 1 AS "é", 2 AS "É"',
                                                                                     store).columns) == ["é", "É"]
    frame = cnnbench.query('SELECT 1 AS a, 2 AS a, 3 AS "A", true AS t', store)
    assert list(frame.columns) == ["a", "a_1", "A_2", "t"]
    code, out, _ = _query(capsys, 'SELECT "config.forward_only" FROM runs LIMIT 1', store, "--format", "csv")
    assert code == 0 and out.splitlines() == ["config.forward_only", "false"], out


def test_a_query_that_is_no_utf8_text_is_one_line(store, capsys):
    """A byte of another encoding in the SQL (a lone surrogate, as Python keeps it) was a TypeError
    traceback, exit 1."""
    code, _, err = _query(capsys, "SELECT '\udcff' AS x", store)
    assert code == 2 and "the query is not UTF-8 text" in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(ValueError, match="not UTF-8"):
        cnnbench.query("SELECT '\udcff'", store)


def test_a_second_ctrl_c_waits_on_with_the_first():
    """People press ^C twice: the second, as the interrupted statement ended, escaped the wait, and the
    store was closed while the statement still held it (a traceback, exit 1). It waits on too."""
    import signal
    import sys
    import threading
    import time

    from cnnbench.results.sql import _interruptible

    released = threading.Event()
    finished: list[bool] = []

    class Connection:
        calls = 0

        def interrupt(self) -> None:
            self.calls += 1
            if self.calls == 1:
                os.kill(os.getpid(), signal.SIGINT)  # the second ^C, as the first is being handled
            else:
                released.set()

    def waiting() -> bool:  # whether the main thread waits on this one (not yet on its start)
        frame = sys._current_frames()[threading.main_thread().ident]
        while frame is not None and frame.f_code.co_name == "wait":
            frame = frame.f_back
        return frame is not None and frame.f_code.co_name == "_interruptible"

    def statement() -> None:
        deadline = time.monotonic() + 60
        while not waiting() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)  # the first ^C
        released.wait(60)
        finished.append(True)

    connection = Connection()
    with pytest.raises(KeyboardInterrupt):
        _interruptible(connection, statement)
    assert connection.calls == 2 and finished == [True]
