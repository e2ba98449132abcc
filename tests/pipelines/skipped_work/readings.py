# A pipeline for the work an update skips (tests/test_skipped_work.py). Each streaming flow
# appends its name to calls.txt in the folder `test.calls` whenever the runtime plans its query
# (a folder: the content of a file named by the configuration is part of every definition).
from pyspark import pipelines as dp

LANDING = spark.conf.get("test.landing")
CALLS = spark.conf.get("test.calls")
WITH_EXTRA = spark.conf.get("test.with_extra", "no") == "yes"


def planned(flow: str) -> None:
    with open(f"{CALLS}/calls.txt", "a") as calls:
        calls.write(flow + "\n")


def landed(folder: str):
    return (
        spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
        .schema("sensor string, value double").load(f"{LANDING}/{folder}")
    )


@dp.table(name="bronze.readings")
def readings_raw():
    planned("bronze.readings")
    return landed("readings")


@dp.table(name="bronze.extra_readings")
def extra_raw():
    planned("bronze.extra_readings")
    return landed("extra")


@dp.table(name="bronze.alerts")
def alerts_raw():
    planned("bronze.alerts")
    return landed("alerts")  # nothing ever lands here


dp.create_streaming_table("bronze.backfill")


@dp.append_flow(target="bronze.backfill", once=True)
def backfill_once():
    return landed("backfill")  # empty at the first update


@dp.table(name="silver.readings")
def readings():
    planned("silver.readings")
    df = spark.readStream.table("bronze.readings")
    return df.unionByName(spark.readStream.table("bronze.extra_readings")) if WITH_EXTRA else df
