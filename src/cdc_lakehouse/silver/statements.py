"""DML logged as SQL in the binlog: a statement the replicas cannot apply, recorded, never dropped.

With ``binlog_format=STATEMENT`` (or ``MIXED``) the server logs ``UPDATE db.t SET v=5 WHERE id=1``
as a query event, not as row events: which rows it changed, and their images, are not in the
binlog. An exporter that is not this project's capture lands such a query as a ``ddl`` line
(CONTRACT §2.1 has no other type for a query). Silver cannot apply it row by row, so:

* inside BEGIN .. COMMIT it belongs to the transaction around it (``inside_transactions`` retypes
  it ``statement``: no boundary), which commits as usual; outside, it is a transaction of its own,
  like any ``ddl``;
* it becomes one change-stream row of its table (``binlog_statements``): op ``NONE`` (nothing to
  apply: no replica, audit or count takes it), keyed by its position, ``row`` holding the
  statement and where it was logged, and ``anomalies`` ``[statement_dml]``. The anomalies table
  turns it into an anomaly of the table (apply_policy.statement_anomaly), and gold.data_quality
  says the table may diverge from the source until its next snapshot (docs/capture.md).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.bronze import binlog_position
from cdc_lakehouse.silver.truncates import statement_is

STATEMENT_DML = "statement_dml"  # the anomaly kind, and its marker in a change's ``anomalies``
INSIDE = "statement"  # the type of a DML statement inside a transaction (capture/binlog_events.py)

_NAME = r"`?([A-Za-z0-9_$]+)`?(?:\s*\.\s*`?([A-Za-z0-9_$]+)`?)?"
_MODIFIERS = r"(?:(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE|QUICK)\s+)*"
# The table a DML statement writes (MySQL/MariaDB syntax); a multi-table one names its first.
_TARGET = (
    r"(?is)^\s*(?:/\*.*?\*/\s*)*(?:UPDATE\s+" + _MODIFIERS + r"|(?:INSERT|REPLACE)\s+" + _MODIFIERS
    + r"(?:INTO\s+)?|DELETE\s+" + _MODIFIERS + r"FROM\s+|LOAD\s+DATA\s+.*?\bINTO\s+TABLE\s+)" + _NAME
)


def is_dml(query: Column) -> Column:
    """Whether ``query`` is a statement that changes rows: INSERT, UPDATE, DELETE, REPLACE, LOAD DATA."""
    return statement_is(query, r"(?:INSERT|UPDATE|DELETE|REPLACE|LOAD\s+DATA)")


def target(query: Column, schema: Column, table: Column) -> tuple[Column, Column]:
    """(schema, table) the statement writes; an unqualified name is in the event's ``schema`` (the
    session's database); the event's own ``table`` when the statement cannot be read."""
    first, second = (F.nullif(F.regexp_extract(query, _TARGET, g), F.lit("")) for g in (1, 2))
    return (F.when(second.isNotNull(), first).otherwise(schema),
            F.coalesce(second, first, table))


def is_statement(events_type: Column, query: Column) -> Column:
    """A DML statement event: retyped inside a transaction, or a ``ddl`` of its own."""
    return (events_type == INSIDE) | ((events_type == "ddl") & is_dml(query))


def binlog_statements(events: DataFrame, txns: DataFrame, txn_columns: list[str]) -> DataFrame:
    """One change-stream row (``binlog_changes.net_changes`` shape) per DML statement of the
    committed ``txns``; ``events`` carry ``begin_lsn``: the start of the transaction each is in."""
    schema, table = target(F.col("query"), F.col("schema"), F.col("table"))
    found = events.filter(is_statement(F.col("type"), F.col("query"))).select(
        "server_id", "begin_lsn", F.col("lsn").alias("__at"), schema.alias("schema"), table.alias("table"),
        F.to_json(F.struct(F.col("query").alias("statement"), "file", "pos",
                           binlog_position.epoch_of(F.col("lsn")).alias("epoch"))).alias("row"),
    )
    joined = txns.join(found, ["server_id", "begin_lsn"]).filter(F.col("__at") <= F.col("end_lsn"))
    return joined.select(
        *txn_columns, "schema", "table",
        # Keyed by its position: two statements of one transaction stay two anomalies.
        F.to_json(F.struct(F.col("__at").cast("string").alias("statement_at"))).alias("key"),
        F.lit("NONE").alias("op"), "row",
        F.lit(None).cast("string").alias("before"),
        F.array(F.lit(STATEMENT_DML)).alias("anomalies"),
        F.lit(1).cast("long").alias("op_count"),
        F.col("end_lsn").alias("sequence"),
    )
