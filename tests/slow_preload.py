"""Imported by a test sweep's fork server instead of torch: says it started, then takes its
time, so that a test can press Ctrl-C while the server is still starting."""

from __future__ import annotations

import os
import time

marker = os.environ.get("CNNBENCH_TEST_PRELOAD_MARKER")
if marker:
    with open(marker, "w") as f:
        f.write(str(os.getpid()))
time.sleep(float(os.environ.get("CNNBENCH_TEST_PRELOAD_SLEEP", "0")))
