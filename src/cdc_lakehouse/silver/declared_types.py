"""Declared column types: a flow's ``source_details.source_schema_path`` (dlt-meta's key) names a
file holding the source table's schema as Spark DDL (``customer_id BIGINT, price DECIMAL(10,2),
...``), as dlt-meta reads it.

A declared table's replicas take exactly these types, whatever the values look like: DECIMAL
stays exact, DATE and TIMESTAMP are typed, and nothing depends on which rows come first. It is
also what lets a replica be typed on a streaming DataFrame (Databricks), where no rows can be
looked at before the query starts.

A value that does not fit its declared type would reach the replica as NULL: such a change is
held back and recorded as an anomaly instead (``misfit_fields``). A column the image has but the
file does not declare would be lost from the replica: the change is applied and the column named
in an anomaly (``undeclared_columns``); its values stay in the change stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DateType, DecimalType, DoubleType, FloatType, StringType, StructField, StructType, _parse_datatype_string,
)

_DECIMALS = r"\.([0-9]*[1-9])0*$"  # the significant digits after the point


class DeclaredSchemaError(ValueError):
    """A declared schema file that cannot be used, with the flow and file it concerns."""


@dataclass(frozen=True)
class DeclaredTable:
    """A source table with declared types, as its flow sees it (source column names)."""

    schema_name: str
    table_name: str
    schema: StructType
    keys: tuple[str, ...]
    ignored: tuple[str, ...] = ()  # columns the flow discards: leaving them undeclared loses nothing
    kept: tuple[str, ...] | None = None  # the flow's column_list: only these reach the replica
    path: str = ""  # the file that declares it (source_schema_path)

    def holds(self) -> Column:
        """True for the change-stream rows of this table."""
        return (F.col("schema") == self.schema_name) & (F.col("table") == self.table_name)

    @property
    def key_schema(self) -> StructType:
        return StructType([f for f in self.schema.fields if f.name in self.keys])

    def reaches(self, name: str) -> bool:
        """Whether a column of this name reaches the replica (a key, else neither discarded nor
        left out of the column_list)."""
        return name in self.keys or (name not in self.ignored and (self.kept is None or name in self.kept))

    def reaches_column(self, name: Column) -> Column:
        """``reaches`` for a column name known only in the data (one a DDL statement names)."""
        kept = F.lit(True) if self.kept is None else name.isin(*self.kept)
        return name.isin(*self.keys) | (~name.isin(*self.ignored) & kept)

    @property
    def replicated_schema(self) -> StructType:
        """The declared columns that reach the replica: only their values must fit."""
        return StructType([f for f in self.schema.fields if self.reaches(f.name)])


def declared_table(flow) -> DeclaredTable | None:
    """The flow's table with its declared schema; None when the flow declares none."""
    schema = declared_schema(flow)
    if schema is None:
        return None
    source = flow.column_filters.source_name
    kept = tuple(map(source, flow.column_list)) if flow.column_list else None
    return DeclaredTable(
        flow.schema_name, flow.table_name, schema, tuple(map(source, flow.keys)),
        ignored=(*flow.column_filters.drop, *map(source, flow.except_column_list)), kept=kept,
        path=str(flow.source_details.source_schema_path),
    )


def declared_schema(flow) -> StructType | None:
    """The flow's declared source schema, checked to hold its key columns; None if undeclared.
    A relative path is relative to the onboarding file (load_onboarding), else to the working
    directory."""
    declared = flow.source_details.source_schema_path
    if not declared:
        return None
    where = f"flow {flow.data_flow_id} ({flow.qualified_table}): source_schema_path {declared}"
    try:
        ddl = Path(declared).read_text()
    except OSError as exc:
        raise DeclaredSchemaError(f"{where}: cannot read: {exc.strerror or exc}") from None
    schema = _parsed(ddl, where)
    for role, columns in _named_columns(flow).items():
        missing = [c for c in map(flow.column_filters.source_name, columns) if c not in schema.names]
        if missing:
            raise DeclaredSchemaError(f"{where}: declares no column for the {role} {', '.join(missing)}")
    return schema


def _named_columns(flow) -> dict[str, list[str]]:
    """The columns the flow's APPLY CHANGES arguments name (silver names): AUTO CDC fails on any
    the replica lacks."""
    return {
        "key": flow.keys, "column_list entry": flow.column_list or [],
        "track_history_column_list entry": flow.track_history_column_list or [],
        "track_history_except_column_list entry": flow.track_history_except_column_list or [],
    }


def _parsed(ddl: str, where: str) -> StructType:
    try:  # StructType.fromDDL is Spark 4 only; Databricks runtimes on Spark 3.5 have this one
        schema = _parse_datatype_string(ddl.strip())
    except Exception as exc:  # noqa: BLE001 - Spark's parse errors have no common public type
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DeclaredSchemaError(f"{where}: not a Spark DDL schema: {first_line}") from None
    if not isinstance(schema, StructType) or not schema.fields:
        raise DeclaredSchemaError(f"{where}: must list columns, e.g. 'id BIGINT, name STRING'")
    return schema


def as_text(schema: StructType) -> StructType:
    """``schema`` with every field STRING: an image parsed with it holds each value's JSON text."""
    return StructType([StructField(f.name, StringType()) for f in schema.fields])


def misfit_fields(raw: Column, typed: Column, fields) -> Column:
    """Of ``fields``, those whose value in an image does not fit the field's type, as
    ``name (type)`` in declared order (empty when all fit). ``raw`` is the image parsed with
    ``as_text`` of the fields' schema, ``typed`` parsed with the schema itself: a value that is
    present and not null, yet NULL once typed (or changed by Spark's reader), does not fit. Both
    are parsed columns, not expressions: a JSON parse repeated per field costs 4x."""
    def misfit(f) -> Column:
        lost = raw[f.name].isNotNull() & (typed[f.name].isNull() | _changed(raw[f.name], typed[f.name], f.dataType))
        return F.when(lost, F.lit(f"{f.name} ({f.dataType.simpleString()})"))

    return F.array_compact(F.array(*[misfit(f) for f in fields]))


def _changed(raw: Column, value: Column, kind) -> Column:
    """Where Spark's JSON reader changes a value instead of refusing it: it rounds a DECIMAL to
    its scale, overflows a FLOAT or DOUBLE to infinity and cuts the time off a DATE."""
    if isinstance(kind, DecimalType):
        extra_decimals = F.length(F.regexp_extract(raw, _DECIMALS, 1)) > kind.scale
        exponent_rounded = raw.rlike("[eE]") & (raw.cast("double") != value.cast("double"))
        return extra_decimals | exponent_rounded
    if isinstance(kind, (FloatType, DoubleType)):
        return (F.abs(value) == F.lit(float("inf"))) & ~F.lower(raw).contains("inf")
    if isinstance(kind, DateType):
        return raw.rlike("[T ][0-9]")
    return F.lit(False)


def undeclared_columns(row: Column, table: DeclaredTable) -> Column:
    """The image's columns that reach the replica but are not declared, sorted; empty if none."""
    known = F.array(*[F.lit(name) for name in (*table.schema.names, *table.ignored)])
    found = F.array_except(F.coalesce(F.json_object_keys(row), F.array().cast("array<string>")), known)
    if table.kept is not None:
        found = F.filter(found, lambda name: name.isin(*table.kept))
    return F.array_sort(found)
