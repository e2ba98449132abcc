"""End to end on live servers, through the project pipeline to gold (issue #7).

PostgreSQL and MariaDB (Debian packages, loopback, started once per test session by
``live.servers``; a server that cannot start fails the tests with its log) run a seeded random
workload of interleaved multi-table transactions by several users and roles: inserts, updates
(also of key columns, also to NULL), deletes, several operations on one row, savepoints rolled
back to, rolled-back transactions, on six tables (one named ``odd "t"; --``). The capture tools
run while transactions are open. Three sources land: ``pg_<schema>`` (PostgreSQL shadow
tables), ``maria_<schema>_shadow`` (MariaDB shadow tables), ``maria_<schema>`` (MariaDB binlog).

The landing reaches the pipeline in two deliveries, and the project pipeline (bronze, silver,
gold; onboarding written for the three sources) runs after each:
1. what had landed mid-way through the MariaDB workload (PostgreSQL's minus its last batch);
2. everything else: the second update reads only the new files.

Checked:
- after the second update, every gold replica equals ``SELECT *`` of its source table;
- after the first, gold of each source is a coherent source state: exactly the tables after
  the transactions gold shows (CONTRACT §6), a commit-order prefix for the binlog;
- ``gold.audit_log`` has, per committed transaction, exactly its net changes (operation per
  changed key, images before and after) and the user and role that ran it; rolled-back
  transactions never appear. A workload transaction is found in the audit through the
  ``txlog`` row it inserts (its number is the key);
- also: each update's bronze holds exactly the lines delivered before it, and the silver SCD1
  replicas equal ``SELECT *`` too.

Cost: one server start per session, ~10 s of workload and capture, two pipeline updates of 18
flows (3 sources x 6 tables), a few minutes each on two cores. The pipeline leaves out gold's
health and landing views, which nothing here checks (``GOLD_WITHOUT_HEALTH``).

Values: gold types replicas from the JSON of the change rows (integers BIGINT, numeric(12,2)
DOUBLE, timestamps STRING), the audit images are text. Both are compared as the source
column's Python type (``live.pipeline.canonical_row``): a double must be the same decimal
exactly, never rounded to cents.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
from live import fixtures
from live import pipeline as lp
from live.workload import TABLES

from cdc_lakehouse.runtime.runner import RunResult
from cdc_lakehouse.storage import LakeStore
from silver_support import GOLD_WITHOUT_HEALTH, run_project

# Seed 5: among others, a PostgreSQL row whose key changes twice (14 -> 15 -> 21) before the first
# delivery and that a partial update changes after it: the shadow rebuild across updates.
SEED = 5
N_TXNS = 40
SOURCES = ["pg_{schema}", "maria_{schema}_shadow", "maria_{schema}"]
QUARANTINE = "_quarantine"


@dataclass
class Updates:
    staged: lp.StagedRun
    landing: Path
    lake: Path
    deliveries: list[list[Path]]  # landing files (relative) delivered before each update
    results: list[RunResult]
    gold: list[dict[str, lp.GoldSource]]  # per update: what gold shows of each source
    silver: dict[str, dict[str, list[dict] | None]]  # after the last update: source -> table -> rows
    seconds: dict[str, float]

    def source(self, pattern: str):
        schema = next(iter(self.staged.run.sources.values())).schema
        return self.staged.run.sources[pattern.format(schema=schema)]


@pytest.fixture(scope="module")
def updates(spark, tmp_path_factory) -> Updates:
    root = tmp_path_factory.mktemp("live_pipeline")
    live, landing, lake = root / "live", root / "landing", root / "lake"
    live.mkdir()
    landing.mkdir()
    started = time.monotonic()
    staged = lp.staged_live_run(fixtures.postgres(), fixtures.mariadb(), live, landing, seed=SEED,
                                n_txns=N_TXNS, schema=fixtures.unique_schema("gold"))
    seconds = {"servers, workload and capture": time.monotonic() - started}
    onboarding = lp.write_onboarding(root / "onboarding.yml", staged.run.sources)
    store = LakeStore(spark, lake)
    deliveries, results, gold = [staged.first_delivery], [], []
    for n in (1, 2):
        if n == 2:
            deliveries.append(lp.copy_landing(live, landing))
        started = time.monotonic()
        results.append(run_project(spark, landing, lake, onboarding, GOLD_WITHOUT_HEALTH))
        seconds[f"pipeline update {n}"] = time.monotonic() - started
        gold.append(lp.read_gold(store, staged.run.sources))
    silver = {name: {f"{src.schema}.{t}": _rows(store, f"silver.{lp.gold_table(name, t)}") for t in TABLES}
              for name, src in staged.run.sources.items()}
    print("live pipeline timings (s):", {k: round(v, 1) for k, v in seconds.items()})
    return Updates(staged, landing, lake, deliveries, results, gold, silver, seconds)


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


def _differences(table: str, got, expected) -> str | None:
    """None when equal; else a short account of the rows missing from and extra in ``got``."""
    if got is None:
        return f"{table}: no such table in the lake (expected {len(expected)} rows)"
    g, e = lp.canonical_rows(table, got), lp.canonical_rows(table, expected)
    if g == e:
        return None
    missing = [r for r in e if r not in g][:3]
    extra = [r for r in g if r not in e][:3]
    return f"{table}: {len(g)} rows, expected {len(e)}; missing {missing}; unexpected {extra}"


def _rows(store, table: str) -> list[dict] | None:
    return [r.asDict() for r in lp.timestamps_as_text(store.read(table)).collect()] if store.exists(table) else None


def _by_txn(audit: list[dict]) -> dict[str, list[dict]]:
    out = defaultdict(list)
    for r in audit:
        out[r["txn_id"]].append(r)
    return out


def _lines(landing: Path, files: list[Path]) -> int:
    return sum(sum(1 for line in (landing / f).read_text(encoding="utf-8").splitlines() if line.strip())
               for f in files if f.suffix == ".jsonl")


# ------------------------------------------------------------------------------------------
# the runs themselves
# ------------------------------------------------------------------------------------------


def test_workload_and_deliveries_are_what_the_checks_need(updates):
    """Several users and roles, rollbacks, key changes; the first update saw part of the work."""
    for dialect, commits in updates.staged.commits.items():
        assert len(commits) >= 25, dialect
        assert len({(c.user, c.role) for c in commits}) >= 4, f"{dialect}: several users and roles"
        assert any(not c.role for c in commits), f"{dialect}: a user working without a role"
        result = next(s.workload for s in updates.staged.run.sources.values() if s.dialect == dialect)
        assert result.rolled_back, f"{dialect}: rolled-back transactions"
    shadow = updates.landing / updates.source(SOURCES[0]).source / "shadow"
    changes = [json.loads(line) for f in shadow.glob("*.*/*.jsonl") for line in f.read_text().splitlines()]
    assert any(c["old_key"] and c["old_key"] != c["key"] for c in changes), "key-changing updates"
    assert 0 < updates.staged.staged_after["mariadb"] < len(updates.staged.commits["mariadb"])
    assert updates.deliveries[0] and updates.deliveries[1], "two non-empty deliveries"


def test_second_update_reads_only_the_new_landing_files(updates):
    """Bronze writes, per update, exactly the lines of the files delivered before it (none of
    the first delivery again), and quarantines nothing."""
    for n, (result, files) in enumerate(zip(updates.results, updates.deliveries), start=1):
        bronze = [e for e in result.events if e.target.startswith("bronze.")]
        assert not [e for e in result.events if e.status == "FAILED"]
        quarantined = {e.target: e.rows_written for e in bronze if e.target.endswith(QUARANTINE) and e.rows_written}
        assert not quarantined, f"update {n} quarantined landing lines: {quarantined}"
        written = sum(e.rows_written for e in bronze if not e.target.endswith(QUARANTINE))
        assert written == _lines(updates.landing, files), f"update {n}: bronze rows vs delivered lines"


# ------------------------------------------------------------------------------------------
# replicas
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", SOURCES)
def test_every_gold_replica_equals_select_star(updates, pattern):
    src = updates.source(pattern)
    gold = updates.gold[-1][src.source]
    wrong = [d for table, rows in updates.staged.run.expected[src.source].items()
             if (d := _differences(table, gold.replicas[table], rows))]
    assert not wrong, f"{src.source}: gold differs from SELECT *:\n" + "\n".join(wrong)


@pytest.mark.parametrize("pattern", SOURCES)
def test_gold_watermark_covers_every_committed_transaction(updates, pattern):
    src = updates.source(pattern)
    mark = updates.gold[-1][src.source].watermark
    assert mark is not None, f"{src.source}: no gold.replication_watermark row"
    assert_transaction_count(src, mark["transactions"], len(updates.staged.commits[src.dialect]))


def assert_transaction_count(src, counted: int, workload: int) -> None:
    """The watermark counts the source's applied transactions. A binlog is the whole server's:
    it also holds what other tests of the session ran on the same MariaDB (other schemas)."""
    if src.kind == "binlog":
        assert counted >= workload
    else:
        assert counted == workload


@pytest.mark.parametrize("pattern", SOURCES)
def test_gold_after_the_first_update_is_a_coherent_source_state(updates, pattern):
    """CONTRACT §6: the replicas show every change of the transactions gold has applied, in
    every table, and nothing else; the binlog applies them in commit order."""
    src = updates.source(pattern)
    gold = updates.gold[0][src.source]
    commits = updates.staged.commits[src.dialect]
    applied = set(lp.marker_txns(gold.audit))
    assert applied, f"{src.source}: the first update applied nothing"
    assert applied <= {c.no for c in commits}, "only committed transactions"
    if src.dialect == "mariadb":
        assert len(applied) < len(commits), "the first update saw only part of the workload"
    if src.kind == "binlog":
        assert applied == {c.no for c in commits[:len(applied)]}, "a prefix of the commit order"
    assert_transaction_count(src, gold.watermark["transactions"], len(applied))
    state = lp.state_after(commits, applied)
    wrong = [d for table, rows in gold.replicas.items()
             if (d := _differences(table, rows, state[table.split(".", 1)[1]].values()))]
    assert not wrong, f"{src.source}: gold is not the source after transactions {sorted(applied)}:\n" + "\n".join(wrong)


@pytest.mark.parametrize("pattern", SOURCES)
def test_gold_replica_column_types(updates, pattern):
    """The types gold gives the source's columns (typed from JSON), as documented above."""
    allowed = {"int": {"bigint", "int"}, "text": {"string"}, "dec": {"double", "decimal(12,2)"},
               "ts": {"string", "timestamp", "timestamp_ntz"}}
    src = updates.source(pattern)
    types = updates.gold[-1][src.source].types
    wrong = {}
    for table, (cols, _) in TABLES.items():
        got = types[f"{src.schema}.{table}"]
        bad = {c: got.get(c) for c, kind in cols if got.get(c) not in allowed[kind]}
        if bad or set(got) != {c for c, _ in cols}:
            wrong[table] = (got, bad)
    assert not wrong, wrong


@pytest.mark.parametrize("pattern", SOURCES)
def test_silver_replicas_equal_select_star(updates, pattern):
    """Not gold, but the same question of the SCD1 replicas gold's watermark waits for."""
    src = updates.source(pattern)
    wrong = [d for table, rows in updates.staged.run.expected[src.source].items()
             if (d := _differences(table, updates.silver[src.source][table], rows))]
    assert not wrong, f"{src.source}: silver differs from SELECT *:\n" + "\n".join(wrong)


# ------------------------------------------------------------------------------------------
# audit
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", SOURCES)
def test_audit_has_exactly_the_committed_transactions(updates, pattern):
    src = updates.source(pattern)
    audit = updates.gold[-1][src.source].audit
    markers = lp.marker_txns(audit)
    assert set(markers) == {c.no for c in updates.staged.commits[src.dialect]}
    assert not set(markers) & set(src.workload.rolled_back), "rolled-back work never appears"
    assert set(_by_txn(audit)) == set(markers.values()), "no change outside a workload transaction"


@pytest.mark.parametrize("pattern", SOURCES)
def test_audit_users_are_who_ran_each_transaction(updates, pattern):
    src = updates.source(pattern)
    audit = updates.gold[-1][src.source].audit
    by_txn, markers = _by_txn(audit), lp.marker_txns(audit)
    wrong = {c.no: (c.user, sorted({r["user"] for r in by_txn[markers[c.no]]}))
             for c in updates.staged.commits[src.dialect]
             if {r["user"] for r in by_txn[markers[c.no]]} != {c.user}}
    assert not wrong, f"{src.source}: txn_no -> (workload user, audit users) {wrong}"


@pytest.mark.parametrize("pattern", SOURCES)
def test_audit_roles_are_the_roles_each_transaction_ran_with(updates, pattern):
    """The role the transaction ran with; a user working without a role (dave) has none: the
    capture lands ``db_role``/``role`` null (CONTRACT §2.2-§2.3) and the audit must say NULL.
    ``unknown`` is what the contract reserves for a binlog transaction without any session."""
    src = updates.source(pattern)
    audit = updates.gold[-1][src.source].audit
    by_txn, markers = _by_txn(audit), lp.marker_txns(audit)
    wrong = {}
    for c in updates.staged.commits[src.dialect]:
        roles = {r["role"] for r in by_txn[markers[c.no]]}
        if roles != {c.role}:
            wrong[c.no] = (c.user, c.role, sorted(roles, key=repr))
    assert not wrong, f"{src.source}: txn_no -> (user, workload role, audit roles) {wrong}"


@pytest.mark.parametrize("pattern", SOURCES)
def test_audit_has_each_transactions_net_change_per_key(updates, pattern):
    """Per transaction and changed row: the operation (CONTRACT §3: a key change is a DELETE of
    the old key and an INSERT of the new one; a row inserted and deleted again is no change),
    and the whole row before and after it."""
    src = updates.source(pattern)
    audit = updates.gold[-1][src.source].audit
    by_txn, markers = _by_txn(audit), lp.marker_txns(audit)
    wrong_ops, wrong_images = {}, []
    for c in updates.staged.commits[src.dialect]:
        rows = by_txn[markers[c.no]]
        got = {(r["table"], lp.key_of(r["table"], r["key_values"])): r["operation"] for r in rows}
        expected = lp.net_changes(c)
        if got != expected:
            wrong_ops[c.no] = {k: (expected.get(k), got.get(k)) for k in expected.keys() | got.keys()
                               if expected.get(k) != got.get(k)}
        for r in rows:
            table, key = r["table"], lp.key_of(r["table"], r["key_values"])
            for side, source_row in (("before", c.before.get((table, key))), ("after", c.after.get((table, key)))):
                want = None if source_row is None else lp.canonical_row(table, source_row)
                have = None if r[side] is None else lp.canonical_row(table, r[side])
                if want != have:
                    wrong_images.append((c.no, table, key, side, want, have))
    assert not wrong_ops and not wrong_images, (
        f"{src.source}: {len(wrong_ops)} transactions with other operations than their net changes, "
        f"txn_no -> {{(table, key): (expected op, audit op)}}: {wrong_ops}\n"
        f"{len(wrong_images)} audit images differ from the source's, "
        f"(txn_no, table, key, side, source row, audit image): {wrong_images[:4]}")
