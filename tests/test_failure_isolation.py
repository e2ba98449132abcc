"""Failure isolation along the dependency graph (issue 57): a failed flow fails the update and
skips what reads it; every flow that does not depend on it runs and commits; the next update
retries it from its checkpoint, losing nothing and applying nothing twice."""

from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.runtime.runner import RunResult, failed_update, run_pipeline
from cdc_lakehouse.storage import LakeStore
from lake_helpers import REPO, write_jsonl

PIPELINE = str(REPO / "tests/pipelines/isolation/*.py")


def _run(spark, landing, lake, fail: bool) -> tuple[RunResult, Exception | None]:
    conf = {"test.landing": str(landing), "test.fail": str(fail).lower()}
    try:
        return run_pipeline(spark, [PIPELINE], lake, conf), None
    except Exception as exc:  # an update with failed flows raises the first one's error
        result = failed_update(exc)
        assert result is not None, exc
        return result, exc


@pytest.fixture(scope="module")
def updates(spark, tmp_path_factory):
    """Update 1 fails silver.checked (a "boom" row); update 2 runs with the cause gone."""
    root = tmp_path_factory.mktemp("isolation")
    landing, lake = root / "landing", root / "lake"
    write_jsonl(landing / "good/1.jsonl", [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}])
    write_jsonl(landing / "bad/1.jsonl", [{"id": 10, "v": "x"}, {"id": 11, "v": "boom"}])
    first, error = _run(spark, landing, lake, fail=True)
    store = LakeStore(spark, lake)
    after_first = {name: store.read(name).localCheckpoint()
                   for name in ("bronze.good", "bronze.bad", "silver.everything", "gold.good_count", "gold.failures")}
    write_jsonl(landing / "good/2.jsonl", [{"id": 3, "v": "c"}])
    second, second_error = _run(spark, landing, lake, fail=False)
    assert second_error is None, second_error
    return first, error, after_first, second, store


def _status(result: RunResult) -> dict[str, str]:
    return {e.flow: e.status for e in result.events if e.flow_type != "view"}


def test_the_failed_flow_fails_the_update_and_skips_its_readers(updates):
    first, error, _, _, _ = updates
    assert error is not None and "a boom row" in str(error)
    assert [e.flow for e in first.failed] == ["silver.checked"]
    status = _status(first)
    assert status["everything_checked"] == status["gold.checked_count"] == "SKIPPED"
    skipped = {e.flow: e.message for e in first.skipped_by_failure}
    assert set(skipped) == {"everything_checked", "gold.checked_count"}
    assert all("flow 'silver.checked' failed" in m for m in skipped.values())


def test_flows_that_do_not_depend_on_it_run_and_commit(spark, updates):
    first, _, after_first, _, _ = updates
    status = _status(first)
    assert {status[f] for f in ("bronze.good", "bronze.bad", "everything_good", "gold.good_count")} == {"COMPLETED"}
    assertDataFrameEqual(after_first["silver.everything"].select("id", "branch"),
                         spark.createDataFrame([(1, "good"), (2, "good")], "id long, branch string"))
    assert after_first["gold.good_count"].first()["rows"] == 2
    assert after_first["bronze.bad"].count() == 2  # the failed flow's input is kept, not dropped


def test_the_event_log_and_a_reporter_see_the_failure_in_the_same_update(spark, updates):
    first, _, after_first, _, store = updates
    log = store.read("pipeline.event_log").filter(f"update_id = '{first.update_id}'")
    failed = {(r.flow, r.status) for r in log.filter("status != 'COMPLETED'").collect()}
    assert {("silver.checked", "FAILED"), ("everything_checked", "SKIPPED"), ("gold.checked_count", "SKIPPED")} <= failed
    reported = after_first["gold.failures"].filter(f"update_id = '{first.update_id}'")
    assertDataFrameEqual(reported.select("flow", "target", "rows"),
                         spark.createDataFrame([("silver.checked", "silver.checked", 2)], "flow string, target string, rows long"))


def test_the_next_update_retries_from_the_checkpoint_once(spark, updates):
    _, _, _, second, store = updates
    assert second.event("silver.checked").status == "COMPLETED"
    assert second.event("silver.checked").batch_id == 0  # the planned batch, run again
    # Every landed row once: applied = input, nothing lost, nothing twice.
    assertDataFrameEqual(store.read("silver.everything").select("id", "branch"), spark.createDataFrame(
        [(1, "good"), (2, "good"), (3, "good"), (10, "checked"), (11, "checked")], "id long, branch string"))
    assert store.read("gold.checked_count").first()["rows"] == 2
