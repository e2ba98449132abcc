"""The silver ``transactions`` table: every transaction of a source with who ran it, where it
committed, and what it touched.

A binlog source's table is kept by AUTO CDC, keyed by where each transaction begins in its
server's log (``TXN_KEYS``): each update upserts the transactions its new events belong to, as
the change stream assembles them (held state, not all of bronze), with the counts of the changes
the change stream emitted for them in the same events. Those rows are appended to
``silver.<source>_transaction_versions`` first, which the table is upserted from: the one place
where a flow may look transactions up by thread (the table itself cannot be read by a flow that
writes it). A transaction advances from ``open`` or
``unterminated`` to an end (``PROGRESS``), never back. A shadow source's table is still
recomputed in full (a materialized view).

A binlog transaction's user and role are corrected in place when a session of its thread lands
after it (silver/session_enrichment.py): a row of the same key whose ``PROGRESS`` says when that
session landed (``ENRICHED_AT``), so it wins over the row it corrects and over that row emitted
again; any row assembled later knows the session anyway.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from cdc_lakehouse.bronze import binlog_position
from cdc_lakehouse.silver import binlog_held
from cdc_lakehouse.silver import binlog_transactions as bt
from cdc_lakehouse.contract.corrections import ORIGIN as SNAPSHOT_ORIGIN
from cdc_lakehouse.silver.truncates import SHADOW_ALTER


def change_counts(changes: DataFrame) -> DataFrame:
    """Tables touched and net rows changed per transaction (a re-emitted change counts once)."""
    # Snapshot corrections are no transaction of the source (a seed is every row of a table):
    # left out where the change stream is read. Parquet statistics skip their files whole, so
    # they are not even scanned.
    unique = source_changes(changes).dropDuplicates(["txn_id", "schema", "table", "key"]).filter(F.col("op") != "NONE")
    return unique.groupBy("txn_id").agg(
        F.array_sort(F.collect_set(F.concat_ws(".", "schema", "table"))).alias("tables"),
        F.count(F.lit(1)).alias("rows_changed"),
        F.sum(F.when(F.col("op") == "INSERT", 1).otherwise(0)).alias("inserts"),
        F.sum(F.when(F.col("op") == "UPDATE", 1).otherwise(0)).alias("updates"),
        F.sum(F.when(F.col("op") == "DELETE", 1).otherwise(0)).alias("deletes"),
    )


def source_changes(changes: DataFrame) -> DataFrame:
    """The changes of the source's own transactions: snapshot corrections left out."""
    return changes.filter((F.col("origin") != SNAPSHOT_ORIGIN) | F.col("origin").isNull())


TXN_KEYS = ["server_id", "begin_position"]
PROGRESS = "__progress"  # the AUTO CDC sequence of a transaction row
# When the session that names a binlog transaction's user landed, if after the transaction
# (session_enrichment.py); NULL for a row whose user was known when it was assembled.
ENRICHED_AT = "enriched_at"


def binlog_transactions_table(events: DataFrame, sessions: DataFrame, changes: DataFrame) -> DataFrame:
    """Every transaction of ``events``, from all of them (the reference the batches must match)."""
    return _binlog_rows(bt.transactions(bt.distinct_events(events), sessions), change_counts(changes))


def binlog_transaction_batch(new_events: DataFrame, all_events: DataFrame, sessions: DataFrame | None,
                             new_changes: DataFrame, all_changes: DataFrame) -> DataFrame:
    """The rows of the transactions that ``new_events`` belong to, with ``PROGRESS``. Their
    changes were emitted to the change stream from the same events (binlog_change_batch), so
    they are among ``new_changes``. The streaming form (Databricks) joins the new events to the
    transactions and counts of all of bronze and the change stream instead.
    """
    if new_events.isStreaming:
        events = bt.distinct_events(all_events)
        emitted = binlog_held.touched(new_events, events).join(bt.transactions(events, sessions), ["server_id", "begin_lsn"])
        counts = change_counts(all_changes)
    else:
        events, txns = binlog_held.assemble(new_events, all_events, sessions)
        emitted = txns.join(binlog_held.touched(new_events, events), ["server_id", "begin_lsn"], "left_semi")
        counts = change_counts(new_changes)
    return _binlog_rows(emitted, counts).withColumn(PROGRESS, _progress())


def _progress():
    """Ended (committed, rolled back) after not yet ended; then the furthest position known; then
    the latest enrichment of its user (session_enrichment.py; NULL, the least, when none). The
    last field came with enrichments: a state kept before reads it as NULL (cdc/apply.py)."""
    ended = ~F.col("status").isin(*binlog_held.HELD)
    return F.struct(ended.alias("ended"), F.coalesce("sequence_position", "begin_position").alias("at"),
                    F.col(ENRICHED_AT).alias(ENRICHED_AT))


def _binlog_rows(txns: DataFrame, counts: DataFrame) -> DataFrame:
    return txns.join(counts, "txn_id", "left").select(
        F.col("_source").alias("source"),
        "txn_id",
        "status",
        "commit_ts",
        F.timestamp_seconds("begin_ts").alias("begin_ts"),
        F.struct(F.col("commit_file").alias("file"), F.col("commit_pos").alias("pos"),
                 F.when(F.col("commit_file").isNotNull(), binlog_position.epoch_of(F.col("begin_lsn"))).alias("epoch"),
                 ).alias("position"),
        F.col("end_lsn").alias("sequence_position"),
        F.col("begin_lsn").alias("begin_position"),
        "server_id", "thread_id", "xid", "gtid", "user", "role",
        F.lit(None).cast("string").alias("client"), F.lit(None).cast("string").alias("application"), "ddl",
        *_count_columns(), "held_because", "ddl_table", F.lit(None).cast("timestamp").alias(ENRICHED_AT),
    )


def _count_columns():
    return [F.coalesce("tables", F.array()).alias("tables")] + [
        F.coalesce(c, F.lit(0)).alias(c) for c in ("rows_changed", "inserts", "updates", "deletes")
    ]


def shadow_transactions_table(source: str, txns: DataFrame, changes: DataFrame, silver_changes: DataFrame) -> DataFrame:
    """Recorded transactions (latest recording wins) plus held ones: change rows whose
    transaction row has not arrived yet."""
    return shadow_rows(source, recorded_transactions(txns), first_operations(changes), change_counts(silver_changes))


def recorded_transactions(txns: DataFrame) -> DataFrame:
    """One row per recorded shadow transaction: its latest recording."""
    latest = Window.partitionBy("txn_id").orderBy(F.col("end_ts").desc())
    return txns.withColumn("__r", F.row_number().over(latest)).filter("__r = 1").select(
        "txn_id", F.lit("committed").alias("status"), F.col("end_ts").alias("commit_ts"),
        F.col("db_user").alias("user"), F.col("db_role").alias("role"), "client", "application",
    )


# A shadow transaction's last DDL (change rows of op A: ALTER or DROP TABLE), latest first by
# the max of the struct: combining two partial results is their max.
LAST_DDL = "last_ddl"
LAST_DDL_TYPE = "struct<op_ts:timestamp,op_seq:long,statement:string,table:string>"


def first_operations(changes: DataFrame) -> DataFrame:
    """(txn_id, begin_ts, last_ddl): when each transaction's first change row says it began,
    and its last DDL statement with the table it names (``LAST_DDL_TYPE``; null: none)."""
    ddl = F.when(F.col("op") == SHADOW_ALTER, F.struct(
        "op_ts", F.col("op_seq").cast("long").alias("op_seq"),
        F.get_json_object("values", "$.statement").alias("statement"),
        F.concat_ws(".", "schema", "table").alias("table")))
    # The cast makes the struct's fields nullable: the kept state is a Delta table, which refuses
    # a null under a field the plan says cannot be null (concat_ws never is).
    return changes.groupBy("txn_id").agg(F.min("op_ts").alias("begin_ts"), F.max(ddl).cast(LAST_DDL_TYPE).alias(LAST_DDL))


def with_last_ddl(first_ops: DataFrame) -> DataFrame:
    """``first_ops`` kept before they had ``LAST_DDL`` gain it (none: their DDL was not kept)."""
    return first_ops if LAST_DDL in first_ops.columns else first_ops.withColumn(LAST_DDL, F.lit(None).cast(LAST_DDL_TYPE))


def shadow_rows(source: str, recorded: DataFrame, first_ops: DataFrame, counts: DataFrame) -> DataFrame:
    """The table's rows of the transactions in ``recorded`` or ``first_ops``: held (open) where
    change rows have no transaction row."""
    held = first_ops.join(recorded, "txn_id", "left_anti").select(
        "txn_id", F.lit("open").alias("status"), F.lit(None).cast("timestamp").alias("commit_ts"),
        F.lit(None).cast("string").alias("user"), F.lit(None).cast("string").alias("role"),
        F.lit(None).cast("string").alias("client"), F.lit(None).cast("string").alias("application"),
    )
    all_txns = recorded.unionByName(held).join(first_ops, "txn_id", "left").join(counts, "txn_id", "left")
    return all_txns.select(
        F.lit(source).alias("source"), "txn_id", "status", "commit_ts", "begin_ts",
        F.lit(None).cast("struct<file:string,pos:long,epoch:long>").alias("position"),
        F.unix_micros("commit_ts").alias("sequence_position"),
        F.unix_micros("begin_ts").alias("begin_position"),
        *[F.lit(None).cast(t).alias(c) for c, t in
          (("server_id", "long"), ("thread_id", "long"), ("xid", "long"), ("gtid", "string"))],
        "user", "role", "client", "application", F.col(f"{LAST_DDL}.statement").alias("ddl"),
        *_count_columns(), F.lit(None).cast("string").alias("held_because"),
        F.col(f"{LAST_DDL}.table").alias("ddl_table"),
    )
