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


def identity_sql(schema: str, table: str) -> tuple[str, str]:
    """SQL for a table's InnoDB table id and its creation time (``schema`` and ``table`` are SQL
    expressions: literals or placeholders, each used twice, in that order).

    A TRUNCATE gives the table a new id and keeps its creation time; a rebuild (OPTIMIZE TABLE,
    a copying ALTER TABLE) or DROP and CREATE change both. InnoDB names a table
    ``<schema>/<table>``, each part in the server's 'filename' encoding."""
    part = "CONVERT(CAST(CONVERT({} USING filename) AS BINARY) USING utf8mb3)"
    name = f"CONCAT({part.format(schema)}, '/', {part.format(table)})"
    return (f"(SELECT TABLE_ID FROM information_schema.INNODB_SYS_TABLES WHERE NAME = {name})",
            f"(SELECT CREATE_TIME FROM information_schema.TABLES WHERE TABLE_SCHEMA = {schema} "
            f"AND TABLE_NAME = {table})")


class ShadowTriggersOutOfDate(ValueError):
    """Captured tables changed in a way their shadow triggers cannot record.

    MariaDB fires no trigger on ALTER TABLE or TRUNCATE: the triggers keep the column list they
    were made with, so an added column would go uncaptured and a dropped or renamed one makes
    every write fail; a TRUNCATE empties the table unseen. The export stops before reading
    anything, so nothing lands half-captured, and says what to do.
    """

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(
            "MariaDB captured tables changed by DDL that their shadow triggers cannot record (MariaDB "
            "fires no trigger on ALTER TABLE or TRUNCATE); nothing was exported:\n"
            + "\n".join(f"  {p}" for p in problems)
            + "\nRun `cdc-lakehouse capture shadow-ddl --dsn DSN --table T --apply` for each table, export, "
              "then take a snapshot of it (docs/snapshots.md): its corrections add what the triggers "
              "missed (new columns) and delete what a TRUNCATE removed.")


def check_captured_tables(cur, capture_schema: str) -> dict[TableName, str]:
    """Raise :class:`ShadowTriggersOutOfDate` if a captured table changed unseen since
    ``shadow-ddl``: its columns (a captured one is missing: dropped or renamed; one is new, where
    ``shadow-ddl`` read the table's columns from the server) or its identity (a new InnoDB id:
    emptied by TRUNCATE, or rebuilt). Registries from before these records: not checked.
    Returns the captured tables that are gone (dropped), each with an id for its drop."""
    cur.execute(f"SELECT * FROM {my_ident(capture_schema)}.`_tables` ORDER BY source_schema, source_table")
    names = [d[0] for d in cur.description]
    entries = [dict(zip(names, row)) for row in cur.fetchall()]
    gone, problems = {}, []
    for entry in entries:
        table = TableName(entry["source_schema"], entry["source_table"])
        now = _columns_now(cur, table)
        if not now:  # a dropped table takes its triggers with it
            gone[table] = f"dropped:{entry.get('table_id') or table.qualified}"
        elif "table_id" in names and (problem := _problem(cur, table, entry, now)):
            problems.append(problem)
    if problems:
        raise ShadowTriggersOutOfDate(problems)
    return gone


def _columns_now(cur, table: TableName) -> list[str]:
    cur.execute("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (table.schema, table.table))
    return [r[0] for r in cur.fetchall()]


def _problem(cur, table: TableName, entry: dict, now: list[str]) -> str | None:
    parts = _column_drift(now, _names(entry["captured_columns"]), _names(entry["table_columns"]))
    if entry["table_id"] is not None:
        cur.execute("SELECT " + ", ".join(identity_sql("%s", "%s")), (table.schema, table.table) * 2)
        parts += _recreation((entry["table_id"], entry["table_created"]), cur.fetchone())
    return f"{table.qualified}: {'; '.join(parts)}" if parts else None


def _names(text: str | None) -> list[str] | None:
    return None if text is None else list(json.loads(text))


def _column_drift(now: list[str], captured: list[str] | None, known: list[str] | None) -> list[str]:
    gone = [c for c in captured or [] if c not in now]
    added = [c for c in now if known is not None and c not in known]
    return ([f"columns added {', '.join(added)} (not captured)"] if added else []) + (
        [f"columns dropped or renamed {', '.join(gone)} (its triggers fail every write)"] if gone else [])


def _recreation(recorded: tuple, now: tuple) -> list[str]:
    if tuple(now) == tuple(recorded):
        return []
    if now[1] == recorded[1]:
        return ["emptied by TRUNCATE TABLE (not captured)"]
    return ["rebuilt or created again (OPTIMIZE TABLE, a copying ALTER TABLE, or DROP and CREATE TABLE): "
            "a TRUNCATE would not show"]
