"""The bronze datasets of one plain dlt-meta flow (docs/onboarding.md, "Flow kinds"), declared
with the pipeline module ``dp`` passed in: a cdc_feed flow's files as they land (Auto Loader
with the flow's reader options and schema, dlt-meta's metadata columns, expectations and
quarantine table), or, with ``bronze_cdc_apply_changes``, their changes applied with AUTO CDC;
its append flows' rows and its sinks; a snapshot flow's successive full loads applied with AUTO
CDC FROM SNAPSHOT.

What src/bronze/dlt_meta_tables.py declares for every flow of the onboarding file, and
``DataflowPipeline.invoke_dlt_pipeline`` for a dlt-meta notebook, with the user's functions:
``transform`` where dlt-meta applies ``bronze_custom_transform_func`` (on the rows read from the
source), ``next_snapshot`` in place of the files reader of a snapshot flow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from cdc_lakehouse.bronze import dlt_meta
from cdc_lakehouse.config import DataFlow

Transform = Callable[[DataFrame], DataFrame]
NextSnapshot = Callable[[int | None], "tuple[DataFrame, int] | None"]


def define_bronze(dp: Any, spark: SparkSession, flow: DataFlow, transform: Transform | None = None,
                  next_snapshot: NextSnapshot | None = None) -> None:
    """The flow's bronze datasets; nothing for a silver-only flow (another one fills its bronze)."""
    if not flow.enabled or not flow.has_bronze:
        return
    if flow.kind == "cdc_feed":
        _define_feed(dp, spark, flow, transform)
    elif flow.kind == "snapshot":
        _define_snapshot(dp, spark, flow, transform, next_snapshot)


def _define_feed(dp: Any, spark: SparkSession, flow: DataFlow, transform: Transform | None) -> None:
    view = f"dlt_meta_{flow.data_flow_id}_files"
    schema = dlt_meta.source_schema(flow)  # read here: a bad file fails the update at once
    rules = dlt_meta.expectations(flow, "bronze")
    details = flow.source_details

    @dp.temporary_view(name=view, comment=f"Rows the dlt-meta flow {flow.data_flow_id} reads from "
                                          f"{details.table if flow.source_format == 'delta' else flow.source_path}.")
    def files() -> DataFrame:
        df = _read_feed(spark, flow, schema)
        return transform(df) if transform else df

    dlt_meta.define_feed_tables(dp, spark, flow, "bronze", view, rules, f"Raw rows of the dlt-meta flow {flow.data_flow_id}.")


def _read_feed(spark: SparkSession, flow: DataFlow, schema: Any) -> DataFrame:
    """A cdc_feed's rows: its files with Auto Loader, or (source_format delta, as dlt-meta's
    read_dlt_delta) its source table as a stream, with the reader options."""
    details = flow.source_details
    if flow.source_format == "delta":
        return spark.readStream.options(**flow.bronze_reader_options).table(details.table)
    return dlt_meta.cloud_files(spark, str(flow.source_path), flow.bronze_reader_options, schema,
                                details.source_metadata)


def _define_snapshot(dp: Any, spark: SparkSession, flow: DataFlow, transform: Transform | None,
                     next_snapshot: NextSnapshot | None) -> None:
    apply = flow.bronze_apply_changes_from_snapshot
    if apply is None:
        raise ValueError(f"flow {flow.data_flow_id} has no bronze_apply_changes_from_snapshot")
    dp.create_streaming_table(flow.bronze_target, comment=f"Snapshots of the dlt-meta flow {flow.data_flow_id}.",
                              table_properties={**flow.bronze_table_properties, "quality": "bronze"})
    dp.create_auto_cdc_from_snapshot_flow(target=flow.bronze_target,
                                          source=_snapshot_source(dp, spark, flow, transform, next_snapshot),
                                          **apply.args())


def _snapshot_source(dp: Any, spark: SparkSession, flow: DataFlow, transform: Transform | None,
                     next_snapshot: NextSnapshot | None) -> str | NextSnapshot:
    """delta: the source table as it is now (dlt-meta reads it so even when given a function);
    files: the user's function, else the next full load after the latest applied."""
    if flow.source_details.snapshot_format != "delta" and next_snapshot is not None:
        return next_snapshot
    if flow.source_details.snapshot_format != "delta":
        files = dlt_meta.next_snapshot(spark, flow)
        return _transformed(files, transform) if transform else files
    view = f"dlt_meta_{flow.data_flow_id}_source"
    table = flow.source_details.table

    @dp.temporary_view(name=view, comment=f"The source table {table} of the dlt-meta flow {flow.data_flow_id}.")
    def source() -> DataFrame:
        df = spark.read.table(table)
        return transform(df) if transform else df

    return view


def _transformed(next_snapshot: NextSnapshot, transform: Transform) -> NextSnapshot:
    def snapshot_and_version(latest: int | None) -> tuple[DataFrame, int] | None:
        found = next_snapshot(latest)
        return None if found is None else (transform(found[0]), found[1])

    return snapshot_and_version
