"""Replication health: lag, held transactions, quarantine and anomalies, rows per layer.

Anomalies are read from ``silver.<source>_anomalies`` (silver/apply_policy.py), not from the change
stream's ``anomalies`` column: that column only holds impossible pairs, while the anomalies table
also has the apply-policy kinds (insert of an existing key, ...) and the changes held back.

Every builder takes ``read(name)`` (``spark.read.table`` in the pipeline, a store's ``read`` in tests)
and the pipeline settings, and reads only pipeline tables, so it runs the same on Databricks.
"""

from __future__ import annotations

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.bronze import landing
from cdc_lakehouse.bronze.kinds import (
    BINLOG_EVENTS, SHADOW_CHANGES, SHADOW_FOLDER, SNAPSHOT_FOLDER, SNAPSHOT_MANIFESTS, landing_kinds,
)
from cdc_lakehouse.bronze.summary import CHANGED
from cdc_lakehouse.gold import inputs
from cdc_lakehouse.gold.audit import watermarks
from cdc_lakehouse.gold.commit_point import HELD, with_release
from cdc_lakehouse.settings import EVENT_LOG_TABLE, SKIPPED_BY_FAILURE
from cdc_lakehouse.silver import truncates
from cdc_lakehouse.silver.binlog_epochs import EPOCH_INFERRED
from cdc_lakehouse.silver.statements import STATEMENT_DML

NO_TABLE = "(none)"
OK, WAITING, STOPPED = "ok", "waiting", "stopped"


def seconds_between(later: Column, earlier: Column) -> Column:
    return (F.unix_micros(later) - F.unix_micros(earlier)) / 1e6


# -- lag and held transactions --------------------------------------------------------------
def replication_health(read, settings) -> DataFrame:
    """``gold.replication_health``: one row per source."""
    points = watermarks(read, settings)
    return inputs.union_all([_source_health(read, settings, s, points) for s in inputs.sources(settings)])


def _source_health(read, settings, source: str, points: DataFrame) -> DataFrame:
    point = points.filter(F.col("source") == source).select(
        "source", "sequence", F.col("commit_ts").alias("last_commit_ts"), F.col("txn_id").alias("last_txn_id"),
        F.current_timestamp().alias("measured_at"),
    )
    transactions = with_release(read(inputs.transactions_table(settings, source)), settings.held_release_after_minutes)
    txn_stats = transaction_stats(transactions, point)
    shadow = any(f.capture == "shadow" for f in inputs.flows_of(settings, source))
    ties = tied_commits(transactions) if shadow else point.sparkSession.range(1).select(
        F.lit(0).cast("bigint").alias("tied_commit_transactions"))
    quarantined = quarantined_lines(read, settings, source).agg(F.count(F.lit(1)).alias("quarantined_lines"))
    anomalous = anomaly_rows(read, settings, source, point.sparkSession).agg(
        F.count_distinct("change").alias("anomalous_changes"),
        F.count_distinct(F.when(F.col("anomaly") == EPOCH_INFERRED, F.col("change"))).alias("inferred_epochs"))
    changed = read(f"{settings.gold}.landing_summary").filter(
        (F.col("source") == source) & F.col("note").contains(CHANGED)).agg(F.count(F.lit(1)).alias("changed_landing_files"))
    joined = point.crossJoin(txn_stats).crossJoin(quarantined).crossJoin(anomalous).crossJoin(ties).crossJoin(changed)
    joined = joined.crossJoin(source_status(read, settings, source))
    return joined.select(
        "source", "sequence", "last_commit_ts", "last_txn_id", "measured_at",
        seconds_between(F.col("measured_at"), F.col("last_commit_ts")).alias("lag_seconds"),
        "latest_seen_commit_ts", "pending_transactions", "held_transactions", "oldest_held_begin_ts",
        seconds_between(F.col("measured_at"), F.col("oldest_held_begin_ts")).alias("oldest_held_age_seconds"),
        "released_held_transactions", "rolled_back_transactions", "quarantined_lines", "anomalous_changes", "tied_commit_transactions",
        "changed_landing_files", "inferred_epochs", "status", "reason",
    )


# -- status: waiting for a first file, stopped by a failure ----------------------------------
def source_status(read, settings, source: str) -> DataFrame:
    """One row: ``status`` and ``reason`` of the source. Stopped (failure_reasons) wins over
    waiting: a source with no landing file has nothing a flow could fail on, but a failure
    reads as the more urgent news either way."""
    failed = failure_reasons(read, settings, source)
    files = read(f"{settings.gold}.landing_summary").filter((F.col("source") == source) & F.col("note").isNull()).agg(
        F.coalesce(F.sum("files"), F.lit(0)).alias("__files"))
    waiting = F.col("__files") == 0
    status = F.when(F.col("__failure").isNotNull(), F.lit(STOPPED)).when(waiting, F.lit(WAITING)).otherwise(F.lit(OK))
    reason = F.coalesce(F.col("__failure"), F.when(waiting, F.lit(
        f"waiting for the first landing file of {source} (nothing has landed under <landing>/{source}/ yet)")))
    return files.crossJoin(failed).select(status.alias("status"), reason.alias("reason"))


def failure_reasons(read, settings, source: str) -> DataFrame:
    """One row, ``__failure``: the source's flows that their latest update left failed (each
    target with its error) or, when none failed, skipped because what they read was left
    unfinished (the failure upstream); NULL when none. Read from the event log the local runtime
    writes and flushes before this view refreshes (runtime/runner.py); a pipeline without that
    table (Databricks) shows no failure here."""
    spark = read(f"{settings.gold}.landing_summary").sparkSession
    log = _event_log(read)
    if log is None:
        return spark.range(1).select(F.lit(None).cast("string").alias("__failure"))
    tables, flows = source_datasets(settings, source)
    flow_events = log.filter(F.col("flow_type") != "view")
    latest = flow_events.groupBy("flow").agg(
        F.max_by(F.struct("target", "status", "message"), "timestamp").alias("e")).select("flow", "e.*")
    mine = latest.filter(F.col("target").isin(*tables) | F.col("flow").isin(*flows))
    failed = F.when(F.col("status") == "FAILED", F.concat_ws(": ", "target", "message"))
    skipped = F.when((F.col("status") == "SKIPPED") & F.col("message").startswith(SKIPPED_BY_FAILURE),
                     F.concat_ws(": ", "target", "message"))
    found_rows = mine.agg(F.array_sort(F.collect_set(failed)).alias("__failed"),
                          F.array_sort(F.collect_set(skipped)).alias("__skipped"))
    text = lambda c: F.when(F.size(c) > 0, F.concat_ws("; ", c))  # noqa: E731
    return found_rows.select(F.coalesce(text(F.col("__failed")), text(F.col("__skipped"))).alias("__failure"))


def _event_log(read) -> DataFrame | None:
    """The event log, or None where there is none: a lake before its first update's log, or a
    pipeline elsewhere (Spark names a missing table in an AnalysisException; the local runtime
    in a ValueError or a LookupError)."""
    try:
        return read(EVENT_LOG_TABLE)
    except (AnalysisException, LookupError, ValueError):
        return None


def source_datasets(settings, source: str) -> tuple[list[str], list[str]]:
    """The tables the pipeline keeps for ``source`` alone, and the flows it has of its own in
    tables all sources share (gold's audit tables, src/gold/audit.py names them)."""
    bronze = [name for s, kind in landing_kinds(settings.onboarding) if s == source
              for name in (landing.table_name(settings.bronze, s, kind), landing.quarantine_name(settings.bronze, s, kind))]
    silver = [inputs.changes_table(settings, source), inputs.transactions_table(settings, source),
              inputs.anomalies_table(settings, source), f"{settings.silver}.{source}_snapshot_corrections",
              *inputs.silver_replicas(settings, source)]
    gold = [inputs.gold_name(settings, f.gold_table) for f in inputs.flows_of(settings, source)]
    return [*bronze, *silver, *gold], [f"gold_{source}_audit_log", f"gold_{source}_audit_transactions"]


def transaction_stats(transactions: DataFrame, point: DataFrame) -> DataFrame:
    """One row: the source's transactions by status, relative to the commit point
    (``transactions`` as ``with_release`` gives them)."""
    status = F.col("status")
    committed, held = status == "committed", status.isin(*HELD)
    own_sequence = F.struct(F.col("sequence_position").alias("position"), F.col("txn_id").alias("txn"))
    after_point = own_sequence > F.col("__point")
    return transactions.crossJoin(point.select(F.col("sequence").alias("__point"))).agg(
        F.max(F.when(committed, F.col("commit_ts"))).alias("latest_seen_commit_ts"),
        F.count_if(committed & (F.col("rows_changed") > 0) & after_point).alias("pending_transactions"),
        F.count_if(held).alias("held_transactions"),
        F.min(F.when(held, F.col("begin_ts"))).alias("oldest_held_begin_ts"),
        F.count_if(F.col("released")).alias("released_held_transactions"),
        F.count_if(status == "rolled_back").alias("rolled_back_transactions"),
    )


def tied_commits(transactions: DataFrame) -> DataFrame:
    """One row: the committed transactions whose commit time another committed one shares. A
    shadow source orders those by txn_id alone, which is a guess (a clock of whole seconds)."""
    committed = transactions.filter((F.col("status") == "committed") & F.col("commit_ts").isNotNull())
    per_time = committed.groupBy("commit_ts").agg(F.count(F.lit(1)).alias("n"))
    return per_time.agg(F.coalesce(F.sum(F.when(F.col("n") > 1, F.col("n"))), F.lit(0)).cast("bigint")
                        .alias("tied_commit_transactions"))


def held_transactions(read, settings) -> DataFrame:
    """``gold.held_transactions``: one row per transaction begun but not committed yet."""
    parts = []
    for source in inputs.sources(settings):
        transactions = with_release(read(inputs.transactions_table(settings, source)), settings.held_release_after_minutes)
        held = transactions.filter(F.col("status").isin(*HELD))
        parts.append(held.withColumn("measured_at", F.current_timestamp()).select(
            "source", "txn_id", "status", "begin_ts",
            seconds_between(F.col("measured_at"), F.col("begin_ts")).alias("age_seconds"),
            "user", "role", "server_id", "thread_id", "gtid", "position", "held_because", "released", "measured_at",
        ))
    return inputs.union_all(parts)


# -- quarantine and anomalies ---------------------------------------------------------------
def quarantined_table() -> Column:
    """The ``schema.table`` a quarantined line is about, when its folder or content says."""
    shadow = F.concat_ws(".", F.regexp_extract("_source_file", SHADOW_FOLDER, 1),
                         F.regexp_extract("_source_file", SHADOW_FOLDER, 2))
    snapshot = F.regexp_extract("_source_file", SNAPSHOT_FOLDER, 1)
    schema, table = F.get_json_object("_raw", "$.schema"), F.get_json_object("_raw", "$.table")
    named = F.when(schema.isNotNull() & table.isNotNull(), F.concat_ws(".", schema, table))
    return F.coalesce(F.nullif(shadow, F.lit(".")), F.nullif(snapshot, F.lit("")), named, F.lit(NO_TABLE))


def quarantined_lines(read, settings, source: str) -> DataFrame:
    """Every quarantined landing line of the source: table, reason, quarantine table, time."""
    parts = []
    for s, kind in landing_kinds(settings.onboarding):
        if s == source:
            name = landing.quarantine_name(settings.bronze, source, kind)
            parts.append(read(name).select(
                quarantined_table().alias("table"), F.col("_reason").alias("reason"),
                F.lit(name).alias("quarantine_table"), F.col("_ingested_at").alias("ingested_at"),
            ))
    return inputs.union_all(parts)


ANOMALY_ROWS = ("table string, change struct<key: string, txn_id: string, "
                "sequence: struct<position: bigint, txn: string>>, anomaly string")


def anomaly_rows(read, settings, source: str, spark) -> DataFrame:
    """The source's ``silver.<source>_anomalies`` as ``changes_with_anomalies`` rows. A source
    without a change stream has no anomalies table, hence no rows."""
    if not inputs.has_change_stream(settings, source):
        return spark.createDataFrame([], ANOMALY_ROWS)
    return changes_with_anomalies(read(inputs.anomalies_table(settings, source)))


def changes_with_anomalies(anomalies: DataFrame) -> DataFrame:
    """One row per anomaly: its ``table``, the ``change`` it is about and the ``anomaly`` kind.
    The anomalies table holds each change once (re-emits merged), so row key, transaction and
    sequence identify a change; a change with several anomalies has a row for each."""
    return anomalies.select(
        # An inferred epoch is about a server's whole log, no table.
        F.coalesce(F.nullif(F.concat_ws(".", "schema", "table"), F.lit("")), F.lit(NO_TABLE)).alias("table"),
        F.struct("key", "txn_id", "sequence").alias("change"),  # a struct with NULL fields still counts
        "anomaly",
    )


def anomalies_per_table(rows: DataFrame) -> DataFrame:
    """Per table: distinct changes with anomalies, and their sorted distinct kinds."""
    return rows.groupBy("table").agg(
        F.count_distinct("change").alias("anomalous_changes"),
        F.array_sort(F.collect_set("anomaly")).alias("anomalies"),
    )


def data_quality(read, settings) -> DataFrame:
    """``gold.data_quality``: per source and table, quarantined lines and the changes
    ``silver.<source>_anomalies`` records (apply policy and impossible pairs)."""
    return inputs.union_all([_source_quality(read, settings, s) for s in inputs.sources(settings)])


def _source_quality(read, settings, source: str) -> DataFrame:
    quarantine = quarantined_lines(read, settings, source).groupBy("table").agg(
        F.count(F.lit(1)).alias("quarantined_lines"),
        F.array_sort(F.collect_set("reason")).alias("quarantine_reasons"),
        F.array_sort(F.collect_set("quarantine_table")).alias("quarantine_tables"),
        F.max("ingested_at").alias("last_quarantined_at"),
    )
    anomalies = anomalies_per_table(anomaly_rows(read, settings, source, quarantine.sparkSession))
    tables = quarantine.sparkSession.createDataFrame(
        [(f.qualified_table,) for f in inputs.flows_of(settings, source)], "table string")
    ddl = schema_changes(read(inputs.transactions_table(settings, source)))
    diverging = may_diverge(read, settings, source, quarantine.sparkSession)
    every = (tables.join(quarantine, "table", "full").join(anomalies, "table", "full").join(ddl, "table", "left")
             .join(diverging, "table", "left"))
    empty = F.array().cast("array<string>")
    return every.select(
        F.lit(source).alias("source"), "table",
        F.coalesce("quarantined_lines", F.lit(0)).alias("quarantined_lines"),
        F.coalesce("quarantine_reasons", empty).alias("quarantine_reasons"),
        F.coalesce("quarantine_tables", empty).alias("quarantine_tables"),
        "last_quarantined_at",
        F.coalesce("anomalous_changes", F.lit(0)).alias("anomalous_changes"),
        F.coalesce("anomalies", empty).alias("anomalies"),
        F.coalesce("schema_changes", F.lit(0)).alias("schema_changes"), "last_schema_change", "dropped_at",
        "may_diverge_since",
    )


def may_diverge(read, settings, source: str, spark) -> DataFrame:
    """Per table (``table``, ``may_diverge_since``): the commit time of its first DML statement
    logged as SQL (silver/statements.py) that no snapshot taken since covers. The replicas did
    not apply it, so they may differ from the source until the next snapshot reconciles them."""
    if not inputs.has_change_stream(settings, source):
        return spark.createDataFrame([], "table string, may_diverge_since timestamp")
    found = read(inputs.anomalies_table(settings, source)).filter(F.col("anomaly") == STATEMENT_DML).select(
        F.concat_ws(".", "schema", "table").alias("table"), "commit_ts")
    manifests = inputs.existing(read, [landing.table_name(settings.bronze, source, SNAPSHOT_MANIFESTS)])
    if manifests:
        taken = manifests[0][1].filter(F.coalesce("complete", F.lit(False))).groupBy("table").agg(
            F.max("taken_at").alias("__snapshot"))
        found = found.join(taken, "table", "left").filter(
            F.col("__snapshot").isNull() | (F.col("commit_ts") >= F.col("__snapshot")))
    return found.groupBy("table").agg(F.min("commit_ts").alias("may_diverge_since"))


def schema_changes(transactions: DataFrame) -> DataFrame:
    """Per table (``table``: schema.table) of a source's ``transactions``: its committed DDL
    statements other than TRUNCATE, which the replicas do not follow (``schema_changes``, the
    latest in ``last_schema_change``), and when the table was dropped (``dropped_at``: the commit
    time of the latest statement when it is a DROP TABLE)."""
    if "ddl_table" not in transactions.columns:  # written before it had the column: no DDL row has it yet
        transactions = transactions.withColumn("ddl_table", F.lit(None).cast("string"))
    ddl = transactions.filter((F.col("status") == "committed") & F.col("ddl_table").isNotNull()
                              & ~truncates.is_truncate(F.col("ddl")))
    dropped = truncates.statement_is(F.col("ddl"), r"DROP\s+(TEMPORARY\s+)?TABLE")
    latest = F.max_by(F.struct("ddl", "commit_ts", dropped.alias("drop")), "sequence_position")
    per_table = ddl.groupBy(F.col("ddl_table").alias("table")).agg(
        F.count(F.lit(1)).alias("schema_changes"),
        latest.alias("__latest"))
    return per_table.select(
        "table", "schema_changes", F.col("__latest.ddl").alias("last_schema_change"),
        F.when(F.col("__latest.drop"), F.col("__latest.commit_ts")).alias("dropped_at"))


# -- rows per layer -------------------------------------------------------------------------
def rows_per_layer(read, settings) -> DataFrame:
    """``gold.rows_per_layer``: per replicated table, the rows about it in each layer's tables."""
    parts = []
    for source in inputs.sources(settings):
        flows = inputs.flows_of(settings, source)
        parts += _grouped_counts(read, settings, source, flows)
        for flow in flows:
            parts += _table_counts(read, settings, flow)
    return inputs.union_all(parts)


def _holders(settings, source: str, flows) -> list[tuple[str, str, str, Column]]:
    """The tables that hold rows of all replicated tables of the source: name, layer, what a row
    is, and which rows count."""
    capture = {f.capture for f in flows}
    holders = [(inputs.changes_table(settings, source), "silver", "net changes, one per transaction and row",
                F.col("op") != "NONE"),
               (inputs.gold_name(settings, "audit_log"), "gold", "applied changes", F.col("source") == source)]
    if "binlog" in capture:
        holders.append((landing.table_name(settings.bronze, source, BINLOG_EVENTS), "bronze",
                        "binlog row events (one may carry several rows)", F.col("type").isin("insert", "update", "delete")))
    if "shadow" in capture:
        holders.append((landing.table_name(settings.bronze, source, SHADOW_CHANGES), "bronze",
                        "shadow change rows, one per operation", F.lit(True)))
    return holders


def _grouped_counts(read, settings, source: str, flows) -> list[DataFrame]:
    """Per holder table, its rows about each replicated table (0 when none)."""
    holders = _holders(settings, source, flows)
    spark = read(holders[0][0]).sparkSession
    tables = spark.createDataFrame([(f.qualified_table, f.qualified_table.lower()) for f in flows],
                                   "table string, __t string")
    parts = []
    for name, layer, what, rows_of in holders:
        counts = read(name).filter(rows_of).groupBy(F.lower(F.concat_ws(".", "schema", "table")).alias("__t")).count()
        parts.append(tables.join(counts, "__t", "left").select(
            F.lit(source).alias("source"), "table", F.lit(layer).alias("layer"), F.lit(name).alias("dataset"),
            F.lit(what).alias("what"), F.coalesce("count", F.lit(0)).cast("bigint").alias("rows"),
        ))
    return parts


def _table_counts(read, settings, flow) -> list[DataFrame]:
    tables = [(f"{settings.silver}.{flow.silver_table}", "silver", "current rows (SCD1 replica)"),
              (inputs.gold_name(settings, flow.gold_table), "gold", "rows at the commit point (gold replica)")]
    if flow.scd2_table:
        tables.insert(1, (f"{settings.silver}.{flow.scd2_table}", "silver", "row versions (SCD2 history)"))
    found = dict(inputs.existing(read, [name for name, _, _ in tables]))
    return [
        found[name].agg(F.count(F.lit(1)).alias("rows")).select(
            F.lit(flow.source).alias("source"), F.lit(flow.qualified_table).alias("table"), F.lit(layer).alias("layer"),
            F.lit(name).alias("dataset"), F.lit(what).alias("what"), "rows",
        )
        for name, layer, what in tables if name in found
    ]
