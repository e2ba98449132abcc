"""Expiry of tombstones older than a threshold.

AUTO CDC keeps a tombstone per deleted key in ``__apply_changes_storage_<table>`` (``__deleted``,
``__updated_at``) so that a late, older change cannot resurrect the row. Kept forever they grow
with every delete ever made; after the threshold a late change is assumed impossible and the
tombstone goes (Databricks does the same for pipelines, tuned with the table property
``pipelines.cdc.tombstoneGCThresholdInSeconds``). The compacted change log's deletes age out
with the same threshold, by their commit time.

Rows are deleted through the store (only the files holding expired tombstones are rewritten); these
tables are read as a whole by AUTO CDC, never as a stream, so the rewrite is safe.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for the annotations only: the store's module loads Spark and Delta
    from cdc_lakehouse.storage import TableStore

STATE_PREFIX = "__apply_changes_storage_"
COMPACTED_SUFFIX = "_changes_compacted"


def expiry_predicate(table: str, cutoff: datetime) -> str | None:
    """The predicate selecting a table's expired tombstones. The cutoff is a plain ISO string with
    its zone, which Spark SQL and delta-rs' DataFusion both compare with a UTC timestamp column
    (a typed TIMESTAMP literal is zone-less in DataFusion, which refuses the comparison)."""
    at = f"'{cutoff.astimezone(timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}'"
    name = table.rsplit(".", 1)[-1]
    if name.startswith(STATE_PREFIX):
        return f"__deleted = true AND __updated_at < {at}"
    if name.endswith(COMPACTED_SUFFIX):
        return f"op = 'DELETE' AND commit_ts < {at}"
    return None


def expire(store: TableStore, older_than_hours: float, now: datetime | None = None) -> list[dict]:
    now = now or datetime.now(timezone.utc)
    cutoff = now - timedelta(hours=older_than_hours)
    results = []
    for info in store.list_tables():
        predicate = expiry_predicate(info.name, cutoff)
        if predicate is None:
            continue
        results.append({"table": info.name, "expired": store.delete_where(info.name, predicate),
                        "cutoff": cutoff.isoformat()})
    return results
