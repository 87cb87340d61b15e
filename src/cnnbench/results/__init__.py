"""Results: the record schema, the field registry (:mod:`cnnbench.results.fields`), the store, importers.
No torch at import.
May import: ``config``, ``machine`` and the leaf modules (``cnnbench.version`` among them)."""

from cnnbench.results.record import SCHEMA_VERSION, STATUSES, Record
from cnnbench.results.store import append_record

__all__ = ["SCHEMA_VERSION", "STATUSES", "Record", "append_record"]
