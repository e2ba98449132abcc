"""dlt-meta's own demo onboarding files and sample data (tests/data/dlt_meta, README there) run
through ``cdc-lakehouse run --config``: the replicas equal a plain application of their changes.

- onboarding.json: four cloudFiles CDC feeds of AWS DMS CSV files (``Op``, ``dmsTimestamp``),
  full load then incremental files, SCD2, with dlt-meta's expectations, quarantine tables and
  silver transformations.
- snapshot-onboarding.json: ``source_format: snapshot`` flows, products from a Delta source table
  (SCD2) and stores from CSV full loads ``LOAD_<n>.csv`` (SCD1), three loads in three updates.
"""

from __future__ import annotations

import json
import shutil
from functools import reduce
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.cli import main
from cdc_lakehouse.storage import LakeStore

DATA = Path(__file__).parent / "data" / "dlt_meta"
DEMO = "demo/resources"
FEEDS = {  # silver table -> key (dlt-meta's demo: every feed is sequenced by dmsTimestamp)
    "customers": "customer_id", "transactions": "transaction_id", "products": "product_id", "stores": "store_id"}
# Ours, not dlt-meta's (its demo has no delete): an AWS DMS delete of a store, after its updates.
STORE_DELETE = 'Op,dmsTimestamp,store_id,address\nD,2022-06-24 19:10:00.000000,6,"1705 Mary Pike Apt. 820"\n'


def run(folder: Path, onboarding: str, env: str) -> None:
    landing = folder / "landing"  # change-stream flows only; these files have none
    landing.mkdir(exist_ok=True)
    assert main(["run", "--config", str(folder / onboarding), "--env", env, "--landing", str(landing),
                 "--lake", str(folder / "lake")]) == 0


@pytest.fixture(scope="module")
def feeds(spark, tmp_path_factory) -> Path:
    """One lake: the full loads in a first update, the incremental files in a second."""
    folder = tmp_path_factory.mktemp("dlt_meta_feeds")
    shutil.copytree(DATA, folder, dirs_exist_ok=True)
    run(folder, "onboarding.json", "prod")
    for increments in (folder / DEMO / "incremental_data").iterdir():
        for file in increments.iterdir():
            shutil.copy(file, folder / DEMO / "data" / increments.name / file.name)
    (folder / DEMO / "data" / "stores" / "zz-delete.csv").write_text(STORE_DELETE)
    run(folder, "onboarding.json", "prod")
    return folder


def applied(spark: SparkSession, folder: Path, table: str, key: str) -> DataFrame:
    """The reference: every change file of the table, through dlt-meta's select_exp, latest row
    per key by dmsTimestamp, deletes (Op = 'D') removed, Op and dmsTimestamp left out."""
    files = sorted(str(f) for f in (folder / DEMO / "data" / table).glob("*.csv"))
    rows = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True),
                  [spark.read.option("header", "true").csv(f) for f in files])
    if "Op" not in rows.columns:
        rows = rows.withColumn("Op", F.lit(None).cast("string"))
    [shape] = [t for t in json.loads((folder / "demo/conf/silver_transformations.json").read_text())
               if t["target_table"] == table]
    rows = rows.withColumn("_rescued_data", F.lit(None).cast("string")).selectExpr(*shape["select_exp"])
    latest = Window.partitionBy(key).orderBy(F.col("dmsTimestamp").desc())
    assert rows.groupBy(key, "dmsTimestamp").count().where("count > 1").isEmpty()  # the order is total
    rows = rows.withColumn("_n", F.row_number().over(latest)).where("_n = 1")
    return rows.where("Op IS NULL OR Op != 'D'").drop("_n", "Op", "dmsTimestamp", "_rescued_data")


def typed_like(df: DataFrame, like: DataFrame) -> DataFrame:
    return df.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in like.schema.fields])


@pytest.mark.parametrize("table", FEEDS)
def test_a_feed_replica_is_its_changes_applied(spark, feeds, table):
    store = LakeStore(spark, feeds / "lake")
    replica = store.read(f"dlt_meta_silver.{table}")
    assertDataFrameEqual(replica, typed_like(applied(spark, feeds, table, FEEDS[table]), replica))
    history = store.read(f"dlt_meta_silver.{table}_history")
    current = history.where("__END_AT IS NULL").drop("__START_AT", "__END_AT")
    assertDataFrameEqual(current, replica)


def test_a_feed_keeps_its_raw_rows_and_quarantines_none_of_these(spark, feeds):
    store = LakeStore(spark, feeds / "lake")
    stores = store.read("dlt_meta_bronze.stores")
    assert stores.count() == sum(len(f.read_text().splitlines()) - 1
                                 for f in (feeds / DEMO / "data" / "stores").glob("*.csv"))
    assert stores.where("_rescued_data IS NOT NULL").isEmpty()
    assert store.read("dlt_meta_bronze.stores_quarantine").isEmpty()
    assert store.read("dlt_meta_silver.stores").where("store_id = '6'").isEmpty()  # deleted
    assert store.read("dlt_meta_silver.stores_history").where("store_id = '6'").count() >= 2


# --- snapshots ---------------------------------------------------------------------------------

SNAPSHOTS = f"{DEMO}/data/snapshots"
PRODUCTS_SOURCE = "dlt_meta_source.source_products_delta"


def load(spark: SparkSession, folder: Path, version: int) -> None:
    """dlt-meta's upload_snapshots notebook: the next CSV full load of stores, and the products
    source table overwritten with its next load."""
    where = f"{SNAPSHOTS}/incremental_snapshots" if version > 1 else SNAPSHOTS
    if version > 1:
        shutil.copy(folder / where / "stores" / f"LOAD_{version}.csv", folder / SNAPSHOTS / "stores")
    products = spark.read.option("header", "true").csv(str(folder / where / "products" / f"LOAD_{version}.csv"))
    LakeStore(spark, folder / "lake").overwrite(PRODUCTS_SOURCE, products)


def loaded(spark: SparkSession, folder: Path, table: str, version: int, columns: list[str]) -> DataFrame:
    where = f"{SNAPSHOTS}/incremental_snapshots" if version > 1 else SNAPSHOTS
    return spark.read.option("header", "true").csv(str(folder / where / table / f"LOAD_{version}.csv")).select(columns)


def test_snapshot_flows_apply_successive_full_loads(spark, tmp_path):
    folder = tmp_path / "snapshots"
    shutil.copytree(DATA, folder)
    store = LakeStore(spark, folder / "lake")
    for version in (1, 2, 3):
        load(spark, folder, version)
        run(folder, "snapshot-onboarding.json", "demo")
        stores = store.read("dlt_meta_silver.stores")
        assertDataFrameEqual(stores, loaded(spark, folder, "stores", version, stores.columns))
        products = store.read("dlt_meta_silver.products")
        assertDataFrameEqual(products, loaded(spark, folder, "products", version, products.columns))
    history = store.read("dlt_meta_silver.products_history")
    # One history row per version a product had in the loads (none comes back to an old one).
    versions = reduce(DataFrame.union, [loaded(spark, folder, "products", v, products.columns) for v in (1, 2, 3)])
    assert history.count() == versions.distinct().count()
    assertDataFrameEqual(history.where("__END_AT IS NULL").drop("__START_AT", "__END_AT"), products)
    # No new load: a table source that did not change is not compared again (nor written).
    tables = ["dlt_meta_bronze.products", "dlt_meta_silver.products", "dlt_meta_silver.products_history",
              "dlt_meta_bronze.stores", "dlt_meta_silver.stores"]
    before = {t: store.version(t) for t in tables}
    run(folder, "snapshot-onboarding.json", "demo")
    assert {t: store.version(t) for t in tables} == before
