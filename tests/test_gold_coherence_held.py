"""Gold waits for a held transaction (CONTRACT §6): while the commit of an earlier binlog
transaction has not landed, a later complete one is in silver but not in gold, whose replicas
would otherwise show a state the source never had (the later row without the earlier one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.storage import LakeStore
from silver_support import GOLD_WITHOUT_HEALTH, run_project

EXCEPT = ["__op", "__sequence", "__commit_ts", "__txn_id"]
ROW = {"schema": "app", "table": "t", "primary_key": ["id"]}


def _flow() -> dict:
    return {
        "data_flow_id": "1", "data_flow_group": "g", "source_format": "cloudFiles",
        "source_details": {"source_database": "app", "source_table": "t"},
        "bronze_database_dev": "bronze", "bronze_table": "b_binlog_events",
        "silver_database_dev": "silver", "silver_table": "b_t",
        "silver_cdc_apply_changes": {"keys": ["id"], "sequence_by": "__sequence", "scd_type": "1",
                                     "apply_as_deletes": "__op = 'DELETE'", "except_column_list": EXCEPT},
        "cdc_lakehouse": {"capture": "binlog", "source": "b"},
    }


def _event(pos: int, kind: str, gtid: str, **fields) -> dict:
    event = {"server_id": 1, "file": "mysql-bin.000001", "pos": pos, "ts": 1772442000 + pos // 100, "gtid": gtid,
             "type": kind, "xid": None, "thread_id": None, "schema": None, "table": None, "primary_key": None,
             "rows": None, "query": None}
    return {**event, **fields}


def _insert(pos: int, gtid: str, key: int) -> dict:
    return _event(pos, "insert", gtid, rows=[{"after": {"id": key, "a": f"t{key}"}}], **ROW)


def _write(path: Path, events: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    """Transaction 1 (row 1) without its commit, transaction 2 (row 2) complete; then the commit."""
    root = tmp_path_factory.mktemp("gold_held")
    landing, lake, onboarding = root / "landing", root / "lake", root / "onboarding.yml"
    onboarding.write_text(yaml.safe_dump([_flow()]))
    binlog = landing / "b" / "binlog"
    _write(binlog / "a.jsonl", [_event(100, "begin", "0-1-1", thread_id=1), _insert(200, "0-1-1", 1)])
    _write(binlog / "c.jsonl", [_event(400, "begin", "0-1-2", thread_id=1), _insert(500, "0-1-2", 2),
                                _event(600, "commit", "0-1-2", xid=2)])
    run_project(spark, landing, lake, onboarding, GOLD_WITHOUT_HEALTH)
    store = LakeStore(spark, lake)
    # Locally an AUTO CDC target is created with its first change (gold.b_t has none yet).
    first = {name: store.read(name).localCheckpoint() for name in ("silver.b_t", "gold.b_t") if store.exists(name)}
    _write(binlog / "b.jsonl", [_event(300, "commit", "0-1-1", xid=1)])
    run_project(spark, landing, lake, onboarding, GOLD_WITHOUT_HEALTH)
    return first, store


def _ids(spark, *ids):
    return spark.createDataFrame([(i,) for i in ids], "id long")


def test_silver_applies_the_later_transaction_while_gold_waits(spark, runs):
    first, _ = runs
    assertDataFrameEqual(first["silver.b_t"].select("id"), _ids(spark, 2))
    assert "gold.b_t" not in first or first["gold.b_t"].count() == 0


def test_gold_shows_both_once_the_commit_lands(spark, runs):
    _, store = runs
    assertDataFrameEqual(store.read("gold.b_t").select("id"), _ids(spark, 1, 2))
    watermark = store.read("gold.replication_watermark").select("txn_id", "transactions").collect()
    assert [tuple(r) for r in watermark] == [("xid:2", 2)]
