"""dlt-meta's notebook entry point (``src.dataflow_pipeline`` there), for the onboarding file of
the pipeline configuration: a dlt-meta notebook runs with its import changed to

    from cdc_lakehouse.dataflow_pipeline import DataflowPipeline
    DataflowPipeline.invoke_dlt_pipeline(spark, layer, bronze_custom_transform_func=...)

on Databricks (the notebook is the pipeline's source, with ``cdc_lakehouse.onboarding_file`` in
its configuration), and locally with ``cdc-lakehouse pipeline run --source notebook.py``
(docs/onboarding.md, "From a dlt-meta notebook"). It declares the layer's datasets of the file's
plain dlt-meta flows as the project's own pipeline files do, with the user's functions attached
where dlt-meta applies them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from cdc_lakehouse.bronze.dlt_meta_flows import define_bronze
from cdc_lakehouse.config import DataFlow
from cdc_lakehouse.dataflow_spec import bronze_spec, silver_spec
from cdc_lakehouse.settings import pipeline_onboarding
from cdc_lakehouse.silver.dlt_meta_flows import define_silver

# dlt-meta's user functions: they take the flow's dataflow spec (cdc_lakehouse.dataflow_spec).
CustomTransform = Callable[[DataFrame, Any], DataFrame]
NextSnapshotAndVersion = Callable[[int | None, Any], "tuple[DataFrame, int] | None"]
LAYERS = {"bronze": ("bronze",), "silver": ("silver",), "bronze_silver": ("bronze", "silver")}


class DataflowPipeline:
    """dlt-meta's ``DataflowPipeline``: only its entry point, ``invoke_dlt_pipeline``."""

    @staticmethod
    def invoke_dlt_pipeline(spark: SparkSession, layer: str,
                            bronze_custom_transform_func: CustomTransform | None = None,
                            silver_custom_transform_func: CustomTransform | None = None,
                            bronze_next_snapshot_and_version: NextSnapshotAndVersion | None = None,
                            silver_next_snapshot_and_version: NextSnapshotAndVersion | None = None) -> None:
        """Declare the ``layer`` (bronze, silver or bronze_silver) of the dlt-meta flows, those of
        the group ``<layer>.group`` names if the configuration sets one, else those whose
        data_flow_id ``<layer>.dataflowIds`` lists (comma-separated), as dlt-meta does. A
        transform ``(df, spec) -> df`` takes bronze's rows as read, silver's after the select and
        where; a ``(latest_version, spec) -> (df, version) | None`` function is the source of the
        layer's snapshot flows (a delta snapshot still reads its table, as in dlt-meta)."""
        layers = LAYERS.get(str(layer).lower())
        if layers is None:
            raise ValueError(f"layer must be one of {', '.join(LAYERS)} (got {layer!r}; dlt-meta's notebooks read it "
                             f"from the pipeline configuration 'layer')")
        from pyspark import pipelines as dp  # the pipeline's module: Databricks', or the local runtime's as it loads

        onboarding = pipeline_onboarding(spark)
        if "bronze" in layers:
            for flow in _selected(onboarding.dlt_meta_flows, spark, "bronze"):
                spec = bronze_spec(flow)
                define_bronze(dp, spark, flow, _bound(bronze_custom_transform_func, spec),
                              _bound(bronze_next_snapshot_and_version, spec))
        if "silver" in layers:
            for flow in _selected(onboarding.dlt_meta_flows, spark, "silver"):
                spec = silver_spec(flow) if flow.has_silver else None
                define_silver(dp, spark, flow, _bound(silver_custom_transform_func, spec),
                              _bound(silver_next_snapshot_and_version, spec))


def _selected(flows: list[DataFlow], spark: SparkSession, layer: str) -> list[DataFlow]:
    """The flows the pipeline configuration selects for ``layer``, as dlt-meta's
    ``_get_dataflow_spec``: ``<layer>.group`` if set (it wins), else ``<layer>.dataflowIds``, else all."""
    group = spark.conf.get(f"{layer}.group", None)
    if group:
        return [flow for flow in flows if flow.data_flow_group == group]
    listed = spark.conf.get(f"{layer}.dataflowIds", None)
    if not listed:
        return flows
    # dlt-meta puts the text in a SQL `dataFlowId in (...)`: ids may be quoted.
    ids = {part.strip().strip("'\"") for part in listed.split(",") if part.strip()}
    unknown = ids - {flow.data_flow_id for flow in flows}
    if unknown:
        raise ValueError(f"{layer}.dataflowIds: no dlt-meta flow of the onboarding file has data_flow_id "
                         f"{', '.join(sorted(unknown))} (got {listed!r})")
    return [flow for flow in flows if flow.data_flow_id in ids]


def _bound(func: Callable[[Any, Any], Any] | None, spec: Any) -> Any:
    """``func`` with the flow's spec as its second argument, as dlt-meta calls it."""
    if func is None:
        return None

    def with_spec(first: Any) -> Any:
        return func(first, spec)

    with_spec.__qualname__ = getattr(func, "__qualname__", "with_spec")  # what the flow's definition names
    return with_spec

