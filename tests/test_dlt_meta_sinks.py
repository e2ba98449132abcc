"""dlt-meta's ``bronze_sinks`` and ``silver_sinks`` through ``cdc-lakehouse run --config``: a
flow's rows (bronze: as read, silver: as transformed) through each sink's ``select_exp`` and
``where_clause``, appended to a Delta table by ``dp.create_sink`` and the append flow
``<sink>_flow``, as dlt-meta's DLTSinkWriter does.

dlt-meta publishes no delta sink that runs on data of its own (its sink demo reads Kafka), so the
sinks are added here to its cars flow (tests/data/dlt_meta/fanout): a bronze sink by ``tableName``
and a silver sink by ``path``. Two updates, the second after more cars land: each sink holds its
rows once, as plain Python filters and shapes the cars files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual
from test_dlt_meta_fanout import CARS, CARS_FILE, DATA, MORE_CARS, cars, run

from cdc_lakehouse.cli import main
from cdc_lakehouse.storage import LakeStore

OLD_CARS = {"name": "old_cars", "format": "delta", "options": {"tableName": "main.dlt_meta_sinks.old_cars"},
            "select_exp": ["first_name", "last_name", "brand", "cast(yom AS INT) AS yom"],
            "where_clause": "cast(yom AS INT) < 1970"}
JCB_FORDS = {"name": "jcb_fords", "format": "delta", "options": {"path": "sinks/jcb_fords"},
             "select_exp": ["full_name", "model"], "where_clause": ["brand = 'Ford'", "cc_type = 'jcb'"]}
ONBOARDING = "onboarding_sinks.json"


def with_sinks(folder: Path, **sinks: list[dict]) -> None:
    """dlt-meta's cars file with ``sinks`` (``bronze_sinks=[...]``, ...) added to its flow."""
    [flow] = json.loads((folder / CARS_FILE).read_text())
    (folder / ONBOARDING).write_text(json.dumps([{**flow, **sinks}], indent=2))


@pytest.fixture(scope="module")
def sinks(spark, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("dlt_meta_sinks")
    shutil.copytree(DATA, folder, dirs_exist_ok=True)
    with_sinks(folder, bronze_sinks=[OLD_CARS], silver_sinks=[JCB_FORDS])
    run(folder, ONBOARDING)
    (folder / CARS / "more_cars.csv").write_text(MORE_CARS)  # five cars made before 1970, a Ford among them
    run(folder, ONBOARDING)
    return folder


def test_a_bronze_sink_by_table_name_holds_the_rows_it_selects(spark, sinks):
    table = LakeStore(spark, sinks / "lake").read("dlt_meta_sinks.old_cars")
    rows = [(c["first_name"], c["last_name"], c["brand"], int(c["yom"])) for c in cars(sinks) if int(c["yom"]) < 1970]
    assert len(rows) > 1
    assertDataFrameEqual(table, spark.createDataFrame(rows, "first_name string, last_name string, brand string, "
                                                            "yom int"))


def read_path(spark: SparkSession, path: Path, lake: Path) -> DataFrame:
    store = LakeStore(spark, lake)
    store.place("outside.jcb_fords", path)
    return store.read("outside.jcb_fords")


def test_a_silver_sink_by_path_holds_the_transformed_rows_it_selects(spark, sinks):
    table = read_path(spark, sinks / "sinks" / "jcb_fords", sinks / "lake")  # relative to the onboarding file
    rows = [(f"{c['first_name']} {c['last_name']}", c["model"]) for c in cars(sinks)
            if c["country"] == "United States" and c["brand"] == "Ford" and c["cc_type"] == "jcb"]
    assert "Henry Ford" in {name for name, _ in rows}  # the second update's
    assertDataFrameEqual(table, spark.createDataFrame(rows, "full_name string, model string"))


def test_the_flow_s_own_tables_are_as_without_sinks(spark, sinks):
    store = LakeStore(spark, sinks / "lake")
    assert store.read("dlt_meta_bronze.cars").count() == len(cars(sinks))
    usa = [c for c in cars(sinks) if c["country"] == "United States"]
    assert store.read("dlt_meta_silver.cars_usa").count() == len(usa)


@pytest.mark.parametrize("sink, broker", [
    ({"name": "to_kafka", "format": "kafka", "options": {"kafka.bootstrap.servers": "broker:9092", "topic": "cars"}},
     "a kafka sink needs a Kafka broker at broker:9092, which cdc-lakehouse cannot start"),
    ({"name": "to_eventhub", "format": "eventhub", "options": {"eventhub.namespace": "cars-ns", "eventhub.name": "c"}},
     "an eventhub sink needs an Azure Event Hubs namespace (cars-ns.servicebus.windows.net)"),
])
def test_a_kafka_or_event_hubs_sink_stops_the_run_naming_its_broker(tmp_path, capsys, sink, broker):
    shutil.copy(DATA / CARS_FILE, tmp_path / CARS_FILE)
    with_sinks(tmp_path, silver_sinks=[sink])
    assert main(["run", "--config", str(tmp_path / ONBOARDING), "--env", "demo", "--lake", str(tmp_path / "lake")]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert f"data_flow_id=100): silver_sinks[0].format: {broker}" in said
