"""Spark SQL over a local lake: its Delta tables in Spark's session catalog, under their names.

A query is Spark SQL as written: nothing rewrites its text, so string literals, comments,
aliases and backticked names that look like a table's name stay what they are. Each table a
query names is registered the first time it is named, as an external Delta table at its path
(``CREATE TABLE schema.table USING delta LOCATION '<lake>/<schema>/<table>'``: metadata only,
no commit): a lake of a hundred tables costs only the tables a query reads. A name that is no
table of the lake fails with Spark's own error naming it.

The session catalog is the process's: tables registered for another lake are dropped from it
(an external table's files stay) before a query runs on this one.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from cdc_lakehouse.storage.base import DEFAULT_SCHEMA, lake_table_path

LAYERS = ("bronze", "silver", "gold")
_NOT_FOUND = "TABLE_OR_VIEW_NOT_FOUND"
# PySpark logs every analysis error whole (stack and plan) before raising it: for the tables not
# registered yet that is noise; an error the query ends with is raised, with its message.
_SPARK_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
_registered: dict[str, Path] = {}  # schema.table -> the path this process registered it at


def layer_of(name: str, properties: dict) -> str:
    schema, _, table = name.partition(".")
    if table.startswith("__apply_changes_storage_"):
        return "internal"
    if schema in LAYERS:
        return schema
    return properties.get("quality") or ("system" if schema == "pipeline" else "other")


def run_sql(spark: SparkSession, lake: str | Path, query: str, default_schema: str | None = None) -> DataFrame:
    """``query`` over the lake's tables. With ``default_schema``, a table named alone is that
    schema's, as a Lakeview dataset with a ``dataset_schema`` reads it (the dashboard names gold
    tables alone so that each deployment target's gold schema serves it)."""
    lake = Path(lake).resolve()
    _forget_other_lakes(spark, lake)
    registered: set[str] = set()
    with _current_schema(spark, lake, default_schema), quiet_spark_errors():
        while True:
            try:
                return spark.sql(query)
            except AnalysisException as exc:
                name = _missing_table(lake, exc, default_schema or DEFAULT_SCHEMA)
                if name is None or name in registered:  # not the lake's, or not found where registered
                    raise
                _register(spark, name, lake_table_path(lake, name))
                registered.add(name)


def _missing_table(lake: Path, exc: AnalysisException, schema: str) -> str | None:
    """The lake's table that ``exc`` says the session does not know; None when it is none of the lake's."""
    if exc.getCondition() != _NOT_FOUND:
        return None
    parts = _name_parts((exc.getMessageParameters() or {}).get("relationName", ""))
    if not parts or len(parts) > 3:
        return None
    name = ".".join([schema, *parts][-2:])
    return name if (lake_table_path(lake, name) / "_delta_log").is_dir() else None


def _register(spark: SparkSession, name: str, path: Path) -> None:
    schema, table = name.split(".")
    _create_schema(spark, schema, path.parent)
    spark.sql(f"CREATE TABLE IF NOT EXISTS {_quoted(schema)}.{_quoted(table)} USING delta LOCATION {_literal(path)}")
    _registered[name] = path


def _create_schema(spark: SparkSession, schema: str, location: Path) -> None:
    """The schema, at the lake's folder of it (where no table is ever made by the catalog)."""
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {_quoted(schema)} LOCATION {_literal(location)}")


def _forget_other_lakes(spark: SparkSession, lake: Path) -> None:
    for name, path in list(_registered.items()):
        if not path.is_relative_to(lake):
            schema, table = name.split(".")
            spark.sql(f"DROP TABLE IF EXISTS {_quoted(schema)}.{_quoted(table)}")  # external: its files stay
            del _registered[name]


@contextmanager
def _current_schema(spark: SparkSession, lake: Path, schema: str | None) -> Iterator[None]:
    """``USE schema`` for one query, the session's own current schema restored after."""
    if schema is None:
        yield
        return
    _create_schema(spark, schema, lake / schema)
    previous = spark.catalog.currentDatabase()
    spark.catalog.setCurrentDatabase(schema)
    try:
        yield
    finally:
        spark.catalog.setCurrentDatabase(previous)


@contextmanager
def quiet_spark_errors() -> Iterator[None]:
    """PySpark's own logging of analysis and query errors off (the error is still raised)."""
    loggers = [logging.getLogger(name) for name in _SPARK_ERROR_LOGGERS]
    before = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, disabled in zip(loggers, before):
            logger.disabled = disabled


def _name_parts(relation: str) -> list[str]:
    """``\\`silver\\`.\\`shop_orders\\``` -> ["silver", "shop_orders"] (Spark quotes each part)."""
    return [p.replace("``", "`") for p in re.findall(r"`((?:[^`]|``)*)`", relation)]


def _quoted(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def _literal(path: Path) -> str:
    return "'" + str(path).replace("\\", "\\\\").replace("'", "\\'") + "'"
