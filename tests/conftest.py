"""Shared test fixtures. GPU-only tests skip with a visible reason on CPU-only machines."""

from __future__ import annotations

import pytest


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # pragma: no cover
        return False


requires_cuda = pytest.mark.skipif(not _has_cuda(), reason="needs a CUDA GPU (none on this machine)")


@pytest.fixture
def results_dir(tmp_path):
    return tmp_path / "results"


from tests.slurm_cluster import slurm_cluster  # noqa: E402, F401  (the session's local Slurm cluster; issue 23)
