"""`cnnbench compare`: matching, the verdicts, the formats, the exit codes."""

from __future__ import annotations

import csv
import io
import json
import math
import random
from pathlib import Path

import pytest

from cnnbench.cli import main
from cnnbench.compare.build import CompareError, CompareOptions, Side, compare_records, split_records
from tests.report_fixtures import record, write_store

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tf_cnn_benchmarks_logs"


def noisy(ips: float, rng: random.Random, *, steps: int = 100, sd: float = 0.04, rho: float = 0.5,
          **kw) -> dict:
    """A record whose step times scatter around ``ips`` with autocorrelated noise."""
    images = kw.get("batch_size", 64) * kw.get("num_devices", 1)
    x = rng.gauss(0, sd)
    times = []
    for _ in range(steps):
        x = rho * x + rng.gauss(0, sd * math.sqrt(1 - rho * rho))
        times.append(images / ips * math.exp(x))
    rate = images / (sum(times) / steps)
    return record(ips=rate, metrics={"step_times_s": times, "images_per_sec_mean": rate}, **kw)


def stores(tmp_path, base, cand):
    return str(write_store(tmp_path / "a", base)), str(write_store(tmp_path / "b", cand))


def run(capsys, *argv):
    code = main(["compare", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


MODELS = ("resnet50", "vgg16")


def test_same_distribution_is_not_significant_and_does_not_fail(tmp_path, capsys):
    rng = random.Random(1)
    a, b = stores(tmp_path, [noisy(400.0, rng, model=m) for m in MODELS],
                  [noisy(400.0, rng, model=m) for m in MODELS])
    code, out, _ = run(capsys, a, b, "--fail-on-slowdown", "10")
    assert code == 0
    lines = [ln for ln in out.splitlines() if ln.startswith(MODELS)]
    assert len(lines) == 2 and all("not significant" in ln and "steps, 1 vs 1 run" in ln for ln in lines)
    assert "Geometric mean of 2 ratios" in out and "significant: 0 faster, 0 slower, 2 not significant" in out


def test_a_25_percent_slowdown_is_significant_and_fails_the_build(tmp_path, capsys):
    rng = random.Random(2)
    base = [noisy(400.0, rng, model=m) for m in MODELS for _ in range(3)]  # three repeats each
    cand = [noisy(300.0, rng, model=m) for m in MODELS for _ in range(3)]
    a, b = stores(tmp_path, base, cand)
    code, out, err = run(capsys, a, b, "--fail-on-slowdown", "10")
    assert code == 1
    assert "2 significant slowdowns beyond 10%" in err
    rows = [ln for ln in out.splitlines() if ln.startswith(MODELS)]
    assert all("repeats, 3 vs 3 runs" in r and r.rstrip().endswith("slower") for r in rows)
    assert "the candidate is 25." in out or "the candidate is 24." in out
    code, _, _ = run(capsys, a, b, "--fail-on-slowdown", "30")  # slower, but not by 30%
    assert code == 0
    code, _, _ = run(capsys, a, b)
    assert code == 0  # no threshold: report, never fail


def test_names_of_any_digits_sort_and_the_gate_writes_them_on_one_line(tmp_path, capsys):
    """A model named net10² (a digit str.isdigit takes and int() does not) ended compare in a
    ValueError, exit 1 (a CI gate read a slowdown); --fail-on-slowdown wrote a machine label's escape
    sequence and line break as they were (a forged line in a CI log)."""
    rng = random.Random(3)
    names = ("net10²", "net3", "m" + "9" * 5000)
    machine = "box\x1b[2J\nFAKE LINE"
    base = [noisy(400.0, rng, model=m, machine=machine) for m in names for _ in range(3)]
    cand = [noisy(300.0, rng, model=m, machine=machine) for m in names for _ in range(3)]
    a, b = stores(tmp_path, base, cand)
    code, out, err = run(capsys, a, b, "--fail-on-slowdown", "10")
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "\x1b" not in err and "box\\x1b[2J\\nFAKE LINE" in err, err
    assert [ln.split()[0][:4] for ln in out.splitlines() if ln.startswith(("net", "m9"))] == ["m999", "net3", "net1"]


def test_ignore_pairs_records_that_differ_in_batch_size(tmp_path, capsys):
    rng = random.Random(3)
    a, b = stores(tmp_path, [noisy(400.0, rng, batch_size=64)], [noisy(700.0, rng, batch_size=128)])
    code, _, err = run(capsys, a, b)
    assert code == 2 and "they differ in: batch_size (2)" in err and "--ignore" in err
    code, out, _ = run(capsys, a, b, "--ignore", "batch_size")
    assert code == 0
    [row] = [ln for ln in out.splitlines() if ln.startswith("resnet50")]
    assert "64 → 128" in row and "faster" in row
    assert "ignored: batch_size" in out


def test_machines_are_matched_unless_across_machines(tmp_path, capsys):
    rng = random.Random(4)
    a, b = stores(tmp_path, [noisy(400.0, rng, machine="m-fast")], [noisy(200.0, rng, machine="m-slow")])
    code, _, err = run(capsys, a, b)
    assert code == 2 and "machine" in err
    code, out, _ = run(capsys, a, b, "--across-machines")
    assert code == 0 and "m-fast → m-slow" in out and "slower" in out


def test_by_splits_one_store_and_names_the_baseline(tmp_path, capsys):
    rng = random.Random(5)
    recs = [noisy(400.0, rng, model=m) for m in MODELS] + [noisy(560.0, rng, model=m, precision="amp_fp16")
                                                            for m in MODELS]
    store = str(write_store(tmp_path / "r", recs))
    code, out, _ = run(capsys, store, "--by", "precision")
    assert code == 0
    assert "Baseline: fp32 (2 results); candidate: amp_fp16 (2 results)" in out
    assert all("faster" in ln for ln in out.splitlines() if ln.startswith(MODELS))
    code, out, _ = run(capsys, store, "--by", "precision", "--baseline", "amp_fp16")
    assert code == 0 and "Baseline: amp_fp16" in out and "slower" in out
    code, _, err = run(capsys, store, "--by", "precision", "--candidate", "bf16")
    assert code == 2 and "--candidate 'bf16' is not a value of precision" in err


def test_formats_carry_the_same_facts(tmp_path, capsys):
    rng = random.Random(6)
    a, b = stores(tmp_path, [noisy(400.0, rng)], [noisy(300.0, rng)])
    code, out, _ = run(capsys, a, b, "--format", "json")
    doc = json.loads(out)
    [pair] = doc["pairs"]
    assert code == 0 and pair["verdict"] == "slower" and pair["test"] == "steps" and pair["significant"] is True
    assert pair["ci_low"] < pair["ratio"] < pair["ci_high"] < 1 and pair["p_value"] < 0.05
    assert pair["baseline_images_per_sec"] == pytest.approx(400.0, rel=0.1)
    assert doc["summary"]["slower"] == 1 and doc["summary"]["geomean_ratio"] == pytest.approx(pair["ratio"])
    code, out, _ = run(capsys, a, b, "--format", "csv")
    [row] = list(csv.DictReader(io.StringIO(out)))
    assert row["verdict"] == "slower" and float(row["ratio"]) == pytest.approx(pair["ratio"])
    code, out, _ = run(capsys, a, b, "--format", "md")
    assert out.startswith("| model | batch | configuration |") and "| slower |" in out


def test_warned_and_wide_runs_are_marked(tmp_path, capsys):
    rng = random.Random(7)
    warned = noisy(400.0, rng)
    warned["metrics"]["warnings"] = ["busy machine: load average 3.1 on 2 cores"]
    wide = noisy(400.0, rng, sd=0.3, rho=0.0)
    a, b = stores(tmp_path, [warned], [wide])
    code, out, _ = run(capsys, a, b, "--format", "json")
    [pair] = json.loads(out)["pairs"]
    assert pair["warned_runs"] == 1 and pair["wide_spread_runs"] == 1
    assert pair["warnings"] == ["busy machine: load average 3.1 on 2 cores"]
    code, out, _ = run(capsys, a, b)
    assert "†⚠" in out
    assert ("⚠ a run recorded warnings (1 run in all), by kind: busy machine (1 run; e.g. 'busy machine: load "
            "average 3.1 on 2 cores')") in out
    assert "† a run's step times vary widely" in out


def test_imported_logs_without_step_samples_are_never_significant(tmp_path, capsys):
    base = [record(ips=100.0, source="tf_cnn_benchmarks", compile=None, metrics={"step_times_s": None})]
    cand = [record(ips=50.0, source="tf_cnn_benchmarks", compile=None, metrics={"step_times_s": None})]
    a, b = stores(tmp_path, base, cand)
    code, out, _ = run(capsys, a, b, "--fail-on-slowdown", "5")
    assert code == 0 and "no samples" in out and "0.500" in out


@pytest.mark.parametrize("argv, message", [
    (["nowhere", "elsewhere"], "no results at nowhere"),
    (["ONE"], "expected BASELINE CANDIDATE"),
    (["ONE", "ONE", "--ignore", "batchsize"], "unknown field 'batchsize'"),
    (["ONE", "--by", "precision"], "the results take 1 value (fp32); two are needed"),
    (["ONE", "ONE", "--noise", "x"], "--noise: expected a percentage"),
    (["ONE", "ONE", "--fail-on-slowdown", "200"], "--fail-on-slowdown: must be between 0 and 100"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    store = str(write_store(tmp_path / "r", [record()]))
    code, out, err = run(capsys, *[store if a == "ONE" else a for a in argv])
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and out == ""


def test_library_errors():
    with pytest.raises(CompareError, match="no results on the x side"):
        compare_records(Side("x", []), Side("y", [record()]))
    with pytest.raises(CompareError, match="name the two to compare"):
        split_records([record(batch_size=b) for b in (16, 32, 64)], "batch_size")
    base, cand, field = split_records([record(batch_size=b) for b in (16, 32, 64)], "batch_size", "16", "64")
    assert (base.label, cand.label, field) == ("batch_size=16", "batch_size=64", "config.batch_size")
    result = compare_records(Side("a", [record(ips=100.0)]), Side("b", [record(ips=100.0, seed=7)]),
                             CompareOptions())
    assert len(result.pairs) == 1  # the seed is not part of what is measured


@pytest.fixture(scope="module")
def lambda_store(tmp_path_factory):
    out = tmp_path_factory.mktemp("lambda")
    assert main(["import", "tf-cnn-benchmarks", str(FIXTURES / "LambdaCloud-RTX_A6000.logs"),
                 "--results-dir", str(out)]) == 0
    return out


def test_lambda_fp16_vs_fp32_needs_ignore_batch_size(lambda_store, capsys):
    code, _, err = run(capsys, str(lambda_store), "--by", "precision")
    assert code == 2 and "batch_size" in err
    code, out, _ = run(capsys, str(lambda_store), "--by", "precision", "--ignore", "batch_size", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and len(doc["pairs"]) == 36
    assert {p["test"] for p in doc["pairs"]} == {"steps"}  # block means from tf's progress lines
    assert all(p["verdict"] == "faster" for p in doc["pairs"])
    assert {p["batch_size"] for p in doc["pairs"] if p["model"] == "resnet50"} == {"256 → 512"}


def test_terminal_table_colours_the_verdict(tmp_path, capsys, monkeypatch):
    import cnnbench.compare.render as fmt

    rng = random.Random(8)
    result = compare_records(Side("a", [noisy(400.0, rng)]), Side("b", [noisy(300.0, rng)]))
    monkeypatch.setattr("cnnbench.terminal.is_terminal", lambda stream: True)
    monkeypatch.setenv("COLUMNS", "200")
    fmt.print_rich(result)
    out = capsys.readouterr().out
    assert "\x1b[31mslower" in out  # red
    assert "Geometric mean of 1 ratio" in out


def test_piped_table_is_the_plain_rich_table_and_follows_columns(tmp_path, capsys, monkeypatch):
    rng = random.Random(9)
    a, b = stores(tmp_path, [noisy(400.0, rng, model=m) for m in MODELS], [noisy(300.0, rng, model=m) for m in MODELS])
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, _ = run(capsys, a, b)
    assert code == 0 and "\x1b[" not in out and not set("─│┃━┏") & set(out)  # no colour, no box lines
    [header] = [ln for ln in out.splitlines() if ln.startswith("model")]
    assert "baseline img/s" in header and "---" not in out  # rich's header, not a hand-ruled one
    assert len([ln for ln in out.splitlines() if ln.startswith(MODELS)]) == 2  # one line a pair: never wrapped
    monkeypatch.setenv("COLUMNS", "70")
    code, out, _ = run(capsys, a, b)
    assert code == 0 and max(len(ln) for ln in out.splitlines()) <= 70


def test_the_configuration_column_does_not_repeat_the_machine(tmp_path, capsys):
    rng = random.Random(6)
    base = [noisy(400.0, rng, machine="m-fast"), noisy(200.0, rng, machine="m-slow")]
    cand = [noisy(410.0, rng, machine="m-fast"), noisy(205.0, rng, machine="m-slow")]
    a, b = stores(tmp_path, base, cand)
    code, out, _ = run(capsys, a, b, "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {r["machine"] for r in rows} == {"m-fast", "m-slow"}
    assert all(r["configuration"] == "syn-replicated-1gpus" for r in rows)


def test_two_repeats_a_side_find_a_2x_effect_with_the_machines_pooled_spread():
    # the quick suite's shape: several models, two repeats each, runs ±15% apart on one machine
    rng = random.Random(3)
    models = [f"m{i}" for i in range(10)]

    def runs(level: float) -> list[dict]:
        return [record(m, ips=level * rng.lognormvariate(0, 0.15), seed=s, metrics={})
                for m in models for s in (1, 2)]

    result = compare_records(Side("a", runs(100.0)), Side("b", runs(200.0)), CompareOptions())
    assert len(result.pairs) == 10
    assert [p.comparison.verdict for p in result.pairs] == ["faster"] * 10
    assert all(p.comparison.basis == "repeats" for p in result.pairs)


@pytest.mark.parametrize("rates", [(5e-324, 1000.0), (1e-300, 9e17), (1000.0, 5e-324)])
def test_rates_whose_ratio_no_float_holds_have_no_ratio(tmp_path, capsys, rates):
    """A figure as small as 5e-324 images/sec is a number, but its ratio to a real one overflows
    (or underflows to 0): the pair has no ratio ("—"), never ``inf``, and JSON stays JSON."""
    a, b = stores(tmp_path, [record(ips=rates[0])], [record(ips=rates[1])])
    for fmt in ("table", "csv", "json"):
        code, out, err = run(capsys, a, b, "--format", fmt)
        assert code == 0 and "Traceback" not in err and "inf" not in out.lower()
    pair = json.loads(out)["pairs"][0]
    assert pair["ratio"] is None
