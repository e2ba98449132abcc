"""Silver on the shop fixtures: replicas equal the source state (duplicate and shuffled delivery:
test_reliability_pipeline.py, on a workload with more awkward cases)."""

from __future__ import annotations

import json
import shutil

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.storage import LakeStore
from silver_support import FIXTURES, TABLES, assert_replica_equals_source, onboarding_for, run_project

SILVER = ("bronze", "silver")  # what the tests below check; gold has tests of its own


# Both sources are in the demo lake (conftest): one pipeline run on the fixtures serves both.
@pytest.fixture(scope="module")
def binlog_lake(demo_lake):
    return demo_lake


@pytest.fixture(scope="module")
def shadow_lake(demo_lake):
    return demo_lake


@pytest.mark.parametrize("table", TABLES)
def test_binlog_replica_equals_source_state(spark, binlog_lake, table):
    assert_replica_equals_source(spark, binlog_lake, "shop", table)


@pytest.mark.parametrize("table", TABLES)
def test_shadow_replica_equals_source_state(spark, shadow_lake, table):
    """Partial updates (explicit NULLs included) and key changes rebuilt into full rows; the
    demo onboarding hashes shop_pg's customer e-mails."""
    assert_replica_equals_source(spark, shadow_lake, "shop_pg", table, hashed=("email",) if table == "customers" else ())


def test_shadow_transaction_recorded_twice_uses_the_latest_commit_time(spark, shadow_lake):
    changes = LakeStore(spark, shadow_lake).read("silver.shop_pg_changes").filter("txn_id = '7475'")
    times = {r["commit_ts"] for r in changes.select("commit_ts").distinct().collect()}
    assert len(times) == 1
    txns = [json.loads(line) for f in sorted((FIXTURES / "landing/shop_pg/shadow/_transactions").glob("*.jsonl"))
            for line in f.read_text().splitlines()]
    latest = max(t["end_ts"] for t in txns if t["txn_id"] == "7475")
    assert times.pop().isoformat().replace("+00:00", "") == latest.rstrip("Z")


def test_history_ends_in_the_current_state(spark, binlog_lake):
    store = LakeStore(spark, binlog_lake)
    current = store.read("silver.shop_orders_history").filter(F.col("__END_AT").isNull()).drop("__START_AT", "__END_AT")
    assertDataFrameEqual(current, store.read("silver.shop_orders"))


def test_transactions_table(spark, binlog_lake):
    txns = LakeStore(spark, binlog_lake).read("silver.shop_transactions")
    by_status = {r["status"]: r["count"] for r in txns.groupBy("status").count().collect()}
    assert by_status == {"committed": 286, "rolled_back": 14}
    no_xid = txns.filter(F.col("xid").isNull() & (F.col("status") == "committed") & F.col("ddl").isNull())
    assert sorted(r["txn_id"] for r in no_xid.collect()) == ["gtid:0-1-135", "pos:1:mysql-bin.000003:5305"]
    order_42 = txns.filter(F.array_contains("tables", "shop.orders")).join(
        LakeStore(spark, binlog_lake).read("silver.shop_changes").filter("table = 'orders' AND key = '{\"order_id\":\"42\"}'"),
        "txn_id",
    )
    assert sorted({(r["user"], r["role"]) for r in order_42.collect()}) == [
        ("alice", "app_writer"), ("bob", "app_writer"), ("carol", "support"), ("dave", "admin"),
    ]


def test_rolled_back_work_is_never_applied(spark, binlog_lake):
    store = LakeStore(spark, binlog_lake)
    rolled_back = store.read("silver.shop_transactions").filter("status = 'rolled_back'").select("txn_id")
    assert store.read("silver.shop_changes").join(rolled_back, "txn_id").count() == 0


def _deliver(files, landing):
    for src, name in files:
        dest = landing / src.relative_to(FIXTURES / "landing").parent / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dest)


def test_transaction_split_across_runs_is_held_then_applied(spark, tmp_path):
    """GTID 0-1-299 begins in mysql-bin.000002 and commits in mysql-bin.000003."""
    onboarding = onboarding_for(tmp_path, {"shop"})
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    binlog = FIXTURES / "landing/shop/binlog"
    _deliver([(f, f.name) for f in (FIXTURES / "landing/shop/sessions").glob("*.jsonl")], landing)
    _deliver([(binlog / n, n) for n in ("mysql-bin.000001.jsonl", "mysql-bin.000002.jsonl")], landing)
    run_project(spark, landing, lake, onboarding, SILVER)
    store = LakeStore(spark, lake)
    held = store.read("silver.shop_transactions").filter("gtid = '0-1-299'").select("status", "txn_id").collect()
    assert [r["status"] for r in held] == ["open"]
    assert store.read("silver.shop_changes").filter("txn_id = 'gtid:0-1-299' OR txn_id LIKE 'xid:%'").filter(
        F.col("txn_id") == held[0]["txn_id"]
    ).count() == 0

    _deliver([(binlog / "mysql-bin.000003.jsonl", "mysql-bin.000003.jsonl")], landing)
    run_project(spark, landing, lake, onboarding, SILVER)
    status = store.read("silver.shop_transactions").filter("gtid = '0-1-299'").select("status").collect()
    assert [r["status"] for r in status] == ["committed"]
    for table in TABLES:
        assert_replica_equals_source(spark, lake, "shop", table)


def test_shadow_transactions_table(spark, shadow_lake):
    txns = LakeStore(spark, shadow_lake).read("silver.shop_pg_transactions")
    assert txns.filter("status = 'committed'").count() == txns.select("txn_id").distinct().count()
    assert txns.filter("txn_id = '7475'").count() == 1  # recorded twice, listed once
    row = txns.filter("txn_id = '7567'").first()  # alice inserts order 42
    assert (row["user"], row["role"], row["status"]) == ("alice", "app_writer", "committed")
    assert "shop.orders" in row["tables"]
