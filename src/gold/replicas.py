# Gold: coherent replicas (CONTRACT §6). Every gold replica of a source shows the source's tables
# at one commit point, gold.replication_watermark: all changes of every transaction up to it, in
# every table, none after it. They are built from the source's silver change stream (one Delta
# table, appended in whole transactions in commit order), never from the silver replicas, which
# are updated one by one and can disagree for a while. See docs/gold.md.
import dlt

from cdc_lakehouse.gold import inputs
from cdc_lakehouse.gold.commit_point import replication_watermark as watermark_of
from cdc_lakehouse.gold.replicas import replica_at, replica_comment
from cdc_lakehouse.gold.schemas import REPLICATION_WATERMARK
from cdc_lakehouse.settings import PipelineSettings

settings = PipelineSettings.from_spark(spark)
WATERMARK = inputs.gold_name(settings, REPLICATION_WATERMARK.name)


@dlt.materialized_view(**REPLICATION_WATERMARK.options(settings.gold))
def replication_watermark():
    return watermark_of(dlt.read, settings)


def define_replica(flow) -> None:
    @dlt.materialized_view(
        name=inputs.gold_name(settings, flow.gold_table),
        comment=replica_comment(flow),
        table_properties={"quality": "gold"},
    )
    def replica():
        return replica_at(dlt.read(inputs.changes_table(settings, flow.source)), flow, dlt.read(WATERMARK))


for flow in settings.onboarding.flows:
    define_replica(flow)
