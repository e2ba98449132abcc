"""A corpus of bad input, in both capture forms: every bad line ends in a quarantine row with its
reason, every impossible operation pair in an anomaly on its change, and every line is accounted
for: input lines = bronze rows + quarantined rows, and row changes landed = applied + held +
rolled back + quarantined.

One pipeline run (bronze and silver: gold only reads them) over one binlog source and one shadow
source, each onboarding ``app.orders``. Snapshots with duplicate keys are left to the snapshot
reconciliation's own tests (reconciliation is a job step outside the pipeline update).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
from pyspark.sql import functions as F

from cdc_lakehouse.bronze.kinds import KINDS
from cdc_lakehouse.storage import LakeStore
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench import harness  # noqa: E402
from bench.workload import write_onboarding  # noqa: E402

BINLOG, SHADOW = "bench", "bench_pg"
FILE = "mysql-bin.000001"


def _ev(pos, etype, gtid=None, **kw):
    ev = {"server_id": 7, "file": FILE, "pos": pos, "ts": 1772442000 + (pos // 1000 if isinstance(pos, int) else 0), "gtid": gtid, "type": etype,
          "xid": None, "thread_id": None, "schema": None, "table": None, "primary_key": None, "rows": None, "query": None}
    ev.update(kw)
    return json.dumps(ev)


def _row(kind, pos, gtid, rows, **kw):
    return _ev(pos, kind, gtid, schema="app", table="orders", primary_key=["order_id"], rows=rows, **kw)


def _order(oid, status="new", total=10.0):
    return {"order_id": oid, "status": status, "total": total}


# (line text, expected fate): "ok" or ("quarantine", reason substring)
BINLOG_LINES = [
    # A: committed, two row changes
    (_ev(1000, "begin", "0-7-1", thread_id=21), "ok"),
    (_row("insert", 1100, "0-7-1", [{"after": _order(1)}, {"after": _order(5)}]), "ok"),
    (_ev(1200, "commit", "0-7-1", xid=1), "ok"),
    ('{"server_id":7,"file":"mysql-bin.000001","pos":1300,"ts":17724', ("quarantine", "unparseable line")),
    (_ev("1400x", "begin", "0-7-x"), ("quarantine", "wrong type or unparseable value: pos")),
    (_ev(1500, "upsert", "0-7-x"), ("quarantine", "unknown type upsert")),
    (_ev(1550, "statement", "0-7-x", thread_id=21, schema="app", query="UPDATE orders SET status = 'x'"),
     ("quarantine", "a DML statement logged as SQL")),
    (_ev(1600, "insert", "0-7-x", schema="app", table="orders", rows=[{"after": _order(9)}]),
     ("quarantine", "row event without primary_key")),
    (_row("update", 1700, "0-7-x", [{"before": {"status": "new"}, "after": _order(9)}]),
     ("quarantine", "row images without every primary_key column")),
    (_ev(None, "commit", "0-7-x", xid=99), ("quarantine", "missing pos")),
    (json.dumps({"server_id": 7, "file": FILE, "pos": 1800, "type": "begin"}), ("quarantine", "missing ts")),
    ("", ("quarantine", "blank line")),
    ("[1, 2]", ("quarantine", "unparseable line")),
    (_row("delete", 1900, "0-7-x", []), ("quarantine", "row event without rows")),
    # B: committed; INSERT then INSERT of one key is impossible: an anomaly
    (_ev(2000, "begin", "0-7-2", thread_id=21), "ok"),
    (_row("insert", 2100, "0-7-2", [{"after": _order(2)}]), "ok"),
    (_row("insert", 2200, "0-7-2", [{"after": _order(2, "paid")}]), "ok"),
    (_ev(2300, "commit", "0-7-2", xid=2), "ok"),
    # C: committed; DELETE then UPDATE of one key is impossible
    (_ev(3000, "begin", "0-7-3", thread_id=21), "ok"),
    (_row("delete", 3100, "0-7-3", [{"before": _order(1)}]), "ok"),
    (_row("update", 3200, "0-7-3", [{"before": _order(1), "after": _order(1, "paid")}]), "ok"),
    (_ev(3300, "commit", "0-7-3", xid=3), "ok"),
    # D: rolled back
    (_ev(4000, "begin", "0-7-4", thread_id=21), "ok"),
    (_row("insert", 4100, "0-7-4", [{"after": _order(3)}]), "ok"),
    (_ev(4200, "rollback", "0-7-4"), "ok"),
    # E: open (no commit yet): held
    (_ev(5000, "begin", "0-7-5", thread_id=21), "ok"),
    (_row("insert", 5100, "0-7-5", [{"after": _order(4)}, {"after": _order(6)}]), "ok"),
    # G: committed, one of its row events quarantined (json.dumps writes NaN): held whole (incomplete)
    (_ev(6000, "begin", "0-7-6", thread_id=21), "ok"),
    (_row("insert", 6100, "0-7-6", [{"after": _order(10)}]), "ok"),
    (_row("insert", 6200, "0-7-6", [{"after": _order(11, total=float("nan"))}]), ("quarantine", "NaN is not JSON")),
    (_ev(6300, "commit", "0-7-6", xid=6), "ok"),
    # F: after RESET MASTER the positions (and GTIDs, xids) of A come again, in epoch 1: applied,
    # not taken for a re-delivery of A. E, cut off by the restart, stays held (unterminated).
    (_ev(1000, "begin", "0-7-1", thread_id=21, epoch=1), "ok"),
    (_row("insert", 1100, "0-7-1", [{"after": _order(7)}], epoch=1), "ok"),
    (_ev(1200, "commit", "0-7-1", xid=1, epoch=1), "ok"),
    (_ev(1300, "begin", "0-7-9", epoch=4096), ("quarantine", "binlog position out of range")),
    (_ev(1300, "begin", "0-7-9", file="mysql-bin.2000000"), ("quarantine", "binlog position out of range")),
    (_row("insert", 1400, "0-7-9", [{"after": _order(8)}], epoch=1)[:-1] + ', "table": "customers"}',
     ("quarantine", 'not one JSON object: member "table" appears twice')),
    # how Spark reads bytes that are not UTF-8: U+FFFD in the text (json.dumps would escape it)
    (_ev(1500, "begin", "0-7-z").replace("0-7-z", "0-7-\ufffd"), ("quarantine", "not UTF-8")),
]
SESSION_LINES = [
    (json.dumps({"server_id": 7, "thread_id": 21, "connected_at": "2026-03-02T08:00:00Z", "user": "api", "role": "app_writer"}), "ok"),
    (json.dumps({"server_id": 7, "thread_id": 22, "connected_at": "yesterday", "user": "x", "role": "y"}),
     ("quarantine", "wrong type or unparseable value: connected_at")),
]


def _txn(txn_id, end_ts="2026-03-02T09:00:01.000001Z"):
    return json.dumps({"txn_id": txn_id, "end_ts": end_ts, "db_user": "api", "db_role": "app_writer", "client": None, "application": None})


def _change(txn_id, seq, op, key, values=None, op_ts="2026-03-02T09:00:00.000100Z", old_key=None):
    return json.dumps({"txn_id": txn_id, "op_ts": op_ts, "op_seq": seq, "op": op, "key": key, "old_key": old_key, "values": values})


TXN_LINES = [
    (_txn("t1"), "ok"),
    (_txn("t2", "2026-03-02T09:00:02.000001Z"), "ok"),
    (_txn("t4", "2026-03-02T09:00:04.000001Z"), "ok"),
    (_txn("t5", "2026-03-02T09:00:05.000001Z"), "ok"),
    (_txn("t6", "2026-03-02T09:00:06.000001Z"), "ok"),
    (json.dumps({"txn_id": "t9", "db_user": "api"}), ("quarantine", "missing end_ts")),
    (_txn("t8", "02/03/2026 09:00"), ("quarantine", "wrong type or unparseable value: end_ts")),
    ('{"txn_id": "t7", "end_ts": "2026-03-02T09:0', ("quarantine", "unparseable line")),
]
CHANGE_LINES = [
    # t1: committed: INSERT then a partial UPDATE of order 1
    (_change("t1", 1, "I", {"order_id": 1}, _order(1)), "ok"),
    (_change("t1", 2, "U", {"order_id": 1}, {"status": "paid"}), "ok"),
    # t2: committed: INSERT then INSERT of order 2: impossible, an anomaly
    (_change("t2", 1, "I", {"order_id": 2}, _order(2)), "ok"),
    (_change("t2", 2, "I", {"order_id": 2}, _order(2, "paid")), "ok"),
    # t3: no transaction row yet: held
    (_change("t3", 1, "I", {"order_id": 3}, _order(3)), "ok"),
    # t4: committed, but its other change lines are quarantined: held whole (incomplete), not applied in part
    (_change("t4", 1, "I", {"order_id": 4}, _order(4)), "ok"),
    (_change("t4", 3, "X", {"order_id": 1}, {"status": "x"}), ("quarantine", "unknown op X")),
    (_change("t4", 4, "U", None, {"status": "x"}), ("quarantine", "missing key")),
    (_change("t4", 5, "U", {"order_id": 1}, {"status": "x"}, op_ts=None), ("quarantine", "missing op_ts")),
    (_change("t4", "fifth", "U", {"order_id": 1}, {"status": "x"}), ("quarantine", "wrong type or unparseable value: op_seq")),
    (_change("t4", 6, "U", {"order_id": 1}, None), ("quarantine", "op U without values")),
    (_change("t4", 7, "I", {"order_id": 8}, {"status": "new"}), ("quarantine", "insert values without every key column")),
    ('{"txn_id": "t4", "op_ts": "2026-03-02T09:00:00.0001Z", "op_seq": 8, "op": "U", "key": {"order_id"', ("quarantine", "unparseable line")),
    (_change("t4", 9, "T", {"order_id": 1}), ("quarantine", "truncate with a key or values")),
    (_change("t4", 10, "A", {}, {"sql": "ALTER TABLE orders ADD x int"}), ("quarantine", "alter without its statement")),
    # t5: committed: an INSERT, a TRUNCATE (which undoes it and counts it among its operations), an INSERT
    (_change("t5", 1, "I", {"order_id": 5}, _order(5)), "ok"),
    (_change("t5", 2, "T", {}), "ok"),
    (_change("t5", 3, "I", {"order_id": 6}, _order(6)), "ok"),
    (_change("t5", 4, "A", {}, {"statement": "ALTER TABLE orders ADD CONSTRAINT positive CHECK (total >= 0)"}), "ok"),
    # t6: committed: the table dropped (the event trigger's row): no replica change, the table's DDL
    (_change("t6", 1, "A", {}, {"statement": "DROP TABLE app.orders"}), "ok"),
]

LANDED = {
    (BINLOG, f"binlog/{FILE}.jsonl"): BINLOG_LINES,
    (BINLOG, "sessions/sessions-0001.jsonl"): SESSION_LINES,
    (SHADOW, "shadow/_transactions/txns-0001.jsonl"): TXN_LINES,
    (SHADOW, "shadow/app.orders/changes-0001.jsonl"): CHANGE_LINES,
}


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad-input")
    landing = tmp / "landing"
    for (source, rel), lines in LANDED.items():
        path = landing / source / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(text + "\n" for text, _ in lines))
    onboarding = write_onboarding(tmp / "onboarding.yml", ("orders",), ("binlog", "shadow"))
    harness.run_project(spark, landing, tmp / "lake", onboarding, layers=("bronze", "silver"))
    return {"lake": tmp / "lake", "landing": landing}


def _bronze_tables(store, source):
    kinds = {f"bronze.{source}_{k.name}{q}" for k in KINDS for q in ("", "_quarantine")}
    names = [t.name for t in store.list_tables() if t.name in kinds]
    return [n for n in names if not n.endswith("_quarantine")], [n for n in names if n.endswith("_quarantine")]


@pytest.mark.parametrize("source", [BINLOG, SHADOW])
def test_every_bad_line_is_quarantined_with_its_reason(spark, lake, source):
    store = LakeStore(spark, lake["lake"])
    _, quarantines = _bronze_tables(store, source)
    got = {}
    for name in quarantines:
        for r in store.read(name).select("_source_file", "_line", "_reason").collect():
            path = Path(urlparse(r["_source_file"]).path)  # a file: URI
            got[(path.relative_to(lake["landing"] / source).as_posix(), r["_line"])] = r["_reason"]
    expected = {(rel, i): fate[1] for (s, rel), lines in LANDED.items() if s == source
                for i, (_, fate) in enumerate(lines, 1) if fate != "ok"}
    assert set(got) == set(expected), f"quarantined {sorted(got)} but the bad lines are {sorted(expected)}"
    wrong = {k: (got[k], why) for k, why in expected.items() if why not in (got[k] or "")}
    assert not wrong, f"reasons (got, expected substring): {wrong}"


@pytest.mark.parametrize("source", [BINLOG, SHADOW])
def test_input_lines_are_bronze_rows_plus_quarantined_rows(spark, lake, source):
    store = LakeStore(spark, lake["lake"])
    accepted, quarantines = _bronze_tables(store, source)
    for (s, rel), lines in LANDED.items():
        if s != source:
            continue
        path = str(lake["landing"] / source / rel)
        kept = sum(store.read(n).filter(F.col("_source_file").endswith(rel)).count() for n in accepted)
        quarantined = sum(store.read(n).filter(F.col("_source_file").endswith(rel)).count() for n in quarantines)
        good = sum(fate == "ok" for _, fate in lines)
        assert (kept, quarantined) == (good, len(lines) - good), path


def _images(line: str) -> int:
    ev = json.loads(line)
    return len(ev["rows"]) if ev.get("type") in ("insert", "update", "delete") else 0


def test_binlog_row_changes_are_applied_held_or_rolled_back(spark, lake):
    """Every row change of an accepted row event is applied (in a committed transaction's net
    change), held (its transaction has no commit yet) or dropped with its rolled-back
    transaction; the bad lines were counted in quarantine above."""
    store = LakeStore(spark, lake["lake"])
    changes = store.read(f"silver.{BINLOG}_changes")
    txns = store.read(f"silver.{BINLOG}_transactions")
    events = store.read(f"bronze.{BINLOG}_binlog_events")
    statuses = {"held": ("open", "unterminated", "incomplete"), "rolled_back": ("rolled_back",)}
    gtids = {s: [r["gtid"] for r in txns.filter(F.col("status").isin(*v)).collect()] for s, v in statuses.items()}
    assert (sorted(gtids["held"]), len(gtids["rolled_back"])) == (["0-7-5", "0-7-6"], 1)

    def bronze_images(gtid_list):
        rows = events.filter(F.col("gtid").isin(gtid_list) & F.col("type").isin("insert", "update", "delete"))
        return sum(len(json.loads(r["rows"])) for r in rows.select("rows").collect())

    applied = changes.agg(F.sum("op_count")).first()[0]
    held, rolled_back = bronze_images(gtids["held"]), bronze_images(gtids["rolled_back"])
    accepted = sum(_images(text) for text, fate in BINLOG_LINES if fate == "ok")
    assert (applied, held, rolled_back) == (7, 3, 1)
    assert applied + held + rolled_back == accepted
    assert changes.join(txns.filter("status <> 'committed'"), "txn_id", "left_semi").count() == 0


def test_shadow_change_rows_are_applied_held_or_quarantined(spark, lake):
    store = LakeStore(spark, lake["lake"])
    changes = store.read(f"silver.{SHADOW}_changes")
    txns = store.read(f"silver.{SHADOW}_transactions")
    bronze = store.read(f"bronze.{SHADOW}_shadow_changes")
    applied = changes.agg(F.sum("op_count")).first()[0]
    statuses = {r["txn_id"]: r["status"] for r in txns.collect()}
    assert (statuses["t3"], statuses["t4"]) == ("open", "incomplete")
    held = bronze.filter(F.col("txn_id").isin("t3", "t4")).count()
    quarantined = store.read(f"bronze.{SHADOW}_shadow_changes_quarantine").count()
    assert (applied, held, quarantined) == (9, 2, 9)
    ops = {r["op"]: r["op_count"] for r in changes.filter("txn_id = 't5'").collect()}
    assert ops == {"TRUNCATE": 2, "INSERT": 1, "ALTER": 1}
    assert [(r.ddl, r.ddl_table) for r in txns.filter("txn_id IN ('t5', 't6')").orderBy("txn_id").collect()] == [
        ("ALTER TABLE orders ADD CONSTRAINT positive CHECK (total >= 0)", "app.orders"), ("DROP TABLE app.orders", "app.orders")]
    assert applied + held + quarantined == len(CHANGE_LINES)


@pytest.mark.parametrize(("source", "txn", "anomaly"), [
    (BINLOG, "xid:2", "INSERT after INSERT"),
    (BINLOG, "xid:3", "UPDATE after DELETE"),
    (SHADOW, "t2", "INSERT after INSERT"),
])
def test_impossible_operation_pairs_end_in_an_anomaly(spark, lake, source, txn, anomaly):
    changes = LakeStore(spark, lake["lake"]).read(f"silver.{source}_changes")
    flagged = changes.filter((F.col("txn_id") == txn) & (F.size("anomalies") > 0)).collect()
    assert [r["anomalies"] for r in flagged] == [[anomaly]], [r.asDict() for r in flagged]


def test_a_transaction_at_positions_reused_in_a_later_epoch_is_applied_after_the_earlier_ones(spark, lake):
    changes = LakeStore(spark, lake["lake"]).read(f"silver.{BINLOG}_changes")
    by_txn = {r["txn_id"]: r for r in changes.collect()}
    again = by_txn["xid:1@epoch1"]
    assert (again["op"], again["key"]) == ("INSERT", '{"order_id":"7"}')
    assert again["sequence"]["position"] > max(r["sequence"]["position"] for t, r in by_txn.items() if t != "xid:1@epoch1")
