# The worked example of Databricks' AUTO CDC documentation ("Example: SCD type 1 and SCD type 2
# processing with CDF source data"), as a pipeline file.
from pyspark import pipelines as dp
from pyspark.sql.functions import col, expr

LANDING = spark.conf.get("test.landing")


@dp.temporary_view
def users():
    return (
        spark.readStream.format("cloudFiles")
        .option("cloudFiles.format", "json")
        .schema("userId int, name string, city string, operation string, sequenceNum int")
        .load(LANDING)
    )


dp.create_streaming_table("default.target_scd1")
dp.create_auto_cdc_flow(
    target="default.target_scd1",
    source="users",
    keys=["userId"],
    sequence_by=col("sequenceNum"),
    apply_as_deletes=expr("operation = 'DELETE'"),
    apply_as_truncates=expr("operation = 'TRUNCATE'"),
    except_column_list=["operation", "sequenceNum"],
    stored_as_scd_type=1,
)

@dp.temporary_view
def users_without_truncates():
    # SCD2 has no truncate semantics, so the SCD2 targets read the changes without them.
    return spark.readStream.table("users").filter("operation <> 'TRUNCATE'")


dp.create_streaming_table("default.target_scd2")
dp.create_auto_cdc_flow(
    target="default.target_scd2",
    source="users_without_truncates",
    keys=["userId"],
    sequence_by=col("sequenceNum"),
    apply_as_deletes=expr("operation = 'DELETE'"),
    except_column_list=["operation", "sequenceNum"],
    stored_as_scd_type="2",
)

dp.create_streaming_table("default.target_scd2_partial")
dp.create_auto_cdc_flow(
    target="default.target_scd2_partial",
    source="users_without_truncates",
    keys=["userId"],
    sequence_by=col("sequenceNum"),
    apply_as_deletes=expr("operation = 'DELETE'"),
    except_column_list=["operation", "sequenceNum"],
    stored_as_scd_type="2",
    track_history_except_column_list=["city"],
)
