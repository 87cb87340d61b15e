"""The stamps of a new record: its ``run_id`` (:func:`new_run_id`) and the time, as ``started_at``
holds it (:func:`now_iso`: ISO 8601, UTC, whole seconds). No torch here."""

from __future__ import annotations

import datetime as _dt
import uuid


def new_run_id() -> str:
    """A new run's id: 16 random hex digits."""
    return uuid.uuid4().hex[:16]


def now_iso() -> str:
    """The time now as a record's ``started_at`` holds it (``2026-01-31T12:00:00+00:00``)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
