# AUTO CDC from a landing folder of change rows (id, value, op, seq): SCD1, SCD2 and snapshots.
from pyspark import pipelines as dp
from pyspark.sql.functions import col, expr

LANDING = spark.conf.get("test.landing")


@dp.temporary_view
def changes():
    return (
        spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
        .schema("id long, value string, op string, seq long").load(f"{LANDING}/changes")
    )


for scd in (1, 2):
    dp.create_streaming_table(f"silver.scd{scd}")
    dp.create_auto_cdc_flow(
        target=f"silver.scd{scd}", source="changes", keys=["id"], sequence_by=col("seq"),
        apply_as_deletes=expr("op = 'D'"), except_column_list=["op", "seq"], stored_as_scd_type=scd,
    )


@dp.temporary_view
def snapshot_source():
    return spark.read.format("json").schema("id long, value string").load(f"{LANDING}/snapshot")


dp.create_streaming_table("silver.from_snapshot")
dp.create_auto_cdc_from_snapshot_flow(target="silver.from_snapshot", source="snapshot_source", keys=["id"], stored_as_scd_type=2)
