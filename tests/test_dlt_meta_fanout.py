"""dlt-meta's "silver fanout" demo (tests/data/dlt_meta/fanout, README there) through
``cdc-lakehouse run --config``: flow 100 reads the demo's cars into the bronze table ``cars`` and
its silver ``cars_usa``; the silver-only flows 101-103 name no source of their own and fan that
bronze table out into ``cars_germany``, ``cars_uk`` and ``cars_japan`` through
``silver_transformation_json``.

Both ways a dlt-meta user runs them: the two files' flows onboarded together in one file, and the
fanout file run after the cars file on one lake (dlt-meta's demo onboards the cars file's layers,
then the fanout file's silver layer). A second file of cars then lands, and every table takes its
rows once. The tables must equal the cars files' rows, filtered and shaped in plain Python.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.cli import main
from cdc_lakehouse.storage import LakeStore

DATA = Path(__file__).parent / "data" / "dlt_meta" / "fanout"
CARS_FILE, FANOUT_FILE = "onboarding_cars.json", "onboarding_fanout_cars.json"
CARS = "demo/resources/data/cars"
COUNTRIES = {"cars_usa": "United States", "cars_germany": "Germany", "cars_uk": "United Kingdom",
             "cars_japan": "Japan"}
SHAPED = "full_name string, country string, brand string, model string, color string, cc_type string"
# Ours, not dlt-meta's: a second file of cars, in the demo file's columns, after the first update.
MORE_CARS = """first_name,last_name,country,brand,model,color,yom,cc_type
Ada,Lovelace,United Kingdom,Morgan,Plus Four,Green,1968,visa
Karl,Benz,Germany,Benz,Patent-Motorwagen,Black,1886,maestro
Kiichiro,Toyoda,Japan,Toyota,AA,Black,1936,jcb
Henry,Ford,United States,Ford,Model T,Black,1908,jcb
Enzo,Ferrari,Italy,Ferrari,125 S,Red,1947,visa
"""


def run(folder: Path, onboarding: str) -> None:
    landing = folder / "landing"  # change-stream flows only; these files have none
    landing.mkdir(exist_ok=True)
    assert main(["run", "--config", str(folder / onboarding), "--env", "demo", "--landing", str(landing),
                 "--lake", str(folder / "lake")]) == 0


def one_file(folder: Path) -> None:
    """Both files' flows in one onboarding file: one update fills bronze and every silver table."""
    flows = [flow for name in (CARS_FILE, FANOUT_FILE) for flow in json.loads((folder / name).read_text())]
    (folder / "onboarding_all.json").write_text(json.dumps(flows, indent=2))
    run(folder, "onboarding_all.json")


def one_after_the_other(folder: Path) -> None:
    """The cars file's update, then the fanout file's, on the same lake."""
    run(folder, CARS_FILE)
    run(folder, FANOUT_FILE)


@pytest.fixture(scope="module", params=[one_file, one_after_the_other], ids=["one file", "one after the other"])
def fanout(request, spark, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("dlt_meta_fanout")
    shutil.copytree(DATA, folder, dirs_exist_ok=True)
    request.param(folder)
    (folder / CARS / "more_cars.csv").write_text(MORE_CARS)
    request.param(folder)
    return folder


def cars(folder: Path) -> list[dict[str, str]]:
    """Every row of the cars files, as the CSV header names its values."""
    rows: list[dict[str, str]] = []
    for file in sorted((folder / CARS).glob("*.csv")):
        with file.open(newline="", encoding="utf-8") as lines:
            rows += csv.DictReader(lines)
    return rows


def fanned_out(spark: SparkSession, folder: Path, table: str) -> DataFrame:
    """The reference: the demo's transformation of ``table`` (its country's cars, with the name
    joined) written out in Python."""
    rows = [(f"{car['first_name']} {car['last_name']}", car["country"], car["brand"], car["model"], car["color"],
             car["cc_type"]) for car in cars(folder) if car["country"] == COUNTRIES[table]]
    assert rows  # every country has cars in the demo's file
    return spark.createDataFrame(rows, SHAPED)


def test_the_bronze_table_holds_every_car_once(spark, fanout):
    bronze = LakeStore(spark, fanout / "lake").read("dlt_meta_bronze.cars")
    columns = list(cars(fanout)[0])
    expected = spark.createDataFrame([tuple(car.values()) for car in cars(fanout)], ", ".join(
        f"{column} string" for column in columns))
    assertDataFrameEqual(bronze.select(columns), expected)
    assert bronze.where("_rescued_data IS NOT NULL").isEmpty()


@pytest.mark.parametrize("table", COUNTRIES)
def test_each_silver_table_holds_its_countrys_cars(spark, fanout, table):
    silver = LakeStore(spark, fanout / "lake").read(f"dlt_meta_silver.{table}")
    assertDataFrameEqual(silver, fanned_out(spark, fanout, table))
