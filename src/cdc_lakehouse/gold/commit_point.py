"""Commit points: where in a source's commit order gold stands, and the changes up to it.

Each source's silver change stream is one Delta table appended in whole transactions, in commit
order, so any snapshot of it is a valid source state up to its last sequence. Gold reads only
that stream (never the silver replicas, which are updated one after another and can disagree
for a while) and pins everything of a source to one sequence: the watermark.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from cdc_lakehouse.gold import inputs, schemas
from cdc_lakehouse.silver.binlog_transactions import HELD
from cdc_lakehouse.contract.corrections import ORIGIN as SNAPSHOT_ORIGIN

POINT = "__commit_point"
POINT_DDL = f"source STRING, sequence {schemas.SEQUENCE}"


def with_release(transactions: DataFrame, release_after_minutes: int | None) -> DataFrame:
    """``transactions`` with ``released``: a held one begun ``release_after_minutes`` or more
    before the source's newest commit no longer holds gold back. Measured in source time, not by
    the clock: the same lake gives the same answer, and a paused pipeline releases nothing."""
    if release_after_minutes is None:
        return transactions.withColumn("released", F.lit(False))
    newest = transactions.filter(F.col("status") == "committed").agg(F.max("commit_ts").alias("__newest"))
    cutoff = F.col("__newest") - F.make_dt_interval(mins=F.lit(release_after_minutes))
    released = F.col("status").isin(*HELD) & F.coalesce(F.col("begin_ts") <= cutoff, F.lit(False))
    return transactions.crossJoin(newest).withColumn("released", released).drop("__newest")


def before_held(changes: DataFrame, transactions: DataFrame, release_after_minutes: int | None = None) -> DataFrame:
    """The changes sequenced before the begin of the source's first held transaction. A held
    transaction commits after its begin, and a transaction committed after that begin may come
    after it in commit order (in the binlog it does: a transaction's events are written at its
    commit, all together), so gold waits for it rather than show a state the source never had;
    unless the release policy (``with_release``) gave up on it."""
    holding = with_release(transactions, release_after_minutes).filter(F.col("status").isin(*HELD) & ~F.col("released"))
    first = holding.agg(F.min("begin_position").alias("__held_from"))
    before = F.col("__held_from").isNull() | (F.col("sequence.position") < F.col("__held_from"))
    return changes.crossJoin(first).filter(before).drop("__held_from")


def source_watermark(source: str, changes: DataFrame, gold_tables: list[str],
                     transactions: DataFrame | None = None) -> DataFrame:
    """One row: the last sequence in ``changes`` (all of them, as read) and what it covers.

    With the source's silver ``transactions`` table, the counts come from its rows (one per
    transaction, each with its net rows changed) and from the snapshot corrections, whose files
    the ``origin`` statistics let the scan skip: no distinct count over the whole change stream.
    """
    point = changes.agg(
        F.max("sequence").alias("sequence"),
        F.max_by("commit_ts", "sequence").alias("commit_ts"),
        F.max_by("txn_id", "sequence").alias("txn_id"),
        F.min("commit_ts").alias("first_commit_ts"),
    )
    if transactions is None:
        counted = _distinct_counts(changes)
    else:
        counted = _transaction_counts(transactions, point).crossJoin(
            _distinct_counts(changes.filter(F.col("origin") == SNAPSHOT_ORIGIN))
        ).select((F.col("t") + F.col("transactions")).alias("transactions"), (F.col("c") + F.col("changes")).alias("changes"))
    return point.crossJoin(counted).select(
        F.lit(source).alias("source"), "sequence", "commit_ts", "txn_id", "transactions", "changes",
        "first_commit_ts", F.array(*[F.lit(t) for t in gold_tables]).cast("array<string>").alias("gold_tables"),
    )


def _distinct_counts(changes: DataFrame) -> DataFrame:
    """Transactions with applied changes, and their net changes, counted over ``changes``."""
    applied = F.when(F.col("op") != "NONE", F.struct("txn_id", "schema", "table", "key"))
    return changes.agg(
        F.count_distinct(F.when(F.col("op") != "NONE", F.col("txn_id"))).alias("transactions"),
        F.count_distinct(applied).alias("changes"),
    )


def _transaction_counts(transactions: DataFrame, point: DataFrame) -> DataFrame:
    """``t`` committed transactions with changes at or before the point, ``c`` their rows changed."""
    own = F.struct(F.col("sequence_position").alias("position"), F.col("txn_id").alias("txn"))
    counted = (F.col("status") == "committed") & (F.col("rows_changed") > 0) & (own <= F.col("__point"))
    return transactions.crossJoin(point.select(F.col("sequence").alias("__point"))).agg(
        F.count_if(counted).alias("t"),
        F.coalesce(F.sum(F.when(counted, F.col("rows_changed"))), F.lit(0)).alias("c"),
    )


def replication_watermark(read, settings) -> DataFrame:
    """``gold.replication_watermark``: one row per source. ``read(name)`` reads a table
    (``spark.read.table`` in the pipeline)."""
    return inputs.union_all([_source_watermark(read, settings, source) for source in inputs.sources(settings)])


def _source_watermark(read, settings, source: str) -> DataFrame:
    changes = read(inputs.changes_table(settings, source))
    gold_tables = [inputs.gold_name(settings, f.gold_table) for f in inputs.flows_of(settings, source)]
    found = inputs.existing(read, [inputs.transactions_table(settings, source)])
    if not found:
        return source_watermark(source, changes, gold_tables)
    transactions = found[0][1]
    held = before_held(changes, transactions, settings.held_release_after_minutes)
    return source_watermark(source, held, gold_tables, transactions)


def after(df: DataFrame, gates: list[DataFrame]) -> DataFrame:
    """``df`` itself, but read after ``gates``: the pipeline then refreshes every gold table of a
    source only once all its silver replicas are updated (coherent.source_changes_due), so an
    update that fails or stops in silver never leaves gold half refreshed. A zero-row anti
    join: nothing is read from them."""
    if not gates:
        return df
    nothing = inputs.union_all([g.select(F.lit(1).alias("__gate")).limit(0) for g in gates])
    return df.join(nothing, F.lit(False), "left_anti")


def at_point(changes: DataFrame, points: DataFrame, source: str) -> DataFrame:
    """The changes of ``source`` at or before its commit point in ``points`` (source, sequence),
    each (transaction, table, row) once: a transaction re-emitted (redelivery, or a shadow
    transaction recorded again with a later commit time) counts in its latest recording."""
    point = points.filter(F.col("source") == source).select(F.col("sequence").alias(POINT))
    pinned = changes.join(point, F.col("sequence") <= F.col(POINT)).drop(POINT)
    latest = Window.partitionBy("txn_id", "schema", "table", "key").orderBy(F.col("sequence").desc())
    return pinned.withColumn("__recording", F.row_number().over(latest)).filter("__recording = 1").drop("__recording")


def commit_point(spark: SparkSession, source: str, position: int, txn: str) -> DataFrame:
    """A commit point given by hand, e.g. the ``sequence`` of a row of gold.audit_transactions."""
    return spark.createDataFrame([(source, (position, txn))], POINT_DDL)


def commit_point_at(changes: DataFrame, source: str, when: datetime | str | Column) -> DataFrame:
    """The commit point of ``source`` right after the last transaction committed at or before
    ``when``; no row when nothing had committed yet."""
    moment = when if isinstance(when, Column) else F.lit(when).cast("timestamp")
    return (
        changes.filter(F.col("commit_ts") <= moment)
        .agg(F.max("sequence").alias("sequence"))
        .filter(F.col("sequence").isNotNull())
        .select(F.lit(source).alias("source"), "sequence")
    )
