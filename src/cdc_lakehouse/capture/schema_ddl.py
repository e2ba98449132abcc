"""A source table's columns as Spark DDL, read from the server's catalog: the file a flow's
``source_details.source_schema_path`` names (docs/onboarding.md, "Column types").

Each source type maps to the Spark type that holds every value the capture writes for it
(capture/landing.py): exact numbers stay exact, dates and times are typed, and what Spark has
no faithful type for (TIME, INTERVAL, BIT, JSON, arrays, enums) stays STRING, as the landing
files carry it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .sqlquote import TableName

_MAX_DECIMAL_PRECISION = 38  # Spark's DECIMAL limit
_UNBOUNDED_SCALE = 18  # NUMERIC without precision: 20 digits before the point, 18 after


@dataclass(frozen=True)
class SourceColumn:
    name: str
    data_type: str  # information_schema DATA_TYPE, lower case
    precision: int | None = None
    scale: int | None = None
    unsigned: bool = False


_SIGNED = {"tinyint": "INT", "smallint": "INT", "mediumint": "INT", "int": "INT", "integer": "INT",
           "year": "INT", "bigint": "BIGINT"}
_UNSIGNED = {"tinyint": "INT", "smallint": "INT", "mediumint": "INT", "int": "BIGINT", "integer": "BIGINT",
             "bigint": "DECIMAL(20,0)"}
_OTHER = {
    "boolean": "BOOLEAN",  # PostgreSQL; MariaDB's BOOLEAN is TINYINT(1), captured as 0/1
    "real": "FLOAT", "float": "FLOAT", "double": "DOUBLE", "double precision": "DOUBLE",
    "date": "DATE", "datetime": "TIMESTAMP", "timestamp": "TIMESTAMP",
    "timestamp without time zone": "TIMESTAMP", "timestamp with time zone": "TIMESTAMP",
}


def spark_type(column: SourceColumn) -> str:
    """The Spark type for a source column; STRING when Spark has no faithful one."""
    kind = column.data_type.lower()
    if kind in _SIGNED:
        return (_UNSIGNED if column.unsigned else _SIGNED)[kind]
    if kind in ("decimal", "numeric"):
        return _decimal(column.precision, column.scale)
    return _OTHER.get(kind, "STRING")


def _decimal(precision: int | None, scale: int | None) -> str:
    """DECIMAL(p,s) as declared. Wider or unbounded ones take Spark's widest: a value beyond it
    is held back as an anomaly (value_does_not_fit), where text or DOUBLE would round it."""
    if precision is None:
        return f"DECIMAL({_MAX_DECIMAL_PRECISION},{_UNBOUNDED_SCALE})"
    precision, scale = min(precision, _MAX_DECIMAL_PRECISION), scale or 0
    return f"DECIMAL({precision},{min(scale, precision)})"


def schema_ddl(columns: list[SourceColumn]) -> str:
    """One ``name TYPE`` per line, in table order, as the demo's schema files are written."""
    return ",\n".join(f"{_quoted(c.name)} {spark_type(c)}" for c in columns) + "\n"


def _quoted(name: str) -> str:
    plain = name.isidentifier() and name.isascii()
    return name if plain else "`" + name.replace("`", "``") + "`"


def mariadb_source_columns(conn, table: TableName) -> list[SourceColumn]:
    return _catalog_columns(conn, table, (
        "SELECT COLUMN_NAME, DATA_TYPE, NUMERIC_PRECISION, NUMERIC_SCALE, COLUMN_TYPE LIKE '%%unsigned%%' "
        "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION"
    ))


def postgres_source_columns(conn, table: TableName) -> list[SourceColumn]:
    return _catalog_columns(conn, table, (
        "SELECT column_name, data_type, numeric_precision, numeric_scale, false "
        "FROM information_schema.columns WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position"
    ))


def _catalog_columns(conn, table: TableName, query: str) -> list[SourceColumn]:
    with conn.cursor() as cur:
        cur.execute(query, (table.schema, table.table))
        rows = cur.fetchall()
    if not rows:
        raise LookupError(f"no table {table.qualified}")
    return [SourceColumn(name, kind.lower(), precision, scale, bool(unsigned))
            for name, kind, precision, scale, unsigned in rows]
