# Silver of plain dlt-meta flows (docs/onboarding.md, "Flow kinds"): the bronze rows through the
# flow's transformation and expectations, applied to the replicas with AUTO CDC or AUTO CDC FROM
# SNAPSHOT, or appended to a plain table (cdc_lakehouse/silver/dlt_meta_flows.py, which a dlt-meta
# notebook's invoke_dlt_pipeline shares). A bronze-only flow has no silver here; a silver-only flow
# reads a bronze table another flow of the file, or an earlier run on the lake, fills.
from pyspark import pipelines as dp

from cdc_lakehouse.settings import PipelineSettings
from cdc_lakehouse.silver.dlt_meta_flows import define_silver

settings = PipelineSettings.from_spark(spark)

for flow in settings.onboarding.dlt_meta_flows:
    define_silver(dp, spark, flow)
