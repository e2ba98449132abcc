"""TRUNCATE TABLE in the change stream, and what the replicas make of it.

A committed binlog ``ddl`` event whose statement truncates a table becomes one change-stream
row of its own: op ``TRUNCATE``, no key and no images, at its transaction's sequence. A
PostgreSQL TRUNCATE is a shadow change row of op ``T`` with key ``{}`` (its statement trigger,
capture/ddl_postgres.py). It is transactional: the operations on the table before it in its
transaction are undone by it (they become part of it), the ones after it are applied after it. So its
change-stream row sits one microsecond before its transaction's sequence
(``SHADOW_TRUNCATE_LEAD``), and the transaction's other changes at the sequence follow it. The SCD1
replicas apply it with AUTO CDC's ``apply_as_truncates``: every row last changed before it goes.
AUTO CDC has no truncate for SCD2, so the history takes a DELETE at the truncate's sequence of
each key the change stream shows open there (``open_key_deletes``): the open versions close at it.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

TRUNCATE = "TRUNCATE"
SHADOW_OP = "T"
SHADOW_ALTER = "A"  # an ALTER TABLE (silver/schema_changes.py), which a truncate does not undo
# Microseconds a shadow truncate sits before its transaction's sequence. No other transaction
# of the table commits in that microsecond: TRUNCATE holds the table's exclusive lock.
SHADOW_TRUNCATE_LEAD = 1


def statement_is(query: Column, keywords: str) -> Column:
    """Whether the SQL ``query`` begins with ``keywords`` (a regex), in any case; comments may
    precede them. False for NULL."""
    return F.coalesce(query.rlike(rf"(?is)^\s*(/\*.*?\*/\s*)*{keywords}\b"), F.lit(False))


def is_truncate(query: Column) -> Column:
    """TRUNCATE [TABLE] name (MySQL/MariaDB)."""
    return statement_is(query, "TRUNCATE")


def with_undone_in_truncates(ops: DataFrame) -> DataFrame:
    """Shadow operations (``op``, ``key``, ``old_key``, ``vals``, ``ord``: the order of operations)
    with each one that comes before a truncate of its table in its transaction made part of that
    truncate: op T, key ``{}``, no values. The truncate undoes them, and they count among its
    operations (``op_count``), so every change row stays accounted for."""
    last = F.max(F.when(F.col("op") == SHADOW_OP, F.col("ord"))).over(Window.partitionBy("txn_id", "schema", "table"))
    undone = F.coalesce((F.col("ord") < last) & (F.col("op") != SHADOW_ALTER), F.lit(False))  # DDL stays
    part = {"op": F.lit(SHADOW_OP), "key": F.lit("{}"), "old_key": F.lit(None), "vals": F.lit(None)}
    return ops.select(*[F.when(undone, part[c]).otherwise(F.col(c)).alias(c) if c in part else c for c in ops.columns])


def shadow_position(op: Column, commit_ts: Column) -> Column:
    """The sequence position of a shadow net change: its commit time, a truncate just before."""
    lead = F.when(op == TRUNCATE, F.lit(SHADOW_TRUNCATE_LEAD)).otherwise(F.lit(0))
    return F.unix_micros(commit_ts) - lead


def open_key_deletes(sequences: DataFrame, history: DataFrame) -> DataFrame:
    """For each TRUNCATE of ``history`` (the change stream of a table) at one of ``sequences``
    (column ``sequence``), a DELETE at its sequence and in its transaction of every key open
    there: the key's last change before it, and after the table's previous truncate, is no
    DELETE. Change-stream rows. ``sequences`` may be a stream (Databricks): the keys are found
    on the static side, which it joins."""
    return sequences.dropDuplicates(["sequence"]).join(_open_keys(history), "sequence")


def _open_keys(history: DataFrame) -> DataFrame:
    table = ["source", "schema", "table"]
    at = history.filter(F.col("op") == TRUNCATE).select(
        *table, F.col("sequence").alias("__at"),
        *[F.col(c).alias(f"__t_{c}") for c in ("txn_id", "commit_ts", "user", "role", "origin")])
    keyed = history.filter(F.col("op").isin("INSERT", "UPDATE", "DELETE", TRUNCATE)).select(
        *table, "key", "op", "sequence")
    before = keyed.join(at, table).filter(F.col("sequence") < F.col("__at"))
    # Per truncate, the latest earlier truncate of the table: keys last changed before it are gone.
    gone_at = before.filter(F.col("op") == TRUNCATE).groupBy(*table, "__at").agg(F.max("sequence").alias("__gone"))
    latest = Window.partitionBy(*table, "__at", "key").orderBy(F.col("sequence").desc())
    last = (before.filter(F.col("op") != TRUNCATE)
            .withColumn("__r", F.row_number().over(latest)).filter("__r = 1")
            .join(gone_at, [*table, "__at"], "left"))
    still_open = (F.col("op") != "DELETE") & (F.col("__gone").isNull() | (F.col("sequence") > F.col("__gone")))
    return last.filter(still_open).select(
        *table, "key",
        F.lit("DELETE").alias("op"),
        F.lit(None).cast("string").alias("row"),
        F.lit(None).cast("string").alias("before"),
        F.lit(None).cast("array<string>").alias("changed_columns"),
        F.array().cast("array<string>").alias("anomalies"),
        F.lit(1).cast("long").alias("op_count"),
        *[F.col(f"__t_{c}").alias(c) for c in ("txn_id", "commit_ts")],
        F.col("__at").alias("sequence"),
        *[F.col(f"__t_{c}").alias(c) for c in ("user", "role", "origin")],
    )
