# One view read by two tables: the second reader gets the first reader's rows when both read
# the same input (a random draw shows whether the view was evaluated once or twice).
from pyspark import pipelines as dp
from pyspark.sql import functions as F

LANDING = spark.conf.get("test.landing")


@dp.temporary_view(name="landed_items")
def landed_items():
    return (
        spark.readStream.format("cloudFiles").option("cloudFiles.format", "json").schema("id long")
        .load(f"{LANDING}/items")
        .withColumn("draw", F.rand())
    )


@dp.table(name="bronze.even_items")
@dp.expect_or_drop("even", "id % 2 = 0")
def even_items():
    return spark.readStream.table("landed_items")


@dp.table(name="bronze.all_items")
@dp.expect("small", "id < 100")
def all_items():
    return spark.readStream.table("landed_items")
