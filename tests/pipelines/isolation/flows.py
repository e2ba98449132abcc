# Two independent branches, one of which fails while test.fail is "true" (a row "boom" in bad/),
# and a reporter that reads the event log (tests/test_failure_isolation.py).
from pyspark import pipelines as dp
from pyspark.sql import functions as F

LANDING = spark.conf.get("test.landing")
FAIL = spark.conf.get("test.fail")


def landed(folder: str):
    return (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
            .schema("id long, v string").load(f"{LANDING}/{folder}"))


@dp.table(name="bronze.good")
def good():
    return landed("good")


@dp.table(name="bronze.bad")
def bad():
    return landed("bad")


@dp.table(name="silver.checked")
def checked():
    boom = (F.col("v") == "boom") & F.lit(FAIL == "true")
    return spark.readStream.table("bronze.bad").withColumn("v", F.when(boom, F.raise_error(F.lit("a boom row"))).otherwise(F.col("v")))


@dp.materialized_view(name="gold.checked_count")
def checked_count():
    return spark.read.table("silver.checked").agg(F.count(F.lit(1)).alias("rows"))


dp.create_streaming_table("silver.everything")


@dp.append_flow(target="silver.everything", name="everything_good")
def everything_good():
    return spark.readStream.table("bronze.good").withColumn("branch", F.lit("good"))


@dp.append_flow(target="silver.everything", name="everything_checked")
def everything_checked():
    return spark.readStream.table("silver.checked").withColumn("branch", F.lit("checked"))


@dp.materialized_view(name="gold.good_count")
def good_count():
    return spark.read.table("bronze.good").agg(F.count(F.lit(1)).alias("rows"))


@dp.materialized_view(name="gold.failures", table_properties={"cdc_lakehouse.reports_failures": "true"})
def failures():
    rows = spark.read.table("silver.everything").agg(F.count(F.lit(1)).alias("rows"))
    failed = spark.read.table("pipeline.event_log").filter(F.col("status") == "FAILED")
    return failed.select("update_id", "flow", "target", "message").crossJoin(rows)
