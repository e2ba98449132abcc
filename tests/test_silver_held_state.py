"""Binlog transaction assembly from held state (silver/binlog_held.py): a batch reads the new
events and what is still held, never all of bronze, and gives what assembling from all of
bronze gives, with open transactions, late and re-delivered files."""

from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.silver import binlog_held
from cdc_lakehouse.silver import binlog_transactions as bt
from cdc_lakehouse.silver.transactions_table import binlog_transactions_table
from cdc_lakehouse.storage import LakeStore
from held_steps import STATE


def test_an_open_transaction_and_what_follows_it_are_held_until_its_commit_lands(held_lake):
    step = held_lake.steps["open"]
    assert step.silver == {1: "ann", 3: "cy"}
    state = step.state
    events = [r for r in state if r["type"] not in binlog_held.MARKERS]
    assert min(r["pos"] for r in events) == 200  # B's begin: A is not held
    assert [r["pos"] for r in state if r["type"] == binlog_held.FLOOR] == [(1 << 32) + 200]  # an lsn


def test_a_completed_transaction_is_applied_and_leaves_the_state(held_lake):
    step = held_lake.steps["completed"]
    assert step.silver == {1: "ann", 2: "bob", 3: "cy", 5: "eve", 6: "fay"}
    assert _markers_only(step.state)  # nothing held


def test_a_late_or_redelivered_file_changes_nothing_and_new_events_still_apply(held_lake):
    steps = held_lake.steps
    assert steps["redelivered"].silver == {1: "ann", 2: "bob", 3: "cy", 5: "eve", 6: "fay"}
    assert steps["new"].silver == {1: "ann", 2: "bob", 3: "cy", 4: "dee", 5: "eve", 6: "fay"}
    assert _markers_only(steps["new"].state)


def _markers_only(state: list) -> bool:
    """The state holds the floor and the landing order's marker: no epoch inferred, server 1 last."""
    landed = [(r["server_id"], r["epoch"], r["pos"]) for r in state if r["type"] == binlog_held.LANDED]
    return sorted(r["type"] for r in state) == sorted(binlog_held.MARKERS) and landed == [(1, 0, 0)]


def _status(txns) -> dict[int, tuple[str, int]]:
    """(status, rows_changed) by the begin's position in the file."""
    return {r["begin_position"] - (1 << 32): (r["status"], r["rows_changed"]) for r in txns.collect()}


def test_the_transactions_table_follows_a_transaction_from_unterminated_to_committed(held_lake):
    steps = held_lake.steps
    assert _status(steps["open"].transactions) == {100: ("committed", 1), 200: ("unterminated", 0), 300: ("committed", 1),
                                                   600: ("incomplete", 0)}
    assert _status(steps["completed"].transactions) == {100: ("committed", 1), 200: ("committed", 1), 300: ("committed", 1),
                                                        600: ("committed", 2)}
    assert _status(steps["redelivered"].transactions) == _status(steps["completed"].transactions)


def test_a_transaction_with_a_quarantined_line_is_held_naming_it_until_the_corrected_line_lands(spark, held_lake):
    """Issue 41 case 1: G's other insert is not applied alone; gold shows why G is held."""
    steps = held_lake.steps
    assert 5 not in steps["open"].silver
    held = steps["open"].transactions.filter("status = 'incomplete'").first()
    assert held.held_because.startswith("quarantined line 11 of ") and held.held_because.endswith("1.jsonl: unparseable line: not one JSON object: NaN is not JSON")
    assert steps["completed"].transactions.filter("held_because IS NOT NULL").count() == 0
    gold_held = LakeStore(spark, held_lake.lake).read("gold.held_transactions")
    assert gold_held.count() == 0  # as of the last step


def test_the_transactions_table_kept_batch_by_batch_equals_one_built_from_all_of_bronze(spark, held_lake):
    store = LakeStore(spark, held_lake.lake)
    whole = binlog_transactions_table(store.read("bronze.shop_binlog_events"), store.read("bronze.shop_sessions"),
                                      store.read("silver.shop_changes"))
    assertDataFrameEqual(held_lake.steps["new"].transactions, whole)


def test_assembly_reads_no_bronze_file_when_no_event_is_late(spark, held_lake):
    """The batch's events come from the new rows and the state: all of bronze is not read."""
    store = LakeStore(spark, held_lake.lake)
    bronze = store.read("bronze.shop_binlog_events")
    landed = bronze.filter("file = 'mysql-bin.000002' AND pos = 510").collect()[0].asDict()
    new = spark.createDataFrame([{**landed, "pos": 610}], bronze.schema)  # after the floor
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
        .withColumn("query", F.lit(None).cast("string")).withColumn("schema", F.lit(None).cast("string")) \
        .withColumn("table", F.lit(None).cast("string")) \
        .withColumn("_source", F.lit("s"))
    distinct = bt.distinct_events(events)
    floors = binlog_held.floors_of(distinct, bt.transactions(distinct, None))
    # Server 1: the begin at 40 is followed by another begin (unterminated); server 2: an
    # insert whose begin has not landed is not held (its begin, once it lands, is late).
    assertDataFrameEqual(floors, spark.createDataFrame(
        [(1, (1 << 32) + 40), (2, (1 << 32) + 26)], "server_id long, floor long"))
