# Gold: what landed, per source and bronze table: rows kept, files, lines quarantined and rows of
# tables that are not onboarded (kept in bronze, not carried to silver). See docs/bronze.md.
from pyspark import pipelines as dp

from cdc_lakehouse.bronze.summary import landing_summary as summarize
from cdc_lakehouse.settings import PipelineSettings

settings = PipelineSettings.from_spark(spark)


# The change-stream landing; an onboarding of dlt-meta flows only has none.
if settings.onboarding.flows:
    @dp.materialized_view(
        name=f"{settings.gold}.landing_summary",
        comment="Per source and bronze table: rows kept, files read, lines quarantined, rows of tables not onboarded.",
        table_properties={"quality": "gold"},
    )
    def landing_summary():
        return summarize(spark.read.table, settings)
