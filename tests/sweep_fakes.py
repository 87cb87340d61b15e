"""Workers and probes for the sweep tests, in a module of their own: case processes
import it by name, and it imports nothing heavy (not pytest), so they start fast."""

from __future__ import annotations

import os
import signal
import time

from cnnbench.results.record import Record


def probe(device, label):
    """A probe that needs no torch: the machine is 'testbox' unless labelled."""
    return {"device": "cpu" if device == "auto" else device,
            "environment": {"machine": label or "testbox", "hostname": "h"}}


def elsewhere_probe(device, label):
    return probe(device, "elsewhere")


def gpu_probe(device, label):
    return {"device": "cuda", "environment": {"machine": "gpubox"}}


def fake_worker(config, emit, extra):
    """Behaves by batch size: 3 raises, 4 hangs, 5 segfaults, >= 64 runs out of memory."""
    emit(f"running {config.model} at batch {config.batch_size}")
    if config.batch_size == 3:
        raise RuntimeError("boom in the model")
    if config.batch_size == 4:
        time.sleep(60)
    if config.batch_size == 5:
        os.kill(os.getpid(), signal.SIGSEGV)
    if config.batch_size >= 64:
        return Record(config=config.recorded(), environment={"machine": "testbox"}, metrics={},
                      status="oom", error="CUDA out of memory", extra=extra)
    return Record(config=config.recorded(), environment={"machine": "testbox", "hostname": "h"},
                  metrics={"total_images_per_sec": float(config.batch_size)}, extra=extra)


def stopping_worker(sweep_pid, config, emit, extra):
    """Batch 4 sends SIGTERM to the sweep (as a user would) and then hangs."""
    if config.batch_size == 4:
        os.kill(sweep_pid, signal.SIGTERM)
        time.sleep(60)
    return fake_worker(config, emit, extra)


def nan_worker(config, emit, extra):
    """A case whose training diverged: NaN and infinity among its figures."""
    return Record(config=config.recorded(), environment={"machine": "testbox", "hostname": "h"},
                  metrics={"total_images_per_sec": 10.0, "loss_last": float("nan"),
                           "step_times_s": [0.1, float("inf")]}, extra=extra)


def slow_worker(config, emit, extra):
    """An ok case that takes a moment, so that two sweeps overlap."""
    time.sleep(0.3)
    return fake_worker(config, emit, extra)


def finishing_worker(results_dir, other_record, config, emit, extra):
    """While running its own case, another sweep (played here) records ``other_record``."""
    from cnnbench.results.store import append_record

    append_record(results_dir, other_record)
    return fake_worker(config, emit, extra)


NATIVE_ERROR = (
    "CUDA error: an illegal memory access was encountered\n"
    "Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:43 "
    "(most recent call first):\n"
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f1 in libc10.so)\n"
    "frame #1: c10::detail::torchCheckFail(char const*, char const*, unsigned int, std::string const&) + 0x6a\n"
    "frame #2: <unknown function> + 0x1d8e4 (0x7f3 in libc10_cuda.so)\n"
)


def native_error_worker(config, emit, extra):
    """A case whose torch error carries the C++ stack torch appends."""
    raise RuntimeError(NATIVE_ERROR)


def repeat_worker(config, emit, extra):
    """Like :func:`fake_worker`, but each repeat is 10% faster than the one before."""
    rate = float(config.batch_size) * (1 + 0.1 * (int(extra.get("repeat") or 1) - 1))
    return Record(config=config.recorded(), environment={"machine": "testbox", "hostname": "h"},
                  metrics={"total_images_per_sec": rate, "warnings": ["unstable: a scripted warning"]},
                  extra=extra)


SPREAD_REPEATS = (100.0, 100.0, 120.0)
"""images/sec of three repeats whose spread reads differently by every definition: range over
median 20%, half of it 10%, population stdev over mean 8.8%, stdev over median 11.5%, and the
one cnnbench uses, the relative stdev (sample stdev over mean), 10.8%."""


def spread_worker(config, emit, extra):
    """Repeat ``k`` (1, 2, 3) runs at :data:`SPREAD_REPEATS` ``[k - 1]`` images/sec."""
    rate = SPREAD_REPEATS[(int(extra.get("repeat") or 1) - 1) % len(SPREAD_REPEATS)]
    return Record(config=config.recorded(), environment={"machine": "testbox", "hostname": "h"},
                  metrics={"total_images_per_sec": rate}, extra=extra)


def agent_like_worker(config, emit, extra):
    """Hangs after a progress line; stopped, it dies with a traceback as torch's elastic agent
    does when SIGTERM reaches a multi-device case (its handler raises SignalException)."""

    class SignalException(Exception):
        pass

    def raise_on_term(signum, frame):
        raise SignalException(f"Process {os.getpid()} got signal: {signum}")

    signal.signal(signal.SIGTERM, raise_on_term)
    emit("10\timages/sec: 12.5 +/- 0.1 (jitter = 0.2)\t6.900")
    time.sleep(60)


def failing_worker(config, emit, extra):
    """A case that fails inside its process before it makes a record (as the engine's would, mid-run)."""
    emit(f"running {config.model} on {config.data_dir}")
    raise RuntimeError("the loader died")
