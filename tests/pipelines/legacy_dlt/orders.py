# The basic pipeline (tests/pipelines/basic) in the legacy `import dlt` spelling: such files still run.
import dlt
from pyspark.sql import functions as F

LANDING = spark.conf.get("test.landing")


@dlt.table(name="bronze.orders_raw", comment="orders as they land", table_properties={"quality": "bronze"})
@dlt.expect("has_amount", "amount IS NOT NULL")
def orders_raw():
    return (
        spark.readStream.format("cloudFiles")
        .option("cloudFiles.format", "json")
        .schema("order_id long, customer string, amount double, region string")
        .load(f"{LANDING}/orders")
        .withColumn("source_file", F.col("_metadata.file_name"))
    )


@dlt.view(comment="orders that can be used")
@dlt.expect_or_drop("positive_amount", "amount > 0")
def valid_orders():
    return dlt.read_stream("bronze.orders_raw")


@dlt.table(name="silver.orders", partition_cols=["region"])
@dlt.expect_all({"known_customer": "customer IS NOT NULL"})
def orders():
    return dlt.read_stream("valid_orders").drop("source_file")


dlt.create_streaming_table("silver.all_events", expect_all_or_drop={"has_id": "id IS NOT NULL"})


@dlt.append_flow(target="silver.all_events", name="events_from_orders")
def events_from_orders():
    return dlt.read_stream("silver.orders").select(F.col("order_id").alias("id"), F.lit("order").alias("kind"))


@dlt.append_flow(target="silver.all_events", name="events_from_refunds")
def events_from_refunds():
    return (
        spark.readStream.format("cloudFiles")
        .option("cloudFiles.format", "json")
        .schema("id long, kind string")
        .load(f"{LANDING}/refunds")
    )


@dlt.materialized_view(name="gold.revenue_by_region")
def revenue_by_region():
    return dlt.read("silver.orders").groupBy("region").agg(F.sum("amount").alias("revenue"), F.count("*").alias("orders"))
