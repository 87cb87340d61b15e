"""Report marks (wide spread, warnings, not significant), warned cells left out of observations,
and effect tables that ignore chosen fields."""

from __future__ import annotations

from pathlib import Path

import pytest

from cnnbench.cli import main
from cnnbench.report import ReportOptions, build_report
from cnnbench.report.render.markdown import render_markdown
from tests.report_fixtures import record, scaling_records

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tf_cnn_benchmarks_logs"


def _kind(report, kind):
    return [t for t in report.tables if t.kind == kind]


def _warned(model="resnet50", machine="m-fast", ips=100.0, warnings=("busy machine",), throttled=None, **kw):
    metrics = {"warnings": list(warnings)}
    if throttled is not None:
        metrics["throttled"] = throttled
    return record(model, machine, ips, metrics=metrics, **kw)


def test_a_run_with_wide_step_times_is_marked_with_a_legend():
    wide = record("vgg16", ips=100.0, metrics={"step_times_s": [0.5, 0.8] * 10})  # CV 23%
    [t] = _kind(build_report([record(ips=400.0), wide]), "configuration")
    assert t.cell("vgg16", "m-fast").text == "100.0 †"
    assert t.cell("vgg16", "m-fast").marks == "†"
    assert t.cell("resnet50", "m-fast").text == "400.0"
    assert "† a run's step times vary widely (1 run); see Marks." in t.notes
    md = render_markdown(build_report([record(ips=400.0), wide]))
    assert md.count("relative stdev over 10% (1 run in all)") == 1  # explained once, in Marks
    [quiet] = _kind(build_report([record(ips=400.0)]), "configuration")
    assert not any("†" in n for n in quiet.notes)  # no mark, no legend


def test_warned_and_throttled_runs_are_marked_and_the_legend_names_the_reasons():
    recs = [_warned("resnet50", warnings=["busy machine: load 3.0 on 2 cores"]),
            _warned("vgg16", warnings=[], throttled=True), record("alexnet", ips=50.0),
            _warned("alexnet", machine="m-slow", warnings=["busy machine: load 3.0 on 2 cores"])]
    [t] = _kind(build_report(recs), "configuration")
    assert t.cell("resnet50", "m-fast").text == "100.0 ⚠"
    assert t.cell("vgg16", "m-fast").text == "100.0 ⚠"
    assert t.cell("alexnet", "m-fast").text == "50.00"
    [legend] = [n for n in t.notes if n.startswith("⚠")]
    assert legend == "⚠ a run recorded warnings: busy machine (2 runs), throttled (1 run); see Marks."


def test_the_warning_legend_is_said_once_grouped_by_kind():
    recs = [_warned("resnet50", warnings=["busy machine: load 3.0 on 2 cores"]),
            _warned("vgg16", warnings=["busy machine: load 2.5 on 2 cores"]),
            _warned("vgg16", machine="m-slow", warnings=[], throttled=True), record("resnet50", "m-slow", ips=50.0),
            _warned("resnet50", num_devices=2), record("resnet50", "m-slow", ips=90.0, num_devices=2)]
    report = build_report(recs)
    md = render_markdown(report)
    explained = [line for line in md.splitlines() if line.startswith("- ⚠")]
    assert len(explained) == 1  # one explanation for the report, however many tables carry the mark
    assert ("by kind: busy machine (3 runs; e.g. 'busy machine: load 3.0 on 2 cores' and 1 more); throttled "
            "(1 run)") in explained[0]
    assert "--include-warned" in explained[0]
    assert md.count("--include-warned keeps them") == 1


def test_warned_cells_are_left_out_of_observations_unless_asked():
    recs = [record(machine="m-fast", ips=400.0), _warned(machine="m-slow", ips=900.0)]
    report = build_report(recs)
    text = " ".join(o.text for o in report.observations)
    assert "Fastest machine" not in text  # the only contest was against a warned cell
    included = build_report(recs, ReportOptions(include_warned=True))
    [fast] = [o for o in included.observations if "Fastest machine" in o.text]
    assert fast.text.startswith("⚠ Untrusted — 1 of the 2 runs behind it recorded warnings: busy machine (1 run). ")
    assert "m-slow for resnet50" in fast.text


def test_a_warned_pair_never_becomes_an_effect_observation():
    recs = [record(machine=f"box{i}", ips=100.0) for i in range(3)]
    recs += [_warned(machine=f"box{i}", ips=150.0, precision="amp_fp16") for i in range(3)]
    report = build_report(recs, ReportOptions(effects=["precision"]))
    [t] = _kind(report, "effect")
    assert t.cell("box0", "all").text == "1.50 ⚠"
    assert not [o for o in report.observations if o.text.startswith("amp_fp16 vs fp32")]
    kept = build_report(recs, ReportOptions(effects=["precision"], include_warned=True))
    [obs] = [o for o in kept.observations if "amp_fp16 vs fp32" in o.text]
    assert obs.text.startswith("⚠ Untrusted — 3 of the 6 runs behind it recorded warnings")
    assert "amp_fp16 is 1.50× as fast as fp32 (3 of 3 pairs significant)" in obs.text
    # one warned pair of three: left out, and said so
    clean = [record(machine=f"box{i}", ips=150.0, precision="amp_fp16") for i in range(2)]
    report = build_report([*recs[:3], *clean, recs[5]], ReportOptions(effects=["precision"]))
    [obs] = [o for o in report.observations if o.text.startswith("amp_fp16 vs fp32")]
    assert "over 2 pairs" in obs.text and "1 pair with warned runs left out" in obs.text


def test_warned_cells_leave_the_scaling_observation():
    recs = scaling_records()
    for r in recs:
        if r["config"]["num_devices"] == 4 and r["config"]["model"] == "vgg16" and r["status"] == "ok":
            r["metrics"]["warnings"] = ["throttled: power cap"]
    report = build_report(recs)
    [obs] = [o for o in report.observations if o.text.startswith("Scaling")]
    t = report.table(obs.refs[0].table)
    warned = [r[0].text for r in t.rows if "⚠" in r[t.column_index("4 devices")].marks]
    assert warned and not any(r.row in warned and r.column == "4 devices" for r in obs.refs)
    assert "at 4 devices (range 90.0%–90.0% over 2 series)" in obs.text  # 3 series reach 4; the warned one is out


def test_not_significant_ratios_never_become_a_speedup():
    # same machine, same code, two labels, one run each: a busy machine stalled some steps for a second
    before = [0.05] * 20
    after = [0.05] * 20
    for i in (3, 9, 16):
        before[i] = 1.0
    after[12] = 1.0
    recs = [record(ips=64 / (sum(t) / 20), metrics={"step_times_s": t}, torch_label=label)
            for t, label in ((before, "before"), (after, "after"))]
    report = build_report(recs, ReportOptions(effects=["torch_label"], baselines={"torch_label": "before"}))
    [t] = _kind(report, "effect")
    cell = t.rows[0][1]
    assert cell.value == pytest.approx(1.97, abs=0.01) and cell.text == "1.97 n.s. †"
    [obs] = [o for o in report.observations if "torch_label" in o.text]
    assert "no significant effect (0 of 1 pair significant)" in obs.text
    assert "as fast" not in obs.text and "faster" not in obs.text
    # every step of one run twice as slow as the other's: that difference is real
    recs[0]["metrics"]["step_times_s"] = [0.1, 0.11] * 10
    recs[0]["metrics"]["total_images_per_sec"] = 64 / 0.105
    recs[1]["metrics"]["step_times_s"] = [0.05, 0.051] * 10
    recs[1]["metrics"]["total_images_per_sec"] = 64 / 0.0505
    report = build_report(recs, ReportOptions(effects=["torch_label"], baselines={"torch_label": "before"}))
    [obs] = [o for o in report.observations if "torch_label" in o.text]
    assert "1 of 1 pair significant" in obs.text


def test_ignore_pairs_results_that_differ_in_the_ignored_field():
    recs = []
    for model, base in (("resnet50", 400.0), ("vgg16", 250.0)):
        recs += [record(model, ips=base, batch_size=64), record(model, ips=base * 2, batch_size=128,
                                                                 precision="amp_fp16")]
    report = build_report(recs, ReportOptions(effects=["precision"]))
    assert not _kind(report, "effect")
    report = build_report(recs, ReportOptions(effects=["precision"], ignore=["batch_size"]))
    [t] = _kind(report, "effect")
    assert t.title == "Speedup from amp_fp16 vs fp32 (batch_size ignored)"
    assert t.cell("all", "median").value == pytest.approx(2.0)
    assert "Pairs ignore batch_size (differs in 2 of 2 pairs)" in " ".join(t.notes)
    [obs] = [o for o in report.observations if o.text.startswith("amp_fp16 vs fp32")]
    assert "(precision; batch_size ignored)" in obs.text


def test_lambda_logs_give_an_fp16_vs_fp32_table(tmp_path, capsys):
    store = tmp_path / "results"
    assert main(["import", "tf-cnn-benchmarks", str(FIXTURES / "LambdaCloud-RTX_A6000.logs"),
                 "--results-dir", str(store)]) == 0
    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), "--effect", "precision", "--ignore", "batch_size",
                 "--no-plots"]) == 0
    md = (out / "summary.md").read_text()
    assert "### Speedup from amp_fp16 vs fp32 (batch_size ignored)" in md
    assert "Pairs ignore batch_size (differs in 36 of 36 pairs)" in md
    assert "amp_fp16 vs fp32 (precision; batch_size ignored): median 2.32 over 36 pairs" in md
    assert "36 of 36 pairs significant" in md
    capsys.readouterr()
    assert main(["report", str(store), "-o", str(out), "--effect", "precision", "--no-plots"]) == 0
    assert "no two results agree on every other field" in (out / "summary.md").read_text()


def test_the_warnings_behind_cells_count_each_run_once_and_each_text_by_its_runs():
    """The warnings an observation rests on: each run once however many cells hold it, each text by
    the runs that recorded it (the most common one quoted for its kind), each kind by the runs with
    one of that kind."""
    from cnnbench.analysis.marks import untrusted, warnings_behind
    from cnnbench.analysis.points import Measure

    a = [_warned(warnings=("busy CPU: one core busy",)) for _ in range(3)]
    b = _warned(warnings=("busy CPU: two cores busy", "unstable: 12% spread"))
    quiet = record()
    first, second = Measure(runs=[*a, b]), Measure(runs=[b, quiet])  # b behind both
    w = warnings_behind([first, None, second])
    assert (w.runs, w.warned) == (5, 4)
    assert dict(w.reasons) == {"busy CPU: one core busy": 3, "busy CPU: two cores busy": 1, "unstable: 12% spread": 1}
    assert dict(w.kinds) == {"busy CPU": 4, "unstable": 1}
    assert untrusted(w).startswith("⚠ Untrusted — 4 of the 5 runs behind it recorded warnings: busy CPU (4 runs, "
                                   "e.g. 'one core busy'); unstable (1 run, e.g. '12% spread').")
