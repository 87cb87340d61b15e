"""`cnnbench comm`: collective bandwidth records (kind comm), nccl-tests' factors, and every
reader of the store that must tell them from runs (points, compare, sweep resume, report)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from cnnbench.cli import main
from cnnbench.engine.comm.spec import BATCHES, bandwidths, bus_factor, element_counts, parse_bytes, size_ladder
from cnnbench.results.record import check_record, record_kind
from tests.report_fixtures import record, write_store

ALL = ("all_reduce", "reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all")


def comm(collective: str = "all_reduce", size: int = 1 << 20, busbw: float = 1.0, machine: str = "m-fast",
         samples: list[float] | None = None, n: int = 2, status: str = "ok") -> dict:
    """A hand-made ``cnnbench comm`` record (the fields the command writes)."""
    factor = bus_factor(collective, n)
    algbw = busbw / factor
    time_s = size / (algbw * 1e9)
    samples = samples or [time_s * f for f in (0.98, 1.0, 1.02, 0.99, 1.01)]
    return {"schema_version": 2, "tool_version": "test", "run_id": f"c{collective}{size}{machine}{busbw}",
            "started_at": "2026-11-25T00:00:00+00:00", "status": status, "error": None if status == "ok" else "x",
            "kind": "comm",
            "config": {"collective": collective, "bytes": size, "dtype": "float32", "num_devices": n, "num_nodes": 1,
                       "device": "cpu", "backend": "gloo", "warmup": 5, "iters": len(samples)},
            "environment": {"machine": machine, "cpu_model": "CPU-X", "gpu_model": None},
            "metrics": {"time_s": time_s, "time_s_samples": samples, "algbw_gbps": algbw, "busbw_gbps": busbw,
                        "spread": 0.015} if status == "ok" else {}}


def read_store(folder: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines()]


def cnnbench(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cnnbench", *argv], capture_output=True, text=True,
                          timeout=timeout, check=False)


# --- the measurement, on two Gloo workers ------------------------------------------------------------

def test_two_cpu_workers_write_a_record_per_collective_and_size(tmp_path):
    out = tmp_path / "results"
    done = cnnbench("comm", "--num-devices", "2", "--device", "cpu", "--oversubscribe", "--collective", "all",
                    "--min-bytes", "1K", "--max-bytes", "2K", "--warmup", "1", "--iters", "3",
                    "--results-dir", str(out))
    assert done.returncode == 0, done.stderr
    records = read_store(out)
    assert [(r["config"]["collective"], r["config"]["bytes"]) for r in records] == [
        (c, s) for c in ALL for s in (1024, 2048)]
    expected_factor = {"all_reduce": 1.0, "reduce": 1.0, "broadcast": 1.0, "all_gather": 0.5,
                       "reduce_scatter": 0.5, "all_to_all": 0.5}  # 2(n-1)/n, 1, 1, (n-1)/n x3 at n = 2
    for r in records:
        check_record(r)
        assert r["kind"] == "comm" and record_kind(r) == "comm" and r["status"] == "ok"
        c, m = r["config"], r["metrics"]
        assert (c["num_devices"], c["num_nodes"], c["device"], c["backend"], c["dtype"]) == (2, 1, "cpu", "gloo",
                                                                                            "float32")
        assert (c["warmup"], c["iters"]) == (1, 3) and len(m["time_s_samples"]) == BATCHES  # of 3 calls each
        assert m["time_s"] == pytest.approx(statistics.median(m["time_s_samples"]))
        assert m["algbw_gbps"] == pytest.approx(c["bytes"] / m["time_s"] / 1e9)
        assert m["busbw_gbps"] / m["algbw_gbps"] == pytest.approx(expected_factor[c["collective"]])
        assert m["spread"] is not None and m["spread"] >= 0
    assert r["environment"]["machine"]
    # nccl-tests' table: a line per size, with its size and count (all_gather: elements per rank)
    lines = [ln.split() for ln in done.stdout.splitlines() if ln.split()[:1] == ["all_gather"]]
    assert [(ln[1], ln[2], ln[3]) for ln in lines] == [("1024", "128", "float32"), ("2048", "256", "float32")]
    assert "12 records appended to" in done.stdout


def test_a_collective_the_back_end_cannot_run_is_an_error_record_not_a_crash(tmp_path):
    out = tmp_path / "results"
    # Gloo has no float8 ("Invalid scalar type"): each collective fails on its first size
    done = cnnbench("comm", "--num-devices", "2", "--device", "cpu", "--oversubscribe", "--dtype", "float8_e4m3fn",
                    "--collective", "all_reduce,broadcast", "--max-bytes", "2K", "--iters", "2",
                    "--results-dir", str(out))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    errors = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(errors) == 2 and all(ln.startswith("cnnbench comm: error: ") for ln in errors)
    assert "all_reduce did not run (gloo on cpu, dtype float8_e4m3fn)" in errors[0]
    records = read_store(out)
    assert [(r["config"]["collective"], r["status"], r["kind"]) for r in records] == [
        ("all_reduce", "error", "comm"), ("broadcast", "error", "comm")]
    assert "broadcast did not run" in records[1]["error"]


@pytest.mark.parametrize("argv, words", [
    (["--max-bytes", "12Q"], "--max-bytes: '12Q' is not a size"),
    (["--max-bytes", "512", "--min-bytes", "1K"], "--max-bytes: 512 is below --min-bytes 1024"),
    (["--collective", "all_reduce,allgatherx"], "--collective: unknown collective 'allgatherx'"),
    (["--iters", "0"], "--iters: must be a whole number from 1"),
    (["--num-devices", "1"], "--num-devices: must be a whole number from 2"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, words):
    code = main(["comm", "--device", "cpu", "--results-dir", str(tmp_path / "r"), *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("cnnbench comm: error: ") and words in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_nccl_on_a_run_that_resolves_to_the_cpu_is_refused_before_any_worker(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: --device auto resolves to cuda, where nccl runs")
    assert main(["comm", "--backend", "nccl", "--oversubscribe", "--results-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "nccl needs CUDA devices, and this run is on the CPU" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()  # no worker started, no record


def test_cuda_without_a_gpu_is_one_line_and_exit_2(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: --device cuda would run")
    assert main(["comm", "--device", "cuda", "--results-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err == "cnnbench comm: error: --device: cuda: torch sees no GPU here; use --device cpu " \
                  "(see cnnbench comm --help)\n"
    assert not (tmp_path / "r").exists()


# --- nccl-tests' definitions ---------------------------------------------------------------------------

def test_bus_bandwidth_factors_are_nccl_tests():
    assert [bus_factor(c, 4) for c in ALL] == [1.5, 1.0, 1.0, 0.75, 0.75, 0.75]
    assert [bus_factor(c, 8) for c in ALL] == [1.75, 1.0, 1.0, 0.875, 0.875, 0.875]
    assert bus_factor("all_reduce", 1) == 0.0
    assert bandwidths("all_reduce", 2_000_000_000, 2.0, 4) == (1.0, 1.5)  # GB/s = 1e9 bytes/s


def test_sizes_count_the_whole_buffer_as_nccl_tests():
    assert element_counts("all_reduce", 1024, 4, 4) == (256, 1024)
    assert element_counts("all_gather", 1024, 4, 4) == (64, 1024)  # per rank's part, the whole output
    assert element_counts("reduce_scatter", 1000, 3, 4) == (83, 996)  # rounded down to whole parts
    assert element_counts("all_to_all", 2, 4, 4) == (1, 16)  # at least one element per rank
    assert parse_bytes("1K") == 1024 and parse_bytes("64M") == 64 << 20 and parse_bytes("1GiB") == 1 << 30
    assert parse_bytes("512") == 512
    assert size_ladder(1024, 8192, 2) == [1024, 2048, 4096, 8192]
    assert size_ladder(1024, 5000, 4) == [1024, 4096]


# --- the readers of the store ---------------------------------------------------------------------------

def test_points_leave_comm_records_out():
    from cnnbench.analysis.points import build_points

    points = build_points([record(), comm(), comm("broadcast")])
    assert len(points.points) == 1
    assert not any("collective" in f for f in points.key_fields)


def test_compare_of_runs_ignores_comm_records():
    from cnnbench.compare.build import Side, compare_records

    base = [record(ips=100.0), record(ips=101.0)]
    cand = [record(ips=90.0), record(ips=91.0)]
    plain = compare_records(Side("a", base), Side("b", cand))
    mixed = compare_records(Side("a", base + [comm(busbw=1.0)]), Side("b", cand + [comm(busbw=2.0)]))
    assert [(p.name, p.comparison.ratio) for p in mixed.pairs] == [(p.name, p.comparison.ratio) for p in plain.pairs]
    assert (mixed.unmatched_base, mixed.unmatched_cand) == (0, 0)


def test_sweep_resume_ignores_comm_records(tmp_path):
    from cnnbench.sweep.resume import DoneCases

    run = {**record(), "suite_name": "s", "case_key": "k-run"}
    bandwidth = {**comm(), "suite_name": "s", "case_key": "k-comm"}
    write_store(tmp_path, [run, bandwidth])
    done = DoneCases("s", tmp_path, rerun=False)
    done.read(initial=True)
    assert done.is_done("k-run", "m-fast") and not done.is_done("k-comm", "m-fast")
    assert ("k-comm", "m-fast") not in done.figures


# --- report -------------------------------------------------------------------------------------------------

def _cells(table) -> list[list[str]]:
    return [[c.text for c in row] for row in table.rows]


def test_report_shows_bandwidth_by_size_and_leaves_the_throughput_tables_as_they_were(tmp_path):
    from cnnbench.report.build import build_report
    from cnnbench.report.render.plots import draw

    runs = [record(ips=100.0), record(ips=102.0), record(machine="m-slow", ips=50.0), record(model="vgg16", ips=20.0)]
    bandwidth = [comm(size=1024, busbw=0.5), comm(size=1024, busbw=0.7), comm(size=1 << 20, busbw=2.0),
                 comm(size=1 << 20, busbw=1.0, machine="m-slow"), comm("all_gather", size=1 << 20, busbw=3.0),
                 comm(size=1 << 30, status="error")]
    plain, mixed = build_report(runs), build_report(runs + bandwidth)
    others = [t for t in mixed.tables if t.kind != "bandwidth"]
    assert [(t.id, t.columns, _cells(t)) for t in others if t.kind != "systems"] == [
        (t.id, t.columns, _cells(t)) for t in plain.tables if t.kind != "systems"]
    tables = {t.id: t for t in mixed.tables if t.kind == "bandwidth"}
    assert list(tables) == ["bandwidth-all_reduce-2", "bandwidth-all_gather-2"]  # cnnbench comm's order
    reduce = tables["bandwidth-all_reduce-2"]
    assert reduce.title == "busbw: all_reduce, 2 ranks, gloo on cpu, float32"
    assert reduce.columns == ["size", "m-fast", "m-slow"]
    # the median of two records, ± their relative stdev; one record: its own iterations' spread
    assert _cells(reduce) == [["1 KiB", "0.600 ±23.6%", "—"], ["1 MiB", "2.00", "1.00"], ["1 GiB", "error", "—"]]
    assert reduce.rows[0][1].value == 0.6
    figures = [f for f in mixed.figures if f.kind == "bandwidth"]
    assert [f.data["lines"] for f in figures if f.name == "bandwidth-all_reduce-2"] == [
        {"m-fast": [(1024, 0.6), (1 << 20, 2.0)], "m-slow": [(1 << 20, 1.0)]}]
    svg = draw(next(f for f in figures if f.name == "bandwidth-all_reduce-2"), tmp_path).read_text()
    assert "bus bandwidth (GB/s)" in svg and "1K" in svg


def test_a_collective_named_like_a_path_names_no_report_file(tmp_path, capsys):
    """The bandwidth table's id took a record's collective as it was: ``x/y`` made a folder of the
    plots' and failed the report, a line break named files that the next report refused as not its own."""
    recs = []
    for name in ("x/y", "evil\n=cmd|x", "../../victim"):
        for size in (1024, 2048):
            rec = comm(size=size)
            rec["config"]["collective"] = name
            rec["run_id"] += f"{len(recs)}"
            recs.append(rec)
    write_store(tmp_path / "r", recs)
    out = tmp_path / "rep"
    for _ in range(2):  # the second into the same folder: every file is the report's own
        assert main(["report", str(tmp_path / "r"), "--out", str(out), "--rebuild"]) == 0, capsys.readouterr().err
    written = [p.relative_to(out) for p in out.rglob("*")]
    assert all(len(p.parts) <= 2 and p.name.isprintable() for p in written), written
    assert sorted(p.name for p in (out / "tables").glob("bandwidth-*.csv")) == [
        "bandwidth-evil_cmd_x-2.csv", "bandwidth-victim-2.csv", "bandwidth-x_y-2.csv"]
    assert not (tmp_path / "victim").exists()


def test_a_store_of_bandwidth_records_alone_reports_them_without_an_empty_throughput_section():
    from cnnbench.report.build import build_report
    from cnnbench.report.document import Heading

    report = build_report([comm(size=1024), comm(size=2048)])
    headings = [b.text for b in report.blocks if isinstance(b, Heading)]
    assert "Collective bandwidth (cnnbench comm)" in headings
    assert not any(h.startswith("Throughput by configuration") for h in headings)
    assert "on 1 machine: m-fast" in " ".join(getattr(b, "text", "") for b in report.blocks)


# --- compare ------------------------------------------------------------------------------------------------

def _timed(busbw: float, size: int, spread: float, seed: int) -> dict:
    """A comm record whose 20 iterations scatter by ``spread`` around the time of ``busbw``."""
    import random

    rng = random.Random(seed)
    time_s = size / (busbw * 1e9)
    return comm(size=size, busbw=busbw, samples=[time_s * (1 + rng.gauss(0, spread)) for _ in range(20)])


def test_compare_of_two_comm_stores_compares_bus_bandwidth_per_size(tmp_path, capsys):
    base = [_timed(1.0, 1 << 20, 0.02, 1), _timed(1.0, 1 << 10, 0.02, 2), _timed(1.0, 1 << 30, 0.02, 3)]
    cand = [_timed(2.0, 1 << 20, 0.02, 4), _timed(1.0, 1 << 10, 0.02, 5)]  # no 1 GiB: unmatched
    a, b = write_store(tmp_path / "a", base), write_store(tmp_path / "b", cand)
    assert main(["compare", str(a), str(b), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["pairs"] == []
    rows = {(p["collective"], p["bytes"]): p for p in doc["bandwidth"]}
    assert sorted(rows) == [("all_reduce", 1024), ("all_reduce", 1 << 20)]
    assert rows[("all_reduce", 1 << 20)]["ratio"] == pytest.approx(2.0)
    assert rows[("all_reduce", 1 << 20)]["verdict"] == "faster" and rows[("all_reduce", 1 << 20)]["test"] == "steps"
    assert rows[("all_reduce", 1024)]["ratio"] == pytest.approx(1.0)
    assert rows[("all_reduce", 1024)]["verdict"] == "not significant"
    assert main(["compare", str(a), str(b), "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert "| all_reduce | 1 MiB | 2 ranks, gloo on cpu, float32 | m-fast | 1 | 2 | 2.000 |" in md
    assert "images/sec" not in md.split("\n")[0]  # no empty table of runs above it


def test_fail_on_slowdown_counts_a_bus_bandwidth_slowdown(tmp_path, capsys):
    a = write_store(tmp_path / "a", [_timed(2.0, 1 << 20, 0.02, 1)])
    b = write_store(tmp_path / "b", [_timed(1.0, 1 << 20, 0.02, 2)])
    assert main(["compare", str(a), str(b), "--format", "json", "--fail-on-slowdown", "10"]) == 1
    err = capsys.readouterr().err
    assert "1 significant slowdown beyond 10%" in err and "all_reduce · 1 MiB" in err and "ratio 0.500" in err
    assert main(["compare", str(b), str(a), "--format", "json", "--fail-on-slowdown", "10"]) == 0


def test_compare_of_stores_with_both_kinds_shows_runs_and_bandwidth(tmp_path, capsys):
    a = write_store(tmp_path / "a", [record(ips=100.0), record(ips=101.0), _timed(1.0, 1 << 20, 0.02, 1)])
    b = write_store(tmp_path / "b", [record(ips=100.5), record(ips=99.0), _timed(1.5, 1 << 20, 0.02, 2)])
    assert main(["compare", str(a), str(b), "--format", "csv"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("model,") and "busbw" not in out  # CSV: the runs when any matched
    assert main(["compare", str(a), str(b), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["pairs"]) == 1 and [p["ratio"] for p in doc["bandwidth"]] == [pytest.approx(1.5)]


# --- results list and export ----------------------------------------------------------------------------------

def test_results_list_names_what_a_comm_record_timed_and_export_keeps_its_kind(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    store = write_store(tmp_path / "r", [record(), comm(size=1 << 20, busbw=2.0)])
    assert main(["results", "list", str(store)]) == 0
    out = capsys.readouterr().out
    assert "comm all_reduce 1 MiB: busbw 2 GB/s" in out and "resnet50" in out
    assert main(["results", "export", str(store), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r.get("kind"), r.get("config.collective"), r.get("config.model")) for r in rows] == [
        (None, None, "resnet50"), ("comm", "all_reduce", None)]


# --- lifetime ---------------------------------------------------------------------------------------------------

def test_sigkill_to_comm_leaves_no_worker(tmp_path):
    """The workers come from run's launcher and die with it (cnnbench.lifetime)."""
    import psutil

    from tests.test_lifetime import _kill_and_expect_no_survivor, _start, _wait_for, _workers

    proc, out = _start(["comm", "--num-devices", "2", "--device", "cpu", "--oversubscribe", "--min-bytes", "1K",
                        "--max-bytes", "256M", "--warmup", "0", "--iters", "3", "--results-dir", str(tmp_path)])
    _wait_for(lambda: len(_workers(proc.pid)) >= 2, "two workers start", proc)
    # each size's record is in the store as soon as it is measured, before the collective ends
    _wait_for(lambda: any(f.read_text().count("\n") for f in tmp_path.glob("*.jsonl")), "the first record", proc)
    _kill_and_expect_no_survivor(proc, psutil.Process(proc.pid).children(recursive=True))
    written = read_store(tmp_path)
    assert written and all(r["kind"] == "comm" and r["status"] == "ok" for r in written)
    assert len(written) < 19  # 1 KiB .. 256 MiB: killed before the largest sizes, their records missing


def test_a_worker_that_dies_is_one_error_record_naming_its_rank(tmp_path):
    import signal
    import threading

    from tests.test_lifetime import _wait_for, _workers

    proc = subprocess.Popen([sys.executable, "-m", "cnnbench", "comm", "--num-devices", "2", "--device", "cpu",
                             "--oversubscribe", "--min-bytes", "1K", "--max-bytes", "1K", "--iters", "100000",
                             "--results-dir", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True).start()
    workers = _wait_for(lambda: len(_workers(proc.pid)) >= 2 and _workers(proc.pid), "two workers start", proc)
    _wait_for(lambda: any("# cnnbench comm:" in ln for ln in lines), "the table's header", proc)
    workers[-1].send_signal(signal.SIGKILL)
    err = proc.communicate(timeout=180)[1]
    assert proc.returncode == 1
    assert err.startswith("cnnbench comm: error: worker rank ") and "killed by SIGKILL" in err
    assert len(err.strip().splitlines()) == 1
    (failed,) = read_store(tmp_path)
    assert (failed["kind"], failed["status"], failed["config"]["collective"]) == ("comm", "error", "all_reduce")
    assert failed["error"].startswith("worker rank ") and "killed by SIGKILL" in failed["error"]


def test_under_torchrun_each_process_is_a_rank_and_rank_0_writes(tmp_path):
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("no torchrun beside this Python")
    out = tmp_path / "results"
    done = subprocess.run([str(torchrun), "--standalone", "--nproc-per-node", "2", "-m", "cnnbench", "comm",
                           "--device", "cpu", "--max-bytes", "2K", "--warmup", "1", "--iters", "2",
                           "--results-dir", str(out)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    records = read_store(out)
    assert [(r["config"]["bytes"], r["config"]["num_devices"], r["kind"]) for r in records] == [
        (1024, 2, "comm"), (2048, 2, "comm")]
    assert done.stdout.count("# cnnbench comm:") == 1 and done.stdout.count("records appended") == 1


def test_a_link_at_the_derived_labels_file_stops_comm_before_any_worker(tmp_path, capsys):
    """Without --machine-label the file of the label comm derives was found a link only when the
    record was appended, after the measurement (exit 1, the record lost)."""
    from cnnbench.machine.environment import expected_machine_label
    from cnnbench.results.store import machine_file_name

    outside = tmp_path / "mine.txt"
    outside.write_text("mine\n")
    results = tmp_path / "r"
    results.mkdir()
    (results / machine_file_name(expected_machine_label("cpu"))).symlink_to(outside)
    code = main(["comm", "--device", "cpu", "--num-devices", "2", "--min-bytes", "1K", "--max-bytes", "1K",
                 "--warmup", "1", "--iters", "2", "--collective", "all_reduce", "--results-dir", str(results)])
    out, err = capsys.readouterr()
    assert code == 2 and "is a symlink" in err and len(err.strip().splitlines()) == 1, err
    assert "all_reduce" not in out and outside.read_text() == "mine\n"  # nothing measured
