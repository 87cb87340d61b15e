"""Real data across processes: two Gloo workers share out a data set, bad images are summed
over workers, and --host-cpus restricts every process of a run."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cnnbench.config import RunConfig
from cnnbench.data.generate import make_data_set
from cnnbench.engine.multidevice.launch import launch_workers
from tests import distributed_workers as dw

pytestmark = pytest.mark.slow


def _cnnbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cnnbench", *args], capture_output=True, text=True, timeout=300)


def _records(folder: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines()]


def test_two_gloo_workers_share_out_the_data_set(tmp_path):
    """fsdp (its forward communicates) on 9 validation images: 5 + 4, the same number of steps."""
    root = tmp_path / "set"
    make_data_set("imagefolder", root, num_classes=3, images_per_class=8, val_images_per_class=3,
                  image_size=(40, 30))
    config = RunConfig(model="trivial", device="cpu", data_dir=str(root), num_epochs=2, batch_size=4,
                       num_devices=2, oversubscribe=True, variable_update="fsdp", num_workers=1, timeout=60.0)
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    out = launch_workers(dw.train_epochs_recording_shards, (fields,), nprocs=2, timeout_s=60)
    for epoch in (0, 1):
        shards = [[i for e, idx in out[r]["train"] if e == epoch for i in idx] for r in (0, 1)]
        assert len(shards[0]) == len(shards[1]) == 12  # 24 images: 3 full batches of 4 each
        assert sorted(shards[0] + shards[1]) == list(range(24))  # different images, together the whole split
    assert out[0]["train"][0][1] != [i for e, idx in out[0]["train"] if e == 1 for i in idx][:4]  # reshuffled
    evals = [[i for idx in out[r]["eval"] for i in idx] for r in (0, 1)]
    assert sorted(evals[0] + evals[1]) == sorted(list(range(9)) * 2)  # the whole validation split once per epoch
    assert [len(out[r]["eval"]) for r in (0, 1)] == [4, 4]  # 2 steps per epoch each (rank 1's last is empty)
    record = out[0]["record"]
    assert record["status"] == "ok" and record["config"]["num_devices"] == 2
    epochs = record["metrics"]["epochs"]
    assert [e["test_images"] for e in epochs] == [9, 9]
    assert [round(e["images_per_sec"] * e["time_s"]) for e in epochs] == [24, 24]


def test_skipped_images_are_summed_over_workers_and_loader_processes(tmp_path):
    folder = tmp_path / "folder"
    make_data_set("imagefolder", folder, num_classes=2, images_per_class=8, val_images_per_class=2,
                  image_size=(32, 32))
    for path in sorted(folder.glob("train/*/00000.jpg")):  # 2 bad files, 1 per class
        path.write_bytes(b"broken")
    results = tmp_path / "results"
    proc = _cnnbench("run", "--model", "trivial", "--device", "cpu", "--data-dir", str(folder), "--num-epochs", "1",
                     "--batch-size", "4", "--num-devices", "2", "--oversubscribe", "--num-workers", "2",
                     "--skip-bad-images", "--results-dir", str(results), "--quiet")
    assert proc.returncode == 0, proc.stderr
    (record,) = _records(results)
    assert record["metrics"]["bad_images"] == 2  # 2 files, whichever worker read them
    assert record["config"]["data_name"] == "imagefolder" and record["config"]["num_devices"] == 2
    proc = _cnnbench("run", "--model", "trivial", "--device", "cpu", "--data-dir", str(folder), "--num-batches", "4",
                     "--batch-size", "4", "--num-devices", "2", "--oversubscribe", "--num-workers", "0",
                     "--results-dir", str(results), "--quiet")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "bad image " in proc.stderr and "--skip-bad-images" in proc.stderr and "worker rank" in proc.stderr
    assert _records(results)[-1]["status"] == "error"


PROBE = """
import json, os, torch
from torch.utils.data import DataLoader, Dataset
from cnnbench.machine.affinity import restrict_host_cpus
restrict_host_cpus(1)

class Cores(Dataset):
    def __len__(self):
        return 2
    def __getitem__(self, i):
        return len(os.sched_getaffinity(0))

print(json.dumps({"main": len(os.sched_getaffinity(0)), "threads": torch.get_num_threads(),
                  "loader": [int(x) for x in DataLoader(Cores(), batch_size=None, num_workers=2)]}))
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores to restrict a run to 1")
def test_host_cpus_restricts_every_process_and_is_recorded(tmp_path):
    probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert json.loads(probe.stdout) == {"main": 1, "threads": 1, "loader": [1, 1]}, probe.stderr
    folder = tmp_path / "set"
    make_data_set("imagefolder", folder, num_classes=2, images_per_class=4, val_images_per_class=1)
    proc = _cnnbench("data", "--data-dir", str(folder), "--image-size", "32", "--batch-size", "2", "--num-batches",
                     "3", "--num-warmup-batches", "1", "--host-cpus", "1", "--results-dir", str(tmp_path / "r"),
                     "--quiet")
    assert proc.returncode == 0, proc.stderr
    (record,) = _records(tmp_path / "r")
    assert record["config"]["host_cpus"] == 1 and record["environment"]["available_cpus"] == 1
    assert record["environment"]["cpu_threads"] == os.cpu_count()  # the machine's own count stays
    assert record["metrics"]["images_per_sec_per_core"] == pytest.approx(record["metrics"]["total_images_per_sec"])
    too_many = _cnnbench("data", "--data-dir", str(folder), "--host-cpus", "4096", "--results-dir", str(tmp_path / "r"))
    assert too_many.returncode == 2 and too_many.stderr.count("\n") == 1
    assert "--host-cpus: asks for 4096 cores, but this process may use" in too_many.stderr
