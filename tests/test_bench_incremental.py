"""``python -m bench incremental`` (bench/incremental.py), at a tiny size in the suite's Spark
session: the result has every figure, the landed changes continue the history's binlog, and the
small updates' changes are in the silver and gold replicas afterwards."""

from __future__ import annotations

import json

import pytest

from bench import cli, incremental
from bench.workload import BINLOG_SOURCE, SCHEMA
from cdc_lakehouse.storage import LakeStore

# One size: a size's figures are the same at any size, and how they scale is `ratio`'s (tested
# on its own below); each size loads a history and runs three updates.
HISTORIES = (100,)
CHANGES = 5
TABLES_UNDER_TEST = ("orders",)  # one table: every figure is per update or per flow, and fewer flows run


@pytest.fixture(scope="module")
def bench_run(spark, tmp_path_factory):
    work = tmp_path_factory.mktemp("incremental")
    result = incremental.run(spark, work, HISTORIES, CHANGES, rounds=1, tables=TABLES_UNDER_TEST, keep_lakes=True,
                                log=lambda _: None)
    return work, result


def test_the_result_has_every_figure(bench_run):
    _, result = bench_run
    assert result["ok"], result.get("error")
    assert set(result["by_history"]) == {str(h) for h in HISTORIES}
    for size in result["by_history"].values():
        for key in ("history_load_s", "noop_s", "small_s", "noop_cpu_s", "small_cpu_s", "noop_jobs", "small_jobs",
                    "floor_s", "small_over_floor"):
            assert size[key] is not None and size[key] >= 0, key
        assert size["small_jobs"] > 0 and size["small_rows_written"] > 0
        assert size["small_commits"] > 0 and size["small_py4j_calls"] > 0 and size["small_planning_s"] > 0
        # Seconds inside py4j by the length of a call: round trips, JVM work, jobs.
        assert set(size["small_py4j_s"]) == {"round_trip", "jvm_work", "jobs"}
        assert all(s > 0 for s in size["small_py4j_s"].values()), size["small_py4j_s"]
        # Nothing landed before the no-op update: it is decided before any flow plans, and writes nothing.
        assert (size["noop_commits"], size["noop_jobs"]) == (0, 0)
        flows = size["small_profile"]["flows"]
        assert {"jobs", "job_s", "planning_s", "py4j", "commits"} <= set(flows[0])
        replica = next(f for f in flows if f["flow"] == "gold_bench_orders")
        assert replica["jobs"] > 0 and replica["commits"] >= 1, replica
        # The audit log only gained rows: its views recompute only what those rows touch.
        audit_views = {f["flow"]: f["message"] for f in flows if f["flow"].startswith("gold.audit_")}
        assert len(audit_views) == 2 and all(m.startswith("recomputed the partitions") for m in audit_views.values()), \
            audit_views
        # No table that no change reached gets a commit: gold holds no change back, so the
        # gold flows' (empty) held state is left as it was, and no line is quarantined.
        written = set(size["small_profile"]["storage"])
        assert not {t for t in written if t.startswith("gold.__flow_state_")}, written
        assert f"bronze.{BINLOG_SOURCE}_binlog_events_quarantine" not in written  # no line quarantined
        assert size["small_rounds"][0]["landed"]["row_changes"] >= CHANGES
        assert size["small_profile"]["flows"], "the small update's flows"
        assert size["floor_rounds"][0]["rows_merged"] > 0, "the floor merges the landed changes"
    for key in incremental.RATIOS:
        assert key in result and result[key] is None, key  # a ratio needs two sizes
    json.dumps(result)  # the command writes it as JSON


def test_the_landed_files_continue_the_history_log(bench_run):
    work, _ = bench_run
    for history in HISTORIES:
        files = sorted(p.name for p in (work / f"incremental-lake-{history}" / "landing" / BINLOG_SOURCE / "binlog").iterdir())
        history_files = sorted(p.name for p in (work / f"incremental-history-{history}-42-50000" / "landing" / BINLOG_SOURCE
                                                / "binlog").iterdir())
        assert files[:len(history_files)] == history_files and len(files) > len(history_files)


def test_the_small_updates_changes_are_in_silver_and_gold(spark, bench_run):
    work, result = bench_run
    for history in HISTORIES:
        root = work / f"incremental-lake-{history}"
        before = root.parent / f"incremental-history-{history}-42-50000" / "expected" / BINLOG_SOURCE
        after = root / "state" / "expected" / BINLOG_SOURCE
        changed = [t for t in TABLES_UNDER_TEST if (before / f"{SCHEMA}.{t}.jsonl").read_text() != (after / f"{SCHEMA}.{t}.jsonl").read_text()]
        assert changed, "the landed transactions changed no row of the source state"
        verified = result["by_history"][str(history)]["verify"]
        assert verified["all_equal"], verified
        store = LakeStore(spark, root / "lake")
        landed = sum(1 for p in (root / "landing" / BINLOG_SOURCE / "binlog").iterdir() for _ in p.open())
        assert store.read(f"bronze.{BINLOG_SOURCE}_binlog_events").count() == landed


def test_a_ratio_is_the_largest_history_over_the_smallest():
    by_history = {"600": {"small_s": 3.0}, "20000": {"small_s": 6.0}, "2000": {"small_s": 4.0}}
    assert incremental.ratio(by_history, "small_s") == 2.0
    assert incremental.ratio({"600": {"small_s": 3.0}}, "small_s") is None
    assert incremental.ratio({"600": {"small_s": 0.0}, "2000": {"small_s": 4.0}}, "small_s") is None


@pytest.mark.parametrize("option, value", [("--history", "0"), ("--history", ""), ("--changes", "0"), ("--rounds", "x"),
                                           ("--tables", "nope")])
def test_incremental_rejects_bad_values(capsys, option, value):
    with pytest.raises(SystemExit) as exc:
        cli.parser().parse_args(["incremental", option, value])
    assert exc.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert option in line and repr(value) in line


def test_incremental_accepts_its_options(tmp_path):
    args = cli.parser().parse_args(["incremental", "--history", "2e4,2e5", "--changes", "100", "--rounds", "3",
                                    "--json", str(tmp_path / "out.json")])
    assert (args.history, args.changes, args.rounds, args.json) == ((20_000, 200_000), 100, 3, tmp_path / "out.json")
