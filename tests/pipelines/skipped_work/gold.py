# The views of the skipped-work pipeline (readings.py has the streaming flows).
from pyspark import pipelines as dp
from pyspark.sql import functions as F

THRESHOLD = float(spark.conf.get("test.threshold"))
CALLS = spark.conf.get("test.calls")


@dp.materialized_view(name="gold.totals")
def totals():
    with open(f"{CALLS}/calls.txt", "a") as calls:  # the query is built: see readings.py
        calls.write("gold.totals\n")
    return spark.read.table("silver.readings").groupBy("sensor").agg(F.sum("value").alias("total"))


@dp.materialized_view(name="gold.above_threshold")
def above_threshold():
    return spark.read.table("silver.readings").filter(F.col("value") > THRESHOLD)


@dp.materialized_view(name="gold.sensors_seen")
def sensors_seen():
    return spark.read.table("silver.readings").select("sensor").distinct().withColumn("seen_at", F.current_timestamp())


@dp.materialized_view(name="gold.doubled_values")
def doubled_values():
    """A Python lambda: its variable's name changes from one update to the next."""
    readings = spark.read.table("silver.readings")
    values = readings.groupBy("sensor").agg(F.sort_array(F.collect_list("value")).alias("values"))
    return values.select("sensor", F.transform("values", lambda v: v * 2).alias("doubled"))
