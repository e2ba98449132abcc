# Bronze of plain dlt-meta flows (docs/onboarding.md, "Flow kinds"): each flow's files as they
# land, or their changes applied with AUTO CDC, or a snapshot flow's successive full loads
# (cdc_lakehouse/bronze/dlt_meta_flows.py, which a dlt-meta notebook's invoke_dlt_pipeline shares).
# Separate from the change-stream bronze (landing_tables.py): per-table feeds, no transactions.
# A silver-only flow (no source_format) has no bronze here: it reads a bronze table another fills.
from pyspark import pipelines as dp

from cdc_lakehouse.bronze.dlt_meta_flows import define_bronze
from cdc_lakehouse.settings import PipelineSettings

settings = PipelineSettings.from_spark(spark)

for flow in settings.onboarding.dlt_meta_flows:
    define_bronze(dp, spark, flow)
