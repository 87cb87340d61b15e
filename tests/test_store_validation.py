"""One odd line never stops a reader: every reader (``results``, ``report``, sweep resume,
``import``) validates records on read against the record contract and reports each bad
line once, as ``file:line: why``, then goes on."""

from __future__ import annotations

import json
import logging

import pytest

from cnnbench.cli import main
from cnnbench.results.record import Record
from cnnbench.results.store import append_record, read_records
from cnnbench.sweep.runner import SweepOptions, run_suite
from cnnbench.sweep.suite import parse_suite
from tests.sweep_fakes import fake_worker, probe


def good(i: int = 0, machine: str = "box") -> dict:
    return Record(config={"model": "resnet18", "batch_size": 8 + i, "precision": "fp32"},
                  environment={"machine": machine, "hostname": "h"},
                  metrics={"total_images_per_sec": 100.0 + i}).to_dict()


BAD_LINES = {
    "schema_version -1": (lambda: {**good(), "schema_version": -1}, "schema_version"),
    "config is text": (lambda: {**good(), "config": "resnet50"}, "config"),
    "no status": (lambda: {k: v for k, v in good().items() if k != "status"}, "status"),
    "status not allowed": (lambda: {**good(), "status": "great"}, "status"),
    "metrics is a list": (lambda: {**good(), "metrics": [1, 2]}, "metrics"),
    "batch size is text": (lambda: {**good(), "config": {"model": "x", "batch_size": "big"}}, "config.batch_size"),
    "figure is text": (lambda: {**good(), "metrics": {"total_images_per_sec": "fast"}},
                       "metrics.total_images_per_sec"),
}


@pytest.fixture
def odd_store(tmp_path):
    """A store with two good records and one odd line of each kind, an odd file and a folder named .jsonl."""
    store = tmp_path / "results"
    append_record(store, good(0))
    path = store / "box.jsonl"
    with open(path, "a") as f:
        for make, _ in BAD_LINES.values():
            f.write(json.dumps(make()) + "\n")
        f.write("[" * 200_000 + "]" * 200_000 + "\n")  # nested 200,000 deep
        f.write('{"a":' * 200_000 + "1" + "}" * 200_000 + "\n")
    append_record(store, good(1))
    (store / "x.jsonl").mkdir()  # a folder that looks like a results file
    latin1 = json.dumps(good(2, machine="caf\u00e9"), ensure_ascii=False).encode("latin-1")
    (store / "latin1.jsonl").write_bytes(latin1 + b"\n")
    return store


def expected_problems(store) -> list[str]:
    path = store / "box.jsonl"
    first = 2
    out = [f"{path}:{first + i}:" for i in range(len(BAD_LINES) + 2)]
    return out + [f"{store / 'latin1.jsonl'}:1:", f"{store / 'x.jsonl'}:"]


def test_read_records_skips_and_names_every_odd_line(odd_store):
    for step_times in (True, False):
        records, problems = read_records(odd_store, step_times=step_times)
        assert sorted(r["config"]["batch_size"] for r in records) == [8, 9]
        assert len(problems) == len(BAD_LINES) + 4, problems
        for prefix in expected_problems(odd_store):
            assert sum(p.startswith(prefix) for p in problems) == 1, (prefix, problems)
        texts = dict(zip(expected_problems(odd_store), sorted(problems, key=_order(odd_store)), strict=True))
        for (name, (_, word)), prefix in zip(BAD_LINES.items(), expected_problems(odd_store), strict=False):
            assert word in texts[prefix], (name, texts[prefix])
        assert "nested too deeply" in texts[expected_problems(odd_store)[len(BAD_LINES)]]
        assert "not UTF-8" in texts[f"{odd_store / 'latin1.jsonl'}:1:"]
        assert "is a directory" in texts[f"{odd_store / 'x.jsonl'}:"]
        assert all("\n" not in p for p in problems)


def test_a_line_in_utf_16_or_utf_32_is_no_record_though_python_could_guess_its_encoding(tmp_path, capsys):
    """JSON Lines are UTF-8, as grep and DuckDB read them: a line in another encoding is named and
    skipped (the standard library's parser, given bytes, guesses UTF-16 and UTF-32 from NUL bytes
    and read such a line); a UTF-8 byte order mark at a line's start is read as before."""
    store = tmp_path / "results"
    append_record(store, good(0))
    path = store / "box.jsonl"
    encodings = ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be", "utf-16")
    with open(path, "ab") as f:
        for i, encoding in enumerate(encodings):
            line = json.dumps(good(1 + i)).encode(encoding)
            assert b"\n" not in line
            f.write(line + b"\n")
        f.write(b"\xef\xbb\xbf" + json.dumps(good(9)).encode() + b"\n")
    for step_times in (True, False):
        records, problems = read_records(store, step_times=step_times)
        assert sorted(r["config"]["batch_size"] for r in records) == [8, 17]
        assert [p.split(": ", 1)[0] for p in problems] == [f"{path}:{2 + i}" for i in range(len(encodings))]
        assert all("malformed line" in p for p in problems[:-1]), problems
        assert "not UTF-8 text (byte b'\\xff' at column 1)" in problems[-1]  # UTF-16's byte order mark
    assert main(["results", "list", str(store)]) == 0
    out, err = capsys.readouterr()
    assert "2 runs" in out and err.count("malformed line") == len(encodings) - 1


def test_a_line_longer_than_a_line_may_hold_is_named_and_skipped_unparsed(tmp_path, monkeypatch, capsys):
    """Past :data:`~cnnbench.results.lines.MAX_LINE` (1 GiB; made small here) a line is not parsed,
    valid or not: 2 GB of junk on one line cost the checked reader minutes and several times its
    size in memory. The lines around it are read."""
    from cnnbench.results import lines

    monkeypatch.setattr(lines, "MAX_LINE", 4000)
    store = tmp_path / "results"
    append_record(store, good(0))
    long_run = good(1)
    long_run["metrics"]["step_times_s"] = [0.0123456789] * 500  # about 7 KB: a valid record
    path = store / "box.jsonl"
    with open(path, "ab") as f:
        f.write(json.dumps(long_run).encode() + b"\n" + b"\0" * 5000 + b"\n")
    append_record(store, good(2))
    for step_times in (True, False):
        records, problems = read_records(store, step_times=step_times)
        assert sorted(r["config"]["batch_size"] for r in records) == [8, 10]
        assert [p.split(": ", 1)[0] for p in problems] == [f"{path}:2", f"{path}:3"]
        assert problems[1].endswith(": a line of 5,000 bytes, longer than the 4,000 a line may hold: not read")
    assert main(["results", "list", str(store)]) == 0
    out, err = capsys.readouterr()
    assert "2 runs" in out and err.count("longer than the 4,000") == 2


def test_a_file_read_through_its_cache_never_gathers_nor_keeps_a_line_too_long_to_read(tmp_path, monkeypatch):
    """A file read through the parsed-record cache is read a piece at a time: a line longer than any
    read is not gathered piece by piece (that copied the line again at every piece: minutes for
    2 GB), nor kept in the cache to be checked again; the file is read whole, as a small one is."""
    import random

    from cnnbench.results import cache, lines, reader

    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    monkeypatch.setenv(cache.CACHE_DIR_VARIABLE, str(tmp_path / "caches"))  # this test's alone, to be weighed
    monkeypatch.setattr(lines, "MAX_LINE", 100_000)
    monkeypatch.setattr(reader, "_PIECE", 16_000)
    store = tmp_path / "results"
    path = store / "box.jsonl"
    gathered = []
    real_parse = lines.parse_line
    monkeypatch.setattr(lines, "parse_line", lambda raw, *a, **k: gathered.append(len(raw)) or real_parse(raw, *a, **k))
    for size in (300_000, 100_010):  # the second ends in the piece after the limit (a review's finding)
        path.unlink(missing_ok=True)
        append_record(store, good(0))
        junk = random.Random(1).randbytes(size).replace(b"\n", b"x")  # random: no cache could squeeze it
        with open(path, "ab") as f:
            f.write(junk + b"\n")
        append_record(store, good(1))
        for _ in range(2):
            records, problems = read_records(store, step_times="lazy")
            assert sorted(r["config"]["batch_size"] for r in records) == [8, 9]
            assert problems == [f"{path}:2: a line of {size:,} bytes, longer than the 100,000 a line may hold: "
                                "not read"]
        assert max(gathered) < 100_000
        kept = sum(f.stat().st_size for f in (tmp_path / "caches").rglob("*") if f.is_file())
        assert kept < 100_000 and cache.cache_path(path).is_relative_to(tmp_path / "caches")


@pytest.mark.parametrize("metrics_steps, elsewhere", [
    (None, {"environment": {"step_times_s": [1, 2]}}),  # the record's own are null; another field's are not
    ([0.5, 0.25], {"environment": {"step_times_s": [3]}}),
    ([[0.1], 0.2], {}),  # a list in the list: valid JSON, not the compact form
    ([0.1, {"a": 1}], {}),
])
def test_a_read_without_step_times_leaves_out_the_records_own_and_changes_nothing_else(
        tmp_path, capsys, metrics_steps, elsewhere):
    """``step_times=False`` (history, a sweep resuming, ``results list``) cuts the step times out of
    a line's text before parsing where that is exact; it took another field's list for them, and
    cut a nested list short (a valid line skipped as malformed)."""
    rec = good(0)
    rec["metrics"]["step_times_s"] = metrics_steps
    for section, fields in elsewhere.items():
        rec[section].update(fields)
    store = tmp_path / "results"
    store.mkdir()
    (store / "box.jsonl").write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    full, problems = read_records(store, step_times=True)
    assert problems == [] and full[0]["metrics"]["step_times_s"] == metrics_steps
    (without,), problems = read_records(store, step_times=False)
    assert problems == [] and "step_times_s" not in without["metrics"]
    assert without["environment"] == rec["environment"]
    assert main(["results", "list", str(store)]) == 0
    assert "1 run" in capsys.readouterr().out


def _order(store):
    prefixes = expected_problems(store)

    def key(problem: str) -> int:
        return next(i for i, p in enumerate(prefixes) if problem.startswith(p))

    return key


def _reported_once(err: str, store) -> None:
    for prefix in expected_problems(store):
        assert err.count(prefix) == 1, (prefix, err)


def test_results_list_and_export_report_each_odd_line_once(odd_store, capsys):
    assert main(["results", "list", str(odd_store)]) == 0
    out, err = capsys.readouterr()
    assert "2 runs" in out
    _reported_once(err, odd_store)
    assert main(["results", "export", str(odd_store), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)) == 2
    _reported_once(err, odd_store)


def test_report_reports_each_odd_line_once(odd_store, tmp_path, capsys):
    assert main(["report", str(odd_store), "-o", str(tmp_path / "rep"), "--no-plots"]) == 0
    out, err = capsys.readouterr()
    _reported_once(out + err, odd_store)


def test_import_reads_the_store_it_adds_to_and_reports_each_odd_line_once(odd_store, tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_text("config.model,environment.machine,metrics.total_images_per_sec\nvgg16,box,5.0\n")
    assert main(["import", "csv", str(table), "--results-dir", str(odd_store)]) == 0
    out, err = capsys.readouterr()
    assert "imported 1 record " in out
    _reported_once(err, odd_store)


def test_sweep_resume_reads_past_odd_lines_and_reports_each_once(odd_store, caplog):
    suite = parse_suite({"name": "t", "base": {"model": "trivial", "device": "cpu"}, "matrix": {"batch_size": [2]}})
    with caplog.at_level(logging.WARNING):
        result = run_suite(suite, SweepOptions(results_dir=odd_store), worker=fake_worker, probe=probe)
    assert [r.status for r in result.results] == ["ok"]
    _reported_once("\n".join(r.getMessage() for r in caplog.records), odd_store)


def test_set_cannot_break_the_record_contract(tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_text("config.model,metrics.total_images_per_sec\nvgg16,5.0\n")
    for override, word in (("status=great", "status"), ("config=5", "config"), ("metrics=[1]", "metrics"),
                           ("config.batch_size=zero", "batch_size")):
        assert main(["import", "csv", str(table), "--results-dir", str(tmp_path / "r"), "--set", override]) == 2
        err = capsys.readouterr().err
        assert word in err and "--set" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("depth, ok", [(16, True), (17, False)])
def test_a_record_nested_deeper_than_the_contract_allows_is_a_problem(depth, ok):
    """A record is 1 deep, its ``extra`` field's lists each one more: 16 levels are fine, 17
    are a problem line, whether or not brackets in its text (those of strings too) are few."""
    from cnnbench.results.lines import loads, parse_line
    from cnnbench.results.record import MAX_DEPTH

    nested: object = 1
    for _ in range(depth - 1):  # the record itself is the first level
        nested = [nested]
    for noise in ("", "{[" * 20):  # brackets in a string: counted, never trusted to be shallow
        raw = json.dumps({**good(), "extra": nested, "note": noise}).encode()
        rec, why = parse_line(raw, loads, truncated=False)
        assert (rec is not None, why) == ((True, None) if ok else (False, f"nested more than {MAX_DEPTH} levels deep"))


def test_brackets_are_counted_up_to_the_limit_exactly():
    from cnnbench.results.lines import _brackets_at_most

    for text in (b"", b"{", b"[" * 16, b"{" * 8 + b"x[" * 8, b"{" * 17, b'"[["' * 9, b"{}" * 16 + b"[]"):
        for limit in (-1, 0, 1, 15, 16, 17):
            assert _brackets_at_most(text, limit) == (text.count(b"{") + text.count(b"[") <= limit), (text, limit)
