# Silver: every transaction of each source: committed, rolled back, or held (no commit yet).
from pyspark import pipelines as dp

from cdc_lakehouse.bronze.kinds import onboarded_tables
from cdc_lakehouse.settings import PipelineSettings
from cdc_lakehouse.silver.binlog_gaps import with_gaps
from cdc_lakehouse.silver.session_enrichment import enrichments
from cdc_lakehouse.silver.shadow_gaps import marked, outstanding, without_held
from cdc_lakehouse.silver.shadow_transactions import TXN_KEY, shadow_transaction_batch
from cdc_lakehouse.silver.transactions_table import PROGRESS, TXN_KEYS, binlog_transaction_batch

settings = PipelineSettings.from_spark(spark)


def appended_table(name: str, flow: str, comment: str):
    """A silver streaming table filled by one append flow: the query it decorates."""
    dp.create_streaming_table(name, comment=comment, table_properties={"quality": "silver"})
    return dp.append_flow(target=name, name=flow)


def define_binlog_transactions(source: str) -> None:
    """Each update appends the rows of the transactions its new binlog events belong to
    (transactions_table.py) to the versions table, which the transactions table upserts; and the
    rows its new sessions correct (session_enrichment.py), which it upserts too."""
    events, changes = f"{settings.bronze}.{source}_binlog_events", f"{settings.silver}.{source}_changes"
    quarantined = f"{events}_quarantine"  # as in silver/changes.py: placeable lines hold their transactions
    sessions = f"{settings.bronze}.{source}_sessions"
    versions = f"{settings.silver}.{source}_transaction_versions"
    enriched = f"{settings.silver}.{source}_session_enrichments"

    @appended_table(versions, f"{source}_transaction_versions", f"Every row of silver.{source}_transactions as the "
                    "binlog events made it, appended: where a session that lands later finds the transactions of its thread.")
    def transaction_versions():
        return binlog_transaction_batch(
            with_gaps(spark.readStream.table(events), spark.readStream.table(quarantined)),
            with_gaps(spark.read.table(events), spark.read.table(quarantined)),
            spark.read.table(sessions),
            spark.readStream.table(changes), spark.read.table(changes),
        )

    @appended_table(enriched, f"{source}_session_enrichments", f"Rows of silver.{source}_transactions whose user and "
                    "role a session that landed after them corrected, with enriched_at: when that session landed.")
    def session_enrichments():
        new_versions = spark.readStream.table(versions)  # a streaming query cannot tell this update's (enrichments)
        return enrichments(spark.readStream.table(sessions), spark.read.table(sessions), spark.read.table(versions),
                           None if new_versions.isStreaming else new_versions)

    name = f"{settings.silver}.{source}_transactions"
    dp.create_streaming_table(
        name, comment=f"Transactions of {source} with user, role, commit time and position, tables and row counts; "
        "enriched_at: when a session that landed after the transaction named its user.",
        table_properties={"quality": "silver"},
    )
    for flow, rows in ((f"{source}_transactions", versions), (f"{source}_transactions_enriched", enriched)):
        dp.create_auto_cdc_flow(target=name, source=rows, keys=TXN_KEYS, sequence_by=PROGRESS,
                                except_column_list=[PROGRESS], name=flow)


def define_shadow_transactions(source: str) -> None:
    """Each update upserts the transactions its new shadow rows and changes belong to (shadow_transactions.py)."""
    txns, changes = f"{settings.bronze}.{source}_shadow_transactions", f"{settings.bronze}.{source}_shadow_changes"
    silver_changes = f"{settings.silver}.{source}_changes"
    view = f"{source}_transaction_updates"

    # Change rows of tables no flow onboards are left out as the change stream leaves them out:
    # an orphan one (no transaction row) would otherwise hold the source's gold forever.
    @dp.temporary_view(name=view, comment=f"The transactions of {source} that this update's shadow rows land, "
                       "hold or complete.")
    def transaction_updates():
        # As in silver/changes.py: a transaction with a quarantined change line waits, and says why.
        held = outstanding(spark.read.table(f"{changes}_quarantine"), spark.read.table(changes),
                           onboarded_tables(settings.onboarding, source))
        return marked(shadow_transaction_batch(
            source, without_held(spark.readStream.table(txns), held), without_held(spark.read.table(txns), held),
            spark.readStream.table(changes).filter("_onboarded"), spark.read.table(changes).filter("_onboarded"),
            spark.readStream.table(silver_changes), spark.read.table(silver_changes),
        ), held)

    name = f"{settings.silver}.{source}_transactions"
    dp.create_streaming_table(
        name, comment=f"Transactions of {source} with user, role, commit time, tables and row counts; "
        "held ones have status 'open' (change rows without their transaction row yet) or 'incomplete' "
        "(a change line in quarantine: held_because).",
        table_properties={"quality": "silver"},
    )
    dp.create_auto_cdc_flow(target=name, source=view, keys=TXN_KEY, sequence_by=PROGRESS,
                            except_column_list=[PROGRESS], name=f"{source}_transactions")


for source in settings.sources("binlog"):
    define_binlog_transactions(source)
for source in settings.sources("shadow"):
    define_shadow_transactions(source)
