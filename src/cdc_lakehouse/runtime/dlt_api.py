"""The ``dlt`` API as pipeline source files see it under the local runtime.

The loader injects this module as ``dlt`` while it imports a pipeline file (it is never
installed as a top-level ``dlt`` package: that name belongs to another PyPI project).
Declarations register into the graph being loaded; ``read``/``read_stream`` are answered by
the flow that is executing. Signatures follow the Databricks Python reference.
"""

from __future__ import annotations

import contextvars
from typing import Any, Callable

from cdc_lakehouse.runtime.graph import Dataset, Expectation, Flow, PipelineGraph

_graph: contextvars.ContextVar[PipelineGraph] = contextvars.ContextVar("dlt_graph")
_source_file: contextvars.ContextVar[str | None] = contextvars.ContextVar("dlt_source_file", default=None)
_reader: contextvars.ContextVar[Any] = contextvars.ContextVar("dlt_reader")

_EXPECTATIONS_ATTR = "__dlt_expectations__"


def _register(dataset: Dataset) -> None:
    dataset.source_file = _source_file.get()
    _graph.get().add_dataset(dataset)


def _add_flow(flow: Flow) -> None:
    flow.source_file = _source_file.get()
    _graph.get().add_flow(flow)


def _decorator_or_call(func, make):
    """``@dlt.table`` works bare and with arguments."""
    if callable(func):
        return make(func)
    return make


# -- datasets -------------------------------------------------------------------------------
def _dataset_decorator(kind: str, **options):
    def make(func: Callable):
        name = options.get("name") or func.__name__
        _register(
            Dataset(
                name=name,
                kind=kind,
                comment=options.get("comment"),
                table_properties=dict(options.get("table_properties") or {}),
                partition_cols=options.get("partition_cols"),
                schema=options.get("schema"),
                func=func,
            )
        )
        if kind != "view":
            _add_flow(Flow(name=name, target=name, kind="query", func=func))
        return func

    return make


def table(query_function=None, *, name=None, comment=None, spark_conf=None, table_properties=None,
          path=None, partition_cols=None, cluster_by=None, schema=None, temporary=False,
          row_filter=None, private=False):
    make = _dataset_decorator(
        "table", name=name, comment=comment, table_properties=table_properties,
        partition_cols=partition_cols, schema=schema,
    )
    return _decorator_or_call(query_function, make)


def materialized_view(query_function=None, *, name=None, comment=None, spark_conf=None,
                      table_properties=None, path=None, partition_cols=None, cluster_by=None,
                      schema=None, row_filter=None, private=False):
    make = _dataset_decorator(
        "materialized_view", name=name, comment=comment, table_properties=table_properties,
        partition_cols=partition_cols, schema=schema,
    )
    return _decorator_or_call(query_function, make)


def view(query_function=None, *, name=None, comment=None, spark_conf=None):
    return _decorator_or_call(query_function, _dataset_decorator("view", name=name, comment=comment))


temporary_view = view


def create_streaming_table(name, comment=None, spark_conf=None, table_properties=None,
                           partition_cols=None, cluster_by=None, path=None, schema=None,
                           expect_all=None, expect_all_or_drop=None, expect_all_or_fail=None,
                           row_filter=None):
    expectations = (
        _expectations(expect_all, "warn")
        + _expectations(expect_all_or_drop, "drop")
        + _expectations(expect_all_or_fail, "fail")
    )
    _register(
        Dataset(
            name=name, kind="streaming_table", comment=comment,
            table_properties=dict(table_properties or {}), partition_cols=partition_cols,
            schema=schema, expectations=expectations,
        )
    )


create_target_table = create_streaming_table


# -- flows ----------------------------------------------------------------------------------
def append_flow(target: str, name: str | None = None, spark_conf=None, comment=None, once=False):
    def make(func: Callable):
        _add_flow(Flow(name=name or func.__name__, target=target, kind="append", func=func, once=once))
        return func

    return make


def create_auto_cdc_flow(target, source, keys, sequence_by, ignore_null_updates=False,
                         apply_as_deletes=None, apply_as_truncates=None, column_list=None,
                         except_column_list=None, stored_as_scd_type=1,
                         track_history_column_list=None, track_history_except_column_list=None,
                         flow_name=None, name=None, once=False):
    params = dict(
        source=source, keys=list(keys), sequence_by=sequence_by,
        ignore_null_updates=ignore_null_updates, apply_as_deletes=apply_as_deletes,
        apply_as_truncates=apply_as_truncates, column_list=column_list,
        except_column_list=except_column_list, stored_as_scd_type=int(stored_as_scd_type),
        track_history_column_list=track_history_column_list,
        track_history_except_column_list=track_history_except_column_list,
    )
    flow = name or flow_name or f"{target}__auto_cdc"
    _add_flow(Flow(name=flow, target=target, kind="auto_cdc", once=once, cdc=params))


apply_changes = create_auto_cdc_flow


def create_auto_cdc_from_snapshot_flow(target, source, keys, stored_as_scd_type=1,
                                       track_history_column_list=None,
                                       track_history_except_column_list=None, name=None):
    params = dict(
        source=source, keys=list(keys), stored_as_scd_type=int(stored_as_scd_type),
        track_history_column_list=track_history_column_list,
        track_history_except_column_list=track_history_except_column_list,
    )
    flow = name or f"{target}__auto_cdc_snapshot"
    _add_flow(Flow(name=flow, target=target, kind="auto_cdc_snapshot", cdc=params))


def apply_changes_from_snapshot(target, snapshot_and_version=None, keys=None, stored_as_scd_type=1,
                                track_history_column_list=None, track_history_except_column_list=None,
                                source=None):
    create_auto_cdc_from_snapshot_flow(
        target, source if source is not None else snapshot_and_version, keys, stored_as_scd_type,
        track_history_column_list, track_history_except_column_list,
    )


# -- expectations ---------------------------------------------------------------------------
def _expectations(mapping: dict | None, action: str) -> list[Expectation]:
    return [Expectation(n, c, action) for n, c in (mapping or {}).items()]


def _expect_decorator(expectations: list[Expectation]):
    def attach(func: Callable):
        # Stored on the function so the order of decorators around @dlt.table does not matter.
        setattr(func, _EXPECTATIONS_ATTR, [*expectations, *getattr(func, _EXPECTATIONS_ATTR, [])])
        return func

    return attach


def expect(description, constraint):
    return _expect_decorator([Expectation(description, constraint, "warn")])


def expect_or_drop(description, constraint):
    return _expect_decorator([Expectation(description, constraint, "drop")])


def expect_or_fail(description, constraint):
    return _expect_decorator([Expectation(description, constraint, "fail")])


def expect_all(expectations: dict):
    return _expect_decorator(_expectations(expectations, "warn"))


def expect_all_or_drop(expectations: dict):
    return _expect_decorator(_expectations(expectations, "drop"))


def expect_all_or_fail(expectations: dict):
    return _expect_decorator(_expectations(expectations, "fail"))


def expectations_of(func: Callable | None) -> list[Expectation]:
    return list(getattr(func, _EXPECTATIONS_ATTR, [])) if func else []


# -- reads (answered by the executing flow) -------------------------------------------------
def read(name: str):
    return _reader.get().read(name)


def read_stream(name: str):
    return _reader.get().read_stream(name)
