"""Expiry of tombstones older than a threshold.

AUTO CDC keeps a tombstone per deleted key in ``__apply_changes_storage_<table>`` (``__deleted``,
``__updated_at``) so that a late, older change cannot resurrect the row. Kept forever they grow
with every delete ever made; after the threshold a late change is assumed impossible and the
tombstone goes (Databricks does the same for pipelines, tuned with the table property
``pipelines.cdc.tombstoneGCThresholdInSeconds``). The compacted change log's deletes age out
with the same threshold, by their commit time.

Rows are deleted with delta-rs (only the files holding expired tombstones are rewritten); these
tables are read as a whole by AUTO CDC, never as a stream, so the rewrite is safe.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

STATE_PREFIX = "__apply_changes_storage_"
COMPACTED_SUFFIX = "_changes_compacted"


def expiry_predicate(table: str, cutoff: datetime) -> str | None:
    """The delta-rs (DataFusion SQL) predicate selecting a table's expired tombstones."""
    at = f"arrow_cast('{cutoff.strftime('%Y-%m-%dT%H:%M:%S.%f')}', 'Timestamp(Microsecond, Some(\"UTC\"))')"
    name = table.rsplit(".", 1)[-1]
    if name.startswith(STATE_PREFIX):
        return f"__deleted = true AND __updated_at < {at}"
    if name.endswith(COMPACTED_SUFFIX):
        return f"op = 'DELETE' AND commit_ts < {at}"
    return None


def expire(store, older_than_hours: float, now: datetime | None = None) -> list[dict]:
    now = now or datetime.now(timezone.utc)
    cutoff = now - timedelta(hours=older_than_hours)
    results = []
    for info in store.list_tables():
        predicate = expiry_predicate(info.name, cutoff)
        if predicate is None:
            continue
        metrics = store.delta_table(info.name).delete(predicate)
        results.append({"table": info.name, "expired": int(metrics.get("num_deleted_rows", 0)),
                        "cutoff": cutoff.isoformat()})
    return results
