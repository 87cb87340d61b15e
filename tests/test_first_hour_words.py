"""Issue 42, "the words match the numbers": the Marks section says why warned cells count in the
observations (``--include-warned``, or every figure warned), and an observation that rests on
warned runs begins with why it cannot be trusted, in summary.md, report.html and study reports."""

from __future__ import annotations

import html
import re
from pathlib import Path

from cnnbench.report import ReportOptions, build_report, write_report
from cnnbench.report.render.markdown import render_markdown
from cnnbench.study.recipe import load_study
from cnnbench.study.run import report_options
from tests.report_fixtures import record

BUSY = "busy CPU: other processes used 1.20 of the 2 cores this run may use during the timed steps (load average 3.2)"


def _busy(*args, warnings=(BUSY,), **kw):
    return record(*args, metrics={"warnings": list(warnings)}, **kw)


def _all_warned():
    return [_busy(machine="m-a", ips=150.0), _busy(machine="m-b", ips=100.0),
            _busy(machine="m-a", ips=290.0, num_devices=2), _busy(machine="m-b", ips=190.0, num_devices=2)]


def _written(records, tmp_path: Path, **options) -> tuple[str, str]:
    """summary.md and report.html of a report of ``records``, as written."""
    out = tmp_path / "report"
    write_report(build_report(records, ReportOptions(max_plots=0, **options)), out, plots=False)
    return (out / "summary.md").read_text(), html.unescape((out / "report.html").read_text())


def _marks_line(text: str) -> str:
    [line] = [ln for ln in text[text.index("Marks"):].splitlines() if "a run recorded warnings (" in ln]
    return line


def _bullets(markdown: str) -> list[str]:
    section = markdown.split("## Observations\n", 1)[1].split("\n## ", 1)[0]
    return [ln[2:] for ln in section.splitlines() if ln.startswith("- ")]


def test_marks_says_every_figure_was_warned_when_include_warned_was_not_given(tmp_path):
    md, page = _written(_all_warned(), tmp_path)
    for text in (md, page):
        line = _marks_line(text)
        assert "--include-warned asks" not in line
        assert ("count in the observations all the same, though --include-warned was not given: every figure of "
                "the throughput tables is warned, and leaving them out would leave no observation; each "
                "observation that rests on figures begins with ⚠ and the warnings of its runs.") in line


def test_marks_keeps_include_warned_asks_when_it_was_given(tmp_path):
    md, page = _written(_all_warned(), tmp_path, include_warned=True)
    for text in (md, page):
        line = _marks_line(text)
        assert "count in the observations, as --include-warned asks." in line
        assert "was not given" not in line
    # one clean figure: warned cells are left out, and the Marks section says that
    md, _ = _written([*_all_warned(), record(machine="m-c", ips=120.0)], tmp_path / "clean")
    assert "are left out of the observations (--include-warned keeps them)." in _marks_line(md)


def test_every_observation_of_an_all_warned_report_leads_with_its_warnings(tmp_path):
    md, page = _written(_all_warned(), tmp_path)
    lead = ("⚠ Untrusted — all 4 runs behind it recorded warnings: busy CPU (4 runs, e.g. 'other processes used "
            "1.20 of the 2 cores this run may use during the timed steps (load average 3.2)'). Taken at face value: ")
    bullets = _bullets(md)
    assert bullets and all(b.startswith(lead) for b in bullets), bullets
    assert any(b.startswith(lead + "Scaling") for b in bullets)
    assert any(b.startswith(lead + "m-b vs m-a (machine): ") and "m-b is 33.9% slower than m-a" in b for b in bullets)
    assert not any("(from warned runs)" in b for b in bullets)  # said first, not tacked on at the end
    items = [re.sub(r"<[^>]+>", "", li) for li in re.findall(r"<li>(.*?)</li>", page, re.S)]
    for b in bullets:
        assert b.replace("\\", "") in items  # the page says the same, first


def test_only_the_observations_on_warned_runs_lead_with_warnings():
    recs = [record(machine="m-a", ips=150.0), record(machine="m-a", ips=290.0, num_devices=2),
            record(machine="m-b", ips=100.0), _busy(machine="m-b", ips=190.0, num_devices=2,
                                                     warnings=["unstable: step times vary by 12% of their mean"])]
    report = build_report(recs, ReportOptions(include_warned=True, max_plots=0))
    texts = [o.text for o in report.observations]
    [scaling] = [t for t in texts if "Scaling" in t]
    assert scaling.startswith("⚠ Untrusted — 1 of the 4 runs behind it recorded warnings: unstable (1 run, e.g. "
                              "'step times vary by 12% of their mean'). Taken at face value: Scaling")
    # the same runs without --include-warned: the warned cell is left out, so nothing leads with a warning
    left_out = build_report(recs, ReportOptions(max_plots=0))
    assert left_out.observations and not any(o.text.startswith("⚠") for o in left_out.observations)
    assert all(o.warnings.warned == 0 for o in left_out.observations)


def test_a_throttled_run_is_named_without_an_example():
    recs = [record(machine="m-a", ips=150.0, metrics={"throttled": True, "warnings": []}),
            record(machine="m-b", ips=100.0, metrics={"throttled": True, "warnings": []})]
    [fastest] = [o for o in build_report(recs, ReportOptions(max_plots=0)).observations if "Fastest" in o.text]
    assert fastest.text.startswith("⚠ Untrusted — all 2 runs behind it recorded warnings: throttled (2 runs). "
                                   "Taken at face value: Fastest machine")


def test_an_implementation_observation_on_warned_runs_leads_with_them():
    recs = [_busy(ips=228.0), _busy(ips=225.73, source="tf_cnn_benchmarks", compile=None),
            record(ips=427.0, num_devices=2), record(ips=424.54, num_devices=2, source="tf_cnn_benchmarks",
                                                     compile=None)]
    report = build_report(recs, ReportOptions(include_warned=True, max_plots=0))
    [impl] = [o for o in report.observations if "Implementations" in o.text]
    assert impl.text.startswith("⚠ Untrusted — 2 of the 4 runs behind it recorded warnings: busy CPU (2 runs, ")
    assert "Taken at face value: Implementations cnnbench / tf_cnn_benchmarks: median ratio" in impl.text


def test_the_host_cpus_smoke_on_a_busy_machine_leads_with_why_it_is_untrusted():
    """The study report of issue 42: "host_cpus=2 is 95.3% slower than host_cpus=1", marked but read as a finding."""
    records = [_busy(model, "box", ips, device="cpu", host_cpus=n, batch_size=8)
               for model, scale in (("trivial", 1.0), ("resnet18", 0.1))
               for n, ips in ((1, 400.0 * scale), (2, 18.8 * scale))]
    layout = load_study("host-cpus").layout
    report = build_report(records, report_options(layout, records, max_plots=0))
    [effect] = [o.text for o in report.observations if "host_cpus=2 vs host_cpus=1" in o.text]
    assert effect.startswith("⚠ Untrusted — all 4 runs behind it recorded warnings: busy CPU (4 runs, e.g. "
                             "'other processes used 1.20 of the 2 cores this run may use during the timed steps "
                             "(load average 3.2)'). Taken at face value: ")
    assert "host_cpus=2 is 95.3% slower than host_cpus=1" in effect
    assert effect.index("Untrusted") < effect.index("slower")
    assert effect in [b.replace("\\", "") for b in _bullets(render_markdown(report))]


def test_the_lead_counts_runs_not_warning_texts():
    """One run with two warnings of one kind (the governor and the frequency; a busy GPU of each of
    its GPUs) is one run, and a long warning is quoted cut short."""
    from cnnbench.analysis.marks import untrusted, warnings_behind
    from cnnbench.analysis.points import Measure

    run = {"metrics": {"warnings": ["CPU frequency: governor is powersave", "CPU frequency: " + "x" * 500,
                                    "busy GPU: GPU 0 busy", "busy GPU: GPU 1 busy"]}}
    lead = untrusted(warnings_behind([Measure([1.0], {"ok": 1}, [run])]))
    assert "the run behind it recorded warnings" in lead
    assert "CPU frequency (1 run, e.g." in lead and "busy GPU (1 run, e.g." in lead
    assert "2 runs" not in lead and "x" * 201 not in lead


def _observations_paragraph(md: str) -> str:
    return md.split("## Observations\n", 1)[1].split("\n## ", 1)[0].strip()


def test_no_observation_because_the_comparable_figures_are_warned_says_so(tmp_path):
    """A report whose comparable figures were all warned, but with one clean figure elsewhere (so not
    the all-warned fallback), said "no table has two comparable figures" beside tables comparing them."""
    records = [*_all_warned(), record(model="vgg16", machine="m-c", ips=20.0)]
    md, _ = _written(records, tmp_path)
    said = _observations_paragraph(md)
    assert said.startswith("Nothing to observe of the figures of runs that recorded no warning") and \
        "--include-warned keeps them" in said, said
    md, _ = _written(records, tmp_path / "kept", include_warned=True)
    assert _bullets(md)  # what it said was left out
    # a warned figure that would give no observation either: nothing is said of the warnings
    lone = [_busy(machine="m-a", ips=150.0), record(machine="m-a", ips=152.0)]
    md, _ = _written(lone, tmp_path / "lone")
    said = _observations_paragraph(md)
    assert said.endswith("\n\nNothing to observe: no table has two comparable figures."), said
    assert "no warning" not in said, said


def test_compare_names_no_flag_it_does_not_have(tmp_path, capsys):
    """compare's Marks footer ended with "(--include-warned keeps them)", a flag compare refuses."""
    from cnnbench.cli import main
    from tests.report_fixtures import write_store

    write_store(tmp_path / "a", [_busy(machine="m-a", ips=150.0)])
    write_store(tmp_path / "b", [_busy(machine="m-a", ips=140.0)])
    main(["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    out = capsys.readouterr().out
    assert "a run recorded warnings" in out and "--include-warned" not in out, out


def test_compare_by_a_field_leaves_out_the_records_without_it(tmp_path, capsys):
    """A store holding a record without the field (cnnbench data and comm write to results/ too) made
    the documented ``compare results/ --by precision`` fail: "the results take 3 values (..., —)"."""
    from cnnbench.cli import main
    from tests.report_fixtures import write_store

    other = record(machine="m-a", ips=10.0)
    del other["config"]["precision"]
    write_store(tmp_path / "r", [record(machine="m-a", ips=100.0), record(machine="m-a", ips=180.0, precision="fp16"),
                                 other])
    assert main(["compare", str(tmp_path / "r"), "--by", "precision"]) == 0, capsys.readouterr().err
    assert "fp16" in capsys.readouterr().out
    # a field held as null is a value of its own: eager runs (compile_mode null) against compiled ones
    runs = [record(machine="m-a", ips=100.0 + i) for i in range(2)]
    runs += [record(machine="m-a", ips=130.0 + i) for i in range(2)]
    for i, run in enumerate(runs):
        run["run_id"] = f"cm{i}"
        run["config"]["compile_mode"] = None if i < 2 else "max-autotune"
    write_store(tmp_path / "c", runs)
    assert main(["compare", str(tmp_path / "c"), "--by", "compile_mode"]) == 0, capsys.readouterr().err
    assert "compile_mode=max-autotune (2 results)" in capsys.readouterr().out
