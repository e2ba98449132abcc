"""A full refresh of selected tables, a table deleted from the lake, and a streaming source that
was created again (runtime/table_reset.py, FlowBatch.read_stream), as on Databricks: a refreshed
or deleted table is rebuilt from its sources, and a stream that would read a rebuilt table as if
it were the old one stops with a clear error instead of reading rows twice or skipping them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.cli import build_parser
from cdc_lakehouse.runtime.graph import PipelineDefinitionError
from cdc_lakehouse.runtime.runner import run_pipeline
from cdc_lakehouse.storage import LakeStore, StreamingSourceChanged
from lake_helpers import REPO, write_jsonl

PIPELINE = str(REPO / "tests/pipelines/skipped_work/*.py")  # bronze.readings -> silver.readings -> gold


@pytest.fixture
def landing(tmp_path) -> Path:
    landing = tmp_path / "landing"
    write_jsonl(landing / "readings/1.jsonl", [{"sensor": "a", "value": 1.0}, {"sensor": "b", "value": 10.0}])
    write_jsonl(landing / "extra/1.jsonl", [{"sensor": "c", "value": 7.0}])
    (landing / "alerts").mkdir()
    (landing / "backfill").mkdir()
    (tmp_path / "calls").mkdir()
    return landing


def _run(spark, landing: Path, full_refresh=False, refresh=()):
    configuration = {"test.landing": str(landing), "test.calls": str(landing.parent / "calls"), "test.threshold": "5"}
    return run_pipeline(spark, [PIPELINE], landing.parent / "lake", configuration, full_refresh, refresh=refresh)


def _store(spark, landing: Path) -> LakeStore:
    return LakeStore(spark, landing.parent / "lake")


def _two_batches(spark, landing: Path) -> LakeStore:
    _run(spark, landing)
    write_jsonl(landing / "readings/2.jsonl", [{"sensor": "a", "value": 2.0}])
    _run(spark, landing)
    return _store(spark, landing)


def _readings(spark, *rows):
    return spark.createDataFrame(list(rows), "sensor string, value double")


ALL_READINGS = (("a", 1.0), ("b", 10.0), ("a", 2.0))


def test_a_selection_updates_only_its_tables_and_a_stream_reader_of_a_reset_one_asks_for_a_reset(spark, landing):
    store = _two_batches(spark, landing)
    bronze_id, versions = store.table_id("bronze.readings"), {t: store.version(t) for t in ("silver.readings", "gold.totals")}

    result = _run(spark, landing, full_refresh=["bronze.readings"])

    assert [e.target for e in result.events if e.flow_type != "view"] == ["bronze.readings"]
    assert store.table_id("bronze.readings") != bronze_id
    assertDataFrameEqual(store.read("bronze.readings"), _readings(spark, *ALL_READINGS))
    assert {t: store.version(t) for t in versions} == versions  # not selected: not updated
    with pytest.raises(StreamingSourceChanged, match=(
            r"flow 'silver.readings' reads bronze.readings as a stream, but bronze.readings was deleted and "
            r"created again .*--full-refresh-table silver.readings")):
        _run(spark, landing)

    result = _run(spark, landing, full_refresh=["silver.readings"], refresh=["gold.totals"])

    assert result.event("silver.readings").rows_read == 3
    assertDataFrameEqual(store.read("silver.readings"), _readings(spark, *ALL_READINGS))
    assert store.version("gold.totals") > versions["gold.totals"]
    assert "gold.above_threshold" not in {e.target for e in result.events}


def test_a_deleted_streaming_table_is_rebuilt_from_all_its_input(spark, landing):
    store = _two_batches(spark, landing)
    shutil.rmtree(store.path("silver.readings"))

    result = _run(spark, landing)

    assert "silver.readings is not in the lake though its flows planned batches" in result.event("silver.readings").message
    assertDataFrameEqual(store.read("silver.readings"), _readings(spark, *ALL_READINGS))
    assertDataFrameEqual(store.read("gold.totals"), spark.createDataFrame([("a", 3.0), ("b", 10.0)], "sensor string, total double"))


def test_a_deleted_source_is_rebuilt_from_every_landed_file_and_its_reader_stops(spark, landing):
    store = _two_batches(spark, landing)
    shutil.rmtree(store.path("bronze.readings"))

    with pytest.raises(StreamingSourceChanged, match="bronze.readings was deleted and created again"):
        _run(spark, landing)

    # Every landed file, not only the last batch's (the checkpoint went with the table).
    assertDataFrameEqual(store.read("bronze.readings"), _readings(spark, *ALL_READINGS))


def test_a_selection_that_names_no_table_is_a_clear_error(spark, landing):
    _run(spark, landing)
    with pytest.raises(PipelineDefinitionError, match=r"names silver.nope, which the pipeline does not publish as a table"):
        _run(spark, landing, refresh=["silver.readings", "silver.nope"])
    with pytest.raises(ValueError, match="a full refresh of every table takes no selection"):
        _run(spark, landing, full_refresh=True, refresh=["silver.readings"])


def test_the_cli_takes_the_selection_flags_of_remote_start():
    args = build_parser().parse_args(
        ["run", "--full-refresh-table", "bronze.a", "--full-refresh-table", "silver.b", "--refresh-table", "gold.c"])
    assert (args.full_refresh, args.full_refresh_table, args.refresh_table) == (False, ["bronze.a", "silver.b"], ["gold.c"])
