# Silver: per onboarded table, the current-state replica (SCD1) and its history (SCD2), applied
# from the change stream with AUTO CDC in commit order.
from pyspark import pipelines as dp
from pyspark.sql import functions as F

from cdc_lakehouse.settings import CHANGE_STREAM_CAPTURES, PipelineSettings
from cdc_lakehouse.silver.declared_types import declared_table
from cdc_lakehouse.silver.replica_input import history_changes, replica_changes

settings = PipelineSettings.from_spark(spark)


def define_replica(flow) -> None:
    view = f"{flow.source}_{flow.schema_name}_{flow.table_name}_changes"
    declared = declared_table(flow)  # read here: a bad schema file fails the update at once

    changes = f"{settings.silver}.{flow.source}_changes"
    of_table = (F.col("schema") == flow.schema_name) & (F.col("table") == flow.table_name)
    typing = dict(column_filters=flow.column_filters, declared=declared,
                  table=f"flow {flow.data_flow_id} ({flow.qualified_table})", keys=flow.keys)

    @dp.temporary_view(name=view, comment=f"Typed net changes of {flow.qualified_table} from {flow.source}.")
    def table_changes():
        return replica_changes(spark.readStream.table(changes).filter(of_table), **typing)

    replica = f"{settings.silver}.{flow.silver_table}"
    dp.create_streaming_table(replica, comment=f"Current state of {flow.qualified_table} at {flow.source}.",
                              table_properties={"quality": "silver", **flow.silver_table_properties})
    dp.create_auto_cdc_flow(target=replica, source=view, **flow.apply_changes_args(1))
    if flow.scd2_table:
        history = f"{settings.silver}.{flow.scd2_table}"
        dp.create_streaming_table(history, comment=f"History (SCD2) of {flow.qualified_table} at {flow.source}.",
                                  table_properties={"quality": "silver"})
        history_view = f"{view}_for_history"

        @dp.temporary_view(name=history_view, comment=f"The typed changes of {flow.qualified_table}, each TRUNCATE as "
                           "DELETEs of the rows it removed (AUTO CDC cannot truncate SCD2).")
        def table_history_changes():
            return history_changes(spark.readStream.table(view), spark.read.table(changes).filter(of_table), **typing)

        dp.create_auto_cdc_flow(target=history, source=history_view, **flow.apply_changes_args(2))


for flow in settings.onboarding.flows:
    if flow.capture in CHANGE_STREAM_CAPTURES:
        define_replica(flow)
