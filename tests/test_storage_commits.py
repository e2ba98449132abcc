"""The writer's version (``Commit``) is recorded with every write the store makes, whatever it writes."""

from __future__ import annotations

from cdc_lakehouse.storage import Commit, DeltaRsStore, UpsertSpec


def test_a_merge_that_changes_nothing_still_records_the_writers_version(spark, tmp_path):
    """delta-rs commits nothing for a MERGE of no rows; a batch that applies nothing (all of it
    re-delivered) must still count as written, or it is re-run at every update and nothing
    after it is ever read."""
    store = DeltaRsStore(spark, tmp_path)
    spec = UpsertSpec(("k",))
    store.upsert("s.t", spark.createDataFrame([(1, "a")], "k long, v string"), spec, Commit("flow", 0))
    store.upsert("s.t", spark.createDataFrame([], "k long, v string"), spec, Commit("flow", 1))
    assert store.committed_version("s.t", "flow") == 1
    assert store.read("s.t").collect() == [(1, "a")]
