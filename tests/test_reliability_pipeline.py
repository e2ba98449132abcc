"""Reliability of the project pipeline (bronze -> silver -> gold) on a tiny generated workload:
killed at commit points then re-run, and every landing file delivered twice in shuffled order.

The workload (bench/workload.py, ~20 transactions on ``app.orders`` (SCD2) and
``app.order_lines`` (SCD1, composite key), binlog form, one source) has multi-table
transactions, deletes, key-changing updates, a rolled-back transaction, transactions split
across binlog files and one transaction left open at the end.

Commit points. One uninterrupted reference run lists every commit point (before and after each
Delta commit, the ``LakeStore`` commit hook) and copies the lake as a kill there would leave
it; each copy is then re-run and every table (``pipeline.event_log`` and wall-clock columns
such as ``_ingested_at`` aside) must equal the reference. A full pipeline re-run costs tens of
seconds here (the whole reliability set must stay within ~4 minutes of CI), so by default a
deterministic subset is re-run, one point per recovery path: the last commit point (after the
event log: a completed update re-run), and just after the
first commit of: the first bronze table (a streaming table), the silver change stream (an
append flow) and the SCD1 replica ``orders`` (its AUTO CDC state table not committed yet).
Materialized views (the silver transactions table, gold) are recomputed whole at an update
unless their definition and inputs are those of their last recorded refresh; the record follows
the view's commit, so a kill between the two recomputes the view at the re-run, and the last
point (a completed update re-run) takes the path where each view that does not read the clock
is kept
(tests/test_skipped_work.py kills an update before a view's commit). One more test crashes
the run in-process (the hook raises, ``finally`` blocks run) between the SCD2 history's commit
and its state table's.
``CDC_LAKEHOUSE_CRASH_POINTS=tables`` re-runs the point after the first commit of *every* table
(~30 re-runs) and ``=all`` every commit point of the run (~70).
"""

from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path

import pytest

from cdc_lakehouse.storage import LakeStore
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench import harness  # noqa: E402
from bench.verify import verify_replicas  # noqa: E402
from bench.workload import BINLOG_SOURCE, WorkloadOptions, generate  # noqa: E402

WORKLOAD_TABLES = ("orders", "order_lines")
# The pipeline without gold's health and landing views: they are materialized views like the
# audit views kept here, and their recovery adds no path (bench/harness.py, GOLD_WITHOUT_HEALTH).
LAYERS = harness.GOLD_WITHOUT_HEALTH
MODE = os.environ.get("CDC_LAKEHOUSE_CRASH_POINTS", "sample")  # sample | tables | all


def tiny_workload(out: Path):
    """~20 transactions, 4 binlog files, transactions split across files (seed chosen for
    its mix; the test below asserts the mix)."""
    return generate(out, WorkloadOptions(row_changes=60, seed=20, forms=("binlog",), tables=WORKLOAD_TABLES,
                                         rollback_rate=0.1, events_per_file=25, split_transactions=True))


def _wanted(point, seen) -> bool:
    """The commit points re-run (see the module docstring)."""
    if MODE == "all":
        return True
    if point.table == harness.EVENT_LOG and point.stage == "after":
        return True  # the update appends it before its reporting views and last: the run's last point
    if not harness.sample_points(point, seen):  # the first point, and just after each table's first commit
        return False
    if MODE == "tables" or point.table == harness.EVENT_LOG:
        return True
    if point.index == 1:
        return False  # nothing written yet: a fresh run, which the reference run already is
    firsts = [p.table for p in seen if p.stage == "after"]
    name = point.table.split(".", 1)[1]
    if point.table.startswith("gold.") or name == f"{BINLOG_SOURCE}_anomalies":
        return False  # materialized views, and gold's AUTO CDC flows: the recovery paths of the points kept
    if name == f"{BINLOG_SOURCE}_transactions":
        return False  # an AUTO CDC target with flow state: the same recovery path as the replicas
    if point.table.startswith("bronze."):  # the first bronze table
        return not any(t.startswith("bronze.") for t in firsts)
    if name.startswith("__apply_changes_storage_") or name == f"{BINLOG_SOURCE}_order_lines":
        return False  # same recovery path as the points kept (see below)
    # silver: the change stream, the SCD1 replica with its state not
    # yet committed; the SCD2 history's equivalent point is the in-process crash test
    return not name.endswith("_history")


@pytest.fixture(scope="module")
def reference(spark, tmp_path_factory):
    """The uninterrupted run, its commit points and the lake copies at the chosen points."""
    tmp = tmp_path_factory.mktemp("reliability")
    summary = tiny_workload(tmp / "workload")
    landing, onboarding = tmp / "workload" / "landing", tmp / "workload" / "onboarding.yml"
    lake = tmp / "reference"
    recorder = harness.KillRecorder(lake, tmp / "kills", _wanted)
    harness.run_project(spark, landing, lake, onboarding, store=LakeStore(spark, lake, commit_hook=recorder), layers=LAYERS)
    return {
        "tmp": tmp, "summary": summary, "landing": landing, "onboarding": onboarding, "lake": lake,
        "points": recorder.points, "kills": recorder.saved, "tables": harness.table_names(spark, lake),
        "content": harness.snapshot_lake(spark, lake),
    }


def test_workload_has_the_awkward_cases(reference):
    s = reference["summary"]
    assert 15 <= s.transactions <= 30
    assert s.rolled_back >= 1 and s.open == 1
    assert s.key_changes >= 1 and s.deletes >= 1 and s.multi_table_txns >= 1
    first_lines = [f.read_text().splitlines()[0] for f in sorted((reference["landing"] / BINLOG_SOURCE / "binlog").glob("*.jsonl"))]
    assert any('"type":"begin"' not in line for line in first_lines[1:]), "no transaction is split across files"


def test_reference_run_replicates_the_source_state(spark, reference):
    result = verify_replicas(spark, LakeStore(spark, reference["lake"]).read, reference["tmp"] / "workload",
                             BINLOG_SOURCE, WORKLOAD_TABLES)
    assert result["all_equal"], harness.dump(result)


def test_kill_at_commit_points_then_rerun_gives_identical_tables(spark, reference):
    points, kills = reference["points"], reference["kills"]
    assert len(points) >= 20 and points[-1].table == harness.EVENT_LOG
    tables_committed = {p.table for p in points}
    assert {f"silver.{BINLOG_SOURCE}_{t}" for t in WORKLOAD_TABLES} <= tables_committed
    chosen = [p for p in points if p.index in kills]
    assert chosen[-1].index == len(points) and (MODE == "sample" or chosen[0].index == 1)
    failures = []
    for point in chosen:
        lake = kills[point.index]
        harness.run_project(spark, reference["landing"], lake, reference["onboarding"], layers=LAYERS)
        diff = harness.diff_lakes(spark, reference["content"], lake)
        if diff:
            failures.append(f"killed at {point.label}:\n{diff}")
        shutil.rmtree(lake, ignore_errors=True)
    print(f"re-ran {len(chosen)} of {len(points)} commit points ({MODE}): " + ", ".join(p.label for p in chosen))
    assert not failures, "\n\n".join(failures)


class Crash(BaseException):
    """The process dies here: no flow's error handling sees it (a flow's Exception fails only
    that flow and what reads it; runtime/runner.py)."""


def test_crash_between_history_and_its_state_commit_then_rerun(spark, reference, tmp_path):
    """In-process failure (the hook raises, finally blocks run, the event log records FAILED):
    SCD2 history committed, its AUTO CDC state not yet."""
    points = reference["points"]
    state = next(p for p in points if p.stage == "before" and p.table.startswith("silver.__apply_changes_storage_")
                 and p.table.endswith("_history"))
    calls = {"n": 0}

    def hook(stage, table):
        calls["n"] += 1
        if calls["n"] == state.index:
            raise Crash(f"simulated crash at {state.label}")

    lake = tmp_path / "lake"
    with pytest.raises(Crash):
        harness.run_project(spark, reference["landing"], lake, reference["onboarding"],
                            store=LakeStore(spark, lake, commit_hook=hook), layers=LAYERS)
    failed = LakeStore(spark, lake).read(harness.EVENT_LOG).filter("status = 'FAILED'").collect()
    assert failed and all("simulated crash" in r["message"] for r in failed)  # the flow and those it ran in
    harness.run_project(spark, reference["landing"], lake, reference["onboarding"], layers=LAYERS)
    diff = harness.diff_lakes(spark, reference["content"], lake)
    assert not diff, str(diff)


def _replica_tables(reference) -> list[str]:
    names = []
    for t in WORKLOAD_TABLES:
        base = f"{BINLOG_SOURCE}_{t}"
        names += [n for n in reference["tables"] if n.split(".", 1)[1] in (base, f"{base}_history")]
    return sorted(names)


def test_every_file_delivered_twice_in_shuffled_order_gives_identical_replicas(spark, reference, tmp_path):
    """Every landing file twice (the copy under another name), in random order, over two runs:
    late files bring older transactions, and a transaction's end may come before its beginning.
    Bronze and silver only: gold replicas are views of silver's change stream."""
    source_dir = reference["landing"] / BINLOG_SOURCE
    files = sorted(p for p in source_dir.rglob("*.jsonl"))
    deliveries = [(f, f.name) for f in files] + [(f, f"again-{f.name}") for f in files]
    random.Random(9).shuffle(deliveries)
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    half = len(deliveries) // 2
    for part in (deliveries[:half], deliveries[half:]):
        for src, name in part:
            dest = landing / BINLOG_SOURCE / src.relative_to(source_dir).parent / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dest)
        harness.run_project(spark, landing, lake, reference["onboarding"], layers=("bronze", "silver"))
    replicas = [t for t in _replica_tables(reference) if t.startswith("silver.")]
    assert len(replicas) == 3  # orders, its history, order_lines
    # The anomalies view is refreshed by partition in the second run: it must see that run's changes.
    tables = [*replicas, f"silver.{BINLOG_SOURCE}_anomalies"]
    diff = harness.diff_lakes(spark, {t: reference["content"][t] for t in tables}, lake, tables=tables)
    assert not diff, str(diff)
