"""Sessions that land after their transaction (issue 68, point 2).

A binlog transaction's user and role are those of the latest session of its thread that
connected before it began, whichever landed first (CONTRACT §2.2 with §2, §4). A session landing
later enriches the transactions of its thread in place: silver's transactions table and gold's
audit rows are upserted, the same keys, with ``enriched_at`` saying when that session landed
(silver/session_enrichment.py, gold/enrichments.py). Units prove the DataFrame functions; a
property test folds random sessions and transactions landed in random batches and compares the
result with everything landed at once; one pipeline run proves the issue's example through
Spark and Delta; one small pipeline proves that an AUTO CDC state kept before a sequence gained
its enrichment field still applies.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.cdc.apply import SEQ, with_sequence_of
from cdc_lakehouse.contract.lines import binlog_event, row_image, session
from cdc_lakehouse.runtime.runner import run_pipeline
from cdc_lakehouse.silver import binlog_transactions as bt
from cdc_lakehouse.silver.session_enrichment import enrichments, latest_versions
from cdc_lakehouse.silver.transactions_table import ENRICHED_AT, PROGRESS
from cdc_lakehouse.storage import LakeStore
from lake_helpers import write_jsonl
from property_settings import examples

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench import harness  # noqa: E402
from bench.workload import write_onboarding  # noqa: E402
from binlog_lines import land  # noqa: E402

T0 = 1772442000  # 2026-03-02T09:00:00Z: transactions begin around it; update k reads at T0 + 3600 * (k + 1)
SESSIONS = "server_id long, thread_id long, connected_at timestamp, user string, role string, _ingested_at timestamp"
TXNS = "server_id long, thread_id long, begin_position long, begin_s long"


# -- units: a fold of landings over the versions table ----------------------------------------
def _read_at(update: int):
    return F.timestamp_seconds(F.lit(T0 + 3600 * (update + 1)))


def _sessions(spark, rows: list[tuple], update: int) -> DataFrame:
    """Session lines (server, thread, connected second from T0, user, role) read by ``update``."""
    frame = spark.createDataFrame([(s, t, T0 + c, u, r) for s, t, c, u, r in rows],
                                  "server_id long, thread_id long, connected long, user string, role string")
    return frame.select("server_id", "thread_id", F.timestamp_seconds("connected").alias("connected_at"), "user", "role",
                        _read_at(update).alias("_ingested_at"))


def _assembled(spark, txns: list[tuple], sessions: DataFrame) -> DataFrame:
    """Transaction rows (server, thread, begin position, begin second from T0) as the transaction
    flow emits them, with the sessions landed so far: ended, user and role, ``PROGRESS``."""
    frame = spark.createDataFrame([(s, t, p, T0 + b) for s, t, p, b in txns], TXNS).select(
        "server_id", "thread_id", "begin_position", F.col("begin_s").alias("begin_ts"),
        F.col("begin_position").alias("begin_lsn"))
    rows = bt.with_session_user(frame, sessions).select(
        F.lit("bench").alias("source"), F.concat(F.lit("xid:"), F.col("begin_position").cast("string")).alias("txn_id"),
        "server_id", "thread_id", "begin_position", F.timestamp_seconds("begin_ts").alias("begin_ts"),
        (F.col("begin_position") + 10).alias("sequence_position"), "user", "role",
        F.lit(None).cast("timestamp").alias(ENRICHED_AT))
    return rows.withColumn(PROGRESS, F.struct(F.lit(True).alias("ended"), F.col("sequence_position").alias("at"),
                                              F.col(ENRICHED_AT).alias(ENRICHED_AT)))


def _fold(spark, updates: list[tuple[list[tuple], list[tuple]]]) -> DataFrame:
    """The transactions table after landing each update's (transactions, sessions) in turn: the
    versions appended, then the enrichments of the update's sessions; AUTO CDC keeps, per key,
    the row with the greatest ``PROGRESS`` (``latest_versions``)."""
    versions = sessions = rows = None
    for update, (txns, lines) in enumerate(updates):
        new_sessions = _sessions(spark, lines, update)
        sessions = new_sessions if sessions is None else sessions.unionByName(new_sessions)
        new_versions = _assembled(spark, txns, sessions).localCheckpoint()
        versions = new_versions if versions is None else versions.unionByName(new_versions).localCheckpoint()
        enriched = enrichments(new_sessions, sessions, versions, new_versions).localCheckpoint()
        rows = versions if rows is None else rows.unionByName(new_versions)
        rows = rows.unionByName(enriched).localCheckpoint()
    assert rows is not None
    return latest_versions(rows)


def _who(table: DataFrame) -> DataFrame:
    return table.select("txn_id", "user", "role")


ALICE_BEFORE = (1, 42, -60, "alice", "auditor")
MALLORY_AFTER = (1, 42, 60, "mallory", "intruder")
XID_8 = (1, 42, 8, 0)


def test_a_session_that_lands_after_its_transaction_enriches_it(spark):
    table = _fold(spark, [([XID_8], []), ([], [ALICE_BEFORE, MALLORY_AFTER])])
    row = table.collect()[0]
    assert (row.txn_id, row.user, row.role) == ("xid:8", "alice", "auditor")
    assert row[ENRICHED_AT] == table.select(_read_at(1).alias("t")).first().t


def test_a_session_that_landed_first_or_with_it_enriches_nothing(spark):
    for updates in ([([], [ALICE_BEFORE]), ([XID_8], [MALLORY_AFTER])], [([XID_8], [ALICE_BEFORE, MALLORY_AFTER])]):
        row = _fold(spark, updates).collect()[0]
        assert (row.user, row.role, row[ENRICHED_AT]) == ("alice", "auditor", None)


def test_a_later_session_that_connected_more_recently_before_the_begin_wins(spark):
    bob_closer = (1, 42, -10, "bob", None)  # no role is an answer
    table = _fold(spark, [([XID_8], [ALICE_BEFORE]), ([], [bob_closer]), ([], [ALICE_BEFORE])])
    row = table.collect()[0]
    assert (row.user, row.role) == ("bob", None)
    assert row[ENRICHED_AT] == table.select(_read_at(1).alias("t")).first().t  # the re-delivery of alice: nothing


def test_a_session_of_the_same_answer_or_another_thread_enriches_nothing(spark):
    alice_again = (1, 42, -30, "alice", "auditor")
    other_thread = (1, 43, -30, "carol", "admin")
    row = _fold(spark, [([XID_8], [ALICE_BEFORE]), ([], [alice_again, other_thread])]).collect()[0]
    assert (row.user, row.role, row[ENRICHED_AT]) == ("alice", "auditor", None)


def test_sessions_of_one_thread_connected_at_one_instant_are_ordered_by_user_not_by_arrival(spark):
    tie = [(1, 42, -60, "zed", "r"), (1, 42, -60, "amy", "r")]
    for updates in ([([XID_8], [tie[0]]), ([], [tie[1]])], [([XID_8], [tie[1]]), ([], [tie[0]])]):
        assert _fold(spark, updates).collect()[0].user == "amy"


# -- property: any split into arrival batches gives what landing everything at once gives -----
@st.composite
def landings(draw) -> tuple[list[tuple], list[tuple], list[tuple[list[tuple], list[tuple]]]]:
    """Transactions and sessions of two threads (re-deliveries included), each landed by one of
    up to four updates."""
    threads = st.sampled_from([41, 42])
    txns = [(1, t, 100 * (i + 1), draw(st.integers(0, 120))) for i, t in enumerate(draw(st.lists(threads, min_size=1, max_size=5)))]
    sessions = draw(st.lists(st.tuples(st.just(1), threads, st.integers(-60, 150),
                                       st.sampled_from(["alice", "bob", "carol", None]),
                                       st.sampled_from(["auditor", "writer", None])), max_size=6))
    sessions += draw(st.lists(st.sampled_from(sessions), max_size=2)) if sessions else []  # re-delivered
    count = draw(st.integers(1, 4))
    updates: list[tuple[list[tuple], list[tuple]]] = [([], []) for _ in range(count)]
    for txn in txns:
        updates[draw(st.integers(0, count - 1))][0].append(txn)
    for line in sessions:
        updates[draw(st.integers(0, count - 1))][1].append(line)
    return txns, sessions, updates


def _answer(txn: tuple, sessions: list[tuple]) -> tuple:
    """What the sessions say of the transaction: the latest that connected before its begin
    second ended, ties by user then role (NULLs last); no user: unknown."""
    before = [s for s in sessions if s[1] == txn[1] and s[2] < txn[3] + 1]
    deciding = min(before, key=lambda s: (-s[2], s[3] is None, s[3] or "", s[4] is None, s[4] or ""), default=None)
    return ("unknown", "unknown") if deciding is None or deciding[3] is None else (deciding[3], deciding[4])


def _expected_enrichment(spark, txns, updates) -> DataFrame:
    """Per transaction, when it was last enriched: the last update after the one that landed it
    whose sessions changed its answer (NULL: none)."""
    def landed_by(u: int) -> list[tuple]:
        return [s for _, lines in updates[:u + 1] for s in lines]

    rows = []
    for txn in txns:
        since = next(i for i, (landed, _) in enumerate(updates) if txn in landed)
        changed = [u for u in range(since + 1, len(updates)) if _answer(txn, landed_by(u)) != _answer(txn, landed_by(u - 1))]
        rows.append((f"xid:{txn[2]}", T0 + 3600 * (changed[-1] + 1) if changed else None))
    return spark.createDataFrame(rows, "txn_id string, at long").select("txn_id", F.timestamp_seconds("at").alias(ENRICHED_AT))


@hypothesis_settings(max_examples=examples(6), deadline=None)
@given(landings())
def test_any_arrival_order_gives_the_users_of_everything_landed_at_once(spark, landed):
    txns, sessions, updates = landed
    folded = _fold(spark, updates)
    assertDataFrameEqual(_who(folded), _who(_fold(spark, [(txns, sessions)])))
    assertDataFrameEqual(folded.select("txn_id", ENRICHED_AT), _expected_enrichment(spark, txns, updates))


# -- a state kept before the sequence gained its enrichment field ------------------------------
def test_a_state_whose_sequence_lacks_the_new_field_reads_it_as_null(spark):
    state = spark.createDataFrame([(1, (True, 5))], f"k long, {SEQ} struct<ended:boolean, at:long>")
    batch = spark.createDataFrame([(1, (True, 5, None))], f"k long, {SEQ} struct<ended:boolean, at:long, enriched_at:timestamp>")
    aligned = with_sequence_of(state, batch)
    assert aligned.schema[SEQ].dataType == batch.schema[SEQ].dataType
    assert aligned.first()[SEQ] == (True, 5, None)


PIPELINE = """
from pyspark import pipelines as dp
from pyspark.sql import functions as F

LANDING = spark.conf.get("test.landing")
FIELDS = [F.col("seq")] + ([F.col("enriched_at")] if spark.conf.get("test.enriched") == "yes" else [])


@dp.temporary_view
def changes():
    return (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
            .schema("id long, who string, seq long, enriched_at timestamp").load(LANDING))


dp.create_streaming_table("silver.who")
dp.create_auto_cdc_flow(target="silver.who", source="changes", keys=["id"], sequence_by=F.struct(*FIELDS),
                        except_column_list=["seq"])
"""


def test_a_flow_whose_sequence_gains_the_enrichment_field_keeps_applying_to_a_lake_made_before(spark, tmp_path):
    (tmp_path / "pipeline").mkdir()
    (tmp_path / "pipeline" / "who.py").write_text(PIPELINE)
    landing, lake = tmp_path / "landing", tmp_path / "lake"

    def run(name: str, rows: list[dict], enriched: str) -> None:
        write_jsonl(landing / f"{name}.jsonl", rows)
        run_pipeline(spark, [str(tmp_path / "pipeline" / "*.py")], lake, {"test.landing": str(landing), "test.enriched": enriched})

    run("1", [{"id": 1, "who": "unknown", "seq": 5}], "no")
    run("2", [{"id": 1, "who": "unknown", "seq": 5}, {"id": 2, "who": "old", "seq": 1}], "yes")  # a re-delivery: nothing
    run("3", [{"id": 1, "who": "alice", "seq": 5, "enriched_at": "2026-03-02T10:00:00Z"}], "yes")
    got = LakeStore(spark, lake).read("silver.who").select("id", "who").orderBy("id")
    assert [tuple(r) for r in got.collect()] == [(1, "alice"), (2, "old")]


# -- the whole pipeline: the example -------------------------------------------------
SOURCE, FILE = "bench", "mysql-bin.000001"


def _txn(pos: int, xid: int, thread: int, order_id: int) -> list[dict]:
    """begin (at T0), one insert into app.orders, commit: a transaction of server 1."""
    row = binlog_event(1, FILE, pos + 50, T0, None, "insert", schema="app", table="orders", primary_key=["order_id"],
                       rows=[row_image(None, {"order_id": order_id, "status": "new", "total": 10})])
    return [binlog_event(1, FILE, pos, T0, None, "begin", thread_id=thread), row,
            binlog_event(1, FILE, pos + 100, T0, None, "commit", xid=xid)]


def _thread_sessions(thread: int) -> list[dict]:
    """alice/auditor connected a minute before the transactions began, mallory/intruder a minute after."""
    return [session(1, thread, "2026-03-02T08:59:00Z", "alice", "auditor"),
            session(1, thread, "2026-03-02T09:01:00Z", "mallory", "intruder")]


@pytest.fixture(scope="module")
def late_sessions_lake(spark, tmp_path_factory):
    """Update 1: xid 8 (thread 42) with no session of its thread, and the sessions of thread 43;
    update 2: the sessions of thread 42, and the control xid 9 of thread 43, whose sessions
    landed first. Each update runs the whole pipeline, so gold takes xid 8 in the first."""
    tmp = tmp_path_factory.mktemp("late_sessions")
    landing, lake = tmp / "landing", tmp / "lake"
    onboarding = write_onboarding(tmp / "onboarding.yml", ("orders",), ("binlog",))
    land(landing, SOURCE, "sessions", "sessions-1.jsonl", _thread_sessions(43))
    land(landing, SOURCE, "binlog", f"{FILE}-1.jsonl", _txn(4, 8, 42, 50))
    harness.run_project(spark, landing, lake, onboarding)
    store = LakeStore(spark, lake)
    first = {t: store.read(t).collect() for t in (f"silver.{SOURCE}_transactions", "gold.audit_log", "gold.audit_transactions")}
    land(landing, SOURCE, "sessions", "sessions-2.jsonl", _thread_sessions(42))
    land(landing, SOURCE, "binlog", f"{FILE}-2.jsonl", _txn(304, 9, 43, 51))
    harness.run_project(spark, landing, lake, onboarding)
    return store, first


def _by_txn(rows) -> dict:
    return {r.txn_id: r for r in rows}


@pytest.mark.parametrize("table", [f"silver.{SOURCE}_transactions", "gold.audit_log", "gold.audit_transactions"])
def test_the_late_sessions_name_the_user_of_the_same_row_and_say_when(spark, late_sessions_lake, table):
    store, first = late_sessions_lake
    before, after = _by_txn(first[table]), _by_txn(store.read(table).collect())
    assert (before["xid:8"].user, before["xid:8"].role, before["xid:8"][ENRICHED_AT]) == ("unknown", "unknown", None)
    assert sorted(after) == ["xid:8", "xid:9"]  # the same row of xid 8, corrected: no new one
    assert store.read(table).count() == 2
    landed = store.read(f"bronze.{SOURCE}_sessions").filter("thread_id = 42").agg(F.min("_ingested_at")).first()[0]
    assert (after["xid:8"].user, after["xid:8"].role, after["xid:8"][ENRICHED_AT]) == ("alice", "auditor", landed)
    assert (after["xid:9"].user, after["xid:9"].role, after["xid:9"][ENRICHED_AT]) == ("alice", "auditor", None)
    unchanged = [c for c in store.read(table).columns if c not in ("user", "role", ENRICHED_AT)]
    assert [after["xid:8"][c] for c in unchanged] == [before["xid:8"][c] for c in unchanged]


def test_every_session_line_is_in_bronze_and_each_enrichment_recorded_once(spark, late_sessions_lake):
    store, _ = late_sessions_lake
    assert store.read(f"bronze.{SOURCE}_sessions").count() == 4
    assert store.read(f"bronze.{SOURCE}_sessions_quarantine").count() == 0
    enriched = store.read(f"silver.{SOURCE}_session_enrichments").select("txn_id", "user", "role").collect()
    assert [tuple(r) for r in enriched] == [("xid:8", "alice", "auditor")]


def test_the_audits_views_count_the_change_under_its_user(spark, late_sessions_lake):
    store, _ = late_sessions_lake
    by_user = store.read("gold.audit_changes_by_user_day").select("user", "role", "changes").collect()
    assert [tuple(r) for r in by_user] == [("alice", "auditor", 2)]
    last = store.read("gold.audit_row_last_change").select("key", "user").orderBy("key").collect()
    assert [r.user for r in last] == ["alice", "alice"]
