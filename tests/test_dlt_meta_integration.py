"""dlt-meta's own integration-test onboarding files (integration_tests/conf/cloudfiles-onboarding.template
and cloudfiles-onboarding_A2.template, tests/data/dlt_meta/integration, README there) through
``cdc-lakehouse run --config``: Auto Loader metadata columns, bronze and silver append flows, bronze
and silver quarantine tables, a bronze-only flow (A2: customers_delta), a plain silver table
(customers) and AUTO CDC replicas (transactions) equal to a plain application of their files.

One lake, as in dlt-meta's integration test: the A2 pipeline first (the bronze table customers_delta,
source of A1's silver append flow), then two A1 updates: the main folders first, the append
flows' folders then. The upstream transactions files hold an APPEND and a DELETE of one id at one
operation_date, in the main and the append folder (a later DELETE of it follows): AUTO CDC cannot
order two changes of one key at one sequence value in one batch, so they go to two updates.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.cli import main
from cdc_lakehouse.storage import LakeStore

DATA = Path(__file__).parent / "data" / "dlt_meta" / "integration"
RESOURCES = "integration_tests/resources"
LATER = ("customers_af", "transactions_af")  # the append flows' folders: second update


def run(folder: Path, onboarding: str = "cloudfiles-onboarding.json") -> None:
    landing = folder / "landing"  # change-stream flows only; these files have none
    landing.mkdir(exist_ok=True)
    assert main(["run", "--config", str(folder / onboarding), "--env", "it",
                 "--landing", str(landing), "--lake", str(folder / "lake")]) == 0


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("dlt_meta_integration")
    shutil.copytree(DATA, folder, dirs_exist_ok=True)
    data = folder / RESOURCES / "data"
    for name in LATER:
        shutil.move(data / name, folder / name)
    run(folder, "cloudfiles-onboarding_A2.json")  # its own pipeline: A1's runs leave its tables alone
    run(folder)
    for name in LATER:
        shutil.move(folder / name, data / name)
    run(folder)
    return folder


def ddl(folder: Path, table: str) -> str:
    return (folder / RESOURCES / f"{table}.ddl").read_text()


def files(spark: SparkSession, folder: Path, name: str, table: str) -> DataFrame:
    """The rows of a data folder as the flow's schema reads them, with their file's name."""
    df = spark.read.schema(ddl(folder, table)).json(str(folder / RESOURCES / "data" / name))
    return df.withColumn("input_file_name", F.col("_metadata.file_name"))


def extra_keys(folder: Path, name: str, table: str) -> list[str]:
    """The ids of rows with keys the schema lacks (Auto Loader rescues them)."""
    columns = {c.split()[0] for c in ddl(folder, table).split(",")}
    lines = (json.loads(line) for f in (folder / RESOURCES / "data" / name).iterdir() for line in f.read_text().splitlines())
    return [row.get("id") for row in lines if set(row) - columns]


def shaped(folder: Path, df: DataFrame, table: str) -> DataFrame:
    """dlt-meta's silver_transformation_json select_exp for ``table``."""
    entries = json.loads((folder / "integration_tests/conf/silver_transformations.json").read_text())
    [entry] = [e for e in entries if e["target_table"] == table]
    return df.selectExpr(*entry["select_exp"])


def typed_like(df: DataFrame, like: DataFrame) -> DataFrame:
    return df.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in like.schema.fields])


# --- transactions: metadata columns, append flow, quarantines, AUTO CDC ------------------------

def test_transactions_bronze_keeps_the_files_rows_with_their_metadata(spark, lake):
    store = LakeStore(spark, lake / "lake")
    bronze = store.read("it_bronze.transactions")
    main_rows = files(spark, lake, "transactions", "transactions").where("id IS NOT NULL")  # expect_or_drop
    appended = files(spark, lake, "transactions_af", "transactions").withColumn("input_file_name", F.lit(None))
    expected = main_rows.unionByName(appended)
    assertDataFrameEqual(typed_like(bronze, expected), expected)
    with_files = bronze.where("input_file_name IS NOT NULL")  # the append flow names no source_metadata
    assert with_files.count() == main_rows.count()
    assert with_files.where("source_metadata.file_name != input_file_name OR input_file_path NOT LIKE "
                            "concat('%/transactions/', input_file_name)").isEmpty()
    quarantined = store.read("it_bronze.transactions_quarantine")  # the main files' rows only
    expected = main_rows.where("amount = 0")
    assert expected.count() > 0
    assertDataFrameEqual(typed_like(quarantined, expected), expected)


def applied(df: DataFrame) -> DataFrame:
    """The latest change per id by operation_date, deletes removed (silver_cdc_apply_changes)."""
    latest = Window.partitionBy("id").orderBy(F.col("operation_date").desc())
    ranked = df.withColumn("_n", F.rank().over(latest)).where("_n = 1")
    assert ranked.groupBy("id").count().where("count > 1").isEmpty()  # the latest change is one
    kept = ranked.where("operation IS NULL OR operation != 'DELETE'")
    return kept.drop("_n", "operation", "operation_date", "_rescued_data")


def test_transactions_replica_is_its_changes_applied(spark, lake):
    store = LakeStore(spark, lake / "lake")
    changes = files(spark, lake, "transactions", "transactions").unionByName(
        files(spark, lake, "transactions_af", "transactions")).withColumn("_rescued_data", F.lit(None).cast("string"))
    replica = store.read("it_silver.transactions")
    assertDataFrameEqual(replica, typed_like(applied(shaped(lake, changes, "transactions")), replica))
    # The silver quarantine table: the changes its expect_or_quarantine rule holds for.
    quarantined = store.read("it_silver.transactions_quarantine")
    deletes = shaped(lake, changes, "transactions").where("operation IN ('DELETE')")
    assertDataFrameEqual(quarantined, typed_like(deletes, quarantined))


# --- customers: plain silver table, append flows from files and from a Delta table -------------

def passing(spark: SparkSession, lake: Path, name: str) -> DataFrame:
    """The rows of a customers folder that pass the customers' bronze expect_or_drop rules."""
    rescued = extra_keys(lake, name, "customers")
    return files(spark, lake, name, "customers").where(
        F.col("id").isNotNull() & F.col("operation").isin("APPEND", "DELETE", "UPDATE") & ~F.col("id").isin(rescued))


def customers(spark: SparkSession, lake: Path) -> tuple[DataFrame, DataFrame]:
    """The main folder's rows that pass the bronze rules, and the append flow's rows."""
    appended = files(spark, lake, "customers_af", "customers").withColumn("input_file_name", F.lit(None))
    return passing(spark, lake, "customers"), appended


def test_the_bronze_only_flow_keeps_the_rows_that_pass_its_rules_with_their_files(spark, lake):
    store = LakeStore(spark, lake / "lake")
    expected = passing(spark, lake, "customers_delta")
    bronze = store.read("it_bronze.customers_delta")
    assertDataFrameEqual(typed_like(bronze, expected), expected)
    assert bronze.where("input_file_path NOT LIKE concat('%/customers_delta/', input_file_name)").isEmpty()
    assert not store.exists("it_silver.customers_delta")  # A2 onboards no silver layer


def test_the_bronze_only_flows_quarantine_holds_the_rows_its_rule_names(spark, lake):
    quarantined = LakeStore(spark, lake / "lake").read("it_bronze.customers_delta_quarantine")
    rows = files(spark, lake, "customers_delta", "customers")  # quarantine_rule, _rescued_data from the extra keys
    expected = rows.where(F.col("id").isNull() | F.col("operation").isNull()
                          | F.col("id").isin(extra_keys(lake, "customers_delta", "customers")))
    assert expected.count() == 2
    assertDataFrameEqual(typed_like(quarantined, expected), expected)
    assert [r._rescued_data for r in quarantined.orderBy("id").collect()] == [None, '{"phone":"555-0159"}']


def test_customers_bronze_has_the_main_and_the_append_flow_rows(spark, lake):
    store = LakeStore(spark, lake / "lake")
    passing, appended = customers(spark, lake)
    expected = passing.unionByName(appended)
    bronze = store.read("it_bronze.customers")
    assertDataFrameEqual(typed_like(bronze, expected), expected)
    quarantined = store.read("it_bronze.customers_quarantine")
    assert sorted(quarantined.select("id", "operation", "_rescued_data").collect(), key=str) == sorted(
        [(None, "APPEND", None), ("1041", None, None), ("1043", "APPEND", '{"phone":"555-0143"}')], key=str)


def test_customers_silver_is_the_bronze_rows_and_the_source_table_appended(spark, lake):
    store = LakeStore(spark, lake / "lake")
    passing, appended = customers(spark, lake)
    bronze_rows = passing.unionByName(appended).withColumn("_rescued_data", F.lit(None).cast("string"))
    # The append flow reads the A2 bronze table as it is (dlt-meta transforms the flow's own rows
    # only): its metadata columns join the silver table, null for the bronze rows.
    source = store.read("it_bronze.customers_delta")
    silver = store.read("it_silver.customers")
    assert {"input_file_name", "input_file_path"} <= set(silver.columns)
    expected = shaped(lake, bronze_rows, "customers").unionByName(source, allowMissingColumns=True)
    assertDataFrameEqual(silver, typed_like(expected, silver))
    # Quarantined: the bronze rows the rule holds for; the appended source rows are not checked.
    quarantined = store.read("it_silver.customers_quarantine")
    deletes = shaped(lake, bronze_rows, "customers").where("operation IN ('DELETE')")
    assert deletes.count() == 6
    assertDataFrameEqual(quarantined, typed_like(deletes, quarantined))
