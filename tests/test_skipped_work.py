"""The work an update skips, as Databricks does: a streaming flow whose sources have nothing new
is not planned at all, and a materialized view whose definition and inputs are unchanged is not
recomputed (runtime/flow_batch.py ``quiet``, runtime/unchanged_views.py). Skipping must never
keep a stale result: new input, a changed configuration or definition, a clock, or a run stopped
before the view was written all recompute. An update in which no flow has work writes nothing
at all (runtime/quiet_update.py)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.runtime.runner import run_pipeline
from cdc_lakehouse.storage import LakeStore
from lake_helpers import REPO, write_jsonl

PIPELINE = str(REPO / "tests/pipelines/skipped_work/*.py")
UNCHANGED = "inputs and definition unchanged since the last refresh"
STREAMING = ["bronze.alerts", "bronze.extra_readings", "bronze.readings", "silver.readings"]
PLANNED = sorted([*STREAMING, "gold.totals"])  # every flow that logs the building of its query


@dataclass
class Paths:
    landing: Path
    lake: Path
    calls: Path  # a folder

    def planned(self) -> list[str]:
        """The streaming flows planned since the last call."""
        log = self.calls / "calls.txt"
        flows = log.read_text().split() if log.exists() else []
        log.unlink(missing_ok=True)
        return flows


@pytest.fixture
def paths(tmp_path) -> Paths:
    landing = tmp_path / "landing"
    write_jsonl(landing / "readings/1.jsonl", [{"sensor": "a", "value": 1.0}, {"sensor": "a", "value": 2.0},
                                                {"sensor": "b", "value": 10.0}])
    write_jsonl(landing / "extra/1.jsonl", [{"sensor": "c", "value": 7.0}])
    (landing / "alerts").mkdir()
    (landing / "backfill").mkdir()
    (tmp_path / "calls").mkdir()
    return Paths(landing, tmp_path / "lake", tmp_path / "calls")


def _run(spark, paths: Paths, store=None, sources=(PIPELINE,), refresh=(), **conf):
    configuration = {"test.landing": str(paths.landing), "test.calls": str(paths.calls), "test.threshold": "5",
                     **conf}
    return run_pipeline(spark, list(sources), paths.lake, configuration, store=store, refresh=refresh)


def _table(spark, paths: Paths, name: str):
    return LakeStore(spark, paths.lake).read(name)


def _version(spark, paths: Paths, name: str) -> int:
    return LakeStore(spark, paths.lake).version(name)


def _totals(spark, rows):
    return spark.createDataFrame(rows, "sensor string, total double")


def _versions(spark, paths: Paths) -> dict[str, int]:
    store = LakeStore(spark, paths.lake)
    return {t.name: store.version(t.name) for t in store.list_tables()}


def test_a_quiet_update_plans_no_streaming_flow_and_keeps_unchanged_views(spark, paths):
    _run(spark, paths)
    assert sorted(paths.planned()) == PLANNED
    versions = _versions(spark, paths)
    assert "pipeline.event_log" in versions

    quiet = _run(spark, paths)

    # bronze.alerts too, though it never had input; and gold.totals, whose inputs are at the
    # versions its last refresh read: its query is not even built.
    assert paths.planned() == []
    assert {f: (quiet.event(f).status, quiet.event(f).message) for f in STREAMING} == {
        f: ("SKIPPED", "no new input") for f in STREAMING}
    for view in ("gold.totals", "gold.above_threshold", "gold.doubled_values"):
        assert (quiet.event(view).status, quiet.event(view).message) == ("SKIPPED", UNCHANGED)
    # No flow had work, so the update wrote nothing: no table, no event-log row, not even the
    # view that reads the clock (runtime/quiet_update.py).
    assert (quiet.event("gold.sensors_seen").status, quiet.event("gold.sensors_seen").message) == ("SKIPPED", UNCHANGED)
    assert _versions(spark, paths) == versions
    assertDataFrameEqual(_table(spark, paths, "gold.totals"), _totals(spark, [("a", 3.0), ("b", 10.0)]))


def test_an_update_with_work_recomputes_the_view_that_reads_the_clock(spark, paths):
    _run(spark, paths)
    seen = _version(spark, paths, "gold.sensors_seen")
    write_jsonl(paths.landing / "alerts/1.jsonl", [{"sensor": "a", "value": 99.0}])  # read by no view

    busy = _run(spark, paths)

    assert busy.event("bronze.alerts").status == "COMPLETED"
    assert busy.event("gold.totals").status == "SKIPPED"
    assert busy.event("gold.sensors_seen").status == "COMPLETED"  # as Databricks: at every update with work
    assert _version(spark, paths, "gold.sensors_seen") == seen + 1


def test_an_update_after_one_of_selected_tables_refreshes_the_views_it_left(spark, paths):
    """A selection leaves the other views as they were, with the event log moved on: the next
    update is not quiet, and brings them up to date; the one after it is quiet again."""
    _run(spark, paths)
    _run(spark, paths, refresh=["bronze.alerts"])

    after = _run(spark, paths)

    assert after.event("gold.sensors_seen").status == "COMPLETED"
    assert _run(spark, paths).event("gold.sensors_seen").status == "SKIPPED"


def test_a_deleted_table_whose_flow_found_nothing_yet_is_made_again(spark, paths):
    _run(spark, paths)
    LakeStore(spark, paths.lake).drop("bronze.backfill")  # its once flow's source is still empty

    _run(spark, paths)

    assert _table(spark, paths, "bronze.backfill").count() == 0


def test_new_input_is_read_and_recomputes_the_views(spark, paths):
    _run(spark, paths)
    paths.planned()
    write_jsonl(paths.landing / "readings/2.jsonl", [{"sensor": "b", "value": 6.0}])

    later = _run(spark, paths)

    assert sorted(paths.planned()) == ["bronze.readings", "gold.totals", "silver.readings"]
    assert later.event("gold.totals").status == "COMPLETED"
    assertDataFrameEqual(_table(spark, paths, "gold.totals"), _totals(spark, [("a", 3.0), ("b", 16.0)]))
    assertDataFrameEqual(_table(spark, paths, "gold.above_threshold"),
                         spark.createDataFrame([("b", 10.0), ("b", 6.0)], "sensor string, value double"))


def test_a_view_that_stays_empty_gets_no_commit_and_then_its_first_rows(spark, paths):
    """Work follows what landed: a view recomputed as no rows again leaves its table alone (its
    batch is recorded in the checkpoint instead), and takes the rows that make it non-empty."""
    _run(spark, paths, **{"test.threshold": "50"})
    empty = _version(spark, paths, "gold.above_threshold")
    write_jsonl(paths.landing / "readings/2.jsonl", [{"sensor": "b", "value": 6.0}])

    later = _run(spark, paths, **{"test.threshold": "50"})

    assert later.event("gold.above_threshold").status == "COMPLETED"
    assert _version(spark, paths, "gold.above_threshold") == empty
    assert later.event("gold.totals").status == "COMPLETED"
    write_jsonl(paths.landing / "readings/3.jsonl", [{"sensor": "c", "value": 60.0}])
    _run(spark, paths, **{"test.threshold": "50"})
    assertDataFrameEqual(_table(spark, paths, "gold.above_threshold"),
                         spark.createDataFrame([("c", 60.0)], "sensor string, value double"))


def test_a_changed_configuration_recomputes_the_views(spark, paths):
    _run(spark, paths)

    lower = _run(spark, paths, **{"test.threshold": "1.5"})

    assert lower.event("gold.above_threshold").status == "COMPLETED"
    assertDataFrameEqual(_table(spark, paths, "gold.above_threshold"),
                         spark.createDataFrame([("a", 2.0), ("b", 10.0)], "sensor string, value double"))


def test_a_flow_defined_anew_reads_its_new_source_though_the_old_one_is_quiet(spark, paths):
    _run(spark, paths)
    assertDataFrameEqual(_table(spark, paths, "silver.readings").select("sensor").distinct(),
                         spark.createDataFrame([("a",), ("b",)], "sensor string"))

    _run(spark, paths, **{"test.with_extra": "yes"})

    assertDataFrameEqual(_table(spark, paths, "gold.totals"),
                         _totals(spark, [("a", 3.0), ("b", 10.0), ("c", 7.0)]))


def test_a_change_to_any_pipeline_file_plans_the_flows_again(spark, paths, tmp_path):
    """A flow may read a view declared in another file: its definition is every pipeline file."""
    pipeline = Path(shutil.copytree(REPO / "tests/pipelines/skipped_work", tmp_path / "pipeline"))
    sources = [str(pipeline / "*.py")]
    _run(spark, paths, sources=sources)
    paths.planned()
    views = pipeline / "gold.py"  # declares no streaming flow
    views.write_text(views.read_text() + "\n# changed\n")

    _run(spark, paths, sources=sources)

    assert sorted(paths.planned()) == PLANNED
    _run(spark, paths, sources=sources)
    assert paths.planned() == []  # found nothing new under the new definition: not planned again


def test_a_flow_defined_anew_whose_new_source_was_empty_reads_it_once_it_lands(spark, paths):
    extra = paths.landing / "extra/1.jsonl"
    held_back = extra.rename(paths.landing / "extra.jsonl.later")
    _run(spark, paths)
    _run(spark, paths, **{"test.with_extra": "yes"})  # nothing new in any source of silver.readings
    paths.planned()

    _run(spark, paths, **{"test.with_extra": "yes"})
    assert paths.planned() == []
    held_back.rename(extra)
    _run(spark, paths, **{"test.with_extra": "yes"})

    assert "silver.readings" in paths.planned()
    assertDataFrameEqual(_table(spark, paths, "gold.totals"),
                         _totals(spark, [("a", 3.0), ("b", 10.0), ("c", 7.0)]))


def test_a_once_flow_whose_source_was_empty_runs_when_its_input_lands(spark, paths):
    _run(spark, paths)
    assert _table(spark, paths, "bronze.backfill").count() == 0
    write_jsonl(paths.landing / "backfill/1.jsonl", [{"sensor": "z", "value": 1.0}])
    _run(spark, paths)
    write_jsonl(paths.landing / "backfill/2.jsonl", [{"sensor": "y", "value": 2.0}])
    _run(spark, paths)

    assertDataFrameEqual(_table(spark, paths, "bronze.backfill"),
                         spark.createDataFrame([("z", 1.0)], "sensor string, value double"))


class Crash(BaseException):
    """The process dies here: no flow's error handling sees it (a flow's Exception fails only
    that flow and what reads it; runtime/runner.py)."""


def _crash_before_commit_to(table: str):
    def hook(stage, name):
        if (stage, name) == ("before", table):
            raise Crash(f"simulated crash before the commit to {table}")
    return hook


def test_a_view_stopped_before_it_was_written_is_recomputed_by_the_next_update(spark, paths):
    _run(spark, paths)
    write_jsonl(paths.landing / "readings/2.jsonl", [{"sensor": "b", "value": 6.0}])
    with pytest.raises(Crash):
        _run(spark, paths, store=LakeStore(spark, paths.lake, commit_hook=_crash_before_commit_to("gold.totals")))

    again = _run(spark, paths)

    assert again.event("gold.totals").status == "COMPLETED"
    assertDataFrameEqual(_table(spark, paths, "gold.totals"), _totals(spark, [("a", 3.0), ("b", 16.0)]))
