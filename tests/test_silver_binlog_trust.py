"""Binlog landings trusted to the contract, not to the capture (issue 57, parts 3 and 4).

* A DML statement logged as SQL (a ``ddl`` line whose query is INSERT, UPDATE, DELETE, REPLACE or
  LOAD DATA) cannot be applied row by row: it is an anomaly of its table naming the statement, its
  transaction and position, its transaction still commits, and gold.data_quality says the table
  may diverge until its next snapshot (silver/statements.py).

* A line whose identity ``(server_id, epoch, file, pos)`` landed before with other content is no
  re-delivery: it starts an epoch inferred from the landing order, applied after everything before
  it, recorded as an anomaly and counted in gold.replication_health (silver/binlog_epochs.py).

Units prove the DataFrame functions; one pipeline run per case proves the whole path through
Spark and Delta, with every landed row change accounted for: applied + held + quarantined (+
recorded as a statement anomaly) = input.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.contract.landing import to_json
from cdc_lakehouse.contract.lines import binlog_event, row_image
from cdc_lakehouse.contract.writer import LandingFile
from cdc_lakehouse.silver import binlog_transactions as bt
from cdc_lakehouse.silver import binlog_epochs, statements
from cdc_lakehouse.storage import LakeStore

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench import harness  # noqa: E402
from bench.workload import write_onboarding  # noqa: E402
from binlog_lines import landed, landed_file  # noqa: E402

SOURCE, FILE, TS = "bench", "mysql-bin.000001", 1772442000


def _ev(pos: int, type_: str, **kw) -> dict:
    return binlog_event(7, FILE, pos, TS + pos // 1000, None, type_, **kw)


def _rows(type_: str, pos: int, before: dict | None, after: dict | None) -> dict:
    return _ev(pos, type_, schema="app", table="orders", primary_key=["order_id"], rows=[row_image(before, after)])


def _order(oid: int, status: str = "new") -> dict:
    return {"order_id": oid, "status": status, "total": 10}


def _land(landing: Path, name: str, events: list[dict]) -> None:
    folder = landing / SOURCE / "binlog"
    folder.mkdir(parents=True, exist_ok=True)
    out = LandingFile(folder / name)
    for event in events:
        out.write(to_json(event))
    out.close()


def _row_changes(events: list[dict]) -> int:
    return sum(len(e["rows"]) for e in events if e["type"] in ("insert", "update", "delete"))


def _frame(spark, events: list[dict], source_file: str = "1.jsonl"):
    """Bronze binlog events as silver reads them (no row images: transaction assembly needs none)."""
    return landed_file(spark, events, source_file, source=SOURCE)


# -- part 4: DML statements logged as SQL ------------------------------------------------------
@pytest.mark.parametrize(("query", "target"), [
    ("UPDATE db.st SET v=5 WHERE id=1", ("db", "st")),
    ("update LOW_PRIORITY `st` set v = 5", ("app", "st")),
    ("/* app */ INSERT IGNORE INTO db.`st` (id) VALUES (1)", ("db", "st")),
    ("REPLACE st VALUES (1)", ("app", "st")),
    ("DELETE QUICK FROM db.st WHERE id = 1", ("db", "st")),
    ("LOAD DATA LOCAL INFILE '/tmp/x.csv' REPLACE INTO TABLE st", ("app", "st")),
    ("ALTER TABLE st ADD COLUMN v int", None),
    ("CREATE TABLE inserts (id int)", None),
])
def test_a_dml_statement_is_recognised_with_the_table_it_writes(spark, query, target):
    df = spark.createDataFrame([(query, "app")], "query string, schema string")
    schema, table = statements.target(F.col("query"), F.col("schema"), F.lit(None).cast("string"))
    got = df.select(statements.is_dml(F.col("query")).alias("dml"), schema.alias("s"), table.alias("t")).first()
    assert (got.dml, (got.s, got.t) if got.dml else None) == (target is not None, target)


STATEMENT_EVENTS = [
    _ev(1000, "begin", thread_id=21), _rows("insert", 1100, None, _order(1)), _ev(1200, "commit", xid=1),
    # As statement-based logging writes it: BEGIN, the query, COMMIT (XID), with a row event beside it.
    _ev(2000, "begin", thread_id=21),
    _ev(2100, "ddl", schema="app", query="UPDATE app.orders SET status = 'paid' WHERE order_id = 1"),
    _rows("insert", 2200, None, _order(2)), _ev(2300, "commit", xid=2),
    # A statement outside BEGIN .. COMMIT (a non-transactional engine): a transaction of its own.
    _ev(3000, "ddl", schema="app", query="DELETE FROM orders WHERE order_id = 2"),
    _ev(4000, "begin", thread_id=21), _rows("update", 4100, _order(1), _order(1, "shipped")), _ev(4200, "commit", xid=4),
]


def test_a_statement_inside_begin_commit_is_part_of_that_transaction(spark):
    events = _frame(spark, STATEMENT_EVENTS)
    txns = bt.transactions(bt.distinct_events(events), None)
    got = txns.select((F.col("begin_lsn") - F.lit(1 << 32)).alias("begin"), "status", "txn_id", "ddl_table")
    expected = spark.createDataFrame([(1000, "committed", "xid:1", None), (2000, "committed", "xid:2", None),
                                      (3000, "committed", "pos:7:mysql-bin.000001:3000", None),
                                      (4000, "committed", "xid:4", None)], got.schema)
    assertDataFrameEqual(got, expected)


@pytest.fixture(scope="module")
def statement_lake(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("statement-dml")
    _land(tmp / "landing", f"{FILE}.jsonl", STATEMENT_EVENTS)
    onboarding = write_onboarding(tmp / "onboarding.yml", ("orders",), ("binlog",))
    harness.run_project(spark, tmp / "landing", tmp / "lake", onboarding)
    return LakeStore(spark, tmp / "lake")


def test_a_statement_is_an_anomaly_naming_it_its_transaction_and_position(spark, statement_lake):
    anomalies = statement_lake.read(f"silver.{SOURCE}_anomalies").filter(F.col("anomaly") == statements.STATEMENT_DML)
    got = anomalies.select("schema", "table", "txn_id", "applied_as", "detail").orderBy("txn_id").collect()
    assert [(r.schema, r.table, r.txn_id, r.applied_as) for r in got] == [
        ("app", "orders", "pos:7:mysql-bin.000001:3000", "NONE"), ("app", "orders", "xid:2", "NONE")]
    assert "UPDATE app.orders SET status = 'paid' WHERE order_id = 1 (transaction xid:2, position " \
           "mysql-bin.000001:2100)" in got[1].detail
    assert "binlog_format=ROW" in got[1].detail and "snapshot" in got[1].detail


def test_the_replica_stays_as_the_rows_say_and_every_change_is_accounted_for(spark, statement_lake):
    replica = statement_lake.read(f"silver.{SOURCE}_orders").select("order_id", "status").orderBy("order_id")
    assert [tuple(r) for r in replica.collect()] == [(1, "shipped"), (2, "new")]
    changes = statement_lake.read(f"silver.{SOURCE}_changes")
    applied = changes.filter(F.col("op") != "NONE").agg(F.sum("op_count")).first()[0]
    recorded = changes.filter(F.array_contains("anomalies", statements.STATEMENT_DML)).count()
    txns = statement_lake.read(f"silver.{SOURCE}_transactions")
    held = txns.filter(F.col("status") != "committed").count()
    quarantined = statement_lake.read(f"bronze.{SOURCE}_binlog_events_quarantine").count()
    assert (applied, recorded, held, quarantined) == (3, 2, 0, 0)
    assert applied + held + quarantined + recorded == _row_changes(STATEMENT_EVENTS) + 2


def test_data_quality_says_the_table_may_diverge_since_the_first_statement(spark, statement_lake):
    quality = statement_lake.read("gold.data_quality").filter(F.col("table") == "app.orders").first()
    assert quality.may_diverge_since == statement_lake.read(f"silver.{SOURCE}_transactions").filter(
        "txn_id = 'xid:2'").first().commit_ts
    assert statements.STATEMENT_DML in quality.anomalies


# -- part 3: positions reused without an epoch ------------------------------------------------
def _txn(begin: int, xid: int, ts: int, *changes: dict) -> list[dict]:
    """begin, the row events, commit: at ``begin``, ``begin + 100``, ... with the time ``ts``."""
    events = [{**_ev(begin, "begin", thread_id=21), "ts": ts}]
    events += [{**change, "pos": begin + 100 * (i + 1), "ts": ts} for i, change in enumerate(changes)]
    return events + [{**_ev(begin + 100 * (len(changes) + 1), "commit", xid=xid), "ts": ts}]


BEFORE_RESET = (_txn(1000, 1, TS, _rows("insert", 0, None, _order(1)))
                + _txn(2000, 2, TS + 1, _rows("update", 0, _order(1), _order(1, "paid"))))
# After RESET MASTER: positions, xids and times start again; the first transaction reuses the
# positions of the first one above with other content, the second lies where nothing was.
AFTER_RESET = (_txn(1000, 1, TS + 60, _rows("insert", 0, None, _order(2)))
               + _txn(1500, 2, TS + 61, _rows("update", 0, _order(1, "paid"), _order(1, "shipped"))))
LATER = _txn(3000, 3, TS + 62, _rows("insert", 0, None, _order(3)))


def _ids(spark, *files: tuple[str, list[dict]]) -> list[tuple[str, str]]:
    # Checkpointed as the pipeline persists it: transaction assembly reads the events many times.
    txns = bt.transactions(bt.distinct_events(landed(spark, *files)).localCheckpoint(), None)
    return [(r.txn_id, r.status) for r in txns.orderBy("end_lsn").collect()]


def test_a_position_landed_again_with_other_content_starts_an_inferred_epoch(spark):
    assert _ids(spark, ("a.jsonl", BEFORE_RESET), ("b.jsonl", AFTER_RESET)) == [
        ("xid:1", "committed"), ("xid:2", "committed"), ("xid:1@epoch1", "committed"), ("xid:2@epoch1", "committed")]


def test_a_redelivery_stays_one_and_keeps_its_epoch_whenever_it_lands(spark):
    again = _ids(spark, ("a.jsonl", BEFORE_RESET), ("b.jsonl", AFTER_RESET), ("a-again.jsonl", BEFORE_RESET),
                 ("b-again.jsonl", AFTER_RESET[:3]))
    assert again == [("xid:1", "committed"), ("xid:2", "committed"), ("xid:1@epoch1", "committed"),
                     ("xid:2@epoch1", "committed")]


def test_the_landing_order_decides_and_a_file_straddling_the_reset_is_cut_where_positions_step_back(spark):
    # The same lines landed the other way round: what landed first is epoch 0.
    assert _ids(spark, ("b.jsonl", AFTER_RESET), ("a.jsonl", BEFORE_RESET))[0] == ("xid:1", "committed")
    one_file = _ids(spark, ("a.jsonl", BEFORE_RESET[:3]), ("ab.jsonl", BEFORE_RESET[3:] + AFTER_RESET))
    assert one_file == [("xid:1", "committed"), ("xid:2", "committed"), ("xid:1@epoch1", "committed"),
                        ("xid:2@epoch1", "committed")]


def test_the_line_that_starts_an_inferred_epoch_is_marked(spark):
    events = binlog_epochs.with_inferred_epochs(landed(spark, ("a.jsonl", BEFORE_RESET), ("b.jsonl", AFTER_RESET)))
    got = events.filter(F.col(binlog_epochs.RESET)).select("_source_file", "_line", "epoch", binlog_epochs.INFERRED)
    assertDataFrameEqual(got, spark.createDataFrame([("b.jsonl", 1, 1, 1)], got.schema))


@pytest.fixture(scope="module")
def reset_lake(spark, tmp_path_factory):
    """Three updates: the log before the reset; the log after it and a re-delivery of the first
    file; a later transaction (with the kept state) and another re-delivery of the first log."""
    tmp = tmp_path_factory.mktemp("reset-no-epoch")
    landing, lake = tmp / "landing", tmp / "lake"
    onboarding = write_onboarding(tmp / "onboarding.yml", ("orders",), ("binlog",))
    _land(landing, f"{FILE}-1000.jsonl", BEFORE_RESET)
    harness.run_project(spark, landing, lake, onboarding, layers=("bronze", "silver"))  # gold reads silver once, last
    _land(landing, f"{FILE}-1000-after-reset.jsonl", AFTER_RESET)
    _land(landing, f"{FILE}-1000-again.jsonl", BEFORE_RESET)
    harness.run_project(spark, landing, lake, onboarding, layers=("bronze", "silver"))
    _land(landing, f"{FILE}-3000.jsonl", LATER)
    # Re-delivered after the reset, above the new epoch's floor: found in bronze, not re-applied.
    _land(landing, f"{FILE}-2000-again.jsonl", BEFORE_RESET[3:])
    harness.run_project(spark, landing, lake, onboarding)
    return LakeStore(spark, lake)


def test_changes_after_the_reset_apply_after_everything_before_them(spark, reset_lake):
    replica = reset_lake.read(f"silver.{SOURCE}_orders").select("order_id", "status").orderBy("order_id")
    assert [tuple(r) for r in replica.collect()] == [(1, "shipped"), (2, "new"), (3, "new")]
    txns = reset_lake.read(f"silver.{SOURCE}_transactions").orderBy("sequence_position")
    assert [(r.txn_id, r.status, r.position.epoch) for r in txns.collect()] == [
        ("xid:1", "committed", 0), ("xid:2", "committed", 0), ("xid:1@epoch1", "committed", 1),
        ("xid:2@epoch1", "committed", 1), ("xid:3@epoch1", "committed", 1)]
    audited = reset_lake.read("gold.audit_log").filter(F.col("txn_id").endswith("@epoch1")).select("txn_id").distinct()
    assert sorted(r.txn_id for r in audited.collect()) == ["xid:1@epoch1", "xid:2@epoch1", "xid:3@epoch1"]


def test_the_inferred_reset_is_an_anomaly_and_a_health_counter_and_every_change_is_accounted_for(spark, reset_lake):
    anomalies = reset_lake.read(f"silver.{SOURCE}_anomalies").filter(F.col("anomaly") == binlog_epochs.EPOCH_INFERRED)
    got = anomalies.collect()
    assert [(r.schema, r.table, r.applied_as) for r in got] == [(None, None, "NONE")]
    assert f"line 1 of file:{Path(got[0].detail.split(' of file:')[1].split(' ')[0]).as_posix()}" in got[0].detail
    assert f"{FILE}-1000-after-reset.jsonl holds at {FILE}:1000" in got[0].detail
    assert reset_lake.read("gold.replication_health").first().inferred_epochs == 1
    changes = reset_lake.read(f"silver.{SOURCE}_changes").dropDuplicates(["txn_id", "key", "sequence"])
    applied = changes.filter(F.col("op") != "NONE").agg(F.sum("op_count")).first()[0]
    held = reset_lake.read(f"silver.{SOURCE}_transactions").filter(F.col("status") != "committed").count()
    quarantined = reset_lake.read(f"bronze.{SOURCE}_binlog_events_quarantine").count()
    assert (applied, held, quarantined) == (5, 0, 0)
    assert applied + held + quarantined == _row_changes(BEFORE_RESET + AFTER_RESET + LATER)
