# Silver of plain dlt-meta flows (docs/onboarding.md, "Flow kinds"): the bronze rows, through the
# flow's silver_transformation_json and expectations, applied to the replicas with AUTO CDC
# (cdc_feed with silver_cdc_apply_changes) or AUTO CDC FROM SNAPSHOT (snapshot), or appended to a
# plain table (cdc_feed without it); beside them dlt-meta's silver quarantine table, append flows
# and sinks. As for change-stream flows, silver_table is the current state (SCD1); scd_type 2 adds
# the history table <silver_table>_history. A bronze-only flow (no silver keys) has no silver here;
# a silver-only flow (no source_format) reads a bronze table that another flow of the file, or an
# earlier run on the lake, fills (dlt-meta's silver fanout), as dlt-meta's silver pipeline reads it.
from pyspark import pipelines as dp

from cdc_lakehouse.bronze import dlt_meta
from cdc_lakehouse.settings import PipelineSettings

settings = PipelineSettings.from_spark(spark)


def table_properties(flow) -> dict:
    return {**flow.silver_table_properties, "quality": "silver"}


def define_feed(flow) -> None:
    view = f"dlt_meta_{flow.data_flow_id}_transformed"
    shape = dlt_meta.transformation(flow)  # read here: a bad file fails the update at once
    rules = dlt_meta.expectations(flow, "silver")

    @dp.temporary_view(name=view, comment=f"Bronze rows of the dlt-meta flow {flow.data_flow_id}, transformed.")
    def transformed():
        return shape.apply(spark.readStream.table(flow.bronze_target))

    if flow.silver_cdc_apply_changes is None:
        dp.table(name=flow.silver_target, comment=f"Rows of the dlt-meta flow {flow.data_flow_id}, transformed.",
                 table_properties=table_properties(flow))(rules.decorate(dp, dlt_meta.stream_of(spark, view)))
    else:  # the changes that pass the silver rules, applied to the replicas
        dlt_meta.define_auto_cdc(dp, spark, flow, "silver", view, rules)
    # Both read the changes as transformed: the silver rules filter neither, as in dlt-meta.
    dlt_meta.define_quarantine(dp, spark, flow, "silver", view, rules)
    dlt_meta.define_append_flows(dp, spark, flow, "silver", flow.silver_target)
    dlt_meta.define_sinks(dp, spark, flow, "silver", view)


def define_snapshot(flow) -> None:
    view = f"dlt_meta_{flow.data_flow_id}_snapshot"
    shape = dlt_meta.transformation(flow)

    @dp.temporary_view(name=view, comment=f"The bronze snapshot of the dlt-meta flow {flow.data_flow_id}, transformed.")
    def snapshot():
        return shape.apply(spark.read.table(flow.bronze_target))

    dlt_meta.define_current_and_history(dp, flow, "silver")
    apply = flow.silver_apply_changes_from_snapshot.args()
    current = {"keys": apply["keys"], "stored_as_scd_type": 1}  # track_history is SCD2's
    dp.create_auto_cdc_from_snapshot_flow(target=flow.silver_target, source=view, **current)
    if flow.scd2_target:
        dp.create_auto_cdc_from_snapshot_flow(target=flow.scd2_target, source=view, **apply)


for flow in settings.onboarding.dlt_meta_flows:
    if not flow.has_silver:
        continue  # a bronze-only flow (dlt-meta onboards its silver layer separately)
    if flow.enabled and flow.kind == "cdc_feed":
        define_feed(flow)
    elif flow.enabled and flow.kind == "snapshot":
        define_snapshot(flow)
