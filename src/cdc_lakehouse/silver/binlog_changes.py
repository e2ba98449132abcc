"""Binlog row events of committed transactions -> net changes per transaction and row."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.bronze.json_text import exact_row_images
from cdc_lakehouse.silver import keys, net_change

TXN_COLUMNS = ["_source", "server_id", "txn_id", "commit_ts", "end_lsn", "user", "role"]


def operations(row_events: DataFrame) -> DataFrame:
    """One operation per row image of each row event (a row event may carry several rows)."""
    exploded = row_events.select(
        *TXN_COLUMNS, "schema", "table", "primary_key", "lsn",
        F.upper(F.substring("type", 1, 1)).alias("op"),
        # One parse gives both images of every row, their numbers exactly as the source wrote
        # them (from_json would round a 20-digit decimal to a double).
        F.posexplode(exact_row_images("rows")).alias("row_index", "image"),
    )
    # Each step in a projection of its own: the images and their maps are read several times
    # below, and Spark evaluates an expression again wherever a projection repeats it.
    images = exploded.select("*", F.col("image.before").alias("__before"), F.col("image.after").alias("__after"))
    op, before, after = F.col("op"), F.col("__before"), F.col("__after")
    maps = images.select(
        "*",
        F.when(op == "D", before).otherwise(after).alias("__key_image"),
    ).select("*", keys.image_map(F.col("__key_image")).alias("__key_map"),
             F.when(op == "U", keys.image_map(before)).alias("__before_map"))
    return maps.select(
        *TXN_COLUMNS, "schema", "table",
        F.struct("lsn", "row_index").alias("ord"),
        op,
        keys.from_image_map(F.col("__key_map"), F.col("primary_key"), F.col("__key_image")).alias("key"),
        F.when(op == "U", keys.from_image_map(F.col("__before_map"), F.col("primary_key"), before)).alias("old_key"),
        F.when(op != "D", after).alias("row"),
        F.when(op != "I", before).alias("before"),
    )


def net_changes(row_events: DataFrame) -> DataFrame:
    combined = net_change.combine(operations(row_events), [*TXN_COLUMNS, "schema", "table"])
    return combined.withColumn("sequence", F.col("end_lsn"))
