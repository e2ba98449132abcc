"""TRUNCATE TABLE at a binlog source (issue 38, case 2): the replicas empty at its commit point
(SCD2: the open versions close there), gold follows, and the audit log shows it.

One small lake, two updates: the first holds inserts, a TRUNCATE and an insert after it in one
batch; the second truncates again a table that then has state from the first."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.bronze import binlog_position
from cdc_lakehouse.gold.replicas import replica_as_of
from cdc_lakehouse.silver import change_stream, truncates
from cdc_lakehouse.silver.binlog_gaps import with_gaps
from cdc_lakehouse.silver.apply_policy import anomalies
from cdc_lakehouse.silver.declared_types import declared_table
from cdc_lakehouse.silver.replica_input import history_changes, replica_changes
from cdc_lakehouse.storage import DeltaRsStore
from held_steps import event, transaction
from lake_helpers import write_jsonl
from silver_support import onboarding_for, run_project
from test_gold_units import ANN, BOB, change, customers_flow, names, stream


def truncate(pos: int, file: str = "mysql-bin.000001") -> dict:
    return event(pos, "ddl", file, schema="shop", table="customers", thread_id=7,
                 query="/* app */ TRUNCATE TABLE `customers`")


STEPS = [
    ("1.jsonl", transaction(100, [(1, "ann"), (2, "bob")]) + [truncate(200)] + transaction(300, [(3, "cy")])),
    ("2.jsonl", transaction(400, [(4, "dee")]) + [truncate(500)] + transaction(600, [(5, "eve")])),
]


@dataclass
class Step:
    silver: set[int]
    gold: set[int]
    history: list  # (customer_id, __START_AT.position, __END_AT.position) of silver.shop_customers_history
    audit: list  # (operation, key) of gold.audit_log, in commit order
    lake: Path


@pytest.fixture(scope="module")
def truncated(spark, tmp_path_factory) -> list[Step]:
    root: Path = tmp_path_factory.mktemp("truncate")
    landing, lake = root / "landing", root / "lake"
    onboarding = onboarding_for(root, {"shop"})
    steps = []
    for file, events in STEPS:
        write_jsonl(landing / "shop" / "binlog" / file, events)
        run_project(spark, landing, lake, onboarding)
        store = DeltaRsStore(spark, lake)
        ids = lambda table: {r.customer_id for r in store.read(table).collect()}  # noqa: E731
        history = store.read("silver.shop_customers_history").select(
            "customer_id", F.col("__START_AT.position"), F.col("__END_AT.position"))
        audit = store.read("gold.audit_log").orderBy("sequence", "key").select("operation", "key")
        steps.append(Step(ids("silver.shop_customers"), ids("gold.shop_customers"),
                          sorted(tuple(r) for r in history.collect()), [tuple(r) for r in audit.collect()], lake))
    return steps


def test_a_truncate_empties_the_replicas_at_its_commit_point(truncated):
    assert truncated[0].silver == truncated[0].gold == {3}
    assert truncated[1].silver == truncated[1].gold == {5}


def lsn(pos: int) -> int:
    """The log position of an event in mysql-bin.000001."""
    return binlog_position.lsn(0, 1, pos)


def test_a_truncate_closes_the_open_versions_of_the_history(truncated):
    first, second = truncated
    # Versions start at their transaction's commit and end at the truncate's.
    assert first.history == [(1, lsn(190), lsn(200)), (2, lsn(190), lsn(200)), (3, lsn(390), None)]
    assert second.history == [(1, lsn(190), lsn(200)), (2, lsn(190), lsn(200)), (3, lsn(390), lsn(500)),
                              (4, lsn(490), lsn(500)), (5, lsn(690), None)]


def test_the_audit_log_shows_the_truncate(truncated):
    operations = [op for op, _ in truncated[1].audit]
    assert operations == ["INSERT", "INSERT", "TRUNCATE", "INSERT", "INSERT", "TRUNCATE", "INSERT"]
    assert [key for op, key in truncated[1].audit if op == "TRUNCATE"] == ["{}", "{}"]


def test_the_streaming_form_emits_the_truncates_the_batch_form_does(spark, truncated):
    """On Databricks the change stream is a stream-static join (silver/arrivals.py); here every
    bronze event is new, so it emits every committed transaction."""
    store = DeltaRsStore(spark, truncated[-1].lake)
    events = with_gaps(store.read("bronze.shop_binlog_events"), store.read("bronze.shop_binlog_events_quarantine"))
    sessions = store.read("bronze.shop_sessions") if store.exists("bronze.shop_sessions") else None
    streamed = change_stream._streamed_binlog_changes(events, events, sessions)
    batch = store.read("silver.shop_changes")
    of_truncates = lambda df: df.filter(F.col("op") == "TRUNCATE").select(  # noqa: E731
        "source", "schema", "table", "key", "op", "txn_id", "commit_ts", "sequence", "user", "role", "origin")
    assertDataFrameEqual(of_truncates(streamed), of_truncates(batch))
    assert of_truncates(batch).count() == 2


# -- the same logic on hand-made change streams ------------------------------------------------
def truncate_change(position: int, txn: str) -> tuple:
    return ("shop_pg", "shop", "customers", None, "TRUNCATE", None, None, None, [], 1, txn,
            datetime(2026, 3, 2, 9, 0, position), (position, txn), "alice", "app_writer", "shadow")


@pytest.fixture
def truncated_stream(spark):
    """Ann inserted (1), Bob inserted (2), Bob deleted (3), a TRUNCATE (4), Bob again (5), a
    second TRUNCATE (6), Ann again (7)."""
    return stream(spark, change(1, "t1", "INSERT", ANN), change(2, "t2", "INSERT", BOB),
                  change(3, "t3", "DELETE", BOB, before=BOB), truncate_change(4, "t4"),
                  change(5, "t5", "INSERT", BOB), truncate_change(6, "t6"), change(7, "t7", "INSERT", ANN))


@pytest.mark.parametrize(("point", "expected"), [(3, ["Ann"]), (4, []), (5, ["Bob"]), (6, []), (7, ["Ann"])])
def test_a_replica_as_of_a_commit_point_knows_the_truncates_before_it(truncated_stream, point, expected):
    assert names(replica_as_of(truncated_stream, customers_flow(), (point, f"t{point}"))) == expected


def test_the_history_takes_each_truncate_as_deletes_of_the_keys_open_at_it(truncated_stream):
    flow = customers_flow()
    typing = dict(column_filters=flow.column_filters, declared=declared_table(flow), keys=flow.keys)
    typed = replica_changes(truncated_stream, **typing)
    got = history_changes(typed, truncated_stream, **typing)
    # Bob was deleted before the first truncate (only Ann is open there), Ann was truncated
    # before the second (only Bob is): one DELETE each.
    assert sorted((r["__op"], r["customer_id"], r["__sequence"]["position"]) for r in got.collect()) == [
        ("DELETE", 1, 4), ("DELETE", 2, 3), ("DELETE", 2, 6), ("INSERT", 1, 1), ("INSERT", 1, 7),
        ("INSERT", 2, 2), ("INSERT", 2, 5)]
    assert got.schema == typed.schema


def test_a_truncate_is_no_anomaly_and_the_rows_it_removed_are_gone(spark, truncated_stream):
    assert anomalies(truncated_stream).count() == 0  # Bob and Ann inserted again after a truncate
    bob_updated = truncated_stream.unionByName(stream(spark, change(8, "t8", "UPDATE", BOB, before=BOB)))
    found = anomalies(bob_updated).select("anomaly", "detail").collect()
    assert [r.anomaly for r in found] == ["update_of_missing_key"]
    assert "(truncated in transaction t6)" in found[0].detail


def test_which_statements_truncate(spark):
    queries = {"TRUNCATE TABLE shop.a": True, "truncate a": True, "/* app */\n TRUNCATE `a`": True,
               "ALTER TABLE a TRUNCATE PARTITION p0": False, "DROP TABLE truncate_log": False,
               "TRUNCATED": False, None: False}
    found = spark.createDataFrame([(q,) for q in queries], "query string").select(
        "query", truncates.is_truncate(F.col("query")).alias("truncates"))
    assert {r.query: r.truncates for r in found.collect()} == queries
