"""Shadow capture DDL: quoting, and hostile names against live PostgreSQL and MariaDB."""

from __future__ import annotations

import json

import pytest
from live import fixtures
from live.replay import read_jsonl

from cdc_lakehouse.capture import ddl_mariadb, ddl_postgres
from cdc_lakehouse.contract.landing import table_folder
from cdc_lakehouse.capture.shadow_export import export_once
from cdc_lakehouse.capture.sqlquote import TableName, UnsafeName, my_ident, my_string, pg_ident, pg_literal

HOSTILE_TABLE = 'x"; DROP TABLE y; --'
HOSTILE_SCHEMA = "s'; DROP TABLE y; --"
HOSTILE_COLUMN = "c`\"'); DROP TABLE y; --\\"


@pytest.fixture(scope="module")
def pg():
    return fixtures.postgres()


@pytest.fixture(scope="module")
def maria():
    return fixtures.mariadb()


def test_quoting_functions():
    assert pg_ident('a"b') == '"a""b"'
    assert pg_literal("it's \\") == "E'it''s \\\\'"
    assert my_ident("a`b") == "`a``b`"
    assert my_string("a'`\\") == "_utf8mb4 X'" + "a'`\\".encode().hex() + "'"
    with pytest.raises(UnsafeName):
        pg_ident("a\x00b")
    with pytest.raises(UnsafeName):
        my_ident("")


def test_table_name_parsing():
    assert TableName.parse("shop.orders") == TableName("shop", "orders")
    assert TableName.parse('"my.schema"."x""y"') == TableName("my.schema", 'x"y')
    with pytest.raises(ValueError):
        TableName.parse("no_schema")
    a, b = TableName("s", "t_x"), TableName("s_t", "x")
    assert a.shadow != b.shadow, "shadow names must not collide when the underscores do"
    assert len(TableName("s" * 64, "t" * 64).shadow) <= 58


def test_mariadb_ddl_checks_keys_and_picks_a_safe_delimiter():
    t = TableName("s", "t")
    with pytest.raises(ValueError, match="not columns"):
        ddl_mariadb.table_statements(t, ["a"], ["b"])
    with pytest.raises(ValueError, match="no key"):
        ddl_mariadb.table_statements(t, ["a"], [])
    script = ddl_mariadb.render_script(["SELECT '$$'", "SELECT 1"])
    assert script.startswith("DELIMITER //")


def _canary_pg(conn, schema):
    conn.execute(f"CREATE TABLE {pg_ident(schema)}.y (id int)")


def test_hostile_names_postgres(pg, tmp_path):
    schema = HOSTILE_SCHEMA + fixtures.unique_schema("")
    table = TableName(schema, HOSTILE_TABLE)
    conn = pg.connect(autocommit=True)
    conn.execute(f"CREATE SCHEMA {pg_ident(schema)}")
    _canary_pg(conn, schema)
    conn.execute(f"CREATE TABLE {pg_ident(schema)}.{pg_ident(HOSTILE_TABLE)} "
                 f"({pg_ident(HOSTILE_COLUMN)} int PRIMARY KEY, \"select\" text)")
    conn.execute(ddl_postgres.shadow_ddl(table))
    conn.execute(ddl_postgres.shadow_ddl(table))  # idempotent
    # The exporter's look-up of a batch's transactions by (txn_id, id) has its index.
    indexed = conn.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = 'cdc_capture' AND tablename = %s "
                           "AND indexdef LIKE '%%(txn_id, id)'", (table.shadow,)).fetchall()
    assert len(indexed) == 1
    src = f"{pg_ident(schema)}.{pg_ident(HOSTILE_TABLE)}"
    conn.execute(f"INSERT INTO {src} VALUES (1, 'a'), (2, 'b')")
    conn.execute(f"UPDATE {src} SET {pg_ident(HOSTILE_COLUMN)} = 3, \"select\" = NULL "
                 f"WHERE {pg_ident(HOSTILE_COLUMN)} = 1")
    conn.execute(f"DELETE FROM {src} WHERE {pg_ident(HOSTILE_COLUMN)} = 2")
    assert conn.execute(f"SELECT count(*) FROM {pg_ident(schema)}.y").fetchone() == (0,)
    export_once(pg.dsn, tmp_path, "pg", purge="on_landing")  # shared server: leave no rows behind
    changes = _changes(tmp_path / "pg", table)
    assert [(r["op"], r["key"], r["old_key"], r["values"]) for r in changes] == HOSTILE_CHANGES
    conn.close()


def test_hostile_names_mariadb(maria, tmp_path):
    schema = "s`; DROP TABLE y; --" + fixtures.unique_schema("")
    table = TableName(schema, HOSTILE_TABLE)
    src = f"{my_ident(schema)}.{my_ident(HOSTILE_TABLE)}"
    conn = maria.connect()
    cur = conn.cursor()
    cur.execute(f"CREATE DATABASE {my_ident(schema)}")
    cur.execute(f"CREATE TABLE {my_ident(schema)}.y (id int)")
    cur.execute(f"CREATE TABLE {src} ({my_ident(HOSTILE_COLUMN)} int PRIMARY KEY, `select` text)")
    for _ in range(2):  # idempotent
        for statement in ddl_mariadb.shadow_statements(table, [HOSTILE_COLUMN, "select"], [HOSTILE_COLUMN]):
            cur.execute(statement)
    cur.execute("SELECT GROUP_CONCAT(column_name ORDER BY seq_in_index) FROM information_schema.statistics "
                "WHERE table_schema = 'cdc_capture' AND table_name = %s AND index_name = 'txn_id_id'", (table.shadow,))
    assert cur.fetchone() == ("txn_id,id",)
    cur.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES,ANSI_QUOTES')")
    cur.execute(f"INSERT INTO {src} VALUES (1, 'a'), (2, 'b')")
    cur.execute(f"UPDATE {src} SET {my_ident(HOSTILE_COLUMN)} = 3, `select` = NULL "
                f"WHERE {my_ident(HOSTILE_COLUMN)} = 1")
    cur.execute(f"DELETE FROM {src} WHERE {my_ident(HOSTILE_COLUMN)} = 2")
    cur.execute(f"SELECT count(*) FROM {my_ident(schema)}.y")
    assert cur.fetchone() == (0,)
    export_once(maria.dsn, tmp_path, "maria", purge="on_landing")  # shared server: leave no rows behind
    changes = _changes(tmp_path / "maria", table)
    assert [(r["op"], r["key"], r["old_key"], r["values"]) for r in changes] == HOSTILE_CHANGES
    conn.close()


# What both hostile-name tests' workloads (two inserts, a key-changing update, a delete) land.
HOSTILE_CHANGES = [
    ("I", {HOSTILE_COLUMN: 1}, None, {HOSTILE_COLUMN: 1, "select": "a"}),
    ("I", {HOSTILE_COLUMN: 2}, None, {HOSTILE_COLUMN: 2, "select": "b"}),
    ("U", {HOSTILE_COLUMN: 3}, {HOSTILE_COLUMN: 1}, {HOSTILE_COLUMN: 3, "select": None}),
    ("D", {HOSTILE_COLUMN: 2}, None, None),
]


def _changes(source_root, table: TableName) -> list[dict]:
    folder = source_root / "shadow" / table_folder(table.schema, table.table)
    rows = [r for p in sorted(folder.glob("*.jsonl")) for r in read_jsonl(p)]
    return sorted(rows, key=lambda r: (int(r["txn_id"]), r["op_seq"]))


def test_table_folder_escapes_path_characters():
    assert table_folder("shop", "orders") == "shop.orders"
    assert "/" not in table_folder("a/b", "..\\c%")
    assert json.dumps(table_folder(".hidden", "t")).startswith('"%2E')
