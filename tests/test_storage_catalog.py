"""The Unity Catalog store (the job steps' on Databricks) and the lake stores (local) behave
alike for every table operation the job steps use. CatalogStore runs here on Spark's local
session catalog (``spark_catalog``, Parquet tables in a temporary schema): the same Spark calls
it makes on Unity Catalog, which are the store's only code."""

from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.storage import ENGINES, CatalogStore, DeltaRsStore, DeltaSparkStore

SCHEMA = "catalog_store_test"  # not bronze/silver/gold: the session catalog is shared by the run
TABLE = f"{SCHEMA}.items"
ROWS = "id long, v string"


@pytest.fixture(params=["catalog", *ENGINES])
def store(request, spark, tmp_path):
    if request.param != "catalog":
        yield {"delta-spark": DeltaSparkStore, "delta-rs": DeltaRsStore}[request.param](spark, tmp_path / "lake")
        return
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA} LOCATION '{(tmp_path / 'warehouse').as_uri()}'")
    try:
        yield CatalogStore(spark, "spark_catalog")
    finally:
        spark.sql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


def test_a_table_exists_once_written_and_reads_back(spark, store):
    rows = spark.createDataFrame([(1, "a"), (2, None)], ROWS)
    assert not store.exists(TABLE)
    assert store.overwrite(TABLE, rows) == 2
    assert store.exists(TABLE)
    assertDataFrameEqual(store.read(TABLE), rows)


def test_overwrite_replaces_rows_and_schema(spark, store):
    store.overwrite(TABLE, spark.createDataFrame([(1, "a"), (2, "b")], ROWS))
    wider = spark.createDataFrame([(3, "c", True)], "id long, v string, flag boolean")
    assert store.overwrite(TABLE, wider) == 1
    assertDataFrameEqual(store.read(TABLE), wider)


def test_row_count_and_column_max(spark, store):
    store.overwrite(TABLE, spark.createDataFrame([(5, "a"), (9, "b"), (7, None)], ROWS))
    assert store.row_count(TABLE) == 3
    assert store.column_max(TABLE, "id") == 9
    assert store.column_max(TABLE, "v") == "b"


def test_only_the_local_store_reads_by_version(store):
    # Compaction recomputes what a versioned store would take from the table's new versions.
    assert store.versioned() is not isinstance(store, CatalogStore)


def test_the_catalog_store_loads_without_deltalake():
    """Job compute has no deltalake: the storage package must not import it until asked for DeltaRsStore."""
    import subprocess
    import sys

    code = ("import sys; from cdc_lakehouse.storage import CatalogStore; "
            "assert 'deltalake' not in sys.modules, 'deltalake imported'; "
            "from cdc_lakehouse.storage import DeltaRsStore; assert 'deltalake' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
