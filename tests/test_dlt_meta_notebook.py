"""A dlt-meta notebook with its functions, run as a pipeline file: ``DataflowPipeline.
invoke_dlt_pipeline(spark, layer, ...)`` from ``cdc_lakehouse.dataflow_pipeline``, through
``cdc-lakehouse pipeline run --source notebook.py``, as the notebook is a pipeline's source on
Databricks.

The notebook is dlt-meta's examples (examples/dlt_meta_pipeline_custom_transform.ipynb and
dlt_meta_pipeline_snapshot.ipynb) with the import changed: its transforms add ``custom_col``, its
snapshot function reads ``<path><version>.csv`` from the spec dlt-meta hands it (and here also
marks the rows with their load's version), and a silver one of ours takes the bronze table as a
snapshot at the version its rows carry. The onboarding file is dlt-meta's cars flow (a cloudFiles
feed) and its stores snapshot flow (tests/data/dlt_meta). One update, with two full loads of
stores landed: the tables must equal the files' rows as the functions shape them in plain Python.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual
from test_dlt_meta_fanout import CARS_FILE, cars, fanned_out

from cdc_lakehouse.cli import main
from cdc_lakehouse.dataflow_pipeline import DataflowPipeline
from cdc_lakehouse.runtime.loader import load_pipeline
from cdc_lakehouse.runtime.runner import pipeline_configuration
from cdc_lakehouse.storage import LakeStore

DATA = Path(__file__).parent / "data" / "dlt_meta"
STORES = "demo/resources/data/snapshots/stores"
NOTEBOOK = '''
import os

from pyspark.sql import DataFrame
from pyspark.sql.functions import lit, max

from cdc_lakehouse.dataflow_pipeline import DataflowPipeline
from cdc_lakehouse.dataflow_spec import BronzeDataflowSpec


def bronze_custom_transform_func_test(input_df, dataflow_spec) -> DataFrame:
  return input_df.withColumn('custom_col', lit('test'))

def silver_custom_transform_func_test(input_df, dataflow_spec) -> DataFrame:
  return input_df.withColumn('custom_col', lit('test'))


def bronze_next_snapshot_and_version(latest_snapshot_version, dataflow_spec):
    latest_snapshot_version = latest_snapshot_version or 0
    next_version = latest_snapshot_version + 1
    bronze_dataflow_spec: BronzeDataflowSpec = dataflow_spec
    options = bronze_dataflow_spec.readerConfigOptions
    snapshot_format =  bronze_dataflow_spec.sourceDetails["snapshot_format"]
    snapshot_root_path = bronze_dataflow_spec.sourceDetails['path']
    snapshot_path = f"{snapshot_root_path}{next_version}.csv"
    if (os.path.exists(snapshot_path)):
        snapshot = spark.read.format(snapshot_format).options(**options).load(snapshot_path)
        return (snapshot.withColumn("load", lit(next_version)), next_version)
    else:
        # No snapshot available
        return None


def silver_next_snapshot_and_version(latest_snapshot_version, dataflow_spec):
    bronze = dataflow_spec.sourceDetails
    snapshot = spark.read.table(f"{bronze['database']}.{bronze['table']}")
    version = snapshot.agg(max("load")).first()[0]
    if version is None or version <= (latest_snapshot_version or 0):
        return None
    return (snapshot.selectExpr(*dataflow_spec.selectExp, "load"), version)


layer = spark.conf.get("layer", None)
DataflowPipeline.invoke_dlt_pipeline(spark, layer, bronze_custom_transform_func=bronze_custom_transform_func_test,
                                     silver_custom_transform_func=silver_custom_transform_func_test,
                                     bronze_next_snapshot_and_version=bronze_next_snapshot_and_version,
                                     silver_next_snapshot_and_version=silver_next_snapshot_and_version)
'''


def onboarding(folder: Path) -> Path:
    """dlt-meta's cars flow and its stores snapshot flow in one file (both of env demo)."""
    [feed] = json.loads((DATA / "fanout" / CARS_FILE).read_text())
    stores = [f for f in json.loads((DATA / "snapshot-onboarding.json").read_text()) if f["bronze_table"] == "stores"]
    path = folder / "onboarding_notebook.json"
    path.write_text(json.dumps([feed, *stores], indent=2))
    return path


@pytest.fixture(scope="module")
def notebook(spark, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("dlt_meta_notebook")
    shutil.copytree(DATA / "demo", folder / "demo")
    shutil.copytree(DATA / "fanout" / "demo", folder / "demo", dirs_exist_ok=True)
    shutil.copy(folder / "demo/resources/data/snapshots/incremental_snapshots/stores/LOAD_2.csv", folder / STORES)
    (folder / "notebook.py").write_text(NOTEBOOK)
    assert main(["pipeline", "run", "--source", str(folder / "notebook.py"), "--lake", str(folder / "lake"),
                 "--conf", f"cdc_lakehouse.onboarding_file={onboarding(folder)}", "--conf", "cdc_lakehouse.env=demo",
                 "--conf", "layer=bronze_silver"]) == 0
    return folder


def test_the_bronze_transform_takes_the_rows_as_read(spark, notebook):
    bronze = LakeStore(spark, notebook / "lake").read("dlt_meta_bronze.cars")
    columns = list(cars(notebook)[0])
    expected = spark.createDataFrame([(*car.values(), "test") for car in cars(notebook)],
                                     ", ".join(f"{column} string" for column in [*columns, "custom_col"]))
    assertDataFrameEqual(bronze.select(*columns, "custom_col"), expected)


def test_the_silver_transform_takes_the_rows_after_the_select_and_where(spark, notebook):
    silver = LakeStore(spark, notebook / "lake").read("dlt_meta_silver.cars_usa")
    expected = fanned_out(spark, notebook, "cars_usa").withColumn("custom_col", F.lit("test"))
    assertDataFrameEqual(silver, expected)


def test_the_snapshot_functions_feed_auto_cdc_from_snapshot(spark, notebook):
    store = LakeStore(spark, notebook / "lake")
    latest = spark.read.option("header", "true").csv(str(notebook / STORES / "LOAD_2.csv"))
    bronze = store.read("dlt_meta_bronze.stores")
    assertDataFrameEqual(bronze, latest.select(bronze.columns[:-1]).withColumn("load", F.lit(2)))
    silver = store.read("dlt_meta_silver.stores")
    assertDataFrameEqual(silver, latest.select("store_id", "address", "dmsTimestamp").withColumn("load", F.lit(2)))


@pytest.mark.parametrize("layer", [None, "gold"])
def test_a_layer_dlt_meta_does_not_have_is_an_error(spark, layer):
    with pytest.raises(ValueError, match="layer must be one of bronze, silver, bronze_silver"):
        DataflowPipeline.invoke_dlt_pipeline(spark, layer)


def test_the_group_a_layer_names_selects_its_flows(spark, notebook):
    """``bronze.group`` / ``silver.group``, as dlt-meta reads them: both flows are of group A1."""
    conf = {"cdc_lakehouse.onboarding_file": str(notebook / "onboarding_notebook.json"), "cdc_lakehouse.env": "demo",
            "layer": "bronze_silver", "bronze.group": "A1", "silver.group": "B1"}
    with pipeline_configuration(spark, conf):
        datasets = load_pipeline(spark, [str(notebook / "notebook.py")]).datasets
    assert {"dlt_meta_bronze.cars", "dlt_meta_bronze.stores"} <= {name.partition(".")[2] for name in datasets}
    assert not [name for name in datasets if "silver" in name]


def _declared(spark, notebook: Path, **selection: str) -> set[str]:
    """The datasets the notebook declares with the layer selection ``selection`` (no update)."""
    conf = {"cdc_lakehouse.onboarding_file": str(notebook / "onboarding_notebook.json"), "cdc_lakehouse.env": "demo",
            "layer": "bronze_silver", **selection}
    with pipeline_configuration(spark, conf):
        return {name.partition(".")[2] for name in load_pipeline(spark, [str(notebook / "notebook.py")]).datasets}


def test_the_data_flow_ids_a_layer_lists_select_its_flows(spark, notebook):
    """``<layer>.dataflowIds``, as dlt-meta reads them: the cars flow is 100, the stores flow 202;
    a group, when set too, wins."""
    datasets = _declared(spark, notebook, **{"bronze.dataflowIds": "202", "silver.dataflowIds": "'100', '202'"})
    assert "dlt_meta_bronze.stores" in datasets and "dlt_meta_bronze.cars" not in datasets
    assert {"dlt_meta_silver.cars_usa", "dlt_meta_silver.stores"} <= datasets
    grouped = _declared(spark, notebook, **{"bronze.group": "A1", "bronze.dataflowIds": "202", "silver.group": "B1"})
    assert "dlt_meta_bronze.cars" in grouped


def test_a_data_flow_id_the_file_lacks_is_an_error_naming_the_key(spark, notebook):
    with pytest.raises(Exception, match=r"bronze.dataflowIds: no dlt-meta flow of the onboarding file has "
                                        r"data_flow_id 999 \(got '100,999'\)"):
        _declared(spark, notebook, **{"bronze.dataflowIds": "100,999"})
