"""Snapshot reconciliation end to end: reconcile (job step) -> pipeline update -> replicas, SCD2
history and the change stream show the corrective changes (CONTRACT §5)."""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.snapshot.sequence import SORTS_LAST
from cdc_lakehouse.storage import LakeStore
from test_snapshot_support import T0, Binlog, product, products, products_onboarding, reconcile, run, write_snapshot


def lsn(position: dict) -> int:
    return int(position["file"].rsplit(".", 1)[1]) * (1 << 32) + position["pos"]


def snap(snapshot_id: str) -> str:
    """The sequence txn of a snapshot's corrections (sorts after real transactions)."""
    return f"{SORTS_LAST}snapshot:{snapshot_id}"


def test_patent_example_replica_ends_equal_to_the_latest_snapshot(spark, tmp_path):
    """JP7754589B2's example: a snapshot at t1 holds keys 1 and 2; then key 1 changes and key 3
    is inserted; a snapshot at t3 holds keys 3 and 4. The replica ends with exactly 3 and 4, and
    history and change stream show the corrective changes."""
    landing, lake, onboarding = tmp_path / "landing", tmp_path / "lake", products_onboarding(tmp_path)
    write_snapshot(landing, "t1", [product(1, "tea", 3.5), product(2, "cocoa", 4.0)], taken_at=T0)
    [seed] = reconcile(spark, landing, lake, onboarding)
    assert (seed.status, seed.counts["inserts"]) == ("reconciled", 2)  # the first snapshot seeds

    # One update applies the seed and the later changes: AUTO CDC orders them by sequence.
    log = Binlog()
    t2 = log.txn(100, ("update", product(1, "tea", 3.5), product(1, "green tea", 3.9)),
                 ("insert", product(3, "coffee", 9.0)))
    log.write(landing, "mysql-bin.000001.jsonl")
    run(spark, landing, lake, onboarding)

    write_snapshot(landing, "t3", [product(3, "coffee", 9.0), product(4, "mate", 5.0)], position=t2,
                   taken_at=T0 + timedelta(hours=1))
    [outcome] = reconcile(spark, landing, lake, onboarding)
    assert {k: outcome.counts[k] for k in ("inserts", "updates", "deletes", "unchanged")} == {
        "inserts": 1, "updates": 0, "deletes": 2, "unchanged": 1}
    run(spark, landing, lake, onboarding)

    store = LakeStore(spark, lake)
    assertDataFrameEqual(store.read("silver.shop_products"),
                         products(spark, [(3, "coffee", 9.0), (4, "mate", 5.0)]))
    corrections = store.read("silver.shop_changes").filter("origin = 'snapshot'")
    assertDataFrameEqual(
        corrections.select("txn_id", "op", F.get_json_object("key", "$.product_id").cast("long").alias("id"),
                           "sequence.position", "user"),
        spark.createDataFrame([
            ("snapshot:t1", "INSERT", 1, 1, "snapshot"), ("snapshot:t1", "INSERT", 2, 1, "snapshot"),
            ("snapshot:t3", "DELETE", 1, lsn(t2), "snapshot"), ("snapshot:t3", "DELETE", 2, lsn(t2), "snapshot"),
            ("snapshot:t3", "INSERT", 4, lsn(t2), "snapshot"),
        ], "txn_id string, op string, id long, position long, user string"),
    )
    history = store.read("silver.shop_products_history").select(
        "product_id", "name", F.col("__START_AT.txn").alias("start"), F.col("__END_AT.txn").alias("end"))
    assertDataFrameEqual(history, spark.createDataFrame([
        (1, "tea", snap("t1"), "xid:100"), (1, "green tea", "xid:100", snap("t3")),
        (2, "cocoa", snap("t1"), snap("t3")),
        (3, "coffee", "xid:100", None), (4, "mate", snap("t3"), None),
    ], "product_id long, name string, start string, end string"))


def test_positioned_snapshot_racing_with_later_changes(spark, tmp_path):
    """A snapshot taken at position p1 arrives after later changes were applied: those later
    changes win; where nothing changed after p1 the snapshot corrects the replica, even against
    the transaction committed exactly at p1; and a change committed after p1 that lands later
    still overrides the correction."""
    landing, lake, onboarding = tmp_path / "landing", tmp_path / "lake", products_onboarding(tmp_path, scd_type=1)
    log = Binlog()
    p1 = log.txn(1, ("insert", product(1, "a", 1.0)), ("insert", product(2, "b", 2.0)))
    log.txn(2, ("update", product(1, "a", 1.0), product(1, "a2", 1.5)))
    log.txn(3, ("insert", product(3, "c", 3.0)))
    log.write(landing, "mysql-bin.000001.jsonl")
    run(spark, landing, lake, onboarding)

    # Taken at p1: it misses txn 2 and 3, and key 2 drifted at the source (a missed change).
    write_snapshot(landing, "s1", [product(1, "a", 1.0), product(2, "b-fixed", 2.0)], position=p1)
    [outcome] = reconcile(spark, landing, lake, onboarding)
    assert {k: outcome.counts[k] for k in ("inserts", "updates", "deletes", "superseded")} == {
        "inserts": 0, "updates": 1, "deletes": 0, "superseded": 2}
    assert outcome.sequence["position"] == lsn(p1)
    run(spark, landing, lake, onboarding)
    store = LakeStore(spark, lake)
    assertDataFrameEqual(store.read("silver.shop_products"), products(spark,
        [(1, "a2", 1.5), (2, "b-fixed", 2.0), (3, "c", 3.0)]))

    later = Binlog("mysql-bin.000002")
    later.txn(4, ("update", product(2, "b-fixed", 2.0), product(2, "b-later", 2.5)))
    later.write(landing, "mysql-bin.000002.jsonl")
    run(spark, landing, lake, onboarding)
    assertDataFrameEqual(store.read("silver.shop_products"), products(spark,
        [(1, "a2", 1.5), (2, "b-later", 2.5), (3, "c", 3.0)]))
    change = store.read("silver.shop_changes").filter("origin = 'snapshot'")
    assertDataFrameEqual(change.select("op", "key", "changed_columns", "before"), spark.createDataFrame(
        # before: the replica's row, in its declared types
        [("UPDATE", '{"product_id":"2"}', ["name"], '{"product_id":2,"sku":null,"name":"b","price":2.00,"stock":null}')],
        "op string, key string, changed_columns array<string>, before string"))
