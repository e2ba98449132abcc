# Gold: replication health. Lag per source (last commit applied vs the update's time), held
# transactions and their age, quarantined lines and anomalies per table, rows per layer.
# Anomalies come from silver.<source>_anomalies (apply policy and impossible pairs), so every kind
# silver records reaches the dashboard. gold.replication_health is what `cdc-lakehouse remote health`
# prints. gold.replication_health_history keeps each update's health rows: lag over time. See
# docs/gold.md.
from pyspark import pipelines as dp

from cdc_lakehouse.gold import health
from cdc_lakehouse.gold.schemas import (
    DATA_QUALITY, HELD_TRANSACTIONS, REPLICATION_HEALTH, REPLICATION_HEALTH_HISTORY, REPLICATION_HEALTH_HISTORY_COMMENT,
    ROWS_PER_LAYER,
)
from cdc_lakehouse.settings import REPORTS_FAILURES, PipelineSettings

settings = PipelineSettings.from_spark(spark)
# The status of a source stopped by a failed flow comes from the update's event log: the local
# runtime refreshes this view after every other flow, even when what it reads failed.
HEALTH = REPLICATION_HEALTH.options(settings.gold)
HEALTH["table_properties"][REPORTS_FAILURES] = "true"
HISTORY = f"{settings.gold}.{REPLICATION_HEALTH_HISTORY}"


# Health of the change-stream sources; an onboarding of dlt-meta flows only has none.
if settings.onboarding.flows:
    @dp.materialized_view(**HEALTH)
    def replication_health():
        return health.replication_health(spark.read.table, settings)


    # A materialized view keeps no past rows: the history is the view's snapshot at each update,
    # applied as SCD type 2. It reports failures too, so the local runtime takes the snapshot
    # after the view, which it refreshes once this update's events are in the event log. A full
    # refresh keeps it: nothing could compute the past again.
    dp.create_streaming_table(HISTORY, comment=REPLICATION_HEALTH_HISTORY_COMMENT, table_properties={
        "quality": "gold", REPORTS_FAILURES: "true", "pipelines.reset.allowed": "false"})
    dp.create_auto_cdc_from_snapshot_flow(target=HISTORY, source=HEALTH["name"], keys=["source"], stored_as_scd_type=2)


    @dp.materialized_view(**HELD_TRANSACTIONS.options(settings.gold))
    def held_transactions():
        return health.held_transactions(spark.read.table, settings)


    @dp.materialized_view(**DATA_QUALITY.options(settings.gold))
    def data_quality():
        return health.data_quality(spark.read.table, settings)


    @dp.materialized_view(**ROWS_PER_LAYER.options(settings.gold))
    def rows_per_layer():
        return health.rows_per_layer(spark.read.table, settings)
