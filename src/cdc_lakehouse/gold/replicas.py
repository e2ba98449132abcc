"""Gold replicas: a source table's rows at a commit point, built from the change stream.

Per key, the last change at or before the commit point wins (a DELETE removes the row, a
TRUNCATE every row last changed before it), with
the flow's column filters and APPLY CHANGES column selection, so at the watermark a gold
replica equals the silver SCD1 replica once silver has caught up, and at an earlier commit
point it is the table as it was then.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from cdc_lakehouse.gold.commit_point import at_point, commit_point
from cdc_lakehouse.silver.declared_types import declared_table
from cdc_lakehouse.silver.replica_input import replica_changes
from cdc_lakehouse.silver.truncates import TRUNCATE

INTERNAL = ("__op", "__sequence", "__commit_ts", "__txn_id")


def table_changes(changes: DataFrame, flow) -> DataFrame:
    return changes.filter((F.col("schema") == flow.schema_name) & (F.col("table") == flow.table_name))


def typed_changes(changes: DataFrame, flow) -> DataFrame:
    """The source's ``changes`` of ``flow``'s table, typed as the replicas are (AUTO CDC input)."""
    return replica_changes(table_changes(changes, flow), flow.column_filters, declared_table(flow), keys=flow.keys)


def replica_at(changes: DataFrame, flow, points: DataFrame) -> DataFrame:
    """``flow``'s table at its source's commit point in ``points`` (source, sequence);
    ``changes`` is the source's silver change stream."""
    typed = typed_changes(at_point(changes, points, flow.source), flow)
    if not all(k in typed.columns for k in flow.keys):  # nothing changed yet: no columns known
        return typed.sparkSession.createDataFrame([], ", ".join(f"`{k}` STRING" for k in flow.keys))
    truncated = F.col("__op") == TRUNCATE
    newest_first = Window.partitionBy(*flow.keys).orderBy(F.col("__sequence").desc())
    latest = typed.filter(~truncated).withColumn("__rank", F.row_number().over(newest_first)).filter("__rank = 1")
    # A row last changed before the table's latest truncate is gone.
    last_truncate = typed.filter(truncated).agg(F.max("__sequence").alias("__truncated"))
    kept = latest.crossJoin(last_truncate).filter(
        F.col("__truncated").isNull() | (F.col("__sequence") > F.col("__truncated")))
    return kept.filter(~_deleted(flow)).select(*replica_columns(flow, typed.columns))


def replica_as_of(changes: DataFrame, flow, sequence) -> DataFrame:
    """The table as it was right after the transaction with commit point ``sequence``
    (a (position, txn) pair or Row, e.g. from gold.audit_transactions)."""
    position, txn = sequence
    return replica_at(changes, flow, commit_point(changes.sparkSession, flow.source, position, txn))


def replica_columns(flow, columns: list[str]) -> list[str]:
    """The columns AUTO CDC keeps: ``column_list``, or all but ``except_column_list``."""
    if flow.column_list:
        return [c for c in flow.column_list if c in columns]
    excluded = {*flow.except_column_list, *INTERNAL}
    return [c for c in columns if c not in excluded]


def _deleted(flow):
    if not flow.apply_as_deletes:
        return F.lit(False)
    return F.coalesce(F.expr(flow.apply_as_deletes), F.lit(False))


def replica_comment(flow) -> str:
    keys = ", ".join(flow.keys)
    return (
        f"Replica of {flow.qualified_table} at source {flow.source} (key: {keys}), at the commit point of "
        f"gold.replication_watermark: with the other gold replicas of {flow.source}, a valid source state "
        "(every transaction up to that point, in every table, none after it). Columns are the source "
        "table's, after the onboarding's column filters."
    )
