"""Results: the record schema, the store, environment capture, importers. No torch at import."""

from cnnbench.results.record import SCHEMA_VERSION, STATUSES, Record
from cnnbench.results.store import append_record

__all__ = ["SCHEMA_VERSION", "STATUSES", "Record", "append_record"]
