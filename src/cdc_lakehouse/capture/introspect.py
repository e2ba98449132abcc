"""What the MariaDB shadow DDL needs to know about a table: its columns and primary key."""

from __future__ import annotations

from .sqlquote import TableName


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
