"""Where the Nutter fixtures read the lakehouse: Unity Catalog in the workspace, a local lake
under pytest. The fixtures only see this interface, so the same classes run in both places.

    lake.table("bronze.shop_sessions")   -> DataFrame of that table
    lake.flow_progress()                 -> DataFrame(update_id, flow, status, timestamp):
                                            one row per flow progress event of the pipeline

In the workspace the flow progress comes from the pipeline event log: the table the pipeline
publishes it to (``event_log`` widget, e.g. ``main.pipeline.event_log``) or, for the pipeline
owner, ``event_log('<pipeline id>')``. Locally it is our runtime's ``pipeline.event_log``.

Module-level imports are pyspark and the standard library only: this file is imported by
notebooks in the workspace, where the ``cdc_lakehouse`` package is not installed.
"""

from __future__ import annotations

import re

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

BINLOG_TYPES = ("begin", "insert", "update", "delete", "commit", "rollback", "ddl")
# A flow's last status in an update that ended; anything else means it never finished.
FINISHED = ("COMPLETED", "SKIPPED", "EXCLUDED", "IDLE")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}$")


class UnityCatalogLake:
    """Tables of the deployed pipeline: ``<catalog>.<schema prefix><schema>.<table>`` (a dev
    deployment's schemas are ``dev_<user>_bronze``, ...: resources/cdc_lakehouse.catalog.yml)."""

    def __init__(self, spark, catalog: str, event_log: str = "", pipeline_id: str = "", schema_prefix: str = ""):
        if schema_prefix and not re.fullmatch(r"[A-Za-z0-9_]+", schema_prefix):
            raise ValueError(f"not a schema prefix: {schema_prefix!r}")
        for name in (catalog, event_log):
            if name and not IDENTIFIER.match(name):
                raise ValueError(f"not a Unity Catalog name: {name!r}")
        if pipeline_id and not re.fullmatch(r"[0-9a-fA-F-]{36}", pipeline_id):
            raise ValueError(f"not a pipeline id: {pipeline_id!r}")
        self.spark, self.catalog, self.event_log, self.pipeline_id = spark, catalog, event_log, pipeline_id
        self.schema_prefix = schema_prefix

    def table(self, name: str) -> DataFrame:
        return self.spark.table(f"{self.catalog}.{self.schema_prefix}{name}")

    def flow_progress(self) -> DataFrame:
        if self.event_log:
            source = self.event_log
        elif self.pipeline_id:
            source = f"event_log('{self.pipeline_id}')"
        else:
            raise ValueError("set the `event_log` (published event log table) or `pipeline_id` widget")
        # Event log schema: origin is a struct, details a JSON string (read with the : operator).
        return self.spark.sql(
            "SELECT origin.update_id AS update_id, origin.flow_name AS flow, "
            "details:flow_progress.status::string AS status, timestamp "
            f"FROM {source} WHERE event_type = 'flow_progress'"
        ).withColumn("flow", short_name(F.col("flow")))


class LocalLake:
    """Tables of a local lake written by ``cdc_lakehouse.runtime.runner.run_pipeline``."""

    def __init__(self, spark, lake):
        from cdc_lakehouse.storage import LakeStore  # local only, hence not at module level

        self.spark, self.store = spark, LakeStore(spark, lake)

    def table(self, name: str) -> DataFrame:
        return self.store.read(name)

    def flow_progress(self) -> DataFrame:
        return self.store.read("pipeline.event_log").select(
            "update_id", short_name(F.col("flow")).alias("flow"), "status", "timestamp")


def short_name(column):
    """``catalog.schema.table`` (or with backticks) -> ``schema.table``, as the pipeline names it."""
    parts = F.split(F.regexp_replace(column, "`", ""), r"\.")
    return F.when(F.size(parts) >= 2, F.concat_ws(".", F.element_at(parts, -2), F.element_at(parts, -1))) \
        .otherwise(F.element_at(parts, -1))


def latest_flow_status(lake) -> dict[str, str]:
    """Each flow's last status in the pipeline's latest update (a handful of rows)."""
    progress = lake.flow_progress()
    latest = progress.orderBy(F.col("timestamp").desc()).select("update_id").limit(1).collect()
    if not latest:
        return {}
    rows = (progress.where(F.col("update_id") == latest[0]["update_id"])
            .groupBy("flow").agg(F.max_by("status", "timestamp").alias("status")).collect())
    return {r["flow"]: r["status"] for r in rows}


def csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def workspace_lake(spark, dbutils):
    """The lake and sources a notebook run in the workspace is pointed at, from its widgets
    (``nutter run ... --notebook_params '{"catalog": "main", ...}'`` sets them)."""
    defaults = {"catalog": "main", "schema_prefix": "", "event_log": "", "pipeline_id": "",
                "binlog_sources": "shop", "shadow_sources": "shop_pg"}
    for name, default in defaults.items():
        dbutils.widgets.text(name, default)
    get = dbutils.widgets.get
    lake = UnityCatalogLake(spark, get("catalog"), get("event_log"), get("pipeline_id"), get("schema_prefix"))
    return lake, {"binlog_sources": csv(get("binlog_sources")), "shadow_sources": csv(get("shadow_sources"))}

