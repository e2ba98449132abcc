"""The silver ``transactions`` table: every transaction of a source with who ran it, where it
committed, and what it touched."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from cdc_lakehouse.silver import binlog_transactions as bt
from cdc_lakehouse.snapshot.stream import ORIGIN as SNAPSHOT_ORIGIN


def change_counts(changes: DataFrame) -> DataFrame:
    """Tables touched and net rows changed per transaction (a re-emitted change counts once)."""
    # Snapshot corrections are no transaction of the source (a seed is every row of a table):
    # left out where the change stream is read. Parquet statistics skip their files whole, so
    # they are not even scanned.
    theirs = changes.filter((F.col("origin") != SNAPSHOT_ORIGIN) | F.col("origin").isNull())
    unique = theirs.dropDuplicates(["txn_id", "schema", "table", "key"]).filter(F.col("op") != "NONE")
    return unique.groupBy("txn_id").agg(
        F.array_sort(F.collect_set(F.concat_ws(".", "schema", "table"))).alias("tables"),
        F.count(F.lit(1)).alias("rows_changed"),
        F.sum(F.when(F.col("op") == "INSERT", 1).otherwise(0)).alias("inserts"),
        F.sum(F.when(F.col("op") == "UPDATE", 1).otherwise(0)).alias("updates"),
        F.sum(F.when(F.col("op") == "DELETE", 1).otherwise(0)).alias("deletes"),
    )


def binlog_transactions_table(events: DataFrame, sessions: DataFrame, changes: DataFrame) -> DataFrame:
    txns = bt.transactions(bt.distinct_events(events), sessions)
    return txns.join(change_counts(changes), "txn_id", "left").select(
        F.col("_source").alias("source"),
        "txn_id",
        "status",
        "commit_ts",
        F.timestamp_seconds("begin_ts").alias("begin_ts"),
        F.struct(F.col("commit_file").alias("file"), F.col("commit_pos").alias("pos")).alias("position"),
        F.col("end_lsn").alias("sequence_position"),
        F.col("begin_lsn").alias("begin_position"),
        "server_id", "thread_id", "xid", "gtid", "user", "role",
        F.lit(None).cast("string").alias("client"), F.lit(None).cast("string").alias("application"), "ddl",
        *_count_columns(),
    )


def _count_columns():
    return [F.coalesce("tables", F.array()).alias("tables")] + [
        F.coalesce(c, F.lit(0)).alias(c) for c in ("rows_changed", "inserts", "updates", "deletes")
    ]


def shadow_transactions_table(source: str, txns: DataFrame, changes: DataFrame, silver_changes: DataFrame) -> DataFrame:
    """Recorded transactions (latest recording wins) plus held ones: change rows whose
    transaction row has not arrived yet."""
    latest = Window.partitionBy("txn_id").orderBy(F.col("end_ts").desc())
    recorded = txns.withColumn("__r", F.row_number().over(latest)).filter("__r = 1").select(
        "txn_id", F.lit("committed").alias("status"), F.col("end_ts").alias("commit_ts"),
        F.col("db_user").alias("user"), F.col("db_role").alias("role"), "client", "application",
    )
    first_ops = changes.groupBy("txn_id").agg(F.min("op_ts").alias("begin_ts"))
    held = first_ops.join(recorded, "txn_id", "left_anti").select(
        "txn_id", F.lit("open").alias("status"), F.lit(None).cast("timestamp").alias("commit_ts"),
        F.lit(None).cast("string").alias("user"), F.lit(None).cast("string").alias("role"),
        F.lit(None).cast("string").alias("client"), F.lit(None).cast("string").alias("application"),
    )
    all_txns = recorded.unionByName(held).join(first_ops, "txn_id", "left").join(change_counts(silver_changes), "txn_id", "left")
    return all_txns.select(
        F.lit(source).alias("source"), "txn_id", "status", "commit_ts", "begin_ts",
        F.lit(None).cast("struct<file:string,pos:long>").alias("position"),
        F.unix_micros("commit_ts").alias("sequence_position"),
        F.unix_micros("begin_ts").alias("begin_position"),
        *[F.lit(None).cast(t).alias(c) for c, t in
          (("server_id", "long"), ("thread_id", "long"), ("xid", "long"), ("gtid", "string"))],
        "user", "role", "client", "application", F.lit(None).cast("string").alias("ddl"),
        *_count_columns(),
    )
