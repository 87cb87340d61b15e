"""`cnnbench predict`: the scaling model's invariants, calibration, links, and the command on a
record made here (issue 21 item 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from cnnbench.cli import main
from cnnbench.machine.sysinfo import gpu_facts
from cnnbench.predict import STRATEGIES, Base, PredictOptions, Scenario, predict, predict_scaling
from cnnbench.predict.bases import ASSUMED_TEXT, find_bases, measured_points
from cnnbench.predict.collectives import all_reduce
from cnnbench.predict.links import default_link, link_from_comm, link_from_gpu_name, link_from_topology, machine_link
from tests.fake_nvml import FakeGpu, FakeNvml
from tests.test_comm import comm

POINTS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]


def base(**kw) -> Base:
    """resnet50-like: 25.6 M fp32 gradients, a 0.1 s step split 1:2:0.1."""
    values = dict(model="resnet50", key=(("model", "resnet50"),), batch_size=64, step_time_s=0.31, forward_s=0.1,
                  backward_s=0.2, optimizer_s=0.01, split_source="measured", gradient_bytes=25.6e6 * 4,
                  parameter_bytes=25.6e6 * 4, device="cuda")
    values.update(kw)
    return Base(**values)  # type: ignore[arg-type]


def scenario(kind: str = "nvlink", **kw) -> Scenario:
    return Scenario(default_link(kind), default_link("ib"), **kw)


def nodes(n: int) -> int:
    return 1 if n <= 8 else n // 8


BASES = [base(), base(overlap=False), base(device="cpu", batch_size=16),
         base(input_rate_per_core=50.0, host_cpus=16), base(gradient_bytes=550e6, parameter_bytes=550e6)]
SCENARIOS = [scenario(k) for k in ("nvlink", "pcie", "pcie-host", "loopback")] + [
    Scenario(default_link("pcie"), default_link("ethernet"), host_cpus=4, input_rate_per_core=100.0)]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_one_device_is_compute_or_input_bound_never_communication(strategy):
    for b in BASES:
        for s in SCENARIOS:
            p = predict(b, strategy, 1, 1, s)
            assert p.bound in ("compute", "input") and p.communication_s == 0, (b, s, p)
    starved = predict(base(input_rate_per_core=1.0, host_cpus=1), strategy, 1, 1, scenario())
    assert starved.bound == "input"  # the input pipeline can bound one device


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_efficiency_never_exceeds_100_percent(strategy):
    for b in BASES:
        for s in SCENARIOS:
            one = predict(b, strategy, 1, 1, s).images_per_sec
            for n in POINTS:
                p = predict(b, strategy, n, nodes(n), s)
                assert p.images_per_sec <= n * one * (1 + 1e-9), (b, s, n)
    result = predict_scaling([_record(1, 100.0)], PredictOptions(), _no_lookup)
    assert all(row.efficiency <= 1 + 1e-9 for row in result.rows)


def test_independent_never_slows_down_with_more_devices():
    for b in BASES:
        for s in SCENARIOS:
            rates = [predict(b, "independent", n, nodes(n), s).images_per_sec for n in POINTS]
            assert rates == sorted(rates), (b, s)


@pytest.mark.parametrize("strategy", ["replicated", "parameter_server", "fsdp"])
def test_a_hundredth_of_the_bandwidth_makes_the_large_points_communication_bound(strategy):
    s = scenario("pcie")
    slow = Scenario(s.intra.with_bandwidth(s.intra.bandwidth_gbps / 100, "test"),
                    s.inter.with_bandwidth(s.inter.bandwidth_gbps / 100, "test"))
    for n in (64, 256, 1024):
        assert predict(base(), strategy, n, nodes(n), slow).bound == "communication"
        assert predict(base(), strategy, n, nodes(n), s).images_per_sec > \
            predict(base(), strategy, n, nodes(n), slow).images_per_sec


def test_pcie_without_peer_access_predicts_less_than_with_it_at_8_devices():
    for b in BASES[:2] + BASES[4:]:
        host = predict(b, "replicated", 8, 1, scenario("pcie-host")).images_per_sec
        peer = predict(b, "replicated", 8, 1, scenario("pcie")).images_per_sec
        assert host < peer, b
    # the shared root complex's all-reduce grows with the device count; a ring's barely does
    host_link, ring = default_link("pcie-host"), default_link("pcie")
    assert all_reduce(1e8, 8, host_link) / all_reduce(1e8, 2, host_link) > 6
    assert all_reduce(1e8, 8, ring) / all_reduce(1e8, 2, ring) < 2


def test_overlap_hides_gradient_exchange_behind_the_backward_pass():
    overlapped = predict(base(), "replicated", 8, 1, scenario("pcie"))
    after = predict(base(overlap=False), "replicated", 8, 1, scenario("pcie"))
    assert overlapped.step_time_s < after.step_time_s
    assert after.step_time_s == pytest.approx(0.31 + after.communication_s)


# --- records -> bases, calibration -------------------------------------------------------------------

def _record(n: int, ips: float, *, machine: str = "box", model: str = "resnet50", split: bool = True,
            gpu: str | None = "RTX A6000", source: str | None = None, params: int | None = 25_557_032) -> dict:
    metrics = {"total_images_per_sec": ips}
    if split:
        metrics.update(forward_time_s=0.05, backward_time_s=0.1, optimizer_time_s=0.01)
    rec = {"schema_version": 2, "run_id": f"{machine}{model}{n}{ips}", "status": "ok",
           "config": {"model": model, "batch_size": 64, "num_devices": n, "precision": "fp32",
                      "device": "cuda" if gpu else "cpu", "variable_update": "replicated", "data_name": "synthetic"},
           "environment": {"machine": machine, "gpu_model": gpu, "available_cpus": 32}, "metrics": metrics}
    if params:
        rec["model_cost"] = {"params": params}
    if source:
        rec["source"] = source
    return rec


def test_a_record_whose_model_or_fields_are_no_text_is_named_and_left_out():
    """A hand-made line with a list for its model (which every other reader shows) was a TypeError."""
    odd = _record(1, 400.0, model=["x"])  # type: ignore[arg-type]
    listed = _record(1, 300.0)
    listed["config"]["data_format"] = ["NCHW"]
    bases, skipped = find_bases([odd, listed, _record(1, 400.0)], _no_lookup)
    assert any("config.model is ['x']: a model is named by text" in line for line in skipped), skipped
    assert len(bases) == 2  # the listed data format is a configuration of its own, keyed by its text
    assert measured_points([odd, listed])
    huge = _record(1, 0.0, model=["m"] * 20_000)  # type: ignore[arg-type]
    _, skipped = find_bases([huge], _no_lookup)
    assert len(skipped) == 1 and len(skipped[0]) < 400, len(skipped[0])


def _no_lookup(model: str) -> int | None:
    return None


def test_calibrate_recovers_a_known_bandwidth_from_synthetic_records():
    one = _record(1, 400.0)
    b = find_bases([one], _no_lookup)[0][0]
    truth = Scenario(default_link("pcie").with_bandwidth(7.5, "truth"), default_link("ib"))
    measured = [_record(n, predict(b, "replicated", n, 1, truth).images_per_sec) for n in (2, 4, 8)]
    result = predict_scaling([one, *measured], PredictOptions(calibrate=True, devices=(1, 2, 4, 8)), _no_lookup)
    (fit,) = result.fits["box"]
    assert fit.link.bandwidth_gbps == pytest.approx(7.5, rel=1e-3)
    assert fit.rms < 1e-3 and len(fit.residuals) == 3
    rows = [r for r in result.rows if r.strategy == "replicated"]
    assert all(abs(r.error) < 1e-3 for r in rows if r.measured)  # measured beside predicted, and they agree
    uncalibrated = predict_scaling([one, *measured], PredictOptions(devices=(8,)), _no_lookup)
    assert uncalibrated.fits == {} and uncalibrated.links["box"][0].bandwidth_gbps == 12.0


def test_calibration_leaves_out_a_strategy_whose_declaration_exchanges_nothing():
    """Issue 45: which measured points fit a link is read from each strategy's declared exchange
    (``independent``'s is ``none``: its points say nothing about the links)."""
    one = _record(1, 400.0)
    b = find_bases([one], _no_lookup)[0][0]
    truth = Scenario(default_link("pcie").with_bandwidth(7.5, "truth"), default_link("ib"))
    measured = [_record(n, predict(b, "replicated", n, 1, truth).images_per_sec) for n in (2, 4, 8)]
    alone = [_record(n, 100.0 * n) for n in (2, 4, 8)]  # far below what any link would give
    for record in alone:
        record["config"]["variable_update"] = "independent"
    result = predict_scaling([one, *measured, *alone], PredictOptions(calibrate=True, devices=(1, 2, 4, 8)),
                             _no_lookup)
    (fit,) = result.fits["box"]
    assert len(fit.residuals) == 3 and fit.link.bandwidth_gbps == pytest.approx(7.5, rel=1e-3)


def test_a_record_without_split_or_cost_uses_the_documented_assumptions():
    tf = _record(1, 500.0, split=False, source="tf_cnn_benchmarks", params=None, model="inception3")
    (b,), skipped = find_bases([tf], lambda name: 27_161_264 if name == "inception3" else None)
    assert skipped == [] and b.split_source == ASSUMED_TEXT
    assert b.backward_s == pytest.approx(2 * b.forward_s) and b.optimizer_s == 0
    assert b.gradient_bytes == 27_161_264 * 4 and not b.overlap  # tf_cnn_benchmarks: exchange after backward
    assert find_bases([tf], _no_lookup)[0] == []  # no parameter count: left out, and said why
    assert "no parameter count" in find_bases([tf], _no_lookup)[1][0]


def test_links_from_topology_comm_records_and_gpu_names(monkeypatch):
    geforce = FakeNvml([FakeGpu(name="NVIDIA GeForce RTX 3080", uuid=f"GPU-{i}", peer_access=False,
                                bus_id=f"00000000:{0x18 + i:02X}:00.0") for i in range(2)])
    monkeypatch.setitem(sys.modules, "pynvml", geforce.module)
    topology = gpu_facts()["gpu_topology"]
    assert topology["p2p_read"] == [["X", "no"], ["no", "X"]]  # sysinfo records the missing peer access
    assert link_from_topology(topology) == "pcie-host"
    peers = [["X", "OK"], ["OK", "X"]]
    assert link_from_topology({"link": [["X", "PHB"], ["PHB", "X"]], "p2p_read": peers}) == "pcie"
    assert link_from_topology({"link": [["X", "NV4"], ["NV4", "X"]], "p2p_read": peers}) == "nvlink"
    env = {"gpu_model": "NVIDIA GeForce RTX 3080", "gpu_topology": topology}
    assert machine_link(env, "cuda").kind == "pcie-host" and "sysinfo" in machine_link(env, "cuda").source
    named = machine_link({"gpu_model": "NVIDIA GeForce RTX 3080"}, "cuda")
    assert named.kind == "pcie-host" and "assumed for NVIDIA GeForce RTX 3080" in named.source
    assert link_from_gpu_name("NVIDIA RTX A6000") == "pcie" and link_from_gpu_name("NVIDIA A100-SXM4") == "nvlink"
    link = link_from_comm([comm(size=1024, busbw=0.1, n=2), comm(size=1 << 26, busbw=3.0, n=2)], "loopback")
    assert link is not None and link.bandwidth_gbps == pytest.approx(3.0)
    assert link.latency_s == pytest.approx(1024 / (0.1e9 / 1.0) / 2)  # time at 1 KiB over 2(n-1) steps


# --- the command ------------------------------------------------------------------------------------

def test_predict_on_a_record_made_here_prints_1_to_1024_devices(tmp_path):
    store = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "cnnbench", "run", "--model", "trivial", "--device", "cpu",
                           "--num-batches", "3", "--num-warmup-batches", "1", "--results-dir", str(store)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    out = subprocess.run([sys.executable, "-m", "cnnbench", "predict", str(store), "--strategy", "replicated",
                          "--format", "json"], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [r["devices"] for r in data["rows"]] == POINTS
    assert data["rows"][0]["bound"] == "compute" and data["rows"][0]["measured_images_per_sec"]
    assert data["rows"][0]["error"] == pytest.approx(0, abs=1e-9)  # one device predicts the record itself
    assert any("forward/backward split measured" in line for line in data["assumptions"])
    table = subprocess.run([sys.executable, "-m", "cnnbench", "predict", str(store), "--strategy", "replicated"],
                           capture_output=True, text=True, timeout=300, check=False, env=_wide())
    assert table.returncode == 0, table.stderr
    assert "trivial" in table.stdout and "1024" in table.stdout and "loopback" in table.stdout


def _wide() -> dict[str, str]:
    import os

    return {**os.environ, "COLUMNS": "250"}


def test_bad_options_are_one_line_errors(tmp_path, capsys):
    from tests.report_fixtures import write_store

    write_store(tmp_path / "r", [_record(1, 400.0)])
    assert main(["predict", str(tmp_path / "r"), "--devices", "1,x"]) == 2
    assert "--devices" in capsys.readouterr().err
    for counts in ("1,,2", "1,2,", ",", "1_0", "\u0663"):  # 1,,2 was read as 1,2, 1_0 as 10, an Arabic-Indic 3 as 3
        assert main(["predict", str(tmp_path / "r"), "--devices", counts]) == 2
        assert f"--devices: expected counts such as 1,2,4, got '{counts}'" in capsys.readouterr().err
    assert main(["predict", str(tmp_path / "r"), "--strategy", "horovod"]) == 2
    assert "horovod" in capsys.readouterr().err
    assert main(["predict", str(tmp_path / "r"), "--where", "model=vgg*"]) == 2
    assert "no one-device training record" in capsys.readouterr().err
    assert main(["predict", str(tmp_path / "r"), "--bandwidth", "0"]) == 2


def test_a_bandwidth_on_the_command_line_replaces_the_links():
    one = _record(1, 400.0)
    fast = predict_scaling([one], PredictOptions(devices=(8,), link=_choice("pcie", 100.0)), _no_lookup)
    slow = predict_scaling([one], PredictOptions(devices=(8,), link=_choice("pcie", 1.0)), _no_lookup)
    f, s = (r.rows[0] for r in (fast, slow))
    assert f.images_per_sec > s.images_per_sec and fast.links["box"][0].source == "--link --bandwidth"
    assert replace(f, measured=100.0).error == pytest.approx(f.images_per_sec / 100 - 1)


def _choice(kind: str, gbps: float | None):
    from cnnbench.predict import LinkChoice

    return LinkChoice(kind, gbps, None)


# --- report --predict -------------------------------------------------------------------------------

def test_report_predict_shows_predictions_beside_scaling_and_observes_shortfalls(tmp_path):
    from pathlib import Path

    from cnnbench.report import ReportOptions, build_report
    from cnnbench.results.store import read_records

    fixtures = Path(__file__).parent / "fixtures" / "tf_cnn_benchmarks_logs" / "LambdaCloud-RTX_A6000.logs"
    assert main(["import", "tf-cnn-benchmarks", str(fixtures), "--results-dir", str(tmp_path / "r")]) == 0
    records, _ = read_records([str(tmp_path / "r")])
    plain = build_report(records, ReportOptions(where=["precision=fp32"], max_plots=0))
    report = build_report(records, ReportOptions(where=["precision=fp32"], max_plots=0, predict=True))
    groups = [t for t in report.tables if t.id.startswith("scaling-") and "predicted bound" in t.columns]
    assert groups and not any("predicted bound" in t.columns for t in plain.tables)
    row = next(r for r in groups[0].rows if r[0].text == "vgg16" and r[3].value == 4)
    assert row[-1].text in ("compute", "communication", "input") and row[-3].value > 0
    texts = [o.text for o in report.observations]
    assert any("vgg16" in t and "falls short of the prediction" in t and "at 4 devices" in t for t in texts), texts
    assert not any("falls short of the prediction" in o.text for o in plain.observations)


def test_the_input_pipeline_of_data_records_times_host_cpus_bounds_a_node():
    train = _record(1, 400.0)
    train["config"].update(data_name="imagefolder", image_size=64)
    data = {"status": "ok", "config": {"mode": "data", "data_name": "imagefolder", "image_size": 64},
            "environment": {"machine": "box"}, "metrics": {"images_per_sec_per_core": 50.0}}
    fed = predict_scaling([train, data], PredictOptions(devices=(1, 8), strategies=("independent",),
                                                        host_cpus=128), _no_lookup)
    starved = predict_scaling([train, data], PredictOptions(devices=(1, 8), strategies=("independent",),
                                                            host_cpus=10), _no_lookup)
    assert [r.bound for r in fed.rows] == ["compute", "compute"]
    assert [r.bound for r in starved.rows] == ["compute", "input"]
    assert starved.rows[1].images_per_sec == pytest.approx(50.0 * 10)  # the node's pipeline, not its GPUs
    synthetic = predict_scaling([_record(1, 400.0), data], PredictOptions(devices=(8,), host_cpus=1), _no_lookup)
    assert all(r.bound != "input" for r in synthetic.rows)  # synthetic data has no pipeline to bound it


def test_across_nodes_the_slower_inter_link_costs_more():
    one = _record(1, 400.0)
    ib = predict_scaling([one], PredictOptions(devices=(16,), strategies=("replicated",)), _no_lookup)
    eth = predict_scaling([one], PredictOptions(devices=(16,), strategies=("replicated",),
                                                inter_link=_choice("ethernet", None)), _no_lookup)
    assert ib.rows[0].nodes == eth.rows[0].nodes == 2  # 8 GPUs a node by default
    assert eth.rows[0].images_per_sec < ib.rows[0].images_per_sec
    four = predict_scaling([one], PredictOptions(devices=(16,), strategies=("replicated",), nodes=4), _no_lookup)
    assert four.rows[0].nodes == 4


def test_cpu_workers_on_one_host_share_its_cores_as_run_gives_them_threads():
    shared = base(device="cpu", batch_size=16, host_cpus=2, threads=2)  # run's default: cores / workers
    fixed = base(device="cpu", batch_size=16, host_cpus=2, threads=1, threads_per_worker=1)  # each its own core
    crowded = base(device="cpu", batch_size=16, host_cpus=2, threads=1, threads_per_worker=1)
    s = scenario("loopback")
    for b in (shared, fixed, replace(shared, threads=1), replace(shared, busy_cores=1.5)):
        assert predict(b, "independent", 1, 1, s).images_per_sec == pytest.approx(b.images_per_sec)  # the base
    assert predict(shared, "independent", 2, 1, s).images_per_sec == pytest.approx(shared.images_per_sec)
    assert predict(fixed, "independent", 2, 1, s).images_per_sec == pytest.approx(2 * fixed.images_per_sec)
    # four single-thread workers on two cores take turns: no faster than two
    assert predict(crowded, "independent", 4, 1, s).images_per_sec == pytest.approx(2 * crowded.images_per_sec)


def test_a_cpu_host_stays_as_busy_as_during_the_one_device_run():
    quiet = base(device="cpu", batch_size=16, host_cpus=2, threads=1, threads_per_worker=1)
    busy = replace(quiet, busy_cores=1.5)  # half a core left: one worker had it all, two share it
    s = scenario("loopback")
    assert predict(quiet, "independent", 2, 1, s).images_per_sec == pytest.approx(2 * quiet.images_per_sec)
    assert predict(busy, "independent", 2, 1, s).images_per_sec == pytest.approx(busy.images_per_sec)


def test_tf_names_whose_torchvision_namesake_differs_take_tf_s_own_parameter_count():
    from cnnbench.predict.bases import TF_PARAMETERS

    tf = _record(1, 500.0, split=False, source="tf_cnn_benchmarks", params=None, model="alexnet")
    (b,), _ = find_bases([tf], lambda name: 61_100_840)  # torchvision's alexnet: not tf's network
    assert b.gradient_bytes == TF_PARAMETERS["alexnet"] * 4
    mine = _record(1, 500.0, params=None, model="alexnet")  # a cnnbench record of alexnet is torchvision's
    (b,), _ = find_bases([mine], lambda name: 61_100_840)
    assert b.gradient_bytes == 61_100_840 * 4


# --- review fixes (issue 21) ------------------------------------------------------------------------

def _cpu_series(nodes_at_2: int = 1) -> list[dict]:
    out = []
    for n, ips in ((1, 100.0), (2, 150.0)):
        r = _record(n, ips, gpu=None)
        r["config"]["num_nodes"] = nodes_at_2 if n == 2 else 1
        r["environment"]["available_cpus"] = 2
        out.append(r)
    return out


def _predicted_cell(records: list[dict]) -> str:
    from cnnbench.report import ReportOptions, build_report

    report = build_report(records, ReportOptions(max_plots=0, predict=True))
    cells = [c.text for t in report.tables if t.id.startswith("scaling-") for row in t.rows for c in row]
    return next(c for c in cells if "(predicted" in c)


def test_report_predicts_cpu_workers_of_one_host_on_that_host():
    records = _cpu_series()
    one_host = predict_scaling(records, PredictOptions(devices=(1, 2), strategies=("replicated",),
                                                       devices_per_node=2), _no_lookup).rows[1]
    two_hosts = predict_scaling(records, PredictOptions(devices=(1, 2), strategies=("replicated",),
                                                        devices_per_node=1), _no_lookup).rows[1]
    assert one_host.efficiency < two_hosts.efficiency  # the two workers share the host's cores
    assert f"(predicted {one_host.efficiency * 100:.0f}%, " in _predicted_cell(records)
    # predict's own defaults put them on the one node they ran on, beside the measured figure
    row = predict_scaling(records, PredictOptions(devices=(1, 2), strategies=("replicated",)), _no_lookup).rows[1]
    assert (row.nodes, row.measured) == (1, 150.0)
    apart = _cpu_series(nodes_at_2=2)  # measured on two hosts: one worker a node, as recorded
    row = predict_scaling(apart, PredictOptions(devices=(1, 2), strategies=("replicated",)), _no_lookup).rows[1]
    assert (row.nodes, row.measured) == (2, 150.0)
    from cnnbench.report.tables.predicted import _devices_per_node  # a series' devices per node, as recorded

    assert _devices_per_node(records) == 2 and _devices_per_node(apart) == 1 and _devices_per_node(records[:1]) == 1


def test_report_predict_takes_the_links_of_comm_records():
    records = _cpu_series()
    fast = [comm(size=1024, busbw=50.0, machine="box"), comm(size=1 << 26, busbw=50.0, machine="box")]
    with_comm = predict_scaling([*records, *fast], PredictOptions(devices=(1, 2), strategies=("replicated",)),
                                _no_lookup).rows[1]
    without = predict_scaling(records, PredictOptions(devices=(1, 2), strategies=("replicated",)), _no_lookup)
    assert with_comm.efficiency > without.rows[1].efficiency + 0.01
    assert f"(predicted {with_comm.efficiency * 100:.0f}%, " in _predicted_cell([*records, *fast])


@pytest.mark.parametrize("field,values", [("host_cpus", (2, 4)), ("threads_per_worker", (1, 2)),
                                          ("synthetic_location", ("device", "loader")), ("num_workers", (0, 4))])
def test_one_device_runs_of_different_host_setups_are_different_bases(field, values):
    from cnnbench.predict.render import configuration

    records = []
    for value, ips in zip(values, (100.0, 1000.0), strict=True):
        r = _record(1, ips, gpu=None)
        r["config"][field] = value
        records.append(r)
    result = predict_scaling(records, PredictOptions(devices=(1,), strategies=("independent",)), _no_lookup)
    assert sorted(b.images_per_sec for b in result.bases) == pytest.approx([100.0, 1000.0])
    labels = {configuration(r) for r in result.rows}
    assert len(labels) == 2 and all(str(v) in " ".join(labels) for v in values)


def test_a_figure_alone_keeps_the_measured_link_and_inter_flags_are_named():
    from cnnbench.predict import LinkChoice

    one = _record(1, 400.0, gpu=None)
    measured = [comm(size=1024, busbw=0.1, machine="box"), comm(size=1 << 26, busbw=3.0, machine="box")]
    plain = predict_scaling([one, *measured], PredictOptions(devices=(2,)), _no_lookup).links["box"][0]
    bw = predict_scaling([one, *measured], PredictOptions(devices=(2,), link=LinkChoice(None, 9.0, None)),
                         _no_lookup).links["box"][0]
    lat = predict_scaling([one, *measured], PredictOptions(devices=(2,), link=LinkChoice(None, None, 7.0)),
                          _no_lookup).links["box"][0]
    assert (bw.bandwidth_gbps, bw.latency_s) == (9.0, plain.latency_s)  # the comm record's latency kept
    assert (lat.bandwidth_gbps, lat.latency_s) == (plain.bandwidth_gbps, pytest.approx(7e-6))
    assert "cnnbench comm" in bw.source and "--bandwidth" in bw.source
    inter = predict_scaling([one], PredictOptions(devices=(2,), inter_link=LinkChoice(None, 5.0, None)),
                            _no_lookup).links["box"][1]
    assert inter.bandwidth_gbps == 5.0 and "--inter-bandwidth" in inter.source and "(--link" not in inter.source
    named = predict_scaling([one], PredictOptions(devices=(2,), inter_link=LinkChoice("ib", None, 3.0)),
                            _no_lookup).links["box"][1]
    assert named.source == "--inter-link --inter-latency"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_link_figures_are_one_line_errors(tmp_path, capsys, value):
    from tests.report_fixtures import write_store

    write_store(tmp_path / "r", [_record(1, 400.0)])
    for flag in ("--bandwidth", "--latency", "--inter-bandwidth"):
        assert main(["predict", str(tmp_path / "r"), f"{flag}={value}"]) == 2
        err = capsys.readouterr().err.strip()
        assert flag in err and len(err.splitlines()) == 1


def test_the_intra_node_link_comes_from_one_node_comm_records_only():
    across = comm(size=1 << 27, busbw=0.5, n=4)
    across["config"]["num_nodes"] = 2
    link = link_from_comm([comm(size=1024, busbw=0.1, n=2), comm(size=1 << 26, busbw=3.0, n=2), across], "loopback")
    assert link is not None and link.bandwidth_gbps == pytest.approx(3.0)
    del across["config"]["num_nodes"]  # no node count: one node
    assert link_from_comm([across], "loopback") is not None


def test_a_rate_too_small_to_compute_a_step_from_is_left_out_by_name(tmp_path, capsys):
    """5e-324 images/sec is a number, but a step of a batch at that rate lasts longer than any
    float: such a record is named and left out, never turned into NaN figures or a traceback."""
    from tests.report_fixtures import record, write_store

    def rec(ips: float, devices: int) -> dict:
        return record(ips=ips, num_devices=devices, metrics={"step_times_s": None}, cost=False)

    alone = write_store(tmp_path / "alone", [rec(5e-324, 1)])
    assert main(["predict", str(alone), "--devices", "1,2", "--strategy", "replicated"]) == 2
    err = capsys.readouterr().err
    assert "metrics.total_images_per_sec is 5e-324: too small to compute a step from" in err
    assert len(err.strip().splitlines()) == 1
    beside = write_store(tmp_path / "beside", [rec(1000.0, 1), rec(5e-324, 2)])
    for fmt in ("table", "csv", "json"):
        assert main(["predict", str(beside), "--devices", "1,2", "--strategy", "replicated", "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert "nan" not in out.lower() and "inf" not in out.lower()
    json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))


@pytest.mark.parametrize("odd", [{"model_cost": {"params": 1e308}}, {"config": {"threads_per_worker": -2}},
                                 {"config": {"bucket_cap_mb": 1e-320}}])
def test_a_configuration_whose_figures_no_float_computes_with_is_left_out_by_name(tmp_path, capsys, odd):
    """1e308 parameters, -2 threads per worker or a bucket of 1e-320 MB (figures a record may hold)
    ended predict in an OverflowError or a ZeroDivisionError: that configuration is left out, named,
    and the others are predicted; --input-rate 5e-324 is refused before the store is read."""
    from tests.report_fixtures import write_store

    bad = _record(1, 400.0, model="vgg16", gpu=None if "threads_per_worker" in odd.get("config", {}) else "RTX A6000")
    for section, values in odd.items():
        bad[section] = {**bad.get(section, {}), **values}
    def more(rec: dict, n: int) -> dict:  # the same configuration on n devices: what --calibrate fits to
        return {**rec, "run_id": f"{rec['run_id']}-{n}", "config": {**rec["config"], "num_devices": n}}

    good = _record(1, 400.0)
    write_store(tmp_path / "r", [bad, good, more(bad, 2), more(good, 2), more(good, 4)])
    for calibrate in ([], ["--calibrate"], ["--calibrate", "--devices", "1"],  # --calibrate fits to the measured
                      ["--calibrate", "--strategy", "independent"]):  # points, whatever points are asked for
        assert main(["predict", str(tmp_path / "r"), "--devices", "1,2,16", "--format", "csv", *calibrate]) == 0
        out, err = capsys.readouterr()
        assert "warning: left out vgg16 on box: its figures are past what a prediction can compute with" in err, err
        assert "resnet50" in out and "vgg16" not in out and "Traceback" not in err
    write_store(tmp_path / "alone", [bad])
    assert main(["predict", str(tmp_path / "alone"), "--devices", "1,2,16"]) == 2
    err = capsys.readouterr().err
    assert "no configuration could be predicted" in err and len(err.strip().splitlines()) == 1
    assert main(["predict", str(tmp_path / "r"), "--input-rate", "5e-324"]) == 2
    assert "--input-rate: must be a finite number of 1e-18 images/sec or more" in capsys.readouterr().err
    odd = _record(1, 400.0, model=["x"])  # type: ignore[arg-type]
    write_store(tmp_path / "named", [odd, good])  # a record left out earlier is no reason a count fits no node
    assert main(["predict", str(tmp_path / "named"), "--devices", "9"]) == 2
    assert "--devices 9: no count spreads evenly" in capsys.readouterr().err
    if bad["config"]["device"] == "cpu":  # 9 CPU workers fit 9 hosts: the count fitted the one left out
        assert main(["predict", str(tmp_path / "r"), "--devices", "9"]) == 2
        assert "no configuration could be predicted: left out vgg16" in capsys.readouterr().err
