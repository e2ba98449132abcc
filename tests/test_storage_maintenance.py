"""The store's maintenance methods on real Delta tables: drop (full refresh), delete by predicate
(tombstone expiry), OPTIMIZE, VACUUM and history (housekeeping). Nothing outside the storage
seam touches Delta, so these are the only ways the rest of the project changes a table's files."""

from __future__ import annotations

from pyspark.testing import assertDataFrameEqual

TABLE = "silver.items"


def three_appends(spark, store) -> None:
    for i in range(3):
        # one partition, one file (Spark writes an empty partition's file too, outside the log)
        store.append(TABLE, spark.createDataFrame([(i, f"v{i}")], "id long, v string").coalesce(1))


def test_drop_deletes_the_table_and_a_new_one_can_take_its_name(make_store, spark, tmp_path):
    store = make_store(tmp_path / "lake")
    three_appends(spark, store)
    old_id = store.table_id(TABLE)
    store.drop(TABLE)
    assert not store.exists(TABLE) and not store.path(TABLE).exists()
    assert store.version(TABLE) is None
    store.drop(TABLE)  # nothing there: nothing happens

    store.append(TABLE, spark.createDataFrame([(9, "new")], "id long, v string"))
    assert store.table_id(TABLE) != old_id and store.version(TABLE) == 0
    assertDataFrameEqual(store.read(TABLE), spark.createDataFrame([(9, "new")], "id long, v string"))


def test_delete_where_deletes_the_selected_rows_and_counts_them(make_store, spark, tmp_path):
    store = make_store(tmp_path / "lake")
    three_appends(spark, store)
    assert store.delete_where(TABLE, "id >= 1") == 2
    assert store.delete_where(TABLE, "id >= 1") == 0
    assertDataFrameEqual(store.read(TABLE), spark.createDataFrame([(0, "v0")], "id long, v string"))


def test_optimize_then_vacuum_leave_one_file_with_the_same_rows(make_store, spark, tmp_path):
    store = make_store(tmp_path / "lake")
    three_appends(spark, store)
    before = store.read(TABLE)
    expected = spark.createDataFrame(before.collect(), before.schema)
    assert store.optimize(TABLE) == {"files_added": 1, "files_removed": 3}
    assert store.vacuum(TABLE, 168) == 0  # the replaced files are younger than the retention
    assert store.vacuum(TABLE, 0, enforce_retention=False) == 3
    assert len(store.read(TABLE).inputFiles()) == 1 == len(list(store.path(TABLE).glob("*.parquet")))
    assertDataFrameEqual(store.read(TABLE), expected)


def test_history_lists_the_commits_newest_first(make_store, spark, tmp_path):
    store = make_store(tmp_path / "lake")
    three_appends(spark, store)
    store.delete_where(TABLE, "id = 0")
    history = store.history(TABLE)
    assert [c["version"] for c in history] == [3, 2, 1, 0]
    assert history[0]["operation"] == "DELETE"
    assert [c["version"] for c in store.history(TABLE, 1)] == [3]


def test_a_lake_has_versions(make_store, spark, tmp_path):
    """Compaction reads only what was appended since its last run where the store has versions."""
    assert make_store(tmp_path / "lake").versioned()
