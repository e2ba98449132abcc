# Silver: per onboarded table, the current-state replica (SCD1) and its history (SCD2), applied
# from the change stream with AUTO CDC in commit order.
import dlt
from pyspark.sql import functions as F

from cdc_lakehouse.settings import CHANGE_STREAM_CAPTURES, PipelineSettings
from cdc_lakehouse.silver.declared_types import declared_table
from cdc_lakehouse.silver.replica_input import replica_changes

settings = PipelineSettings.from_spark(spark)


def define_replica(flow) -> None:
    view = f"{flow.source}_{flow.schema_name}_{flow.table_name}_changes"
    declared = declared_table(flow)  # read here: a bad schema file fails the update at once

    @dlt.view(name=view, comment=f"Typed net changes of {flow.qualified_table} from {flow.source}.")
    def table_changes():
        changes = dlt.read_stream(f"{settings.silver}.{flow.source}_changes").filter(
            (F.col("schema") == flow.schema_name) & (F.col("table") == flow.table_name)
        )
        named = f"flow {flow.data_flow_id} ({flow.qualified_table})"
        return replica_changes(changes, flow.column_filters, declared, named, flow.keys)

    replica = f"{settings.silver}.{flow.silver_table}"
    dlt.create_streaming_table(replica, comment=f"Current state of {flow.qualified_table} at {flow.source}.",
                               table_properties={"quality": "silver", **flow.silver_table_properties})
    dlt.create_auto_cdc_flow(target=replica, source=view, **flow.apply_changes_args(1))
    if flow.scd2_table:
        history = f"{settings.silver}.{flow.scd2_table}"
        dlt.create_streaming_table(history, comment=f"History (SCD2) of {flow.qualified_table} at {flow.source}.",
                                   table_properties={"quality": "silver"})
        dlt.create_auto_cdc_flow(target=history, source=view, **flow.apply_changes_args(2))


for flow in settings.onboarding.flows:
    if flow.capture in CHANGE_STREAM_CAPTURES:
        define_replica(flow)
