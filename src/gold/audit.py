# Gold: audit (CONTRACT §7). Every applied change and transaction with who (user, role), when and
# what (changed columns, values before and after), up to the replicas' commit point; and the
# views an auditor asks for first. See docs/gold.md.
import dlt

from cdc_lakehouse.gold import audit, inputs
from cdc_lakehouse.gold.coherent import source_changes_due
from cdc_lakehouse.gold.schemas import (
    AUDIT_CHANGES_BY_USER_DAY, AUDIT_LOG, AUDIT_ROW_LAST_CHANGE, AUDIT_TRANSACTIONS,
)
from cdc_lakehouse.settings import REFRESH_BY_PARTITION, PipelineSettings

settings = PipelineSettings.from_spark(spark)
AUDIT_LOG_TABLE = inputs.gold_name(settings, AUDIT_LOG.name)

dlt.create_streaming_table(**AUDIT_LOG.options(settings.gold))


def define_audit_log(source: str) -> None:
    """Each update applies the source's changes between the old commit point and the new one."""
    view = f"gold_{source}_audit_changes"

    @dlt.view(name=view, comment=f"Audit rows of the changes of {source} that gold takes in this update.")
    def due():
        return audit.due_audit_rows(source_changes_due(dlt.read_stream, dlt.read, settings, source), settings, source)

    dlt.create_auto_cdc_flow(target=AUDIT_LOG_TABLE, source=view, keys=audit.AUDIT_KEYS, sequence_by="sequence",
                             name=f"gold_{source}_audit_log")


for source in inputs.sources(settings):
    if inputs.has_change_stream(settings, source):
        define_audit_log(source)


@dlt.materialized_view(**AUDIT_TRANSACTIONS.options(settings.gold))
def audit_transactions():
    return audit.audit_transactions(dlt.read, settings)


@dlt.materialized_view(**AUDIT_CHANGES_BY_USER_DAY.options(settings.gold))
def audit_changes_by_user_day():
    return audit.changes_by_user_day(dlt.read(AUDIT_LOG_TABLE))


# Per row: an update recomputes the rows whose keys have new audit rows (runtime/partition_refresh.py).
LAST_CHANGE = AUDIT_ROW_LAST_CHANGE.options(settings.gold)
LAST_CHANGE["table_properties"][REFRESH_BY_PARTITION] = "source,schema,table,key"


@dlt.materialized_view(**LAST_CHANGE)
def audit_row_last_change():
    return audit.row_last_change(dlt.read(AUDIT_LOG_TABLE))
