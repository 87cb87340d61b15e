"""Reports never delete what they did not write: a report remembers what it wrote (a
manifest in the folder) and a later report removes only that; a non-empty folder that
holds no report is refused, as is ``-o`` that is a file or under one, before any work."""

from __future__ import annotations

import json

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


@pytest.mark.parametrize("where,why", [("a-file", "is a file, not a folder"),
                                       ("a-file/report", "is a file, not a folder"), ("", "empty")])
def test_o_that_is_a_file_or_under_one_is_one_line(store, tmp_path, capsys, where, why):
    (tmp_path / "a-file").write_text("x\n")
    target = str(tmp_path / where) if where else ""
    assert main(["report", str(store), "-o", target]) == 2
    err = capsys.readouterr().err
    assert why in err and "-o" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (tmp_path / "a-file").read_text() == "x\n"
