# Silver: every transaction of each source: committed, rolled back, or held (no commit yet).
import dlt

from cdc_lakehouse.settings import PipelineSettings
from cdc_lakehouse.silver.shadow_transactions import TXN_KEY, shadow_transaction_batch
from cdc_lakehouse.silver.transactions_table import PROGRESS, TXN_KEYS, binlog_transaction_batch

settings = PipelineSettings.from_spark(spark)


def define_binlog_transactions(source: str) -> None:
    """Each update upserts the transactions its new binlog events belong to (transactions_table.py)."""
    events, changes = f"{settings.bronze}.{source}_binlog_events", f"{settings.silver}.{source}_changes"
    view = f"{source}_transaction_updates"

    @dlt.view(name=view, comment=f"The transactions of {source} that this update's binlog events begin, end or complete.")
    def transaction_updates():
        return binlog_transaction_batch(
            dlt.read_stream(events), dlt.read(events), dlt.read(f"{settings.bronze}.{source}_sessions"),
            dlt.read_stream(changes), dlt.read(changes),
        )

    name = f"{settings.silver}.{source}_transactions"
    dlt.create_streaming_table(
        name, comment=f"Transactions of {source} with user, role, commit time and position, tables and row counts.",
        table_properties={"quality": "silver"},
    )
    dlt.create_auto_cdc_flow(target=name, source=view, keys=TXN_KEYS, sequence_by=PROGRESS,
                             except_column_list=[PROGRESS], name=f"{source}_transactions")


def define_shadow_transactions(source: str) -> None:
    """Each update upserts the transactions its new shadow rows and changes belong to (shadow_transactions.py)."""
    txns, changes = f"{settings.bronze}.{source}_shadow_transactions", f"{settings.bronze}.{source}_shadow_changes"
    silver_changes = f"{settings.silver}.{source}_changes"
    view = f"{source}_transaction_updates"

    # Change rows of tables no flow onboards are left out as the change stream leaves them out:
    # an orphan one (no transaction row) would otherwise hold the source's gold forever.
    @dlt.view(name=view, comment=f"The transactions of {source} that this update's shadow rows land, hold or complete.")
    def transaction_updates():
        return shadow_transaction_batch(
            source, dlt.read_stream(txns), dlt.read(txns), dlt.read_stream(changes).filter("_onboarded"),
            dlt.read(changes).filter("_onboarded"),
            dlt.read_stream(silver_changes), dlt.read(silver_changes),
        )

    name = f"{settings.silver}.{source}_transactions"
    dlt.create_streaming_table(
        name, comment=f"Transactions of {source} with user, role, commit time, tables and row counts; "
        "held ones (change rows without their transaction row yet) have status 'open'.",
        table_properties={"quality": "silver"},
    )
    dlt.create_auto_cdc_flow(target=name, source=view, keys=TXN_KEY, sequence_by=PROGRESS,
                             except_column_list=[PROGRESS], name=f"{source}_transactions")


for source in settings.sources("binlog"):
    define_binlog_transactions(source)
for source in settings.sources("shadow"):
    define_shadow_transactions(source)
