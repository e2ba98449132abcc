"""The writer's version (``Commit``) is recorded with every write the store makes, whatever it writes."""

from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.storage import Commit, ConcurrentCommit, UpsertSpec


def test_a_merge_that_changes_nothing_still_records_the_writers_version(make_store, spark, tmp_path):
    """delta-rs commits nothing for a MERGE of no rows; a batch that applies nothing (all of it
    re-delivered) must still count as written, or it is re-run at every update and nothing
    after it is ever read."""
    store = make_store(tmp_path)
    spec = UpsertSpec(("k",))
    store.upsert("s.t", spark.createDataFrame([(1, "a")], "k long, v string"), spec, Commit("flow", 0))
    store.upsert("s.t", spark.createDataFrame([], "k long, v string"), spec, Commit("flow", 1))
    assert store.committed_version("s.t", "flow") == 1
    assert store.read("s.t").collect() == [(1, "a")]


def _racing_append(make_store, spark, lake, table: str, commit: Commit):
    """A commit hook: just before the store commits, another writer commits the same batch."""
    other = make_store(lake)

    def hook(stage: str, name: str) -> None:
        if stage == "before" and name == table:
            other.append(table, spark.createDataFrame([(1, "a")], "k long, v string"), commit)
    return hook


def test_a_batch_appended_by_a_racing_writer_is_not_appended_again(make_store, spark, tmp_path):
    """Two updates on one lake past its lock (issue 41 case 2): whichever commits the batch
    first wins; the other stops with a clear error, and the table has the batch once."""
    store = make_store(tmp_path)
    rows = spark.createDataFrame([(1, "a")], "k long, v string")
    store.append("s.t", rows, Commit("flow", 0))
    store.commit_hook = _racing_append(make_store, spark, tmp_path, "s.t", Commit("flow", 1))
    with pytest.raises(ConcurrentCommit, match="batch 1 of flow: two updates ran on the lake at once"):
        store.append("s.t", rows, Commit("flow", 1))
    assert store.read("s.t").count() == 2 and store.committed_version("s.t", "flow") == 1
    store.commit_hook = None
    store.append("s.t", rows, Commit("flow", 1))  # a writer that comes after: the batch is in, nothing written
    assert store.read("s.t").count() == 2


def test_an_overwrite_that_a_racing_append_lands_in_fails_and_keeps_both_writers_rows(spark, tmp_path):
    """An overwrite replaces the files it read: a file another writer adds meanwhile is not among
    them, so the overwrite must not commit (it would leave the racing rows beside its own).
    delta-spark only: delta-rs, the bench's comparison engine, commits such an overwrite."""
    from cdc_lakehouse.storage import DeltaSparkStore

    def make_store(lake):
        return DeltaSparkStore(spark, lake)

    store = make_store(tmp_path)
    store.overwrite("s.t", spark.createDataFrame([(1, "a")], "k long, v string"), Commit("flow", 0))
    racing = spark.createDataFrame([(2, "b")], "k long, v string")
    other = make_store(tmp_path)
    store.commit_hook = lambda stage, name: other.append(name, racing, Commit("other", 0)) if stage == "before" else None
    with pytest.raises(ConcurrentCommit):
        store.overwrite("s.t", spark.createDataFrame([(3, "c")], "k long, v string"), Commit("flow", 1))
    assertDataFrameEqual(store.read("s.t"), spark.createDataFrame([(1, "a"), (2, "b")], "k long, v string"))
    assert store.committed_version("s.t", "flow") == 0


def test_delta_spark_appends_and_overwrites_with_one_spark_job(spark, tmp_path):
    """A write of unchanged columns is its files and its app transaction: Delta's writer looked
    the writer's version up in the table's state, rebuilt from the log by three more jobs at
    every commit, where the checksum file answers (storage/delta_txn.py)."""
    from cdc_lakehouse.storage import DeltaSparkStore

    store = DeltaSparkStore(spark, tmp_path)
    rows = spark.createDataFrame([(1, "a")], "k long, v string")
    store.append("s.t", rows, Commit("flow", 0))
    tracker = spark.sparkContext.statusTracker()

    def jobs_of(write, group: str) -> int:
        spark.sparkContext.setJobGroup(group, "one store write")
        try:
            write()
            return len(tracker.getJobIdsForGroup(group))
        finally:
            spark.sparkContext._jsc.clearJobGroup()

    assert jobs_of(lambda: store.append("s.t", rows, Commit("flow", 1)), "append") == 1
    assert jobs_of(lambda: store.overwrite("s.t", rows.union(rows), Commit("flow", 2)), "overwrite") == 1
    assert store.append("s.t", rows, Commit("flow", 2)) == 0  # redelivered: nothing written
    assert store.committed_version("s.t", "flow") == 2 and store.read("s.t").count() == 2
    assert [h["operation"] for h in store.history("s.t", 2)] == ["WRITE", "WRITE"]


def test_a_first_batch_already_in_is_not_appended_again(make_store, spark, tmp_path):
    """Batch 0 counts as in like any other (its version, 0, is no absence of one)."""
    store = make_store(tmp_path)
    rows = spark.createDataFrame([(1, "a")], "k long, v string")
    store.append("s.t", rows, Commit("flow", 0))
    store.append("s.t", rows, Commit("flow", 0))
    assert store.read("s.t").count() == 1


def test_a_table_created_by_a_racing_writer_is_not_appended_to(make_store, spark, tmp_path):
    store = make_store(tmp_path)
    store.commit_hook = _racing_append(make_store, spark, tmp_path, "s.t", Commit("flow", 0))
    with pytest.raises(ConcurrentCommit):
        store.append("s.t", spark.createDataFrame([(1, "a")], "k long, v string"), Commit("flow", 0))
    assert store.read("s.t").count() == 1


def test_delta_spark_finds_app_transactions_with_or_without_checksum_files(spark, tmp_path):
    """The delta-spark store reads a writer's version from the checksum file Delta writes after
    each commit; a version without one (a crash between commit and checksum) is asked of Delta."""
    from cdc_lakehouse.storage import DeltaSparkStore

    store = DeltaSparkStore(spark, tmp_path)
    rows = spark.createDataFrame([(1, "a")], "k long, v string")
    store.append("s.t", rows, Commit("a", 3))
    store.append("s.t", rows, Commit("b", 0))
    log = store.path("s.t") / "_delta_log"
    assert sorted(p.name for p in log.glob("0*.crc")) == [f"{v:020d}.crc" for v in (0, 1)]
    assert (store.committed_version("s.t", "a"), store.committed_version("s.t", "b")) == (3, 0)
    assert store.committed_version("s.t", "c") is None

    for checksum in log.glob("0*.crc"):
        checksum.unlink()
    assert (store.committed_version("s.t", "a"), store.committed_version("s.t", "b")) == (3, 0)
    assert store.committed_version("s.t", "c") is None


def test_delta_spark_tables_are_checkpointed_every_100_commits(spark, tmp_path):
    """The session's default (runtime/session.py): a checkpoint costs 6 Spark jobs, and the
    state a write rebuilds reads 100 small commit files as fast as a checkpoint and a few."""
    from cdc_lakehouse.storage import DeltaSparkStore

    store = DeltaSparkStore(spark, tmp_path)
    for version in range(11):
        store.append("s.t", spark.createDataFrame([(version, "a")], "k long, v string"), Commit("flow", version))
    assert store.list_tables()[0].properties["delta.checkpointInterval"] == "100"
    assert not list((store.path("s.t") / "_delta_log").glob("*.checkpoint*.parquet"))


def test_a_write_to_a_table_with_a_comment_is_one_commit(make_store, spark, tmp_path):
    """Delta keeps a ``comment`` property as the table's description: compared with its
    properties, it looked changed at every write, which then committed an ALTER TABLE too."""
    store = make_store(tmp_path)
    df = spark.createDataFrame([(1, "a")], "k long, v string")
    store.overwrite("s.t", df, Commit("flow", 0), properties={"quality": "gold"}, comment="what the table holds")
    first = store.version("s.t")

    for batch in (1, 2):
        store.overwrite("s.t", df, Commit("flow", batch), properties={"quality": "gold"}, comment="what the table holds")

    assert store.version("s.t") == first + 2


def test_delta_spark_makes_a_new_table_with_its_properties_comment_and_rows_in_one_commit(spark, tmp_path):
    """Every table of a pipeline has properties (``quality``) and most a comment: written first and
    altered after, each first write of an update from an empty lake cost two commits (delta-rs
    still takes two: it refuses properties other than Delta's own at creation)."""
    from cdc_lakehouse.storage import DeltaSparkStore

    store = DeltaSparkStore(spark, tmp_path)
    df = spark.createDataFrame([(1, "a"), (2, "b")], "k long, v string")

    store.append("s.t", df, Commit("flow", 0), partition_by=["v"], properties={"quality": "gold"},
                 comment="what the table holds")

    assert store.version("s.t") == 0 and store.committed_version("s.t", "flow") == 0
    assert store.append("s.t", df, Commit("flow", 0), properties={"quality": "gold"}) == 0  # redelivered
    info = next(t for t in store.list_tables() if t.name == "s.t")
    assert info.properties.get("quality") == "gold" and info.row_count == 2
    assertDataFrameEqual(store.read("s.t"), df)


def test_delta_spark_reads_a_tables_version_from_its_log_folder_as_delta_does(spark, tmp_path):
    """``version``, ``exists`` and ``committed_version`` list the log folder instead of asking
    Delta for a fresh snapshot (a dozen py4j round trips each, thousands per update)."""
    from delta.tables import DeltaTable

    from cdc_lakehouse.storage import DeltaSparkStore

    store = DeltaSparkStore(spark, tmp_path)
    assert (store.version("s.t"), store.exists("s.t"), store.committed_version("s.t", "flow")) == (None, False, None)
    for batch in range(3):
        store.append("s.t", spark.createDataFrame([(batch, "a")], "k long, v string"), Commit("flow", batch))
    DeltaTable.forPath(spark, str(store.path("s.t"))).delete("k = 0")  # a writer other than the store

    newest = DeltaTable.forPath(spark, str(store.path("s.t"))).history(1).collect()[0]["version"]
    assert (store.version("s.t"), store.exists("s.t"), store.committed_version("s.t", "flow")) == (newest, True, 2)
    assert store.read("s.t").count() == 2


def test_a_table_placed_at_a_folder_of_its_own_is_written_there_batch_by_batch(make_store, spark, tmp_path):
    """A pipeline's Delta sink by path: its table is kept at that folder, not in the lake, and
    a batch already in is not appended again."""
    store = make_store(tmp_path / "lake")
    store.place("_sinks.out", tmp_path / "out")
    rows = spark.createDataFrame([(1, "a")], "k long, v string")
    store.append("_sinks.out", rows, Commit("flow", 0))
    store.append("_sinks.out", rows, Commit("flow", 0))
    assert (tmp_path / "out" / "_delta_log").is_dir() and not (tmp_path / "lake" / "_sinks").exists()
    elsewhere = make_store(tmp_path / "other")
    elsewhere.place("any.name", tmp_path / "out")
    assertDataFrameEqual(elsewhere.read("any.name"), rows)
    assert elsewhere.committed_version("any.name", "flow") == 0
