"""Binlog transaction assembly from held state (silver/binlog_held.py): a batch reads the new
events and what is still held, never all of bronze, and gives what assembling from all of
bronze gives, with open transactions, late and re-delivered files."""

from __future__ import annotations


import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.silver import binlog_held
from cdc_lakehouse.silver import binlog_transactions as bt
from cdc_lakehouse.silver.transactions_table import binlog_transactions_table
from cdc_lakehouse.storage import DeltaRsStore
from lake_helpers import write_jsonl
from silver_support import onboarding_for, run_project

STATE = "silver.__flow_state_shop_binlog_changes"
TRANSACTIONS = "silver.shop_transactions"
CUSTOMER = ["customer_id"]


def _event(pos: int, etype: str, file: str = "mysql-bin.000001", **fields) -> dict:
    return {"server_id": 1, "file": file, "pos": pos, "ts": 1772442000 + pos // 100, "gtid": None,
            "type": etype, "xid": None, "thread_id": None, "schema": None, "table": None,
            "primary_key": None, "rows": None, "query": None, **fields}


def _insert(pos: int, customer: int, name: str, file: str = "mysql-bin.000001") -> dict:
    row = {"customer_id": customer, "name": name, "email": f"{name}@x", "city": "Oslo", "tier": "gold", "phone": None}
    return _event(pos, "insert", file, schema="shop", table="customers", primary_key=CUSTOMER, rows=[{"after": row}])


def _transaction(begin: int, customers: list[tuple[int, str]], commit: bool = True, file: str = "mysql-bin.000001") -> list[dict]:
    events = [_event(begin, "begin", file, thread_id=7)]
    events += [_insert(begin + 10 * (i + 1), c, n, file) for i, (c, n) in enumerate(customers)]
    return events + ([_event(begin + 90, "commit", file, xid=begin)] if commit else [])


@pytest.fixture(scope="module")
def held(spark, tmp_path_factory):
    """One lake, updated step by step; each step's replica and state are kept for the tests."""
    root = tmp_path_factory.mktemp("held")
    landing, lake = root / "landing", root / "lake"
    onboarding = onboarding_for(root, {"shop"})
    binlog = landing / "shop" / "binlog"
    steps = {}

    def update(name: str, files: dict[str, list[dict]]) -> None:
        for file, events in files.items():
            write_jsonl(binlog / file, events)
        run_project(spark, landing, lake, onboarding, layers=("bronze", "silver"))
        store = DeltaRsStore(spark, lake)
        steps[name] = (store.read("silver.shop_customers").orderBy("customer_id").collect(),
                       store.read(STATE).collect() if store.exists(STATE) else [],
                       store.read(TRANSACTIONS))

    # 1: A committed, B open (its commit lands in step 2), C committed after B's begin.
    update("open", {"1.jsonl": _transaction(100, [(1, "ann")]) + _transaction(200, [(2, "bob")], commit=False)
                    + _transaction(300, [(3, "cy")])})
    update("completed", {"2.jsonl": [_event(290, "commit", xid=200)]})
    update("redelivered", {"1-again.jsonl": _transaction(100, [(1, "ann")])})  # below the floor: late
    update("new", {"3.jsonl": _transaction(400, [(4, "dee")], file="mysql-bin.000002")})
    return steps, lake


def _names(rows) -> dict[int, str]:
    return {r["customer_id"]: r["name"] for r in rows}


def test_an_open_transaction_and_what_follows_it_are_held_until_its_commit_lands(held):
    steps, _ = held
    replica, state, _ = steps["open"]
    assert _names(replica) == {1: "ann", 3: "cy"}
    events = [r for r in state if r["type"] != binlog_held.FLOOR]
    assert min(r["pos"] for r in events) == 200  # B's begin: A is not held
    assert [r["pos"] for r in state if r["type"] == binlog_held.FLOOR] == [(1 << 32) + 200]  # an lsn


def test_a_completed_transaction_is_applied_and_leaves_the_state(held):
    steps, _ = held
    replica, state, _ = steps["completed"]
    assert _names(replica) == {1: "ann", 2: "bob", 3: "cy"}
    assert [r["type"] for r in state] == [binlog_held.FLOOR]  # nothing held: the floor only


def test_a_late_or_redelivered_file_changes_nothing_and_new_events_still_apply(held):
    steps, _ = held
    assert _names(steps["redelivered"][0]) == {1: "ann", 2: "bob", 3: "cy"}
    assert _names(steps["new"][0]) == {1: "ann", 2: "bob", 3: "cy", 4: "dee"}
    assert [r["type"] for r in steps["new"][1]] == [binlog_held.FLOOR]


def _status(txns) -> dict[int, tuple[str, int]]:
    """(status, rows_changed) by the begin's position in the file."""
    return {r["begin_position"] - (1 << 32): (r["status"], r["rows_changed"]) for r in txns.collect()}


def test_the_transactions_table_follows_a_transaction_from_unterminated_to_committed(held):
    steps, _ = held
    assert _status(steps["open"][2]) == {100: ("committed", 1), 200: ("unterminated", 0), 300: ("committed", 1)}
    assert _status(steps["completed"][2]) == {100: ("committed", 1), 200: ("committed", 1), 300: ("committed", 1)}
    assert _status(steps["redelivered"][2]) == _status(steps["completed"][2])


def test_the_transactions_table_kept_batch_by_batch_equals_one_built_from_all_of_bronze(spark, held):
    steps, lake = held
    store = DeltaRsStore(spark, lake)
    whole = binlog_transactions_table(store.read("bronze.shop_binlog_events"), store.read("bronze.shop_sessions"),
                                      store.read("silver.shop_changes"))
    assertDataFrameEqual(steps["new"][2], whole)


def test_assembly_reads_no_bronze_file_when_no_event_is_late(spark, held):
    """The batch's events come from the new rows and the state: all of bronze is not read."""
    _, lake = held
    store = DeltaRsStore(spark, lake)
    bronze = store.read("bronze.shop_binlog_events")
    landed = bronze.filter("file = 'mysql-bin.000002' AND pos = 410").collect()[0].asDict()
    new = spark.createDataFrame([{**landed, "pos": 510}], bronze.schema)  # after the floor
    events = binlog_held.assembly_events(new, bronze, store.read(STATE))
    assert not set(bronze.inputFiles()) & set(events.inputFiles())
    assert events.count() == 1


def test_held_state_equals_the_suffix_of_the_log_from_the_first_open_transaction(spark):
    events = spark.createDataFrame(
        [(1, "f.1", p, t) for p, t in [(10, "begin"), (20, "insert"), (30, "commit"), (40, "begin"),
                                       (50, "insert"), (60, "begin"), (70, "insert"), (80, "commit")]]
        + [(2, "f.1", p, t) for p, t in [(15, "insert"), (25, "commit")]],  # a begin not landed yet
        "server_id long, file string, pos long, type string",
    ).withColumn("gtid", F.lit(None).cast("string")).withColumn("ts", F.lit(0).cast("long")) \
        .withColumn("xid", F.lit(None).cast("long")).withColumn("thread_id", F.lit(None).cast("long")) \
        .withColumn("query", F.lit(None).cast("string")).withColumn("table", F.lit(None).cast("string")) \
        .withColumn("_source", F.lit("s"))
    distinct = bt.distinct_events(events)
    floors = binlog_held.floors_of(distinct, bt.transactions(distinct, None))
    # Server 1: the begin at 40 is followed by another begin (unterminated); server 2: an
    # insert whose begin has not landed.
    assertDataFrameEqual(floors, spark.createDataFrame(
        [(1, (1 << 32) + 40), (2, (1 << 32) + 15)], "server_id long, floor long"))
