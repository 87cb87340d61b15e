"""A plot whose content did not change is kept from the previous report in the same folder,
not drawn again (issue 22 item 2): each SVG carries the SHA-256 of what it shows; a plot whose
numbers or title changed is drawn again; a file that is not the plot of that key (another
key, edited, a symlink) is drawn over."""

from __future__ import annotations

import os

from cnnbench.report import build_report, write_report
from cnnbench.report.render import drawing
from tests.report_fixtures import scaling_records, training_record


def files(out) -> dict[str, tuple[int, int, bytes]]:
    """Each plot file: inode, modification time and bytes (a redrawn file is a new file)."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in (out / "plots").glob("*.svg")}


def report(records, out):
    written = write_report(build_report(records), out, drawing_pool=drawing.prepare_drawing(0))
    return written


def test_a_second_report_keeps_every_plot_and_a_changed_one_is_drawn_again(tmp_path):
    records = scaling_records() + [training_record(n) for n in (1, 2)]
    out = tmp_path / "out"
    first = report(records, out)
    before = files(out)
    assert len(before) >= 2 and len(first.plots) == len(before)
    for name, (_, _, data) in before.items():
        assert b"cnnbench-plot-key:" in data[:4096], name
    second = report(records, out)
    assert files(out) == before  # not one file written again
    assert second.plots == first.plots

    changed = [dict(r, metrics=dict(r["metrics"])) for r in records]
    changed[-1]["metrics"]["accuracy_curve"] = None  # the training curve of 2 devices goes
    for r in changed:
        if r["config"].get("num_devices") == 2 and "total_images_per_sec" in r["metrics"]:
            r["metrics"]["total_images_per_sec"] *= 1.5  # a scaling point moves
    report(changed, out)
    after = files(out)
    redrawn = {name for name in after if after[name][:2] != before.get(name, (None, None))[:2]}
    kept = set(after) - redrawn
    assert redrawn and kept  # the plots of the changed numbers, and only those
    for name in redrawn:
        assert after[name][2] != before[name][2]
    for name in kept:
        assert after[name] == before[name]


def test_a_plot_file_that_is_not_that_plot_is_drawn_over(tmp_path):
    records = scaling_records()
    out = tmp_path / "out"
    report(records, out)
    before = files(out)
    name = sorted(before)[0]
    path = out / "plots" / name
    path.write_bytes(before[name][2].replace(b"cnnbench-plot-key:", b"cnnbench-plot-key:0"))  # another key
    other = sorted(before)[-1]
    target = tmp_path / "elsewhere.svg"
    target.write_bytes(before[other][2])
    (out / "plots" / other).unlink()
    os.symlink(target, out / "plots" / other)  # a symlink to the very plot: not trusted
    report(records, out)
    after = files(out)
    assert after[name][2] == before[name][2]  # drawn again, as it was
    assert not (out / "plots" / other).is_symlink() and after[other][2] == before[other][2]
    assert target.read_bytes() == before[other][2]  # never written through


def test_the_key_follows_the_numbers_and_the_title():
    fig = next(f for f in build_report(scaling_records()).figures if f.drawn)
    key = drawing.figure_key(fig)
    assert drawing.figure_key(fig) == key
    fig.title += " "
    assert drawing.figure_key(fig) != key


def test_no_drawing_process_starts_when_every_plot_is_kept(tmp_path):
    records = scaling_records() + [training_record(n) for n in (1, 2)]
    out = tmp_path / "out"
    first = drawing.prepare_drawing(2, reusing=out)  # nothing there yet: started ahead
    assert first.pool is not None
    write_report(build_report(records), out, drawing_pool=first)
    drawn = {p.name: p.read_bytes() for p in (out / "plots").glob("*.svg")}
    again = drawing.prepare_drawing(2, reusing=out)
    assert again.pool is None  # not ahead: the plots there may all be kept
    figures = [f for f in build_report(records).figures if f.drawn]
    kept = drawing.start_drawing(figures, out, again)
    assert again.pool is None and all(kept.reused)
    kept.wait()
    for p in (out / "plots").glob("*.svg"):
        p.write_bytes(p.read_bytes().replace(b"cnnbench-plot-key:", b"cnnbench-plot-key:0"))
    later = drawing.prepare_drawing(2, reusing=out)
    redraw = drawing.start_drawing(figures, out, later)
    assert later.pool is not None and not any(redraw.reused)  # started for the figures to draw
    assert {p.name: p.read_bytes() for p in redraw.wait()} == drawn
