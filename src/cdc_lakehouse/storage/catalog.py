"""The job steps' tables in Unity Catalog (``--catalog C`` on Databricks job compute, tables
``<catalog>.<schema>.<table>``). Locally they are a lake's (``storage.LakeStore``);
``cdc_lakehouse.job_args.open_store`` picks one of the two.

Spark alone: job compute has no ``deltalake`` (hence ``storage/__init__`` loads ``DeltaRsStore``,
bench's comparison engine, only when asked for). tests/test_storage_catalog.py runs it on Spark's
local session catalog with the same behavioural tests as the lake's stores."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F


class CatalogStore:
    """The reads the job steps need, on Unity Catalog tables.

    The pipeline's AUTO CDC state tables are internal on
    Databricks and not visible here, so ``exists`` is False for them: reconcile then writes
    corrections that a later change already overrides, and AUTO CDC ignores those.
    """

    def __init__(self, spark: SparkSession, catalog: str):
        self.spark = spark
        self.catalog = catalog

    def qualified(self, name: str) -> str:
        return f"{self.catalog}.{name}"

    def exists(self, name: str) -> bool:
        return self.spark.catalog.tableExists(self.qualified(name))

    def versioned(self) -> bool:
        """No: a job step reads the pipeline's tables whole, as of now (compaction recomputes)."""
        return False

    def read(self, name: str) -> DataFrame:
        return self.spark.table(self.qualified(name))

    def column_max(self, name: str, column: str):
        return self.read(name).agg(F.max(column)).collect()[0][0]  # an aggregate has one row

    def row_count(self, name: str) -> int:
        return self.read(name).count()  # Delta answers from its statistics

    def size_bytes(self, name: str) -> int | None:
        return None  # DESCRIBE DETAIL would answer, at the cost of a query per table

    def overwrite(self, name: str, df: DataFrame, commit=None, **_) -> int:
        df.write.mode("overwrite").option("overwriteSchema", "true").saveAsTable(self.qualified(name))
        return self.spark.table(self.qualified(name)).count()

