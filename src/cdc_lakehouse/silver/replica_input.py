"""The change stream of one table, shaped for AUTO CDC: typed columns plus ``__op``,
``__sequence``, ``__commit_ts`` and ``__txn_id``.

AUTO CDC fails a whole flow on a change without a key value or a sequence, and a failed flow
stops the update of every other table. So a change a replica cannot take is held back here
(``rejection``) and recorded, with its reason, in ``silver.<source>_anomalies`` (apply_policy.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse import flow_state
from cdc_lakehouse.silver.declared_types import DeclaredSchemaError, DeclaredTable, as_text, misfit_fields
from cdc_lakehouse.silver.filters import apply_column_filters
from cdc_lakehouse.silver.schema_changes import ALTER, stop_at_undeclared_change
from cdc_lakehouse.silver.truncates import TRUNCATE, open_key_deletes
from cdc_lakehouse.silver.typing import infer_row_schema, typed

APPLIED_OPS = ("INSERT", "UPDATE", "DELETE")
NO_CHANGE = "NONE"  # a net change that changes nothing (e.g. insert then delete); kept for its anomalies
_KEY_MAP = "map<string,string>"
_JSON_NUMBER = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$"

# Why a change cannot reach a replica (the anomaly kinds apply_policy.py records).
UNKNOWN_OP = "unknown_op"
INCOMPLETE_KEY = "incomplete_key"
BAD_ROW_IMAGE = "bad_row_image"
MISSING_KEY_COLUMN = "missing_key_column"  # the change's key lacks a column the replica is keyed on
MISSING_SEQUENCE = "missing_sequence"
VALUE_DOES_NOT_FIT = "value_does_not_fit"  # only for tables with declared types


def key_is_complete(key: Column) -> Column:
    """The key names at least one column and has a value for each."""
    values = F.map_values(F.from_json(key, _KEY_MAP))
    return F.coalesce((F.size(values) > 0) & F.forall(values, lambda v: v.isNotNull()), F.lit(False))


def has_key_columns(key: Column, keys: Column | None) -> Column:
    """The change's key names every column of ``keys`` (the replica's, array<string>; NULL or
    None: no replica to check against). Names compare as Spark resolves columns: any case."""
    if keys is None:
        return F.lit(True)
    names = F.transform(F.map_keys(F.from_json(key, _KEY_MAP)), F.lower)
    return F.coalesce(F.forall(keys, lambda k: F.array_contains(names, F.lower(k))), F.lit(True))


def key_columns(keys: Sequence[str]) -> Column | None:
    """A replica's key columns as the array ``rejection`` checks a change's key against (None:
    no key columns to check)."""
    return F.array(*[F.lit(k) for k in keys]) if keys else None


def replica_keys(flows) -> Column:
    """The key columns of each change's replica (array<string>), from the onboarded ``flows``."""
    return F.coalesce(*[F.when((F.col("schema") == f.schema_name) & (F.col("table") == f.table_name),
                               F.array(*[F.lit(k) for k in f.keys])) for f in flows], F.lit(None).cast("array<string>"))


def rejection(op: Column, key: Column, row: Column, sequence: Column, misfits: Column | None = None,
              keys: Column | None = None) -> Column:
    """Why AUTO CDC could not apply the change; NULL when it can, and for NONE and ALTER (nothing
    to apply; silver/schema_changes.py). A TRUNCATE needs only its sequence.
    ``misfits``: the columns whose values do not fit their declared types (``with_misfits``);
    ``keys``: the replica's key columns (a change without one of them would fail the flow)."""
    is_object = F.json_object_keys(row).isNotNull()
    why = (
        F.when(op.isNull() | ~op.isin(*APPLIED_OPS, NO_CHANGE, TRUNCATE, ALTER), F.lit(UNKNOWN_OP))
        .when(op.isin(NO_CHANGE, ALTER), F.lit(None))
        .when(op == TRUNCATE, F.when(sequence.isNull() | sequence.getField("position").isNull(), F.lit(MISSING_SEQUENCE)))
        .when(~key_is_complete(key), F.lit(INCOMPLETE_KEY))
        .when(~has_key_columns(key, keys), F.lit(MISSING_KEY_COLUMN))
        # A delete needs no image (its key says which row), but a broken one would break typing.
        .when((row.isNull() & (op != "DELETE")) | (row.isNotNull() & ~is_object), F.lit(BAD_ROW_IMAGE))
        .when(sequence.isNull() | sequence.getField("position").isNull(), F.lit(MISSING_SEQUENCE))
    )
    return why if misfits is None else why.when(F.size(misfits) > 0, F.lit(VALUE_DOES_NOT_FIT))


KEY_OBJECT = "__key"  # key_object(key), as replica_changes hands it on


def with_misfits(changes: DataFrame, tables: Sequence[DeclaredTable]) -> DataFrame:
    """``changes`` with ``misfits``: the values of each change of a declared table that do not
    fit their declared types (NULL for other tables). Only values that reach the replica count,
    and a delete only needs its key. Images are parsed once, in projections of their own; the
    key object is taken from a KEY_OBJECT column when ``changes`` has one."""
    has_key = KEY_OBJECT in changes.columns
    keyed = changes if has_key else changes.withColumn(KEY_OBJECT, key_object(F.col("key")))
    of = [(i, t, t.holds()) for i, t in enumerate(tables)]
    parsed = keyed.select(
        "*",
        *[F.when(is_t, F.from_json("row", as_text(t.replicated_schema))).alias(f"__raw_row{i}") for i, t, is_t in of],
        *[F.when(is_t, F.from_json(KEY_OBJECT, as_text(t.key_schema))).alias(f"__raw_key{i}") for i, t, is_t in of],
        *[F.when(is_t, F.from_json("row", t.replicated_schema)).alias(f"__row{i}") for i, t, is_t in of],
        *[F.when(is_t, F.from_json(KEY_OBJECT, t.key_schema)).alias(f"__key{i}") for i, t, is_t in of],
    )
    found = F.coalesce(*[F.when(is_t, _misfits_of(t, i)) for i, t, is_t in of])
    return parsed.withColumn("misfits", found).select(*changes.columns, "misfits")


def _misfits_of(table: DeclaredTable, i: int) -> Column:
    raw_row, row, keys = F.col(f"__raw_row{i}"), F.col(f"__row{i}"), table.key_schema.fields
    in_image = F.when(F.col("op") == "DELETE", misfit_fields(raw_row, row, keys)).otherwise(
        misfit_fields(raw_row, row, table.replicated_schema.fields))
    return F.array_distinct(F.concat(in_image, misfit_fields(F.col(f"__raw_key{i}"), F.col(f"__key{i}"), keys)))


def change_rejection(declared: bool = False, keys: Column | None = None) -> Column:
    """``rejection`` of the change-stream row in hand; with ``declared``, its ``misfits`` column
    (``with_misfits``) counts too."""
    return rejection(F.col("op"), F.col("key"), F.col("row"), F.col("sequence"),
                     F.col("misfits") if declared else None, keys)


def applies(declared: bool = False, keys: Column | None = None) -> Column:
    """True for the changes a replica takes: INSERT, UPDATE, DELETE or TRUNCATE without a rejection."""
    return F.col("op").isin(*APPLIED_OPS, TRUNCATE) & change_rejection(declared, keys).isNull()


def key_object(key: Column) -> Column:
    """The canonical key (values as text) as a JSON object, numbers and booleans unquoted again.

    A shadow partial update or delete of a row that was never inserted has no key column in
    its image: the key fills it in. Typing reads this object's values with the images', so a
    value always fits its column (a text that only looks like a number meets the image's
    string, and the column stays STRING)."""
    def entry(e):
        bare = e["value"].rlike(_JSON_NUMBER) | e["value"].isin("true", "false")
        value = F.when(bare, e["value"]).otherwise(_json_string(e["value"]))
        return F.concat(_json_string(e["key"]), F.lit(":"), value)

    entries = F.transform(F.map_entries(F.from_json(key, _KEY_MAP)), entry)
    return F.concat(F.lit("{"), F.array_join(entries, ","), F.lit("}"))


def _json_string(text: Column) -> Column:
    """``text`` as a JSON string literal, escaped by Spark's own JSON writer."""
    as_array = F.to_json(F.array(text))  # ["..."]
    return as_array.substr(F.lit(2), F.length(as_array) - 2)


def replica_changes(changes: DataFrame, column_filters=None, declared: DeclaredTable | None = None,
                    table: str = "this table", keys: Sequence[str] = ()) -> DataFrame:
    """The changes the replica takes, typed: with the declared types, else with the types the
    rows' values show (which needs the rows, so never on a streaming DataFrame). ``table``
    names the table in errors; ``keys``, the replica's key columns."""
    keyed = changes.withColumn(KEY_OBJECT, key_object(F.col("key")))  # read by the misfit check and typing
    checked = with_misfits(keyed, [declared]) if declared else keyed
    if declared:
        # A declared table stops at a DDL its declaration does not follow: nothing after it
        # applies. In ``op``, which every row's filter reads (a conjunct could be skipped).
        checked = checked.withColumn("op", F.when(stop_at_undeclared_change(declared), F.col("op")))
    applied = checked.filter(applies(declared is not None, key_columns(keys))).select(
        "row",
        KEY_OBJECT,
        F.col("op").alias("__op"),
        F.col("sequence").alias("__sequence"),
        F.col("commit_ts").alias("__commit_ts"),
        F.col("txn_id").alias("__txn_id"),
    )
    if declared:
        schema = declared.schema
    elif changes.isStreaming:
        raise DeclaredSchemaError(
            f"{table}: a streaming change stream (Databricks) cannot be typed from its rows: declare the "
            "table's columns in the flow's source_details.source_schema_path (docs/onboarding.md)"
        )
    else:
        # Cached: inferring the types and typing both read these rows, and each read would
        # check and key every change again. The runner drops the cache when the flows that
        # read this view have run.
        applied = applied.persist()
        schema = infer_row_schema(applied, also=KEY_OBJECT)
    return apply_column_filters(typed(applied, schema, fallback=KEY_OBJECT), column_filters)


def history_changes(typed: DataFrame, history: DataFrame, column_filters=None, declared: DeclaredTable | None = None,
                    table: str = "this table", keys: Sequence[str] = ()) -> DataFrame:
    """``typed`` (``replica_changes``) for an SCD2 history, which AUTO CDC cannot truncate:
    each TRUNCATE becomes DELETEs of the keys open at it, found in ``history``, the table's
    change stream. The other arguments are ``replica_changes``'. Where the runtime plans each
    batch anew, a batch without a truncate reads nothing more."""
    truncated = typed.filter(F.col("__op") == TRUNCATE)
    if flow_state.planned_per_batch() and truncated.isEmpty():
        return typed
    sequences = truncated.select(F.col("__sequence").alias("sequence"))
    deletes = replica_changes(open_key_deletes(sequences, history), column_filters, declared, table, keys)
    aligned = deletes.select(*[
        (F.col(f.name) if f.name in deletes.columns else F.lit(None)).cast(f.dataType).alias(f.name)
        for f in typed.schema.fields])
    return typed.filter(F.col("__op") != TRUNCATE).unionByName(aligned)
