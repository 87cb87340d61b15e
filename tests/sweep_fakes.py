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


def repeat_worker(config, emit, extra):
    """Like :func:`fake_worker`, but each repeat is 10% faster than the one before."""
    rate = float(config.batch_size) * (1 + 0.1 * (int(extra.get("repeat") or 1) - 1))
    return Record(config=config.recorded(), environment={"machine": "testbox", "hostname": "h"},
                  metrics={"total_images_per_sec": rate, "warnings": ["unstable: a scripted warning"]},
                  extra=extra)
