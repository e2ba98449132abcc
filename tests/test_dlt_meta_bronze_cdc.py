"""dlt-meta's ``bronze_cdc_apply_changes`` through ``cdc-lakehouse run --config``: a cloudFiles
feed's changes applied with AUTO CDC into its bronze table, as dlt-meta's ``cdc_apply_changes``
does, with dlt-meta's keys and defaults.

The file is dlt-meta's own (tests/data/dlt_meta/bronze_cdc, README there): its unit tests'
``onboarding_ac_bronze_type2.json``, products and stores from AWS DMS full loads, SCD2. Beside
its two flows the test onboards the stores feed again with ``scd_type: "1"``. A first update reads the
full loads; a second the demo's incremental files (tests/data/dlt_meta/demo) and a delete of our
own. As for silver, the bronze table is the current state and SCD2 adds ``<bronze_table>_history``;
both must equal the changes applied in plain Python.
"""

from __future__ import annotations

import copy
import csv
import json
import shutil
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.cli import main
from cdc_lakehouse.storage import LakeStore

DATA = Path(__file__).parent / "data" / "dlt_meta"
UPSTREAM = "onboarding_ac_bronze_type2.json"
ONBOARDING = "onboarding_scd1_and_scd2.json"
FEEDS = "tests/resources/data"
# table -> key, other columns and their types (dlt-meta's DDL, Op and dmsTimestamp left out)
COLUMNS = {"products": {"product_id": int, "name": str, "price": float}, "stores": {"store_id": str, "address": str}}
# Ours, not dlt-meta's (its files have no delete): AWS DMS deletes after the demo's changes.
DELETES = {"products": "Op,dmsTimestamp,product_id,name,price\nD,2022-06-24 19:10:00.000000,3,hat,914.34\n",
           "stores": 'Op,dmsTimestamp,store_id,address\nD,2022-06-24 19:10:00.000000,6,"1705 Mary Pike Apt. 820"\n'}


def with_an_scd1_copy(folder: Path) -> None:
    """dlt-meta's two flows, and its stores flow again as ``stores_scd1`` with scd_type 1 ..."""
    flows = json.loads((folder / UPSTREAM).read_text())
    [scd1] = [copy.deepcopy(flow) for flow in flows if flow["bronze_table"] == "stores"]
    scd1.update(data_flow_id="2021", bronze_table="stores_scd1")
    # ... sequenced by two columns, which dlt-meta orders as a struct: the same order here, as no
    # store changes twice at one dmsTimestamp; its addresses' NULLs ignored (it has none: the key
    # is only passed through, tests/test_auto_cdc_null_updates.py tests what it does)
    scd1["bronze_cdc_apply_changes"].update(scd_type="1", sequence_by="dmsTimestamp, store_id",
                                            ignore_null_updates_column_list=["address"])
    (folder / ONBOARDING).write_text(json.dumps([*flows, scd1], indent=2))


def run(folder: Path) -> None:
    landing = folder / "landing"  # change-stream flows only; this file has none
    landing.mkdir(exist_ok=True)
    assert main(["run", "--config", str(folder / ONBOARDING), "--env", "dev", "--landing", str(landing),
                 "--lake", str(folder / "lake")]) == 0


@pytest.fixture(scope="module")
def bronze(spark, tmp_path_factory) -> Path:
    """One lake: the full loads in a first update, the demo's changes and deletes in a second."""
    folder = tmp_path_factory.mktemp("dlt_meta_bronze_cdc")
    shutil.copytree(DATA / "bronze_cdc", folder, dirs_exist_ok=True)
    with_an_scd1_copy(folder)
    run(folder)
    for table in COLUMNS:
        for file in (DATA / "demo/resources/incremental_data" / table).iterdir():
            shutil.copy(file, folder / FEEDS / table / file.name)
        (folder / FEEDS / table / "zz-delete.csv").write_text(DELETES[table])
    run(folder)
    return folder


def changes(folder: Path, table: str) -> list[dict[str, str | None]]:
    """Every change row of the table's files in sequence (dmsTimestamp) order; no Op: a load."""
    rows: list[dict[str, str | None]] = []
    for file in sorted((folder / FEEDS / table).glob("*.csv")):
        with file.open(newline="", encoding="utf-8") as lines:
            rows += [{"Op": None, **row} for row in csv.DictReader(lines)]
    return sorted(rows, key=lambda row: str(row["dmsTimestamp"]))


def history(folder: Path, table: str) -> list[tuple]:
    """The reference SCD2: per key, a version from each change that is no delete, from its
    dmsTimestamp to the key's next change (None: current); an unchanged row opens none."""
    key, columns = next(iter(COLUMNS[table])), COLUMNS[table]
    closed, current = [], {}
    for row in changes(folder, table):
        values = tuple(kind(row[name]) for name, kind in columns.items())
        if row["Op"] != "D" and current.get(row[key], (None,))[:-1] == values:
            continue
        if row[key] in current:
            closed.append((*current.pop(row[key]), row["dmsTimestamp"]))
        if row["Op"] != "D":
            current[row[key]] = (*values, row["dmsTimestamp"])
    return closed + [(*version, None) for version in current.values()]


def schema(table: str, *extra: str) -> str:
    types = {int: "int", str: "string", float: "double"}
    return ", ".join([f"{name} {types[kind]}" for name, kind in COLUMNS[table].items()] + list(extra))


def read(spark: SparkSession, folder: Path, table: str, columns: list[str]) -> DataFrame:
    return LakeStore(spark, folder / "lake").read(f"bronze.{table}").select(columns)


def test_an_scd1_bronze_table_is_its_changes_applied(spark, bronze, table="stores"):
    rows = [version[:-2] for version in history(bronze, table) if version[-1] is None]
    assert len(rows) < len({row[next(iter(COLUMNS[table]))] for row in changes(bronze, table)})  # a delete
    assertDataFrameEqual(read(spark, bronze, f"{table}_scd1", list(COLUMNS[table])),
                         spark.createDataFrame(rows, schema(table)))


@pytest.mark.parametrize("table", COLUMNS)
def test_an_scd2_bronze_table_is_the_current_state_beside_its_history(spark, bronze, table):
    versions = history(bronze, table)
    assert any(version[-1] is not None for version in versions)  # a version was closed
    columns = [*COLUMNS[table], "__START_AT", "__END_AT"]
    assertDataFrameEqual(read(spark, bronze, f"{table}_history", columns),
                         spark.createDataFrame(versions, schema(table, "__START_AT string", "__END_AT string")))
    current = [version[:-2] for version in versions if version[-1] is None]
    assertDataFrameEqual(read(spark, bronze, table, list(COLUMNS[table])), spark.createDataFrame(current, schema(table)))
