"""Import tf_cnn_benchmarks output: plain log files and the Lambda benchmark folder layout.

The layout is ``<machine>.logs/<config>/<model>-<batch>/throughput/<iteration>``, with a
``<machine>.logs/metadata`` file of tab-separated facts (CPU, GPUs, CUDA, driver, TF).
``<config>`` reads like ``syn-replicated-fp16-2gpus-inference``.

cnnbench's own ``run`` output is read too (round trip): its header starts with ``PyTorch:``
instead of ``TensorFlow:``, names its devices ``cpu:0``/``cuda:0``, and also states the image
size, the warm-up steps and cnnbench's own precision (``fp16`` there is pure fp16, and
``(torch.compile)`` follows it for compiled runs); such records get ``source`` ``cnnbench``.
Progress lines may end with more fields (cnnbench's ``eta``), which are ignored.

From the info header (the block from ``TensorFlow:`` to ``==========``) come the model,
the data set (synthetic or not), the mode, the per-device batch, the devices, the data
format, the optimizer, the variable update and the all-reduce spec; precision and
distortions come from the header when it states them, else from the folder name. The
progress lines become ``metrics.step_series`` (tf_cnn_benchmarks prints the running
mean, its standard error and jitter every N steps, not raw step times, so there are no
``step_times_s``); the last one gives ``images_per_sec_mean``/``_stderr``/``_jitter``
over the whole run. ``total images/sec`` is ``metrics.total_images_per_sec``. A log
without it becomes a record with status ``error`` (``oom`` when TensorFlow reported
running out of memory) and no figure, never 0. A log that says something impossible (a
figure that is no number, a date that does not exist) is reported as ``path: problem``
and skipped; the other logs are imported.

Parsing a log is :mod:`~cnnbench.results.importers.tf_log`, where it sits
:mod:`~cnnbench.results.importers.tf_layout`, its record
:mod:`~cnnbench.results.importers.tf_record`; this module imports them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from cnnbench.results.files import FileProblem
from cnnbench.results.importers import ImportOptions, ImportResult, finalize_record, read_input, register_importer
from cnnbench.results.importers.tf_layout import find_logs, layout_of
from cnnbench.results.importers.tf_log import parse_log, parse_metadata
from cnnbench.results.importers.tf_record import SOURCE, record_from_log
from cnnbench.results.record import RecordError, check_record

log = logging.getLogger(__name__)


@register_importer("tf-cnn-benchmarks", "tf_cnn_benchmarks logs: plain files or <machine>.logs/ folders")
def import_tf_cnn_benchmarks(paths: Sequence[Path], options: ImportOptions) -> ImportResult:
    """Records for every tf_cnn_benchmarks log under ``paths``."""
    result = ImportResult()
    metadata_cache: dict[Path, dict[str, str]] = {}
    for path in find_logs(paths):
        try:
            text = _text(path)
        except OSError as exc:
            result.problems.append(_cannot_read(path, exc))
            continue
        layout = layout_of(path)
        metadata: dict[str, str] = {}
        if layout:
            if layout.logs_dir not in metadata_cache:
                metadata_cache[layout.logs_dir] = _metadata(layout.logs_dir / "metadata", result)
            metadata = metadata_cache[layout.logs_dir]
        try:
            record = record_from_log(path, text, metadata)
            if record is not None:
                record = finalize_record(record, options)
                check_record(record)
        except (ValueError, RecordError) as exc:
            result.problems.append(f"{path}: {exc}")
            continue
        if record is None:
            result.problems.append(f"{path}: not a tf_cnn_benchmarks log (no `TensorFlow:` info header, "
                                   "nor cnnbench's `PyTorch:` one)")
            continue
        result.records.append(record)
        log.debug("imported %s (%s)", path, record["status"])
    return result


def _text(path: Path) -> str:
    return read_input(path).decode("utf-8", errors="replace")


def _cannot_read(path: Path, exc: OSError) -> str:
    return str(exc) if isinstance(exc, FileProblem) else f"{path}: cannot read ({exc.strerror or exc})"


def _metadata(path: Path, result: ImportResult) -> dict[str, str]:
    """The facts of a ``<machine>.logs/metadata`` file; none where there is none (a problem
    where it cannot be read: a FIFO, a device)."""
    if not path.exists() and not path.is_symlink():
        return {}
    try:
        return parse_metadata(_text(path))
    except OSError as exc:
        result.problems.append(_cannot_read(path, exc) + "; the logs beside it are read without it")
        return {}


__all__ = ["SOURCE", "import_tf_cnn_benchmarks", "parse_log", "parse_metadata", "record_from_log"]
