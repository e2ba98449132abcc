"""Materialized views refreshed by partition (runtime/partition_refresh.py): after every update
the view equals its query over all of its input, whichever way the runtime refreshed it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.runtime.partition_refresh import partition_expressions
from cdc_lakehouse.runtime.runner import run_pipeline
from cdc_lakehouse.settings import REFRESH_BY_PARTITION
from cdc_lakehouse.storage import DeltaSparkStore, LakeStore
from lake_helpers import REPO, write_jsonl

PIPELINE = str(REPO / "tests/pipelines/partition_refresh/*.py")
VIEW = "silver.reading_steps"


def deliver(landing, name: str, rows: list[tuple]) -> None:
    write_jsonl(landing / "readings" / f"{name}.jsonl", [dict(zip(("sensor", "at", "value"), r)) for r in rows])


def update(spark, landing, lake, **kw):
    result = run_pipeline(spark, [PIPELINE], lake, {"test.landing": str(landing)}, **kw)
    return result.event(VIEW).message


def assert_view_is_its_query(spark, lake) -> None:
    store = LakeStore(spark, lake)
    in_order = Window.partitionBy("sensor").orderBy("at")
    everything = store.read("staging.readings").select(
        "sensor", "at", "value", F.lag("value").over(in_order).alias("previous"))
    assertDataFrameEqual(store.read(VIEW), everything)


@pytest.fixture
def first(landing, lake, spark):
    deliver(landing, "1", [("a", 1, 1.0), ("a", 3, 3.0), ("b", 1, 10.0), (None, 1, 0.5)])
    assert update(spark, landing, lake) == "recomputed in full"
    assert_view_is_its_query(spark, lake)
    return landing


def test_new_input_recomputes_only_its_partitions_and_equals_a_full_recompute(spark, first, lake):
    # A late reading of a (between its two), a new sensor, another NULL sensor; b untouched.
    deliver(first, "2", [("a", 2, 2.0), ("c", 1, 7.0), (None, 2, 0.7)])
    # As into a view of 8 MB or more: a smaller one is written again whole, in one job
    # (storage/small_rewrite.py, tests/test_storage_small_rewrite.py).
    large = DeltaSparkStore(spark, lake, rewrite_bytes=0)
    assert update(spark, first, lake, store=large).startswith("recomputed the partitions (sensor)")
    assert_view_is_its_query(spark, lake)
    steps = {(r.sensor, r.at): r.previous for r in LakeStore(spark, lake).read(VIEW).collect()}
    assert steps[("a", 3)] == 2.0 and steps[(None, 2)] == 0.5 and steps[("b", 1)] is None
    # Written: the rows of the touched partitions (a, c, NULL) in place of theirs, not the view.
    commit = LakeStore(spark, lake).history(VIEW, 1)[0]
    metrics = commit["operationMetrics"]  # each engine names its rows written its own way
    assert commit["operationParameters"]["predicate"] and int(metrics.get("numOutputRows", metrics.get("num_added_rows"))) == 6


def test_a_partition_column_derived_from_the_input_row_restricts_the_refresh(spark, first, lake):
    deliver(first, "2", [("a", 12, 2.0), ("b", 5, 1.0)])  # a new bucket of a, b's first bucket again
    result = run_pipeline(spark, [PIPELINE], lake, {"test.landing": str(first)})
    assert result.event("silver.reading_buckets").message.startswith("recomputed the partitions (sensor, bucket)")
    store = LakeStore(spark, lake)
    readings = store.read("staging.readings")
    everything = readings.groupBy("sensor", F.floor(F.col("at") / 10).alias("bucket")).agg(
        F.count(F.lit(1)).alias("readings"), F.sum("value").alias("total"))
    assertDataFrameEqual(store.read("silver.reading_buckets"), everything)


def test_partition_columns_are_names_or_expressions_over_the_input_row():
    target = SimpleNamespace(table_properties={REFRESH_BY_PARTITION: " source, day=to_date(commit_ts), b=coalesce(x, y)"})
    assert partition_expressions(target) == {"source": "`source`", "day": "to_date(commit_ts)", "b": "coalesce(x, y)"}


def test_an_update_without_new_input_keeps_the_view(spark, first, lake):
    store = LakeStore(spark, lake)
    before, version = store.read(VIEW).collect(), store.version(VIEW)
    assert update(spark, first, lake) == "no new input"  # skipped: its input is at the version it read
    assert store.version(VIEW) == version
    assertDataFrameEqual(store.read(VIEW), before)


def test_a_rewritten_input_is_recomputed_in_full(spark, first, lake):
    store = LakeStore(spark, lake)
    store.overwrite("staging.readings", store.read("staging.readings").filter(F.col("sensor") != "b"))
    deliver(first, "2", [("a", 2, 2.0)])
    assert update(spark, first, lake) == "recomputed in full"
    assert_view_is_its_query(spark, lake)


def test_a_changed_definition_is_recomputed_in_full(spark, first, lake, tmp_path):
    changed = tmp_path / "pipeline" / "readings.py"
    changed.parent.mkdir()
    changed.write_text((REPO / "tests/pipelines/partition_refresh/readings.py").read_text() + "\n# changed\n")
    deliver(first, "2", [("a", 2, 2.0)])
    result = run_pipeline(spark, [str(changed)], lake, {"test.landing": str(first)})
    assert result.event(VIEW).message == "recomputed in full"
    assert_view_is_its_query(spark, lake)


class Crash(BaseException):
    """The process dies here: no flow's error handling sees it (a flow's Exception fails only
    that flow and what reads it; runtime/runner.py)."""


def crash_before_view_commit(stage: str, table: str) -> None:
    if stage == "before" and table == VIEW:
        raise Crash


def test_a_crash_before_the_view_commit_then_the_re_run_brings_it_up_to_date(spark, first, lake):
    deliver(first, "2", [("a", 2, 2.0)])
    with pytest.raises(Crash):
        run_pipeline(spark, [PIPELINE], lake, {"test.landing": str(first)},
                     store=LakeStore(spark, lake, commit_hook=crash_before_view_commit))
    deliver(first, "3", [("b", 0, 9.0)])  # arrives before the re-run: the re-run takes it too
    assert update(spark, first, lake).startswith("recomputed the partitions")
    assert_view_is_its_query(spark, lake)
    deliver(first, "4", [("c", 1, 1.0)])
    assert update(spark, first, lake).startswith("recomputed the partitions")
    assert_view_is_its_query(spark, lake)


def test_a_view_that_reads_a_pipeline_view_is_always_recomputed_in_full(spark, first, lake):
    deliver(first, "2", [("a", 2, 2.0)])
    result = run_pipeline(spark, [PIPELINE], lake, {"test.landing": str(first)})
    assert result.event("silver.recent_steps").message == "recomputed in full"
    store = LakeStore(spark, lake)
    assertDataFrameEqual(store.read("silver.recent_steps"), store.read(VIEW))
