"""The local Lakeflow runtime on real pipeline files, real Spark and real Delta tables."""

from __future__ import annotations

import json
import os

import pytest
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.runtime.expectations import ExpectationViolation
from cdc_lakehouse.runtime.graph import PipelineDefinitionError
from cdc_lakehouse.runtime.runner import run_pipeline
from cdc_lakehouse.storage import LakeStore
from lake_helpers import REPO, write_jsonl

BASIC = str(REPO / "tests/pipelines/basic/*.py")
LEGACY = str(REPO / "tests/pipelines/legacy_dlt/*.py")  # the basic pipeline spelt `import dlt`


def _orders(rows):
    return [dict(zip(["order_id", "customer", "amount", "region"], r)) for r in rows]


def _run(spark, landing, lake, pipeline=BASIC, **kw):
    return run_pipeline(spark, [pipeline], lake, {"test.landing": str(landing)}, **kw)


@pytest.fixture
def first_batch(landing):
    write_jsonl(landing / "orders/1.jsonl", _orders([
        (1, "ann", 10.0, "eu"), (2, "bob", -5.0, "eu"), (3, None, 7.5, "us"), (4, "cy", None, "us"),
    ]))
    write_jsonl(landing / "refunds/1.jsonl", [{"id": 900, "kind": "refund"}, {"id": None, "kind": "refund"}])
    return landing


@pytest.mark.parametrize("pipeline", [BASIC, LEGACY], ids=["dp", "legacy dlt"])
def test_tables_views_expectations_and_append_flows(spark, first_batch, lake, pipeline):
    result = _run(spark, first_batch, lake, pipeline)
    store = LakeStore(spark, lake)

    assert store.read("bronze.orders_raw").count() == 4  # `expect` keeps failing rows
    assertDataFrameEqual(
        store.read("silver.orders"),
        spark.createDataFrame(
            [(1, "ann", 10.0, "eu"), (3, None, 7.5, "us")], "order_id long, customer string, amount double, region string"
        ),
    )
    assertDataFrameEqual(
        store.read("silver.all_events"),
        spark.createDataFrame([(1, "order"), (3, "order"), (900, "refund")], "id long, kind string"),
    )
    assertDataFrameEqual(
        store.read("gold.revenue_by_region"),
        spark.createDataFrame([("eu", 10.0, 1), ("us", 7.5, 1)], "region string, revenue double, orders long"),
    )
    # Upstream before downstream.
    assert result.order.index("bronze.orders_raw") < result.order.index("silver.orders") < result.order.index("gold.revenue_by_region")

    counts = {(r.dataset, r.name): (r.passed, r.failed) for e in result.events for r in e.expectations}
    assert counts[("bronze.orders_raw", "has_amount")] == (3, 1)
    assert counts[("valid_orders", "positive_amount")] == (2, 2)  # NULL amount fails too
    assert counts[("silver.orders", "known_customer")] == (1, 1)
    assert counts[("silver.all_events", "has_id")] == (1, 1)


def test_event_log_records_every_flow(spark, first_batch, lake):
    _run(spark, first_batch, lake)
    log = LakeStore(spark, lake).read("pipeline.event_log")
    rows = {r["flow"]: r for r in log.collect()}
    assert set(rows) >= {"bronze.orders_raw", "silver.orders", "events_from_orders", "events_from_refunds", "gold.revenue_by_region"}
    raw = rows["bronze.orders_raw"]
    assert (raw["status"], raw["rows_read"], raw["rows_written"]) == ("COMPLETED", 4, 4)
    assert json.loads(raw["expectations"])[0] == {
        "dataset": "bronze.orders_raw", "name": "has_amount", "action": "warn", "passed": 3, "failed": 1
    }


def test_rerun_reads_only_new_input(spark, first_batch, lake):
    _run(spark, first_batch, lake)
    unchanged = _run(spark, first_batch, lake)
    assert unchanged.event("bronze.orders_raw").status == "SKIPPED"
    assert unchanged.event("silver.orders").rows_read == 0

    write_jsonl(first_batch / "orders/2.jsonl", _orders([(5, "dee", 3.0, "eu")]))
    later = _run(spark, first_batch, lake)
    assert later.event("bronze.orders_raw").rows_read == 1
    assert later.event("silver.orders").rows_read == 1
    store = LakeStore(spark, lake)
    assert store.read("bronze.orders_raw").count() == 5
    assert store.read("silver.orders").count() == 3
    assertDataFrameEqual(
        store.read("gold.revenue_by_region"),
        spark.createDataFrame([("eu", 13.0, 2), ("us", 7.5, 1)], "region string, revenue double, orders long"),
    )


def test_full_refresh_recomputes_from_all_input(spark, first_batch, lake):
    _run(spark, first_batch, lake)
    again = _run(spark, first_batch, lake, full_refresh=True)
    assert again.event("bronze.orders_raw").rows_read == 4
    assert LakeStore(spark, lake).read("bronze.orders_raw").count() == 4


class Crash(BaseException):
    """The process dies here: no flow's error handling sees it (a flow's Exception fails only
    that flow and what reads it; runtime/runner.py)."""


def _commit_points(spark, landing, lake) -> list[tuple[str, str]]:
    seen = []
    store = LakeStore(spark, lake, commit_hook=lambda stage, table: seen.append((stage, table)))
    _run(spark, landing, lake, store=store)
    return seen


def _crash_at(point: int):
    calls = {"n": 0}

    def hook(stage, table):
        calls["n"] += 1
        if calls["n"] == point:
            raise Crash(f"simulated crash {stage} commit to {table}")

    return hook


def _snapshot(store: LakeStore, tables: list[str]):
    return {t: store.read(t) for t in tables}


def test_crash_at_every_commit_point_then_rerun_gives_identical_tables(spark, first_batch, tmp_path):
    """Kill the update before and after every Delta commit; the re-run must neither lose nor
    duplicate a batch."""
    reference_lake = tmp_path / "reference"
    points = _commit_points(spark, first_batch, reference_lake)
    tables = ["bronze.orders_raw", "silver.orders", "silver.all_events", "gold.revenue_by_region"]
    reference = _snapshot(LakeStore(spark, reference_lake), tables)
    assert len(points) >= 8
    for point in range(1, len(points) + 1):
        lake = tmp_path / f"crash-{point}"
        with pytest.raises(Crash):
            _run(spark, first_batch, lake, store=LakeStore(spark, lake, commit_hook=_crash_at(point)))
        _run(spark, first_batch, lake)
        recovered = LakeStore(spark, lake)
        for table in tables:
            assertDataFrameEqual(recovered.read(table), reference[table])


def test_expect_or_fail_stops_the_update(spark, tmp_path, landing):
    pipeline = tmp_path / "p.py"
    pipeline.write_text(
        "from pyspark import pipelines as dp\n"
        "@dp.table(name='bronze.t')\n"
        "@dp.expect_or_fail('positive', 'x > 0')\n"
        "def t():\n"
        "    return spark.readStream.format('cloudFiles').option('cloudFiles.format','json')"
        ".schema('x int').load(spark.conf.get('test.landing'))\n"
    )
    write_jsonl(landing / "1.jsonl", [{"x": 1}, {"x": -1}])
    with pytest.raises(ExpectationViolation, match="'positive' failed on 1 row"):
        run_pipeline(spark, [str(pipeline)], tmp_path / "lake", {"test.landing": str(landing)})


def test_cycle_is_a_clear_error(spark, lake):
    with pytest.raises(PipelineDefinitionError, match="cycle: gold.a -> gold.b -> gold.a"):
        run_pipeline(spark, [str(REPO / "tests/pipelines/cycle/*.py")], lake)


def test_unknown_dataset_is_a_clear_error(spark, lake):
    with pytest.raises(PipelineDefinitionError, match="reads unknown dataset 'silver.does_not_exist'"):
        run_pipeline(spark, [str(REPO / "tests/pipelines/unknown/*.py")], lake)


def test_missing_source_files_are_a_clear_error(spark, lake):
    with pytest.raises(PipelineDefinitionError, match="no pipeline source file matches"):
        run_pipeline(spark, [str(REPO / "tests/pipelines/nothing-here/*.py")], lake)


def test_dataset_defined_twice_is_a_clear_error(spark, tmp_path):
    pipeline = tmp_path / "twice.py"
    pipeline.write_text(
        "from pyspark import pipelines as dp\n"
        "@dp.materialized_view(name='gold.x')\n"
        "def x():\n    return spark.range(1)\n"
        "@dp.materialized_view(name='gold.x')\n"
        "def y():\n    return spark.range(2)\n"
    )
    with pytest.raises(PipelineDefinitionError, match="'gold.x' is defined twice"):
        run_pipeline(spark, [str(pipeline)], tmp_path / "lake")


def test_dlt_module_and_databricks_extras_are_only_there_while_loading(spark, first_batch, lake):
    import sys

    import pyspark.pipelines
    from pyspark.pipelines import api

    _run(spark, first_batch, lake, LEGACY)
    _run(spark, first_batch, lake)
    assert "dlt" not in sys.modules
    assert pyspark.pipelines.append_flow is api.append_flow
    assert pyspark.pipelines.create_auto_cdc_flow is api.create_auto_cdc_flow
    assert not hasattr(pyspark.pipelines, "expect_or_drop")
    assert not hasattr(pyspark.pipelines, "create_auto_cdc_from_snapshot_flow")


def test_dp_and_legacy_dlt_spellings_declare_the_same_graph(spark, first_batch):
    """pyspark's decorators, through its registration hook, give what dlt's give: kinds,
    properties, expectations and flows alike."""
    from cdc_lakehouse.runtime.declarations import expectations_of
    from cdc_lakehouse.runtime.loader import load_pipeline
    from cdc_lakehouse.runtime.runner import pipeline_configuration

    def declared(pipeline: str) -> tuple:
        with pipeline_configuration(spark, {"test.landing": str(first_batch)}):
            graph = load_pipeline(spark, [pipeline])
        datasets = {d.name: (d.kind, d.comment, d.table_properties, d.partition_cols, d.schema, d.expectations,
                             expectations_of(d.func)) for d in graph.datasets.values()}
        flows = {f.name: (f.target, f.kind, f.once, f.cdc, expectations_of(f.func)) for f in graph.flows.values()}
        return datasets, flows

    dp_graph, dlt_graph = declared(BASIC), declared(LEGACY)
    assert dp_graph == dlt_graph
    assert dp_graph[0]["valid_orders"][0] == "view" and dp_graph[0]["silver.all_events"][0] == "streaming_table"
    assert dp_graph[1]["events_from_orders"][1] == "append" and dp_graph[1]["silver.orders"][1] == "query"


@pytest.mark.parametrize("call, argument", [
    ("dp.create_auto_cdc_flow(target='t', source='v', keys='id', sequence_by='seq')", "keys"),
    ("dp.create_auto_cdc_flow(target='t', source='v', keys=['id'], sequence_by='seq', stored_as_scd_type=3)",
     "stored_as_scd_type"),
    ("dp.create_auto_cdc_from_snapshot_flow(target='t', source=1, keys=['id'])", "source"),
    ("dp.create_auto_cdc_flow(target='t', source='v', keys=['id'], sequence_by='seq', "
     "ignore_null_updates_column_list='a')", "ignore_null_updates_column_list"),
    ("dp.create_streaming_table('t', expect_all_or_drop=['id IS NOT NULL'])", "expect_all_or_drop"),
    ("dp.append_flow(target='t', once='yes')", "once"),
    ("dp.expect_or_drop('positive', 1)", "constraint"),
    ("dp.table(name=1)", "name"),  # pyspark's own check
])
def test_the_pipelines_api_checks_its_arguments_as_pyspark_does(spark, tmp_path, call, argument):
    from pyspark.errors import PySparkTypeError

    from cdc_lakehouse.runtime.loader import load_pipeline

    pipeline = tmp_path / "p.py"
    pipeline.write_text(f"from pyspark import pipelines as dp\n{call}\n")
    with pytest.raises(PySparkTypeError, match=f"`{argument}`"):
        load_pipeline(spark, [str(pipeline)])


@pytest.mark.parametrize("declaration, error", [
    ("dp.create_auto_cdc_flow(target='t', source='v', keys=['id'], sequence_by='seq', ignore_null_updates=True, "
     "ignore_null_updates_except_column_list=['a'])",
     "ignore_null_updates, ignore_null_updates_except_column_list should not be set together"),
    ("dp.create_sink('out', format='kafka')", "a kafka sink needs its broker, which the local runtime does not start"),
    ("dp.create_sink('out', format='delta')", "a delta sink names its table by the option tableName or by path"),
    ("dp.create_sink('out', format='delta', options={'path': 'dbfs:/mnt/out'})", "is not a folder of this machine"),
    ("@dp.expect('positive', 'id > 0')\n@dp.materialized_view\ndef m():\n    return spark.range(1)",
     "DECORATOR_ARGUMENT_NOT_CALLABLE"),  # @dp.table returns None: expectations go below it
])
def test_what_the_local_runtime_cannot_declare_is_a_clear_error(spark, tmp_path, declaration, error):
    from cdc_lakehouse.runtime.loader import load_pipeline

    pipeline = tmp_path / "p.py"
    pipeline.write_text(f"from pyspark import pipelines as dp\n{declaration}\n")
    with pytest.raises(Exception, match=error):
        load_pipeline(spark, [str(pipeline)])


def test_flows_read_datasets_with_spark_read_table_and_spark_table(spark, tmp_path):
    pipeline = tmp_path / "reads.py"
    pipeline.write_text(
        "from pyspark import pipelines as dp\n"
        "@dp.materialized_view(name='silver.numbers')\n"
        "def numbers():\n    return spark.range(4)\n"
        "@dp.temporary_view\n"
        "def evens():\n    return spark.read.table('silver.numbers').filter('id % 2 = 0')\n"
        "@dp.materialized_view(name='gold.even_total')\n"
        "def even_total():\n    return spark.table('evens').groupBy().sum('id')\n"
    )
    lake = tmp_path / "lake"
    result = run_pipeline(spark, [str(pipeline)], lake)
    assert result.order.index("silver.numbers") < result.order.index("gold.even_total")
    assert LakeStore(spark, lake).read("gold.even_total").first()[0] == 2


def test_a_flow_streams_a_lake_table_no_pipeline_defines(spark, tmp_path):
    """A source table (a Unity Catalog table on Databricks, e.g. a dlt-meta delta append flow's),
    catalog included in its name: its rows are read once."""
    pipeline = tmp_path / "source.py"
    pipeline.write_text(
        "from pyspark import pipelines as dp\n"
        "@dp.table(name='bronze.items')\n"
        "def items():\n    return spark.readStream.table('main.src.items')\n"
    )
    lake = tmp_path / "lake"
    store = LakeStore(spark, lake)
    store.overwrite("src.items", spark.range(3))
    for _ in range(2):  # the second update finds the table as read: nothing more
        run_pipeline(spark, [str(pipeline)], lake)
    assert sorted(r.id for r in store.read("bronze.items").collect()) == [0, 1, 2]


def test_full_refresh_keeps_tables_that_forbid_reset(spark, tmp_path, landing):
    pipeline = tmp_path / "raw.py"
    pipeline.write_text(
        "from pyspark import pipelines as dp\n"
        "@dp.table(name='bronze.raw', table_properties={'pipelines.reset.allowed': 'false'})\n"
        "def raw():\n"
        "    return spark.readStream.format('cloudFiles').option('cloudFiles.format','json')"
        ".schema('x int').load(spark.conf.get('test.landing'))\n"
        "@dp.materialized_view(name='gold.total')\n"
        "def total():\n"
        "    return spark.table('bronze.raw').groupBy().sum('x')\n"
    )
    lake, conf = tmp_path / "lake", {"test.landing": str(landing)}
    write_jsonl(landing / "1.jsonl", [{"x": 1}])
    run_pipeline(spark, [str(pipeline)], lake, conf)
    (landing / "1.jsonl").unlink()  # raw history outlives its landing files
    write_jsonl(landing / "2.jsonl", [{"x": 2}])
    result = run_pipeline(spark, [str(pipeline)], lake, conf, full_refresh=True)
    assert result.event("bronze.raw").rows_read == 1
    assert LakeStore(spark, lake).read("gold.total").first()[0] == 3


SHARED = str(REPO / "tests/pipelines/shared_view/*.py")


def test_two_tables_reading_one_view_share_its_evaluation_per_input(spark, landing, lake):
    """The view draws a random number per row: equal draws in both tables show one evaluation
    for both readers; a later update with new files evaluates it again, for the new rows only."""
    conf = {"test.landing": str(landing)}
    store = LakeStore(spark, lake)
    for update, ids in enumerate([range(0, 6), range(6, 10)]):
        write_jsonl(landing / f"items/{update}.jsonl", [{"id": i} for i in ids])
        result = run_pipeline(spark, [SHARED], lake, conf)
        counts = {(r.dataset, r.name): (r.passed, r.failed) for e in result.events for r in e.expectations}
        assert counts == {("bronze.even_items", "even"): (len(ids) // 2, len(ids) // 2),
                          ("bronze.all_items", "small"): (len(ids), 0)}
    all_items, even = store.read("bronze.all_items"), store.read("bronze.even_items")
    assert all_items.select("id").distinct().count() == all_items.count() == 10
    assertDataFrameEqual(even, all_items.filter("id % 2 = 0"))


def test_expectations_are_counted_by_the_write_or_apart_when_no_write_ran(spark):
    """The counts come from the write's own pass; a batch never written (committed before a
    crash, so the re-run skips its write) is counted on its own."""
    from cdc_lakehouse.runtime.expectations import ExpectationResult, apply_expectations
    from cdc_lakehouse.runtime.graph import Expectation

    df = spark.createDataFrame([(1,), (-2,), (None,)], "x int")
    rules = [Expectation("positive", "x > 0", "drop"), Expectation("present", "x IS NOT NULL", "warn")]
    expected = [ExpectationResult("t", "positive", "drop", 1, 2), ExpectationResult("t", "present", "warn", 2, 1)]
    kept, counts = apply_expectations(df, "t", rules)
    assert [r.x for r in kept.collect()] == [1]
    assert counts() == expected
    _, unwritten = apply_expectations(df, "t", rules)
    assert unwritten() == expected


def test_a_landing_file_being_written_is_left_for_a_later_batch(tmp_path):
    """A JSON Lines file that is empty or cut mid-line is not read until it is complete or has
    not changed for SETTLE_SECONDS (a writer that stopped mid-line): no half line is read."""
    from cdc_lakehouse.runtime.file_source import SETTLE_SECONDS, settled

    files = {"complete.jsonl": b'{"a": 1}\n', "cut.jsonl": b'{"a": 1}\n{"a": ', "empty.jsonl": b"",
             "old-cut.jsonl": b'{"a": 1}\n{"a": ', "m/_manifest.json": b'{"a": 1}', "z.jsonl.gz": b"\x1f"}
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(data)
    now = os.stat(tmp_path / "cut.jsonl").st_mtime + 1
    old = now - SETTLE_SECONDS
    os.utime(tmp_path / "old-cut.jsonl", (old, old))
    paths = [str(tmp_path / name) for name in files]
    assert [os.path.relpath(p, tmp_path) for p in settled(paths, now)] == [
        "complete.jsonl", "old-cut.jsonl", "m/_manifest.json", "z.jsonl.gz"]
    assert len(settled(paths, now + SETTLE_SECONDS)) == len(files)  # nothing changed for long enough


def test_rescued_data_column_matches_columns_by_name_and_keeps_what_does_not_fit(spark, tmp_path):
    """Auto Loader's cloudFiles.rescuedDataColumn, locally: CSV columns meet the schema by name
    (AWS DMS full loads have no Op column), values that do not fit and unknown columns are kept."""
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    from cdc_lakehouse.runtime.file_source import empty_frame, read_files

    path = tmp_path / "LOAD00000001.csv"
    path.write_text("id,name,extra\n1,tea,x\nzz,mate,y\n")
    schema = StructType([StructField("Op", StringType()), StructField("id", IntegerType()),
                         StructField("name", StringType())])
    options = {"cloudFiles.format": "csv", "header": "true", "cloudFiles.rescuedDataColumn": "_rescued_data"}
    rows = read_files(spark, [str(path)], "csv", options, schema)
    expected = [(None, 1, "tea", '{"extra":"x"}'), (None, None, "mate", '{"id":"zz","extra":"y"}')]
    assertDataFrameEqual(rows, spark.createDataFrame(expected, "Op STRING, id INT, name STRING, _rescued_data STRING"))
    # A batch with no new file has the same columns, and the files' hidden _metadata column too.
    empty = empty_frame(spark, "csv", options, schema)
    assert empty.columns == rows.columns and empty.select("_metadata.file_name").isEmpty()
