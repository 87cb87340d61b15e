"""Reports never delete what they did not write: a report remembers what it wrote (a
manifest in the folder) and a later report removes only that; a non-empty folder that
holds no report is refused, as is ``-o`` that is a file or under one, before any work."""

from __future__ import annotations

import json
import os

import pytest

from cnnbench.cli import main
from cnnbench.report import ReportOptions, build_report, write_report
from tests.report_fixtures import record, scaling_records, write_store


@pytest.fixture
def store(tmp_path):
    return write_store(tmp_path / "results", scaling_records())


def test_a_second_report_keeps_the_users_own_files(store, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), "--max-plots", "1"]) == 0
    mine = [out / "tables" / "my-notes.csv", out / "plots" / "my-photo.png", out / "README.txt",
            out / "tables" / "throughput-hand-made.json"]
    for path in mine:
        path.write_text("mine\n")
    written_before = {p.relative_to(out) for p in out.rglob("*") if p.is_file()} - {m.relative_to(out) for m in mine}
    assert main(["report", str(store), "-o", str(out), "--where", "model=vgg16", "--no-plots"]) == 0
    capsys.readouterr()
    for path in mine:
        assert path.read_text() == "mine\n", path  # the user's files are untouched
    after = {p.relative_to(out) for p in out.rglob("*") if p.is_file()}
    stale = {p for p in written_before if "resnet50" in str(p) or str(p).startswith("plots/")}
    assert stale and not stale & after  # what the first report wrote and the second did not is gone
    assert (out / "summary.md").is_file()


def test_a_stale_table_of_an_earlier_report_is_removed(tmp_path):
    write_report(build_report([record(machine="a", ips=1.0), record(machine="b", ips=2.0)]), tmp_path / "o")
    first = {p.name for p in (tmp_path / "o" / "tables").iterdir()}
    write_report(build_report([record(ips=3.0, model="vgg16")], ReportOptions(max_plots=0)), tmp_path / "o")
    second = {p.name for p in (tmp_path / "o" / "tables").iterdir()}
    assert first - second  # the earlier report's own tables that this one did not write are gone
    assert not list((tmp_path / "o" / "plots").glob("*.svg"))


def test_a_folder_that_holds_no_report_is_refused(store, tmp_path, capsys):
    folder = tmp_path / "my-documents"
    (folder / "tables").mkdir(parents=True)
    (folder / "tables" / "budget.csv").write_text("a,b\n1,2\n")
    (folder / "plots").mkdir()
    (folder / "plots" / "holiday.png").write_bytes(b"\x89PNG")
    assert main(["report", str(store), "-o", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "not empty" in err and "no cnnbench report" in err and len(err.strip().splitlines()) == 1
    assert (folder / "tables" / "budget.csv").read_text() == "a,b\n1,2\n"
    assert (folder / "plots" / "holiday.png").exists()
    assert sorted(p.name for p in folder.rglob("*")) == ["budget.csv", "holiday.png", "plots", "tables"]
    from cnnbench.results.outputs import OutputError

    with pytest.raises(OutputError):
        write_report(build_report(scaling_records()), folder)


def test_a_users_file_in_the_way_of_a_report_file_is_refused(store, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), "--no-plots"]) == 0
    capsys.readouterr()
    (out / "tables" / "throughput-syn-replicated-1gpus.csv").unlink()  # the user replaces one...
    (out / "tables" / "throughput-syn-replicated-1gpus.csv").write_text("mine\n")
    manifest = next(out.glob(".cnnbench-report*"))
    text = manifest.read_text().replace("tables/throughput-syn-replicated-1gpus.csv", "tables/gone.csv")
    manifest.write_text(text)  # ... as their own (not listed any more)
    assert main(["report", str(store), "-o", str(out), "--no-plots"]) == 2
    assert "was not written by a report" in capsys.readouterr().err
    assert (out / "tables" / "throughput-syn-replicated-1gpus.csv").read_text() == "mine\n"


def test_a_manifest_cannot_name_files_outside_the_report(store, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), "--no-plots"]) == 0
    precious = tmp_path / "precious.txt"
    precious.write_text("keep\n")
    manifest = next(out.glob(".cnnbench-report*"))
    data = json.loads(manifest.read_text())
    data["files"].append("../precious.txt")
    manifest.write_text(json.dumps(data))
    assert main(["report", str(store), "-o", str(out), "--no-plots"]) == 0
    assert precious.read_text() == "keep\n"


def test_a_file_a_manifest_lists_is_removed_only_with_the_bytes_the_report_recorded(store, tmp_path, capsys):
    """A name added to the manifest (a file of the folder's, anyone's to write) had the next report
    delete the user's file it named; a stale table the user edited was deleted too."""
    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), "--no-plots"]) == 0
    notes = out / "tables" / "notes.csv"
    notes.write_text("my notes\n")
    manifest = out / ".cnnbench-report.json"
    data = json.loads(manifest.read_text())
    data["files"].append("tables/notes.csv")
    data["outputs"]["tables/notes.csv"] = "0" * 64  # a digest that is not the file's
    manifest.write_text(json.dumps(data))
    edited = out / "tables" / "effect-model-vgg16-vs-resnet50.csv"  # a table the next report does not write
    edited.write_text("edited by hand\n")
    assert main(["report", str(store), "-o", str(out), "--no-plots", "--where", "model=vgg16"]) == 0
    capsys.readouterr()
    assert notes.read_text() == "my notes\n" and edited.read_text() == "edited by hand\n"
    assert not edited.with_suffix(".json").exists()  # its unchanged twin: gone


def test_a_report_cut_off_halfway_leaves_its_earlier_reports_files_to_the_next(store, tmp_path, capsys, monkeypatch):
    from cnnbench.report import output

    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), "--no-plots"]) == 0
    first = {p.name for p in (out / "tables").iterdir()}

    def cut(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(output, "render_html", cut)
    assert main(["report", str(store), "-o", str(out), "--no-plots", "--where", "model=vgg16", "--rebuild"]) != 0
    assert "interrupted" in capsys.readouterr().err
    monkeypatch.undo()
    assert (out / "tables" / "effect-model-vgg16-vs-resnet50.csv").exists()  # cut off before it was removed
    assert main(["report", str(store), "-o", str(out), "--no-plots", "--where", "model=vgg16", "--rebuild"]) == 0
    capsys.readouterr()
    left = {p.name for p in (out / "tables").iterdir()}
    assert first - left == {"effect-model-vgg16-vs-resnet50.csv", "effect-model-vgg16-vs-resnet50.json"}, left


def test_files_a_cut_off_report_wrote_are_removed_or_kept_never_refused_later(store, tmp_path, capsys, monkeypatch):
    """A report cut off halfway wrote files it had no digest of yet: the next report kept them but
    listed them nowhere, and the report after it refused them as the user's (review)."""
    from cnnbench.report import output

    out = tmp_path / "report"
    effect = out / "tables" / "effect-model-vgg16-vs-resnet50.csv"
    for path in store.glob("*.jsonl"):
        os.utime(path, (1.0e9, 1.0e9))  # settled: each report remembers its inputs (reuse.remember)
    assert main(["report", str(store), "-o", str(out), "--no-plots", "--where", "model=vgg16"]) == 0

    def cut(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(output, "render_html", cut)
    assert main(["report", str(store), "-o", str(out), "--no-plots", "--rebuild"]) != 0
    monkeypatch.undo()
    assert effect.exists()  # written before the cut
    assert main(["report", str(store), "-o", str(out), "--no-plots", "--where", "model=vgg16", "--rebuild"]) == 0
    assert not effect.exists()  # its digest was left by the cut-off report: removed
    # cut off so that nothing could be left (a kill): its files are kept, listed, and written over later
    monkeypatch.setattr(output, "render_html", cut)
    monkeypatch.setattr(output, "_known", lambda digests: {})
    monkeypatch.setattr(output, "_digests", lambda out, names: {})
    assert main(["report", str(store), "-o", str(out), "--no-plots", "--rebuild"]) != 0
    monkeypatch.undo()
    assert main(["report", str(store), "-o", str(out), "--no-plots", "--where", "model=vgg16", "--rebuild"]) == 0
    assert effect.exists() and "tables/effect-model-vgg16-vs-resnet50.csv" in json.loads(
        (out / ".cnnbench-report.json").read_text())["kept"]
    assert "kept" in json.loads((out / ".cnnbench-report.json").read_text())  # remember() kept the list too
    assert main(["report", str(store), "-o", str(out), "--no-plots"]) == 0, capsys.readouterr().err
    capsys.readouterr()


def test_a_report_cut_off_before_it_wrote_a_table_leaves_the_users_edit_of_it(store, tmp_path, capsys, monkeypatch):
    """A report cut off recorded the digest of every file at a name it planned, written by it or not:
    an earlier report's table the user had edited became the next report's to remove (review)."""
    from cnnbench.report import output

    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), "--no-plots"]) == 0
    edited = out / "tables" / "effect-model-vgg16-vs-resnet50.csv"
    edited.write_text("edited by hand\n")

    def cut(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(output, "table_texts", cut)  # before any table is written
    assert main(["report", str(store), "-o", str(out), "--no-plots", "--rebuild"]) != 0
    monkeypatch.undo()
    assert main(["report", str(store), "-o", str(out), "--no-plots", "--where", "model=vgg16", "--rebuild"]) == 0
    capsys.readouterr()
    assert edited.read_text() == "edited by hand\n"


def test_a_plot_drawn_before_the_report_was_cut_off_is_the_next_reports_to_remove(tmp_path, monkeypatch):
    """A plot is known to the report only once every plot is drawn: one drawn before a cut-off was
    left listed nowhere with bytes, and stayed as kept for good (review)."""
    from cnnbench.report.render import drawing

    records = scaling_records()
    out = tmp_path / "report"
    real, drawn = drawing._draw, []

    def draw_then_stop(figure, outdir, key=None):
        if drawn:
            raise KeyboardInterrupt
        drawn.append(real(figure, outdir, key))
        return drawn[-1]

    monkeypatch.setattr(drawing, "_draw", draw_then_stop)
    with pytest.raises(KeyboardInterrupt):
        write_report(build_report(records, ReportOptions(max_plots=2)), out, drawing_pool=drawing.prepare_drawing(0))
    monkeypatch.undo()
    assert len(drawn) == 1 and drawn[0].exists()
    write_report(build_report(records, ReportOptions(max_plots=0)), out, plots=False)
    assert not drawn[0].exists()
    assert "kept" not in json.loads((out / ".cnnbench-report.json").read_text())


def test_what_an_up_to_date_report_repeats_is_shown_as_text(store, tmp_path, capsys):
    """The manifest's remembered lines went to the terminal as they were: an escape sequence in one
    could retitle or clear it."""
    out = tmp_path / "report"
    for path in store.glob("*.jsonl"):
        os.utime(path, (1.0e9, 1.0e9))  # settled: the report may be taken as up to date
    assert main(["report", str(store), "-o", str(out), "--no-plots"]) == 0
    manifest = out / ".cnnbench-report.json"
    data = json.loads(manifest.read_text())
    data["said"]["more"] = ["\x1b]0;pwned\x07\x1b[31mFAKE\rX"]
    data["said"]["warnings"] = ["warning: \x1b[2J"]
    manifest.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["report", str(store), "-o", str(out), "--no-plots"]) == 0
    out_text, err = capsys.readouterr()
    assert "up to date" in out_text, out_text
    assert "\x1b" not in out_text + err and "\r" not in out_text and "\\x1b[31mFAKE" in out_text and "\\x1b[2J" in err


@pytest.mark.parametrize("where,why", [("a-file", "is a file, not a folder"),
                                       ("a-file/report", "is a file, not a folder"), ("", "empty")])
def test_o_that_is_a_file_or_under_one_is_one_line(store, tmp_path, capsys, where, why):
    (tmp_path / "a-file").write_text("x\n")
    target = str(tmp_path / where) if where else ""
    assert main(["report", str(store), "-o", target]) == 2
    err = capsys.readouterr().err
    assert why in err and "-o" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (tmp_path / "a-file").read_text() == "x\n"
