# Gold: what arrived, per source and landing table (the thin end of the demo pipeline).
import dlt
from functools import reduce

from pyspark.sql import functions as F

from cdc_lakehouse.settings import PipelineSettings

settings = PipelineSettings.from_spark(spark)


def _bronze_tables() -> list[str]:
    names = []
    for source in settings.sources("binlog"):
        names += [f"{source}_binlog_events", f"{source}_sessions"]
    for source in settings.sources("shadow"):
        names.append(f"{source}_shadow_transactions")
    for flow in settings.onboarding.flows:
        if flow.capture == "shadow":
            names.append(f"{flow.source}_shadow_{flow.schema_name}_{flow.table_name}")
    return [f"{settings.bronze}.{n}" for n in names]


@dlt.materialized_view(
    name=f"{settings.gold}.landing_summary",
    comment="Rows landed per source and bronze table, with the files they came from.",
    table_properties={"quality": "gold"},
)
def landing_summary():
    parts = [
        dlt.read(name).groupBy("_source").agg(
            F.count(F.lit(1)).alias("rows"), F.countDistinct("_source_file").alias("files")
        ).select(F.col("_source").alias("source"), F.lit(name).alias("bronze_table"), "rows", "files")
        for name in _bronze_tables()
    ]
    return reduce(lambda a, b: a.unionByName(b), parts)
