"""Numbers in range: integer options have sane bounds, declared with the field, checked
before any work wherever the value comes from (flags, suite files); and no C++ stack
trace ever lands in a record's ``error``."""

from __future__ import annotations

import pytest

from cnnbench.cli import main
from cnnbench.config import ConfigError, RunConfig
from cnnbench.results.error_text import error_text
from cnnbench.results.store import read_records
from cnnbench.sweep.runner import SweepOptions, run_suite
from cnnbench.sweep.suite import SuiteError, parse_suite
from tests.sweep_fakes import NATIVE_ERROR, native_error_worker, probe

OUT_OF_RANGE = [
    (["--batch-size", "99999999999999"], "--batch-size: must be <= 65536"),
    (["--batch-size", "0"], "--batch-size: must be >= 1"),
    (["--image-size", "100000"], "--image-size: must be <= 8192"),
    (["--seed=-1"], "--seed: must be >= 0"),
    (["--seed", str(2**64)], "--seed: must be <= 4294967295"),
    (["--num-batches", str(10**12)], "--num-batches: must be <= 100000000"),
    (["--num-warmup-batches", str(10**12)], "--num-warmup-batches: must be <= 100000000"),
    (["--display-every", str(10**12)], "--display-every: must be <= 100000000"),
    (["--synthetic-location", "loader", "--num-workers", "100000"], "--num-workers: must be <= 256"),
    (["--num-devices", "100000"], "--num-devices: must be <= 4096"),
]


@pytest.fixture
def no_work(monkeypatch):
    import cnnbench.engine

    def forbidden(*args, **kwargs):
        raise AssertionError("the run started")

    monkeypatch.setattr(cnnbench.engine, "run_and_append", forbidden)


@pytest.mark.parametrize("flags,message", OUT_OF_RANGE, ids=[m.split(":")[0] for _, m in OUT_OF_RANGE])
def test_integer_options_out_of_range_fail_before_work(tmp_path, capsys, no_work, flags, message):
    assert main(["run", "--model", "trivial", "--device", "cpu", "--results-dir", str(tmp_path / "r"), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_the_bounds_are_declared_with_the_fields():
    import dataclasses

    from cnnbench.config.data_bench import DataBenchConfig
    from cnnbench.config.options import field_bounds
    from cnnbench.config.run_config import config_fields

    for fields in (config_fields(), dataclasses.fields(DataBenchConfig)):
        bounded = {f.name for f in fields if f.type in ("int | None", "int") and field_bounds(f) != (None, None)}
        ints = {f.name for f in fields if f.type in ("int | None", "int")}
        assert ints == bounded  # every integer option has its range
    with pytest.raises(ConfigError, match="--batch-size: must be <= 65536"):
        RunConfig(batch_size=65537)


def test_suites_get_the_same_bounds():
    with pytest.raises(SuiteError, match=r"case seed=-3: --seed: must be >= 0"):
        parse_suite({"name": "s", "base": {"model": "trivial"}, "matrix": {"seed": [1, -3]}})


def test_error_text_keeps_no_cpp_stack():
    text = error_text(RuntimeError(NATIVE_ERROR))
    assert text == "RuntimeError: CUDA error: an illegal memory access was encountered"
    captured = ("RuntimeError: boom\nC++ CapturedTraceback:\n#4 std::_Function_handler<...> from ??:0\n"
                "#5 c10::x from ??:0\n")
    assert error_text(RuntimeError(captured)) == "RuntimeError: RuntimeError: boom"


def test_a_sweep_case_that_raises_a_torch_error_records_no_cpp_stack(tmp_path):
    suite = parse_suite({"name": "s", "base": {"model": "trivial", "device": "cpu"}, "matrix": {"batch_size": [2]}})
    result = run_suite(suite, SweepOptions(results_dir=tmp_path / "r"), worker=native_error_worker, probe=probe)
    assert [r.status for r in result.results] == ["error"]
    (rec,), _ = read_records(tmp_path / "r")
    error = rec["error"]
    assert error.startswith("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert "frame #" not in error and "Exception raised from" not in error
    assert "Traceback" in error  # the Python part of the case's output is kept
