# Silver: every transaction of each source: committed, rolled back, or held (no commit yet).
import dlt

from cdc_lakehouse.settings import PipelineSettings
from cdc_lakehouse.silver.transactions_table import binlog_transactions_table, shadow_transactions_table

settings = PipelineSettings.from_spark(spark)


def define_binlog_transactions(source: str) -> None:
    @dlt.materialized_view(
        name=f"{settings.silver}.{source}_transactions",
        comment=f"Transactions of {source} with user, role, commit time and position, tables and row counts.",
        table_properties={"quality": "silver"},
    )
    def transactions():
        return binlog_transactions_table(
            dlt.read(f"{settings.bronze}.{source}_binlog_events"),
            dlt.read(f"{settings.bronze}.{source}_sessions"),
            dlt.read(f"{settings.silver}.{source}_changes"),
        )


def define_shadow_transactions(source: str) -> None:
    @dlt.materialized_view(
        name=f"{settings.silver}.{source}_transactions",
        comment=f"Transactions of {source} with user, role, commit time, tables and row counts; "
        "held ones (change rows without their transaction row yet) have status 'open'.",
        table_properties={"quality": "silver"},
    )
    def transactions():
        return shadow_transactions_table(
            source,
            dlt.read(f"{settings.bronze}.{source}_shadow_transactions"),
            dlt.read(f"{settings.bronze}.{source}_shadow_changes"),
            dlt.read(f"{settings.silver}.{source}_changes"),
        )


for source in settings.sources("binlog"):
    define_binlog_transactions(source)
for source in settings.sources("shadow"):
    define_shadow_transactions(source)
