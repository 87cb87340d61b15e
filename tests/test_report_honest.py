"""Reports that read scaling and noise honestly (issue 20 items 3 and 6): superlinear scaling is
called so with its likely causes, figures resting on warned runs carry the mark (in the report and
in ``run --scaling``), "Fastest machine" needs a significant winner, and an all-warned report says
so once and gives its observations marked."""

from __future__ import annotations

from types import SimpleNamespace

from cnnbench.cli.run_cmd import _print_scaling
from cnnbench.report import ReportOptions, build_report
from cnnbench.report.observations import ALL_WARNED
from cnnbench.report.render.markdown import render_markdown
from cnnbench.report.tables.scaling import verdict
from tests.report_fixtures import record

BUSY = ["busy CPU: other processes used 1.20 of the 2 cores"]


def _warned(*args, **kw):
    return record(*args, metrics={"warnings": list(BUSY)}, **kw)


def _only(report, start):
    [obs] = [o for o in report.observations if o.text.startswith(start)]
    return obs


def test_867_percent_efficiency_is_superlinear_with_a_named_cause_never_near_linear():
    assert verdict(8.67).startswith("superlinear")
    report = build_report([record(ips=100.0), record(ips=1734.0, num_devices=2)])
    obs = _only(report, "Scaling")
    assert "867.0% at 2 devices" in obs.text
    assert "superlinear" in obs.text
    assert "slow or busy 1-device baseline" in obs.text and "cache effect" in obs.text
    md = render_markdown(report)
    assert "near-linear" not in md
    [summary] = [t for t in report.tables if t.kind == "scaling-summary"]
    assert any(n.startswith("Efficiency over 105% is superlinear") for n in summary.notes)
    # 100% to 105% stays near-linear; a superlinear series in a near-linear median is still named
    assert verdict(1.05).startswith("near-linear")
    mixed = build_report([record(ips=100.0), record(ips=190.0, num_devices=2),
                          record("vgg16", ips=100.0), record("vgg16", ips=195.0, num_devices=2),
                          record("alexnet", ips=100.0), record("alexnet", ips=240.0, num_devices=2)])
    text = _only(mixed, "Scaling").text
    assert "near-linear" in text
    assert "Superlinear, over 105% (likely a slow or busy 1-device baseline" in text
    assert "alexnet at 2 devices (2.40× · 120.0%)" in text


def test_a_warned_scaling_point_is_marked_in_the_report():
    recs = [record(ips=100.0), _warned(ips=190.0, num_devices=2),
            record("vgg16", ips=100.0), record("vgg16", ips=180.0, num_devices=2)]
    report = build_report(recs, ReportOptions(include_warned=True))
    [summary] = [t for t in report.tables if t.kind == "scaling-summary"]
    assert summary.cell("resnet50", "2 devices").text == "1.90× · 95.0% ⚠"
    assert summary.cell("vgg16", "2 devices").text == "1.80× · 90.0%"
    assert summary.cell("median", "2 devices").text.endswith("⚠")  # a median over a warned series
    assert any("⚠ on a median" in n for n in summary.notes)
    obs = _only(report, "⚠ Untrusted — 1 of the 4 runs behind it recorded warnings: busy CPU (1 run, e.g. "
                        "'other processes used 1.20 of the 2 cores'). Taken at face value: Scaling")
    assert "92.5% ⚠ at 2 devices (range 90.0%–95.0% ⚠ over 2 series)" in obs.text
    # a warned base run marks every figure over it
    base_warned = build_report([_warned(ips=100.0), record(ips=190.0, num_devices=2)],
                               ReportOptions(include_warned=True))
    [summary] = [t for t in base_warned.tables if t.kind == "scaling-summary"]
    assert summary.cell("resnet50", "2 devices").text == "1.90× · 95.0% ⚠"


def _run(ips, warnings=None, status="ok"):
    metrics = {"total_images_per_sec": ips} if status == "ok" else {}
    if warnings:
        metrics["warnings"] = warnings
    return SimpleNamespace(status=status, metrics=metrics)


def test_run_scaling_table_marks_warned_points_and_superlinear_efficiency(capsys):
    rows = [(1, _run(10.0)), (2, _run(19.0, BUSY)), (4, _run(1243.96)), (8, _run(None, status="oom"))]
    _print_scaling(rows, "results/m.jsonl")
    out = capsys.readouterr().out
    lines = out.splitlines()
    [two] = [line for line in lines if line.strip().startswith("2 ")]
    assert "19.0 ⚠" in two and "1.90x ⚠" in two and "95.0% ⚠" in two
    [four] = [line for line in lines if line.strip().startswith("4 ")]
    assert "3,109.9% superlinear" in four and "⚠" not in four
    assert "slow or busy 1-device baseline" in out and "cache effect" in out
    assert "⚠ the run, or the 1 device run it is compared with, recorded warnings" in out
    # a clean series has neither mark nor note
    _print_scaling([(1, _run(10.0)), (2, _run(19.0))], "results/m.jsonl")
    clean = capsys.readouterr().out
    assert "⚠" not in clean and "superlinear" not in clean and "95.0%" in clean


def test_no_fastest_machine_when_the_machine_effect_is_not_significant():
    # one run a side and no step times: nothing to test with, so no machine is called faster
    recs = [record(machine="m-a", ips=105.0, metrics={"step_times_s": []}),
            record(machine="m-b", ips=100.0, metrics={"step_times_s": []}),
            record("vgg16", machine="m-a", ips=55.0, metrics={"step_times_s": []}),
            record("vgg16", machine="m-b", ips=50.0, metrics={"step_times_s": []})]
    report = build_report(recs)
    texts = [o.text for o in report.observations]
    assert not any("Fastest machine" in t for t in texts)
    assert "No machine is significantly faster than the others for any model (2 comparisons)." in texts
    # within the minimum effect (2%): not significant either, however steady the steps
    close = build_report([record(machine="m-a", ips=102.0), record(machine="m-b", ips=100.0)])
    assert not any("Fastest machine" in o.text for o in close.observations)
    # a clear winner is still named
    clear = build_report([record(machine="m-a", ips=150.0), record(machine="m-b", ips=100.0)])
    assert any(o.text.startswith("Fastest machine per model: m-a") for o in clear.observations)


def test_a_fastest_machine_that_wins_only_some_contests_says_how_many_were_undecided():
    recs = [record(machine="m-a", ips=150.0), record(machine="m-b", ips=100.0),
            record("vgg16", machine="m-a", ips=101.0), record("vgg16", machine="m-b", ips=100.0)]
    obs = _only(build_report(recs), "Fastest machine")
    assert obs.text.startswith("Fastest machine per model: m-a for resnet50 (150.0 images/sec")
    assert "vgg16" not in obs.text
    assert obs.text.endswith("No significant winner in 1 of 2 comparisons.")


def test_an_all_warned_report_says_so_once_and_marks_its_observations():
    recs = [_warned(machine="m-a", ips=150.0), _warned(machine="m-b", ips=100.0),
            _warned(machine="m-a", ips=290.0, num_devices=2), _warned(machine="m-b", ips=190.0, num_devices=2)]
    report = build_report(recs)
    md = render_markdown(report)
    assert "Nothing to observe" not in md
    assert md.count(ALL_WARNED) == 1
    assert report.observations
    for obs in report.observations:
        assert obs.text.startswith("⚠ Untrusted — all 4 runs behind it recorded warnings: busy CPU"), obs.text
    assert any("Taken at face value: Scaling" in o.text for o in report.observations)
    assert any("Taken at face value: Fastest machine" in o.text for o in report.observations)
    assert "count in the observations all the same" in md  # the Marks section agrees
    # asked for with --include-warned: no such sentence; each observation still says why it is untrusted
    asked = build_report(recs, ReportOptions(include_warned=True))
    assert ALL_WARNED not in render_markdown(asked)
    assert [o.text for o in asked.observations] == [o.text for o in report.observations]
    # one clean cell: the usual rules (warned cells left out), no sentence
    mixed = build_report([*recs, record(machine="m-c", ips=120.0)])
    assert ALL_WARNED not in render_markdown(mixed)
