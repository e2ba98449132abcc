"""Issue 57 through the demo's pipeline and config (conf/onboarding.yml, two of each source's
tables: the others' flows are the same): a source onboarded before anything landed for it, then
a table of one source that fails while the other source is built in full. One lake, two updates:

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
from cdc_lakehouse.storage import LakeStore
from lake_helpers import REPO
from silver_support import expected_rows, onboarding_for

FIXTURES = REPO / "fixtures" / "landing"
RENAME = "ALTER TABLE shop.orders RENAME COLUMN order_id TO id"
TABLES = ("orders", "customers")  # the failing table and one that carries on, in each source


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
    onboarding = onboarding_for(lake.parent, {"shop", "shop_pg"}, set(TABLES))
    return main(["run", "--config", str(onboarding), "--landing", str(landing), "--lake", str(lake)])


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("source_isolation")
    landing, lake = root / "landing", root / "lake"
    shutil.copytree(FIXTURES / "shop", landing / "shop")
    first = _run(landing, lake)
    store = LakeStore(spark, lake)
    health = store.read("gold.replication_health").localCheckpoint()
    counts = {name: store.read(name).count() for name in ("silver.shop_pg_changes", "silver.shop_pg_transactions")}
    shutil.copytree(FIXTURES / "shop_pg", landing / "shop_pg")
    binlog = landing / "shop" / "binlog" / "mysql-bin.000004.jsonl"
    binlog.write_text("".join(json.dumps(e) + "\n" for e in _renamed_key_events()))
    second = _run(landing, lake)
    return {"codes": (first, second), "health": health, "counts": counts, "store": store, "landing": landing}


def _health(df) -> dict[str, tuple[str, str | None]]:
    return {r["source"]: (r["status"], r["reason"]) for r in df.collect()}


def test_a_source_with_nothing_landed_runs_green_and_waits(spark, lake):
    assert lake["codes"][0] == 0
    health = _health(lake["health"])
    assert health["shop"] == ("ok", None)
    assert health["shop_pg"][0] == "waiting" and "first landing file of shop_pg" in health["shop_pg"][1]


LANDED = {  # landing folder (glob under <landing>/<source>/) -> its bronze table
    ("shop", "binlog/*.jsonl"): "binlog_events", ("shop", "sessions/*.jsonl"): "sessions",
    ("shop_pg", "shadow/_transactions/*.jsonl"): "shadow_transactions", ("shop_pg", "shadow/shop.*/*.jsonl"): "shadow_changes",
}


def _lines(landing, source: str, pattern: str) -> int:
    return sum(len([line for line in f.read_text().splitlines() if line.strip()]) for f in (landing / source).glob(pattern))


def test_every_landed_line_is_kept_or_quarantined_and_none_is_held(spark, lake):
    """input = kept + quarantined for every landing folder, and no transaction is held (a held
    one would be neither applied nor dropped); the source that had not landed had empty tables."""
    store = lake["store"]
    for (source, pattern), kind in LANDED.items():
        kept = store.read(f"bronze.{source}_{kind}").count()
        quarantined = store.read(f"bronze.{source}_{kind}_quarantine").count()
        assert kept + quarantined == _lines(lake["landing"], source, pattern) > 0, (source, kind)
    for source in ("shop", "shop_pg"):
        statuses = {r["status"] for r in store.read(f"silver.{source}_transactions").select("status").distinct().collect()}
        assert statuses <= {"committed", "rolled_back"}, (source, statuses)
    assert lake["counts"]["silver.shop_pg_changes"] == lake["counts"]["silver.shop_pg_transactions"] == 0


def test_a_failed_table_stops_the_update_but_not_the_other_source(spark, lake):
    assert lake["codes"][1] == 2
    store = lake["store"]
    for table in TABLES:
        expected = spark.createDataFrame(expected_rows("shop_pg", table)).drop("email")  # hashed in silver and gold
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
