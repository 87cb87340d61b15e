"""pyproject.toml as setuptools wants it: an SPDX license expression and the license files."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_license_is_an_spdx_expression_with_its_files():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"  # a string (PEP 639), not the deprecated table
    assert project["license-files"] and all((ROOT / f).is_file() for f in project["license-files"])
    assert "Apache License" in (ROOT / project["license-files"][0]).read_text()
    assert any(d.startswith("orjson") for d in project["dependencies"])  # the store's parser
