"""The files a plain dlt-meta flow names, read as dlt-meta reads them: the source schema (Spark
DDL), the data quality expectations JSON, the silver transformation JSON, and the successive full
loads of a snapshot flow (``<source_path><version>.<format>``).

They are read when the pipeline defines its tables, so a bad file stops the update at once with
the flow and the file named, as ``source_schema_path`` of change-stream flows does.

Also what the bronze and silver pipeline files of dlt-meta flows share: Auto Loader reads with
dlt-meta's metadata columns, quarantine tables and append flows (``dp`` passed in).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType, _parse_datatype_string

from cdc_lakehouse.config import DataFlow
from cdc_lakehouse.config.models import AppendFlow, Sink, SourceMetadata, reader_format

# dlt-meta's expectation kinds -> the dp decorator each becomes (expect_or_quarantine: a table).
EXPECTATION_KINDS = ("expect", "expect_or_drop", "expect_or_fail", "expect_or_quarantine")
# dlt-meta reads these as the kind they name; when a file has both, the kind's own name wins.
EXPECTATION_ALIASES = {"expect_all": "expect", "expect_all_or_drop": "expect_or_drop",
                       "expect_all_or_fail": "expect_or_fail"}


class DltMetaFileError(ValueError):
    """A file named by a dlt-meta flow is missing or not in dlt-meta's format."""


@dataclass(frozen=True)
class Expectations:
    """A dlt-meta expectations file: rule name -> SQL condition, per kind."""

    expect: dict[str, str] = field(default_factory=dict)
    expect_or_drop: dict[str, str] = field(default_factory=dict)
    expect_or_fail: dict[str, str] = field(default_factory=dict)
    expect_or_quarantine: dict[str, str] = field(default_factory=dict)

    def decorate(self, dp: Any, func: Callable) -> Callable:
        """``func`` under the expect / expect_or_drop / expect_or_fail rules, with the pipeline
        module's decorators (``dp`` is passed in: the package never imports pyspark.pipelines)."""
        for decorator, named in ((dp.expect_all, self.expect), (dp.expect_all_or_drop, self.expect_or_drop),
                                 (dp.expect_all_or_fail, self.expect_or_fail)):
            if named:
                func = decorator(named)(func)
        return func


@dataclass(frozen=True)
class Transformation:
    """A dlt-meta silver transformation: ``select_exp`` then ``where_clause`` (joined by spaces,
    as dlt-meta joins them)."""

    select_exp: list[str] = field(default_factory=lambda: ["*"])
    where_clause: list[str] = field(default_factory=list)

    def apply(self, df: DataFrame) -> DataFrame:
        df = df.selectExpr(*self.select_exp)
        return df.where(" ".join(self.where_clause)) if self.where_clause else df


def _where(flow: DataFlow, key: str, path: str) -> str:
    return f"flow {flow.data_flow_id} ({flow.silver_table or flow.bronze_table}): {key} {path}"


def _read_json(path: str, where: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise DltMetaFileError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise DltMetaFileError(f"{where}: not JSON: {exc}") from None


def source_schema(flow: DataFlow) -> StructType | None:
    """The flow's ``source_schema_path`` as a schema (dlt-meta's DDL, ``a INT, b STRING`` or
    ``a: int, b: string``); None without one."""
    path = flow.source_details.source_schema_path
    return schema_file(path, _where(flow, "source_schema_path", path)) if path else None


def schema_file(path: str, where: str) -> StructType:
    """The Spark DDL schema in the file at ``path`` (``where`` names it in errors)."""
    try:
        ddl = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DltMetaFileError(f"{where}: cannot read: {exc.strerror or exc}") from None
    try:  # StructType.fromDDL is Spark 4 only; Databricks runtimes on Spark 3.5 have this one
        schema = _parse_datatype_string(ddl.strip())
    except Exception as exc:  # noqa: BLE001 - Spark's parse errors have no common public type
        raise DltMetaFileError(f"{where}: not a Spark DDL schema: {str(exc).strip()[:200]}") from None
    if not isinstance(schema, StructType):
        raise DltMetaFileError(f"{where}: must list columns, e.g. 'id INT, name STRING'")
    return schema


def expectations(flow: DataFlow, layer: str) -> Expectations:
    """The flow's ``<layer>_data_quality_expectations_json`` (none: no rules)."""
    key = f"{layer}_data_quality_expectations_json"
    path = getattr(flow, key)
    if not path:
        return Expectations()
    where = _where(flow, key, path)
    data = _read_json(path, where)
    if not isinstance(data, dict):
        raise DltMetaFileError(f"{where}: must be a JSON object of {', '.join(EXPECTATION_KINDS)}")
    unknown = sorted(set(data) - set(EXPECTATION_KINDS) - set(EXPECTATION_ALIASES))
    if unknown:
        raise DltMetaFileError(f"{where}: unknown expectation kind {', '.join(unknown)} "
                               f"(dlt-meta has {', '.join(EXPECTATION_KINDS + tuple(EXPECTATION_ALIASES))})")
    for kind, rules in data.items():
        if not isinstance(rules, dict) or not all(isinstance(v, str) for v in rules.values()):
            raise DltMetaFileError(f"{where}: {kind} must map rule names to SQL conditions")
    aliased = {kind: data[alias] for alias, kind in EXPECTATION_ALIASES.items() if alias in data}
    return Expectations(**{**aliased, **{kind: data[kind] for kind in EXPECTATION_KINDS if kind in data}})


def transformation(flow: DataFlow) -> Transformation:
    """The entry of ``silver_transformation_json`` whose ``target_table`` is the flow's silver
    table; no file means every column as it is."""
    path = flow.silver_transformation_json
    if not path:
        return Transformation()
    where = _where(flow, "silver_transformation_json", path)
    entries = _read_json(path, where)
    if not isinstance(entries, list):
        raise DltMetaFileError(f"{where}: must be a JSON list of {{target_table, select_exp, where_clause}}")
    found = [e for e in entries if isinstance(e, dict) and e.get("target_table") == flow.silver_table]
    if not found:
        # dlt-meta reads the table as it is then; saying so beats a silent full select.
        raise DltMetaFileError(f"{where}: has no entry with target_table {flow.silver_table!r}")
    entry = found[0]
    select_exp, where_clause = entry.get("select_exp") or ["*"], entry.get("where_clause") or []
    for name, value in (("select_exp", select_exp), ("where_clause", where_clause)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise DltMetaFileError(f"{where}: {name} must be a list of SQL strings")
    return Transformation(select_exp, where_clause)


def with_metadata(df: DataFrame, metadata: SourceMetadata | None) -> DataFrame:
    """dlt-meta's ``source_metadata`` (PipelineReaders.add_cloudfiles_metadata): the picked
    ``_metadata`` fields as columns, and the whole struct as a column when asked for."""
    if metadata is None:
        return df
    if "_metadata" not in df.columns:  # a hidden column of the file source; some batches show it
        df = df.select("*", "_metadata")
    for name, source in metadata.select_metadata_cols.items():
        df = df.withColumn(name, F.col(source))
    if metadata.include_autoloader_metadata_column:
        return df.withColumnRenamed("_metadata", metadata.autoloader_metadata_col_name)
    return df.drop("_metadata")


def cloud_files(spark: SparkSession, path: str, options: dict[str, str], schema: StructType | None,
                metadata: SourceMetadata | None) -> DataFrame:
    """A stream of the files at ``path`` (Auto Loader), with dlt-meta's metadata columns."""
    reader = spark.readStream.format("cloudFiles").options(**options)
    return with_metadata((reader.schema(schema) if schema is not None else reader).load(path), metadata)


def define_append_flows(dp: Any, spark: SparkSession, flow: DataFlow, layer: str, target: str) -> None:
    """dlt-meta's ``<layer>_append_flows`` (AppendFlowWriter): each source read by a view
    ``<name>_view``, appended to ``target`` as it is (the table's expectations are its own
    query's: appended rows are not checked, nor quarantined)."""
    for append in flow.append_flows(layer):
        view = f"{append.name}_view"
        dp.temporary_view(name=view, comment=f"append flow input dataset view for {view}")(
            _append_source(spark, flow, layer, append))
        comment = append.comment or f"append_flow={append.name} for target={target}"
        dp.append_flow(name=append.name, target=target, once=append.once, comment=comment,
                       spark_conf=dict(append.spark_conf) or None)(stream_of(spark, view))


def define_sinks(dp: Any, spark: SparkSession, flow: DataFlow, layer: str, view: str) -> None:
    """dlt-meta's ``<layer>_sinks`` (DLTSinkWriter): each sink made with ``dp.create_sink``, and
    filled by the append flow ``<name>_flow`` with the rows of ``view`` (the layer's input, before
    its expectations), through the sink's ``select_exp`` and ``where_clause``."""
    for sink in flow.sinks(layer):
        dp.create_sink(name=sink.name, format=sink.format, options=dict(sink.options))
        dp.append_flow(name=f"{sink.name}_flow", target=sink.name, comment=f"Sink flow for {sink.name}")(
            _sink_rows(spark, view, sink))


def define_auto_cdc(dp: Any, spark: SparkSession, flow: DataFlow, layer: str, view: str, rules: Expectations) -> None:
    """dlt-meta's ``<layer>_cdc_apply_changes``: AUTO CDC of the rows of ``view`` that pass the
    layer's rules (and the ``where`` of its arguments) into the layer's table, its current state;
    with scd_type 2 also into its history table (``DataFlow.history_target``)."""
    cdc = flow.auto_cdc(layer)
    target, history = flow.target(layer), flow.history_target(layer)
    if cdc is None or target is None:
        raise ValueError(f"flow {flow.data_flow_id} has no {layer}_cdc_apply_changes")
    checked = f"dlt_meta_{flow.data_flow_id}_{layer}_changes"

    def passing() -> DataFrame:
        df = spark.readStream.table(view)
        return df.where(cdc.where) if cdc.where else df

    dp.temporary_view(name=checked, comment=f"Changes of the dlt-meta flow {flow.data_flow_id} that pass its "
                                            f"{layer} rules.")(rules.decorate(dp, passing))
    define_current_and_history(dp, flow, layer)
    sequence_by = sequence_column(cdc.sequence_by)
    dp.create_auto_cdc_flow(target=target, source=checked, name=cdc.flow_name, once=cdc.once,
                            **{**flow.apply_changes_args(1, layer), "sequence_by": sequence_by})
    if history:
        dp.create_auto_cdc_flow(target=history, source=checked, once=cdc.once,
                                **{**flow.apply_changes_args(2, layer), "sequence_by": sequence_by})


def sequence_column(sequence_by: str) -> str | Column:
    """dlt-meta's ``sequence_by``: a column, or several, comma-separated, ordered as the struct
    of them (the first decides, the next break its ties), as dlt-meta's cdc_apply_changes does."""
    columns = [column.strip() for column in sequence_by.split(",") if column.strip()]
    return F.struct(*columns) if len(columns) > 1 else sequence_by


def define_current_and_history(dp: Any, flow: DataFlow, layer: str) -> None:
    """The streaming tables AUTO CDC of the layer fills: its table, the current state, and its
    SCD2 history table when it has one."""
    properties = {**getattr(flow, f"{layer}_table_properties"), "quality": layer}
    dp.create_streaming_table(flow.target(layer), comment=f"Current state of the dlt-meta flow {flow.data_flow_id}.",
                              table_properties=properties)
    history = flow.history_target(layer)
    if history:
        dp.create_streaming_table(history, comment=f"History (SCD2) of the dlt-meta flow {flow.data_flow_id}.",
                                  table_properties={"quality": layer})


def _sink_rows(spark: SparkSession, view: str, sink: Sink) -> Callable[[], DataFrame]:
    def rows() -> DataFrame:
        df = spark.readStream.table(view)
        df = df.selectExpr(*sink.select_exp) if sink.select_exp else df
        for clause in sink.where_clause:  # each one holds, as dlt-meta applies a list
            df = df.where(clause)
        return df

    return rows


def define_feed_tables(dp: Any, spark: SparkSession, flow: DataFlow, layer: str, view: str, rules: Expectations,
                       comment: str) -> None:
    """A cdc_feed flow's datasets in ``layer`` over the rows of ``view``: its table (the rows
    appended, or with its ``<layer>_cdc_apply_changes`` applied), quarantine, append flows and
    sinks, as dlt-meta writes a layer."""
    target = str(flow.target(layer))
    if flow.auto_cdc(layer) is None:
        properties = {**getattr(flow, f"{layer}_table_properties"), "quality": layer}
        dp.table(name=target, comment=comment, table_properties=properties)(rules.decorate(dp, stream_of(spark, view)))
    else:
        define_auto_cdc(dp, spark, flow, layer, view, rules)
    # Both read the rows of ``view``: the layer's rules filter neither, as in dlt-meta.
    define_quarantine(dp, spark, flow, layer, view, rules)
    define_append_flows(dp, spark, flow, layer, target)
    define_sinks(dp, spark, flow, layer, view)


def define_quarantine(dp: Any, spark: SparkSession, flow: DataFlow, layer: str, view: str,
                      rules: Expectations) -> None:
    """dlt-meta's quarantine table of a layer (write_layer_with_dqe): the rows of ``view`` its
    expect_or_quarantine rules hold for, beside the layer's table (which they do not filter)."""
    if not rules.expect_or_quarantine:
        return
    target = getattr(flow, f"{layer}_quarantine_target")
    if target is None:
        raise DltMetaFileError(f"flow {flow.data_flow_id}: {layer}_data_quality_expectations_json has "
                               f"expect_or_quarantine rules but the flow names no {layer}_quarantine_table")
    properties = {**getattr(flow, f"{layer}_quarantine_table_properties"), "quality": layer}
    dp.table(name=target, comment=f"Quarantined rows of the dlt-meta flow {flow.data_flow_id}.",
             table_properties=properties)(dp.expect_all_or_drop(rules.expect_or_quarantine)(stream_of(spark, view)))


def _append_source(spark: SparkSession, flow: DataFlow, layer: str, append: AppendFlow) -> Callable[[], DataFrame]:
    details = append.source_details
    if append.source_format == "delta":
        return lambda: spark.readStream.options(**append.reader_options).table(details.table)
    path = details.source_schema_path
    where = f"flow {flow.data_flow_id}: {layer}_append_flows {append.name}: source_schema_path {path}"
    schema = schema_file(path, where) if path else None  # read here: a bad file fails the update at once
    return lambda: cloud_files(spark, str(details.source_path), append.reader_options, schema, details.source_metadata)


def stream_of(spark: SparkSession, name: str) -> Callable[[], DataFrame]:
    return lambda: spark.readStream.table(name)


def snapshot_path(flow: DataFlow, version: int) -> str:
    """dlt-meta's snapshot files: the source path is a prefix, ``.../LOAD_`` -> ``.../LOAD_2.csv``."""
    return f"{flow.source_path}{version}.{flow.source_details.snapshot_format}"


def next_snapshot(spark: SparkSession, flow: DataFlow) -> Callable[[int | None], tuple[DataFrame, int] | None]:
    """The ``source`` of ``create_auto_cdc_from_snapshot_flow`` for a file snapshot flow: the
    load after the latest applied one, until there is none (as dlt-meta's examples do)."""
    fmt = str(flow.source_details.snapshot_format)
    options = {k: v for k, v in flow.bronze_reader_options.items() if not k.lower().startswith("cloudfiles.")}
    schema = source_schema(flow)

    def snapshot_and_version(latest: int | None) -> tuple[DataFrame, int] | None:
        version = (latest or 0) + 1
        path = snapshot_path(flow, version)
        if not os.path.exists(path):  # /Volumes paths are files on Databricks too
            return None
        reader = spark.read.format(fmt).options(**options)
        return (reader.schema(schema) if schema is not None else reader).load(path), version

    return snapshot_and_version


def feed_format(flow: DataFlow) -> str:
    return str(reader_format(flow.bronze_reader_options))
