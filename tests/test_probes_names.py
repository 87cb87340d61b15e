"""Probes of names and YAML from files someone else wrote (issue 41, items 2, 5 and 8).

* the name family (item 2): a study's or suite's ``name:`` is a name, not a path: one with a
  separator, ``.``/``..``, a NUL or a control character, or over 255 bytes is refused in one line
  before any work, and writes nothing anywhere; a machine label whose results file would be named
  over 255 bytes is refused in one line (:func:`~cnnbench.results.store.machine_file_name`);
* the alias family (item 8): a suite or study file with a YAML alias is refused in one line, at
  once and in little memory (a nine-level bomb of ten aliases each stands for a billion values),
  and every value an error quotes is cut short;
* a study's ``layout.observations`` (item 5) is checked when the study is read, before any run,
  and named as the file names it.
"""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from cnnbench.cli import main
from cnnbench.results.files import NAME_MAX, name_problem
from cnnbench.results.store import MachineLabelError, append_record, machine_file_name
from cnnbench.study import StudyError, load_study
from cnnbench.sweep.suite import SuiteError, load_suite, parse_suite
from cnnbench.words import QUOTE_LIMIT, quoted
from tests.report_fixtures import record

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_work(monkeypatch):
    """Any benchmark run or sweep start-up fails the test: the checks must come first."""
    import cnnbench.engine
    import cnnbench.sweep.runner

    def forbidden(*args, **kwargs):
        raise AssertionError("work started before the study file was checked")

    monkeypatch.setattr(cnnbench.engine, "run_and_append", forbidden)
    monkeypatch.setattr(cnnbench.sweep.runner, "preload_engine", forbidden)


def _study_text(name_line: str, layout: str = "{rows: model, columns: batch_size}") -> str:
    return (f"{name_line}\n"
            "base: {device: cpu, model: trivial, image_size: 32, num_batches: 2, num_warmup_batches: 1}\n"
            "matrix: {batch_size: [4, 8]}\n"
            f"layout: {layout}\n"
            "smoke:\n"
            "  matrix: {batch_size: [2]}\n")


def _files_under(folder: Path) -> set[Path]:
    return {p.relative_to(folder) for p in folder.rglob("*")}


# --- item 2: a name from a file is a name, not a path ---------------------------------------------------------------

BAD_NAMES = {  # as written in YAML -> what the one line says
    "parent path": ("'../../../../x'", "path separator (/)"),
    "absolute": ("/tmp/x", "path separator (/)"),
    "inner slash": ("a/b", "path separator (/)"),
    "backslash": ("'a\\b'", "path separator (\\)"),
    "dot dot": ("'..'", "is .., a folder's name"),
    "dot": ("'.'", "is ., a folder's name"),
    "NUL": ('"a\\0b"', "NUL"),
    "newline": ('"a\\nb"', "control character (U+000A)"),
    "escape": ('"a\\eb"', "control character (U+001B)"),
    "line separator": ('"a\\Lb"', "control character (U+2028)"),
    "256 bytes": ("x" * 256, "256 bytes long; at most 255"),
    "256 bytes of 128 characters": ("é" * 128, "256 bytes long; at most 255"),
}


@pytest.mark.parametrize("name", ["quick-cpu", "my study 2", "Ümlaut_ß", "x" * 255, "é" * 127, "a..b", ".hidden"])
def test_a_name_that_is_a_name_passes(name):
    assert name_problem(name) is None
    assert parse_suite({"name": name, "matrix": {"batch_size": [1]}}).name == name


@pytest.mark.parametrize("case", list(BAD_NAMES))
def test_a_bad_name_is_refused_by_the_one_check(case, tmp_path):
    written, said = BAD_NAMES[case]
    suite = tmp_path / "s.yaml"
    suite.write_text(f"name: {written}\nmatrix: {{batch_size: [1]}}\n", encoding="utf-8")
    with pytest.raises(SuiteError) as info:
        load_suite(suite)
    line = str(info.value)
    assert line.startswith(f"{suite}: name: ") and said in line, line
    assert len(line.splitlines()) == 1 and len(line) < 400


@pytest.mark.parametrize("case", ["parent path", "NUL", "newline", "256 bytes"])
@pytest.mark.parametrize("command", ["study", "study --smoke", "sweep"])
def test_a_bad_name_is_one_line_before_any_work_and_writes_nothing(case, command, tmp_path, monkeypatch, capsys,
                                                                     no_work):
    written, said = BAD_NAMES[case]
    work = tmp_path / "a" / "b" / "c" / "d"  # ../../../../x would land in tmp_path
    work.mkdir(parents=True)
    study = work / "mine.yaml"
    study.write_text(_study_text(f"name: {written}"), encoding="utf-8")
    monkeypatch.chdir(work)
    words = command.split()
    args = [*words, str(study), "--plain"] + (["--dry-run"] if words[0] == "sweep" else ["--no-plots"])
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "name: " in err and said in err, err
    assert "-smoke" not in err  # the name as the file writes it
    assert _files_under(tmp_path) == {Path("a"), Path("a/b"), Path("a/b/c"), Path("a/b/c/d"),
                                      Path("a/b/c/d/mine.yaml")}


def test_a_name_taken_from_the_file_name_is_checked_too(tmp_path):
    study = tmp_path / "bad\tname.yaml"
    study.write_text(_study_text("description: no name"))
    with pytest.raises(SuiteError, match=r"name \(none given: the file's name\): 'bad\\tname' holds a control"):
        load_study(str(study))
    with pytest.raises(StudyError, match=r"name: 'bad\\tname' holds a control"):  # the smoke size checks it first
        load_study(str(study), smoke=True)


def test_the_smoke_name_is_refused_when_its_suffix_makes_it_too_long(tmp_path):
    study = tmp_path / "long.yaml"
    study.write_text(_study_text("name: " + "x" * 250))
    assert load_study(str(study)).name == "x" * 250
    with pytest.raises(SuiteError, match="is 256 bytes long; at most 255"):
        load_study(str(study), smoke=True)


def test_a_name_that_is_not_text_is_refused_at_the_smoke_size_too(tmp_path):
    study = tmp_path / "list.yaml"
    study.write_text(_study_text("name: [a, b]"))
    for smoke in (False, True):
        with pytest.raises(SuiteError, match="name: must be non-empty text"):
            load_study(str(study), smoke=smoke)


def test_a_machine_label_whose_file_name_is_over_255_bytes_is_one_line(tmp_path):
    assert machine_file_name("x" * (NAME_MAX - len(".jsonl"))) == "x" * 249 + ".jsonl"
    label = "x" * 250
    with pytest.raises(MachineLabelError) as info:
        machine_file_name(label)
    assert isinstance(info.value, OSError) and info.value.errno == errno.ENAMETOOLONG
    line = str(info.value)
    assert line.startswith("machine label 'xxx") and "256 bytes long; at most 255" in line
    assert len(line.splitlines()) == 1 and len(line) < 300
    assert machine_file_name("a/../b\n c") == "a_.._b_c.jsonl"  # every other label is a safe name already
    assert machine_file_name("../x") == "x.jsonl" and machine_file_name(".hidden") == "hidden.jsonl"  # not hidden
    assert machine_file_name("..") == machine_file_name("/") == "unknown.jsonl"


def test_a_record_whose_machine_label_no_file_can_take_is_not_written(tmp_path):
    rec = record()
    rec["environment"]["machine"] = "m" * 300
    with pytest.raises(MachineLabelError):
        append_record(tmp_path / "r", rec)
    assert not (tmp_path / "r").exists()


# --- item 8: YAML aliases --------------------------------------------------------------------------------------------


def _bomb(levels: int) -> str:
    """A flow list whose last item stands for ``10 ** levels`` values, each level ten aliases of the last."""
    items = ["&a0 [" + ", ".join(["lol"] * 10) + "]"]
    items += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "[" + ", ".join(items) + "]"


def _limited() -> None:  # a refusal that expanded the bomb would need gigabytes: stop it at 2 GiB
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.parametrize("where", ["base.data_dir", "layout.rows"])
def test_a_nine_level_alias_bomb_is_one_short_line_at_once(where, tmp_path):
    if where == "base.data_dir":
        text = _study_text("name: bomb").replace("base: {device: cpu,", f"base: {{data_dir: {_bomb(9)}, device: cpu,")
    else:
        text = _study_text("name: bomb", layout=f"{{rows: {_bomb(9)}, columns: batch_size}}")
    study = tmp_path / "bomb.yaml"
    study.write_text(text)
    for args in (["sweep", str(study), "--dry-run"], ["study", str(study), "--smoke", "--plain"]):
        done = subprocess.run([sys.executable, "-m", "cnnbench", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300, preexec_fn=_limited,
                              env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
        err = done.stderr.strip()
        assert done.returncode == 2, err[-2000:]
        assert len(err.splitlines()) == 1 and len(err) < 400, err[:2000]
        assert "bomb.yaml: line " in err and "a YAML alias (*a0)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.yaml"]


@pytest.mark.parametrize("text", [
    "name: s\nbase: &shared {device: cpu}\nmatrix: {batch_size: [1]}\ninclude: [*shared]\n",
    "name: s\nx: &b {device: cpu}\nbase: {<<: *b}\nmatrix: {batch_size: [1]}\n",
    "name: s\nmatrix: {batch_size: &sizes [1, 2], num_batches: *sizes}\n",
])
def test_every_alias_is_refused_where_it_is_met(text, tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(text)
    with pytest.raises(SuiteError, match=r"s\.yaml: line \d+, column \d+: a YAML alias \(\*\w+\); suite and study "
                       "files take no aliases"):
        load_suite(suite)


def test_an_anchor_without_an_alias_is_harmless(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nbase: &shared {device: cpu}\nmatrix: {batch_size: [1]}\n")
    assert load_suite(suite).base == {"device": "cpu"}


def test_no_shipped_suite_or_study_uses_an_alias():
    from cnnbench.study import shipped_studies

    assert len(shipped_studies()) == 4  # each read through the loader that refuses aliases
    for suite in sorted((ROOT / "suites").glob("*.yaml")):
        load_suite(suite)


BIG_VALUES = {  # a value no alias makes big: written out, long; every quote of it is cut
    "a long list": ("base: {device: cpu, data_dir: [" + ", ".join(["x"] * 2_000) + "]}\n"
                    "matrix: {batch_size: [1]}\n", "base.data_dir: values are single numbers"),
    "a long text": ("base: {device: " + "x" * 1_000_000 + "}\nmatrix: {batch_size: [1]}\n", "--device: invalid choice"),
    "a long key": ("base:\n  ? " + "k" * 1_000_000 + "\n  : 1\nmatrix: {batch_size: [1]}\n",
                   "unknown configuration field"),
    "a long top-level key": ("? " + "k" * 1_000_000 + "\n: 1\nmatrix: {batch_size: [1]}\n", "unknown key"),
    "a long matrix mapping": ("matrix: {batch_size: {" + ", ".join(f"v{i}: 1" for i in range(2_000)) + "}}\n",
                              "matrix.batch_size: must be a non-empty list of values"),
    "a key written twice": ("base:\n  ? " + "k" * 100_000 + "\n  : 1\n  ? " + "k" * 100_000 + "\n  : 2\n",
                            "written twice (lines"),
    "a number of 5,000 digits": ("repeats: " + "1" * 5000 + "\nmatrix: {batch_size: [1]}\n",
                                 "a value YAML cannot read"),
    "a thirteenth month": ("base: {data_dir: 2024-13-01}\nmatrix: {batch_size: [1]}\n", "a value YAML cannot read"),
    "a long timeout": ("timeout_s: [" + "1, " * 2_000 + "1]\nmatrix: {batch_size: [1]}\n", "timeout_s: must be"),
    "a long slurm value": ("executor: {partition: [" + "p, " * 2_000 + "p]}\nmatrix: {batch_size: [1]}\n",
                           "executor.partition: must be non-empty text"),
}


@pytest.mark.parametrize("case", list(BIG_VALUES))
def test_every_value_an_error_quotes_is_cut_short(case, tmp_path):
    text, said = BIG_VALUES[case]
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\n" + text)
    with pytest.raises(SuiteError) as info:
        load_suite(suite)
    line = str(info.value)
    assert said in line and len(line.splitlines()) == 1 and len(line) < 600, line[:2000]


@pytest.mark.parametrize("layout", [
    "{rows: [" + ", ".join(["1"] * 2_000) + "], columns: batch_size}",
    "\n  rows: model\n  columns: batch_size\n  baselines:\n    ? " + "b" * 100_000 + "\n    : [1]",
    "{rows: " + "r" * 100_000 + ", columns: batch_size}",
    "\n  rows: model\n  columns: batch_size\n  ? " + "z" * 100_000 + "\n  : 1",
])
def test_a_study_quotes_its_layout_values_cut_short(layout, tmp_path):
    study = tmp_path / "s.yaml"
    study.write_text(_study_text("name: s", layout=layout))
    with pytest.raises(StudyError) as info:
        load_study(str(study))
    line = str(info.value)
    assert "layout." in line and len(line.splitlines()) == 1 and len(line) < 600, line[:2000]


def test_quoted_is_short_for_any_value():
    nest: list = ["x"] * 10
    for _ in range(5):
        nest = [nest] * 10  # a million leaves, shared: quoted never walks them all
    for value in (nest, "y" * 10**6, 10**4000, {str(i): i for i in range(10**5)}, "a\nb\x00"):
        text = quoted(value)
        assert len(text) <= QUOTE_LIMIT and "\n" not in text
    assert quoted("../x") == "'../x'" and quoted(3) == "3"


# --- item 5: a study's layout.observations is checked when the study is read ------------------------------------


def test_a_bogus_observation_kind_is_refused_when_the_study_is_read(tmp_path):
    study = tmp_path / "s.yaml"
    study.write_text(_study_text("name: s", layout="{rows: model, columns: batch_size, "
                                                   "observations: [bogus, fastest]}"))
    for smoke in (False, True):
        with pytest.raises(StudyError) as info:
            load_study(str(study), smoke=smoke)
        line = str(info.value)
        assert line == (f"{study}: layout.observations: unknown kind 'bogus'; choose from scaling, effects, fastest, "
                        "implementations, history, failures")
    smoke_only = tmp_path / "smoke.yaml"
    smoke_only.write_text(_study_text("name: s") + "  layout: {observations: 'effects, nonsense'}\n")
    assert load_study(str(smoke_only)).layout.observations is None
    with pytest.raises(StudyError, match="layout.observations: unknown kind 'nonsense'"):
        load_study(str(smoke_only), smoke=True)
    good = tmp_path / "good.yaml"
    good.write_text(_study_text("name: s", layout="{rows: model, columns: batch_size, "
                                                 "observations: [effects, fastest]}"))
    assert load_study(str(good)).layout.observations == ("effects", "fastest")


def test_a_bogus_observation_kind_stops_the_study_before_any_run(tmp_path, monkeypatch, capsys, no_work):
    study = tmp_path / "s.yaml"
    study.write_text(_study_text("name: s", layout="{rows: model, columns: batch_size, observations: [bogus]}"))
    monkeypatch.chdir(tmp_path)
    assert main(["study", str(study), "--smoke", "--plain", "--no-plots"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "layout.observations: unknown kind 'bogus'" in err
    assert "--observations" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]  # no results, no report, no data set
