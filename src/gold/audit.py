# Gold: audit (CONTRACT §7). Every applied change and transaction with who (user, role), when and
# what (changed columns, values before and after), up to the replicas' commit point; and the
# views an auditor asks for first. See docs/gold.md.
from pyspark import pipelines as dp

from cdc_lakehouse.gold import audit, inputs
from cdc_lakehouse.gold.coherent import source_changes_due
from cdc_lakehouse.gold.enrichments import taken_changes, with_enrichments
from cdc_lakehouse.gold.schemas import (
    AUDIT_CHANGES_BY_USER_DAY, AUDIT_LOG, AUDIT_ROW_LAST_CHANGE, AUDIT_TRANSACTIONS,
)
from cdc_lakehouse.settings import REFRESH_BY_PARTITION, PipelineSettings

settings = PipelineSettings.from_spark(spark)
AUDIT_LOG_TABLE = inputs.gold_name(settings, AUDIT_LOG.name)
AUDIT_TRANSACTIONS_TABLE = inputs.gold_name(settings, AUDIT_TRANSACTIONS.name)


def define_audit() -> None:
    """The audit tables and views; an onboarding of dlt-meta flows only has no change to audit."""
    dp.create_streaming_table(**AUDIT_LOG.options(settings.gold))
    dp.create_streaming_table(**AUDIT_TRANSACTIONS.options(settings.gold))

    def define_audit_log(source: str) -> None:
        """Each update applies the source's changes between the old commit point and the new one."""
        view = f"gold_{source}_audit_changes"

        @dp.temporary_view(name=view, comment=f"Audit rows of the changes of {source} that gold takes in this update, "
                           "and of those it took whose user a session that landed later corrects.")
        def due():
            due = source_changes_due(spark.readStream.table, spark.read.table, settings, source)
            if not inputs.has_enrichments(settings, source):
                return audit.due_audit_rows(due, settings, source)
            enriched = inputs.enrichments_table(settings, source)
            taken = taken_changes(spark.readStream.table(enriched), spark.read.table(inputs.changes_table(settings, source)),
                                  audit.watermarks(spark.read.table, settings), source)
            changes = due.unionByName(taken, allowMissingColumns=True)
            return audit.due_audit_rows(with_enrichments(changes, spark.read.table(enriched)), settings, source)

        dp.create_auto_cdc_flow(target=AUDIT_LOG_TABLE, source=view, keys=audit.AUDIT_KEYS,
                                sequence_by=audit.audit_sequence(), name=f"gold_{source}_audit_log")


    def define_audit_transactions(source: str) -> None:
        """Each update applies the transactions of the source's changes between the old commit point
        and the new one."""
        view = f"gold_{source}_audit_transaction_rows"

        @dp.temporary_view(name=view, comment=f"Audit rows of the transactions of {source} that gold takes in this update.")
        def due():
            transactions = spark.read.table(inputs.transactions_table(settings, source))
            changes = spark.read.table(inputs.changes_table(settings, source))
            points = audit.watermarks(spark.read.table, settings)
            rows = audit.due_audit_transactions(
                source_changes_due(spark.readStream.table, spark.read.table, settings, source),
                transactions, changes, points, source,
            )
            if not inputs.has_enrichments(settings, source):
                return rows
            enriched = spark.readStream.table(inputs.enrichments_table(settings, source))
            return rows.unionByName(audit.enriched_audit_transactions(enriched, transactions, changes, points, source))

        dp.create_auto_cdc_flow(target=AUDIT_TRANSACTIONS_TABLE, source=view, keys=audit.AUDIT_TRANSACTION_KEYS,
                                sequence_by=audit.KNOWN, except_column_list=[audit.KNOWN],
                                name=f"gold_{source}_audit_transactions")


    for source in inputs.sources(settings):
        if inputs.has_change_stream(settings, source):
            define_audit_log(source)
            define_audit_transactions(source)


    # Per group: an update recomputes the groups (day, user, role, table) with new audit rows, and
    # per row the rows whose keys have new audit rows (runtime/partition_refresh.py).
    BY_USER_DAY = AUDIT_CHANGES_BY_USER_DAY.options(settings.gold)
    BY_USER_DAY["table_properties"][REFRESH_BY_PARTITION] = "source,user,role,schema,table,day=to_date(commit_ts)"


    @dp.materialized_view(**BY_USER_DAY)
    def audit_changes_by_user_day():
        return audit.changes_by_user_day(spark.read.table(AUDIT_LOG_TABLE))


    LAST_CHANGE = AUDIT_ROW_LAST_CHANGE.options(settings.gold)
    LAST_CHANGE["table_properties"][REFRESH_BY_PARTITION] = "source,schema,table,key"


    @dp.materialized_view(**LAST_CHANGE)
    def audit_row_last_change():
        return audit.row_last_change(spark.read.table(AUDIT_LOG_TABLE))



if inputs.sources(settings):
    define_audit()
