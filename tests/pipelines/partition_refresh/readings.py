# A streaming table of readings and a materialized view refreshed by partition (the sensor).
from pyspark import pipelines as dp
from pyspark.sql import Window
from pyspark.sql import functions as F

from cdc_lakehouse.settings import REFRESH_BY_PARTITION

LANDING = spark.conf.get("test.landing")


# The input sorts after the view, so the runner reaches the view first: the view must bring its
# input up to date before it picks the partitions to recompute.
@dp.table(name="staging.readings")
def readings():
    return (
        spark.readStream.format("cloudFiles")
        .option("cloudFiles.format", "json")
        .schema("sensor string, at long, value double")
        .load(f"{LANDING}/readings")
    )


@dp.materialized_view(name="silver.reading_steps", table_properties={REFRESH_BY_PARTITION: "sensor"})
def reading_steps():
    return steps(spark.read.table("staging.readings"))


def steps(df):
    """Each reading with the one before it of the same sensor: a late reading changes its
    successor's row, so a refresh must recompute the whole sensor."""
    in_order = Window.partitionBy("sensor").orderBy("at")
    return df.select("sensor", "at", "value", F.lag("value").over(in_order).alias("previous"))


@dp.temporary_view(name="recent_readings")
def recent_readings():
    return spark.read.table("staging.readings").filter("at >= 0")


@dp.materialized_view(name="silver.recent_steps", table_properties={REFRESH_BY_PARTITION: "sensor"})
def recent_steps():
    return steps(spark.read.table("recent_readings"))


# A partition column derived from the input: the bucket of ten time units a reading falls in.
@dp.materialized_view(name="silver.reading_buckets",
                      table_properties={REFRESH_BY_PARTITION: "sensor,bucket=floor(at / 10)"})
def reading_buckets():
    return buckets(spark.read.table("staging.readings"))


def buckets(df):
    return df.groupBy("sensor", F.floor(F.col("at") / 10).alias("bucket")).agg(
        F.count(F.lit(1)).alias("readings"), F.sum("value").alias("total"))
