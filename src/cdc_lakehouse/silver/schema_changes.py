"""ALTER TABLE at a source: a change-stream row per statement that changes columns, and the
stop of a declared table whose declaration it breaks.

A committed binlog ``ddl`` event whose statement is an ``ALTER TABLE`` that adds, drops or renames
columns (``ADD [COLUMN]``, ``DROP [COLUMN]``, ``RENAME COLUMN a TO b``, ``CHANGE [COLUMN] a b``)
becomes one change-stream row: op ``ALTER``, no key, ``row`` ``{"statement": <the DDL>}``, at its
transaction's sequence (silver/truncates.py makes TRUNCATE rows the same way). At a PostgreSQL
shadow source an event trigger records each ALTER TABLE of a captured table as a change row of op
``A`` (values ``{"statement": ...}``), which becomes the same row; so does its DROP TABLE of one
(and MariaDB's export, finding one gone), which no replica follows either: ``gold.data_quality``
marks the table dropped. No replica applies such a row as a change; the audit log shows it.

A replica whose types are inferred takes the columns the row images show: an added column
widens it at once, a dropped one is NULL in rows changed after the DDL, a renamed one continues
under its new name. A replica with a declared schema (``source_schema_path``) cannot follow the
source on its own: a column the DDL adds that would reach it, or a declared column it drops or
renames, stops the table's flows at the DDL with an error naming the statement and what to
declare (``stop_at_undeclared_change``). Nothing is applied past it, so once the declaration
follows the source the next update applies every change from there on (docs/capture.md).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.silver.declared_types import DeclaredTable
from cdc_lakehouse.silver.truncates import SHADOW_ALTER, TRUNCATE, is_truncate, statement_is

ALTER = "ALTER"
STATEMENT_SCHEMA = "statement string"

_NAME = r"`?([A-Za-z0-9_$]+)`?"
# Words after ADD / DROP that do not start a column (indexes, keys, constraints, partitions).
_NOT_COLUMNS = ("INDEX", "KEY", "PRIMARY", "UNIQUE", "FOREIGN", "FULLTEXT", "SPATIAL", "CONSTRAINT", "CHECK",
                "PARTITION", "DEFAULT", "COLUMN", "IF", "PERIOD", "SYSTEM")
_ADDED = rf"(?i)\bADD\s+(?:COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?{_NAME}\s+[A-Za-z]"
_DROPPED = rf"(?i)\bDROP\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?{_NAME}"
_RENAMED = rf"(?i)\b(?:RENAME\s+COLUMN\s+{_NAME}\s+TO\s+{_NAME}|CHANGE\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?{_NAME}\s+{_NAME})"


def is_alter_table(query: Column) -> Column:
    return statement_is(query, r"ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE")


def _columns(query: Column, pattern: str, group: int = 1) -> Column:
    found = F.regexp_extract_all(query, F.lit(pattern), group)
    return F.filter(found, lambda c: ~F.upper(c).isin(*_NOT_COLUMNS) & (c != F.lit("")))


def added_columns(query: Column) -> Column:
    return _columns(query, _ADDED)


def dropped_columns(query: Column) -> Column:
    return _columns(query, _DROPPED)


def renamed_columns(query: Column) -> Column:
    """(old, new) of each RENAME COLUMN, and of each CHANGE COLUMN that changes the name."""
    def pairs(old_group: int, new_group: int) -> Column:
        olds, news = (F.regexp_extract_all(query, F.lit(_RENAMED), g) for g in (old_group, new_group))
        return F.filter(F.arrays_zip(olds.alias("old"), news.alias("new")),
                        lambda p: (p["old"] != F.lit("")) & (p["old"] != p["new"]))
    return F.concat(pairs(1, 2), pairs(3, 4))


def changes_columns(query: Column) -> Column:
    """Whether ``query`` is an ALTER TABLE that adds, drops or renames a column."""
    touched = F.size(added_columns(query)) + F.size(dropped_columns(query)) + F.size(renamed_columns(query))
    return is_alter_table(query) & (touched > 0)


def statement_row(query: Column) -> Column:
    """The ``row`` of an ALTER change-stream row."""
    return F.to_json(F.struct(query.alias("statement")))


def binlog_table_ddl(events: DataFrame, txns: DataFrame, txn_columns: list[str]) -> DataFrame:
    """The TRUNCATE and ALTER changes of the committed ``txns`` (with ``begin_lsn``), in the shape
    of ``binlog_changes.net_changes``. A ddl event is a transaction of its own: it begins there."""
    query = F.col("query")
    op = F.when(is_truncate(query), F.lit(TRUNCATE)).when(changes_columns(query), F.lit(ALTER))
    ddl = events.filter(F.col("type") == "ddl").select(
        "server_id", F.col("lsn").alias("begin_lsn"), "schema", "table", op.alias("op"),
        F.when(op == ALTER, statement_row(query)).alias("row"),
    ).filter(F.col("op").isNotNull())
    return txns.join(ddl, ["server_id", "begin_lsn"]).select(
        *txn_columns, "schema", "table",
        F.lit(None).cast("string").alias("key"),
        "op", "row",
        F.lit(None).cast("string").alias("before"),
        F.array().cast("array<string>").alias("anomalies"),
        F.lit(1).cast("long").alias("op_count"),
        F.col("end_lsn").alias("sequence"),
    )


def with_statement_keys(ops: DataFrame) -> DataFrame:
    """Shadow operations with each ALTER (op ``A``) keyed by its transaction and place in it: the
    fold and the net change keep every statement a row of its own."""
    place = F.coalesce(F.col("ord.op_seq").cast("string"), F.col("ord.op_ts").cast("string"))
    statement_key = F.to_json(F.struct(F.concat_ws("/", F.col("txn_id"), place).alias("__statement")))
    return ops.withColumn("key", F.when(F.col("op") == SHADOW_ALTER, statement_key).otherwise(F.col("key")))


def stop_at_undeclared_change(table: DeclaredTable) -> Column:
    """True for each change-stream row; raises, at an ALTER of ``table`` that its declaration does
    not follow, an error naming the statement, its transaction and what to declare."""
    statement = F.from_json(F.col("row"), STATEMENT_SCHEMA)["statement"]
    declared = table.replicated_schema.names

    def undeclared(c: Column) -> Column:  # would reach the replica, which has no such column
        return table.reaches_column(c) & ~c.isin(*declared)

    added = F.filter(added_columns(statement), undeclared)
    dropped = F.filter(dropped_columns(statement), lambda c: c.isin(*declared))
    renamed = F.transform(F.filter(renamed_columns(statement), lambda p: p["old"].isin(*declared) | undeclared(p["new"])),
                          lambda p: F.concat(p["old"], F.lit(" -> "), p["new"]))
    breaks = is_alter_table(statement) & (F.size(added) + F.size(dropped) + F.size(renamed) > 0)

    def listed(what: str, columns: Column) -> Column:
        return F.when(F.size(columns) > 0, F.concat(F.lit(f"; {what}: "), F.array_join(columns, ", "))).otherwise(F.lit(""))

    message = F.concat(
        F.lit(f"{table.schema_name}.{table.table_name}: the source ran "), statement,
        F.lit(" (transaction "), F.col("txn_id"), F.lit(", committed "), F.col("commit_ts").cast("string"),
        F.lit(f"), which its declared schema ({table.path}) does not follow"),
        listed("added", added), listed("dropped", dropped), listed("renamed", renamed),
        F.lit(". The table's replicas stop before it: declare the columns as they are now and run again "
              "(docs/capture.md, \"TRUNCATE and other DDL\")."),
    )
    of_table = (F.col("op") == ALTER) & table.holds()
    return F.when(of_table & breaks, F.raise_error(message)).otherwise(F.lit(True))
