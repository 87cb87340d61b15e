"""`cnnbench predict` true on first contact (issue 43 items 5-7): NVLink by generation, PCIe cards not
taken for NVLink, network rails between nodes, FSDP's 16-bit all-gathers, each tool's parameter server,
and the naive baseline (constant 2-device efficiency) beside every prediction."""

from __future__ import annotations

import pytest

from cnnbench.cli import main
from cnnbench.predict import Base, LinkChoice, PredictOptions, Scenario, predict, predict_scaling
from cnnbench.predict import collectives as coll
from cnnbench.predict.bases import find_bases
from cnnbench.predict.links import default_link, link_from_gpu_name, machine_link
from cnnbench.predict.scaling import PredictError, check_options, machine_links

GB = 1e9
NVLINK_TOPOLOGY = {"link": [["X", "NV18"], ["NV18", "X"]], "p2p_read": [["X", "OK"], ["OK", "X"]]}


def _record(n: int, ips: float, *, gpu: str | None = "RTX A6000", machine: str = "box", precision: str = "fp32",
            strategy: str = "replicated", source: str | None = None, parameter_device: str | None = None,
            params: int = 25_557_032) -> dict:
    config = {"model": "resnet50", "batch_size": 64, "num_devices": n, "precision": precision,
              "device": "cuda" if gpu else "cpu", "variable_update": strategy, "data_name": "synthetic"}
    if parameter_device:
        config["local_parameter_device"] = parameter_device
    rec = {"schema_version": 2, "run_id": f"{machine}{n}{ips}{strategy}", "status": "ok", "config": config,
           "environment": {"machine": machine, "gpu_model": gpu, "available_cpus": 32},
           "metrics": {"total_images_per_sec": ips}, "model_cost": {"params": params}}
    if source:
        rec["source"] = source
    return rec


def _no_lookup(model: str) -> int | None:
    return None


def _base(**kw) -> Base:
    values = dict(model="resnet50", key=(("model", "resnet50"),), batch_size=64, step_time_s=0.3, forward_s=0.1,
                  backward_s=0.2, optimizer_s=0.0, split_source="assumed", gradient_bytes=100e6,
                  parameter_bytes=100e6, device="cuda", parameters=25e6)
    values.update(kw)
    return Base(**values)  # type: ignore[arg-type]


# --- item 5: the link model ---------------------------------------------------------------------------

@pytest.mark.parametrize(("gpu", "gbps"), [
    ("Tesla V100-SXM2-16GB", 100.0), ("NVIDIA A100-SXM4-80GB", 200.0), ("NVIDIA H100 80GB HBM3", 370.0),
    ("NVIDIA H200", 370.0), ("NVIDIA B200", 830.0)])
def test_each_nvlink_generation_has_its_own_bandwidth_and_source(gpu, gbps):
    by_name = machine_link({"gpu_model": gpu}, "cuda")
    recorded = machine_link({"gpu_model": gpu, "gpu_topology": NVLINK_TOPOLOGY}, "cuda")
    for link in (by_name, recorded):
        assert link.kind == "nvlink" and link.bandwidth_gbps == gbps
    # a published figure names where it was published; the V100's says there is none
    assert ("NVIDIA/nccl" in by_name.source) != (gpu.startswith("Tesla V100"))
    # --link nvlink without --bandwidth takes the generation too; with --bandwidth, the figure given
    options = PredictOptions(link=LinkChoice("nvlink"))
    b = find_bases([_record(1, 100.0, gpu=gpu)], _no_lookup)[0][0]
    assert machine_links(b, options, [])[0].bandwidth_gbps == gbps
    given = PredictOptions(link=LinkChoice("nvlink", 55.0))
    assert machine_links(b, given, [])[0].bandwidth_gbps == 55.0


@pytest.mark.parametrize("gpu", ["NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe", "NVIDIA H100 PCIe",
                                 "NVIDIA H100 NVL"])
def test_pcie_cards_of_nvlink_generations_are_not_nvlink(gpu):
    assert link_from_gpu_name(gpu) == "pcie"
    link = machine_link({"gpu_model": gpu}, "cuda")
    assert link.kind == "pcie" and link.bandwidth_gbps == default_link("pcie").bandwidth_gbps


def test_a_node_spreads_its_traffic_over_its_rails():
    intra, one_rail = default_link("nvlink"), default_link("ib")
    eight = one_rail.__class__(**{**one_rail.__dict__, "rails": 8})
    size = 100e6
    across = coll.hierarchical_all_reduce(size, 8, 4, intra, eight) - 2 * coll.half_collective(size, 8, intra)
    assert across == pytest.approx(coll.all_reduce(size / 8, 4, one_rail))
    assert eight.rails_used(2) == 2 and eight.rails_used(16) == 8  # one rail a device, at most its rails
    # the default: 8 rails for ib, 1 for ethernet; --inter-rails replaces it
    b = find_bases([_record(1, 100.0)], _no_lookup)[0][0]
    assert machine_links(b, PredictOptions(), [])[1].rails == 8
    assert machine_links(b, PredictOptions(inter_link=LinkChoice("ethernet")), [])[1].rails == 1
    assert machine_links(b, PredictOptions(inter_rails=2), [])[1].rails == 2
    one = [_record(1, 400.0)]
    rates = {r: predict_scaling(one, PredictOptions(devices=(32,), strategies=("replicated",), inter_rails=r),
                                _no_lookup).rows[0].images_per_sec for r in (1, 8)}
    assert rates[8] > rates[1]


def test_inter_rails_below_one_is_refused_in_one_line(capsys):
    with pytest.raises(PredictError, match="--inter-rails: must be 1 or more"):
        check_options(PredictOptions(inter_rails=0))
    assert main(["predict", "nowhere", "--inter-rails", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--inter-rails" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(("precision", "gathered", "reduced"), [
    ("fp32", 4, 4), ("amp_bf16", 2, 4), ("amp_fp16", 2, 4), ("bf16", 2, 2)])
def test_fsdp_gathers_as_fsdp_py_casts(precision, gathered, reduced):
    import torch

    from cnnbench.distributed.fsdp import mixed_precision

    b = find_bases([_record(1, 100.0, precision=precision, params=1000)], _no_lookup)[0][0]
    assert b.parameter_bytes == 1000 * gathered and b.gradient_bytes == 1000 * reduced
    policy = mixed_precision(precision)
    if policy.param_dtype is not None:  # the policy fsdp.py builds: what the all-gather carries
        assert torch.empty(0, dtype=policy.param_dtype).element_size() == gathered


# --- item 6: each tool's parameter server ---------------------------------------------------------------

def test_cnnbench_parameter_server_is_a_reduce_and_a_broadcast():
    s = Scenario(default_link("nvlink"), default_link("ib"))
    p = predict(_base(), "parameter_server", 8, 1, s)
    nv = s.intra
    assert p.communication_s == pytest.approx(2 * (100e6 / (nv.bandwidth_gbps * GB) + 7 * nv.latency_s))


def test_cnnbench_parameter_server_on_the_host_adds_rank_0s_copy_and_update():
    s = Scenario(default_link("nvlink"), default_link("ib"))
    on_device = predict(_base(), "parameter_server", 2, 1, s).communication_s
    on_host = predict(_base(parameter_device="cpu"), "parameter_server", 2, 1, s).communication_s
    pcie = default_link("pcie")
    extra = 2 * (100e6 / (pcie.bandwidth_gbps * GB) + pcie.latency_s) + coll.host_update(25e6)
    assert on_host - on_device == pytest.approx(extra) and coll.host_update(25e6) > 0
    # a one-device record that ran the server on the host already paid it
    ran = predict(_base(parameter_device="cpu", one_device_server=True), "parameter_server", 2, 1, s)
    assert ran.communication_s == pytest.approx(on_device)


def test_tf_parameter_server_on_the_host_is_a_pcie_tree():
    pcie = default_link("pcie")
    size, b = 100e6, pcie.bandwidth_gbps * GB
    # two GPUs share a switch's uplink: 2 S/B a direction from 2 GPUs on; a bus would grow with n
    assert coll.host_tree(size, 1, pcie) == pytest.approx(2 * (size / b + pcie.latency_s))
    for n in (2, 4, 8):
        assert coll.host_tree(size, n, pcie) == pytest.approx(2 * (2 * size / b + pcie.latency_s))
    tf = _base(source="tf_cnn_benchmarks", parameter_device="cpu", one_device_server=True)
    s = Scenario(default_link("nvlink"), default_link("ib"))
    two, eight = (predict(tf, "parameter_server", n, 1, s).communication_s for n in (2, 8))
    assert two == eight == pytest.approx(coll.host_tree(size, 2, pcie) - coll.host_tree(size, 1, pcie))
    # the same records from cnnbench are a reduce and a broadcast: another figure
    ours = predict(_base(parameter_device="cpu", one_device_server=True), "parameter_server", 8, 1, s)
    assert ours.communication_s != pytest.approx(eight)


def test_a_records_source_and_parameter_device_reach_the_base():
    recs = [_record(1, 220.0, strategy="parameter_server", source="tf_cnn_benchmarks", parameter_device="cpu")]
    b = find_bases(recs, _no_lookup)[0][0]
    assert (b.source, b.parameter_device, b.one_device_server) == ("tf_cnn_benchmarks", "cpu", True)
    plain = find_bases([_record(1, 220.0)], _no_lookup)[0][0]
    assert (plain.source, plain.parameter_device, plain.one_device_server) == ("cnnbench", "device", False)


# --- item 7: the naive baseline ---------------------------------------------------------------------------

def _scaling(eff4: float) -> list[dict]:
    return [_record(1, 100.0), _record(2, 190.0), _record(4, 400.0 * eff4)]


def test_the_naive_baseline_stands_beside_each_prediction():
    result = predict_scaling(_scaling(0.95), PredictOptions(devices=(1, 2, 4), strategies=("replicated",)),
                             _no_lookup)
    rows = {r.devices: r for r in result.rows}
    assert rows[1].baseline is None and rows[2].baseline is None  # 2 devices is the baseline's own point
    assert rows[4].baseline == pytest.approx(4 * 100.0 * 0.95)
    assert rows[4].baseline_error == pytest.approx(0.0)
    assert rows[4].as_dict()["baseline_error"] == pytest.approx(0.0)


def test_a_model_that_loses_to_the_baseline_says_so(capsys):
    one = _scaling(0.95)
    lost = predict_scaling(one, PredictOptions(devices=(4,), strategies=("replicated",),
                                               link=LinkChoice("pcie", 0.05)), _no_lookup)
    assert len(lost.verdicts) == 1 and "box: the model loses to the naive baseline" in lost.verdicts[0]
    won = predict_scaling(_scaling(0.995), PredictOptions(devices=(4,), strategies=("replicated",),
                                                         link=LinkChoice("pcie", 1000.0)), _no_lookup)
    row = won.rows[0]
    assert abs(row.error) < abs(row.baseline_error) and "box: the model beats" in won.verdicts[0]
    nothing = predict_scaling([_record(1, 100.0)], PredictOptions(devices=(4,)), _no_lookup)
    assert nothing.verdicts == []  # no 2-device point, no baseline


def test_predict_prints_the_verdict(tmp_path, capsys):
    import json

    store = tmp_path / "runs.jsonl"
    store.write_text("".join(json.dumps(r) + "\n" for r in _scaling(0.95)))
    assert main(["predict", str(store), "--devices", "4", "--strategy", "replicated", "--link", "pcie",
                 "--bandwidth", "0.05"]) == 0
    assert "the model loses to the naive baseline" in capsys.readouterr().out


def test_a_part_named_inside_another_parts_name_is_not_guessed():
    """"h200" is in "GH200 480GB" (a Grace Hopper superchip), "b200" in "GB200": neither is that GPU."""
    from cnnbench.predict.links import link_from_gpu_name, nvlink_generation

    for name in ("NVIDIA GH200 480GB", "NVIDIA GB200"):
        assert link_from_gpu_name(name) is None and nvlink_generation(name) is None
    assert link_from_gpu_name("NVIDIA H200") == "nvlink" and nvlink_generation("NVIDIA H200") is not None


def test_predict_reads_the_one_list_of_strategies():
    """Issue 45 item 5: the strategy names are listed once, in config/strategy_rules.py; predict and its
    CLI read that list (a new strategy reaches them without another edit)."""
    from typing import get_args

    from cnnbench.cli import predict_cmd
    from cnnbench.config.strategy_rules import VariableUpdate
    from cnnbench.predict import STRATEGIES

    assert get_args(VariableUpdate) == STRATEGIES
    assert not hasattr(predict_cmd, "STRATEGY_NAMES")


def test_predict_models_a_strategy_by_the_exchange_its_declaration_names(monkeypatch):
    """Issue 45: predict reads each strategy's pattern of exchange from its declaration (no list of
    names to extend), and has a formula for every pattern."""
    from dataclasses import replace
    from typing import get_args

    from cnnbench.config.strategy_rules import STRATEGY_RULES, Exchange
    from cnnbench.predict import model

    assert set(model._FORMULAS) == set(get_args(Exchange))
    base, scenario = _base(), Scenario(default_link("nvlink"), default_link("ib"))
    figures = {d.exchange: predict(base, name, 8, 2, scenario) for name, d in STRATEGY_RULES.items()}
    assert len(set(figures.values())) == len(figures)  # the patterns differ here
    for name, declared in list(STRATEGY_RULES.items()):
        for exchange, expected in figures.items():
            monkeypatch.setitem(STRATEGY_RULES, name, replace(declared, exchange=exchange))
            assert predict(base, name, 8, 2, scenario) == expected
    with pytest.raises(ValueError, match="unknown strategy 'horovod'"):
        predict(base, "horovod", 8, 2, scenario)
