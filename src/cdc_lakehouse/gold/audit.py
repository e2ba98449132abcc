"""The audit views: every applied change and transaction with who, role, when and what.

All are pinned to the watermark, like the replicas, so an auditor never sees a change that the
replicas do not show yet. A change the replicas could not apply (a NULL key, a value that does
not fit its declared type, ...) is none of the replicas' changes: it has no audit row, and
``silver.<source>_anomalies`` records it with its reason, counted in ``gold.data_quality``
(docs/gold.md, "Changes that were not applied").
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from cdc_lakehouse.gold import images, inputs
from cdc_lakehouse.gold.commit_point import at_point
from cdc_lakehouse.gold.enrichments import taken_changes, with_enriched_at, with_enrichments
from cdc_lakehouse.gold.replicas import table_changes
from cdc_lakehouse.gold.schemas import AUDIT_TRANSACTIONS, REPLICATION_WATERMARK
from cdc_lakehouse.silver.declared_types import declared_table
from cdc_lakehouse.silver.replica_input import change_rejection, key_columns, with_misfits
from cdc_lakehouse.silver.schema_changes import ALTER
from cdc_lakehouse.silver.transactions_table import ENRICHED_AT
from cdc_lakehouse.silver.truncates import TRUNCATE


def applied() -> Column:
    """A change that did something (NONE rows only carry anomalies)."""
    return F.col("op") != "NONE"


def watermarks(read, settings) -> DataFrame:
    return read(inputs.gold_name(settings, REPLICATION_WATERMARK.name))


# gold.audit_log is applied with AUTO CDC: one row per transaction and row, its latest recording.
AUDIT_KEYS = ["txn_id", "source", "schema", "table", "key"]


def audit_sequence() -> Column:
    """The AUTO CDC sequence of an audit row: its change's ``sequence``, then its enrichment
    (gold/enrichments.py; NULL, the least, when none), so a row corrected by a session that
    landed later wins over the row it corrects. The last field came with enrichments: a state
    kept before reads it as NULL (cdc/apply.py)."""
    return F.struct(F.col("sequence.position").alias("position"), F.col("sequence.txn").alias("txn"),
                    F.col(ENRICHED_AT).alias(ENRICHED_AT))
WHOLE_TABLE = "{}"  # the key of a TRUNCATE's audit row: the whole table (AUTO CDC keys are never NULL)


def audit_log(read, settings) -> DataFrame:
    """``gold.audit_log`` as of the watermark, rebuilt from the whole change stream: one row per
    applied change of every replicated table (what the pipeline's AUTO CDC flows maintain)."""
    points = watermarks(read, settings)
    return inputs.union_all([_table_audit(read, settings, flow, points) for flow in settings.onboarding.flows])


def _table_audit(read, settings, flow, points: DataFrame) -> DataFrame:
    changes = table_changes(read(inputs.changes_table(settings, flow.source)), flow)
    pinned = at_point(changes, points, flow.source).filter(applied())
    enriched = inputs.existing(read, [inputs.enrichments_table(settings, flow.source)])
    return audit_rows(with_enrichments(pinned, enriched[0][1] if enriched else None), flow,
                      inputs.gold_name(settings, flow.gold_table))


def due_audit_rows(due: DataFrame, settings, source: str) -> DataFrame:
    """Audit rows of the source's changes ``due`` now (coherent.due_changes), with who their
    enrichments say (``ENRICHED_AT``: enrichments.with_enrichments)."""
    parts = [
        audit_rows(table_changes(due, flow).filter(applied()), flow, inputs.gold_name(settings, flow.gold_table))
        for flow in inputs.flows_of(settings, source)
    ]
    return inputs.union_all(parts)


def audit_rows(changes: DataFrame, flow, gold_table: str) -> DataFrame:
    """Change stream rows of one table, with ``ENRICHED_AT`` where sessions can correct who ran
    them (enrichments.with_enrichments) -> audit rows of those the replicas applied, with the
    flow's column filters applied."""
    filters = flow.column_filters
    op = F.col("op")
    changes = with_enriched_at(changes)
    # silver keeps the image before the transaction in `before`, and the deleted image in `row`.
    before = F.when(op != "INSERT", images.image(F.coalesce("before", F.when(op == "DELETE", F.col("row"))), filters))
    with_images = _applicable(changes, flow).select(
        "*",
        before.alias("__before"),
        F.when(op != "DELETE", images.image(F.col("row"), filters)).alias("__after"),
        images.column_names(F.col("changed_columns"), filters).alias("__changed"),
    )
    return with_images.select(
        "source", "schema", "table", F.lit(gold_table).alias("gold_table"),
        # An ALTER is keyed by its statement: a TRUNCATE and ALTERs of one transaction stay apart.
        F.coalesce("key", F.when(op == ALTER, F.col("row")), F.lit(WHOLE_TABLE)).alias("key"),
        images.key_image(F.col("key"), filters).alias("key_values"),
        op.alias("operation"), "commit_ts", "txn_id", "sequence", "user", "role",
        F.col("__changed").alias("changed_columns"),
        F.col("__before").alias("before"), F.col("__after").alias("after"),
        images.changed_values(F.col("__changed"), F.col("__before"), F.col("__after")).alias("changed_values"),
        "origin", "anomalies", F.col("op_count").cast("bigint").alias("op_count"), ENRICHED_AT,
    )


def _applicable(changes: DataFrame, flow) -> DataFrame:
    """The changes the flow's replicas take (replica_input.rejection: none), their DDL too."""
    declared = declared_table(flow)
    checked = with_misfits(changes, [declared]) if declared else changes
    applies = change_rejection(declared is not None, key_columns(flow.keys)).isNull()
    return checked.filter(applies).select(*changes.columns)


def audit_transactions(read, settings) -> DataFrame:
    """``gold.audit_transactions`` as of the watermark, rebuilt from the whole change stream:
    every committed transaction up to it (what the pipeline's AUTO CDC flows maintain)."""
    points = watermarks(read, settings)
    parts = [
        source_transactions(read(inputs.transactions_table(settings, s)), read(inputs.changes_table(settings, s)), points, s)
        for s in inputs.sources(settings)
    ]
    return inputs.union_all(parts)


# gold.audit_transactions is applied with AUTO CDC, one row per transaction; a later row of a
# transaction wins when it is later in commit order (a shadow transaction recorded again) or, at
# one sequence, knows more of it (more of its changes: its transaction row came first, or its
# change rows landed over several updates).
AUDIT_TRANSACTION_KEYS = ["source", "txn_id"]
KNOWN = "__known"  # the AUTO CDC sequence of an audit transaction row


def source_transactions(transactions: DataFrame, changes: DataFrame, points: DataFrame | None, source: str) -> DataFrame:
    """Every committed transaction of ``source`` at or before its point in ``points`` (None:
    every one)."""
    if points is None:
        committed = transactions.filter(F.col("status") == "committed").join(_change_facts(changes), "txn_id", "left")
        return _audit_transaction_rows(_sequenced(committed))
    point = _point(points, source)
    per_txn = _change_facts(changes.join(point, F.col("sequence") <= F.col("__point")))
    committed = transactions.filter(F.col("status") == "committed").join(per_txn, "txn_id", "left")
    return _audit_transaction_rows(_sequenced(committed).join(point, F.col("sequence") <= F.col("__point")))


def due_audit_transactions(due: DataFrame, transactions: DataFrame, changes: DataFrame, points: DataFrame,
                           source: str) -> DataFrame:
    """The audit transaction rows, with ``KNOWN``, that the changes ``due`` now bring
    (coherent.due_changes): their transactions, plus the committed transactions without changes
    (DDL, empty ones) up to the commit point, which AUTO CDC takes once. The transaction rows
    are looked up in ``transactions`` (one narrow row per transaction); the change stream is
    not read. The streaming form (Databricks) joins the due changes to ``source_transactions``
    of all of ``changes`` instead."""
    if due.isStreaming:
        rows = streamed_due_transactions(due, transactions, changes, source)
    else:
        committed = transactions.filter(F.col("status") == "committed")
        facts = _change_facts(due)
        with_changes = committed.join(F.broadcast(facts), "txn_id")
        without = (_without_changes(committed, points, source).join(facts, "txn_id", "left_anti")
                   .withColumn("__change_sequence", F.lit(None)))
        rows = _audit_transaction_rows(_sequenced(with_changes.unionByName(without, allowMissingColumns=True)))
    return known(rows)


def known(rows: DataFrame) -> DataFrame:
    """Audit transaction rows with ``KNOWN``: later in commit order, then more changes, then more
    anomalies known, then a later enrichment of the user (NULL, the least: none)."""
    return rows.withColumn(KNOWN, F.struct(F.col("sequence").alias("sequence"), F.col("rows_changed").alias("rows"),
                                            F.size("anomalies").alias("anomalies"), F.col(ENRICHED_AT).alias(ENRICHED_AT)))


def enriched_audit_transactions(new_enriched: DataFrame, transactions: DataFrame, changes: DataFrame,
                                points: DataFrame, source: str) -> DataFrame:
    """The audit transaction rows, with ``KNOWN``, of the transactions ``new_enriched`` corrects
    (silver/session_enrichment.py) that gold has taken (enrichments.taken_changes): their
    ``ENRICHED_AT`` makes them win over the rows they correct. The streaming form (Databricks)
    joins the new enrichments to ``source_transactions`` of all of ``changes``."""
    txns = new_enriched.select("txn_id")
    if new_enriched.isStreaming:
        return known(txns.join(source_transactions(transactions, changes, None, source), "txn_id"))
    enriched = transactions.join(F.broadcast(txns.dropDuplicates()), "txn_id", "left_semi")
    return known(source_transactions(enriched, taken_changes(new_enriched, changes, points, source), points, source))


def streamed_due_transactions(due: DataFrame, transactions: DataFrame, changes: DataFrame, source: str) -> DataFrame:
    """A streamed micro-batch allows no aggregation: each due change selects the rows of
    ``source_transactions`` it carries, its own transaction's and those of the transactions
    without changes just before it in commit order (streaming dropDuplicates keeps one of
    each). Where no runtime keeps flow state, gold takes every new change at once (no commit
    point: coherent.due_changes), so every committed transaction is a candidate."""
    every = source_transactions(transactions, changes, None, source)
    # In reverse commit order, the nearest transaction with changes at or after each one.
    after = Window.partitionBy("source").orderBy(F.col("sequence").desc()).rowsBetween(Window.unboundedPreceding, 0)
    carrier = F.last(F.when(F.col("rows_changed") > 0, F.col("txn_id")), ignorenulls=True).over(after)
    carried = every.withColumn("__carrier", F.coalesce(carrier, F.col("txn_id")))
    rows = due.select(F.col("txn_id").alias("__carrier")).join(carried, "__carrier").drop("__carrier")
    return rows.dropDuplicates(["txn_id", "sequence", "rows_changed"])


def _point(points: DataFrame, source: str) -> DataFrame:
    return points.filter(F.col("source") == source).select(F.col("sequence").alias("__point"))


def _change_facts(changes: DataFrame) -> DataFrame:
    """Per transaction, from its changes: the sequence applied and its anomalies."""
    return changes.groupBy("txn_id").agg(
        F.max("sequence").alias("__change_sequence"),
        F.array_sort(F.array_distinct(F.flatten(F.collect_list("anomalies")))).alias("anomalies"),
    )


def _own_sequence() -> Column:
    """A transaction's own place in commit order, as its changes carry it."""
    return F.struct(F.col("sequence_position").alias("position"), F.col("txn_id").alias("txn"))


def _without_changes(committed: DataFrame, points: DataFrame, source: str) -> DataFrame:
    return (committed.filter(F.col("rows_changed") == 0).join(_point(points, source), _own_sequence() <= F.col("__point"))
            .drop("__point"))


def _sequenced(committed: DataFrame) -> DataFrame:
    """The sequence of the changes applied is authoritative; a transaction without changes (DDL)
    has its own."""
    return committed.withColumn("sequence", F.coalesce("__change_sequence", _own_sequence()))


def _audit_transaction_rows(txns: DataFrame) -> DataFrame:
    duration = (F.unix_micros("commit_ts") - F.unix_micros("begin_ts")) / 1e6
    return with_enriched_at(txns).select(
        "source", "txn_id", "commit_ts", "begin_ts", duration.alias("duration_s"), "sequence", "user", "role",
        "client", "application", "tables", "rows_changed", "inserts", "updates", "deletes",
        F.coalesce("anomalies", F.array().cast("array<string>")).alias("anomalies"),
        "ddl", "server_id", "thread_id", "xid", "gtid", "position", ENRICHED_AT,
    ).select(*[F.col(c).cast(t) for c, t in _types(AUDIT_TRANSACTIONS)])  # columns a capture lacks are NULL


def _types(table) -> list[tuple[str, str]]:
    return [(name, sql_type) for name, sql_type, _ in table.columns]


def changes_by_user_day(audit: DataFrame) -> DataFrame:
    """``gold.audit_changes_by_user_day`` from the audit log."""
    op = F.col("operation")
    return audit.groupBy(F.to_date("commit_ts").alias("day"), "source", "user", "role", "schema", "table").agg(
        F.count(F.lit(1)).alias("changes"),
        F.count_if(op == "INSERT").alias("inserts"),
        F.count_if(op == "UPDATE").alias("updates"),
        F.count_if(op == "DELETE").alias("deletes"),
        F.count_distinct("txn_id").alias("transactions"),
        F.min("commit_ts").alias("first_commit_ts"),
        F.max("commit_ts").alias("last_commit_ts"),
    ).select("source", "day", "user", "role", "schema", "table", "changes", "inserts", "updates", "deletes",
             "transactions", "first_commit_ts", "last_commit_ts")


def row_last_change(audit: DataFrame) -> DataFrame:
    """``gold.audit_row_last_change``: per row, its last change and who made it. TRUNCATE and
    ALTER rows name no row; a row whose table was truncated after its last change is gone."""
    table = ["source", "schema", "table"]
    last = F.max_by(F.struct("gold_table", "key_values", "operation", "commit_ts", "txn_id", "user", "role",
                             "changed_columns", "sequence"), "sequence")
    rows = audit.filter(~F.col("operation").isin(TRUNCATE, ALTER))
    per_row = rows.groupBy(*table, "key").agg(
        last.alias("last"), F.count(F.lit(1)).alias("changes"), F.min("commit_ts").alias("first_commit_ts"),
    )
    truncated = audit.filter(F.col("operation") == TRUNCATE).groupBy(*table).agg(F.max("sequence").alias("__truncated"))
    untruncated = F.col("__truncated").isNull() | (F.col("last.sequence") > F.col("__truncated"))
    return per_row.join(truncated, table, "left").select(
        "source", "schema", "table", "last.gold_table", "key", "last.key_values", "last.operation",
        "last.commit_ts", "last.txn_id", "last.user", "last.role", "last.changed_columns", "changes",
        "first_commit_ts", ((F.col("last.operation") != "DELETE") & untruncated).alias("row_exists"),
    )
