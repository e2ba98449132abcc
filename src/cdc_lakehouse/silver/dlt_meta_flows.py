"""The silver datasets of one plain dlt-meta flow (docs/onboarding.md, "Flow kinds"), declared
with the pipeline module ``dp`` passed in: the bronze rows, through the flow's
silver_transformation_json and expectations, applied to the replicas with AUTO CDC (cdc_feed with
silver_cdc_apply_changes) or AUTO CDC FROM SNAPSHOT (snapshot), or appended to a plain table
(cdc_feed without it); beside them dlt-meta's silver quarantine table, append flows and sinks. As
for change-stream flows, silver_table is the current state (SCD1); scd_type 2 adds the history
table <silver_table>_history. A silver-only flow (no source_format) reads a bronze table that
another flow of the file, or an earlier run on the lake, fills (dlt-meta's silver fanout).

What src/silver/dlt_meta_tables.py declares for every flow of the onboarding file, and
``DataflowPipeline.invoke_dlt_pipeline`` for a dlt-meta notebook, with the user's functions:
``transform`` where dlt-meta applies ``silver_custom_transform_func`` (after the select and
where of the transformation), ``next_snapshot`` in place of the bronze table as a snapshot
flow's source.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from cdc_lakehouse.bronze import dlt_meta
from cdc_lakehouse.bronze.dlt_meta_flows import NextSnapshot, Transform
from cdc_lakehouse.config import DataFlow


def define_silver(dp: Any, spark: SparkSession, flow: DataFlow, transform: Transform | None = None,
                  next_snapshot: NextSnapshot | None = None) -> None:
    """The flow's silver datasets; nothing for a bronze-only flow (dlt-meta onboards its silver
    layer separately)."""
    if not flow.enabled or not flow.has_silver:
        return
    if flow.kind == "cdc_feed":
        _define_feed(dp, spark, flow, transform)
    elif flow.kind == "snapshot":
        _define_snapshot(dp, spark, flow, transform, next_snapshot)


def _define_feed(dp: Any, spark: SparkSession, flow: DataFlow, transform: Transform | None) -> None:
    view = f"dlt_meta_{flow.data_flow_id}_transformed"
    shape = dlt_meta.transformation(flow)  # read here: a bad file fails the update at once
    rules = dlt_meta.expectations(flow, "silver")

    @dp.temporary_view(name=view, comment=f"Bronze rows of the dlt-meta flow {flow.data_flow_id}, transformed.")
    def transformed() -> DataFrame:
        df = shape.apply(spark.readStream.table(flow.bronze_target))
        return transform(df) if transform else df

    dlt_meta.define_feed_tables(dp, spark, flow, "silver", view, rules,
                                f"Rows of the dlt-meta flow {flow.data_flow_id}, transformed.")


def _define_snapshot(dp: Any, spark: SparkSession, flow: DataFlow, transform: Transform | None,
                     next_snapshot: NextSnapshot | None) -> None:
    apply = flow.silver_apply_changes_from_snapshot
    if apply is None:
        raise ValueError(f"flow {flow.data_flow_id} has no silver_apply_changes_from_snapshot")
    source = next_snapshot or _bronze_snapshot(dp, spark, flow, transform)
    dlt_meta.define_current_and_history(dp, flow, "silver")
    current = {"keys": list(apply.keys), "stored_as_scd_type": 1}  # track_history is SCD2's
    dp.create_auto_cdc_from_snapshot_flow(target=flow.silver_target, source=source, **current)
    if flow.scd2_target:
        dp.create_auto_cdc_from_snapshot_flow(target=flow.scd2_target, source=source, **apply.args())


def _bronze_snapshot(dp: Any, spark: SparkSession, flow: DataFlow, transform: Transform | None) -> str:
    """A view of the bronze table as it is at the update, transformed."""
    view = f"dlt_meta_{flow.data_flow_id}_snapshot"
    shape = dlt_meta.transformation(flow)

    @dp.temporary_view(name=view, comment=f"The bronze snapshot of the dlt-meta flow {flow.data_flow_id}, transformed.")
    def snapshot() -> DataFrame:
        df = shape.apply(spark.read.table(flow.bronze_target))
        return transform(df) if transform else df

    return view
