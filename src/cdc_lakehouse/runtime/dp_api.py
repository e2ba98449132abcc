"""``from pyspark import pipelines as dp`` under the local runtime.

Pipeline files get pyspark's real module: its decorators (``table``, ``materialized_view``,
``temporary_view``, ``append_flow``, ``create_streaming_table``, ``create_sink``) register
through pyspark's own hook, ``graph_element_registration_context`` (as Spark's tests do), into
``LocalGraphElementRegistry``, which enters them into the graph being loaded (a Delta sink as
the streaming table it writes). What Databricks adds to the module (expectations, AUTO CDC
flows, ``once`` and table expectations) is set on it by ``databricks_pipelines_api`` for the
duration of a load only.
"""

from __future__ import annotations

import contextlib
import re
import threading
from typing import Any, Callable, Iterator

import pyspark.pipelines
from pyspark.pipelines import api as oss
from pyspark.pipelines.flow import AutoCdcFlow
from pyspark.pipelines.flow import Flow as DpFlow
from pyspark.pipelines.graph_element_registry import (
    GraphElementRegistry,
    get_active_graph_element_registry,
    graph_element_registration_context,
)
from pyspark.pipelines.output import MaterializedView, Output, Sink, Table, TemporaryView
from pyspark.pipelines.source_code_location import SourceCodeLocation
from pyspark.sql.types import StructType

from cdc_lakehouse.runtime import declarations
from cdc_lakehouse.runtime.declarations import (
    add_flow,
    check_expectations,
    check_type,
    expectations,
    loading_graph,
    register_dataset,
)
from cdc_lakehouse.runtime.graph import Dataset, Flow, PipelineDefinitionError

QueryFunction = Callable[[], Any]


class LocalGraphElementRegistry(GraphElementRegistry):
    """pyspark's outputs and flows as our graph's datasets and flows."""

    def __init__(self) -> None:
        # Where each output was declared: a decorator's flow carries its output's name and
        # location, which tells the table's own query from an append flow into it.
        self._declared_at: dict[str, SourceCodeLocation] = {}
        self._sink_tables: dict[str, str] = {}  # sink -> the streaming table its flows append to

    def register_output(self, output: Output) -> None:
        if isinstance(output, Sink):
            sink = _sink_table(output)
            register_dataset(sink)
            self._sink_tables[output.name] = sink.name
            return
        table = output if isinstance(output, Table) else None
        register_dataset(Dataset(
            name=output.name, kind=_kind(output), comment=output.comment,
            table_properties=dict(table.table_properties) if table else {},
            partition_cols=list(table.partition_cols) if table and table.partition_cols else None,
            schema=table.schema if table else None,
        ))
        self._declared_at[output.name] = output.source_code_location

    def register_flow(self, flow: DpFlow) -> None:
        if flow.target in self._sink_tables:  # a sink's flows append, as to a streaming table
            add_flow(Flow(name=flow.name, target=self._sink_tables[flow.target], kind="append", func=flow.func))
            return
        target = loading_graph.get().datasets.get(flow.target)
        if target is not None and self._defines(flow):
            target.func = flow.func
            if target.kind == "view":
                return
            target.kind = "table" if target.kind == "streaming_table" else target.kind
            add_flow(Flow(name=flow.name, target=flow.target, kind="query", func=flow.func))
        else:
            add_flow(Flow(name=flow.name, target=flow.target, kind="append", func=flow.func))

    def _defines(self, flow: DpFlow) -> bool:
        """Whether ``flow`` is the query of the decorator that declared its target."""
        return (flow.name == flow.target and self._declared_at.get(flow.target) == flow.source_code_location
                and not loading_graph.get().flows_into(flow.target))

    def register_auto_cdc_flow(self, flow: AutoCdcFlow) -> None:
        # Only pyspark's own create_auto_cdc_flow comes here; while files load, the module's
        # name is the Databricks one, which takes SCD2 and the other Databricks arguments.
        raise PipelineDefinitionError(
            f"AUTO CDC flow into '{flow.target}': call it as dp.create_auto_cdc_flow in a pipeline file"
        )

    def register_sql(self, sql_text: str, file_path: Any) -> None:
        raise PipelineDefinitionError(f"{file_path}: the local runtime runs Python pipeline files only")

    def amend_flow(self, name: str, once: bool) -> None:
        loading_graph.get().flows[name].once = once

    def add_expectations(self, dataset: str, rules: list) -> None:
        loading_graph.get().datasets[dataset].expectations.extend(rules)


# Where a Delta sink by path keeps its table in the lake's names (its files are at the path).
SINK_SCHEMA = "_sinks"


def _sink_table(sink: Sink) -> Dataset:
    """A Delta sink as the streaming table its flows append to locally: the lake's table its
    ``tableName`` names, or, for a ``path``, the table ``_sinks.<sink>`` kept at that folder."""
    if sink.format.lower() in ("kafka", "eventhub"):
        raise PipelineDefinitionError(f"sink '{sink.name}': a {sink.format} sink needs its broker, which the local "
                                      f"runtime does not start (it writes delta sinks)")
    if sink.format.lower() != "delta":
        raise PipelineDefinitionError(f"sink '{sink.name}': the local runtime writes delta sinks, not {sink.format}")
    options = {key.lower(): value for key, value in sink.options.items()}
    table, path = options.get("tablename"), options.get("path")
    if bool(table) == bool(path):
        raise PipelineDefinitionError(f"sink '{sink.name}': a delta sink names its table by the option tableName "
                                      f"or by path, one of them")
    if path and re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", path) and not path.startswith("file:"):
        raise PipelineDefinitionError(f"sink '{sink.name}': path {path} is not a folder of this machine")
    name = table or f"{SINK_SCHEMA}.{sink.name}"
    location = path.removeprefix("file:") if path else None
    return Dataset(name=name, kind="streaming_table", comment=f"Delta sink {sink.name}", location=location)


def _kind(output: Output) -> str:
    if isinstance(output, TemporaryView):
        return "view"
    return "materialized_view" if isinstance(output, MaterializedView) else "streaming_table"


def _registry() -> LocalGraphElementRegistry:
    registry = get_active_graph_element_registry()
    if not isinstance(registry, LocalGraphElementRegistry):
        raise PipelineDefinitionError("Databricks' pipelines API is only available while the local runtime loads")
    return registry


# -- what Databricks adds to pyspark.pipelines ----------------------------------------------
def append_flow(
    *,
    target: str,
    name: str | None = None,
    spark_conf: dict[str, str] | None = None,
    comment: str | None = None,
    once: bool = False,
) -> Callable[[QueryFunction], None]:
    """pyspark's ``append_flow`` with Databricks' ``comment`` and ``once`` (one batch, ever,
    until a full refresh)."""
    check_type("once", once, bool, "bool")
    register = oss.append_flow(target=target, name=name, spark_conf=spark_conf)

    def outer(func: QueryFunction) -> None:
        register(func)
        if once:
            _registry().amend_flow(name or func.__name__, once=True)

    return outer


def create_streaming_table(
    name: str,
    *,
    comment: str | None = None,
    spark_conf: dict[str, str] | None = None,
    table_properties: dict[str, str] | None = None,
    partition_cols: list[str] | None = None,
    cluster_by: list[str] | None = None,
    schema: StructType | str | None = None,
    format: str | None = None,
    expect_all: dict[str, str] | None = None,
    expect_all_or_drop: dict[str, str] | None = None,
    expect_all_or_fail: dict[str, str] | None = None,
) -> None:
    """pyspark's ``create_streaming_table`` with Databricks' ``expect_all*`` on every row any
    flow writes into the table."""
    rules = {"warn": expect_all, "drop": expect_all_or_drop, "fail": expect_all_or_fail}
    for action, mapping in rules.items():
        check_expectations(f"expect_all{'' if action == 'warn' else '_or_' + action}", mapping)
    oss.create_streaming_table(
        name, comment=comment, table_properties=table_properties, partition_cols=partition_cols,
        cluster_by=cluster_by, schema=schema, format=format,
    )
    _registry().add_expectations(name, [e for action, m in rules.items() for e in expectations(m, action)])


DATABRICKS_EXTRAS: dict[str, Callable[..., Any]] = {
    "append_flow": append_flow,
    "create_streaming_table": create_streaming_table,
    # pyspark's create_auto_cdc_flow is SCD1 only and needs Spark Connect (grpc) to build its
    # columns; Databricks' takes SCD2, truncates, history columns and once.
    "create_auto_cdc_flow": declarations.create_auto_cdc_flow,
    "create_auto_cdc_from_snapshot_flow": declarations.create_auto_cdc_from_snapshot_flow,
    "expect": declarations.expect,
    "expect_or_drop": declarations.expect_or_drop,
    "expect_or_fail": declarations.expect_or_fail,
    "expect_all": declarations.expect_all,
    "expect_all_or_drop": declarations.expect_all_or_drop,
    "expect_all_or_fail": declarations.expect_all_or_fail,
}

# Loads patch one shared module: one at a time (re-entrant: a load may load again).
_patching = threading.RLock()


@contextlib.contextmanager
def databricks_pipelines_api() -> Iterator[None]:
    """``pyspark.pipelines`` as Databricks has it, registering into a new local registry.

    The extras are set on the real module, not on a stand-in: ``from pyspark import pipelines``
    must give files pyspark's own decorators and registration hook. They are there only while
    files load, and the names they shadow are restored, so that code outside a pipeline sees
    plain pyspark (and a file relying on a Databricks-only name fails in a plain Spark pipeline,
    as it would there)."""
    with _patching, graph_element_registration_context(LocalGraphElementRegistry()):
        saved = {name: getattr(pyspark.pipelines, name) for name in DATABRICKS_EXTRAS
                 if hasattr(pyspark.pipelines, name)}
        for name, function in DATABRICKS_EXTRAS.items():
            setattr(pyspark.pipelines, name, function)
        try:
            yield
        finally:
            for name in DATABRICKS_EXTRAS:
                if name in saved:
                    setattr(pyspark.pipelines, name, saved[name])
                else:
                    delattr(pyspark.pipelines, name)

