# Silver: the change stream of each source, one row per net change of a row in a committed
# transaction (CONTRACT §2-§3). Held transactions (no commit yet) are completed in a later run.
import dlt

from cdc_lakehouse.settings import PipelineSettings
from cdc_lakehouse.silver.change_stream import binlog_change_batch, shadow_change_batch

settings = PipelineSettings.from_spark(spark)


def define_binlog_changes(source: str) -> None:
    events = f"{settings.bronze}.{source}_binlog_events"

    @dlt.table(
        name=f"{settings.silver}.{source}_changes",
        comment=f"Net change per committed transaction and row, from the binlog of {source}.",
        table_properties={"quality": "silver"},
    )
    def changes():
        return binlog_change_batch(
            dlt.read_stream(events), dlt.read(events), dlt.read(f"{settings.bronze}.{source}_sessions")
        )


for source in settings.sources("binlog"):
    define_binlog_changes(source)


def define_shadow_changes(source: str) -> None:
    changes = f"{settings.bronze}.{source}_shadow_changes"
    txns = f"{settings.bronze}.{source}_shadow_transactions"

    @dlt.table(
        name=f"{settings.silver}.{source}_changes",
        comment=f"Net change per committed transaction and row, from the shadow tables of {source}.",
        table_properties={"quality": "silver"},
    )
    def changes_table():
        onboarded = dlt.read(changes).filter("_onboarded")
        return shadow_change_batch(
            dlt.read_stream(changes).filter("_onboarded"), dlt.read_stream(txns), onboarded, dlt.read(txns)
        )


for source in settings.sources("shadow"):
    define_shadow_changes(source)
