"""Probes of planted symlinks (issue 41, items 1 and 4): a store is shared ground, so anyone who
can write in it can put a symlink, ahead of time, at every name cnnbench will write there (the
claim file's name is a fixed hash; a Slurm job id is predictable).

A link is planted at each such name, pointing at a file or a folder of the user's outside the
store, and the write is made: the outside file and folder are never touched. Either the write
is refused in one line (the link is left where it is, as evidence), or, where a file is written
whole to a new file renamed over its name, the link itself is replaced.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pickle
import stat
import threading
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from cnnbench.cli import main
from cnnbench.results import cache, files
from cnnbench.results.store import append_record, read_records
from cnnbench.sweep.claims import CaseClaims
from cnnbench.sweep.runner import SweepOptions, run_suite
from cnnbench.sweep.slurm import multinode
from cnnbench.sweep.slurm.job import write_note
from cnnbench.sweep.slurm.ledger import JobEntry, append_jobs
from cnnbench.sweep.suite import parse_suite
from tests.report_fixtures import record, write_store
from tests.sweep_fakes import fake_worker, probe

OWN = "the user's own\n"
JOB = "7_0"
DEADLINE_S = 120  # far beyond what any write here takes; only a claim retrying without end reaches it


def within_deadline(write: Callable[[Path], None], root: Path) -> None:
    """``write(root)`` in a thread of its own: what it raises is raised here, and a write that
    never ends (a claim retrying forever) is a failure, not a stuck suite."""
    raised: list[BaseException] = []

    def target() -> None:
        try:
            write(root)
        except BaseException as exc:
            raised.append(exc)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(DEADLINE_S)
    if worker.is_alive():
        pytest.fail(f"the write did not end within {DEADLINE_S} s")
    if raised:
        raise raised[0]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder of the user's, outside every store: a file and an empty folder a link may point at."""
    mine = tmp_path / "outside"
    (mine / "dir").mkdir(parents=True)
    (mine / "victim").write_text(OWN)
    return mine


def untouched(mine: Path) -> None:
    assert (mine / "victim").read_text() == OWN
    assert sorted(p.name for p in mine.iterdir()) == ["dir", "victim"]
    assert list((mine / "dir").iterdir()) == []


def suite_of(batch: int = 2):
    return parse_suite({"name": "c", "base": {"model": "trivial", "device": "cpu"}, "matrix": {"batch_size": [batch]}})


def _claim(root: Path) -> None:
    with CaseClaims(root).try_claim("k-box"):
        pass


def _append(root: Path) -> None:
    append_record(root, record(machine="box"))


def _cache(root: Path) -> None:
    cache.MIN_BYTES = 0  # restored by the test
    read_records(root)


def _jobs(root: Path) -> None:
    append_jobs(root, [JobEntry(suite="s", key="k", label="box", job_id=JOB)])


def _note(root: Path) -> None:
    write_note(str(root), {"job_id": JOB}, {"machine": "box"})


def _submitit(root: Path) -> None:
    from cnnbench.sweep.slurm.ledger import check_submitit_folder

    check_submitit_folder(root)


def _nodes(root: Path) -> None:
    suite = suite_of()
    multinode.run_nodes(suite, str(root), {"job_id": JOB}, {})


def _traces(root: Path) -> None:
    from cnnbench.sweep.case import _keep_traces

    case_results = root.parent / "case-results"
    (case_results / "traces").mkdir(parents=True, exist_ok=True)
    (case_results / "traces" / "run.pt.trace.json").write_text("{}")
    _keep_traces(case_results, root)


def _plot(root: Path) -> None:
    from cnnbench.report.render.plots import save

    save(types.SimpleNamespace(path="plots/fig.svg"), root, b"<svg/>")


def _dataset(root: Path) -> None:
    from cnnbench.data.generate import make_data_set

    make_data_set("cifar10", root / "data" / "set", images_per_class=1, val_images_per_class=1, inside=root)


# name planted (relative to the store) -> (what the link points at, the write, refused or replaced)
PLANTED: dict[str, tuple[str, Callable[[Path], None], str]] = {
    ".claims/k-box.lock": ("victim", _claim, "refused"),
    ".claims": ("dir", _claim, "refused"),
    "box.jsonl": ("victim", _append, "refused"),
    ".box.jsonl.cache": ("victim", _cache, "left"),  # caches live in the user's cache folder now
    ".slurm": ("dir", _jobs, "refused"),
    ".slurm/jobs.jsonl": ("victim", _jobs, "refused"),
    ".slurm/started": ("dir", _note, "refused"),
    f".slurm/started/{JOB}.json": ("victim", _note, "replaced"),
    ".slurm/submitit": ("dir", _submitit, "refused"),
    ".slurm/submitit/8": ("dir", _submitit, "refused"),  # a job id to come
    ".slurm/nodes": ("dir", _nodes, "refused"),
    f".slurm/nodes/{JOB}": ("dir", _nodes, "refused"),
    f".slurm/nodes/{JOB}/rendezvous": ("victim", _nodes, "replaced"),
    f".slurm/nodes/{JOB}/case.0.pickle": ("victim", _nodes, "replaced"),
    "traces": ("dir", _traces, "kept out"),  # a sweep keeps going without the trace (a warning)
    "traces/run.pt.trace.json": ("victim", _traces, "replaced"),
    "plots": ("dir", _plot, "refused"),
    "plots/fig.svg": ("victim", _plot, "replaced"),
    "data": ("dir", _dataset, "refused"),  # a study's data sets
    "data/set": ("dir", _dataset, "refused"),
}


@pytest.mark.parametrize("name", list(PLANTED))
def test_no_write_goes_through_a_link_planted_in_a_store(tmp_path, outside, monkeypatch, name):
    target, write, expect = PLANTED[name]
    monkeypatch.setattr(cache, "MIN_BYTES", cache.MIN_BYTES)
    monkeypatch.setattr(multinode.subprocess, "run", lambda *a, **k: types.SimpleNamespace(returncode=0, stdout=""))
    monkeypatch.delenv("SLURM_PROCID", raising=False)
    root = tmp_path / "store"
    write_store(root, [record(machine="box")] if name == ".box.jsonl.cache" else [])
    link = root / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside / target)
    if expect == "refused":
        with pytest.raises(files.FileProblem) as caught:
            within_deadline(write, root)
        message = str(caught.value)
        assert "\n" not in message and "symlink" in message, message
        assert link.is_symlink()  # left as evidence, not removed
    else:
        within_deadline(write, root)
        if expect == "replaced":
            assert not link.is_symlink() and link.is_file()
        if expect == "left":  # never written: the link stays as it was
            assert link.is_symlink()
    untouched(outside)


def test_a_fresh_file_never_takes_a_name_a_link_holds(tmp_path, outside, monkeypatch):
    """The temporary file of a whole-file write is made with ``O_EXCL``: a link planted at the
    name it draws (guessed, or drawn again) is passed over, never written through."""
    names = iter(["planted", "planted", "free"])
    monkeypatch.setattr(files.secrets, "token_hex", lambda n: next(names))
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / ".out.planted.tmp").symlink_to(outside / "victim")
    files.write_replacing(folder / "out", b"new\n")
    assert (folder / "out").read_bytes() == b"new\n"
    assert (folder / ".out.planted.tmp").is_symlink()
    untouched(outside)


def test_an_append_that_cannot_read_its_file_reads_nothing_by_its_name(tmp_path, monkeypatch):
    """An append checks that the file ends a line through the descriptor it writes by; where that
    cannot read (a file others let us only write), nothing is opened by the file's name (a link
    may have been put there since): the record starts a new line, after an empty one at worst,
    which every reader skips."""
    import cnnbench.results.store as store_module

    root = tmp_path / "store"
    first, second = (dict(record(machine="box"), run_id=name) for name in ("first", "second"))
    append_record(root, first)
    path = root / "box.jsonl"
    with path.open("ab") as f:
        f.write(b'{"torn')  # a crash's partial line
    monkeypatch.setattr(store_module.os, "pread", lambda *a: (_ for _ in ()).throw(OSError(errno.EBADF, "write-only")))
    monkeypatch.setattr(files, "open_regular", lambda *a: pytest.fail("opened by its name"))
    append_record(root, second)
    monkeypatch.undo()
    assert path.read_bytes().endswith(b'{"torn\n' + store_module.record_line(second))
    records, problems = read_records(root)
    assert [r["run_id"] for r in records] == ["first", "second"] and len(problems) == 1  # the torn line


def test_a_link_planted_at_a_claim_stops_the_sweep_before_the_case(tmp_path, outside):
    """The sweep's claim file (a fixed hash of the case): never truncated and written through a
    link, and the link is not deleted."""
    suite = suite_of()
    results = tmp_path / "r"
    (results / ".claims").mkdir(parents=True)
    claim = results / ".claims" / f"{suite.cases[0].key}-testbox.lock"
    claim.symlink_to(outside / "victim")
    with pytest.raises(files.FileProblem, match="symlink"):
        within_deadline(lambda where: run_suite(suite, SweepOptions(results_dir=where), worker=fake_worker,
                                                probe=probe), results)
    assert claim.is_symlink()
    assert read_records(results)[0] == []  # the case did not run
    untouched(outside)


@pytest.mark.parametrize("planted", ["hard link", "folder"])
def test_a_hard_link_or_a_folder_planted_at_a_claim_stops_the_sweep_in_one_line(tmp_path, outside, capsys, planted):
    """A hard link at the claim's name was truncated and written (the user's file outside the store
    then held the claim's note), and a folder there ended in an IsADirectoryError traceback."""
    suite = tmp_path / "s.yaml"
    suite.write_text("name: c\nbase: {model: trivial, device: cpu}\nmatrix: {batch_size: [2]}\n")
    results = tmp_path / "r"
    (results / ".claims").mkdir(parents=True)
    claim = results / ".claims" / f"{suite_of().cases[0].key}-testbox.lock"
    if planted == "hard link":
        os.link(outside / "victim", claim)
    else:
        claim.mkdir()
    code = main(["sweep", str(suite), "--results-dir", str(results), "--machine-label", "testbox", "--plain"])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and claim.name in lines[0], err
    assert ("2 names (hard links)" if planted == "hard link" else "not a regular file") in lines[0], err
    assert claim.exists() and read_records(results)[0] == []  # left as evidence; the case did not run
    untouched(outside)


@pytest.mark.parametrize("flag", ["--status", "--cancel"])
def test_sweep_status_never_reads_a_job_ledger_through_a_linked_slurm_folder(tmp_path, outside, capsys, flag):
    """``--status`` read ``.slurm/jobs.jsonl`` through a link out of the store, asked Slurm about the
    jobs it listed and recorded their failures in the store; ``--cancel`` would have cancelled them."""
    suite = tmp_path / "s.yaml"
    suite.write_text("name: tiny\nbase: {model: trivial, device: cpu}\nmatrix: {batch_size: [2]}\n")
    key = parse_suite({"name": "tiny", "base": {"model": "trivial", "device": "cpu"},
                       "matrix": {"batch_size": [2]}}).cases[0].key
    (outside / "dir" / "jobs.jsonl").write_text(json.dumps(
        {"suite": "tiny", "key": key, "label": None, "job_id": "777_0", "attempt": 1,
         "submitted_at": "2026-12-05T08:00:00+00:00", "folder": ""}) + "\n")
    results = tmp_path / "r"
    results.mkdir()
    (results / ".slurm").symlink_to(outside / "dir")
    code = main(["sweep", str(suite), "--results-dir", str(results), flag])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and ".slurm" in lines[0] and "symlink" in lines[0], err
    assert sorted(p.name for p in results.iterdir()) == [".slurm"]  # nothing recorded


@pytest.mark.parametrize("name", [".claims", ".slurm", ".slurm/submitit", "traces"])
def test_sweep_refuses_a_store_whose_own_folder_is_a_link_before_any_work(tmp_path, outside, capsys, name):
    suite = tmp_path / "s.yaml"
    profile = ", profile_steps: 1" if name == "traces" else ""  # traces: checked where a case keeps some
    suite.write_text(f"name: s\nbase: {{model: trivial, device: cpu{profile}}}\nmatrix: {{batch_size: [2]}}\n")
    results = tmp_path / "r"
    (results / name).parent.mkdir(parents=True, exist_ok=True)
    (results / name).symlink_to(outside / "dir")
    code = main(["sweep", str(suite), "--results-dir", str(results), "--machine-label", "box"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and "--results-dir" in lines[0] and name.split("/")[-1] in lines[0], err
    assert "symlink" in lines[0] and "outside" in lines[0], err
    untouched(outside)


def test_run_refuses_a_traces_folder_that_is_a_link(tmp_path, outside, capsys):
    results = tmp_path / "r"
    results.mkdir()
    (results / "traces").symlink_to(outside / "dir")
    code = main(["run", "--model", "trivial", "--device", "cpu", "--num-batches", "1", "--profile-steps", "1",
                 "--results-dir", str(results)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "traces" in err and "symlink" in err, err
    untouched(outside)


# --- item 4: results export -o ----------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return write_store(tmp_path / "store", [record()])


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_export_replaces_a_link_at_its_output_instead_of_writing_through_it(tmp_path, store, outside, capsys, fmt):
    out = tmp_path / f"runs.{fmt}"
    out.symlink_to(outside / "victim")
    assert main(["results", "export", "--format", fmt, str(store), "-o", str(out)]) == 0, capsys.readouterr().err
    assert not out.is_symlink() and "resnet50" in out.read_text()
    untouched(outside)


def test_an_export_that_fails_part_way_leaves_the_earlier_file(tmp_path, store, capsys, monkeypatch):
    from cnnbench.results import export

    out = tmp_path / "runs.csv"
    assert main(["results", "export", "--format", "csv", str(store), "-o", str(out)]) == 0
    before = out.read_bytes()

    def broken(table, stream):
        stream.write("half a table,")
        stream.flush()
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(export, "_write_csv", broken)
    capsys.readouterr()
    code = main(["results", "export", "--format", "csv", str(store), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.csv", "store"]  # no temporary file left


def test_the_node_files_are_written_whole(tmp_path, monkeypatch):
    """The multi-node files made through the planted-link-proof writer still hold what they did."""
    monkeypatch.setattr(multinode.subprocess, "run", lambda *a, **k: types.SimpleNamespace(returncode=0, stdout=""))
    monkeypatch.delenv("SLURM_PROCID", raising=False)
    root = tmp_path / "store"
    assert multinode.run_nodes(suite_of(), str(root), {"job_id": JOB}, {"x": 1})["exit_code"] == 0
    folder = root / ".slurm" / "nodes" / JOB
    assert ":" in (folder / "rendezvous").read_text()
    config, extra = pickle.loads((folder / "case.0.pickle").read_bytes())
    assert extra["x"] == 1 and config.results_dir == str(root)
    assert not [p for p in os.listdir(folder) if p.endswith(".tmp")]


# --- a study's data set, written in the store's data/ (issue 41, item 1) ----------------------


def test_a_study_refuses_a_data_folder_that_is_a_link_before_any_work(tmp_path, outside, capsys):
    results = tmp_path / "r"
    results.mkdir()
    (results / "data").symlink_to(outside / "dir")
    code = main(["study", "train-to-accuracy", "--smoke", "--results-dir", str(results)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and "--results-dir" in lines[0] and "data" in lines[0] and "symlink" in lines[0], err
    untouched(outside)


@pytest.mark.parametrize("name", ["data", "data/cifar10-images_per_class1-val_images_per_class1"])
def test_a_studys_data_set_is_never_made_through_a_link(tmp_path, outside, name):
    from cnnbench.study import StudyError
    from cnnbench.study.recipe import DataSetRecipe
    from cnnbench.study.run import make_dataset

    store = tmp_path / "store"
    (store / name).parent.mkdir(parents=True, exist_ok=True)
    (store / name).symlink_to(outside / "dir")
    recipe = DataSetRecipe("cifar10", {"images_per_class": 1, "val_images_per_class": 1})
    with pytest.raises(StudyError) as caught:
        make_dataset(recipe, store / "data")
    assert "\n" not in str(caught.value) and "symlink" in str(caught.value)
    assert (store / name).is_symlink()
    untouched(outside)


def _plant_file(folder: Path, mine: Path) -> None:
    (folder / "data_batch_1").symlink_to(mine / "victim")


def _swap_folder(folder: Path, mine: Path) -> None:
    folder.rename(folder.with_name("moved"))
    folder.symlink_to(mine / "dir")


@pytest.mark.parametrize("plant", [_plant_file, _swap_folder])
def test_the_partial_data_set_is_written_through_no_link(tmp_path, outside, monkeypatch, plant):
    """The hidden folder a data set is written in lies in a shared folder (the store's data/):
    a link put at a file's name in it, or in its own place once made, is never written through,
    and nothing is published."""
    from cnnbench.data import generate

    made = generate._make_partial

    def then_plant(parent: int, root: Path) -> tuple[str, int]:
        name, fd = made(parent, root)
        plant(root.parent / name, outside)
        return name, fd

    monkeypatch.setattr(generate, "_make_partial", then_plant)
    store = tmp_path / "store"
    (store / "data").mkdir(parents=True)  # as a study makes it first
    with pytest.raises(OSError):
        generate.make_data_set("cifar10", store / "data" / "set", images_per_class=1, val_images_per_class=1,
                               inside=store)
    assert not os.path.lexists(store / "data" / "set")
    left = [p.name for p in (store / "data").iterdir() if not p.is_symlink() and p.name != "moved"]
    assert left == []  # the partial folder is removed (a link put in its place is not followed)
    untouched(outside)


def test_a_data_set_that_fails_part_way_leaves_no_partial_folder(tmp_path, monkeypatch):
    """The partial folder (with folders in it) is removed from the store's data/, which stays."""
    from cnnbench.data import generate

    real, calls = generate.draw_image, []

    def fails_at_the_fifth(*args, **kwargs):
        calls.append(1)
        if len(calls) == 5:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(generate, "draw_image", fails_at_the_fifth)
    store = tmp_path / "store"
    (store / "data").mkdir(parents=True)
    with pytest.raises(OSError, match="No space"):
        generate.make_data_set("imagefolder", store / "data" / "set", num_classes=2, images_per_class=4,
                               inside=store)
    assert list((store / "data").iterdir()) == []


def test_a_generated_data_set_is_readable_as_one_made_by_mkdir(tmp_path):
    from cnnbench.data.generate import make_data_set

    store = tmp_path / "store"
    store.mkdir()
    made = make_data_set("imagefolder", store / "data" / "set", num_classes=2, images_per_class=2, inside=store)
    folder = store / "data" / "set"
    assert oct(folder.stat().st_mode & 0o777) == oct(0o777 & ~_umask())
    assert sorted(p.name for p in (store / "data").iterdir()) == ["set"]  # no partial folder left
    assert made.bytes_written == sum(p.stat().st_size for p in folder.rglob("*.jpg"))


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_an_earlier_reports_file_is_removed_only_inside_the_real_folder(tmp_path):
    """The files an earlier report listed are removed relative to the real ``tables/``: one swapped for a
    link while the report was made is refused, and the file at the link's target stays."""
    from cnnbench.report import output
    from cnnbench.results.files import LinkedFolder

    out, elsewhere = tmp_path / "report", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (elsewhere / "old.csv").write_text("someone else's\n")
    (out / "tables").symlink_to(elsewhere)
    with pytest.raises(LinkedFolder):
        output._remove(out, "tables/old.csv")
    assert (elsewhere / "old.csv").read_text() == "someone else's\n"
    (out / "tables").unlink()
    (out / "tables").mkdir()
    (out / "tables" / "old.csv").write_text("the report's own\n")
    output._remove(out, "tables/old.csv")
    output._remove(out, "tables/gone.csv")  # already gone: nothing to do
    assert not (out / "tables" / "old.csv").exists()


# --- a study's data set: its clean-up, errors and folders (issue 41, item 1) ------------------


def test_a_fifo_put_in_the_partial_folders_place_never_hangs_the_clean_up(tmp_path, monkeypatch):
    """Our partial folder renamed away and a FIFO put at its name: the data set is refused in one
    line, the clean-up never opens the name (an open of a FIFO blocks), and the FIFO stays."""
    from cnnbench.data import generate

    made, fifos = generate._make_partial, []

    def then_fifo(parent: int, root: Path) -> tuple[str, int]:
        name, fd = made(parent, root)
        (root.parent / name).rename(root.parent / "moved")
        os.mkfifo(root.parent / name)
        fifos.append(root.parent / name)
        return name, fd

    monkeypatch.setattr(generate, "_make_partial", then_fifo)
    store = tmp_path / "store"
    (store / "data").mkdir(parents=True)
    try:
        with pytest.raises(files.FileProblem) as caught:
            within_deadline(lambda root: generate.make_data_set(
                "cifar10", root, images_per_class=1, val_images_per_class=1, inside=store), store / "data" / "set")
    finally:
        for fifo in fifos:  # a reader stuck in open() (the bug) let go
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert "\n" not in str(caught.value) and "replaced" in str(caught.value)
    assert stat.S_ISFIFO(os.lstat(fifos[0]).st_mode)  # someone else's: left
    assert not os.path.lexists(store / "data" / "set")
    assert list((store / "data" / "moved").iterdir()) == []  # ours, emptied through its descriptor


def test_a_data_set_replaced_as_it_is_published_is_refused(tmp_path, monkeypatch):
    from cnnbench.data import generate

    real = os.replace

    def then_swap(src, dst, **kwargs):
        real(src, dst, **kwargs)
        os.rename(dst, "gone", src_dir_fd=kwargs["dst_dir_fd"], dst_dir_fd=kwargs["dst_dir_fd"])
        os.mkdir(dst, dir_fd=kwargs["dst_dir_fd"])

    monkeypatch.setattr(generate.os, "replace", then_swap)
    store = tmp_path / "store"
    with pytest.raises(files.FileProblem) as caught:
        generate.make_data_set("cifar10", store / "data" / "set", images_per_class=1, val_images_per_class=1,
                               inside=store)
    assert "\n" not in str(caught.value) and "replaced" in str(caught.value)


def test_an_error_after_the_data_set_is_published_leaves_it_whole(tmp_path, monkeypatch):
    """Once renamed into place the folder is the data set's: an error after (an interrupt, a failed
    look at it) never empties it."""
    from cnnbench.data import generate

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(generate, "_check_published", interrupted)
    store = tmp_path / "store"
    with pytest.raises(KeyboardInterrupt):
        generate.make_data_set("cifar10", store / "data" / "set", images_per_class=1, val_images_per_class=1,
                               inside=store)
    assert sorted(p.name for p in (store / "data" / "set").iterdir())


def test_a_full_quota_while_a_study_makes_its_data_set_is_one_line(tmp_path, monkeypatch, capsys):
    from cnnbench.data import generate

    def full(*args, **kwargs):
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))

    monkeypatch.setattr(generate, "_write", full)
    results = tmp_path / "r"
    code = main(["study", "train-to-accuracy", "--smoke", "--results-dir", str(results), "-o",
                 str(tmp_path / "out"), "--plain"])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and "make_dataset" in lines[0] and "data" in lines[0], err


def test_a_study_store_named_with_a_tilde_keeps_its_data_set_there(tmp_path, monkeypatch):
    """A results folder given as ``~/r`` (quoted: no shell expanded it) is the folder ``./~/r`` the
    study writes in: its data set is made there too, not under $HOME."""
    from cnnbench.study.recipe import DataSetRecipe
    from cnnbench.study.run import make_dataset

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "~" / "r").mkdir(parents=True)
    recipe = DataSetRecipe("cifar10", {"images_per_class": 1, "val_images_per_class": 1})
    folder = make_dataset(recipe, Path("~/r/data"))
    assert folder.parent == tmp_path / "~" / "r" / "data" and (folder / "data_batch_1").is_file()
    assert list(home.iterdir()) == []


def test_a_data_set_in_a_group_shared_data_folder_keeps_its_set_group_id_bit(tmp_path):
    from cnnbench.data.generate import make_data_set

    store = tmp_path / "store"
    (store / "data").mkdir(parents=True)
    os.chmod(store / "data", 0o2775)
    os.mkdir(store / "data" / "sibling")
    make_data_set("cifar10", store / "data" / "set", images_per_class=1, val_images_per_class=1, inside=store)
    sibling = (store / "data" / "sibling").stat().st_mode
    if not sibling & stat.S_ISGID:
        pytest.skip("mkdir gives no set-group-ID bit on this file system (mounted grpid?)")
    assert (store / "data" / "set").stat().st_mode & 0o7777 == sibling & 0o7777


def test_a_failed_data_set_removes_only_its_own_folder_from_a_data_folder_it_made(tmp_path, monkeypatch):
    """data/ made by this call is shared at once: another process's data set made in it meanwhile
    stays when this one fails; a data/ left empty is removed."""
    from cnnbench.data import generate

    store = tmp_path / "store"
    store.mkdir()

    def others_then_full(opts, folder, root):
        (store / "data" / "other").mkdir()
        (store / "data" / "other" / "data_batch_1").write_text("another process's\n")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(generate, "_write", others_then_full)
    with pytest.raises(OSError):
        generate.make_data_set("cifar10", store / "data" / "set", images_per_class=1, val_images_per_class=1,
                               inside=store)
    assert [p.name for p in (store / "data").iterdir()] == ["other"]
    assert (store / "data" / "other" / "data_batch_1").read_text() == "another process's\n"
    monkeypatch.setattr(generate, "_write", lambda *a: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    with pytest.raises(OSError):
        generate.make_data_set("cifar10", store / "new" / "set", images_per_class=1, val_images_per_class=1,
                               inside=store)
    assert not (store / "new").exists()  # made by this call, left empty: removed


def test_a_users_own_traces_link_and_data_file_block_no_command_that_writes_neither(tmp_path, outside, store, capsys):
    """``traces`` and ``data`` are checked by the commands that write there (a run or sweep that keeps
    traces, a study's data set); a store where the user linked ``traces`` to scratch, or keeps a file
    named ``data``, still takes merged and imported runs, and the link's target is left alone."""
    into = tmp_path / "into"
    into.mkdir()
    (into / "traces").symlink_to(outside / "dir")
    (into / "data").write_text("the user's notes\n")
    assert main(["results", "merge", str(store), "--into", str(into)]) == 0, capsys.readouterr().err
    assert (into / "traces").is_symlink() and (into / "data").read_text() == "the user's notes\n"
    assert len(list(into.glob("*.jsonl"))) == 1
    untouched(outside)


def test_a_manifest_names_only_files_a_report_writes():
    """The manifest is a file someone else may have written: a name with a NUL, a control character, a
    line break after it or a folder of its own is no name a report wrote, and is never removed."""
    from cnnbench.report.folder import listed_files

    names = ["summary.md", "tables/t.csv", "plots/p.svg", "tables/a\x00.csv", "tables/b.csv\n", "tables/c\n.csv",
             "tables/../x.csv", "tables/d/e.csv", "../summary.md", "summary.md\n"]
    assert listed_files({"files": names}) == {"summary.md", "tables/t.csv", "plots/p.svg"}


def test_a_run_under_torchrun_refuses_a_traces_link_before_any_work(tmp_path, outside, capsys, monkeypatch):
    """Under torchrun the run never goes through the API's check: the command's own check of ``traces/``
    refuses the link before the model is built (it was found only after warm-up, by rank 0)."""
    from cnnbench.cli import run_cmd
    from cnnbench.distributed import world

    started: list[object] = []
    monkeypatch.setattr(world, "launched_by_torchrun", lambda: True)
    monkeypatch.setattr(run_cmd, "_under_torchrun", lambda *a, **k: started.append(a) or 0)
    results = tmp_path / "r"
    results.mkdir()
    (results / "traces").symlink_to(outside / "dir")
    code = main(["run", "--model", "trivial", "--device", "cpu", "--num-batches", "1", "--profile-steps", "1",
                 "--results-dir", str(results)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "traces" in err and "symlink" in err, err
    assert started == []
    untouched(outside)
    assert main(["run", "--model", "trivial", "--device", "cpu", "--num-batches", "1",
                 "--results-dir", str(results)]) == 0  # no traces kept: the user's link is no concern
    assert len(started) == 1


def test_a_study_whose_cases_keep_traces_checks_traces_before_it_makes_its_data_set(tmp_path, outside, monkeypatch):
    from cnnbench.study import StudyRequest, prepare
    from cnnbench.study import run as study_run

    made: list[object] = []
    monkeypatch.setattr(study_run, "make_dataset", lambda *a, **k: made.append(a))
    study = tmp_path / "st.yaml"
    study.write_text("name: st\nbase: {model: trivial, device: cpu, profile_steps: 1}\nmatrix: {batch_size: [2]}\n"
                     "layout: {rows: [model]}\nsmoke: {base: {batch_size: 1}}\n")
    results = tmp_path / "r"
    results.mkdir()
    (results / "traces").symlink_to(outside / "dir")
    from cnnbench.results.outputs import OutputError

    with pytest.raises(OutputError, match="traces"):
        prepare(StudyRequest(str(study), results_dir=str(results), output=str(tmp_path / "rep")))
    assert made == []
    untouched(outside)
