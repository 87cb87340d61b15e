"""Report field names are checked: ``--columns``, ``--effect``, ``--baseline`` and ``--where``
with a dotted name that no record has get one line with the nearest names, as bare names do."""

from __future__ import annotations

import pytest

from cnnbench.cli import main
from tests.report_fixtures import record, scaling_records, write_store


@pytest.fixture
def store(tmp_path):
    recs = scaling_records() + [record("resnet50", "m-fast", 300.0, precision="amp_fp16")]
    return write_store(tmp_path / "results", recs)


@pytest.mark.parametrize("option,value,nearest", [
    ("--columns", "config.bogus", None),
    ("--columns", "config.precison", "config.precision"),
    ("--effect", "metrics.bogus", None),
    ("--effect", "environment.gpu_modle", "environment.gpu_model"),
    ("--baseline", "config.precison=fp32", "config.precision"),
    ("--where", "config.bogus=1", None),
    ("--where", "config.modell!=vgg16", "config.model"),
    ("--where", "metrics.total_images_per_sek=1", "metrics.total_images_per_sec"),
])
def test_a_dotted_name_no_record_has_is_one_line_with_the_nearest_names(store, tmp_path, capsys, option, value,
                                                                         nearest):
    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), option, value]) == 2
    err = capsys.readouterr().err
    name = value.split("!=")[0].split("=")[0]
    assert f"unknown field {name!r}" in err and len(err.strip().splitlines()) == 1, err
    if nearest:
        assert f"did you mean {nearest}" in err or f"{nearest}," in err or f", {nearest}?" in err, err
    assert not out.exists()  # nothing written


def test_dotted_names_that_exist_still_work(store, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", str(store), "-o", str(out), "--columns", "config.precision", "--where",
                 "config.model=resnet50", "--effect", "config.num_devices", "--no-plots"]) == 0
    assert "| model | batch | fp32 | amp_fp16 |" in (out / "summary.md").read_text()


def test_results_where_names_the_nearest_fields(store, capsys):
    assert main(["results", "list", str(store), "--where", "config.modle=x"]) == 2
    assert "did you mean config.model" in capsys.readouterr().err
