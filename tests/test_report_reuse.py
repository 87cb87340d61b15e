"""``cnnbench report`` run again on unchanged results, with the same options and the same
cnnbench, writes nothing and says so (issue 22: a second report of the same store in under
a second); any change of what the report is made from, of its files, or ``--rebuild`` makes
it again, and a report cut off halfway is never taken for a whole one."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from cnnbench.cli import main
from cnnbench.report import reuse
from tests.report_fixtures import record, scaling_records, write_store


def settled(folder: Path) -> Path:
    """Results files last modified a minute ago: older than the few seconds in which a file's
    coarse timestamps may not show a change (:data:`reuse.SETTLE_S`)."""
    back = time.time_ns() - 60 * 10**9
    for path in folder.glob("*.jsonl"):
        os.utime(path, ns=(back, back))
    return folder


@pytest.fixture
def store(tmp_path):
    return settled(write_store(tmp_path / "results", scaling_records()))


def files_of(out: Path) -> dict[str, tuple[int, int]]:
    """Each file of the report: inode and modification time (a file written again is a new file)."""
    return {str(p.relative_to(out)): (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()}


def report(store: Path, out: Path, capsys, *flags: str) -> tuple[str, str]:
    assert main(["report", str(store), "-o", str(out), "--max-plots", "2", *flags]) == 0
    said = capsys.readouterr()
    return said.out, said.err


def test_a_report_of_unchanged_results_is_not_made_again(store, tmp_path, capsys):
    out = tmp_path / "report"
    first, _ = report(store, out, capsys)
    assert first.startswith("wrote ") and "2 plots" in first
    before = files_of(out)
    again, _ = report(store, out, capsys)
    assert again.startswith("up to date, not written again")
    assert again.splitlines()[0].endswith(first.splitlines()[0].removeprefix("wrote "))
    assert files_of(out) == before  # not one file written, the manifest included
    rebuilt, _ = report(store, out, capsys, "--rebuild")
    assert rebuilt.startswith("wrote ")
    assert files_of(out) != before
    assert report(store, out, capsys)[0].startswith("up to date")  # --rebuild kept the new one as up to date


def test_an_edit_of_the_same_size_with_its_time_set_back_makes_it_again(store, tmp_path, capsys):
    out = tmp_path / "report"
    report(store, out, capsys)
    path = next(store.glob("*.jsonl"))
    st = path.stat()
    text = path.read_text()
    edited = text.replace('"total_images_per_sec": 1', '"total_images_per_sec": 2', 1)
    assert edited != text and len(edited) == len(text)
    with open(path, "r+") as f:  # in place: the same inode and size
        f.write(edited)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # the modification time as it was; the change time moves
    assert path.stat().st_ino == st.st_ino and path.stat().st_size == st.st_size
    assert report(store, out, capsys)[0].startswith("wrote ")


def test_a_results_file_changed_moments_ago_gives_no_key_and_the_report_is_made(store, tmp_path, capsys):
    out = tmp_path / "report"
    path = next(store.glob("*.jsonl"))
    soon = time.time_ns() + 3600 * 10**9
    os.utime(path, ns=(soon, soon))  # modified "just now" for the next hour, however slow this machine is
    assert reuse.inputs_key([store], {}) is None
    assert report(store, out, capsys)[0].startswith("wrote ")
    assert report(store, out, capsys)[0].startswith("wrote ")
    settled(store)
    report(store, out, capsys)
    assert report(store, out, capsys)[0].startswith("up to date")


def test_the_message_names_the_folder_as_given_now(store, tmp_path, capsys, monkeypatch):
    out = tmp_path / "report"
    report(store, out, capsys)
    monkeypatch.chdir(tmp_path)
    again, _ = report(store, Path("report"), capsys)
    assert again.startswith("up to date") and f"): {Path('report') / 'summary.md'} and" in again


def test_an_appended_record_a_new_file_or_another_option_makes_it_again(store, tmp_path, capsys):
    out = tmp_path / "report"
    report(store, out, capsys)
    with open(next(store.glob("*.jsonl")), "a") as f:
        f.write(json.dumps(record(machine="m-fast", ips=999.0, model="resnet152")) + "\n")
    settled(store)
    text, _ = report(store, out, capsys)
    assert text.startswith("wrote ") and "resnet152" in (out / "summary.md").read_text()
    assert report(store, out, capsys)[0].startswith("up to date")

    write_store(tmp_path / "more", [record(machine="m-new", ips=5.0)])
    (store / "m-new.jsonl").write_bytes((tmp_path / "more" / "m-new.jsonl").read_bytes())
    settled(store)
    assert report(store, out, capsys)[0].startswith("wrote ")
    assert report(store, out, capsys)[0].startswith("up to date")

    assert report(store, out, capsys, "--title", "Another")[0].startswith("wrote ")
    assert report(store, out, capsys, "--title", "Another")[0].startswith("up to date")
    assert main(["-v", "report", str(store), "-o", str(out), "--max-plots", "2", "--title", "Another"]) == 0
    assert capsys.readouterr().out.startswith("up to date")  # -v: the same report


def test_a_file_of_the_report_changed_or_gone_makes_it_again(store, tmp_path, capsys):
    out = tmp_path / "report"
    report(store, out, capsys)
    summary = (out / "summary.md").read_text()
    (out / "summary.md").write_text(summary + "my note\n")
    assert report(store, out, capsys)[0].startswith("wrote ")
    assert (out / "summary.md").read_text() == summary
    next((out / "tables").glob("*.csv")).unlink()
    assert report(store, out, capsys)[0].startswith("wrote ")
    plot = next((out / "plots").glob("*.svg"))
    target = tmp_path / "elsewhere.svg"
    target.write_bytes(plot.read_bytes())
    plot.unlink()
    os.symlink(target, plot)  # the same bytes, through a symlink: not the report's file
    assert report(store, out, capsys)[0].startswith("wrote ")
    assert not plot.is_symlink()


def test_a_report_cut_off_halfway_is_made_again(store, tmp_path, capsys, monkeypatch):
    out = tmp_path / "report"
    report(store, out, capsys)
    from cnnbench.report import output

    def broken(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(output, "render_html", broken)
    capsys.readouterr()
    assert main(["report", str(store), "-o", str(out), "--max-plots", "2", "--rebuild"]) == 1  # one line (issue 41)
    assert "error: -o" in capsys.readouterr().err
    monkeypatch.undo()
    capsys.readouterr()
    assert report(store, out, capsys)[0].startswith("wrote ")


def test_the_warnings_and_notes_of_the_report_are_said_again(tmp_path, capsys):
    store = write_store(tmp_path / "results", scaling_records())
    with open(next(store.glob("*.jsonl")), "a") as f:
        f.write("{not json\n")
    settled(store)
    out = tmp_path / "report"
    text, err = report(store, out, capsys)
    assert "skipped 1 unreadable line" in text and "warning:" in err
    again, again_err = report(store, out, capsys)
    assert again.startswith("up to date")
    assert again.splitlines()[1:] == text.splitlines()[1:] and again_err == err


def test_the_key_follows_the_libraries(monkeypatch):
    import importlib.metadata

    key = reuse.code_key()
    real = importlib.metadata.version
    for name in reuse.LIBRARIES:
        monkeypatch.setattr(importlib.metadata, "version", lambda n, _name=name: "0.0.1" if n == _name else real(n))
        reuse.code_key.cache_clear()
        assert reuse.code_key() != key, name
    monkeypatch.undo()
    reuse.code_key.cache_clear()
    assert reuse.code_key() == key
    assert {"orjson", "matplotlib", "numpy", "scipy"} <= set(reuse.LIBRARIES)


def test_the_key_follows_the_code(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "a.py").write_text("x = 1\n")
    key = reuse.code_key(package)
    reuse.code_key.cache_clear()
    assert reuse.code_key(package) == key
    (package / "sub" / "a.py").write_text("x = 2\n")
    reuse.code_key.cache_clear()
    assert reuse.code_key(package) != key
    (package / "sub" / "a.py").write_text("x = 1\n")
    (package / "sub" / "__pycache__").mkdir()
    (package / "sub" / "__pycache__" / "a.py").write_text("compiled\n")
    reuse.code_key.cache_clear()
    assert reuse.code_key(package) == key  # what Python caches is not source
    reuse.code_key.cache_clear()


def test_up_to_date_is_only_a_whole_report_of_the_key(store, tmp_path, capsys):
    out = tmp_path / "report"
    report(store, out, capsys)
    manifest = json.loads((out / ".cnnbench-report.json").read_text())
    key = manifest["inputs"]
    assert reuse.up_to_date(out, key) is not None
    assert reuse.up_to_date(out, "0" * 64) is None
    name = manifest["files"][0]
    for broken in ({"said": None}, {"outputs": {}}, {"said": {**manifest["said"], "tables": "12"}},
                   {"said": {**manifest["said"], "more": [1]}}, {"files": manifest["files"][:-1]},
                   {"outputs": {**manifest["outputs"], name: None}}, {"outputs": {**manifest["outputs"], name: "x"}}):
        (out / ".cnnbench-report.json").write_text(json.dumps({**manifest, **broken}))
        assert reuse.up_to_date(out, key) is None, broken
    (out / ".cnnbench-report.json").write_text(json.dumps({**manifest, "outputs": {**manifest["outputs"], name: None}}))
    (out / name).unlink()  # no digest for a file that is not there: not "unchanged"
    assert reuse.up_to_date(out, key) is None


def test_checking_that_a_report_is_up_to_date_loads_no_table_or_rendering_code():
    import subprocess
    import sys

    code = ("import sys; import cnnbench.report.reuse, cnnbench.report.folder; "
            "print(sorted(m for m in sys.modules if m.startswith(('cnnbench.report.', 'numpy', 'matplotlib'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(loaded) == ["cnnbench.report.folder", "cnnbench.report.reuse"]


def test_a_report_written_meanwhile_by_another_command_is_not_marked_with_this_key(store, tmp_path, capsys):
    """Two reports into one folder: the one that finishes writing first must not label the
    other's files with its own key (remember() checks the digests it wrote are still there)."""
    out = tmp_path / "report"
    report(store, out, capsys)
    manifest = json.loads((out / ".cnnbench-report.json").read_text())
    mine = dict(manifest["outputs"])
    said = reuse.up_to_date(out, manifest["inputs"])
    assert said is not None
    theirs = dict(mine, **{"summary.md": "0" * 64})
    (out / ".cnnbench-report.json").write_text(json.dumps({**manifest, "outputs": theirs, "inputs": None}))
    assert not reuse.remember(out, "mine", said, mine)
    assert json.loads((out / ".cnnbench-report.json").read_text())["inputs"] is None
    assert reuse.remember(out, "mine", said, theirs)


def test_a_manifest_nested_too_deeply_is_no_manifest(store, tmp_path, capsys):
    out = tmp_path / "report"
    report(store, out, capsys)
    (out / ".cnnbench-report.json").write_text("[" * 100_000)
    assert main(["report", str(store), "-o", str(out)]) == 2  # one line, no traceback: its files are not the report's
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "was not written by a report" in err


def test_a_manifest_that_cannot_be_written_at_the_end_leaves_the_report_made(store, tmp_path, capsys, monkeypatch):
    from cnnbench.report import folder

    out = tmp_path / "report"
    real = folder.write_text

    def full_at_the_key(path, text):
        if path.name == folder.MANIFEST and '"inputs"' in text:
            raise OSError(28, "No space left on device")
        return real(path, text)

    monkeypatch.setattr(folder, "write_text", full_at_the_key)
    assert report(store, out, capsys)[0].startswith("wrote ")
    monkeypatch.undo()
    assert report(store, out, capsys)[0].startswith("wrote ")  # not kept as up to date: made again
    assert report(store, out, capsys)[0].startswith("up to date")
