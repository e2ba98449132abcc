"""A source table's columns as Spark DDL, read from the server's catalog: the file a flow's
``source_details.source_schema_path`` names (docs/onboarding.md, "Column types").

Each source type maps to the Spark type that holds every value the capture writes for it
(contract/landing.py): exact numbers stay exact, dates and times are typed, and what Spark has
no faithful type for (TIME, INTERVAL, BIT, JSON, arrays, enums) stays STRING, as the landing
files carry it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .connect import MARIADB, POSTGRES
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
    """DECIMAL(p,s) as declared. Beyond Spark's 38 digits the integer digits are kept and
    decimals given up first; a value that still does not fit is held back as an anomaly
    (value_does_not_fit), where text or DOUBLE would round it."""
    if precision is None:  # PostgreSQL NUMERIC without precision
        return f"DECIMAL({_MAX_DECIMAL_PRECISION},{_UNBOUNDED_SCALE})"
    scale = scale or 0
    if scale < 0:  # PostgreSQL NUMERIC(5,-2): up to 7 integer digits, rounded to hundreds
        precision, scale = precision - scale, 0
    excess = max(0, precision - _MAX_DECIMAL_PRECISION)
    return f"DECIMAL({precision - excess},{max(0, scale - excess)})"


def schema_ddl(columns: list[SourceColumn]) -> str:
    """One ``name TYPE`` per line, in table order, as the demo's schema files are written."""
    return ",\n".join(f"{_quoted(c.name)} {spark_type(c)}" for c in columns) + "\n"


def _quoted(name: str) -> str:
    plain = name.isidentifier() and name.isascii()
    return name if plain else "`" + name.replace("`", "``") + "`"


_TABLES = {
    MARIADB: "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_TYPE = 'BASE TABLE' "
             "ORDER BY TABLE_NAME",
    POSTGRES: "SELECT table_name FROM information_schema.tables WHERE table_schema = %s AND table_type = 'BASE TABLE' "
              "ORDER BY table_name",
}
_COLUMNS = {
    MARIADB: "SELECT COLUMN_NAME, DATA_TYPE, NUMERIC_PRECISION, NUMERIC_SCALE, COLUMN_TYPE LIKE '%%unsigned%%' "
             "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
    POSTGRES: "SELECT column_name, data_type, numeric_precision, numeric_scale, false "
              "FROM information_schema.columns WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
}


def source_tables(conn, dialect: str, schema: str) -> list[TableName]:
    rows = _fetch(conn, _TABLES[dialect], (schema,), f"no tables in schema {schema} (or no privilege to see them)")
    return [TableName(schema, name) for (name,) in rows]


def source_columns(conn, dialect: str, table: TableName) -> list[SourceColumn]:
    rows = _fetch(conn, _COLUMNS[dialect], (table.schema, table.table),
                  f"no table {table.qualified} (or no privilege to see its columns)")
    return [SourceColumn(name, kind.lower(), precision, scale, bool(unsigned))
            for name, kind, precision, scale, unsigned in rows]


def _fetch(conn, query: str, params: tuple, missing: str) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(query, params)
        rows = cur.fetchall()
    if not rows:
        raise LookupError(missing)
    return rows


def table_ddls(conn, dialect: str, tables: list[TableName], schema: str | None = None) -> dict[TableName, str]:
    """The DDL of each of ``tables``, or of every table of ``schema`` when none are named."""
    return {table: schema_ddl(source_columns(conn, dialect, table))
            for table in tables or source_tables(conn, dialect, schema)}
