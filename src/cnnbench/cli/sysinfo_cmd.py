"""``cnnbench sysinfo``: what this machine is, as every record's ``environment`` says it.

Host, OS and kernel; CPU model, sockets, cores, frequency and governor; memory and NUMA
nodes; every NVIDIA GPU (NVML) with its memory, compute capability, PCIe link and the
NVLink/P2P topology between GPUs; torch, torchvision, CUDA, cuDNN and NCCL versions; the
environment variables that change a run. ``--format json`` prints the capture itself.
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sysinfo",
        help="Describe this machine: CPU, memory, NUMA, GPUs and their links, library versions.",
        description="Describe this machine as every run record's environment does: host, OS and kernel, "
        "CPU (model, sockets, cores, frequency, governor), memory and NUMA nodes, each NVIDIA GPU (memory, "
        "compute capability, PCIe generation and width, NVLink/P2P topology), torch/torchvision/CUDA/cuDNN/"
        "NCCL versions and the relevant environment variables.",
    )
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table (default) or json (the record's environment, every field).")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from cnnbench.machine.devices import resolve_device_kind
    from cnnbench.machine.environment import capture_environment

    env = capture_environment(resolve_device_kind("auto"), gpus=True)
    if args.format == "json":
        print(json.dumps(env, indent=2))
        return 0
    _print_tables(env)
    return 0


def _print_tables(env: dict[str, Any]) -> None:
    from rich.table import Table
    from rich.text import Text

    from cnnbench.machine.sysinfo import GPU_COLUMNS, describe, gpu_rows
    from cnnbench.terminal import console_for, print_table

    console = console_for()
    table = Table(title="cnnbench sysinfo", show_header=False, header_style="bold")
    table.add_column("", style="bold")
    table.add_column("", overflow="fold")
    sections = describe(env)
    for i, (title, rows) in enumerate(sections):
        table.add_row(f"[underline]{title}[/]", "")
        for label, value in rows:  # a name and a value (an environment variable's, a path) are text, never markup
            table.add_row(Text(f"  {label}"), Text(str(value)))
        if i < len(sections) - 1:
            table.add_section()
    print_table(table, console)
    gpus = gpu_rows(env)
    if not gpus:
        console.print("GPUs: none that NVML sees (no NVIDIA driver, or no NVIDIA GPU)")
        return
    gpu_table = Table(title="GPUs (numbered as nvidia-smi does; CUDA: this process's index; CC: compute "
                      "capability)", header_style="bold")
    for name in GPU_COLUMNS:
        gpu_table.add_column(name, overflow="fold")
    for row in gpus:
        gpu_table.add_row(*(Text(str(cell)) for cell in row))
    print_table(gpu_table, console)
    topology = env.get("gpu_topology")
    if not topology:
        return
    for key, title in (("link", "GPU links"), ("p2p_read", "Peer-to-peer reads")):
        matrix = Table(title=title, header_style="bold")
        matrix.add_column("")
        for g in topology["gpus"]:
            matrix.add_column(f"GPU{g}", justify="center")
        for g, row in zip(topology["gpus"], topology[key], strict=False):
            matrix.add_row(f"GPU{g}", *row)
        print_table(matrix, console)
    console.print("NV<n>: n NVLinks; otherwise PCIe through PIX one switch, PXB several switches, PHB a host "
                  "bridge, NODE host bridges of one NUMA node, SYS across NUMA nodes. OK: peer-to-peer reads work.")
