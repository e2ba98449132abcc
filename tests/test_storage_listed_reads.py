"""delta-spark reads a small table as the Parquet files its version's checksum lists (Delta 4.4
lists every file there for a table of few files), and asks Delta where the checksum cannot say:
the rows are Delta's own read of that version in every case, and a table's read plans no Delta
scan when the checksum lists its files (docs/storage.md, "Reads of small tables")."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import DataFrame
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.storage import UpsertSpec
from cdc_lakehouse.storage.delta_log import listed_files
from cdc_lakehouse.storage.delta_spark import DeltaSparkStore

TABLE = "silver.t"
SCHEMA = "id long, name string, `Mixed Case` string"


def delta_read(store: DeltaSparkStore, name: str, version: int) -> DataFrame:
    return store.spark.read.format("delta").option("versionAsOf", version).load(str(store.path(name)))


def plans_a_delta_scan(df: DataFrame) -> bool:
    """Whether a file index of Delta's (``Tahoe*FileIndex``) lists the plan's files."""
    leaves = df._jdf.queryExecution().analyzed().collectLeaves().iterator()
    indexes = []
    while leaves.hasNext():
        leaf = leaves.next()
        if leaf.getClass().getSimpleName() == "LogicalRelation":
            indexes.append(leaf.relation().location().getClass().getSimpleName())
    return any(index.startswith("Tahoe") for index in indexes)


def rows(spark, *values) -> DataFrame:
    return spark.createDataFrame(list(values), SCHEMA)


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory) -> tuple[DeltaSparkStore, list[int]]:
    """One table through append, MERGE (an update, a delete, an insert) and overwrite; a column
    name Parquet cannot hold makes it a table with column mapping."""
    store = DeltaSparkStore(spark, tmp_path_factory.mktemp("listed") / "lake")
    store.append(TABLE, rows(spark, (1, "a", "x"), (2, "b", "y")))
    store.append(TABLE, rows(spark, (3, "c", None)))
    changes = spark.createDataFrame([(2, "b2", "y2", False), (3, None, None, True), (4, "d", "w", False)],
                                    f"{SCHEMA}, __is_delete boolean")
    store.upsert(TABLE, changes, UpsertSpec(("id",), "__is_delete"))
    store.overwrite(TABLE, rows(spark, (9, "z", "q")))
    return store, list(range(store.version(TABLE) + 1))


def test_every_version_reads_as_delta_reads_it(history):
    store, versions = history
    for version in versions:
        assert listed_files(store.path(TABLE) / "_delta_log", version) is not None or version == 0
        read = store.read(TABLE, version)
        assert read.columns == ["id", "name", "Mixed Case"]
        assertDataFrameEqual(read, delta_read(store, TABLE, version))


def test_a_listed_version_plans_no_delta_scan(history):
    store, versions = history
    assert not plans_a_delta_scan(store.read(TABLE, versions[-1]))


def test_an_empty_table_reads_empty_with_its_schema(spark, tmp_path: Path):
    store = DeltaSparkStore(spark, tmp_path / "lake")
    store.append(TABLE, rows(spark, (1, "a", "x")))
    store.overwrite(TABLE, spark.createDataFrame([], SCHEMA))
    read = store.read(TABLE)
    assert read.count() == 0 and read.columns == ["id", "name", "Mixed Case"]
    assert not any(f.metadata for f in read.schema.fields)  # as a read of files gives: no physical names


def test_a_version_without_a_checksum_is_read_by_delta(spark, tmp_path: Path):
    store = DeltaSparkStore(spark, tmp_path / "lake")
    store.append(TABLE, rows(spark, (1, "a", "x")))
    store.append(TABLE, rows(spark, (2, "b", "y")))
    (store.path(TABLE) / "_delta_log" / f"{store.version(TABLE):020d}.crc").unlink()
    read = store.read(TABLE)
    assert plans_a_delta_scan(read)
    assertDataFrameEqual(read, rows(spark, (1, "a", "x"), (2, "b", "y")))


def test_a_partitioned_table_is_read_by_delta(spark, tmp_path: Path):
    """Its partition values are in the log, not in the files."""
    store = DeltaSparkStore(spark, tmp_path / "lake")
    store.append(TABLE, rows(spark, (1, "a", "x"), (2, "b", "y")), partition_by=["name"])
    read = store.read(TABLE)
    assert plans_a_delta_scan(read)
    assertDataFrameEqual(read, rows(spark, (1, "a", "x"), (2, "b", "y")))
