"""Shadow triggers and export on live PostgreSQL and MariaDB.

In-flight transactions, commit times, exactly-once export across a crash, purging right after
landing (``purge="on_landing"``). Purging by the lakehouse's acknowledgement (the default):
test_capture_shadow_ack.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from live import fixtures
from live.replay import read_jsonl

from cdc_lakehouse.capture import ddl_mariadb, ddl_postgres
from cdc_lakehouse.capture.connect import connect
from cdc_lakehouse.capture.introspect import ShadowTriggersOutOfDate
from cdc_lakehouse.contract.publication import publish
from cdc_lakehouse.capture.shadow_export import ShadowExporter, export_once
from cdc_lakehouse.capture.shadow_readers import MariaDBShadowReader, PostgresShadowReader
from cdc_lakehouse.capture.sqlquote import TableName, my_ident, pg_ident


class Dialect:
    """Just enough per-dialect SQL for these tests."""

    def __init__(self, name, server):
        self.name, self.server = name, server

    def q(self, ident):
        return pg_ident(ident) if self.name == "postgres" else my_ident(ident)

    def session(self):
        conn = self.server.connect()
        if self.name == "postgres":
            conn.autocommit = True
        return conn

    def run(self, conn, *statements):
        with conn.cursor() as cur:
            for s in statements:
                cur.execute(s)

    def create(self, schema: str) -> TableName:
        table = TableName(schema, "items")
        conn = self.session()
        create_schema = "CREATE SCHEMA" if self.name == "postgres" else "CREATE DATABASE"
        self.run(conn, f"{create_schema} {self.q(schema)}",
                 f"CREATE TABLE {self.q(schema)}.items (id int PRIMARY KEY, v varchar(20))")
        if self.name == "postgres":
            self.run(conn, ddl_postgres.shadow_ddl(table))
        else:
            self.run(conn, *ddl_mariadb.shadow_statements(table, ["id", "v"], ["id"]))
        conn.close()
        return table

    def reader(self):
        conn = connect(self.server.dsn)
        return (PostgresShadowReader if self.name == "postgres" else MariaDBShadowReader)(conn)


@pytest.fixture(scope="module", params=["postgres", "mariadb"])
def dialect(request):
    server = fixtures.postgres() if request.param == "postgres" else fixtures.mariadb()
    return Dialect(request.param, server)


def _landed(root, table: TableName):
    txns = [r for p in sorted((root / "shadow" / "_transactions").glob("*.jsonl")) for r in read_jsonl(p)]
    folder = root / "shadow" / f"{table.schema}.{table.table}"
    changes = [r for p in sorted(folder.glob("*.jsonl")) for r in read_jsonl(p)]
    return txns, changes


def test_in_flight_transaction_is_exported_only_after_commit(dialect, tmp_path):
    table = dialect.create(fixtures.unique_schema("inflight"))
    src = f"{dialect.q(table.schema)}.items"
    early, late = dialect.session(), dialect.session()
    dialect.run(early, "BEGIN", f"INSERT INTO {src} VALUES (1, 'early')")  # lower shadow id
    dialect.run(late, "BEGIN", f"INSERT INTO {src} VALUES (2, 'late')", "COMMIT")
    export_once(dialect.server.dsn, tmp_path, "s")
    txns, changes = _landed(tmp_path / "s", table)
    assert [r["key"] for r in changes] == [{"id": 2}]
    assert len({r["txn_id"] for r in txns} & {r["txn_id"] for r in changes}) == 1

    dialect.run(early, f"UPDATE {src} SET v = 'early2' WHERE id = 1", "COMMIT")
    export_once(dialect.server.dsn, tmp_path, "s")
    txns, changes = _landed(tmp_path / "s", table)
    assert sorted((r["key"]["id"], r["op"], r["op_seq"] is not None) for r in changes) == [
        (1, "I", True), (1, "U", True), (2, "I", True)]
    early_txn = {r["txn_id"] for r in changes if r["key"] == {"id": 1}}
    assert len(early_txn) == 1 and early_txn <= {r["txn_id"] for r in txns}
    # the early transaction committed last, so its end time is later despite its lower ids
    end = {r["txn_id"]: r["end_ts"] for r in txns}
    late_txn = next(r["txn_id"] for r in changes if r["key"] == {"id": 2})
    assert end[early_txn.pop()] > end[late_txn]
    early.close(), late.close()


def test_end_ts_is_commit_time_and_identity_is_recorded(dialect, tmp_path):
    table = dialect.create(fixtures.unique_schema("endts"))
    src = f"{dialect.q(table.schema)}.items"
    conn = dialect.session()
    dialect.run(conn, "BEGIN", f"INSERT INTO {src} VALUES (1, 'a')")
    import time

    time.sleep(0.3)  # the commit comes well after the last operation
    dialect.run(conn, "COMMIT")
    conn.close()
    export_once(dialect.server.dsn, tmp_path, "s")
    txns, changes = _landed(tmp_path / "s", table)
    (txn,) = [t for t in txns if t["txn_id"] == changes[0]["txn_id"]]
    gap_ms = _ms(txn["end_ts"]) - _ms(changes[0]["op_ts"])
    assert gap_ms >= 250, f"end_ts should be the commit time, {gap_ms} ms after the operation"
    assert txn["db_user"] == ("postgres" if dialect.name == "postgres" else "root")
    assert txn["client"] == "127.0.0.1"


def _ms(iso: str) -> float:
    from datetime import datetime

    return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp() * 1000


def crash_after_publish(exporter: ShadowExporter, reader) -> None:
    """Leave on disk what a process killed between publishing and purging leaves: the batch
    journaled, its files renamed to their final names, the journal not cleared."""
    exporter.journal(reader.read(exporter.batch_rows))
    for tmp, final in json.loads(exporter.state_path.read_text())["pending"]["files"]:
        publish(Path(tmp), Path(final))


def test_crash_between_publish_and_purge_exports_once(dialect, tmp_path):
    table = dialect.create(fixtures.unique_schema("crash"))
    src = f"{dialect.q(table.schema)}.items"
    conn = dialect.session()
    for i in range(5):
        dialect.run(conn, f"INSERT INTO {src} VALUES ({i}, 'v{i}')")
    # other tests' leftovers out of the way (also rows they exported and left for an ack)
    export_once(dialect.server.dsn, tmp_path, "warmup", purge="on_landing")
    for i in range(5, 10):
        dialect.run(conn, f"INSERT INTO {src} VALUES ({i}, 'v{i}')")
    crash_after_publish(ShadowExporter(dialect.reader(), tmp_path, "s", purge="on_landing"), dialect.reader())
    dialect.run(conn, f"DELETE FROM {src} WHERE id = 9")
    export_once(dialect.server.dsn, tmp_path, "s", purge="on_landing")  # finishes the journaled batch first
    export_once(dialect.server.dsn, tmp_path, "s", purge="on_landing")  # nothing new: no new file
    txns, changes = _landed(tmp_path / "s", table)
    assert sorted((r["key"]["id"], r["op"]) for r in changes) == sorted(
        [(i, "I") for i in range(5, 10)] + [(9, "D")])
    assert len(list((tmp_path / "s" / "shadow").rglob("*.jsonl"))) == 4  # 2 batches x (txns + table)
    assert not [p for p in (tmp_path / "s").rglob("*") if p.name.startswith(".cdc-tmp-")]
    shadow = f"{dialect.q('cdc_capture')}.{dialect.q(table.shadow)}"
    dialect.run(conn, "SELECT 1")
    with conn.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {shadow}")
        assert cur.fetchone()[0] == 0, "exported rows are purged"
    conn.close()


def test_rollback_and_savepoint_are_never_recorded(dialect, tmp_path):
    table = dialect.create(fixtures.unique_schema("rollback"))
    src = f"{dialect.q(table.schema)}.items"
    conn = dialect.session()
    dialect.run(conn, "BEGIN", f"INSERT INTO {src} VALUES (1, 'gone')", "ROLLBACK")
    dialect.run(conn, "BEGIN", f"INSERT INTO {src} VALUES (2, 'kept')", "SAVEPOINT sp",
                f"UPDATE {src} SET v = 'undone' WHERE id = 2", "ROLLBACK TO SAVEPOINT sp", "COMMIT")
    conn.close()
    export_once(dialect.server.dsn, tmp_path, "s")
    _, changes = _landed(tmp_path / "s", table)
    assert [(r["op"], r["values"]) for r in changes] == [("I", {"id": 2, "v": "kept"})]


def test_a_transaction_larger_than_a_batch_gets_its_row_with_its_last_part(dialect, tmp_path):
    """Its change rows land over three batches; its transaction row only with the last, so a
    pipeline update between two batches holds the first parts instead of applying a part."""
    table = dialect.create(fixtures.unique_schema("split"))
    src = f"{dialect.q(table.schema)}.items"
    conn = dialect.session()
    dialect.run(conn, "BEGIN", *[f"INSERT INTO {src} VALUES ({i}, 'v')" for i in range(1, 6)], "COMMIT")
    conn.close()
    ShadowExporter(dialect.reader(), tmp_path, "s", batch_rows=2).run()
    shadow = tmp_path / "s" / "shadow"
    changes = sorted((shadow / f"{table.schema}.{table.table}").glob("*.jsonl"))
    (txn,) = {r["txn_id"] for p in changes for r in read_jsonl(p)}
    # Other tests' transactions are in the same transaction table: only this one's files count.
    txns = [p for p in sorted((shadow / "_transactions").glob("*.jsonl")) if txn in {r["txn_id"] for r in read_jsonl(p)}]
    batch_of = lambda path: path.name.split("-", 1)[1]  # noqa: E731 - <utc>-<batch number>.jsonl
    assert len(changes) == 3 and [batch_of(p) for p in txns] == [batch_of(changes[-1])]


def test_a_batch_publishes_its_transaction_rows_after_its_change_rows(dialect, tmp_path):
    table = dialect.create(fixtures.unique_schema("order"))
    conn = dialect.session()
    dialect.run(conn, f"INSERT INTO {dialect.q(table.schema)}.items VALUES (1, 'v')")
    conn.close()
    exporter, reader = ShadowExporter(dialect.reader(), tmp_path, "s"), dialect.reader()
    exporter.journal(reader.read(exporter.batch_rows))
    finals = [Path(final).parent.name for _, final in json.loads(exporter.state_path.read_text())["pending"]["files"]]
    assert f"{table.schema}.{table.table}" in finals and finals.index("_transactions") == len(finals) - 1


def test_a_postgres_truncate_is_a_change_row_in_its_transaction_order(tmp_path):
    """TRUNCATE fires the statement trigger: one row of op T keyed {} between the operations
    before and after it in its transaction (MariaDB's TRUNCATE fires no trigger: docs/capture.md)."""
    pg = Dialect("postgres", fixtures.postgres())
    table = pg.create(fixtures.unique_schema("truncate"))
    src = f"{pg.q(table.schema)}.items"
    conn = pg.session()
    pg.run(conn, f"INSERT INTO {src} VALUES (1, 'a'), (2, 'b')")
    pg.run(conn, "BEGIN", f"UPDATE {src} SET v = 'a1' WHERE id = 1", f"TRUNCATE {src}",
           f"INSERT INTO {src} VALUES (1, 'again')", "COMMIT")
    conn.close()
    export_once(pg.server.dsn, tmp_path, "s")
    _, changes = _landed(tmp_path / "s", table)
    last = [r for r in changes if r["txn_id"] == changes[-1]["txn_id"]]
    assert [(r["op_seq"], r["op"], r["key"], r["values"]) for r in last] == [
        (1, "U", {"id": 1}, {"v": "a1"}), (2, "T", {}, None), (3, "I", {"id": 1}, {"id": 1, "v": "again"})]


def test_a_postgres_alter_table_is_a_change_row_with_its_statement(tmp_path):
    pg = Dialect("postgres", fixtures.postgres())
    table = pg.create(fixtures.unique_schema("alter"))
    src = f"{pg.q(table.schema)}.items"
    conn = pg.session()
    pg.run(conn, "BEGIN", f"INSERT INTO {src} VALUES (1, 'a')", f"ALTER TABLE {src} ADD COLUMN w int",
           f"INSERT INTO {src} VALUES (2, 'b', 7)", "COMMIT", f"CREATE TABLE {pg.q(table.schema)}.other (id int)",
           f"ALTER TABLE {pg.q(table.schema)}.other ADD COLUMN x int")
    conn.close()
    export_once(pg.server.dsn, tmp_path, "s")
    _, changes = _landed(tmp_path / "s", table)
    assert [(r["op_seq"], r["op"], r["key"], r["values"]) for r in changes] == [
        (1, "I", {"id": 1}, {"id": 1, "v": "a"}), (2, "A", {}, {"statement": f"ALTER TABLE {src} ADD COLUMN w int"}),
        (3, "I", {"id": 2}, {"id": 2, "v": "b", "w": 7})]


def test_a_postgres_drop_table_is_a_change_row_with_its_statement_and_a_new_table_is_captured_again(tmp_path):
    pg = Dialect("postgres", fixtures.postgres())
    table = pg.create(fixtures.unique_schema("drop"))
    src = f"{pg.q(table.schema)}.items"
    conn = pg.session()
    pg.run(conn, f"INSERT INTO {src} VALUES (1, 'a')", f"DROP TABLE {src}")
    export_once(pg.server.dsn, tmp_path, "s", purge="on_landing")
    _, changes = _landed(tmp_path / "s", table)
    assert [(r["op"], r["key"], r["values"]) for r in changes] == [
        ("I", {"id": 1}, {"id": 1, "v": "a"}), ("A", {}, {"statement": f"DROP TABLE {src}"})]

    # Created again, captured again under the same name; a DROP SCHEMA takes it along.
    pg.run(conn, f"CREATE TABLE {src} (id int PRIMARY KEY, v varchar(20))", ddl_postgres.shadow_ddl(table),
           f"INSERT INTO {src} VALUES (2, 'b')", f"DROP SCHEMA {pg.q(table.schema)} CASCADE")
    conn.close()
    export_once(pg.server.dsn, tmp_path, "s", purge="on_landing")
    _, changes = _landed(tmp_path / "s", table)
    assert [(r["op"], r["values"]) for r in changes[2:]] == [
        ("I", {"id": 2, "v": "b"}),
        ("A", {"statement": f"DROP TABLE {table.schema}.items /* by DROP SCHEMA {pg.q(table.schema)} CASCADE */"})]


def test_a_mariadb_alter_table_stops_the_export_naming_the_columns(tmp_path):
    """MariaDB fires no trigger on ALTER TABLE: the export compares the table's columns with
    the ones its triggers were made for, and stops (nothing exported) until shadow-ddl runs again."""
    my = Dialect("mariadb", fixtures.mariadb())
    table = TableName(fixtures.unique_schema("alter"), "items")
    src = f"{my_ident(table.schema)}.items"
    conn = my.session()
    my.run(conn, f"CREATE DATABASE {my_ident(table.schema)}", f"CREATE TABLE {src} (id int PRIMARY KEY, v int)",
           *ddl_mariadb.shadow_statements(table, ["id", "v"], ["id"], table_columns=["id", "v"]),
           f"INSERT INTO {src} VALUES (1, 1)", f"ALTER TABLE {src} ADD COLUMN w int", f"INSERT INTO {src} VALUES (2, 2, 7)")
    with pytest.raises(ShadowTriggersOutOfDate, match=rf"{table.schema}\.items: columns added w \(not captured\)"):
        export_once(my.server.dsn, tmp_path, "s", purge="on_landing")
    assert _landed(tmp_path / "s", table) == ([], [])

    my.run(conn, *ddl_mariadb.shadow_statements(table, ["id", "v", "w"], ["id"], table_columns=["id", "v", "w"]),
           f"INSERT INTO {src} VALUES (3, 3, 8)", f"ALTER TABLE {src} DROP COLUMN v")
    with pytest.raises(ShadowTriggersOutOfDate, match=r"columns dropped or renamed v \(its triggers fail every write\)"):
        export_once(my.server.dsn, tmp_path, "s", purge="on_landing")
    my.run(conn, *ddl_mariadb.shadow_statements(table, ["id", "w"], ["id"], table_columns=["id", "w"]))
    conn.close()
    export_once(my.server.dsn, tmp_path, "s", purge="on_landing")
    _, changes = _landed(tmp_path / "s", table)
    assert [r["values"] for r in changes] == [{"id": 1, "v": 1}, {"id": 2, "v": 2}, {"id": 3, "v": 3, "w": 8}]


def test_a_mariadb_drop_table_lands_once_after_the_tables_last_rows(tmp_path):
    """MariaDB fires no trigger on DROP TABLE: the export finds the captured table gone, lands
    its last rows and then a DROP TABLE row in a transaction of its own, and forgets the table."""
    my = Dialect("mariadb", fixtures.mariadb())
    table = TableName(fixtures.unique_schema("drop"), "items")
    src = f"{my_ident(table.schema)}.items"
    conn = my.session()
    my.run(conn, f"CREATE DATABASE {my_ident(table.schema)}", f"CREATE TABLE {src} (id int PRIMARY KEY, v int)",
           *ddl_mariadb.shadow_statements(table, ["id", "v"], ["id"]),
           *[f"INSERT INTO {src} VALUES ({i}, {i})" for i in (1, 2, 3)], f"DROP TABLE {src}")
    conn.close()
    reader = my.reader()
    ShadowExporter(reader, tmp_path, "s", batch_rows=2, purge="on_landing").run()
    ShadowExporter(my.reader(), tmp_path, "s", purge="on_landing").run()  # the table is forgotten
    txns, changes = _landed(tmp_path / "s", table)
    assert [(r["op"], r["values"]) for r in changes] == [
        ("I", {"id": 1, "v": 1}), ("I", {"id": 2, "v": 2}), ("I", {"id": 3, "v": 3}),
        ("A", {"statement": f"DROP TABLE {my_ident(table.schema)}.`items`"})]  # both names quoted
    [drop] = [t for t in txns if t["txn_id"] == changes[-1]["txn_id"]]
    assert drop["end_ts"] > max(t["end_ts"] for t in txns if t is not drop) and drop["db_user"] is None


def test_a_mariadb_truncate_stops_the_export_until_the_triggers_are_made_again(tmp_path):
    """A TRUNCATE gives the table a new InnoDB id and keeps its creation time; the export tells
    it from a rebuild, and stops either way (a rebuild may hide a TRUNCATE)."""
    my = Dialect("mariadb", fixtures.mariadb())
    table = TableName(fixtures.unique_schema("truncate"), "items")
    src = f"{my_ident(table.schema)}.items"
    conn = my.session()
    my.run(conn, f"CREATE DATABASE {my_ident(table.schema)}", f"CREATE TABLE {src} (id int PRIMARY KEY, v int)",
           *ddl_mariadb.shadow_statements(table, ["id", "v"], ["id"]), f"INSERT INTO {src} VALUES (1, 1)")
    export_once(my.server.dsn, tmp_path, "s", purge="on_landing")
    my.run(conn, f"TRUNCATE TABLE {src}", f"INSERT INTO {src} VALUES (2, 2)")
    with pytest.raises(ShadowTriggersOutOfDate, match=rf"{table.schema}\.items: emptied by TRUNCATE TABLE"):
        export_once(my.server.dsn, tmp_path, "s", purge="on_landing")
    my.run(conn, *ddl_mariadb.shadow_statements(table, ["id", "v"], ["id"]))
    export_once(my.server.dsn, tmp_path, "s", purge="on_landing")
    time.sleep(1.1)  # creation times have whole seconds
    my.run(conn, f"ALTER TABLE {src} FORCE")
    with pytest.raises(ShadowTriggersOutOfDate, match=r"items: rebuilt or created again"):
        export_once(my.server.dsn, tmp_path, "s", purge="on_landing")
    my.run(conn, *ddl_mariadb.shadow_statements(table, ["id", "v"], ["id"]))
    conn.close()
    assert [r["key"] for r in _landed(tmp_path / "s", table)[1]] == [{"id": 1}, {"id": 2}]
