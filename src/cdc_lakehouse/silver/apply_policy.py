"""Apply policy (issue #4): how the replicas take changes the source should not have sent, and
the anomalies table that records each one (``silver.<source>_anomalies``).

The replicas apply changes with AUTO CDC (cdc/apply.py, APPLY CHANGES semantics): per key, in
``sequence`` order, every INSERT or UPDATE is an upsert and every DELETE removes the row and
leaves a tombstone. So, judged against the previous applied change of the same row:

- an INSERT of a key whose row exists overwrites the row: applied as UPDATE;
- an UPDATE of a key without a row inserts the change's image: applied as INSERT;
- a DELETE of a key without a row removes nothing (a tombstone is kept): applied as NONE.

Changes AUTO CDC cannot take at all (replica_input.rejection: unknown op, key without a value,
image that is no JSON object, no sequence, a key without a column the replica is keyed on) are
held back from the replicas and recorded here, as is each impossible pair of operations inside one transaction (CONTRACT section 3). Snapshot
corrections are changes like any other.

Everything is computed from the change stream alone, so the table is the same whatever the
order or the repetitions in which the changes arrived.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from cdc_lakehouse.silver.declared_types import DeclaredTable, undeclared_columns
from cdc_lakehouse.silver.replica_input import (
    APPLIED_OPS, BAD_ROW_IMAGE, INCOMPLETE_KEY, MISSING_KEY_COLUMN, MISSING_SEQUENCE, NO_CHANGE, UNKNOWN_OP, VALUE_DOES_NOT_FIT,
    change_rejection, with_misfits,
)
from cdc_lakehouse.silver.binlog_epochs import EPOCH_INFERRED
from cdc_lakehouse.silver.statements import STATEMENT_DML
from cdc_lakehouse.silver.truncates import TRUNCATE

INSERT_OF_EXISTING_KEY = "insert_of_existing_key"
UPDATE_OF_MISSING_KEY = "update_of_missing_key"
DELETE_OF_MISSING_KEY = "delete_of_missing_key"
UNDECLARED_COLUMN = "undeclared_column"
ROW_ID = ["source", "schema", "table", "key"]
TABLE = ROW_ID[:3]

ANOMALIES_COMMENT = (
    "One row per anomaly in the change stream of the source: an impossible pair of operations on one row "
    "in one transaction (CONTRACT section 3), an insert of an existing key, an update or delete of a "
    "missing key, or a change the replicas cannot apply; with its transaction and what the replicas did."
)
ANOMALY_COLUMNS = (
    ("source", "STRING", "Source system (the directory under the landing path)."),
    ("schema", "STRING", "Schema (database) of the source table."),
    ("table", "STRING", "Name of the source table."),
    ("key", "STRING", "Replication key of the row: JSON object of the key columns, sorted by name, values as "
                      "text (NULL or with a NULL value for incomplete_key)."),
    ("txn_id", "STRING", "Transaction of the change at the source."),
    ("commit_ts", "TIMESTAMP", "Commit time of the transaction."),
    ("sequence", "STRUCT<position: BIGINT, txn: STRING>", "Commit order of the change (as in the change stream)."),
    ("op", "STRING", "Net change of the row in the transaction as the source sent it: INSERT, UPDATE, DELETE, NONE."),
    ("anomaly", "STRING", "Kind: insert_of_existing_key, update_of_missing_key, delete_of_missing_key, "
                          "unknown_op, incomplete_key, bad_row_image, missing_sequence, value_does_not_fit, "
                          "undeclared_column, statement_dml (a DML statement logged as SQL: the replicas may "
                          "diverge until the next snapshot), epoch_inferred (binlog positions started again "
                          "without an epoch, or another server's lines followed: no table), or an impossible "
                          "pair such as insert_after_insert."),
    ("applied_as", "STRING", "What the replicas did with the change: INSERT, UPDATE, DELETE, or NONE (not applied)."),
    ("detail", "STRING", "Why this is an anomaly, in words."),
    ("user", "STRING", "Database user that ran the transaction."),
    ("role", "STRING", "Database role of that user."),
    ("origin", "STRING", "Where the change came from: binlog, shadow or snapshot (a snapshot correction)."),
)


def anomalies_ddl() -> str:
    """The table's schema with column comments, for ``@dp.materialized_view(schema=...)``."""
    quoted = lambda text: text.replace("\\", "\\\\").replace("'", "\\'")  # noqa: E731
    return ", ".join(f"`{n}` {t} COMMENT '{quoted(c)}'" for n, t, c in ANOMALY_COLUMNS)


# -- the changes, once each, in order ------------------------------------------------------------
def distinct_changes(changes: DataFrame) -> DataFrame:
    """One row per change of a row in a transaction: the change stream repeats a change when a
    transaction is emitted again. Ties are broken on every column, so the row kept never
    depends on arrival order."""
    latest = Window.partitionBy(*ROW_ID, _same_change()).orderBy(
        F.col("sequence").desc_nulls_last(), F.col("commit_ts").desc_nulls_last(),
        *[F.col(c).asc_nulls_last() for c in ("txn_id", "op", "row", "before", "origin", "user", "role", "anomalies")],
    )
    return changes.withColumn("__r", F.row_number().over(latest)).filter("__r = 1").drop("__r")


def _same_change() -> Column:
    """What two rows of one row key share when they are one change. A binlog transaction or a
    snapshot correction emitted again keeps its sequence (its txn_id alone is not enough: binlog
    xids repeat across servers and restarts). A shadow transaction recorded again later keeps
    its txn_id but moves to a later sequence, which AUTO CDC lets win: the latest is kept."""
    by_sequence = F.coalesce(F.to_json(F.col("sequence")), F.concat(F.lit("txn "), F.col("txn_id")))
    return F.when(F.col("origin") == "shadow", F.concat(F.lit("txn "), F.col("txn_id"))).otherwise(by_sequence)


def with_previous(changes: DataFrame, declared: Sequence[DeclaredTable] = (), keys: Column | None = None) -> DataFrame:
    """The distinct changes with ``rejected`` (why a replica cannot take it) and, for applied
    ones, the op and transaction of the previous applied change of the same row. With
    ``declared`` tables, also ``misfits`` (values that do not fit their declared types)."""
    # Partitioned by row once: both windows below partition by the row (the first by more), so
    # neither needs a shuffle of its own.
    checked = distinct_changes(changes.repartition(*ROW_ID))
    if declared:
        checked = with_misfits(checked, declared)
    checked = checked.withColumn("rejected", change_rejection(bool(declared), keys))
    applied = F.col("op").isin(*APPLIED_OPS) & F.col("rejected").isNull()
    # The last applied change before this one, in one pass: the others are skipped as NULLs.
    mark = F.when(applied, F.struct(F.col("op").alias("op"), F.col("txn_id").alias("txn_id"), "sequence"))
    before = Window.partitionBy(*ROW_ID).orderBy("sequence", "txn_id").rowsBetween(Window.unboundedPreceding, -1)
    last = F.last(mark, ignorenulls=True).over(before)
    # A truncate of the table after that change removed the row.
    truncate = F.array_max(F.filter("__truncates", lambda t: t["sequence"] < F.col("sequence")))
    truncated = F.struct(F.lit(TRUNCATE).alias("op"), truncate["txn_id"].alias("txn_id"), truncate["sequence"].alias("sequence"))
    previous = F.when(truncate.isNotNull() & (last.isNull() | (last["sequence"] < truncate["sequence"])), truncated).otherwise(last)
    return (
        checked.join(F.broadcast(_truncates(changes)), TABLE, "left")
        .withColumn("__previous", F.when(F.coalesce(applied, F.lit(False)), previous))
        .withColumn("previous_op", F.col("__previous.op"))
        .withColumn("previous_txn_id", F.col("__previous.txn_id"))
        .drop("__previous", "__truncates")
    )


def _truncates(changes: DataFrame) -> DataFrame:
    """Per table, its TRUNCATEs (``__truncates``: sequence and transaction of each)."""
    truncates = changes.filter(F.col("op") == TRUNCATE).select(*TABLE, F.struct("sequence", "txn_id").alias("__t"))
    return truncates.groupBy(*TABLE).agg(F.collect_set("__t").alias("__truncates"))


def per_table(declared: Sequence[DeclaredTable], build: Callable[[DeclaredTable], Column]) -> Column:
    """``build(table)`` for the changes of each declared table; NULL for the other tables."""
    return F.coalesce(*[F.when(t.holds(), build(t)) for t in declared])


# -- what the replicas did --------------------------------------------------------------------
def row_existed() -> Column:
    return F.coalesce(F.col("previous_op").isin("INSERT", "UPDATE"), F.lit(False))


def applied_as() -> Column:
    """What AUTO CDC did with the change (see the module docstring)."""
    op, existed = F.col("op"), row_existed()
    return (
        F.when(F.col("rejected").isNotNull() | (op == NO_CHANGE), F.lit("NONE"))
        .when(op.isin("INSERT", "UPDATE"), F.when(existed, "UPDATE").otherwise("INSERT"))
        .when(op == "DELETE", F.when(existed, "DELETE").otherwise("NONE"))
        .otherwise(F.lit("NONE"))
    )


# -- the anomalies of one change --------------------------------------------------------------
def _anomaly(kind, detail: Column) -> Column:
    kind = F.lit(kind) if isinstance(kind, str) else kind
    return F.struct(kind.alias("anomaly"), detail.alias("detail"))


def _previous() -> Column:
    return F.concat(
        F.lit("last changed by "), F.col("previous_op"), F.lit(" in transaction "), F.col("previous_txn_id")
    )


def _missing_because() -> Column:
    gone = F.when(F.col("previous_op") == TRUNCATE, F.lit("truncated")).otherwise(F.lit("deleted"))
    return F.when(F.col("previous_op").isNull(), F.lit("never inserted")).otherwise(
        F.concat(gone, F.lit(" in transaction "), F.col("previous_txn_id"))
    )


def policy_anomaly() -> Column:
    """The apply-policy anomaly of an applied change (NULL when there is none)."""
    op, existed = F.col("op"), row_existed()
    return (
        F.when((op == "INSERT") & existed, _anomaly(INSERT_OF_EXISTING_KEY, F.concat(
            F.lit("INSERT of a key whose row exists ("), _previous(),
            F.lit("); AUTO CDC upserts: the row takes the inserted values"))))
        .when((op == "UPDATE") & ~existed, _anomaly(UPDATE_OF_MISSING_KEY, F.concat(
            F.lit("UPDATE of a key without a row ("), _missing_because(),
            F.lit("); AUTO CDC upserts: the row is inserted from the change's image (columns it lacks are NULL)"))))
        .when((op == "DELETE") & ~existed, _anomaly(DELETE_OF_MISSING_KEY, F.concat(
            F.lit("DELETE of a key without a row ("), _missing_because(),
            F.lit("); nothing to delete: AUTO CDC only keeps a tombstone"))))
    )


def rejection_anomaly(declared: bool = False, keys: Column | None = None) -> Column:
    """The anomaly of a change the replicas held back (NULL when they took it)."""
    op, key = F.coalesce(F.col("op"), F.lit("NULL")), F.coalesce(F.col("key"), F.lit("NULL"))
    details = {
        UNKNOWN_OP: F.concat(F.lit("op "), op, F.lit(" is none of INSERT, UPDATE, DELETE, TRUNCATE, ALTER, NONE: not applied")),
        INCOMPLETE_KEY: F.concat(F.lit("the key "), key, F.lit(" lacks a value for a key column: not applied")),
        BAD_ROW_IMAGE: F.lit("the row image is missing or is no JSON object: not applied"),
        MISSING_SEQUENCE: F.lit("the change has no sequence to be ordered by: not applied"),
    }
    if keys is not None:
        details[MISSING_KEY_COLUMN] = F.concat(
            F.lit("the key "), key, F.lit(" lacks a column the replica is keyed on ("), F.array_join(keys, ", "),
            F.lit("), as after a key column is renamed at the source: not applied"))
    if declared:
        details[VALUE_DOES_NOT_FIT] = F.concat(
            F.lit("values that do not fit the declared type (source_schema_path): "),
            F.array_join(F.col("misfits"), ", "), F.lit(": not applied"),
        )
    detail = F.coalesce(*[F.when(F.col("rejected") == kind, text) for kind, text in details.items()])
    return F.when(F.col("rejected").isNotNull(), _anomaly(F.col("rejected"), detail))


def statement_anomaly() -> Column:
    """The anomaly of a DML statement logged as SQL (silver/statements.py; NULL for other changes):
    the statement, its transaction and position, and the remedy."""
    image = F.from_json(F.col("row"), "statement string, file string, pos long, epoch long")
    at = F.concat_ws(":", image["file"], image["pos"].cast("string"))
    detail = F.concat(
        F.lit("a DML statement logged as SQL (binlog_format STATEMENT or MIXED): "), image["statement"],
        F.lit(" (transaction "), F.col("txn_id"), F.lit(", position "), at,
        F.when(image["epoch"] > 0, F.concat(F.lit(" epoch "), image["epoch"].cast("string"))).otherwise(F.lit("")),
        F.lit("); the rows it changed are not in the binlog, so the replicas did not apply it and may differ "
              "from the source until the table's next snapshot: set binlog_format=ROW and binlog_row_image=FULL "
              "on the server, then take a snapshot of the table (docs/capture.md)"),
    )
    marked = F.coalesce(F.array_contains(F.col("anomalies"), STATEMENT_DML), F.lit(False))
    return F.when(marked, _anomaly(STATEMENT_DML, detail))


def epoch_anomaly() -> Column:
    """The anomaly of an epoch inferred from the landing (silver/binlog_epochs.py; NULL for other
    changes): where the positions started again, or which server the source switched from, and
    which landed line showed it."""
    image = F.from_json(F.col("row"), "file string, pos long, epoch long, switched_from long, landed_in string, _line long")
    server = F.get_json_object("key", "$.server_id")
    line = F.concat(F.lit("line "), image["_line"].cast("string"), F.lit(" of "), image["landed_in"])
    at = F.concat_ws(":", image["file"], image["pos"].cast("string"))
    reused = F.concat(
        F.lit("binlog positions of server "), server,
        F.lit(" started again without an epoch in the landing lines (RESET MASTER, a restore or a failover): "),
        line, F.lit(" holds at "), at, F.lit(" other content than the line landed there before"))
    switched = F.concat(
        F.lit("server "), image["switched_from"].cast("string"), F.lit(" → server "), server,
        F.lit(": the binlog lines of server "), server, F.lit(" follow those of server "),
        image["switched_from"].cast("string"), F.lit(" in the landing order without an epoch or GTIDs (a failover, "
                                                    "or a fail-back): "), line, F.lit(" at "), at, F.lit(" is its first"))
    detail = F.concat(
        F.when(image["switched_from"].isNotNull(), switched).otherwise(reused),
        F.lit(", so it starts inferred epoch "), image["epoch"].cast("string"),
        F.lit(": it and the lines landed after it apply after everything before them (docs/binlog-epochs.md)"),
    )
    marked = F.coalesce(F.array_contains(F.col("anomalies"), EPOCH_INFERRED), F.lit(False))
    return F.when(marked, _anomaly(EPOCH_INFERRED, detail))


def pair_anomalies() -> Column:
    """The impossible pairs the transaction's operations on the row contained, one per kind."""
    marks = F.coalesce(F.col("anomalies"), F.array().cast("array<string>"))
    # Not pairs: statement_anomaly's and epoch_anomaly's marks.
    found = F.filter(marks, lambda a: ~a.isin(STATEMENT_DML, EPOCH_INFERRED))

    def one(text: Column) -> Column:
        times = F.size(F.filter(found, lambda a: a == text))
        kind = F.regexp_replace(F.lower(text), r"[^a-z0-9]+", "_")
        detail = F.concat(
            F.lit("operations on the row in one transaction that cannot follow each other (CONTRACT section 3): "),
            text, F.when(times > 1, F.concat(F.lit(" ("), times.cast("string"), F.lit(" times)"))).otherwise(F.lit("")),
        )
        return _anomaly(kind, detail)

    return F.transform(F.array_sort(F.array_distinct(found)), one)


def undeclared_anomaly(declared: Sequence[DeclaredTable]) -> Column:
    """The columns an applied change's image has that its table's schema file does not declare."""
    found = per_table(declared, lambda t: undeclared_columns(F.col("row"), t))
    takes_image = F.col("op").isin("INSERT", "UPDATE") & F.col("rejected").isNull()
    detail = F.concat(
        F.lit("columns not declared in source_schema_path: "), F.array_join(found, ", "),
        F.lit("; the replicas leave them out (their values stay in the change stream)"),
    )
    return F.when(takes_image & (F.coalesce(F.size(found), F.lit(0)) > 0), _anomaly(UNDECLARED_COLUMN, detail))


# -- the table --------------------------------------------------------------------------------
def anomalies(changes: DataFrame, declared: Sequence[DeclaredTable] = (), keys: Column | None = None) -> DataFrame:
    """One row per anomaly of the change stream ``changes`` (columns: ANOMALY_COLUMNS);
    ``declared``: the source's tables with declared types; ``keys``: each change's replica key
    columns (``replica_input.replica_keys``)."""
    checked = with_previous(changes, declared, keys).withColumn("applied_as", applied_as())
    policy = F.when(F.col("rejected").isNull(), policy_anomaly())  # a held-back change has no place in the order
    of_change = [rejection_anomaly(bool(declared), keys), policy, statement_anomaly(), epoch_anomaly(),
                 *([undeclared_anomaly(declared)] if declared else [])]
    found = F.concat(F.array_compact(F.array(*of_change)), pair_anomalies())
    exploded = checked.select("*", F.explode(found).alias("__a"))
    return exploded.select(
        *ROW_ID, "txn_id", "commit_ts", "sequence", "op",
        F.col("__a.anomaly").alias("anomaly"), "applied_as", F.col("__a.detail").alias("detail"),
        "user", "role", "origin",
    )
