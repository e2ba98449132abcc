# Gold: coherent replicas (CONTRACT §6). Every gold replica of a source shows the source's tables
# at one commit point, gold.replication_watermark: all changes of every transaction up to it, in
# every table, none after it. They are built from the source's silver change stream (one Delta
# table, appended in whole transactions in commit order), never from the silver replicas, which
# are updated one by one and can disagree for a while. See docs/gold.md.
from pyspark import pipelines as dp

from cdc_lakehouse.gold import inputs
from cdc_lakehouse.gold.coherent import source_changes_due
from cdc_lakehouse.gold.commit_point import replication_watermark as watermark_of
from cdc_lakehouse.gold.replicas import replica_comment, typed_changes
from cdc_lakehouse.gold.schemas import REPLICATION_WATERMARK
from cdc_lakehouse.settings import PipelineSettings

settings = PipelineSettings.from_spark(spark)


# The commit point of the change-stream sources; dlt-meta flows end in silver.
if settings.onboarding.flows:
    @dp.materialized_view(**REPLICATION_WATERMARK.options(settings.gold))
    def replication_watermark():
        return watermark_of(spark.read.table, settings)


def define_replica(flow) -> None:
    """Each update applies the table's changes between the old commit point and the new one."""
    view = f"gold_{flow.gold_table}_changes"

    @dp.temporary_view(name=view, comment=f"Typed changes of {flow.qualified_table} that gold takes in this update.")
    def due():
        return typed_changes(source_changes_due(spark.readStream.table, spark.read.table, settings, flow.source), flow)

    replica = inputs.gold_name(settings, flow.gold_table)
    # Its Change Data Feed is what a consumer downstream of the replica streams (docs/gold.md).
    dp.create_streaming_table(replica, comment=replica_comment(flow),
                              table_properties={"quality": "gold", "delta.enableChangeDataFeed": "true"})
    dp.create_auto_cdc_flow(target=replica, source=view, name=f"gold_{flow.gold_table}", **flow.apply_changes_args(1))


for flow in settings.onboarding.flows:
    define_replica(flow)
