"""The baseline: the bare "keep the latest change per key, MERGE it into Delta" job people write
by hand, on the same landing files and the same storage (``LakeStore(...).upsert``: a delta-spark MERGE, or delta-rs with CDC_LAKEHOUSE_ENGINE=delta-rs).

Per table: read the binlog JSON with Spark, explode the row images, parse them with the table's
(known) schema, keep the latest image per key by log position with a window, and MERGE the
result (deletes included) into the table. That is all it does, which is why it is fast and why
it is wrong on real CDC input: it applies rolled-back and still-open transactions, it does not
know transactions (no user, role, commit time or sequence), it leaves the old row behind when an
update changes a key, it keeps no history, no tombstones (a late older change would resurrect
a deleted row) and no quarantine. ``verify`` in the benchmark counts how far from the source
state this leaves the tables.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from bench.workload import BINLOG_SOURCE, DEVICE_METRICS, SCHEMA, TABLES
from cdc_lakehouse.storage import UpsertSpec

EVENT_SCHEMA = (
    "server_id long, file string, pos long, ts long, gtid string, type string, xid long, thread_id long, "
    "schema string, table string, primary_key array<string>, rows string, query string"
)
DELETE_FLAG = "_is_delete"

_DOUBLES = {"balance", "total", "discount", "tax", "price", *DEVICE_METRICS}
_LONGS = {"account_id", "order_id", "line_no", "qty", "items", "owner_id"}


def table_schema(table: str) -> StructType:
    """What the hand-written job declares for each table."""
    def typ(c):
        return DoubleType() if c in _DOUBLES else LongType() if c in _LONGS else StringType()
    return StructType([StructField(c, typ(c)) for c in TABLES[table].columns])


def table_name(table: str) -> str:
    return f"baseline.{BINLOG_SOURCE}_{table}"


def row_changes(spark, landing: str | Path) -> DataFrame:
    """Every row image of the binlog with its log position, parsed once for all tables."""
    events = spark.read.schema(EVENT_SCHEMA).json(f"{landing}/{BINLOG_SOURCE}/binlog")
    return events.filter(F.col("type").isin("insert", "update", "delete") & (F.col("schema") == SCHEMA)).select(
        "table", F.regexp_extract("file", r"(\d+)$", 1).cast("long").alias("file_no"), "pos", "type",
        F.posexplode(F.from_json("rows", "array<struct<before:string,after:string>>")).alias("idx", "image"),
    )


def latest_changes(rows: DataFrame, table: str) -> DataFrame:
    schema = table_schema(table)
    image = F.when(F.col("type") == "delete", F.col("image.before")).otherwise(F.col("image.after"))
    parsed = rows.filter(F.col("table") == table).select(
        "file_no", "pos", "idx", (F.col("type") == "delete").alias(DELETE_FLAG), F.from_json(image, schema).alias("r"))
    flat = parsed.select("file_no", "pos", "idx", DELETE_FLAG, *[F.col(f"r.`{c}`").alias(c) for c in schema.names])
    keys = list(TABLES[table].keys)
    newest = Window.partitionBy(*keys).orderBy(F.col("file_no").desc(), F.col("pos").desc(), F.col("idx").desc())
    return (flat.withColumn("_rank", F.row_number().over(newest)).filter("_rank = 1")
            .select(*schema.names, DELETE_FLAG))


def run_baseline(spark, store, landing: str | Path, tables) -> dict:
    """MERGE the latest change per key of every table; returns rows merged per table. The
    landing is read and exploded once (cached) for all tables: the baseline at its best."""
    rows = row_changes(spark, landing).persist()
    try:
        return {
            table: store.upsert(table_name(table), latest_changes(rows, table), UpsertSpec(tuple(TABLES[table].keys), DELETE_FLAG))
            for table in tables
        }
    finally:
        rows.unpersist()
