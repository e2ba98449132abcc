"""dlt-meta cdc_feed sources beyond JSON, CSV and Parquet files, through ``cdc-lakehouse run
--config``: dlt-meta's demo stores (its full load, tests/data/dlt_meta) written as ORC, XML, text
and binary files, and as a Delta table of the lake (``source_format: delta``), each read by a
bronze-only flow; each bronze table holds the rows as Spark reads them. A second update, after a
row more in the Delta table, reads that row alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.cli import main
from cdc_lakehouse.storage import LakeStore

STORES = Path(__file__).parent / "data" / "dlt_meta" / "demo/resources/data/stores/LOAD00000001.csv"
# format -> its reader options (XML: the element of a row)
FORMATS = {"orc": {}, "xml": {"rowTag": "store"}, "text": {}, "binaryFile": {}}


def stores(spark: SparkSession) -> DataFrame:
    return spark.read.option("header", "true").csv(str(STORES)).select("store_id", "address")


def flow(number: int, fmt: str) -> dict:
    return {"data_flow_id": str(number), "data_flow_group": "A1", "source_format": "cloudFiles",
            "source_details": {"source_path_dev": f"feeds/{fmt}"}, "bronze_database_dev": "bronze",
            "bronze_table": f"stores_{fmt.lower()}", "bronze_reader_options": {"cloudFiles.format": fmt, **FORMATS[fmt]}}


SOURCE = "dlt_meta_source.stores"
DELTA_FLOW = {"data_flow_id": "9", "data_flow_group": "A1", "source_format": "delta",
              "source_details": {"source_database": "dlt_meta_source", "source_table": "stores"},
              "bronze_database_dev": "bronze", "bronze_table": "stores_delta"}
NEW_STORE = ("99", "1 New Street")


def write_feeds(spark: SparkSession, folder: Path) -> None:
    rows = stores(spark).coalesce(1)
    rows.write.orc(str(folder / "feeds/orc"))
    rows.write.option("rowTag", "store").xml(str(folder / "feeds/xml"))
    rows.selectExpr("concat_ws(',', store_id, address) AS value").write.text(str(folder / "feeds/text"))
    (folder / "feeds/binaryFile").mkdir(parents=True)
    (folder / "feeds/binaryFile/stores.csv").write_bytes(STORES.read_bytes())


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("dlt_meta_formats")
    write_feeds(spark, folder)
    LakeStore(spark, folder / "lake").append(SOURCE, stores(spark))
    flows = [flow(n, fmt) for n, fmt in enumerate(FORMATS, 1)] + [DELTA_FLOW]
    (folder / "onboarding.json").write_text(json.dumps(flows))
    (folder / "landing").mkdir()
    run = ["run", "--config", str(folder / "onboarding.json"), "--landing", str(folder / "landing"),
           "--lake", str(folder / "lake")]
    assert main(run) == 0
    LakeStore(spark, folder / "lake").append(SOURCE, spark.createDataFrame([NEW_STORE], "store_id string, address string"))
    assert main(run) == 0
    return folder / "lake"


def bronze(spark: SparkSession, lake: Path, fmt: str) -> DataFrame:
    return LakeStore(spark, lake).read(f"bronze.stores_{fmt.lower()}")


@pytest.mark.parametrize("fmt", ["orc", "xml"])
def test_a_feed_of_typed_records_is_read_as_its_rows(spark, lake, fmt):
    table = bronze(spark, lake, fmt).selectExpr("CAST(store_id AS STRING) AS store_id", "address")
    assertDataFrameEqual(table, stores(spark))


def test_a_text_feed_is_its_lines(spark, lake):
    expected = stores(spark).selectExpr("concat_ws(',', store_id, address) AS value")
    assertDataFrameEqual(bronze(spark, lake, "text").select("value"), expected)


def test_a_binary_feed_is_its_files(spark, lake):
    [row] = bronze(spark, lake, "binaryFile").select("path", "length", "content").collect()
    assert row.path.endswith("/stores.csv") and bytes(row.content) == STORES.read_bytes()
    assert row.length == STORES.stat().st_size


def test_a_delta_feed_streams_its_table(spark, lake):
    expected = stores(spark).unionByName(spark.createDataFrame([NEW_STORE], "store_id string, address string"))
    assertDataFrameEqual(bronze(spark, lake, "delta"), expected)
