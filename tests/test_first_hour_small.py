"""Issue 42 item 4, small things a newcomer notices: durations that ``run`` prints read in fixed
decimals (ms or s, never e-notation), sysinfo says a NUMA node's memory is its total, and the
throughput plots' value labels stand clear of their error bars' caps."""

from __future__ import annotations

import re

import pytest
from matplotlib.container import ErrorbarContainer
from matplotlib.transforms import Bbox

from cnnbench.engine.epochs import EpochMeasure, epoch_line
from cnnbench.engine.phase_split import split_line
from cnnbench.engine.stability import spread_warnings
from cnnbench.machine import host
from cnnbench.machine.sysinfo import describe
from cnnbench.report import ReportOptions, build_report
from cnnbench.report.render.plot_throughput import _throughput
from cnnbench.words import duration
from tests.report_fixtures import record

E_NOTATION = re.compile(r"\d[eE][+-]?\d")


# --------------------------------------------------------------------------- durations


@pytest.mark.parametrize(("seconds", "text"), [
    (0.0, "0 ms"), (0.000512, "0.512 ms"), (0.0121, "12.1 ms"), (0.2, "200 ms"), (0.99949, "999 ms"),
    (0.9996, "1.00 s"), (3.0312, "3.03 s"), (12.34, "12.3 s"), (3030.4, "3,030 s"), (123456.7, "123,457 s"),
    (1e-9, "0.00000100 ms"), (1e7, "10,000,000 s"),
])
def test_a_duration_reads_in_ms_or_s_in_fixed_decimals(seconds, text):
    assert duration(seconds) == text


def test_no_duration_from_a_nanosecond_to_months_is_in_e_notation():
    for exponent in range(-9, 8):
        for mantissa in (1.0, 2.5, 9.9996):
            shown = duration(mantissa * 10.0 ** exponent)
            assert not E_NOTATION.search(shown), shown
            assert shown.endswith((" ms", " s")), shown


def test_the_forward_backward_split_line_of_a_slow_step_reads_in_seconds():
    line = split_line({"forward_time_s": 3.03, "backward_time_s": 6.1, "optimizer_time_s": 0.0121,
                       "phase_split_steps": 5})
    assert line == ("Forward/backward split (5 steps after the timed ones): "
                    "forward 3.03 s, backward 6.10 s, optimizer 12.1 ms")


def test_an_unstable_warning_of_slow_steps_has_no_e_notation():
    [text] = spread_warnings([1000.0, 2000.0, 1500.0])
    assert "mean 1,500 s" in text and "slowest 2,000 s" in text, text
    assert not E_NOTATION.search(text), text


def test_an_epoch_line_shows_a_short_epochs_time():
    epoch = EpochMeasure(epoch=1, time_s=0.04, eval_time_s=0.0121, images=64, train_loss=2.3,
                         train_accuracy=0.1, test_accuracy=0.1, learning_rate=0.1)
    line = epoch_line(epoch, 3)
    assert line.startswith("Epoch 1/3: 40.0 ms, 1600.0 images/sec") and line.endswith("(evaluation 12.1 ms)")


def test_run_prints_a_short_compile_time_in_ms(capsys):
    from types import SimpleNamespace

    from cnnbench.cli import run_cmd

    record_ = SimpleNamespace(status="ok", error=None, run_id="r1", config={},
                              metrics={"total_images_per_sec": 10.0, "compile_time_s": 0.5, "warnings": []})
    assert run_cmd._report(record_, "results/box.jsonl", quiet=False) == 0
    assert "compile time: 500 ms (the first step" in capsys.readouterr().out


# --------------------------------------------------------------------------- sysinfo


def test_sysinfo_says_a_numa_nodes_memory_is_its_total(tmp_path, monkeypatch):
    node = tmp_path / "node0"
    node.mkdir()
    (node / "cpulist").write_text("0-15\n")
    (node / "meminfo").write_text("Node 0 MemTotal:       19608372 kB\nNode 0 MemFree:        12687769 kB\n")
    monkeypatch.setattr(host, "SYS_NODE", tmp_path)
    nodes = host.numa_nodes()
    assert nodes == [{"node": 0, "cpus": "0-15", "memory_bytes": 19608372 * 1024}]  # MemTotal, not MemFree
    memory = dict(dict(describe({"numa_nodes": nodes}))["Memory"])
    assert memory["NUMA node 0"] == "CPUs 0-15, 18.7 GiB total"


# --------------------------------------------------------------------------- plots


def _cap_boxes(ax, renderer) -> list[Bbox]:
    """Each error-bar cap's box in display pixels, as matplotlib's own ``Line2D.get_window_extent``
    takes a marker's: its point padded by half the marker's size (the cap's half-length)."""
    boxes = []
    for container in ax.containers:
        if not isinstance(container, ErrorbarContainer):
            continue
        for cap in container.lines[1]:
            pad = cap.get_markersize() / 72.0 * ax.figure.dpi / 2
            for x, y in cap.get_transform().transform(cap.get_xydata()):
                boxes.append(Bbox.from_extents(x - pad, y - pad, x + pad, y + pad))
    return boxes


def _labels_clear_of_caps(fig) -> int:
    """Assert that no text on the figure's axes overlaps an error-bar cap, or leaves its axes;
    returns how many caps were checked."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    checked = 0
    for ax in fig.axes:
        caps = _cap_boxes(ax, renderer)
        assert caps
        checked += len(caps)
        for text in ax.texts:
            box = text.get_window_extent(renderer)
            for cap in caps:
                assert not box.overlaps(cap), (text.get_text(), box, cap)
            assert ax.bbox.containsy(box.y1) and ax.bbox.containsx(box.x1), text.get_text()
    return checked


def _figure(recs, **options):
    [figure] = [f for f in build_report(recs, ReportOptions(**options)).figures
                if f.name == "throughput-syn-replicated-1gpus"]
    return figure


def test_panel_value_labels_stand_clear_of_the_error_bar_caps():
    recs = [record(m, machine, v, batch_size=32 if (m, machine) == ("resnet50", "m-slow") else 64)
            for m in ("resnet50", "vgg16") for machine in ("m-fast", "m-slow") for v in (300.0, 330.0)]
    fig = _throughput(_figure(recs, max_plots=0))
    assert len(fig.axes) == 2
    assert "batch 32" in " ".join(t.get_text() for ax in fig.axes for t in ax.texts)  # two-line labels too
    assert _labels_clear_of_caps(fig) == 8


def test_one_machines_value_labels_stand_clear_of_the_error_bar_caps():
    recs = [record("resnet50", "m-fast", v) for v in (300.0, 500.0)]
    recs += [record("vgg16", "m-fast", v) for v in (90.0, 110.0)]
    fig = _throughput(_figure(recs))
    [ax] = fig.axes
    assert _labels_clear_of_caps(fig) == 4
    assert {t.get_text() for t in ax.texts} == {"400", "100"}
