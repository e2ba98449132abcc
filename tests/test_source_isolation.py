"""Issue 57 through the demo's pipeline and config (conf/onboarding.yml): a source onboarded
before anything landed for it, then a table of one source that fails while the other source is
built in full. One lake, two updates:

1. only ``shop``'s fixture files landed: the update is green, ``shop_pg`` waits for its first file;
2. ``shop_pg``'s files land, and ``shop`` renames the key column of ``shop.orders`` and inserts a
   row keyed by it: ``shop.orders`` stops with its error, every ``shop_pg`` table is built.
"""

from __future__ import annotations

import json
import shutil

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.cli import main
from cdc_lakehouse.storage import DeltaRsStore
from lake_helpers import REPO
from silver_support import expected_rows

FIXTURES = REPO / "fixtures" / "landing"
RENAME = "ALTER TABLE shop.orders RENAME COLUMN order_id TO id"


def _event(pos: int, etype: str, **kw) -> dict:
    return {"server_id": 1, "file": "mysql-bin.000004", "pos": pos, "ts": 1772447000, "gtid": None, "type": etype,
            "xid": None, "thread_id": None, "schema": None, "table": None, "primary_key": None, "rows": None,
            "query": None, **kw}


def _renamed_key_events() -> list[dict]:
    row = {"id": 9001, "customer_id": 20, "status": "new", "total": 1.5, "created_at": "2026-03-02T10:30:00Z"}
    return [
        _event(4, "ddl", schema="shop", table="orders", query=RENAME),
        _event(100, "begin", thread_id=7),
        _event(200, "insert", schema="shop", table="orders", primary_key=["id"], rows=[{"after": row}]),
        _event(300, "commit", xid=9001),
    ]


def _run(landing, lake) -> int:
    return main(["run", "--config", str(REPO / "conf/onboarding.yml"), "--landing", str(landing), "--lake", str(lake)])


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("source_isolation")
    landing, lake = root / "landing", root / "lake"
    shutil.copytree(FIXTURES / "shop", landing / "shop")
    first = _run(landing, lake)
    store = DeltaRsStore(spark, lake)
    health = store.read("gold.replication_health").localCheckpoint()
    counts = {name: store.read(name).count() for name in ("silver.shop_changes", "gold.audit_log", "gold.shop_orders")}
    shutil.copytree(FIXTURES / "shop_pg", landing / "shop_pg")
    binlog = landing / "shop" / "binlog" / "mysql-bin.000004.jsonl"
    binlog.write_text("".join(json.dumps(e) + "\n" for e in _renamed_key_events()))
    second = _run(landing, lake)
    return {"codes": (first, second), "health": health, "counts": counts, "store": store}


def _health(df) -> dict[str, tuple[str, str | None]]:
    return {r["source"]: (r["status"], r["reason"]) for r in df.collect()}


def test_a_source_with_nothing_landed_runs_green_and_waits(spark, lake):
    assert lake["codes"][0] == 0
    health = _health(lake["health"])
    assert health["shop"] == ("ok", None)
    assert health["shop_pg"][0] == "waiting" and "first landing file of shop_pg" in health["shop_pg"][1]


def test_every_landed_row_change_is_applied_held_or_quarantined(spark, lake):
    """applied + held + quarantined = input, for the source that landed (update 1: none held or
    quarantined); the source that did not land has empty tables."""
    store = lake["store"]
    events = store.read("bronze.shop_binlog_events").filter(F.col("type").isin("insert", "update", "delete"))
    landed = events.filter(F.col("file") != "mysql-bin.000004").agg(F.sum(F.json_array_length("rows"))).first()[0]
    assert lake["counts"]["silver.shop_changes"] > 0
    applied = store.read("silver.shop_changes").filter(F.col("txn_id") != "xid:9001").agg(F.sum("op_count")).first()[0]
    quarantined = store.read("bronze.shop_binlog_events_quarantine").count()
    held = store.read("silver.shop_transactions").filter(F.col("status") != "committed").count()
    assert (held, quarantined) == (0, 0)
    assert applied + held + quarantined == landed


def test_a_failed_table_stops_the_update_but_not_the_other_source(spark, lake):
    assert lake["codes"][1] == 2
    store = lake["store"]
    for table in ("orders", "customers", "products", "order_items"):
        expected = spark.createDataFrame(expected_rows("shop_pg", table))
        got = store.read(f"gold.shop_pg_{table}").select(*expected.columns)
        assertDataFrameEqual(got, expected.select(*[F.col(c).cast(got.schema[c].dataType) for c in expected.columns]))
    audited = store.read("gold.audit_log").groupBy("source").count().collect()
    assert {r["source"] for r in audited} == {"shop", "shop_pg"}


def test_the_event_log_and_health_name_the_stopped_table(spark, lake):
    store = lake["store"]
    log = store.read("pipeline.event_log")
    last = log.agg(F.max_by("update_id", "timestamp")).first()[0]
    failed = [r["target"] for r in log.filter((F.col("update_id") == last) & (F.col("status") == "FAILED")).collect()]
    assert "silver.shop_orders" in failed
    health = _health(store.read("gold.replication_health"))
    assert health["shop_pg"] == ("ok", None)
    status, reason = health["shop"]
    assert status == "stopped" and "silver.shop_orders" in reason
