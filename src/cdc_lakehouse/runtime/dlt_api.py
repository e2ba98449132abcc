"""The ``dlt`` API as pipeline source files see it under the local runtime.

The loader injects this module as ``dlt`` while it imports a pipeline file (it is never
installed as a top-level ``dlt`` package: that name belongs to another PyPI project).
Declarations register into the graph being loaded; ``read``/``read_stream`` are answered by
the flow that is executing. Signatures follow the Databricks Python reference.
"""

from __future__ import annotations

from typing import Any, Callable

from pyspark.pipelines.type_error_utils import validate_optional_list_of_str_arg
from pyspark.sql.types import StructType

from cdc_lakehouse.runtime.declarations import (
    add_flow,
    check_expectations,
    check_optional,
    check_type,
    create_auto_cdc_flow,
    create_auto_cdc_from_snapshot_flow,
    expect,
    expect_all,
    expect_all_or_drop,
    expect_all_or_fail,
    expect_or_drop,
    expect_or_fail,
    expectations,
    read,
    read_stream,
    register_dataset,
)
from cdc_lakehouse.runtime.graph import Dataset, Flow

__all__ = [
    "append_flow", "apply_changes", "apply_changes_from_snapshot", "create_auto_cdc_flow",
    "create_auto_cdc_from_snapshot_flow", "create_streaming_table", "create_target_table", "expect",
    "expect_all", "expect_all_or_drop", "expect_all_or_fail", "expect_or_drop", "expect_or_fail",
    "materialized_view", "read", "read_stream", "table", "temporary_view", "view",
]


QueryFunction = Callable[[], Any]
Decorated = Callable[[QueryFunction], QueryFunction]
Schema = StructType | str | None


def _decorator_or_call(func: QueryFunction | None, make: Decorated) -> QueryFunction | Decorated:
    """``@dlt.table`` works bare and with arguments; unlike ``pyspark.pipelines``, dlt's
    decorators return the function."""
    if callable(func):
        return make(func)
    return make


# -- datasets -------------------------------------------------------------------------------
def _dataset_decorator(kind: str, name: str | None = None, comment: str | None = None,
                       table_properties: dict[str, str] | None = None,
                       partition_cols: list[str] | None = None, schema: Schema = None) -> Decorated:
    check_optional("name", name, str, "str")
    check_optional("table_properties", table_properties, dict, "dict")
    validate_optional_list_of_str_arg(arg_name="partition_cols", arg_value=partition_cols)

    def make(func: QueryFunction) -> QueryFunction:
        resolved = name or func.__name__
        register_dataset(Dataset(
            name=resolved, kind=kind, comment=comment, table_properties=dict(table_properties or {}),
            partition_cols=partition_cols, schema=schema, func=func,
        ))
        if kind != "view":
            add_flow(Flow(name=resolved, target=resolved, kind="query", func=func))
        return func

    return make


def table(query_function: QueryFunction | None = None, *, name: str | None = None, comment: str | None = None,
          spark_conf: dict[str, str] | None = None, table_properties: dict[str, str] | None = None,
          path: str | None = None, partition_cols: list[str] | None = None, cluster_by: list[str] | None = None,
          schema: Schema = None, temporary: bool = False, row_filter: str | None = None,
          private: bool = False) -> QueryFunction | Decorated:
    make = _dataset_decorator("table", name, comment, table_properties, partition_cols, schema)
    return _decorator_or_call(query_function, make)


def materialized_view(query_function: QueryFunction | None = None, *, name: str | None = None,
                      comment: str | None = None, spark_conf: dict[str, str] | None = None,
                      table_properties: dict[str, str] | None = None, path: str | None = None,
                      partition_cols: list[str] | None = None, cluster_by: list[str] | None = None,
                      schema: Schema = None, row_filter: str | None = None,
                      private: bool = False) -> QueryFunction | Decorated:
    make = _dataset_decorator("materialized_view", name, comment, table_properties, partition_cols, schema)
    return _decorator_or_call(query_function, make)


def view(query_function: QueryFunction | None = None, *, name: str | None = None, comment: str | None = None,
         spark_conf: dict[str, str] | None = None) -> QueryFunction | Decorated:
    return _decorator_or_call(query_function, _dataset_decorator("view", name, comment))


temporary_view = view


def create_streaming_table(name: str, comment: str | None = None, spark_conf: dict[str, str] | None = None,
                           table_properties: dict[str, str] | None = None, partition_cols: list[str] | None = None,
                           cluster_by: list[str] | None = None, path: str | None = None, schema: Schema = None,
                           expect_all: dict[str, str] | None = None,
                           expect_all_or_drop: dict[str, str] | None = None,
                           expect_all_or_fail: dict[str, str] | None = None,
                           row_filter: str | None = None) -> None:
    check_type("name", name, str, "str")
    check_optional("table_properties", table_properties, dict, "dict")
    validate_optional_list_of_str_arg(arg_name="partition_cols", arg_value=partition_cols)
    rules = {"warn": expect_all, "drop": expect_all_or_drop, "fail": expect_all_or_fail}
    for action, mapping in rules.items():
        check_expectations(f"expect_all{'' if action == 'warn' else '_or_' + action}", mapping)
    register_dataset(Dataset(
        name=name, kind="streaming_table", comment=comment, table_properties=dict(table_properties or {}),
        partition_cols=partition_cols, schema=schema,
        expectations=[e for action, mapping in rules.items() for e in expectations(mapping, action)],
    ))


create_target_table = create_streaming_table


# -- flows ----------------------------------------------------------------------------------
def append_flow(target: str, name: str | None = None, spark_conf: dict[str, str] | None = None,
                comment: str | None = None, once: bool = False) -> Decorated:
    check_type("target", target, str, "str")
    check_optional("name", name, str, "str")
    check_type("once", once, bool, "bool")

    def make(func: QueryFunction) -> QueryFunction:
        add_flow(Flow(name=name or func.__name__, target=target, kind="append", func=func, once=once))
        return func

    return make


apply_changes = create_auto_cdc_flow


def apply_changes_from_snapshot(target: str, snapshot_and_version: Any = None, keys: list[str] | None = None,
                                stored_as_scd_type: int | str = 1,
                                track_history_column_list: list[str] | None = None,
                                track_history_except_column_list: list[str] | None = None,
                                source: Any = None) -> None:
    """The older name; its snapshot argument was ``snapshot_and_version``."""
    create_auto_cdc_from_snapshot_flow(
        target, source if source is not None else snapshot_and_version, keys, stored_as_scd_type,  # type: ignore[arg-type]
        track_history_column_list, track_history_except_column_list,
    )
