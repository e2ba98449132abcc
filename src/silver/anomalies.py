# Silver: the anomalies of each source's change stream (issue #4, apply policy): impossible pairs of
# operations inside a transaction, inserts of existing keys, updates and deletes of missing keys,
# and changes the replicas cannot apply, each with its transaction and what the replicas did with
# it. Computed from the whole change stream, so re-delivered or re-emitted changes count once.
# Every window partitions by the row (ROW_ID), so a refresh needs to recompute only the rows with
# new changes: Databricks incrementalizes such a view, the local runtime does when the view names
# its partition columns in REFRESH_BY_PARTITION.
from pyspark import pipelines as dp

from cdc_lakehouse.settings import CHANGE_STREAM_CAPTURES, REFRESH_BY_PARTITION, PipelineSettings
from cdc_lakehouse.silver.apply_policy import ANOMALIES_COMMENT, ROW_ID, anomalies, anomalies_ddl
from cdc_lakehouse.silver.declared_types import declared_table
from cdc_lakehouse.silver.replica_input import replica_keys

settings = PipelineSettings.from_spark(spark)


def define_anomalies(source: str) -> None:
    flows = settings.onboarding.for_source(source)
    declared = [t for t in map(declared_table, flows) if t]

    @dp.materialized_view(
        name=f"{settings.silver}.{source}_anomalies",
        comment=f"{ANOMALIES_COMMENT} Source: {source}.",
        schema=anomalies_ddl(),
        table_properties={"quality": "silver", REFRESH_BY_PARTITION: ",".join(ROW_ID)},
    )
    def source_anomalies():
        return anomalies(spark.read.table(f"{settings.silver}.{source}_changes"), declared, replica_keys(flows))


# Only sources with a change stream (silver/changes.py builds one per binlog or shadow source).
for source in sorted({s for capture in CHANGE_STREAM_CAPTURES for s in settings.sources(capture)}):
    define_anomalies(source)
