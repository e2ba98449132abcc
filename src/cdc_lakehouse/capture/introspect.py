"""What the MariaDB shadow capture needs to know about a table: its columns and primary key, and
whether they still match the shadow triggers."""

from __future__ import annotations

import json

from .sqlquote import TableName, my_ident


def mariadb_columns(conn, table: TableName) -> tuple[list[str], list[str]]:
    """(columns in table order, primary key columns in key order); LookupError if no such table."""
    with conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME, COLUMN_KEY FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                    (table.schema, table.table))
        columns = [r[0] for r in cur.fetchall()]
        cur.execute("SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' "
                    "ORDER BY ORDINAL_POSITION", (table.schema, table.table))
        keys = [r[0] for r in cur.fetchall()]
    if not columns:
        raise LookupError(f"no table {table.qualified}")
    return columns, keys


def mariadb_default_role(cur, user: str, host: str) -> str | None:
    """The default role of the account a session from ``user@host`` most likely matched.

    MariaDB matches the most specific host first; exact host, then the longest pattern, is a
    close approximation (the role is what the session had unless it ran SET ROLE).
    """
    cur.execute("SELECT NULLIF(default_role, '') FROM mysql.user WHERE User = %s AND %s LIKE Host "
                "ORDER BY Host = %s DESC, CHAR_LENGTH(Host) DESC LIMIT 1", (user, host, host))
    row = cur.fetchone()
    return row[0] if row else None


class DefaultRoles:
    """Cached :func:`mariadb_default_role` lookups over one connection."""

    def __init__(self, conn):
        self.conn = conn
        self._cache: dict[tuple[str, str], str | None] = {}

    def __call__(self, user: str, host: str | None) -> str | None:
        key = (user, host or "%")
        if key not in self._cache:
            with self.conn.cursor() as cur:
                self._cache[key] = mariadb_default_role(cur, *key)
        return self._cache[key]


class ShadowTriggersOutOfDate(ValueError):
    """Captured tables whose columns changed since their shadow triggers were made.

    MariaDB fires no trigger on ALTER TABLE: the triggers keep the column list they were made
    with, so an added column would go uncaptured and a dropped or renamed one makes every write
    to the table fail. The export stops before reading anything, so nothing lands half-captured.
    """

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(
            "MariaDB shadow triggers no longer match their tables (an ALTER TABLE ran since "
            "`capture shadow-ddl`); nothing was exported:\n" + "\n".join(f"  {p}" for p in problems)
            + "\nRun `cdc-lakehouse capture shadow-ddl --dsn DSN --table T --apply` for each table, "
              "then take a snapshot of it (docs/snapshots.md): rows written between the ALTER TABLE "
              "and the new triggers carry only the old columns.")


def check_captured_columns(cur, capture_schema: str) -> None:
    """Raise :class:`ShadowTriggersOutOfDate` if a captured table's columns drifted.

    Compares each table's columns now with the columns its triggers capture (a missing one was
    dropped or renamed) and, where ``shadow-ddl`` read them from the server, with the columns
    the table had then (a new one was added). Registries from before these columns: no check."""
    cur.execute(f"SELECT * FROM {my_ident(capture_schema)}.`_tables` ORDER BY source_schema, source_table")
    names = [d[0] for d in cur.description]
    if "captured_columns" not in names:
        return
    problems = []
    for row in cur.fetchall():
        entry = dict(zip(names, row))
        table = TableName(entry["source_schema"], entry["source_table"])
        problem = _drift(cur, table, _names(entry["captured_columns"]), _names(entry["table_columns"]))
        if problem:
            problems.append(problem)
    if problems:
        raise ShadowTriggersOutOfDate(problems)


def _names(text: str | None) -> list[str] | None:
    return None if text is None else list(json.loads(text))


def _drift(cur, table: TableName, captured: list[str] | None, known: list[str] | None) -> str | None:
    cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (table.schema, table.table))
    now = [r[0] for r in cur.fetchall()]
    if not now or captured is None:  # a dropped table takes its triggers with it
        return None
    gone = [c for c in captured if c not in now]
    added = [c for c in now if known is not None and c not in known]
    parts = ([f"added {', '.join(added)} (not captured)"] if added else []) + (
        [f"dropped or renamed {', '.join(gone)} (its triggers fail every write)"] if gone else [])
    return f"{table.qualified}: columns {'; '.join(parts)}" if parts else None
