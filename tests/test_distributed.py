"""Data-parallel training on 2 CPU workers (Gloo): correctness of each strategy, the launcher,
torchrun across two "nodes" on this machine, faults, scaling and sweeps.

Correctness: after k steps, ``replicated`` and ``parameter_server`` leave the same weights on
every worker, equal (to float32 summation-order tolerance) to one process training on the
two workers' batches concatenated; ``fsdp`` matches too; ``independent`` leaves different
weights on each worker.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import torch

from cnnbench.config import ConfigError, RunConfig
from cnnbench.config.model_options import DATA_FORMATS, PRECISIONS
from cnnbench.engine.multidevice.launch import WorkerFailed, launch_workers
from cnnbench.engine.step import classification_loss, make_optimizer
from cnnbench.models import get_model_spec
from tests import distributed_workers as dw

pytestmark = pytest.mark.slow

STEPS = 3
ATOL, RTOL = 2e-5, 1e-4  # float32: a sum over workers then a division vs a mean over one batch


def _fields(config: RunConfig) -> dict:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def _config(**changes) -> RunConfig:
    base = dict(model="test_nobn", device="cpu", batch_size=4, image_size=16, num_devices=2, oversubscribe=True,
                optimizer="momentum", learning_rate=0.1, weight_decay=0.01, num_warmup_batches=0,
                timeout=30.0)
    base.update(changes)
    return RunConfig(**base)


def _launch(config: RunConfig) -> dict[int, dict]:
    return launch_workers(dw.train_and_report, (_fields(config), STEPS), nprocs=2, timeout_s=60)


def _reference(config: RunConfig, images: torch.Tensor, labels: torch.Tensor) -> list[torch.Tensor]:
    """One process, the same seed and optimizer, on the concatenated batch."""
    resolved = config.replace(num_devices=1).with_derived_defaults()
    torch.manual_seed(config.seed)
    model = get_model_spec(config.model).build(num_classes=1000, image_size=config.image_size)
    opt = make_optimizer(resolved, model.parameters())
    for _ in range(STEPS):
        opt.zero_grad()
        classification_loss(model(images), labels).backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


def _close(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.allclose(x, y, atol=ATOL, rtol=RTOL) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize(("variable_update", "changes"), [
    ("replicated", {}),
    ("replicated", {"bucket_cap_mb": 0.001, "gradient_as_bucket_view": True}),
    ("replicated", {"static_graph": True}),
    ("parameter_server", {}),
    ("fsdp", {}),
])
def test_strategy_equals_one_process_on_the_concatenated_batch(variable_update, changes):
    config = _config(variable_update=variable_update, **changes)
    out = _launch(config)
    assert out[0]["strategy"] == variable_update
    w0, w1 = out[0]["weights"], out[1]["weights"]
    assert _close(w0, w1)  # every worker holds the same weights
    assert not torch.equal(out[0]["images"], out[1]["images"])  # ... from different data
    images = torch.cat([out[0]["images"], out[1]["images"]])
    labels = torch.cat([out[0]["labels"], out[1]["labels"]])
    assert _close(w0, _reference(config, images, labels))


@pytest.mark.parametrize("compression", ["fp16", "bf16"])
def test_compressed_gradients_keep_workers_equal_and_near_the_exact_step(compression):
    config = _config(variable_update="replicated", gradient_compression=compression)
    out = _launch(config)
    w0, w1 = out[0]["weights"], out[1]["weights"]
    assert all(torch.equal(a, b) for a, b in zip(w0, w1, strict=True))  # one all-reduced gradient
    images = torch.cat([out[0]["images"], out[1]["images"]])
    labels = torch.cat([out[0]["labels"], out[1]["labels"]])
    exact = _reference(config, images, labels)
    assert all(torch.allclose(a, b, atol=1e-2, rtol=2e-2) for a, b in zip(w0, exact, strict=True))
    plain = _launch(_config(variable_update="replicated"))[0]["weights"]  # the same run, uncompressed
    assert not all(torch.equal(a, b) for a, b in zip(w0, plain, strict=True))  # the hook really cast them


def test_powersgd_over_gloo_is_refused_before_any_work():
    from cnnbench.engine.resolve import preflight

    with pytest.raises(ConfigError, match="^--gradient-compression: powersgd needs --all-reduce nccl"):
        preflight(_config(variable_update="replicated", gradient_compression="powersgd", num_warmup_batches=3))


FSDP_COMBINATIONS = [
    {"precision": precision, "data_format": layout, "forward_only": forward_only}
    for precision in PRECISIONS for layout in DATA_FORMATS for forward_only in (False, True)
]


def _accepted(changes: dict) -> bool:
    """Whether ``cnnbench run`` would start workers for this configuration (every check it makes
    before any work)."""
    from cnnbench.engine.resolve import preflight

    try:
        preflight(_config(variable_update="fsdp", model="trivial", **changes))
    except ConfigError:
        return False
    return True


def test_every_fsdp_combination_the_config_accepts_runs_on_two_workers():
    """Each precision x layout x forward-only either is refused before any work or runs on 2
    workers; NHWC is refused (FSDP2 cannot shard channels_last weights)."""
    accepted = [c for c in FSDP_COMBINATIONS if _accepted(c)]
    assert {c["precision"] for c in accepted} == {"fp32", "amp_bf16", "bf16"}  # what a CPU can run
    configs = [_fields(_config(variable_update="fsdp", model="trivial", num_batches=2, **c)) for c in accepted]
    out = launch_workers(dw.run_each, (configs,), nprocs=2, timeout_s=240)[0]
    assert [(r["status"], r["error"]) for r in out] == [("ok", None)] * len(accepted), out


def test_independent_workers_end_with_different_weights():
    out = _launch(_config(variable_update="independent"))
    assert not _close(out[0]["weights"], out[1]["weights"])
    # each equals one process on its own batch
    assert _close(out[0]["weights"], _reference(_config(), out[0]["images"], out[0]["labels"]))


def test_breaking_the_exchange_is_caught():
    """The check above fails when gradients are not averaged (an independent run)."""
    config = _config(variable_update="independent")
    out = _launch(config)
    images = torch.cat([out[0]["images"], out[1]["images"]])
    labels = torch.cat([out[0]["labels"], out[1]["labels"]])
    assert not _close(out[0]["weights"], _reference(config, images, labels))


def test_progress_lines_show_the_records_step_times_and_cost_no_worker_a_step():
    """A progress line reports the per-step maxima over workers (what the record keeps), and
    rank 0's printing (here 0.5 s) lands in no worker's step, although the next step of every
    worker ends with a collective that would wait for rank 0."""
    out = launch_workers(dw.progress_on_two_workers, (6, 1.0), nprocs=2, timeout_s=120)
    r0, r1 = out[0]["step_times"], out[1]["step_times"]
    slowest = [max(a, b) for a, b in zip(r0, r1, strict=True)]
    assert [len(s) for s in out[0]["shown"]] == [1, 2, 4, 6]
    assert out[0]["shown"][-1] == slowest
    assert max(r0 + r1) < 0.5, (r0, r1)  # counted, the 1 s print would be in rank 1's next steps (>= 1 s)


def test_a_slow_compile_or_profile_export_on_one_worker_trips_no_timeout(tmp_path):
    """Rank 1 compiles for twice --timeout in its first warm-up step (rank 0 waits in that
    step's all-reduce), then rank 0 writes its trace for as long (rank 1 waits for it): both
    phases allow more than --timeout, so the run ends ok."""
    config = _config(num_devices=2, timeout=3.0, compile=True, profile_steps=1, num_warmup_batches=2,
                     num_batches=2, results_dir=str(tmp_path))
    record = launch_workers(dw.uneven_run, (_fields(config), 6.0), nprocs=2, timeout_s=120)[0]
    assert record["status"] == "ok", record["error"]
    assert record["metrics"]["profile_trace"]


def test_a_worker_too_slow_for_a_phase_is_the_one_named(tmp_path):
    """Rank 0 gives up waiting for rank 1 at the end of a phase: the failure names rank 1."""
    with pytest.raises(WorkerFailed) as info:
        launch_workers(dw.never_finishes_a_phase, (str(tmp_path), 2.0), nprocs=2, timeout_s=120,
                       notes_dir=str(tmp_path))
    assert info.value.rank == 1
    assert "rank 1 did not finish profiling within 2 s" in str(info.value)


def test_the_worker_the_others_timed_out_waiting_for_is_named():
    """Rank 0 timed out in a collective while rank 1 was still compiling (the agent then
    stopped it, so it reported nothing): rank 1 is the one named."""
    from types import SimpleNamespace

    from cnnbench.engine.multidevice.launch import _root_cause

    timed_out = SimpleNamespace(exitcode=1, timestamp=time.time(), signal_name=lambda: "",
                                message="RuntimeError: Timed out waiting 3000ms for recv operation to complete")
    rank, cause = _root_cause({0: timed_out}, None, nprocs=2)
    assert rank == 1 and cause.startswith("too slow: the other workers gave up waiting for it")



# --------------------------------------------------------------------------- the command


def _cnnbench(*args: str, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cnnbench", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def _records(folder: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines()]


TINY = ["run", "--model", "trivial", "--device", "cpu", "--batch-size", "4", "--num-batches", "6",
        "--num-warmup-batches", "2", "--display-every", "3", "--machine-label", "box",
        "--oversubscribe"]  # 2 CPU workers, also where fewer cores are usable


def test_run_on_two_devices_records_global_and_per_device_figures(tmp_path):
    proc = _cnnbench(*TINY, "--num-devices", "2", "--results-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Batch size:  8 global" in out and "4 per device" in out
    cores = len(os.sched_getaffinity(0))
    assert f"Threads:     {max(1, cores // 2)} per worker ({cores} cores split among 2 workers on this node)" in out
    assert out.count("total images/sec:") == 1  # rank 0 alone prints
    (rec,) = _records(tmp_path)
    cfg, m = rec["config"], rec["metrics"]
    assert (cfg["num_devices"], cfg["num_nodes"], cfg["variable_update"], cfg["all_reduce"]) == (
        2, 1, "replicated", "gloo")
    assert len(m["per_device_images_per_sec"]) == 2 and len(m["step_times_s"]) == 6
    assert m["total_images_per_sec"] == pytest.approx(8 * 6 / m["wall_time_s"])
    assert m["communication_time_s"] > 0 and 0 < m["communication_fraction"] < 1
    assert rec["environment"]["torch_num_threads"] == max(1, len(os.sched_getaffinity(0)) // 2)
    # memory as multi-device studies count it: the largest worker's peak, and the total over workers
    assert m["peak_host_memory_total_bytes"] > m["peak_host_memory_bytes"] > 0


def test_bad_options_are_one_line_before_any_worker_starts(tmp_path):
    proc = _cnnbench(*TINY, "--num-devices", "2", "--variable-update", "independent", "--all-reduce", "gloo",
                     "--results-dir", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--all-reduce" in proc.stderr
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torchrun_two_nodes_on_this_machine(tmp_path):
    """Two torchrun agents, one worker each, as two nodes with the rendezvous on 127.0.0.1."""
    port = _free_port()
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
                "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "cnnbench-test",
                "--max-restarts", "0", "--log-dir", str(tmp_path / "torchrun-logs"), "-m", "cnnbench"]
    args = [*TINY, "--results-dir", str(tmp_path)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    nodes = [subprocess.Popen(torchrun + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    outs = [n.communicate(timeout=240) for n in nodes]
    assert [n.returncode for n in nodes] == [0, 0], outs
    (rec,) = _records(tmp_path)  # rank 0 alone writes
    assert (rec["config"]["num_devices"], rec["config"]["num_nodes"]) == (2, 2)
    assert len(rec["metrics"]["per_device_images_per_sec"]) == 2
    assert sum("total images/sec" in out for out, _ in outs) == 1


# --------------------------------------------------------------------------- faults


def _run_until_workers(argv: list[str], tmp_path: Path, n: int = 2) -> tuple[subprocess.Popen, list[psutil.Process]]:
    """Start ``cnnbench run`` and wait, by polling with a generous deadline (a loaded machine
    starts workers slowly), until its ``n`` workers exist, each has its output in place, and
    rank 0 has begun the timed steps."""
    proc = subprocess.Popen([sys.executable, "-m", "cnnbench", *argv, "--results-dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines: list[str] = []
    assert proc.stdout is not None
    stream = proc.stdout
    threading.Thread(target=lambda: lines.extend(iter(stream.readline, "")), daemon=True).start()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        workers = [c for c in psutil.Process(proc.pid).children(recursive=True)
                   if "spawn_main" in " ".join(_cmdline(c))]
        timed = any(line.startswith("Step\tImg/sec") for line in list(lines))
        if len(workers) >= n and timed and sorted(map(_local_rank, workers)) == list(range(n)):
            return proc, workers
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"the workers did not reach their timed steps (exit {proc.poll()}): {lines[-5:]}")


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []


def _gone(workers: list[psutil.Process], within_s: float = 60) -> bool:
    """Whether every worker has ended (polled up to ``within_s``)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers):
            return True
        time.sleep(0.1)
    return False


def _local_rank(worker: psutil.Process) -> int | None:
    """The launcher sends the output of local rank r > 0 to .../<r>/stdout.log."""
    try:
        target = os.readlink(f"/proc/{worker.pid}/fd/1")
    except OSError:
        return None
    parts = Path(target).parts
    return int(parts[-2]) if target.endswith("stdout.log") and parts[-2].isdigit() else 0


LONG = [*TINY[:TINY.index("--num-batches")], "--num-batches", "100000", "--num-warmup-batches", "1",
        "--display-every", "1000", "--machine-label", "box", "--num-devices", "2", "--oversubscribe"]


def test_a_killed_worker_stops_the_run_with_one_line_and_an_error_record(tmp_path):
    proc, workers = _run_until_workers(LONG, tmp_path)
    rank1 = next(w for w in workers if _local_rank(w) == 1)
    rank1.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    assert "worker rank 1 failed: killed by SIGKILL" in err and err.strip().count("\n") == 0, err
    assert _gone(workers)
    (rec,) = _records(tmp_path)
    assert rec["status"] == "error" and "rank 1" in rec["error"] and rec["config"]["num_devices"] == 2


def test_ctrl_c_stops_every_worker(tmp_path):
    proc, workers = _run_until_workers(LONG, tmp_path)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert _gone(workers)


@pytest.mark.parametrize(("death", "status", "words"), [
    ("raise", "error", "ValueError: boom on rank 1"),
    ("oom", "oom", "out of memory"),
])
def test_an_exception_or_oom_in_one_worker_is_recorded(tmp_path, death, status, words):
    from cnnbench.engine.multidevice.workers import run_on_workers

    config = _config(model="test_dies", num_batches=20, results_dir=str(tmp_path))
    os.environ["CNNBENCH_TEST_DEATH"] = death
    try:
        from cnnbench.engine.multidevice import worker as worker_module

        original = worker_module.launched_worker
        worker_module.launched_worker = dw.run_engine_worker  # the same entry, test models registered
        try:
            record = run_on_workers(config)
        finally:
            worker_module.launched_worker = original
    finally:
        del os.environ["CNNBENCH_TEST_DEATH"]
    assert record.status == status and "worker rank 1 failed" in record.error and words in record.error


def test_worker_failed_names_rank_and_cause():
    with pytest.raises(WorkerFailed, match=r"worker rank 1 failed: ValueError: boom on rank 1"):
        os.environ["CNNBENCH_TEST_DEATH"] = "raise"
        try:
            launch_workers(dw.run_engine_worker, (_fields(_config(model="test_dies", num_batches=20)), {}, False),
                           nprocs=2, timeout_s=60)
        finally:
            del os.environ["CNNBENCH_TEST_DEATH"]


def test_under_torchrun_rank_0_records_a_failed_rank_while_blocked_in_a_collective(tmp_path):
    """As under NCCL, rank 0 cannot raise (here: rank 1 keeps its process, so rank 0's
    all-reduce waits): its watch thread writes the one record, naming rank 1."""
    results, seen = tmp_path / "results", tmp_path / "seen"
    config = _config(model="test_dies", num_batches=20, results_dir=str(results), timeout=300.0)
    with pytest.raises(WorkerFailed):
        launch_workers(dw.torchrun_rank1_fails_while_rank0_waits, (_fields(config), str(seen)), nprocs=2,
                       timeout_s=120)
    assert seen.exists()  # the record was there while rank 0 waited in the collective
    (rec,) = _records(results)
    assert rec["status"] == "error" and rec["error"] == "worker rank 1 failed: ValueError: boom on rank 1"


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize(("changes", "flag"), [
    ({"variable_update": "independent", "all_reduce": "gloo"}, "--all-reduce"),
    ({"all_reduce": "nccl", "device": "cpu"}, "--all-reduce"),
    ({"local_parameter_device": "cpu"}, "--local-parameter-device"),
    ({"variable_update": "fsdp", "bucket_cap_mb": 10.0}, "--bucket-cap-mb"),
    ({"variable_update": "fsdp", "data_format": "NHWC"}, "--data-format"),
    ({"variable_update": "parameter_server", "static_graph": True}, "--static-graph"),
    ({"forward_only": True, "gradient_compression": "fp16"}, "--gradient-compression"),
    ({"forward_only": True, "variable_update": "parameter_server"}, "--variable-update"),
    ({"gradient_compression": "powersgd", "num_warmup_batches": 1}, "--num-warmup-batches"),
    ({"gpu_indices": "0,x"}, "--gpu-indices"),
    ({"gpu_indices": "0,0"}, "--gpu-indices"),
    ({"gpu_indices": "0", "device": "cpu"}, "--gpu-indices"),
    ({"gpu_indices": "0,1", "num_devices": 3}, "--gpu-indices"),
    ({"timeout": 0.0}, "--timeout"),
    ({"num_devices": 0}, "--num-devices"),
])
def test_contradictory_parallel_options(changes, flag):
    with pytest.raises(ConfigError) as info:
        RunConfig(**changes)
    assert str(info.value).startswith(flag + ":")


def test_num_nodes_is_torchruns_to_set():
    from cnnbench.engine.resolve import resolve

    with pytest.raises(ConfigError, match="--num-nodes: is set by torchrun"):
        resolve(RunConfig(model="trivial", device="cpu", num_nodes=2))


# --------------------------------------------------------------------------- scaling, sweeps, reports


def test_scaling_runs_each_device_count_in_its_own_workers_and_prints_speedup(tmp_path, monkeypatch, capsys):
    """Every point runs in worker processes: the engine never runs in the launching process
    (here it would raise), so that it keeps no device memory of the 1-device point."""
    from cnnbench.cli import main
    from cnnbench.engine import benchmark

    def not_here(*args, **kwargs):
        raise AssertionError("a scaling point ran in the launching process")

    monkeypatch.setattr(benchmark, "resolve_and_measure", not_here)
    code = main([*TINY, "--num-devices", "2", "--scaling", "--quiet", "--results-dir", str(tmp_path)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "Scaling" in out.out and "speedup" in out.out and "efficiency" in out.out
    recs = _records(tmp_path)
    assert [r["config"]["num_devices"] for r in recs] == [1, 2]
    assert all(r["status"] == "ok" for r in recs)


def test_scaling_counts():
    from cnnbench.cli.run_cmd import scaling_counts

    assert scaling_counts(2) == [1, 2]
    assert scaling_counts(8) == [1, 2, 4, 8]
    assert scaling_counts(6) == [1, 2, 4, 6]


def test_a_sweep_over_devices_and_strategies_fills_scaling_and_effect_tables(tmp_path):
    from cnnbench.report import ReportOptions, build_report
    from cnnbench.results.store import read_records

    suite = tmp_path / "scaling.yaml"
    suite.write_text("name: scaling\n"
                     "base: {model: trivial, device: cpu, batch_size: 4, num_batches: 4, num_warmup_batches: 1, "
                     "oversubscribe: true}\n"
                     "matrix: {num_devices: [1, 2], variable_update: [replicated, independent]}\n")
    results = tmp_path / "results"
    proc = _cnnbench("sweep", str(suite), "--results-dir", str(results), "--plain", "--machine-label", "box")
    assert proc.returncode == 0, proc.stderr
    records, problems = read_records(results)
    assert problems == [] and len(records) == 4 and all(r["status"] == "ok" for r in records)
    assert {(r["config"]["num_devices"], r["config"]["variable_update"]) for r in records} == {
        (1, "replicated"), (2, "replicated"), (1, "independent"), (2, "independent")}
    report = build_report(records, ReportOptions(max_plots=0))
    kinds = {t.kind for t in report.tables}
    titles = {t.title for t in report.tables}
    assert "scaling" in kinds
    assert "Scaling: syn-replicated-Ncpus" in titles and "Scaling: syn-independent-Ncpus" in titles
    assert any(t.title.startswith("Speedup from replicated vs independent") or "replicated vs independent" in t.title
               for t in report.tables if t.kind == "effect")


def test_every_strategy_runs_pure_bf16_with_normalisation_kept_in_fp32():
    """bf16 keeps batch norm's weights fp32, so a model's parameters hold two dtypes: every
    exchange (DDP's buckets, the parameter server's flat buffers, FSDP's units) must take both."""
    configs = [_fields(_config(variable_update=vu, model="trivial", precision="bf16", num_batches=2))
               for vu in ("replicated", "parameter_server", "fsdp", "independent")]
    out = launch_workers(dw.run_each, (configs,), nprocs=2, timeout_s=240)[0]
    assert [(r["status"], r["error"]) for r in out] == [("ok", None)] * len(configs), out
