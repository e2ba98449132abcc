# The views of the skipped-work pipeline (readings.py has the streaming flows).
import dlt
from pyspark.sql import functions as F

THRESHOLD = float(spark.conf.get("test.threshold"))
CALLS = spark.conf.get("test.calls")


@dlt.materialized_view(name="gold.totals")
def totals():
    with open(f"{CALLS}/calls.txt", "a") as calls:  # the query is built: see readings.py
        calls.write("gold.totals\n")
    return dlt.read("silver.readings").groupBy("sensor").agg(F.sum("value").alias("total"))


@dlt.materialized_view(name="gold.above_threshold")
def above_threshold():
    return dlt.read("silver.readings").filter(F.col("value") > THRESHOLD)


@dlt.materialized_view(name="gold.sensors_seen")
def sensors_seen():
    return dlt.read("silver.readings").select("sensor").distinct().withColumn("seen_at", F.current_timestamp())


@dlt.materialized_view(name="gold.doubled_values")
def doubled_values():
    """A Python lambda: its variable's name changes from one update to the next."""
    values = dlt.read("silver.readings").groupBy("sensor").agg(F.sort_array(F.collect_list("value")).alias("values"))
    return values.select("sensor", F.transform("values", lambda v: v * 2).alias("doubled"))
