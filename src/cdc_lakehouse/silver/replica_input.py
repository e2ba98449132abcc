"""The change stream of one table, shaped for AUTO CDC: typed columns plus ``__op``,
``__sequence``, ``__commit_ts`` and ``__txn_id``."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.silver.filters import apply_column_filters
from cdc_lakehouse.silver.typing import infer_row_schema, typed

APPLIED_OPS = ("INSERT", "UPDATE", "DELETE")


def replica_changes(changes: DataFrame, column_filters=None) -> DataFrame:
    applied = changes.filter(F.col("op").isin(*APPLIED_OPS)).select(
        "row",
        F.col("op").alias("__op"),
        F.col("sequence").alias("__sequence"),
        F.col("commit_ts").alias("__commit_ts"),
        F.col("txn_id").alias("__txn_id"),
    )
    return apply_column_filters(typed(applied, infer_row_schema(applied)), column_filters)
