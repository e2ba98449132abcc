"""Binlog row events -> one row per changed row image, in log order."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

ROW_EVENT_TYPES = ("insert", "update", "delete")


def explode_row_events(events: DataFrame) -> DataFrame:
    """One output row per element of ``rows``; images stay JSON text (typed downstream)."""
    rows = F.from_json(F.col("rows"), "array<string>")
    return (
        events.filter(F.col("type").isin(*ROW_EVENT_TYPES))
        .select("*", F.posexplode(rows).alias("row_index", "row_json"))
        .select(
            "_source", "server_id", "file", "pos", "row_index", "ts", "gtid", "type", "schema", "table",
            "primary_key",
            F.get_json_object("row_json", "$.before").alias("before"),
            F.get_json_object("row_json", "$.after").alias("after"),
            "_source_file",
        )
    )
