"""The silver ``transactions`` table: every transaction of a source with who ran it, where it
committed, and what it touched."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.silver import binlog_transactions as bt


def change_counts(changes: DataFrame) -> DataFrame:
    """Tables touched and net rows changed per transaction (a re-emitted change counts once)."""
    unique = changes.dropDuplicates(["txn_id", "schema", "table", "key"]).filter(F.col("op") != "NONE")
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
        "server_id", "thread_id", "xid", "gtid", "user", "role", "ddl",
        F.coalesce("tables", F.array()).alias("tables"),
        *[F.coalesce(c, F.lit(0)).alias(c) for c in ("rows_changed", "inserts", "updates", "deletes")],
    )
