"""Binlog capture on a live MariaDB: contract events, sessions, checkpoint and resume."""

from __future__ import annotations

import pytest
from live import fixtures, servers
from live.replay import binlog_transactions, read_jsonl, replay_binlog, resolve_session

from cdc_lakehouse.capture import ddl_mariadb
from cdc_lakehouse.capture.binlog import BinlogConfig, RowLoggingRequired, capture
from cdc_lakehouse.capture.binlog_events import DML_TABLE, FIELDS, STATEMENT, ddl_target
from cdc_lakehouse.capture.sqlquote import TableName, my_ident

PASSWORD = "pw-Binlog-1"


@pytest.fixture(scope="module")
def maria():
    return fixtures.mariadb()


@pytest.fixture
def shop(maria):
    """A fresh schema with one marked table and a user with a default role."""
    schema = fixtures.unique_schema("binlog")
    conn = maria.connect()
    cur = conn.cursor()
    cur.execute(f"CREATE DATABASE {my_ident(schema)}")
    cur.execute(f"CREATE TABLE {my_ident(schema)}.t (id int PRIMARY KEY, v varchar(20), "
                f"n decimal(8,2), d datetime(6))")
    for statement in ddl_mariadb.marker_statements(TableName(schema, "t")):
        cur.execute(statement)
    cur.execute("CREATE ROLE IF NOT EXISTS binlog_writer")
    cur.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {my_ident(schema)}.* TO binlog_writer")
    cur.execute(f"CREATE USER IF NOT EXISTS 'bina'@'%' IDENTIFIED BY '{PASSWORD}'")
    cur.execute("GRANT binlog_writer TO 'bina'@'%'")
    cur.execute("SET DEFAULT ROLE binlog_writer FOR 'bina'@'%'")
    conn.close()
    return schema


def _cfg(maria, landing, **kw) -> BinlogConfig:
    return BinlogConfig(host="127.0.0.1", port=maria.port, user="root", landing=landing,
                        source="m", **kw)


def _events(root):
    return [e for p in sorted((root / "binlog").glob("*.jsonl")) for e in read_jsonl(p)]


def test_events_follow_the_contract(maria, shop, tmp_path):
    user = maria.connect("bina", PASSWORD)
    cur = user.cursor()
    t = f"{my_ident(shop)}.t"
    cur.execute("BEGIN")
    cur.execute(f"INSERT INTO {t} VALUES (1, 'a', 1.50, '2026-03-02 09:00:00.250000'), (2, 'b', NULL, NULL)")
    cur.execute(f"UPDATE {t} SET id = 3, v = NULL WHERE id = 1")
    cur.execute(f"DELETE FROM {t} WHERE id = 2")
    cur.execute("COMMIT")
    cur.execute("BEGIN")
    cur.execute(f"INSERT INTO {t} VALUES (9, 'never', 0, NULL)")
    cur.execute("ROLLBACK")
    thread_id = user.thread_id()
    user.close()
    root = maria.connect()
    root.cursor().execute(f"ALTER TABLE {t} ADD COLUMN extra int")
    root.close()

    capture(_cfg(maria, tmp_path))
    events = _events(tmp_path / "m")
    assert all(list(e) == list(FIELDS) for e in events)
    mine = [e for e in events if e["schema"] == shop or (e["type"] in ("begin", "commit")
                                                          and e["file"] is not None)]
    txns = [tx for tx in binlog_transactions(tmp_path / "m")
            if any(e.get("schema") == shop for e in tx)]
    assert len(txns) == 1, "one committed transaction; the rolled-back one is not in the binlog"
    begin, *rows, commit = txns[0]
    assert begin["thread_id"] == thread_id and begin["gtid"] and commit["xid"]
    assert [(e["type"], e["table"], e["primary_key"]) for e in rows] == [
        ("insert", "t", ["id"]), ("insert", "t", ["id"]), ("update", "t", ["id"]),
        ("delete", "t", ["id"])]
    assert rows[0]["rows"] == [{"after": {"id": 1, "v": "a", "n": 1.5, "d": "2026-03-02T09:00:00.250000"}}]
    assert rows[2]["rows"][0]["after"]["id"] == 3 and rows[2]["rows"][0]["before"]["id"] == 1
    ddl = [e for e in mine if e["type"] == "ddl" and e["table"] == "t" and "extra" in e["query"]]
    assert ddl and ddl[0]["schema"] == shop
    sessions = [s for p in (tmp_path / "m" / "sessions").glob("*.jsonl") for s in read_jsonl(p)]
    assert resolve_session(sessions, begin["server_id"], thread_id, begin["ts"]) == ("bina", "binlog_writer")
    assert not [e for e in events if e["schema"] == "cdc_capture"], "capture bookkeeping is not emitted"


def test_restart_neither_skips_nor_repeats(maria, shop, tmp_path):
    t = f"{my_ident(shop)}.t"
    conn = maria.connect()
    cur = conn.cursor()
    keys = {f"{shop}.t": ["id"]}
    cur.execute(f"INSERT INTO {t} VALUES (1, 'a', 1, NULL)")
    first = capture(_cfg(maria, tmp_path))
    cur.execute(f"INSERT INTO {t} VALUES (2, 'b', 2, NULL)")
    cur.execute("FLUSH BINARY LOGS")  # the next transaction is in a new binlog file
    cur.execute(f"UPDATE {t} SET v = 'b2' WHERE id = 2")
    second = capture(_cfg(maria, tmp_path))
    assert second.position > first.position and second.position.file != first.position.file
    # the checkpoint file is lost: the landing file names still say where to resume
    (tmp_path / "m" / ".capture" / "binlog.json").unlink()
    cur.execute(f"DELETE FROM {t} WHERE id = 1")
    capture(_cfg(maria, tmp_path))
    assert capture(_cfg(maria, tmp_path)).events == 0
    events = _events(tmp_path / "m")
    ids = [(e["file"], e["pos"]) for e in events]
    assert len(ids) == len(set(ids)), "no event was written twice"
    state = replay_binlog(tmp_path / "m", keys).tables[f"{shop}.t"]
    cur.execute(f"SELECT id, v FROM {t}")
    assert sorted((k[0], r["v"]) for k, r in state.items()) == sorted(cur.fetchall())
    cur.execute("SELECT COUNT(*) FROM cdc_capture._binlog_sessions")
    conn.close()


def test_markers_are_pruned_after_landing(maria, shop, tmp_path):
    conn = maria.connect()
    cur = conn.cursor()
    cur.execute(f"INSERT INTO {my_ident(shop)}.t VALUES (5, 'x', 1, NULL)")
    cur.execute("SELECT COUNT(*) FROM cdc_capture._binlog_sessions WHERE thread_id = CONNECTION_ID()")
    assert cur.fetchone()[0] == 1
    capture(_cfg(maria, tmp_path))
    cur.execute("SELECT COUNT(*) FROM cdc_capture._binlog_sessions WHERE thread_id = CONNECTION_ID()")
    assert cur.fetchone()[0] == 0
    conn.close()


def test_capture_refuses_a_server_without_full_row_images(maria, shop, tmp_path):
    conn = maria.connect()
    cur = conn.cursor()
    cur.execute("SET GLOBAL binlog_row_image = 'MINIMAL'")
    try:
        with pytest.raises(RowLoggingRequired, match="binlog_row_image=MINIMAL"):
            capture(_cfg(maria, tmp_path))
    finally:
        cur.execute("SET GLOBAL binlog_row_image = 'FULL'")
        conn.close()
    assert not (tmp_path / "m" / "binlog").exists() or not list((tmp_path / "m" / "binlog").iterdir())


def test_a_transaction_larger_than_the_buffer_lands_whole_from_disk(maria, shop, tmp_path):
    """With a 4 KB buffer, a transaction of 3,000 rows is held in a hidden file while open and
    lands whole, between the small transactions around it, with nothing left behind."""
    t = f"{my_ident(shop)}.t"
    conn = maria.connect()
    cur = conn.cursor()
    cur.execute(f"INSERT INTO {t} VALUES (1, 'before', 1, NULL)")
    cur.execute("BEGIN")
    for start in range(10, 3010, 500):
        cur.execute(f"INSERT INTO {t} (id, v) VALUES " + ", ".join(f"({i}, 'big-{i}')" for i in range(start, start + 500)))
    cur.execute("COMMIT")
    cur.execute(f"UPDATE {t} SET v = 'after' WHERE id = 1")
    result = capture(_cfg(maria, tmp_path, buffer_bytes=4096))
    assert result.spilled_transactions >= 1
    binlog = tmp_path / "m" / "binlog"
    assert [p.name for p in binlog.iterdir() if p.name.startswith(".")] == []
    def rows_into_t(tx: list[dict]) -> int:
        return sum(len(e["rows"]) for e in tx if e["type"] == "insert" and (e["schema"], e["table"]) == (shop, "t"))

    big = next(tx for tx in binlog_transactions(tmp_path / "m") if rows_into_t(tx) > 1)
    assert big[0]["type"] == "begin" and big[-1]["type"] == "commit"
    assert rows_into_t(big) == 3000
    state = replay_binlog(tmp_path / "m", {f"{shop}.t": ["id"]}).tables[f"{shop}.t"]
    cur.execute(f"SELECT id, v FROM {t}")
    assert sorted((k[0], r["v"]) for k, r in state.items()) == sorted(cur.fetchall())
    conn.close()


@pytest.fixture
def private_maria():
    """A server of its own: the shared one's binlog is captured whole by later tests, which
    expect no statement in it."""
    srv = servers.MariaDBServer.start(server_id=2)
    yield srv
    srv.cleanup()


def test_a_statement_logged_as_sql_lands_as_a_statement_event(private_maria, tmp_path):
    """A session that logs statements (binlog_format=STATEMENT) on a ROW server: its DML lands as
    a `statement` event in its transaction, which bronze quarantines (tests/test_reliability_bad_input.py)."""
    conn = private_maria.connect()
    cur = conn.cursor()
    cur.execute("CREATE DATABASE s")
    cur.execute("CREATE TABLE s.t (id int PRIMARY KEY, v varchar(20))")
    cur.execute("SET SESSION binlog_format = 'STATEMENT'")
    cur.execute("BEGIN")
    cur.execute("INSERT INTO s.t (id, v) VALUES (7, 'stmt')")
    cur.execute("COMMIT")
    conn.close()
    capture(_cfg(private_maria, tmp_path))
    statements = [e for e in _events(tmp_path / "m") if e["type"] == STATEMENT]
    assert [(e["schema"], e["table"], e["query"]) for e in statements] == [
        ("s", "t", "INSERT INTO s.t (id, v) VALUES (7, 'stmt')")]
    txn = next(tx for tx in binlog_transactions(tmp_path / "m") if any(e["type"] == STATEMENT for e in tx))
    assert [e["type"] for e in txn] == ["begin", STATEMENT, "commit"]


@pytest.mark.parametrize("query, target", [
    ("INSERT INTO `a`.t (id) VALUES (1)", ("a", "t")),
    ("insert ignore into t values (1)", ("db", "t")),
    ("REPLACE t VALUES (1)", ("db", "t")),
    ("UPDATE LOW_PRIORITY s.`x y` SET a = 1", ("s", "x y")),
    ("/* app */ DELETE QUICK FROM db2.t WHERE 1", ("db2", "t")),
])
def test_a_dml_statement_names_its_table(query, target):
    assert ddl_target(query, "db", DML_TABLE) == target


def _silver_replica(spark, source_root, table: str) -> dict:
    """The replica silver's change stream gives (real Spark, no pipeline): the latest change of
    each key in sequence order, deletes removed."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from cdc_lakehouse.bronze.kinds import BINLOG_EVENTS
    from cdc_lakehouse.bronze.landing import bronze_rows, checked_lines
    from cdc_lakehouse.silver.change_stream import binlog_change_batch

    files = spark.read.format("text").option("wholetext", "true").load(str(source_root / "binlog" / "*.jsonl"))
    files = files.select("value", F.col("_metadata.file_path").alias("_source_file"))
    events = bronze_rows(checked_lines(files, BINLOG_EVENTS, "m", [table]), BINLOG_EVENTS)
    changes = binlog_change_batch(events, events, None).filter(F.concat_ws(".", "schema", "table") == table)
    latest = changes.withColumn("__r", F.row_number().over(Window.partitionBy("key").orderBy(F.desc("sequence"))))
    rows = latest.filter("__r = 1 AND op <> 'DELETE'").select(F.get_json_object("row", "$.id").cast("int").alias("id"),
                                                              F.get_json_object("row", "$.v").alias("v"))
    return dict(rows.collect())


def test_a_reset_log_begins_a_new_epoch_and_loses_nothing(private_maria, spark, tmp_path):
    """After RESET MASTER the log's positions come again: the capture notices at its start and
    lands the new log in epoch 1, so silver applies its changes after the first log's instead of
    taking them for re-deliveries."""
    conn = private_maria.connect()
    cur = conn.cursor()
    cur.execute("CREATE DATABASE s")
    cur.execute("CREATE TABLE s.t (id int PRIMARY KEY, v varchar(20))")
    cur.execute("RESET MASTER")  # both logs begin alike: the second one's events take the first's places
    cur.execute("INSERT INTO s.t VALUES (1, 'a'), (2, 'b')")
    cur.execute("UPDATE s.t SET v = 'a1' WHERE id = 1")
    first = capture(_cfg(private_maria, tmp_path))
    cur.execute("RESET MASTER")
    cur.execute("INSERT INTO s.t VALUES (3, 'c'), (4, 'd')")
    cur.execute("UPDATE s.t SET v = 'b1' WHERE id = 2")
    cur.execute("DELETE FROM s.t WHERE id = 4")
    cur.execute("DELETE FROM s.t WHERE id = 1")
    second = capture(_cfg(private_maria, tmp_path))
    third = capture(_cfg(private_maria, tmp_path))
    assert (first.new_epoch, third.new_epoch, third.events) == (None, None, 0)
    assert "the event at mysql-bin.000001" in second.new_epoch and second.position.epoch == 1
    events = _events(tmp_path / "m")
    at = {epoch: {(e["file"], e["pos"]) for e in events if e["epoch"] == epoch} for epoch in (0, 1)}
    assert at[0] < at[1], "the new log reused every position of the old one"
    assert all(p.name.startswith("epoch1-") for p in second.files)
    cur.execute("SELECT id, v FROM s.t")
    assert _silver_replica(spark, tmp_path / "m", "s.t") == dict(cur.fetchall()) == {2: "b1", 3: "c"}
    conn.close()


def _replicate(old, new, statements: list[str], new_server_id: int = 3) -> None:
    """Run the statements on the old server, then on the new one as its replication thread
    applies them: with the old server's GTIDs and server id; then the new one writes as itself."""
    for statement in statements:
        old.execute(statement)
        old.execute("SELECT @@last_gtid")
        domain, server, seq = old.fetchone()[0].split("-")
        new.execute(f"SET SESSION gtid_domain_id = {domain}, SESSION server_id = {server}, "
                    f"SESSION gtid_seq_no = {seq}")
        new.execute(statement)
    new.execute(f"SET SESSION server_id = {new_server_id}")


def test_after_a_failover_the_new_server_s_copies_of_landed_transactions_are_skipped(private_maria, tmp_path):
    """The new primary's binlog holds what it replicated from the old one, with the same GTIDs:
    the capture begins an epoch on the new server and skips those it has landed already."""
    old = private_maria.connect().cursor()
    new_server = servers.MariaDBServer.start(server_id=3)
    try:
        new = new_server.connect().cursor()
        _replicate(old, new, ["CREATE DATABASE s", "CREATE TABLE s.t (id int PRIMARY KEY, v varchar(20))",
                              "INSERT INTO s.t VALUES (1, 'a')"])
        first = capture(_cfg(private_maria, tmp_path))
        new.execute("INSERT INTO s.t VALUES (2, 'b')")
        second = capture(_cfg(new_server, tmp_path))
    finally:
        new_server.cleanup()
    assert first.transactions == 3 and second.skipped_transactions == 3
    assert second.new_epoch == "another server: server_id 2, now 3"
    landed = [e for e in _events(tmp_path / "m") if e["epoch"] == 1 and e["type"] == "insert"]
    assert [(e["server_id"], e["rows"]) for e in landed] == [(3, [{"after": {"id": 2, "v": "b"}}])]


def test_a_capture_without_its_state_folder_after_a_failover_begins_the_next_epoch(private_maria, spark, tmp_path):
    """The capture moved to the new primary without its checkpoint: it rebuilds it from the
    landing files (epoch, position, server of the last line, GTIDs landed), so the new server's
    changes come after the old one's (issue 68's example), and its replayed copies are skipped."""
    old = private_maria.connect().cursor()
    new_server = servers.MariaDBServer.start(server_id=3)
    try:
        new = new_server.connect().cursor()
        _replicate(old, new, ["CREATE DATABASE s", "CREATE TABLE s.t (id int PRIMARY KEY, v varchar(20))",
                              "INSERT INTO s.t VALUES (1, 'a')", "UPDATE s.t SET v = 'b' WHERE id = 1"])
        first = capture(_cfg(private_maria, tmp_path))
        new.execute("UPDATE s.t SET v = 'c' WHERE id = 1")
        new.execute("INSERT INTO s.t VALUES (2, 'x')")
        second = capture(_cfg(new_server, tmp_path, state_dir=tmp_path / "new-host"))
        again = capture(_cfg(new_server, tmp_path, state_dir=tmp_path / "new-host"))
    finally:
        new_server.cleanup()
    assert (first.transactions, second.skipped_transactions, second.position.epoch) == (4, 4, 1)
    assert second.new_epoch == "another server: server_id 2, now 3"
    assert (again.new_epoch, again.events) == (None, 0)
    assert all(p.name.startswith("epoch1-") for p in second.files)
    assert _silver_replica(spark, tmp_path / "m", "s.t") == {1: "c", 2: "x"}
