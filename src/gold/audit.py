# Gold: audit (CONTRACT §7). Every applied change and transaction with who (user, role), when and
# what (changed columns, values before and after), up to the replicas' commit point; and the
# views an auditor asks for first. See docs/gold.md.
import dlt

from cdc_lakehouse.gold import audit, inputs
from cdc_lakehouse.gold.schemas import (
    AUDIT_CHANGES_BY_USER_DAY, AUDIT_LOG, AUDIT_ROW_LAST_CHANGE, AUDIT_TRANSACTIONS,
)
from cdc_lakehouse.settings import PipelineSettings

settings = PipelineSettings.from_spark(spark)
AUDIT_LOG_TABLE = inputs.gold_name(settings, AUDIT_LOG.name)


@dlt.materialized_view(**AUDIT_LOG.options(settings.gold))
def audit_log():
    return audit.audit_log(dlt.read, settings)


@dlt.materialized_view(**AUDIT_TRANSACTIONS.options(settings.gold))
def audit_transactions():
    return audit.audit_transactions(dlt.read, settings)


@dlt.materialized_view(**AUDIT_CHANGES_BY_USER_DAY.options(settings.gold))
def audit_changes_by_user_day():
    return audit.changes_by_user_day(dlt.read(AUDIT_LOG_TABLE))


@dlt.materialized_view(**AUDIT_ROW_LAST_CHANGE.options(settings.gold))
def audit_row_last_change():
    return audit.row_last_change(dlt.read(AUDIT_LOG_TABLE))
