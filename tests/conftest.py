"""Shared test fixtures. GPU-only tests skip with a visible reason on CPU-only machines."""

from __future__ import annotations

import getpass
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # pragma: no cover
        return False


requires_cuda = pytest.mark.skipif(not _has_cuda(), reason="needs a CUDA GPU (none on this machine)")


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_in_the_sessions_folder(tmp_path_factory):
    """The temporary files of this process and of every process a test starts (``TMPDIR``) go to
    a folder of the session's, which pytest removes with its old sessions, not to the machine's
    /tmp: a run a test kills on purpose (SIGKILL) cannot remove its own, nor can torch's elastic
    agent the error files of a worker a test makes fail."""
    folder = tmp_path_factory.mktemp("tmp")
    if len(str(folder)) > SHORT_ENOUGH:  # a socket's path under it would pass the system's limit
        yield folder
        return
    with pytest.MonkeyPatch.context() as patch:
        if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:  # torch.compile's cache stays where torch
            patch.setenv("TORCHINDUCTOR_CACHE_DIR", _inductor_cache())  # keeps it, for later sessions too
        patch.setenv("TMPDIR", str(folder))
        patch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
        yield folder


@pytest.fixture(scope="session", autouse=True)
def _record_caches_in_the_sessions_folder(tmp_path_factory):
    """The parsed-record caches of this process and of every process a test starts
    (``CNNBENCH_CACHE_DIR``) go to a folder of the session's, not to the user's cache folder."""
    folder = tmp_path_factory.mktemp("record-caches")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CNNBENCH_CACHE_DIR", str(folder))
        yield folder


SHORT_ENOUGH = 60
"""Longest temporary folder the tests move to: multiprocessing's ``pymp-*/listener-*`` socket
adds 31 characters, and a socket's path may have 103 (macOS) or 107 (Linux)."""


def _inductor_cache() -> str:
    """torch.compile's default cache folder (``torch._inductor``'s own ``default_cache_dir``)."""
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir

        return default_cache_dir()
    except Exception:  # another torch: its rule, as of torch 2.14
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # a uid without a name (a container's)
            user = f"uid_{os.getuid()}"
        return os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))


@pytest.fixture
def results_dir(tmp_path):
    return tmp_path / "results"


@pytest.fixture(scope="session")
def smoke_study(tmp_path_factory):
    """``cnnbench study NAME --smoke`` (plots drawn), run at most once per session and study, from
    a folder outside the checkout: call it with NAME for the (results, report) folders. Every test
    that reads a smoke study's report can share the run (they take minutes on 2 cores)."""
    done: dict[str, tuple[Path, Path]] = {}

    def run(name: str) -> tuple[Path, Path]:
        if name not in done:
            cwd = tmp_path_factory.mktemp(f"study-{name}")
            proc = subprocess.run([sys.executable, "-m", "cnnbench", "study", name, "--smoke", "--plain"], cwd=cwd,
                                  capture_output=True, text=True, timeout=1800, env={**os.environ, "PYTHONPATH": ""})
            assert proc.returncode == 0, proc.stdout + proc.stderr
            done[name] = cwd / "results" / f"{name}-smoke", cwd / "report" / f"{name}-smoke"
        return done[name]

    return run


from tests.slurm_cluster import slurm_cluster  # noqa: E402, F401  (the session's local Slurm cluster; issue 23)
