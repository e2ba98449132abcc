"""Gold applies only the changes between the old and the new commit point (gold/coherent.py):
an update reads what the change stream gained, plus what it held back past the point, and
gold stays coherent while a binlog transaction is held."""

from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.gold.audit import KNOWN, due_audit_transactions, source_transactions, streamed_due_transactions
from cdc_lakehouse.storage import LakeStore

AUDIT_FLOW = "gold_shop_audit_log"
REPLICA_FLOW = "gold_shop_customers"


def test_gold_holds_back_what_follows_a_held_transaction(held_lake):
    step = held_lake.steps["open"]
    assert step.gold == {1: "ann"}
    assert step.audited == 1


def test_held_back_changes_are_applied_once_the_point_passes_them(held_lake):
    step = held_lake.steps["completed"]
    assert step.gold == {1: "ann", 2: "bob", 3: "cy", 5: "eve", 6: "fay"}
    assert step.audited == 5
    # The stream gained B's and G's changes only; C's came from the flow's held state.
    assert step.result.event(AUDIT_FLOW).rows_read == 3


def test_a_redelivered_transaction_changes_nothing_in_gold(held_lake):
    step = held_lake.steps["redelivered"]
    assert step.gold == {1: "ann", 2: "bob", 3: "cy", 5: "eve", 6: "fay"}
    assert step.audited == 5


def test_an_update_reads_only_the_new_changes(held_lake):
    step = held_lake.steps["new"]
    assert step.gold == {1: "ann", 2: "bob", 3: "cy", 4: "dee", 5: "eve", 6: "fay"}
    assert step.audited == 6
    assert step.result.event(AUDIT_FLOW).rows_read == 1
    assert step.result.event(REPLICA_FLOW).rows_read == 1
    # The audit log's MERGE only inserted, an append (storage/small_rewrite.py): its views take
    # only the touched rows and groups.
    for view in ("gold.audit_row_last_change", "gold.audit_changes_by_user_day"):
        assert step.result.event(view).message.startswith("recomputed the partitions"), view


def _audited_transactions(step) -> dict[str, tuple[int, str]]:
    return {r["txn_id"]: (r["rows_changed"], r["sequence"]["position"]) for r in step.audit_transactions.collect()}


def test_audit_transactions_follow_the_commit_point(held_lake):
    """A transaction is audited once the point passes it; one without changes too (E)."""
    steps = held_lake.steps
    assert [n for n, _ in _audited_transactions(steps["open"]).values()] == [1]
    assert sorted(n for n, _ in _audited_transactions(steps["completed"]).values()) == [1, 1, 1, 2]
    assert _audited_transactions(steps["redelivered"]) == _audited_transactions(steps["completed"])
    assert sorted(n for n, _ in _audited_transactions(steps["new"]).values()) == [0, 1, 1, 1, 1, 2]


def test_audit_transactions_kept_update_by_update_equal_one_built_from_the_whole_stream(spark, held_lake):
    store = LakeStore(spark, held_lake.lake)
    whole = source_transactions(store.read("silver.shop_transactions"), store.read("silver.shop_changes"),
                                store.read("gold.replication_watermark"), "shop")
    assertDataFrameEqual(held_lake.steps["new"].audit_transactions, whole)
    assert held_lake.steps["new"].audit_transactions.filter(F.col("rows_changed") == 0).count() == 1


def test_the_streaming_form_carries_transactions_without_changes_with_the_next_change(spark, held_lake):
    """On Databricks a micro-batch cannot aggregate: each due change brings its transaction and
    the ones without changes just before it (E rides with D). There gold has no commit point
    (every new change is due), so none is left out for being past one."""
    store = LakeStore(spark, held_lake.lake)
    changes, txns = store.read("silver.shop_changes"), store.read("silver.shop_transactions")
    points = store.read("gold.replication_watermark")
    whole = source_transactions(txns, changes, points, "shop")
    assertDataFrameEqual(streamed_due_transactions(changes, txns, changes, "shop"), whole)


def test_a_later_row_of_a_transaction_that_knows_more_of_its_changes_wins(spark, held_lake):
    """A shadow transaction's change rows may land over several updates at one sequence: the
    row with more of its changes sorts after (AUTO CDC applies only a greater sequence_by)."""
    store = LakeStore(spark, held_lake.lake)
    changes, txns = store.read("silver.shop_changes"), store.read("silver.shop_transactions")
    points = store.read("gold.replication_watermark")
    last = changes.orderBy(F.col("sequence").desc()).limit(1)
    first = due_audit_transactions(last, txns, changes, points, "shop").select("txn_id", KNOWN)
    grown = txns.withColumn("rows_changed", F.col("rows_changed") + 1)
    second = due_audit_transactions(last, grown, changes, points, "shop").select("txn_id", F.col(KNOWN).alias("later"))
    compared = first.join(second, "txn_id")
    assert compared.filter(F.col("later") > F.col(KNOWN)).count() == compared.count() > 0
