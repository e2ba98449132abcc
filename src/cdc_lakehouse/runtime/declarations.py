"""What both pipeline APIs share under the local runtime: the graph a load declares into, the
flow whose reads are being answered, expectations, and the AUTO CDC flows.

``pyspark.pipelines`` (``dp_api``) and the legacy ``dlt`` names (``dlt_api``) are two spellings
of one set of declarations; they meet here so that a pipeline may mix files of both kinds.
Argument checks raise ``PySparkTypeError`` as ``pyspark.pipelines.api`` does.
"""

from __future__ import annotations

import contextvars
from typing import Any, Callable, Literal, Protocol, TypeVar

from pyspark.errors import PySparkTypeError, PySparkValueError
from pyspark.sql import Column, DataFrame

from cdc_lakehouse.runtime.graph import Dataset, Expectation, Flow, PipelineGraph

loading_graph: contextvars.ContextVar[PipelineGraph] = contextvars.ContextVar("loading_graph")
loading_file: contextvars.ContextVar[str | None] = contextvars.ContextVar("loading_file", default=None)


class FlowReads(Protocol):
    """What the executing flow answers (runtime/flow_batch.py FlowBatch)."""

    def read(self, name: str) -> DataFrame: ...

    def read_stream(self, name: str) -> DataFrame: ...

    def read_files(self, path: str, fmt: str, options: dict, schema: Any) -> DataFrame: ...


running_flow: contextvars.ContextVar[FlowReads] = contextvars.ContextVar("running_flow")

F = TypeVar("F", bound=Callable[..., Any])
ScdType = Literal[1, 2, "1", "2"]
ColumnNames = list[str] | list[Column]

_EXPECTATIONS_ATTR = "__dlt_expectations__"


def register_dataset(dataset: Dataset) -> None:
    dataset.source_file = loading_file.get()
    loading_graph.get().add_dataset(dataset)


def add_flow(flow: Flow) -> None:
    flow.source_file = loading_file.get()
    loading_graph.get().add_flow(flow)


# -- argument checks (the errors pyspark.pipelines.api raises) -------------------------------
def check_type(arg_name: str, value: object, expected: type | tuple[type, ...], expected_name: str) -> None:
    if not isinstance(value, expected):
        raise PySparkTypeError(
            errorClass="NOT_EXPECTED_TYPE",
            messageParameters={"arg_name": arg_name, "expected_type": expected_name,
                               "arg_type": type(value).__name__},
        )


def check_optional(arg_name: str, value: object, expected: type | tuple[type, ...], expected_name: str) -> None:
    if value is not None:
        check_type(arg_name, value, expected, expected_name)


def check_columns(arg_name: str, value: object, optional: bool = True) -> None:
    """A list of column names (str) or Columns, as ``keys``/``column_list`` take."""
    if value is None and optional:
        return
    check_type(arg_name, value, list, "list[str] or list[Column]")
    assert isinstance(value, list)  # check_type raised otherwise
    for column in value:
        check_type(arg_name, column, (str, Column), "list[str] or list[Column]")


def check_expectations(arg_name: str, value: object) -> None:
    """``{name: SQL constraint}``, as ``expect_all*`` take."""
    check_optional(arg_name, value, dict, "dict[str, str]")
    assert value is None or isinstance(value, dict)  # check_optional raised otherwise
    for name, constraint in (value or {}).items():
        check_type(arg_name, name, str, "dict[str, str]")
        check_type(arg_name, constraint, str, "dict[str, str]")


# -- expectations ---------------------------------------------------------------------------
def expectations(mapping: dict[str, str] | None, action: str) -> list[Expectation]:
    return [Expectation(n, c, action) for n, c in (mapping or {}).items()]


def _expect_decorator(rules: list[Expectation]) -> Callable[[F], F]:
    def attach(func: F) -> F:
        if not callable(func):
            # @dp.table returns None: an expectation above it has nothing to attach to.
            raise PySparkTypeError(
                errorClass="DECORATOR_ARGUMENT_NOT_CALLABLE",
                messageParameters={"decorator_name": "expect", "example_usage":
                                   "@dp.table(...) above @dp.expect('name', 'constraint') above def"},
            )
        # Stored on the function: the dataset or flow decorator that takes it finds them there.
        setattr(func, _EXPECTATIONS_ATTR, [*rules, *getattr(func, _EXPECTATIONS_ATTR, [])])
        return func

    return attach


def _one(description: str, constraint: str, action: str) -> Callable[[F], F]:
    check_type("description", description, str, "str")
    check_type("constraint", constraint, str, "str")
    return _expect_decorator([Expectation(description, constraint, action)])


def expect(description: str, constraint: str) -> Callable[[F], F]:
    """Keep rows that fail ``constraint``, counting them."""
    return _one(description, constraint, "warn")


def expect_or_drop(description: str, constraint: str) -> Callable[[F], F]:
    """Drop rows that fail ``constraint``, counting them."""
    return _one(description, constraint, "drop")


def expect_or_fail(description: str, constraint: str) -> Callable[[F], F]:
    """Stop the update when a row fails ``constraint``."""
    return _one(description, constraint, "fail")


def _all(arg_name: str, rules: dict[str, str], action: str) -> Callable[[F], F]:
    check_type(arg_name, rules, dict, "dict[str, str]")
    check_expectations(arg_name, rules)
    return _expect_decorator(expectations(rules, action))


def expect_all(expectations: dict[str, str]) -> Callable[[F], F]:
    return _all("expectations", expectations, "warn")


def expect_all_or_drop(expectations: dict[str, str]) -> Callable[[F], F]:
    return _all("expectations", expectations, "drop")


def expect_all_or_fail(expectations: dict[str, str]) -> Callable[[F], F]:
    return _all("expectations", expectations, "fail")


def expectations_of(func: Callable | None) -> list[Expectation]:
    return list(getattr(func, _EXPECTATIONS_ATTR, [])) if func else []


# -- AUTO CDC (the Databricks signatures; OSS pyspark has an SCD1-only create_auto_cdc_flow) --
def create_auto_cdc_flow(
    target: str,
    source: str,
    keys: ColumnNames,
    sequence_by: str | Column,
    ignore_null_updates: bool = False,
    apply_as_deletes: str | Column | None = None,
    apply_as_truncates: str | Column | None = None,
    column_list: ColumnNames | None = None,
    except_column_list: ColumnNames | None = None,
    stored_as_scd_type: ScdType = 1,
    track_history_column_list: ColumnNames | None = None,
    track_history_except_column_list: ColumnNames | None = None,
    name: str | None = None,
    once: bool = False,
    flow_name: str | None = None,
    ignore_null_updates_column_list: ColumnNames | None = None,
    ignore_null_updates_except_column_list: ColumnNames | None = None,
) -> None:
    """An AUTO CDC flow applying the changes of ``source`` to the streaming table ``target``.
    ``flow_name`` is the older spelling of ``name``. ``ignore_null_updates`` (every column) and
    the two ``ignore_null_updates_*column_list`` (some) are mutually exclusive, as in Databricks."""
    check_type("source", source, str, "str")
    _check_auto_cdc(target, keys, stored_as_scd_type, track_history_column_list,
                    track_history_except_column_list, name or flow_name)
    check_type("sequence_by", sequence_by, (str, Column), "str or Column")
    for arg_name, value in (("apply_as_deletes", apply_as_deletes), ("apply_as_truncates", apply_as_truncates)):
        check_optional(arg_name, value, (str, Column), "str or Column")
    check_columns("column_list", column_list)
    check_columns("except_column_list", except_column_list)
    _check_null_updates(ignore_null_updates, ignore_null_updates_column_list, ignore_null_updates_except_column_list)
    check_type("once", once, bool, "bool")
    params = dict(
        source=source, keys=list(keys), sequence_by=sequence_by, ignore_null_updates=ignore_null_updates,
        apply_as_deletes=apply_as_deletes, apply_as_truncates=apply_as_truncates, column_list=column_list,
        except_column_list=except_column_list, stored_as_scd_type=int(stored_as_scd_type),
        track_history_column_list=track_history_column_list,
        track_history_except_column_list=track_history_except_column_list,
        ignore_null_updates_column_list=ignore_null_updates_column_list,
        ignore_null_updates_except_column_list=ignore_null_updates_except_column_list,
    )
    # The default flow name predates pyspark's (the target's name): checkpoints are kept per
    # flow name, so changing it would restart every default-named flow of an existing lake.
    flow = name or flow_name or f"{target}__auto_cdc"
    add_flow(Flow(name=flow, target=target, kind="auto_cdc", once=once, cdc=params))


def _check_null_updates(every: object, columns: object, except_columns: object) -> None:
    check_type("ignore_null_updates", every, bool, "bool")
    check_columns("ignore_null_updates_column_list", columns)
    check_columns("ignore_null_updates_except_column_list", except_columns)
    given = [name for name, value in (("ignore_null_updates", every), ("ignore_null_updates_column_list", columns),
                                      ("ignore_null_updates_except_column_list", except_columns)) if value]
    if len(given) > 1:
        raise PySparkValueError(errorClass="CANNOT_SET_TOGETHER",
                                messageParameters={"arg_list": ", ".join(given)})


def create_auto_cdc_from_snapshot_flow(
    target: str,
    source: str | Callable[[int | None], tuple[DataFrame, int] | None],
    keys: ColumnNames,
    stored_as_scd_type: ScdType = 1,
    track_history_column_list: ColumnNames | None = None,
    track_history_except_column_list: ColumnNames | None = None,
    name: str | None = None,
) -> None:
    """An AUTO CDC flow taking the changes between successive snapshots: of the dataset named
    ``source``, or those a function returns (``(snapshot, version)`` or None when done)."""
    if not callable(source):
        check_type("source", source, str, "str or Callable")
    _check_auto_cdc(target, keys, stored_as_scd_type, track_history_column_list,
                    track_history_except_column_list, name)
    params = dict(
        source=source, keys=list(keys), stored_as_scd_type=int(stored_as_scd_type),
        track_history_column_list=track_history_column_list,
        track_history_except_column_list=track_history_except_column_list,
    )
    flow = name or f"{target}__auto_cdc_snapshot"
    add_flow(Flow(name=flow, target=target, kind="auto_cdc_snapshot", cdc=params))


def _check_auto_cdc(target: object, keys: object, scd_type: object, track: object, track_except: object,
                    name: object) -> None:
    check_type("target", target, str, "str")
    check_columns("keys", keys, optional=False)
    if str(scd_type) not in ("1", "2"):
        raise PySparkTypeError(
            errorClass="NOT_EXPECTED_TYPE",
            messageParameters={"arg_name": "stored_as_scd_type", "expected_type": "Literal[1, 2, '1', '2']",
                               "arg_type": type(scd_type).__name__},
        )
    check_columns("track_history_column_list", track)
    check_columns("track_history_except_column_list", track_except)
    check_optional("name", name, str, "str")


# -- reads (answered by the executing flow) -------------------------------------------------
def read(name: str) -> DataFrame:
    return running_flow.get().read(name)


def read_stream(name: str) -> DataFrame:
    return running_flow.get().read_stream(name)
