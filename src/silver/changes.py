# Silver: the change stream of each source, one row per net change of a row in a committed
# transaction (CONTRACT §2-§3). One streaming table per source, filled by one append flow per
# kind of input (binlog or shadow capture; snapshot corrections add theirs). Held transactions
# (no commit yet) are completed in a later run.
from pyspark import pipelines as dp

from cdc_lakehouse.bronze.kinds import onboarded_tables
from cdc_lakehouse.settings import PipelineSettings
from cdc_lakehouse.silver.binlog_gaps import with_gaps
from cdc_lakehouse.silver.change_stream import binlog_change_batch, shadow_change_batch
from cdc_lakehouse.silver.shadow_gaps import outstanding, without_held

settings = PipelineSettings.from_spark(spark)


def changes_table(source: str) -> str:
    name = f"{settings.silver}.{source}_changes"
    dp.create_streaming_table(
        name,
        comment=f"Net change per committed transaction and row of source {source}, in commit order "
        "(sequence); the input of every replica and audit view.",
        table_properties={"quality": "silver"},
    )
    return name


def define_binlog_changes(source: str) -> None:
    events = f"{settings.bronze}.{source}_binlog_events"
    quarantined = f"{events}_quarantine"  # its placeable lines hold their transactions (binlog_gaps.py)

    @dp.append_flow(target=changes_table(source), name=f"{source}_binlog_changes")
    def binlog_changes():
        return binlog_change_batch(
            with_gaps(spark.readStream.table(events), spark.readStream.table(quarantined)),
            with_gaps(spark.read.table(events), spark.read.table(quarantined)),
            spark.read.table(f"{settings.bronze}.{source}_sessions"),
        )


def define_shadow_changes(source: str) -> None:
    changes = f"{settings.bronze}.{source}_shadow_changes"
    txns = f"{settings.bronze}.{source}_shadow_transactions"

    corrections = f"{settings.silver}.{source}_snapshot_corrections"  # silver/snapshot_corrections.py

    @dp.append_flow(target=changes_table(source), name=f"{source}_shadow_changes")
    def shadow_changes():
        # A transaction with a quarantined change line waits as if its transaction row had not landed.
        held = outstanding(spark.read.table(f"{changes}_quarantine"), spark.read.table(changes),
                           onboarded_tables(settings.onboarding, source))
        return shadow_change_batch(
            spark.readStream.table(changes).filter("_onboarded"), without_held(spark.readStream.table(txns), held),
            spark.read.table(changes).filter("_onboarded"), without_held(spark.read.table(txns), held),
            (spark.readStream.table(corrections), spark.read.table(corrections)),
        )


for source in settings.sources("binlog"):
    define_binlog_changes(source)
for source in settings.sources("shadow"):
    define_shadow_changes(source)
