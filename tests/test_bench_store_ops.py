"""``python -m bench store-ops`` on small tables: it measures every operation on each store, and
what it counts holds for the delta-spark store: a redelivered batch costs no Spark job and no
commit, each write one Delta commit, a MERGE at most 6 Spark jobs (without the
store's settings, 9)."""

from __future__ import annotations

from bench import store_ops


def test_store_ops_measures_each_operation_and_a_redelivered_batch_costs_nothing(spark, tmp_path):
    result = store_ops.run(spark, tmp_path, repeat=2, stores=("delta-spark",), large=1000)

    delta_spark = result["stores"]["delta-spark"]
    assert set(delta_spark) == set(store_ops.OPERATIONS)
    assert delta_spark["append_redelivered"]["max_jobs"] == 0 and delta_spark["append_redelivered"]["commits"] == 0
    for operation in ("append", "merge", "overwrite", "replace_where"):
        assert delta_spark[operation]["commits"] == 1, operation
    assert delta_spark["merge"]["max_jobs"] <= 6
