"""cnnbench sysinfo and the record's environment: fields, GPUs through a scripted NVML, the CLI."""

from __future__ import annotations

import json
import os
import sys

from cnnbench.cli import main
from cnnbench.machine import host
from cnnbench.machine.environment import capture_environment
from cnnbench.machine.sysinfo import describe, gpu_facts, gpu_rows, relevant_environment_variables
from tests.fake_nvml import FakeGpu, FakeNvml

H100 = dict(name="NVIDIA H100 80GB HBM3", pcie=(4, 16, 5, 16))


def _two_linked_gpus() -> FakeNvml:
    a = FakeGpu(uuid="GPU-aaaa", bus_id="00000000:18:00.0", nvlink_peers=["00000000:2A:00.0"] * 2, **H100)
    b = FakeGpu(uuid="GPU-bbbb", bus_id="00000000:2A:00.0", nvlink_peers=["00000000:18:00.0"] * 2, **H100)
    return FakeNvml([a, b])


def test_environment_describes_host_cpu_memory_and_software(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("UNRELATED_SECRET", "x")
    env = capture_environment("cpu")
    for key in ("machine", "hostname", "cpu_model", "cpu_cores", "cpu_threads", "memory_bytes", "torch_version",
                "torchvision_version", "cuda_version", "python_version", "platform", "os", "kernel",
                "cpu_sockets", "available_cpus", "cpu_frequency_mhz", "cpu_governor", "cpu_frequency_max_mhz",
                "numa_nodes", "memory_available_bytes", "load_average", "env_vars", "gpus", "gpu_topology",
                "gpu_driver", "cuda_driver_version"):
        assert key in env, key
    assert env["kernel"] == os.uname().release
    assert env["available_cpus"] == len(os.sched_getaffinity(0))
    assert env["cpu_sockets"] >= 1 and env["memory_available_bytes"] <= env["memory_bytes"]
    assert len(env["load_average"]) == 3
    assert env["numa_nodes"] and env["numa_nodes"][0]["node"] == 0 and env["numa_nodes"][0]["cpus"]
    assert env["env_vars"]["OMP_NUM_THREADS"] == "3" and env["env_vars"]["NCCL_DEBUG"] == "INFO"
    assert "UNRELATED_SECRET" not in env["env_vars"]
    assert env["gpus"] == [] and env["gpu_count"] == 0  # a CPU run lists no GPUs
    json.dumps(env)  # a record field: plain JSON


def test_cpu_lists_round_trip():
    assert host.parse_cpu_list("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert host.format_cpu_list([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    assert relevant_environment_variables({"CUDA_VISIBLE_DEVICES": "1", "HOME": "/root"}) == {
        "CUDA_VISIBLE_DEVICES": "1"}


def test_the_inductor_cache_torch_sets_itself_is_no_setting_of_the_users(tmp_path):
    """torchvision's import sets TORCHINDUCTOR_CACHE_DIR to torch's default, so every record listed a
    variable the user never set (and one that differs by user name); one the user names is kept."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    from cnnbench.machine.sysinfo import _inductor_default_cache

    name = _inductor_default_cache()
    for default in (default_cache_dir(), os.path.join("/tmp", name)):
        assert relevant_environment_variables({"TORCHINDUCTOR_CACHE_DIR": default, "OMP_NUM_THREADS": "4"}) == {
            "OMP_NUM_THREADS": "4"}, default
    for mine in (str(tmp_path / "inductor"), str(tmp_path / name)):  # a folder of the user's, whatever TMPDIR is
        assert relevant_environment_variables({"TORCHINDUCTOR_CACHE_DIR": mine}) == {"TORCHINDUCTOR_CACHE_DIR": mine}


def test_gpus_links_and_driver_from_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _two_linked_gpus().module)
    facts = gpu_facts(["bbbb"])  # this process's cuda:0 is NVML's GPU 1
    g0, g1 = facts["gpus"]
    assert g0["name"] == "NVIDIA H100 80GB HBM3" and g0["memory_bytes"] == 80 * 2**30
    assert g0["compute_capability"] == "9.0"
    assert (g0["pcie_generation"], g0["pcie_width"], g0["pcie_generation_max"], g0["pcie_width_max"]) == (4, 16, 5, 16)
    assert g0["power_limit_w"] == 700.0 and g0["nvlinks"] == 2
    assert g0["cuda_index"] is None and g1["cuda_index"] == 0
    assert facts["gpu_topology"] == {"gpus": [0, 1], "link": [["X", "NV2"], ["NV2", "X"]],
                                     "p2p_read": [["X", "OK"], ["OK", "X"]], "nvswitch_links": [0, 0]}
    assert facts["gpu_driver"] == "550.54.15" and facts["cuda_driver_version"] == "12.4"


def _hgx(n: int, links: int = 18, **kw) -> FakeNvml:
    """An HGX board: every NVLink of every GPU ends at an NVSwitch."""
    return FakeNvml([FakeGpu(uuid=f"GPU-{i}", bus_id=f"00000000:{0x18 + i:02X}:00.0", nvswitch_links=links,
                             **kw, **H100) for i in range(n)])


def test_gpus_on_nvswitches_are_nvlinked_not_pcie(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _hgx(3).module)
    facts = gpu_facts()
    assert facts["gpu_topology"]["link"] == [["X", "NV18", "NV18"], ["NV18", "X", "NV18"], ["NV18", "NV18", "X"]]
    assert facts["gpu_topology"]["nvswitch_links"] == [18, 18, 18]
    assert [(g["nvlinks"], g["nvswitch_links"]) for g in facts["gpus"]] == [(18, 18)] * 3
    assert gpu_rows(facts)[0][-1] == "18 (NVSwitch)"


def test_without_the_remote_type_call_links_are_matched_by_bus_as_before(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _hgx(2, remote_type_supported=False).module)
    assert gpu_facts()["gpu_topology"]["link"] == [["X", "PHB"], ["PHB", "X"]]  # no guess


def test_sysinfo_table_shows_nvswitch_links(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", _hgx(2).module)
    assert main(["sysinfo"]) == 0
    out = capsys.readouterr().out
    assert "NV18" in out and "18 (NVSwitch)" in out


def test_pcie_only_gpus_show_the_common_ancestor(monkeypatch):
    fake = FakeNvml([FakeGpu(bus_id="0000:18:00.0"), FakeGpu(bus_id="0000:2a:00.0")])
    monkeypatch.setitem(sys.modules, "pynvml", fake.module)
    topology = gpu_facts()["gpu_topology"]
    assert topology["link"] == [["X", "PHB"], ["PHB", "X"]]
    assert gpu_facts()["gpus"][0]["nvlinks"] == 0


def test_no_nvidia_driver_gives_nulls(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([], init_error=True).module)
    assert gpu_facts(["x"]) == {"gpus": [], "gpu_topology": None, "gpu_driver": None, "cuda_driver_version": None}


def test_sysinfo_json_is_the_records_environment(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", _two_linked_gpus().module)
    assert main(["sysinfo", "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    recorded = capture_environment("cpu", gpus=True)
    volatile = {"load_average", "memory_available_bytes", "cpu_frequency_mhz"}
    assert {k: v for k, v in shown.items() if k not in volatile} == {
        k: v for k, v in recorded.items() if k not in volatile}
    assert [g["name"] for g in shown["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 2


def test_sysinfo_table(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", _two_linked_gpus().module)
    assert main(["sysinfo"]) == 0
    out = capsys.readouterr().out
    for text in ("Host", "kernel", "CPU", "sockets", "Memory", "NUMA node 0", "Software", "torchvision",
                 "cuDNN", "NCCL", "Environment variables", "GPUs", "gen4 x16 / gen5 x16", "NV2", "9.0"):
        assert text in out, text


def test_describe_and_gpu_rows_without_gpus():
    env = capture_environment("cpu")
    titles = [title for title, _ in describe(env)]
    assert titles == ["Host", "CPU", "Memory", "Software", "Environment variables"]
    assert gpu_rows(env) == []
