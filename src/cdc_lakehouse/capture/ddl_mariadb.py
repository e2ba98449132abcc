"""MariaDB shadow capture DDL (the "Capture Transaction Details" pattern).

MariaDB has no SQL function returning the current transaction id, no per-row ``to_json`` and no
trigger on COMMIT; so:

* Transaction id: each shadow table is system-versioned with *transaction precision*; its
  invisible ``txn_id`` (ROW START) column is the InnoDB transaction id, set by the server.
  The transaction table is the server's own ``mysql.transaction_registry``: it gets a row, with
  the true commit time, for every transaction that wrote a transaction-precise table, at
  COMMIT. The export joins the two into CONTRACT §2.3 rows (``end_ts`` = commit time).
* The trigger is one INSERT and reads nothing: in REPEATABLE READ, reads inside a trigger are
  locking reads, and a read of a missing key (an "insert if absent" transaction row) takes a
  gap lock that blocks concurrent writers. So user and client ride on each change row.
* Row images: one trigger per operation, generated from the column list; ``JSON_OBJECT`` of the
  key columns and of all (INSERT) or the changed (UPDATE) columns, compared byte-wise.
* Binlog sessions (optional, for binlog capture): MariaDB before 11.5 writes no thread id for
  row-based transactions, so :func:`marker_statements` adds triggers that append a
  row to ``_binlog_sessions`` (thread id, user, host, since when); the row event lands
  inside the transaction in the binlog and tells the binlog capture who ran it.
* Operation order: a per-session counter in a user variable, increasing across tables inside
  a transaction. (A SEQUENCE would do, but a transaction that used one cannot SAVEPOINT.) A
  session that overwrites the variable can disorder only its own operations.
* User: ``USER()`` (the client's user and host, also inside a trigger). Role: triggers run in
  their definer's security context, where ``CURRENT_ROLE()`` is the definer's (checked on
  10.11), and reading ``mysql.user`` inside a transaction forbids later SAVEPOINTs (an Aria
  table); so the export records the user's *default role*, looked up when it exports. A
  ``SET ROLE`` inside a session is not seen.

Names are quoted with backticks and every string is a hex literal (:mod:`sqlquote`), so the
DDL is safe whatever the names and whatever the server's SQL mode.
"""

from __future__ import annotations

from .introspect import identity_sql
from .sqlquote import CAPTURE_SCHEMA, TableName, my_ident, my_string

S = my_ident(CAPTURE_SCHEMA)
OPS = {"I": "INSERT", "U": "UPDATE", "D": "DELETE"}

_NEXT_OP = "(@cdc_capture_op_seq := COALESCE(@cdc_capture_op_seq, 0) + 1)"
# The session's user and host, from USER() (host names cannot contain '@', user names can).
_WHO = """    DECLARE v_host VARCHAR(255) DEFAULT SUBSTRING_INDEX(USER(), '@', -1);
    DECLARE v_user VARCHAR(384) DEFAULT LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(v_host) - 1);"""

_COMMON = [
    f"CREATE DATABASE IF NOT EXISTS {S} CHARACTER SET utf8mb4",
    f"""CREATE TABLE IF NOT EXISTS {S}.`_tables` (
    source_schema VARCHAR(64) NOT NULL,
    source_table  VARCHAR(64) NOT NULL,
    shadow_table  VARCHAR(64) NOT NULL UNIQUE,
    key_columns   LONGTEXT NOT NULL CHECK (JSON_VALID(key_columns)),
    PRIMARY KEY (source_schema, source_table)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    # MariaDB fires no trigger on ALTER TABLE or TRUNCATE: the export compares the columns the
    # triggers name (and the table's columns then, if known) and the table's InnoDB identity
    # with the table now (introspect.check_captured_tables). Added here, not in the CREATE, so
    # that a capture schema made before them gains them too.
    f"""ALTER TABLE {S}.`_tables`
    ADD COLUMN IF NOT EXISTS captured_columns LONGTEXT NULL CHECK (JSON_VALID(captured_columns)),
    ADD COLUMN IF NOT EXISTS table_columns LONGTEXT NULL CHECK (JSON_VALID(table_columns)),
    ADD COLUMN IF NOT EXISTS table_id BIGINT UNSIGNED NULL,
    ADD COLUMN IF NOT EXISTS table_created DATETIME NULL""",
]


def common_statements() -> list[str]:
    """Capture schema and the registry of captured tables."""
    return list(_COMMON)


def _json_object(pairs: list[tuple[str, str]]) -> str:
    return "JSON_OBJECT(" + ", ".join(f"{my_string(name)}, {expr}" for name, expr in pairs) + ")"


def _image(row: str, columns: list[str]) -> str:
    return _json_object([(c, f"{row}.{my_ident(c)}") for c in columns])


def _differs(column: str) -> str:
    c = my_ident(column)
    return f"NOT (BINARY OLD.{c} <=> BINARY NEW.{c})"


def _record(shadow: str, op: str, key: str, old_key: str, values: str) -> str:
    return f"""INSERT INTO {shadow} (op_ts, op_seq, op, `key`, old_key, `values`, db_user, client)
        VALUES (UTC_TIMESTAMP(6), {_NEXT_OP}, '{op}', {key}, {old_key}, {values},
                v_user, v_host);"""


def _trigger_body(op: str, shadow: str, columns: list[str], keys: list[str]) -> str:
    if op == "I":
        return _record(shadow, "I", _image("NEW", keys), "NULL", _image("NEW", columns))
    if op == "D":
        return _record(shadow, "D", _image("OLD", keys), "NULL", "NULL")
    merges = "\n        ".join(
        f"IF {_differs(c)} THEN SET v_vals = JSON_MERGE_PRESERVE(v_vals, "
        f"{_json_object([(c, 'NEW.' + my_ident(c))])}); SET v_changed = TRUE; END IF;"
        for c in columns)
    key_changed = " OR ".join(_differs(k) for k in keys)
    old_key = f"IF({key_changed}, {_image('OLD', keys)}, NULL)"
    return f"""DECLARE v_vals LONGTEXT DEFAULT JSON_OBJECT();
    DECLARE v_changed BOOLEAN DEFAULT FALSE;
    {merges}
        IF v_changed THEN
        {_record(shadow, "U", _image("NEW", keys), old_key, "v_vals")}
        END IF;"""


def _json_array(names: list[str] | None) -> str:
    return "NULL" if names is None else f"JSON_ARRAY({', '.join(my_string(n) for n in names)})"


def table_statements(table: TableName, columns: list[str], keys: list[str],
                     table_columns: list[str] | None = None) -> list[str]:
    """Shadow table, registry row and the three triggers of one table (idempotent).

    ``columns`` are the columns the triggers capture; ``table_columns`` all the table's columns
    now, when known (read from the server), so that the export can tell an added column."""
    if not columns:
        raise ValueError(f"{table.qualified}: the MariaDB DDL needs the table's columns")
    if not keys:
        raise ValueError(f"{table.qualified}: no key columns (no primary key and no --key)")
    missing = [k for k in keys if k not in columns]
    if missing:
        raise ValueError(f"{table.qualified}: key columns {missing} are not columns of the table")
    shadow = f"{S}.{my_ident(table.shadow)}"
    src = f"{my_ident(table.schema)}.{my_ident(table.table)}"
    out = [
        f"""CREATE TABLE IF NOT EXISTS {shadow} (
    id       BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY,
    op_ts    DATETIME(6) NOT NULL,
    op_seq   BIGINT NOT NULL,
    op       CHAR(1) NOT NULL,
    `key`    LONGTEXT NOT NULL,
    old_key  LONGTEXT NULL,
    `values` LONGTEXT NULL,
    db_user  VARCHAR(384) NOT NULL,
    client   VARCHAR(255) NULL,
    txn_id   BIGINT UNSIGNED GENERATED ALWAYS AS ROW START INVISIBLE,
    txn_end  BIGINT UNSIGNED GENERATED ALWAYS AS ROW END INVISIBLE,
    PERIOD FOR SYSTEM_TIME (txn_id, txn_end)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 WITH SYSTEM VERSIONING""",
        # The exporter looks up the rest of a batch's transactions by txn_id past an id.
        f"CREATE INDEX IF NOT EXISTS txn_id_id ON {shadow} (txn_id, id)",
        f"""REPLACE INTO {S}.`_tables` (source_schema, source_table, shadow_table, key_columns,
                           captured_columns, table_columns, table_id, table_created)
VALUES ({my_string(table.schema)}, {my_string(table.table)}, {my_string(table.shadow)},
        {_json_array(keys)}, {_json_array(columns)}, {_json_array(table_columns)},
        {', '.join(identity_sql(my_string(table.schema), my_string(table.table)))})""",
    ]
    for op, event in OPS.items():
        trigger = f"{my_ident(table.schema)}.{my_ident(f'{table.shadow}_{op.lower()}')}"
        out.append(f"DROP TRIGGER IF EXISTS {trigger}")
        out.append(f"""CREATE TRIGGER {trigger} AFTER {event} ON {src} FOR EACH ROW
BEGIN
{_WHO}
    {_trigger_body(op, shadow, columns, keys)}
END""")
    return out


def shadow_statements(table: TableName, columns: list[str], keys: list[str],
                      table_columns: list[str] | None = None) -> list[str]:
    return common_statements() + table_statements(table, columns, keys, table_columns)


def render_script(statements: list[str]) -> str:
    """Statements as a script for the ``mariadb`` client, with a delimiter no statement contains."""
    delimiter = next(d for d in ("$$", "//", ";;", "$$cdc$$", "%%cdc%%") +
                     tuple(f"$cdc{n}$" for n in range(1000))
                     if not any(d in s for s in statements))
    body = "".join(f"{s}{delimiter}\n\n" for s in statements)
    return f"DELIMITER {delimiter}\n\n{body}DELIMITER ;\n"


MARKER_TABLE = "_binlog_sessions"

_MARKER_COMMON = [
    f"CREATE DATABASE IF NOT EXISTS {S} CHARACTER SET utf8mb4",
    # Append-only on purpose: an upsert per thread would take next-key locks that make
    # concurrent writers wait. The binlog capture deletes rows it has read (by id).
    f"""CREATE TABLE IF NOT EXISTS {S}.`{MARKER_TABLE}` (
    id        BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY,
    thread_id BIGINT UNSIGNED NOT NULL,
    db_user   VARCHAR(384) NOT NULL,
    client    VARCHAR(255) NULL,
    since     DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    f"DROP PROCEDURE IF EXISTS {S}.`_mark_session`",
    # ``since`` is the statement's start (UTC): never after the transaction's binlog time.
    f"""CREATE PROCEDURE {S}.`_mark_session`()
MODIFIES SQL DATA
BEGIN
{_WHO}
    INSERT INTO {S}.`{MARKER_TABLE}` (thread_id, db_user, client, since)
    VALUES (CONNECTION_ID(), v_user, v_host, UTC_TIMESTAMP(6));
END""",
]


def marker_statements(table: TableName) -> list[str]:
    """Binlog session-marker table, procedure and triggers for one table (idempotent)."""
    src = f"{my_ident(table.schema)}.{my_ident(table.table)}"
    out = list(_MARKER_COMMON)
    for op, event in OPS.items():
        trigger = f"{my_ident(table.schema)}.{my_ident(f'{table.shadow}_m{op.lower()}')}"
        out.append(f"DROP TRIGGER IF EXISTS {trigger}")
        out.append(f"CREATE TRIGGER {trigger} AFTER {event} ON {src} FOR EACH ROW "
                   f"CALL {S}.`_mark_session`()")
    return out
