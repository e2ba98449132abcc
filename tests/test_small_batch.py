"""Which batches execute without adaptive re-planning (runtime/small_batch.py), on real tables
of each store."""

from __future__ import annotations

from cdc_lakehouse.runtime.runner import run_pipeline
from cdc_lakehouse.runtime.small_batch import (
    ADAPTIVE, SMALL_BATCH_PLAN, SMALL_BYTES, SMALL_ROWS, TINY_BATCH_PLAN, TINY_BYTES, batch_plan,
)
from cdc_lakehouse.storage import LakeStore
from lake_helpers import REPO, write_jsonl

BASIC = str(REPO / "tests/pipelines/basic/*.py")


SESSION = {key: "true" for key in TINY_BATCH_PLAN}  # a session's own settings, all on


def test_a_batch_of_few_rows_over_tiny_tables_runs_interpreted_without_adaptive_execution(make_store, spark, tmp_path):
    store = make_store(tmp_path / "lake")
    store.append("silver.changes", spark.range(10).toDF("id"))
    store.append("gold.orders", spark.range(10).toDF("id"))
    assert batch_plan(store, 100, {"silver.changes"}, "gold.orders", SESSION) == TINY_BATCH_PLAN
    assert batch_plan(store, 100, set(), "gold.not_made_yet", SESSION) == TINY_BATCH_PLAN  # its first batch makes it


def test_many_new_rows_make_a_batch_large(make_store, spark, tmp_path):
    store = make_store(tmp_path / "lake")
    assert batch_plan(store, SMALL_ROWS + 1, set(), "gold.orders", SESSION) == SESSION


def test_the_largest_table_read_whole_or_written_decides(make_store, spark, tmp_path):
    store = make_store(tmp_path / "lake")
    store.append("silver.changes", spark.range(1000).toDF("id"))
    store.append("gold.orders", spark.range(10).toDF("id"))
    size = store.size_bytes("silver.changes")
    small = {**SESSION, **SMALL_BATCH_PLAN}
    for tiny, limit, plan in ((size + 1, size + 2, TINY_BATCH_PLAN), (size, size + 1, small), (size - 1, size, SESSION)):
        assert batch_plan(store, 0, {"silver.changes"}, "gold.orders", SESSION, tiny, limit) == plan
        assert batch_plan(store, 0, set(), "silver.changes", SESSION, tiny, limit) == plan
    assert TINY_BYTES < SMALL_BYTES


def test_an_update_leaves_the_session_as_it_found_it(spark, landing, lake):
    """Each flow sets how it runs, and puts the session's own setting back after."""
    write_jsonl(landing / "orders/1.jsonl", [{"order_id": 1, "customer": "ann", "amount": 10.0, "region": "eu"}])
    suite_value = spark.conf.get(ADAPTIVE)
    spark.conf.set(ADAPTIVE, "true")  # the session's own, not the suite's (tests/tiny_data.py)
    try:
        run_pipeline(spark, [BASIC], lake, {"test.landing": str(landing)})
        assert spark.conf.get(ADAPTIVE) == "true"
        assert LakeStore(spark, lake).read("gold.revenue_by_region").count() == 1
    finally:
        spark.conf.set(ADAPTIVE, suite_value)
