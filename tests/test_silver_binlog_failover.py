"""A failover to another server, in landing lines without epochs or GTIDs (issue 68, point 1).

The order of a source's changes is the source's, not a server's: a segment of lines of a server
other than the one landed before it begins a new epoch, ordered after everything landed before
(silver/binlog_epochs.py, docs/binlog-epochs.md). Units prove the DataFrame functions; a property
test checks them against the history that made the landing (failovers back and forth, files
re-delivered whenever), from the whole landing and batch by batch from held state; one pipeline
run proves the issue's example through Spark and Delta.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.contract.lines import binlog_event, row_image, session
from cdc_lakehouse.silver import binlog_epochs, binlog_held
from cdc_lakehouse.silver import binlog_transactions as bt
from cdc_lakehouse.storage import LakeStore
from property_settings import examples

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench import harness  # noqa: E402
from bench.workload import write_onboarding  # noqa: E402
from binlog_lines import READ_AT, land, landed, landed_file, union  # noqa: E402

SOURCE, FILE, T = "bench", "mysql-bin.000001", READ_AT
FAILOVER_AFTER = 5400  # seconds from the old server's last commit to the new one's first


def _ev(server: int, pos: int, type_: str, ts: int, **kw) -> dict:
    return binlog_event(server, FILE, pos, ts, None, type_, **kw)


def _order(oid: int, status: str) -> dict:
    return {"order_id": oid, "status": status, "total": 10}


def _txn(server: int, begin: int, xid: int, ts: int, change: str, before: dict | None, after: dict | None,
         row_at: int) -> list[dict]:
    """begin, one row event at ``row_at``, commit: a transaction of ``server`` on thread 21."""
    row = _ev(server, row_at, change, ts, schema="app", table="orders", primary_key=["order_id"],
              rows=[row_image(before, after)])
    return [_ev(server, begin, "begin", ts, thread_id=21), row, _ev(server, row_at + 80, "commit", ts, xid=xid)]


# The example: the new server's positions start again, with other content.
SERVER_1 = (_txn(1, 4, 1, T, "insert", None, _order(1, "a"), 100)
            + _txn(1, 250, 2, T, "update", _order(1, "a"), _order(1, "b"), 320))
SERVER_2 = (_txn(2, 4, 1, T + FAILOVER_AFTER, "update", _order(1, "b"), _order(1, "c"), 100)
            + _txn(2, 250, 2, T + FAILOVER_AFTER, "insert", None, _order(2, "new"), 320))


def _transactions(events) -> list[tuple[int, str, str]]:
    # Checkpointed as the pipeline persists it: transaction assembly reads the events many times.
    txns = bt.transactions(bt.distinct_events(events).localCheckpoint(), None)
    return [(r.server_id, r.txn_id, r.status) for r in txns.orderBy("end_lsn").collect()]


def test_the_new_servers_changes_apply_after_the_old_ones(spark):
    assert _transactions(landed(spark, ("s1.jsonl", SERVER_1), ("s2.jsonl", SERVER_2))) == [
        (1, "xid:1", "committed"), (1, "xid:2", "committed"),
        (2, "xid:1@epoch1", "committed"), (2, "xid:2@epoch1", "committed")]


def test_the_line_that_starts_the_epoch_names_the_server_before(spark):
    events = binlog_epochs.with_inferred_epochs(landed(spark, ("s1.jsonl", SERVER_1), ("s2.jsonl", SERVER_2)))
    got = events.filter(F.col(binlog_epochs.RESET)).select(
        "_source_file", "_line", "epoch", binlog_epochs.SWITCHED_FROM, binlog_epochs.LAST_SERVER)
    assertDataFrameEqual(got, spark.createDataFrame([("s2.jsonl", 1, 1, 1, 2)], got.schema))


def test_failing_back_is_another_epoch_and_a_redelivery_keeps_its_own(spark):
    back = _txn(1, 500, 3, T + 2 * FAILOVER_AFTER, "update", _order(1, "c"), _order(1, "d"), 600)  # 1's log goes on
    got = _transactions(landed(spark, ("s1.jsonl", SERVER_1), ("s2.jsonl", SERVER_2), ("s1-again.jsonl", SERVER_1),
                               ("s1-back.jsonl", back), ("s2-again.jsonl", SERVER_2[3:])))
    assert got == [(1, "xid:1", "committed"), (1, "xid:2", "committed"), (2, "xid:1@epoch1", "committed"),
                   (2, "xid:2@epoch1", "committed"), (1, "xid:3@epoch2", "committed")]


def test_lines_that_say_their_epoch_or_carry_a_gtid_keep_their_meaning(spark):
    said = [{**e, "epoch": 0} for e in SERVER_2]
    gtid = [{**e, "gtid": "0-2-7"} if e["type"] == "begin" else e for e in SERVER_2]  # on the begin only
    for second in (said, gtid):
        events = binlog_epochs.with_inferred_epochs(landed(spark, ("s1.jsonl", SERVER_1), ("s2.jsonl", second)))
        assert events.filter(F.col(binlog_epochs.INFERRED) > 0).count() == 0


def test_two_servers_interleaved_inside_their_transactions_are_held_saying_why(spark):
    one, two = SERVER_1[:3], SERVER_2[:3]
    interleaved = [one[0], one[1], two[0], two[1], one[2], two[2]]
    txns = bt.transactions(bt.distinct_events(landed(spark, ("both.jsonl", interleaved))).localCheckpoint(), None)
    got = txns.select("server_id", "status", "held_because").orderBy("server_id").collect()
    assert [(r.server_id, r.status) for r in got] == [(1, "unterminated"), (2, "unterminated")]
    assert got[0].held_because.startswith("no order can be inferred: its begin is of epoch 0 and the next boundary of "
                                          "server 1 (commit at mysql-bin.000001:180) of epoch 2: lines of another server")
    assert "(commit at mysql-bin.000001:180) of epoch 3" in got[1].held_because


# -- property: the epochs are those of the history that made the landing ---------------------
ERA = 100_000  # a line's time says its era: T + era * ERA + pos (content differs from era to era)


def _era_txn(server: int, era: int, at: int, rows: int) -> list[dict]:
    ts = lambda pos: T + era * ERA + pos  # noqa: E731
    row = lambda pos: _ev(server, pos, "insert", ts(pos), schema="app", table="orders",  # noqa: E731
                          primary_key=["order_id"], rows=[row_image(None, _order(pos, "new"))])
    return ([_ev(server, at + 4, "begin", ts(at + 4), thread_id=21)] + [row(at + 10 + i) for i in range(rows)]
            + [_ev(server, at + 90, "commit", ts(at + 90), xid=era * 1000 + at)])


Era = tuple[int, bool, tuple[int, ...]]  # server, whether its positions start again, rows per transaction


def history(eras: list[Era], cuts: list[int], update_count: int,
            again: list[tuple[int, int, int]]) -> list[list[tuple[str, list[dict]]]]:
    """A source's history without epochs or GTIDs, as landed: ``eras`` of servers, each another
    than the one before (a server's log goes on where it stopped unless it starts again), its
    lines cut into files at ``cuts``, the files landed in order over ``update_count`` updates, and
    ``again`` (file, update, first line): that file from that line landed again in that update
    (never before the file itself)."""
    stream: list[dict] = []
    ends: dict[int, int] = {}
    for era, (server, restarts, txns) in enumerate(eras):
        at = 0 if restarts else ends.get(server, 0)
        for rows in txns:
            stream += _era_txn(server, era, at, rows)
            at += 100
        ends[server] = at
    bounds = [0, *sorted(c for c in set(cuts) if 0 < c < len(stream)), len(stream)]
    files = [(f"f{i}.jsonl", stream[a:b]) for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]
    count = max(1, min(update_count, len(files)))
    updates: list[list[tuple[str, list[dict]]]] = [[] for _ in range(count)]
    for i, file in enumerate(files):  # in order: each update takes the next files
        updates[i * count // len(files)].append(file)
    for file, update, first in again:
        name, lines = files[file % len(files)]
        landed_in = next(u for u, files_of in enumerate(updates) if any(n == name for n, _ in files_of))
        target = updates[max(landed_in, min(update, count - 1))]
        target.append((f"again-{len(target)}-{name}", lines[first % len(lines):]))
    return updates


@st.composite
def landings(draw) -> list[list[tuple[str, list[dict]]]]:
    """``history``: failovers back and forth among three servers, files re-delivered whenever."""
    servers = draw(st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=4))
    eras = [(s, draw(st.booleans()), tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2))))
            for i, s in enumerate(servers) if i == 0 or s != servers[i - 1]]
    cuts = draw(st.lists(st.integers(1, 40), max_size=3))
    again = draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 10)), max_size=2))
    return history(eras, cuts, draw(st.integers(1, 4)), again)


# Named examples, run in every profile: a failover, a fail-back, a second failover to a server
# whose positions start again; a file cut through one, updates of several files, re-deliveries
# in the update after and in the last one.
BACK_AND_FORTH = history([(1, False, (1, 2)), (2, False, (1,)), (1, False, (2,)), (2, True, (1, 1))],
                         cuts=[5, 12, 16], update_count=3, again=[(0, 1, 2), (1, 2, 0)])
ONE_SERVER = history([(1, False, (1, 1, 2))], cuts=[6], update_count=2, again=[(0, 1, 0)])
# One file per update, so held state carries each failover: server 1's first transaction is
# open when server 2 takes over (in the same file as its end), then a fail-back to server 1 and a
# failover to server 3; a file landed twice in one update, and one again in the last (late).
SEEDED = history([(1, False, (2,)), (2, False, (1, 2)), (1, False, (1,)), (3, False, (2,))],
                 cuts=[2, 6, 11, 14], update_count=5, again=[(1, 1, 0), (3, 4, 1)])


def _landing(spark, updates) -> list:
    """Per update, its files' lines as bronze read them (files written in landing order)."""
    frames, written = [], 0
    for u, update in enumerate(updates):
        batch = []
        for name, lines in update:
            written += 1
            batch.append(landed_file(spark, lines, name, READ_AT + 60 * u, READ_AT + written))
        frames.append(union(batch))
    return frames


def _wrong_epochs(events) -> int:
    """Events whose epoch is not their era's."""
    era = F.floor((F.col("ts") - F.lit(T)) / F.lit(ERA))
    return events.filter(F.coalesce("epoch", F.lit(0)) != era).count()


@hypothesis_settings(max_examples=examples(3))
@given(updates=landings())
@example(updates=BACK_AND_FORTH)
@example(updates=SEEDED)
@example(updates=ONE_SERVER)
def test_the_inferred_epochs_are_the_historys_eras(spark, updates):
    events = binlog_epochs.with_inferred_epochs(union(_landing(spark, updates))).localCheckpoint()
    assert _wrong_epochs(events) == 0
    starts = events.filter(F.col(binlog_epochs.RESET)).select("epoch", "server_id", binlog_epochs.SWITCHED_FROM)
    eras = [lines[0]["server_id"] for lines in _eras(updates)]
    assert sorted(tuple(r) for r in starts.collect()) == [(i, s, eras[i - 1]) for i, s in enumerate(eras) if i]


def _eras(updates) -> list[list[dict]]:
    """The history's lines per era, from the files landed first (not the re-deliveries)."""
    lines = [line for update in updates for name, file in update if not name.startswith("again") for line in file]
    by_era: dict[int, list[dict]] = {}
    for line in lines:
        by_era.setdefault((line["ts"] - T) // ERA, []).append(line)
    return [by_era[e] for e in sorted(by_era)]


@hypothesis_settings(max_examples=examples(1))
@given(updates=landings())
@example(updates=SEEDED)
def test_batches_assembled_from_held_state_place_every_event_in_its_era(spark, updates):
    state, everything = None, None
    for frame in _landing(spark, updates):
        everything = frame if everything is None else everything.unionByName(frame)
        events = binlog_held.assembly_events(frame, everything, state).localCheckpoint()
        assert _wrong_epochs(events) == 0
        state = binlog_held.held_state(events, bt.transactions(events, None), state).localCheckpoint()
    seed = binlog_held._seed(state)
    eras = _eras(updates)
    assert seed == binlog_epochs.Seed({0: len(eras) - 1} if len(eras) > 1 else {}, eras[-1][0]["server_id"])


# -- the whole pipeline: the example ---------------------------------------------------
@pytest.fixture(scope="module")
def failover_lake(spark, tmp_path_factory):
    """Three updates: server 1's log (and who was connected to each server); server 2's, which a
    failover made the source (held state carries the epochs on); server 1's file landed again."""
    tmp = tmp_path_factory.mktemp("failover")
    landing, lake = tmp / "landing", tmp / "lake"
    onboarding = write_onboarding(tmp / "onboarding.yml", ("orders",), ("binlog",))
    land(landing, SOURCE, "sessions", "sessions.jsonl", [session(1, 21, "2026-03-02T07:00:00Z", "alice", "app"),
                                                  session(2, 21, "2026-03-02T07:00:00Z", "bob", "app")])
    land(landing, SOURCE, "binlog", f"{FILE}.jsonl", SERVER_1)
    harness.run_project(spark, landing, lake, onboarding, layers=("bronze", "silver"))  # gold reads silver once, last
    land(landing, SOURCE, "binlog", f"server2-{FILE}.jsonl", SERVER_2)
    harness.run_project(spark, landing, lake, onboarding, layers=("bronze", "silver"))
    land(landing, SOURCE, "binlog", f"{FILE}-again.jsonl", SERVER_1)
    harness.run_project(spark, landing, lake, onboarding)
    return LakeStore(spark, lake)


def test_the_replicas_end_with_the_new_servers_changes(spark, failover_lake):
    for replica in (f"silver.{SOURCE}_orders", f"gold.{SOURCE}_orders"):
        rows = failover_lake.read(replica).select("order_id", "status").orderBy("order_id")
        assert [tuple(r) for r in rows.collect()] == [(1, "c"), (2, "new")], replica
    txns = failover_lake.read(f"silver.{SOURCE}_transactions").orderBy("sequence_position")
    assert [(r.server_id, r.txn_id, r.status, r.position.epoch) for r in txns.collect()] == [
        (1, "xid:1", "committed", 0), (1, "xid:2", "committed", 0),
        (2, "xid:1@epoch1", "committed", 1), (2, "xid:2@epoch1", "committed", 1)]


def test_the_audits_last_change_of_the_row_is_the_new_servers(spark, failover_lake):
    audited = failover_lake.read("gold.audit_log").filter(F.col("key_values")["order_id"] == "1")
    last = audited.orderBy(F.col("sequence").desc()).first()
    assert (last.txn_id, last.user, last.operation, last.after["status"]) == ("xid:1@epoch1", "bob", "UPDATE", "c")
    assert audited.count() == 3


def test_the_failover_is_one_anomaly_naming_both_servers_and_a_health_counter(spark, failover_lake):
    anomalies = failover_lake.read(f"silver.{SOURCE}_anomalies").filter(F.col("anomaly") == binlog_epochs.EPOCH_INFERRED)
    got = anomalies.collect()
    assert [(r.schema, r.table, r.applied_as) for r in got] == [(None, None, "NONE")]
    assert got[0].detail.startswith("server 1 → server 2: ")
    assert f"server2-{FILE}.jsonl at {FILE}:4 is its first, so it starts inferred epoch 1" in got[0].detail
    assert failover_lake.read("gold.replication_health").first().inferred_epochs == 1
