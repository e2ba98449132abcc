"""Landing lines -> bronze rows: the raw line, its parsed fields and its provenance."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

# Contract §2.1: row images stay JSON text in bronze so values keep the types the source sent.
BINLOG_EVENT = StructType.fromDDL(
    "server_id long, file string, pos long, ts long, gtid string, type string, xid long, "
    "thread_id long, schema string, table string, primary_key array<string>, rows string, query string"
)
SESSION = StructType.fromDDL("server_id long, thread_id long, connected_at string, user string, role string")
SHADOW_TXN = StructType.fromDDL(
    "txn_id string, end_ts string, db_user string, db_role string, client string, application string"
)
SHADOW_CHANGE = StructType.fromDDL(
    "txn_id string, op_ts string, op_seq long, op string, key string, old_key string, values string"
)

READER_OPTIONS = {"cloudFiles.format": "text"}


def parse_lines(lines: DataFrame, schema: StructType, source: str) -> DataFrame:
    """``lines`` has Spark's text columns (``value``) plus ``_metadata``."""
    parsed = F.from_json(F.col("value"), schema, {"mode": "PERMISSIVE"})
    return lines.select(
        F.lit(source).alias("_source"),
        parsed.alias("_parsed"),
        F.col("value").alias("_raw"),
        F.col("_metadata.file_path").alias("_source_file"),
        F.current_timestamp().alias("_ingested_at"),
    ).select("_source", "_parsed.*", "_raw", "_source_file", "_ingested_at")
