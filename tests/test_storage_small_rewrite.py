"""A MERGE or a replaceWhere into a small table is the table written again
(storage/small_rewrite.py): the same rows as Delta's write leaves, in one Spark job; a MERGE that
only inserts is an append, as Delta's; a table it cannot rewrite so is written by Delta."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import Observation
from pyspark.testing import assertDataFrameEqual

from property_settings import examples
from cdc_lakehouse.storage import Commit, DeltaSparkStore, StreamingSourceChanged, UpsertSpec
from cdc_lakehouse.storage.base import where_predicate
from cdc_lakehouse.storage.small_rewrite import merged, merged_with_changes, replaced

SCHEMA = "k long, v string"
SOURCE = "k long, v string, d boolean"
keys = st.integers(min_value=0, max_value=12)
tables = st.dictionaries(keys, st.text(alphabet="abc", max_size=2), max_size=10)
sources = st.dictionaries(st.one_of(keys, st.none()), st.tuples(st.text(alphabet="xyz", max_size=2), st.booleans()),
                          max_size=10)


def reference(table: dict, source: dict) -> list[tuple]:
    """MERGE as Databricks documents it: matched and flagged, deleted; matched, updated; not
    matched and not flagged, inserted. A NULL key matches nothing."""
    result = dict(table)
    for key, (value, flagged) in source.items():
        if key is not None and flagged:
            result.pop(key, None)
        elif key is not None:
            result[key] = value
    inserted_null = [(None, v) for k, (v, flagged) in source.items() if k is None and not flagged]
    return sorted(result.items()) + inserted_null


def fed(table: dict, source: dict) -> list[tuple]:
    """The rows of the MERGE's change data feed: a matched key's image before and after, or its
    deleted image; an unmatched row not flagged, inserted."""
    rows = []
    for key, (value, flagged) in source.items():
        if key is not None and key in table:
            rows += [(key, table[key], "delete")] if flagged else [
                (key, table[key], "update_preimage"), (key, value, "update_postimage")]
        elif not flagged:
            rows.append((key, value, "insert"))
    return rows


@settings(max_examples=examples(25))
@given(table=tables, source=sources)
def test_the_rewrite_leaves_what_the_merge_leaves_and_feeds_what_it_feeds(spark, table, source):
    """Into a table without a change data feed (``merged``) and into one with it (the same rows
    with a NULL ``_change_type``, and the feed's rows)."""
    before = spark.createDataFrame(sorted(table.items()), SCHEMA)
    batch = spark.createDataFrame([(k, v, d) for k, (v, d) in source.items()], SOURCE)
    spec = UpsertSpec(("k",), "d")
    assertDataFrameEqual(merged(before, batch, spec, _observation()),
                         spark.createDataFrame(reference(table, source), SCHEMA))
    expected = [(*r, None) for r in reference(table, source)] + fed(table, source)
    assertDataFrameEqual(merged_with_changes(before, batch, spec, _observation()),
                         spark.createDataFrame(expected, f"{SCHEMA}, _change_type string"))


def test_two_source_rows_of_one_key_fail_the_write_as_the_merge_does(spark, tmp_path):
    store = DeltaSparkStore(spark, tmp_path)
    spec = UpsertSpec(("k",))
    store.upsert("s.t", spark.createDataFrame([(1, "a")], SCHEMA), spec, Commit("flow", 0))
    twice = spark.createDataFrame([(2, "b"), (2, "c")], SCHEMA)
    with pytest.raises(Exception, match="several source rows share a key"):
        store.upsert("s.t", twice, spec, Commit("flow", 1))
    assertDataFrameEqual(store.read("s.t"), spark.createDataFrame([(1, "a")], SCHEMA))
    assert store.committed_version("s.t", "flow") == 0


@pytest.mark.parametrize("keep_appends, jobs", [(False, 1), (True, 2)])
def test_a_merge_into_a_small_table_is_one_spark_job_and_counts_the_source_rows(spark, tmp_path, keep_appends, jobs):
    """Delta's MERGE into the same table runs six jobs (docs/storage.md, "The cost of a commit");
    keeping appends, one more finds that a key matches."""
    store = DeltaSparkStore(spark, tmp_path)
    spec = UpsertSpec(("k",), "d", keep_appends=keep_appends)
    store.upsert("s.t", spark.range(1000).selectExpr("id k", "'a' v", "false d"), spec, Commit("flow", 0))
    batch = spark.range(990, 1010).selectExpr("id k", "'b' v", "id % 2 = 0 d")
    group = f"small merge, keep_appends={keep_appends}"
    spark.sparkContext.setJobGroup(group, "one upsert")
    try:
        assert store.upsert("s.t", batch, spec, Commit("flow", 1)) == 20
        assert len(spark.sparkContext.statusTracker().getJobIdsForGroup(group)) == jobs
    finally:
        spark.sparkContext._jsc.clearJobGroup()
    assert store.upsert("s.t", batch, spec, Commit("flow", 1)) == 0  # redelivered: nothing written
    table = store.read("s.t")
    assert (table.count(), table.filter("v = 'b'").count()) == (1000 - 5 + 5, 10)
    assert store.history("s.t", 1)[0]["operation"] == "WRITE"


def test_a_merge_that_only_inserts_is_an_append_which_a_streaming_read_reads_on(spark, tmp_path):
    store = DeltaSparkStore(spark, tmp_path)
    spec = UpsertSpec(("k",), "d")
    store.upsert("s.t", spark.createDataFrame([(1, "a", False)], SOURCE), spec, Commit("flow", 0))
    new = spark.createDataFrame([(2, "b", False), (3, "c", True), (None, "n", False)], SOURCE)
    assert store.upsert("s.t", new, spec, Commit("flow", 1)) == 3
    appended, rows = store.read_appended("s.t", 0, 1)
    assertDataFrameEqual(appended, spark.createDataFrame([(2, "b"), (None, "n")], SCHEMA))
    assert rows == 2
    twice = spark.createDataFrame([(4, "d", False), (4, "e", False)], SOURCE)
    with pytest.raises(Exception, match="several source rows share a key"):
        store.upsert("s.t", twice, spec, Commit("flow", 2))
    store.upsert("s.t", spark.createDataFrame([(1, "z", False), (5, "e", False)], SOURCE), spec, Commit("flow", 2))
    with pytest.raises(StreamingSourceChanged):
        store.read_appended("s.t", 1, 2)
    assertDataFrameEqual(store.read("s.t"), spark.createDataFrame([(1, "z"), (2, "b"), (None, "n"), (5, "e")], SCHEMA))
    only_writer = UpsertSpec(("k",), "d", keep_appends=False)
    store.upsert("s.t", spark.createDataFrame([(6, "f", False)], SOURCE), only_writer, Commit("flow", 3))
    assert store.history("s.t", 1)[0]["operationParameters"]["mode"] == "Overwrite"


def test_a_source_with_a_new_column_or_type_is_merged_by_delta(spark, tmp_path):
    """A new column, or a struct that gained a field (an AUTO CDC sequence), needs the MERGE's
    schema evolution."""
    store = DeltaSparkStore(spark, tmp_path)
    spec = UpsertSpec(("k",))
    store.upsert("s.t", spark.createDataFrame([(1, "a")], SCHEMA), spec, Commit("flow", 0))
    wider = spark.createDataFrame([(1, "b", 2)], "k long, v string, w int")
    store.upsert("s.t", wider, spec, Commit("flow", 1))
    store.upsert("s.seq", spark.createDataFrame([(1, (1, 2))], "k long, s struct<a:int,b:int>"), spec, Commit("flow", 0))
    store.upsert("s.seq", spark.createDataFrame([(2, (1, 2, 3))], "k long, s struct<a:int,b:int,c:int>"), spec,
                 Commit("flow", 1))
    assert [store.history(name, 1)[0]["operation"] for name in ("s.t", "s.seq")] == ["MERGE"] * 2
    assertDataFrameEqual(store.read("s.seq"), spark.createDataFrame([(1, (1, 2, None)), (2, (1, 2, 3))],
                                                                    "k long, s struct<a:int,b:int,c:int>"))
    assertDataFrameEqual(store.read("s.t"), wider)


def test_a_merge_into_a_table_with_a_change_data_feed_feeds_what_delta_s_merge_feeds(spark, tmp_path):
    """The image before and after each updated row, each inserted row, each deleted row's image;
    a MERGE that only inserts, an append of inserted rows."""
    rewriting, by_delta = DeltaSparkStore(spark, tmp_path), DeltaSparkStore(spark, tmp_path, rewrite_bytes=0)
    spec = UpsertSpec(("k",), "d")
    batches = [[(1, "a", False), (2, "b", False), (3, "c", False)],
               [(1, "x", False), (2, None, True), (4, "d", False), (5, "e", True), (None, "n", False)],
               [(4, "y", False), (3, "c", False)], [(6, "f", False)]]
    feeds = {}
    for store, name in ((rewriting, "s.small"), (by_delta, "s.large")):
        for version, rows in enumerate(batches):
            store.upsert(name, spark.createDataFrame(rows, SOURCE), spec, Commit("flow", version),
                         properties={"delta.enableChangeDataFeed": "true"})
        changes = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1)
        feeds[store] = changes.load(str(store.path(name))).select("k", "v", "_change_type", "_commit_version")
    assert [c["operation"] for c in rewriting.history("s.small", 3)] == ["WRITE"] * 3
    assertDataFrameEqual(rewriting.read("s.small"), by_delta.read("s.large"))
    assertDataFrameEqual(feeds[rewriting], feeds[by_delta])
    assert feeds[rewriting].filter("_change_type = 'update_preimage'").count() == 3


@settings(max_examples=examples(25))
@given(table=st.lists(st.tuples(st.one_of(keys, st.none()), st.text(alphabet="abc", max_size=2)), max_size=10),
       replacing=st.lists(st.one_of(keys, st.none()), min_size=1, max_size=4, unique=True), data=st.data())
def test_the_rewrite_leaves_what_replace_where_leaves(spark, table, replacing, data):
    """replaceWhere as Delta documents it: the rows the condition selects give way to the new
    rows; a row for which it is NULL stays (here a NULL value is matched by IS NULL)."""
    new = data.draw(st.lists(st.tuples(st.sampled_from(replacing), st.text(alphabet="xyz", max_size=2)), max_size=6))
    rows = replaced(spark.createDataFrame(table, SCHEMA), spark.createDataFrame(new, SCHEMA),
                    where_predicate({"k": replacing}), _observation())
    expected = [r for r in table if r[0] not in replacing] + new
    assertDataFrameEqual(rows, spark.createDataFrame(expected, SCHEMA))


def test_replace_where_into_a_small_table_is_one_spark_job_as_delta_s_writer_leaves_it(spark, tmp_path):
    """Delta's replaceWhere runs five jobs or more; a written row outside the condition fails both."""
    rewriting, by_delta = DeltaSparkStore(spark, tmp_path), DeltaSparkStore(spark, tmp_path, rewrite_bytes=0)
    table = spark.createDataFrame([(1, "a"), (2, "b"), (None, "n"), (3, "c")], SCHEMA)
    new = spark.createDataFrame([(2, "x"), (None, "y"), (2, "z")], SCHEMA)
    where = {"k": [2, None]}
    for store, name in ((rewriting, "s.small"), (by_delta, "s.large")):
        store.overwrite(name, table, Commit("view", 0))
        spark.sparkContext.setJobGroup(name, "replace")
        try:
            written = store.replace_where(name, new, where, Commit("view", 1))
            jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup(name))
        finally:
            spark.sparkContext._jsc.clearJobGroup()
        # Delta counts the rows it copied from the files it rewrote among those written, in five
        # jobs or more (its state, when the session has not cached it).
        assert (written == 3 and jobs == 1) if store is rewriting else (written == 5 and jobs >= 5), (name, written, jobs)
        assert store.replace_where(name, new, where, Commit("view", 1)) == 0  # redelivered
        with pytest.raises(Exception, match="(?i)replaceWhere|does not conform"):
            store.replace_where(name, spark.createDataFrame([(5, "q")], SCHEMA), {"k": [2]}, Commit("view", 2))
    assertDataFrameEqual(rewriting.read("s.small"), by_delta.read("s.large"))
    assertDataFrameEqual(rewriting.read("s.small"), spark.createDataFrame([(1, "a"), (3, "c"), (2, "x"), (None, "y"),
                                                                           (2, "z")], SCHEMA))


def _observation() -> Observation:
    return Observation()
