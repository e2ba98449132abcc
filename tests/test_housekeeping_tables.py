"""Housekeeping steps on crafted tables: change-log compaction (incremental, late changes, a
rebuilt stream), tombstone expiry, OPTIMIZE/VACUUM and the retention safety limit."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.housekeeping import compaction, maintenance, tombstones
from cdc_lakehouse.housekeeping.run import Options, housekeeping
from cdc_lakehouse.snapshot.corrections import CHANGE_STREAM_SCHEMA
from cdc_lakehouse.storage import LakeStore

CHANGES = "silver.src_changes"
NOW = datetime(2026, 3, 10, tzinfo=timezone.utc)


def change(key: int, op: str, position: int, name: str | None = "x", table: str = "products"):
    row = None if name is None else f'{{"id":{key},"name":"{name}"}}'
    return ("src", "shop", table, f'{{"id":"{key}"}}', op, row, None, [], [], 1, f"t{position}",
            datetime(2026, 3, 1, tzinfo=timezone.utc) + timedelta(minutes=position), (position, f"t{position}"),
            "u", "r", "binlog")


def compacted(store):
    return store.read(compaction.compacted_name(CHANGES)).select("table", "key", "op", "sequence.position", "row")


def test_compaction_keeps_the_latest_change_per_row_incrementally(spark, tmp_path):
    store = LakeStore(spark, tmp_path / "lake")
    append = lambda rows: store.append(CHANGES, spark.createDataFrame(rows, CHANGE_STREAM_SCHEMA))  # noqa: E731
    append([change(1, "INSERT", 1, "a"), change(1, "UPDATE", 3, "b"), change(2, "INSERT", 2, "c"),
            change(2, "NONE", 4, None), change(1, "INSERT", 1, "a", table="orders")])
    assert compaction.compact(store, CHANGES)["status"] == "rebuilt"
    assert compaction.compact(store, CHANGES)["status"] == "up to date"

    # Later: key 2 deleted, key 3 new, and a late change to key 1 older than what is compacted.
    append([change(2, "DELETE", 5, "c"), change(3, "INSERT", 6, "d"), change(1, "UPDATE", 2, "late")])
    result = compaction.compact(store, CHANGES)
    assert (result["status"], result["rows_read"], result["rows_written"]) == ("merged", 3, 2)
    assertDataFrameEqual(compacted(store), spark.createDataFrame([
        ("products", '{"id":"1"}', "UPDATE", 3, '{"id":1,"name":"b"}'),
        ("products", '{"id":"2"}', "DELETE", 5, '{"id":2,"name":"c"}'),
        ("products", '{"id":"3"}', "INSERT", 6, '{"id":3,"name":"d"}'),
        ("orders", '{"id":"1"}', "INSERT", 1, '{"id":1,"name":"a"}'),
    ], "table string, key string, op string, position long, row string"))
    assert store.read(CHANGES).count() == 8  # the append-only stream itself is never rewritten


def test_compaction_is_rebuilt_after_the_change_stream_was(spark, tmp_path):
    store = LakeStore(spark, tmp_path / "lake")
    store.append(CHANGES, spark.createDataFrame([change(1, "INSERT", 1), change(2, "INSERT", 2)], CHANGE_STREAM_SCHEMA))
    store.append(CHANGES, spark.createDataFrame([change(3, "INSERT", 3)], CHANGE_STREAM_SCHEMA))
    compaction.compact(store, CHANGES)
    store.overwrite(CHANGES, spark.createDataFrame([change(9, "INSERT", 1)], CHANGE_STREAM_SCHEMA))  # a full refresh
    store.append(CHANGES, spark.createDataFrame([change(8, "INSERT", 2)], CHANGE_STREAM_SCHEMA))
    assert compaction.compact(store, CHANGES)["status"] == "rebuilt"
    assert sorted(r["key"] for r in compacted(store).collect()) == ['{"id":"8"}', '{"id":"9"}']


def test_tombstones_older_than_the_threshold_expire(spark, tmp_path):
    store = LakeStore(spark, tmp_path / "lake")
    state = "silver.__apply_changes_storage_src_products"
    store.overwrite(state, spark.createDataFrame([
        (1, (1, "t1"), True, NOW - timedelta(hours=30)),   # old tombstone: expires
        (2, (2, "t2"), True, NOW - timedelta(hours=2)),    # recent tombstone: kept
        (3, (3, "t3"), False, NOW - timedelta(hours=30)),  # old but live: kept
    ], "id long, __seq struct<position: long, txn: string>, __deleted boolean, __updated_at timestamp"))
    store.append(CHANGES, spark.createDataFrame([change(1, "DELETE", 1), change(2, "UPDATE", 2)], CHANGE_STREAM_SCHEMA))
    compaction.compact(store, CHANGES)

    results = {r["table"]: r["expired"] for r in tombstones.expire(store, 24, now=NOW)}
    assert results == {state: 1, "silver.src_changes_compacted": 1}  # the compacted DELETE is 9 days old
    assert sorted(r["id"] for r in store.read(state).collect()) == [2, 3]


def test_optimize_and_vacuum_leave_streamed_tables_unoptimized(spark, tmp_path):
    store = LakeStore(spark, tmp_path / "lake")
    for table in ("silver.streamed", "silver.batch_read"):
        for i in range(3):
            # one partition, one file (Spark writes an empty partition's file too, outside the log)
            store.append(table, spark.createDataFrame([(i,)], "id long").coalesce(1))
    results = {r["table"]: r for r in maintenance.optimize_and_vacuum(
        store, 0, True, {"silver.streamed": ["silver.reader"]})}
    assert results["silver.batch_read"]["optimize"] == {"files_added": 1, "files_removed": 3}
    assert results["silver.batch_read"]["vacuumed_files"] == 3
    assert results["silver.streamed"]["optimize"] == "skipped: read as a stream by silver.reader"
    assert len(store.read("silver.batch_read").inputFiles()) == 1
    assertDataFrameEqual(store.read("silver.batch_read"), spark.createDataFrame([(0,), (1,), (2,)], "id long"))


def test_a_short_retention_is_refused_before_any_work(spark, tmp_path):
    with pytest.raises(maintenance.RetentionTooShort, match="below Delta's 168 h"):
        housekeeping(spark, LakeStore(spark, tmp_path / "lake"), None, tmp_path / "landing", tmp_path / "lake",
                     Options(retention_hours=24))
