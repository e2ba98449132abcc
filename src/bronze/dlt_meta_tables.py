# Bronze of plain dlt-meta flows (docs/onboarding.md, "Flow kinds"): a cdc_feed flow's files as
# they land (Auto Loader with the flow's reader options and schema, dlt-meta's metadata columns,
# expectations and quarantine table), or, with bronze_cdc_apply_changes, their changes applied with
# AUTO CDC (the bronze table is the current state; scd_type 2 adds <bronze_table>_history); its
# append flows' rows, and its sinks; a snapshot flow's successive full loads applied with AUTO CDC
# FROM SNAPSHOT.
# Separate from the change-stream bronze (landing_tables.py): per-table feeds, no transactions.
# A silver-only flow (no source_format) has no bronze here: it reads a bronze table another fills.
from pyspark import pipelines as dp

from cdc_lakehouse.bronze import dlt_meta
from cdc_lakehouse.settings import PipelineSettings

settings = PipelineSettings.from_spark(spark)


def define_feed(flow) -> None:
    view = f"dlt_meta_{flow.data_flow_id}_files"
    schema = dlt_meta.source_schema(flow)  # read here: a bad file fails the update at once
    rules = dlt_meta.expectations(flow, "bronze")
    properties = {**flow.bronze_table_properties, "quality": "bronze"}

    @dp.temporary_view(name=view, comment=f"Files of the dlt-meta flow {flow.data_flow_id} at {flow.source_path}.")
    def files():
        details = flow.source_details
        return dlt_meta.cloud_files(spark, flow.source_path, flow.bronze_reader_options, schema, details.source_metadata)

    if flow.bronze_cdc_apply_changes is None:
        dp.table(name=flow.bronze_target, comment=f"Raw rows of the dlt-meta flow {flow.data_flow_id}.",
                 table_properties=properties)(rules.decorate(dp, dlt_meta.stream_of(spark, view)))
    else:  # dlt-meta's bronze_cdc_apply_changes: the files' changes applied to the bronze table
        dlt_meta.define_auto_cdc(dp, spark, flow, "bronze", view, rules)
    dlt_meta.define_quarantine(dp, spark, flow, "bronze", view, rules)
    dlt_meta.define_append_flows(dp, spark, flow, "bronze", flow.bronze_target)
    dlt_meta.define_sinks(dp, spark, flow, "bronze", view)


def define_snapshot(flow) -> None:
    dp.create_streaming_table(flow.bronze_target, comment=f"Snapshots of the dlt-meta flow {flow.data_flow_id}.",
                              table_properties={**flow.bronze_table_properties, "quality": "bronze"})
    dp.create_auto_cdc_from_snapshot_flow(target=flow.bronze_target, source=snapshot_source(flow),
                                          **flow.bronze_apply_changes_from_snapshot.args())


def snapshot_source(flow):
    """Files: the next full load after the latest applied; delta: the source table as it is now."""
    if flow.source_details.snapshot_format != "delta":
        return dlt_meta.next_snapshot(spark, flow)
    view = f"dlt_meta_{flow.data_flow_id}_source"
    table = flow.source_details.table

    @dp.temporary_view(name=view, comment=f"The source table {table} of the dlt-meta flow {flow.data_flow_id}.")
    def source():
        return spark.read.table(table)

    return view


for flow in settings.onboarding.dlt_meta_flows:
    if not flow.has_bronze:
        continue  # a silver-only flow: another flow, or an earlier run, fills its bronze table
    if flow.enabled and flow.kind == "cdc_feed":
        define_feed(flow)
    elif flow.enabled and flow.kind == "snapshot":
        define_snapshot(flow)
