"""What describes the machine: environment capture, device selection, CPU affinity, NVML, GPU peaks.
Bottom layer: imports only the leaf modules (``cnnbench.errors``, ``cnnbench.words``); config sits on it.

- :mod:`~cnnbench.machine.environment`: the record's ``environment`` (CPU, GPUs, driver,
  library versions); imports torch lazily.
- :mod:`~cnnbench.machine.devices`: the one rule for ``--device auto``.
- :mod:`~cnnbench.machine.cuda_device`: the run's own CUDA device (name, SMs, MIG profile).
- :mod:`~cnnbench.machine.affinity`: the CPU cores a run may use, and ``--host-cpus``.
- :mod:`~cnnbench.machine.peaks`: dense peak FLOP/s of known GPUs, achieved FLOP/s, MFU
  (pure Python, no torch).
"""
