"""Column names Parquet cannot hold (a source column ``Mixed Case``; the live MariaDB workload has
one) on every engine: delta-spark makes such a table with column mapping, as Delta requires, and
the store reads it whole and as appended files under its logical names."""

from __future__ import annotations

from pyspark.testing import assertDataFrameEqual

TABLE = "silver.odd_t"
SCHEMA = "id long, `Mixed Case` string, `a;b` struct<`x y`: long, z: string>"


def test_names_with_spaces_and_punctuation_are_written_read_and_read_as_appended(make_store, spark, tmp_path):
    store = make_store(tmp_path / "lake")
    first = spark.createDataFrame([(1, "one", (10, "p"))], SCHEMA)
    second = spark.createDataFrame([(2, "two", (20, "q")), (3, None, None)], SCHEMA)
    store.append(TABLE, first, properties={"delta.enableChangeDataFeed": "true"})  # as gold's replicas
    store.append(TABLE, second)

    assertDataFrameEqual(store.read(TABLE), first.unionByName(second))
    appended, rows = store.read_appended(TABLE, store.version(TABLE) - 1, store.version(TABLE))
    assert rows == 2
    assert appended.columns == second.columns
    assertDataFrameEqual(appended, second)
