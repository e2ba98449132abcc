"""Database connections from a DSN: ``postgresql://...`` (psycopg) or ``mariadb://...`` (PyMySQL)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

POSTGRES = "postgres"
MARIADB = "mariadb"
_SCHEMES = {"postgresql": POSTGRES, "postgres": POSTGRES, "mariadb": MARIADB, "mysql": MARIADB}


@dataclass(frozen=True)
class MySqlParams:
    host: str
    port: int
    user: str
    password: str
    database: str | None

    def pymysql_kwargs(self) -> dict:
        kw = {"host": self.host, "port": self.port, "user": self.user, "password": self.password,
              "charset": "utf8mb4", "autocommit": True}
        if self.database:
            kw["database"] = self.database
        return kw


def dialect_of(dsn: str) -> str:
    scheme = urlsplit(dsn).scheme.lower()
    if scheme not in _SCHEMES:
        raise ValueError(f"unsupported DSN scheme {scheme!r}: use postgresql:// or mariadb://")
    return _SCHEMES[scheme]


def mysql_params(dsn: str) -> MySqlParams:
    u = urlsplit(dsn)
    query = parse_qs(u.query)
    password = unquote(u.password or "") or query.get("password", [""])[0]
    return MySqlParams(host=u.hostname or "127.0.0.1", port=u.port or 3306,
                       user=unquote(u.username or "root"), password=password,
                       database=unquote(u.path.lstrip("/")) or None)


def connect(dsn: str):
    """An open connection; PostgreSQL ones are not in autocommit mode, MariaDB ones are."""
    if dialect_of(dsn) == POSTGRES:
        import psycopg

        return psycopg.connect(dsn.replace("postgres://", "postgresql://", 1)
                               if dsn.startswith("postgres://") else dsn)
    import pymysql

    return pymysql.connect(**mysql_params(dsn).pymysql_kwargs())
