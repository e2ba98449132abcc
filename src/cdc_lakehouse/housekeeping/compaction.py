"""Sorted compaction of the change log: the latest change per row, kept in its own table.

``silver.<source>_changes`` is append-only and read as a stream by every replica flow, so it is
never rewritten (a rewrite would look like lost input to a streaming reader). Its compaction goes
to ``silver.<source>_changes_compacted``: one row per (schema, table, key), the change with the
highest sequence, deletes included as tombstones (expired by ``tombstones``). Rows are written
sorted by key, so the table's files cover narrow key ranges and later merges touch few of them.

Incremental: the compacted table's Delta app transaction records the change-stream version it
is compacted through; the next run reads only the rows appended since and merges the newer ones.
If the change stream was rebuilt (a full refresh), the compaction is rebuilt too.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from cdc_lakehouse.storage import Commit, StreamingSourceChanged, TableStore, UpsertSpec

APP_ID = "cdc-lakehouse/housekeeping/compaction"
KEY = ("schema", "table", "key")
APPLIED = ("INSERT", "UPDATE", "DELETE")


def compacted_name(changes_table: str) -> str:
    return f"{changes_table}_compacted"


def latest_changes(changes: DataFrame) -> DataFrame:
    """The change with the highest sequence per (schema, table, key); NONE rows (anomaly
    carriers) change no row and are left out."""
    newest_first = Window.partitionBy(*KEY).orderBy(F.col("sequence").desc())
    ranked = changes.filter(F.col("op").isin(*APPLIED)).withColumn("__r", F.row_number().over(newest_first))
    return ranked.filter("__r = 1").drop("__r")


def compact(store: TableStore, changes_table: str) -> dict:
    """Bring ``<changes_table>_compacted`` up to date; returns what was done."""
    target = compacted_name(changes_table)
    if not store.exists(changes_table):
        return {"table": target, "status": "skipped", "reason": f"{changes_table} does not exist yet"}
    if not store.versioned():  # Unity Catalog: recompute, there is no version seam
        return _rebuild(store, changes_table, target, None)
    up_to = store.version(changes_table)
    done = store.committed_version(target, APP_ID) if store.exists(target) else None
    if done == up_to:
        return {"table": target, "status": "up to date", "through_version": up_to}
    if done is None or done > up_to:
        return _rebuild(store, changes_table, target, up_to)
    try:
        appended, rows = store.read_appended(changes_table, done, up_to)
    except StreamingSourceChanged:
        return _rebuild(store, changes_table, target, up_to)
    return _merge(store, appended, rows, target, up_to)


def _rebuild(store, changes_table: str, target: str, up_to: int | None) -> dict:
    latest = latest_changes(store.read(changes_table)).repartition(*KEY).sortWithinPartitions(*KEY)
    commit = None if up_to is None else Commit(APP_ID, up_to)
    written = store.overwrite(target, latest, commit)
    return {"table": target, "status": "rebuilt", "rows_written": written, "through_version": up_to}


def _merge(store, appended: DataFrame, rows: int, target: str, up_to: int) -> dict:
    """Newer changes of the appended rows replace their key's row; older ones (a late change
    already overtaken) are dropped, as AUTO CDC drops them."""
    latest = latest_changes(appended)
    current = store.read(target).select(*KEY, F.col("sequence").alias("__current"))
    newer = latest.join(current, list(KEY), "left").filter(
        F.col("__current").isNull() | (F.col("sequence") > F.col("__current"))
    ).drop("__current").sortWithinPartitions(*KEY)
    written = store.upsert(target, newer, UpsertSpec(KEY), Commit(APP_ID, up_to))
    return {"table": target, "status": "merged", "rows_read": rows, "rows_written": written, "through_version": up_to}
