"""Which batches execute without adaptive re-planning (runtime/small_batch.py), on real tables
of each store."""

from __future__ import annotations

from cdc_lakehouse.runtime.runner import run_pipeline
from cdc_lakehouse.runtime.small_batch import ADAPTIVE, SMALL_ROWS, is_small
from cdc_lakehouse.storage import LakeStore
from lake_helpers import REPO, write_jsonl

BASIC = str(REPO / "tests/pipelines/basic/*.py")


def test_a_batch_of_few_rows_over_small_tables_is_small(make_store, spark, tmp_path):
    store = make_store(tmp_path / "lake")
    store.append("silver.changes", spark.range(10).toDF("id"))
    store.append("gold.orders", spark.range(10).toDF("id"))
    assert is_small(store, 100, {"silver.changes"}, "gold.orders")
    assert is_small(store, 100, set(), "gold.not_made_yet")  # its first batch writes it


def test_many_new_rows_make_a_batch_large(make_store, spark, tmp_path):
    store = make_store(tmp_path / "lake")
    assert not is_small(store, SMALL_ROWS + 1, set(), "gold.orders")


def test_a_large_table_read_whole_or_written_makes_a_batch_large(make_store, spark, tmp_path):
    store = make_store(tmp_path / "lake")
    store.append("silver.changes", spark.range(1000).toDF("id"))
    store.append("gold.orders", spark.range(10).toDF("id"))
    size = store.size_bytes("silver.changes")
    assert is_small(store, 0, {"silver.changes"}, "gold.orders", limit_bytes=size + 1)
    assert not is_small(store, 0, {"silver.changes"}, "gold.orders", limit_bytes=size)
    assert not is_small(store, 0, set(), "silver.changes", limit_bytes=size)


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
