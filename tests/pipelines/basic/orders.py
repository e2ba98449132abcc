# A small pipeline using every kind of dataset the runtime supports.
from pyspark import pipelines as dp
from pyspark.sql import functions as F

LANDING = spark.conf.get("test.landing")


@dp.table(name="bronze.orders_raw", comment="orders as they land", table_properties={"quality": "bronze"})
@dp.expect("has_amount", "amount IS NOT NULL")
def orders_raw():
    return (
        spark.readStream.format("cloudFiles")
        .option("cloudFiles.format", "json")
        .schema("order_id long, customer string, amount double, region string")
        .load(f"{LANDING}/orders")
        .withColumn("source_file", F.col("_metadata.file_name"))
    )


@dp.temporary_view(comment="orders that can be used")
@dp.expect_or_drop("positive_amount", "amount > 0")
def valid_orders():
    return spark.readStream.table("bronze.orders_raw")


@dp.table(name="silver.orders", partition_cols=["region"])
@dp.expect_all({"known_customer": "customer IS NOT NULL"})
def orders():
    return spark.readStream.table("valid_orders").drop("source_file")


dp.create_streaming_table("silver.all_events", expect_all_or_drop={"has_id": "id IS NOT NULL"})


@dp.append_flow(target="silver.all_events", name="events_from_orders")
def events_from_orders():
    return spark.readStream.table("silver.orders").select(F.col("order_id").alias("id"), F.lit("order").alias("kind"))


@dp.append_flow(target="silver.all_events", name="events_from_refunds")
def events_from_refunds():
    return (
        spark.readStream.format("cloudFiles")
        .option("cloudFiles.format", "json")
        .schema("id long, kind string")
        .load(f"{LANDING}/refunds")
    )


@dp.materialized_view(name="gold.revenue_by_region")
def revenue_by_region():
    orders = spark.read.table("silver.orders")
    return orders.groupBy("region").agg(F.sum("amount").alias("revenue"), F.count("*").alias("orders"))
