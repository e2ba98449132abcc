# Bronze of plain dlt-meta flows (docs/onboarding.md, "Flow kinds"): a cdc_feed flow's files as
# they land (Auto Loader with the flow's reader options and schema, dlt-meta's expectations and
# quarantine table); a snapshot flow's successive full loads applied with AUTO CDC FROM SNAPSHOT.
# Separate from the change-stream bronze (landing_tables.py): per-table feeds, no transactions.
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
        reader = spark.readStream.format("cloudFiles").options(**flow.bronze_reader_options)
        return (reader.schema(schema) if schema is not None else reader).load(flow.source_path)

    def rows():
        return spark.readStream.table(view)

    dp.table(name=flow.bronze_target, comment=f"Raw rows of the dlt-meta flow {flow.data_flow_id}.",
             table_properties=properties)(rules.decorate(dp, rows))
    if rules.expect_or_quarantine:
        define_quarantine(flow, view, rules)


def define_quarantine(flow, view: str, rules: dlt_meta.Expectations) -> None:
    """dlt-meta's quarantine table: the rows its expect_or_quarantine rules hold for."""
    if flow.bronze_quarantine_target is None:
        raise dlt_meta.DltMetaFileError(
            f"flow {flow.data_flow_id}: bronze_data_quality_expectations_json has expect_or_quarantine rules "
            "but the flow names no bronze_quarantine_table")

    def quarantined():
        return spark.readStream.table(view)

    properties = {**flow.bronze_quarantine_table_properties, "quality": "bronze"}
    dp.table(name=flow.bronze_quarantine_target, comment=f"Quarantined rows of the dlt-meta flow {flow.data_flow_id}.",
             table_properties=properties)(dp.expect_all_or_drop(rules.expect_or_quarantine)(quarantined))


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
    details = flow.source_details
    table = ".".join(p for p in (details.source_catalog, details.source_database, details.source_table) if p)

    @dp.temporary_view(name=view, comment=f"The source table {table} of the dlt-meta flow {flow.data_flow_id}.")
    def source():
        return spark.read.table(table)

    return view


for flow in settings.onboarding.dlt_meta_flows:
    if flow.enabled and flow.kind == "cdc_feed":
        define_feed(flow)
    elif flow.enabled and flow.kind == "snapshot":
        define_snapshot(flow)
