"""Spark SQL over a local lake: every Delta table queryable under its ``schema.table`` name.

Without the Delta jars Spark's catalog cannot hold Delta tables, so each table is registered
as a temporary view of its current snapshot and the query's ``schema.table`` references are
pointed at those views.
"""

from __future__ import annotations

import re

from pyspark.sql import DataFrame, SparkSession

LAYERS = ("bronze", "silver", "gold")


def view_name(table: str) -> str:
    return table.replace(".", "__")


def layer_of(name: str, properties: dict) -> str:
    schema, _, table = name.partition(".")
    if table.startswith("__apply_changes_storage_"):
        return "internal"
    if schema in LAYERS:
        return schema
    return properties.get("quality") or ("system" if schema == "pipeline" else "other")


def register_tables(spark: SparkSession, store) -> list[str]:
    names = []
    for info in store.list_tables():
        store.read(info.name).createOrReplaceTempView(view_name(info.name))
        names.append(info.name)
    return names


def rewrite(query: str, tables: list[str], default_schema: str | None = None) -> str:
    """``bronze.orders`` (or `bronze`.`orders`) -> the temp view of that table.

    With ``default_schema``, a table named alone after FROM or JOIN is taken from that schema,
    as a Lakeview dataset with a ``dataset_schema`` reads it (the dashboard names gold tables
    alone so that each deployment target's gold schema serves it)."""
    for name in sorted(tables, key=len, reverse=True):
        schema, table = name.split(".", 1)
        pattern = rf"(?<![\w.`])`?{re.escape(schema)}`?\.`?{re.escape(table)}`?(?![\w`])"
        query = re.sub(pattern, view_name(name), query)
        if schema == default_schema:
            alone = rf"(?i)(\b(?:FROM|JOIN)\s+)`?{re.escape(table)}`?(?![\w.`])"
            query = re.sub(alone, rf"\g<1>{view_name(name)}", query)
    return query


def run_sql(spark: SparkSession, store, query: str) -> DataFrame:
    return spark.sql(rewrite(query, register_tables(spark, store)))
