"""Onboarding configuration: which source tables are replicated, and how.

The file is a YAML (or JSON) list of flows written in the onboarding vocabulary of
databrickslabs/dlt-meta, one flow per replicated source table, plus one extension key per flow,
``cdc_lakehouse:``. ``docs/onboarding.md`` is the field reference.

Flow kinds (``DataFlow.kind``): a flow with ``cdc_lakehouse:`` is a change-stream flow (``binlog``
or ``shadow`` capture, transactions, coherent gold). A plain dlt-meta flow without it is either a
``cdc_feed`` (``source_format: cloudFiles``: rows with an operation and a sequence column, applied
with AUTO CDC, or, without ``silver_cdc_apply_changes``, appended to a plain silver table) or a ``snapshot`` flow (``source_format: snapshot``: AUTO CDC FROM SNAPSHOT of
successive full loads). dlt-meta keys that would not change the results are dropped with a
warning (``Onboarding.warnings``); keys that would and that a flow kind cannot honour are errors.

Semantics that differ from dlt-meta, because one flow here feeds several tables:
- ``silver_table`` is always the SCD1 current-state replica; with ``scd_type: 2`` the flow also
  keeps an SCD2 history table (``cdc_lakehouse.scd2_table``).
- Column names in ``silver_cdc_apply_changes`` are silver names, i.e. after
  ``column_filters.rename``; the ``column_filters`` lists use source column names.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Mapping
from os import PathLike
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

__all__ = [
    "DEFAULT_ENV",
    "CdcApplyChanges",
    "CdcLakehouse",
    "ColumnFilters",
    "DataFlow",
    "Onboarding",
    "OnboardingError",
    "SourceDetails",
    "load_onboarding",
    "parse_onboarding",
]

DEFAULT_ENV = "dev"

# dlt-meta writes these once per environment, with an `_<env>` suffix (bronze_database_dev, ...).
FLOW_ENV_KEYS = frozenset(
    {
        "bronze_catalog",
        "bronze_database",
        "bronze_table_path",
        "bronze_data_quality_expectations_json",
        "bronze_catalog_quarantine",
        "bronze_database_quarantine",
        "bronze_quarantine_table_path",
        "silver_catalog",
        "silver_database",
        "silver_table_path",
        "silver_transformation_json",
        "silver_data_quality_expectations_json",
        "silver_catalog_quarantine",
        "silver_database_quarantine",
        "silver_quarantine_table_path",
    }
)
SOURCE_DETAILS_ENV_KEYS = frozenset({"source_path", "source_catalog"})
_ENV_KEYS = FLOW_ENV_KEYS | SOURCE_DETAILS_ENV_KEYS

# dlt-meta keys we know but do not implement: saying why beats a bare "unknown key".
UNSUPPORTED_KEYS = {
    "bronze_cdc_apply_changes": "bronze keeps the raw landing data; changes are applied in silver",
    "bronze_apply_changes_from_snapshot": "snapshots are reconciled into the change stream",
    "silver_apply_changes_from_snapshot": "snapshots are reconciled into the change stream",
    "bronze_sinks": "gold tables are the outputs",
    "silver_sinks": "gold tables are the outputs",
    "bronze_custom_transform_func": "transformations are silver_transformation_json select/where",
}

_LAYOUT = "a storage layout setting; the rows are the same without it"
_PATH = "tables are managed by the pipeline, in its catalog storage"
# dlt-meta keys that do not change what the tables hold: dropped with a warning, so a dlt-meta
# file loads, but never silently.
IGNORED_KEYS = {
    "bronze_table_path": _PATH,
    "silver_table_path": _PATH,
    "bronze_quarantine_table_path": _PATH,
    "silver_quarantine_table_path": _PATH,
    "bronze_partition_columns": _LAYOUT,
    "bronze_cluster_by": _LAYOUT,
    "bronze_table_cluster_by": _LAYOUT,
    "bronze_quarantine_table_partitions": _LAYOUT,
    "bronze_quarantine_table_cluster_by": _LAYOUT,
    "silver_partition_columns": _LAYOUT,
    "silver_cluster_by": _LAYOUT,
    "silver_table_cluster_by": _LAYOUT,
    "silver_quarantine_table_cluster_by": _LAYOUT,
    "bronze_table_comment": "a table comment; the rows are the same without it",
    "silver_table_comment": "a table comment; the rows are the same without it",
    "bronze_quarantine_table_comment": "a table comment; the rows are the same without it",
    "silver_quarantine_table_comment": "a table comment; the rows are the same without it",
}

# Keys a change-stream (binlog/shadow) flow does not use: its bronze tables are per source, read
# from <landing>/<source>/ with the contract's reader, in the pipeline's layer schemas
# (cdc_lakehouse.bronze_schema / silver_schema). Warned, since the demo file documents them.
CHANGE_STREAM_IGNORED = {
    "bronze_catalog": "its tables are in the pipeline's catalog",
    "bronze_database": "its bronze tables are in the pipeline's bronze schema (cdc_lakehouse.bronze_schema)",
    "bronze_table": "its bronze tables are per source and capture (<source>_<capture>_...)",
    "bronze_reader_options": "its landing files are read as CONTRACT section 2 says",
    "silver_catalog": "its tables are in the pipeline's catalog",
    "silver_database": "its silver tables are in the pipeline's silver schema (cdc_lakehouse.silver_schema)",
    "source_details.source_path": "its landing folder is <landing>/<source>/<capture>/ (DataFlow.landing_path)",
    "source_details.source_catalog": "its source is named by cdc_lakehouse.source",
    **dict.fromkeys(("silver_catalog_quarantine", "silver_database_quarantine", "silver_quarantine_table",
                     "silver_quarantine_table_properties"), "it has no silver quarantine table"),
}
# ... and keys that would change its results, which it cannot honour: errors.
CHANGE_STREAM_UNSUPPORTED = {
    "bronze_data_quality_expectations_json": "bronze rules are the contract's (docs/bronze.md)",
    "bronze_catalog_quarantine": "bronze quarantine tables are the contract's (docs/bronze.md)",
    "bronze_database_quarantine": "bronze quarantine tables are the contract's (docs/bronze.md)",
    "bronze_quarantine_table": "bronze quarantine tables are the contract's (docs/bronze.md)",
    "bronze_quarantine_table_properties": "bronze quarantine tables are the contract's (docs/bronze.md)",
    "silver_transformation_json": "use cdc_lakehouse.column_filters",
    "silver_data_quality_expectations_json": "bad values become anomalies (docs/onboarding.md)",
    "bronze_append_flows": "its bronze reads its landing folder only",
    "silver_append_flows": "its replicas hold the source table's rows only",
    "source_details.source_metadata": "its bronze keeps the contract's file columns (docs/bronze.md)",
}

_ENV_NAME = re.compile(r"^[A-Za-z0-9]+$")
_SOURCE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")  # dbfs:/..., s3://...


class OnboardingError(ValueError):
    """The onboarding file is unreadable or invalid; ``problems`` holds one line per problem."""

    def __init__(self, problems: str | Iterable[str]):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


# --- value types -------------------------------------------------------------------------------

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


def _split_columns(value: Any) -> Any:
    # dlt-meta writes partition columns as one string, "a,b"; a YAML list is accepted too.
    if isinstance(value, str):
        return [column.strip() for column in value.split(",") if column.strip()]
    return value


def _option_texts(value: Any) -> Any:
    # Spark options and table properties are strings, but YAML turns `true` into a bool.
    if not isinstance(value, Mapping):
        return value
    return {key: _option_text(item) for key, item in value.items()}


def _option_text(value: Any) -> Any:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value) if isinstance(value, int | float) else value


def _scd_type(value: Any) -> int:
    # dlt-meta writes scd_type as the string "1"/"2"; a YAML integer is just as clear.
    ok = isinstance(value, int | str) and not isinstance(value, bool)
    if not ok or str(value).strip() not in ("1", "2"):
        raise ValueError(f"must be 1 or 2 (got {value!r})")
    return int(str(value).strip())


def _flow_id(value: Any) -> Any:
    # dlt-meta ids are strings ("101"); an unquoted YAML number means the same id.
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


Columns = Annotated[list[Name], BeforeValidator(_split_columns)]
Options = Annotated[dict[str, str], BeforeValidator(_option_texts)]
ScdType = Annotated[int, BeforeValidator(_scd_type)]
FlowId = Annotated[Name, BeforeValidator(_flow_id)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- models ------------------------------------------------------------------------------------


class SourceMetadata(_Strict):
    """dlt-meta ``source_details.source_metadata``: what of Auto Loader's ``_metadata`` bronze
    keeps: columns picked from it (name -> ``_metadata.<field>``), and the whole struct, as
    ``autoloader_metadata_col_name``, when ``include_autoloader_metadata_column`` is true."""

    include_autoloader_metadata_column: bool = False
    autoloader_metadata_col_name: Name = "source_metadata"
    select_metadata_cols: dict[Name, Name] = {}


class SourceDetails(_Strict):
    """dlt-meta ``source_details``; ``source_path`` is ``source_path_<env>`` for the chosen env."""

    source_database: Name | None = None
    source_table: Name | None = None
    source_path: str | None = None
    source_schema_path: str | None = None
    source_catalog: str | None = None
    snapshot_format: Name | None = None
    source_metadata: SourceMetadata | None = None

    @property
    def table(self) -> str:
        """``[catalog.]database.table`` of a table source."""
        return ".".join(p for p in (self.source_catalog, self.source_database, self.source_table) if p)

    @field_validator("source_schema_path")
    @classmethod
    def _schema_file_is_a_path(cls, value: str | None) -> str | None:
        # The pipeline reads it as a file when it defines the replicas, not through Spark.
        if value is not None and _URI.match(value):
            raise ValueError(f"must be a file path (/Volumes/..., /Workspace/..., or relative to the "
                             f"onboarding file), not a URI (got {value!r})")
        return value


APPEND_FLOW_FORMATS = ("cloudFiles", "delta")


class AppendFlow(_Strict):
    """One of dlt-meta's ``bronze_append_flows`` / ``silver_append_flows``: more rows appended
    to the layer's table as they are (no expectations, no quarantine), from files (cloudFiles)
    or a stream of a Delta table (delta)."""

    name: Name
    source_format: Name
    source_details: SourceDetails
    create_streaming_table: bool = False
    reader_options: Options = {}
    once: bool = False
    comment: str | None = None
    spark_conf: Options = {}

    @field_validator("source_format")
    @classmethod
    def _readable_format(cls, value: str) -> str:
        for known in APPEND_FLOW_FORMATS:
            if value.lower() == known.lower():
                return known
        if value.lower() in ("kafka", "eventhub"):
            raise ValueError(f"{value} append flows are not supported by cdc-lakehouse: its pipelines read files "
                             f"and tables (use cloudFiles or delta)")
        raise ValueError(f"must be cloudFiles or delta (got {value!r})")

    def problems(self, where: str) -> list[str]:
        """What the flow's format needs and lacks (``where``: the key path of the flow)."""
        details, problems = self.source_details, []
        if self.create_streaming_table:
            problems.append(f"{where}.create_streaming_table: must be false (the data flow defines the table)")
        if details.snapshot_format is not None:
            problems.append(f"{where}.source_details.snapshot_format: only for source_format snapshot")
        if self.source_format == "delta" and not (details.source_database and details.source_table):
            problems.append(f"{where}.source_details: a delta append flow needs source_database and source_table")
        elif self.source_format == "cloudFiles" and not details.source_path:
            problems.append(f"{where}.source_details.source_path_<env>: required key is missing")
        fmt = reader_format(self.reader_options)
        if self.source_format == "cloudFiles" and fmt not in FEED_FORMATS:
            problems.append(f"{where}.reader_options: cloudFiles.format must be one of {', '.join(FEED_FORMATS)} "
                            f"(got {fmt!r})")
        return problems


# The change stream's TRUNCATE of a table (silver/truncates.py), as the SCD1 replicas apply it
# when the flow names no apply_as_truncates of its own.
CHANGE_STREAM_TRUNCATES = "__op = 'TRUNCATE'"


class CdcApplyChanges(_Strict):
    """dlt-meta ``silver_cdc_apply_changes``: the APPLY CHANGES arguments."""

    keys: Annotated[list[Name], Field(min_length=1)]
    sequence_by: Name
    scd_type: ScdType
    where: str | None = None
    ignore_null_updates: bool = False
    apply_as_deletes: str | None = None
    apply_as_truncates: str | None = None
    column_list: list[Name] | None = None
    except_column_list: list[Name] | None = None
    track_history_column_list: list[Name] | None = None
    track_history_except_column_list: list[Name] | None = None
    ignore_null_updates_column_list: list[Name] | None = None
    ignore_null_updates_except_column_list: list[Name] | None = None
    flow_name: str | None = None
    once: bool = False


class SnapshotApplyChanges(_Strict):
    """dlt-meta ``*_apply_changes_from_snapshot``: the AUTO CDC FROM SNAPSHOT arguments."""

    keys: Annotated[list[Name], Field(min_length=1)]
    scd_type: ScdType
    track_history_column_list: list[Name] | None = None
    track_history_except_column_list: list[Name] | None = None

    def args(self) -> dict[str, Any]:
        """Keyword arguments for ``dp.create_auto_cdc_from_snapshot_flow`` (not target/source)."""
        args: dict[str, Any] = {
            "keys": list(self.keys),
            "stored_as_scd_type": self.scd_type,
            "track_history_column_list": _copy(self.track_history_column_list),
            "track_history_except_column_list": _copy(self.track_history_except_column_list),
        }
        return {name: value for name, value in args.items() if value is not None}


class ColumnFilters(_Strict):
    """Our extension: what happens to source columns before they reach silver (source names)."""

    drop: list[Name] = []
    rename: dict[Name, Name] = {}
    mask: list[Name] = []
    hash: list[Name] = []

    def silver_name(self, column: str) -> str:
        """The name a source column has in silver."""
        return self.rename.get(column, column)

    def source_name(self, column: str) -> str:
        """The source column a silver column comes from."""
        return next((old for old, new in self.rename.items() if new == column), column)

    def removal_of(self, silver_column: str) -> str | None:
        """Which filter (drop/mask/hash/rename) takes this silver column's values away, if any."""
        source = self.source_name(silver_column)
        for name in ("drop", "mask", "hash"):
            if _contains(getattr(self, name), source):
                return name
        renamed_away = silver_column in self.rename and source == silver_column
        return "rename" if renamed_away else None


class CdcLakehouse(_Strict):
    """Our extension key, ``cdc_lakehouse:``, one per flow."""

    capture: Literal["binlog", "shadow"]
    source: Name
    enabled: bool = True
    gold_table: Name | None = None
    scd2_table: Name | None = None
    column_filters: ColumnFilters = ColumnFilters()

    @field_validator("source")
    @classmethod
    def _source_is_a_directory_name(cls, value: str) -> str:
        if not _SOURCE_NAME.match(value):
            raise ValueError(
                f"must be letters, digits, '_' or '-' (it is a directory of the landing "
                f"layout), got {value!r}"
            )
        return value


class DataFlow(_Strict):
    """One replicated source table: a dlt-meta onboarding entry with env keys resolved."""

    data_flow_id: FlowId
    data_flow_group: Name
    source_system: str | None = None
    source_format: Name
    source_details: SourceDetails

    bronze_catalog: str | None = None
    bronze_database: Name | None = None
    bronze_table: Name | None = None
    bronze_reader_options: Options = {}
    bronze_table_properties: Options = {}
    bronze_data_quality_expectations_json: str | None = None
    bronze_catalog_quarantine: str | None = None
    bronze_database_quarantine: str | None = None
    bronze_quarantine_table: str | None = None
    bronze_quarantine_table_properties: Options = {}
    bronze_apply_changes_from_snapshot: SnapshotApplyChanges | None = None
    bronze_append_flows: list[AppendFlow] = []

    silver_catalog: str | None = None
    silver_database: Name | None = None
    silver_table: Name | None = None  # None: a bronze-only dlt-meta cloudFiles flow
    silver_cdc_apply_changes: CdcApplyChanges | None = None
    silver_apply_changes_from_snapshot: SnapshotApplyChanges | None = None
    silver_table_properties: Options = {}
    silver_transformation_json: str | None = None
    silver_data_quality_expectations_json: str | None = None
    silver_catalog_quarantine: str | None = None
    silver_database_quarantine: str | None = None
    silver_quarantine_table: str | None = None
    silver_quarantine_table_properties: Options = {}
    silver_append_flows: list[AppendFlow] = []

    cdc_lakehouse: CdcLakehouse | None = None

    @field_validator("source_format")
    @classmethod
    def _known_source_format(cls, value: str) -> str:
        for known in ("cloudFiles", "snapshot"):
            if value.lower() == known.lower():
                return known
        raise ValueError(
            f"must be cloudFiles (landing files read with Auto Loader) or snapshot (successive "
            f"full loads) (got {value!r})"
        )

    # -- kind --
    @property
    def kind(self) -> Literal["binlog", "shadow", "cdc_feed", "snapshot"]:
        """binlog/shadow: a change-stream flow (``cdc_lakehouse:``); cdc_feed or snapshot: a plain
        dlt-meta flow (source_format cloudFiles or snapshot)."""
        if self.cdc_lakehouse is not None:
            return self.cdc_lakehouse.capture
        return "snapshot" if self.source_format == "snapshot" else "cdc_feed"

    @property
    def is_change_stream(self) -> bool:
        return self.cdc_lakehouse is not None

    # -- source --
    @property
    def source(self) -> str:
        return self._extension.source

    @property
    def capture(self) -> Literal["binlog", "shadow"]:
        return self._extension.capture

    @property
    def _extension(self) -> CdcLakehouse:
        if self.cdc_lakehouse is None:
            raise ValueError(f"flow {self.data_flow_id} is a {self.kind} flow: it has no cdc_lakehouse capture")
        return self.cdc_lakehouse

    @property
    def enabled(self) -> bool:
        return self.cdc_lakehouse.enabled if self.cdc_lakehouse is not None else True

    @property
    def schema_name(self) -> str:
        return self.source_details.source_database or ""

    @property
    def table_name(self) -> str:
        return self.source_details.source_table or ""

    # -- dlt-meta flows' tables: <catalog>.<database>.<table>, as dlt-meta names them --
    @property
    def bronze_target(self) -> str:
        return _qualified(self.bronze_catalog, self.bronze_database, self.bronze_table)

    @property
    def bronze_quarantine_target(self) -> str | None:
        return self._quarantine_target("bronze")

    @property
    def silver_quarantine_target(self) -> str | None:
        return self._quarantine_target("silver")

    def _quarantine_target(self, layer: str) -> str | None:
        table = getattr(self, f"{layer}_quarantine_table")
        if not table:
            return None
        catalog = getattr(self, f"{layer}_catalog_quarantine") or getattr(self, f"{layer}_catalog")
        return _qualified(catalog, getattr(self, f"{layer}_database_quarantine") or getattr(self, f"{layer}_database"),
                          table)

    def append_flows(self, layer: str) -> list[AppendFlow]:
        """The flow's ``<layer>_append_flows`` (bronze or silver)."""
        return list(getattr(self, f"{layer}_append_flows"))

    @property
    def has_silver(self) -> bool:
        """False for a bronze-only dlt-meta flow (dlt-meta onboards the layers separately)."""
        return self.silver_table is not None

    @property
    def silver_target(self) -> str | None:
        """None for a bronze-only flow."""
        if self.silver_table is None:
            return None
        return _qualified(self.silver_catalog, self.silver_database, self.silver_table)

    @property
    def replica_table(self) -> str:
        """``silver_table`` of a flow that has one (change-stream and snapshot flows always do)."""
        if self.silver_table is None:
            raise ValueError(f"flow {self.data_flow_id} is bronze-only: it has no silver_table")
        return self.silver_table

    @property
    def scd2_target(self) -> str | None:
        table = self.scd2_table
        return _qualified(self.silver_catalog, self.silver_database, table) if table else None

    @property
    def qualified_table(self) -> str:
        return f"{self.schema_name}.{self.table_name}"

    @property
    def source_path(self) -> str | None:
        return self.source_details.source_path

    def landing_path(self, landing_root: str | PathLike[str]) -> str:
        """Where this flow's change files land under ``landing_root`` (CONTRACT §2)."""
        base = f"{str(landing_root).rstrip('/')}/{self.source}"
        if self.capture == "binlog":
            return f"{base}/binlog"
        return f"{base}/shadow/{self.qualified_table}"

    def snapshot_path(self, landing_root: str | PathLike[str]) -> str:
        return f"{str(landing_root).rstrip('/')}/{self.source}/snapshot/{self.qualified_table}"

    # -- APPLY CHANGES --
    @property
    def cdc(self) -> CdcApplyChanges:
        if self.silver_cdc_apply_changes is None:
            raise ValueError(f"flow {self.data_flow_id} is a {self.kind} flow: it has no silver_cdc_apply_changes")
        return self.silver_cdc_apply_changes

    @property
    def keys(self) -> list[str]:
        if self.silver_cdc_apply_changes is None and self.silver_apply_changes_from_snapshot is not None:
            return list(self.silver_apply_changes_from_snapshot.keys)
        return list(self.cdc.keys)

    @property
    def sequence_by(self) -> str:
        return self.cdc.sequence_by

    @property
    def scd_type(self) -> int:
        if self.silver_cdc_apply_changes is None and self.silver_apply_changes_from_snapshot is not None:
            return self.silver_apply_changes_from_snapshot.scd_type
        return self.cdc.scd_type

    @property
    def apply_as_deletes(self) -> str | None:
        return self.cdc.apply_as_deletes

    @property
    def apply_as_truncates(self) -> str | None:
        return self.cdc.apply_as_truncates

    @property
    def ignore_null_updates(self) -> bool:
        return self.cdc.ignore_null_updates

    @property
    def column_list(self) -> list[str] | None:
        return _copy(self.cdc.column_list)

    @property
    def except_column_list(self) -> list[str]:
        return list(self.cdc.except_column_list or [])

    @property
    def track_history_column_list(self) -> list[str] | None:
        """None means: every column is tracked (APPLY CHANGES default)."""
        return _copy(self.cdc.track_history_column_list)

    @property
    def track_history_except_column_list(self) -> list[str] | None:
        return _copy(self.cdc.track_history_except_column_list)

    def apply_changes_args(self, stored_as_scd_type: int = 1) -> dict[str, Any]:
        """Keyword arguments for ``dp.create_auto_cdc_flow`` building
        the SCD1 replica (1) or the SCD2 history (2); ``target`` and ``source`` are the caller's."""
        if stored_as_scd_type not in (1, 2) or stored_as_scd_type > self.scd_type:
            raise ValueError(f"flow {self.data_flow_id} has no SCD{stored_as_scd_type} table")
        args: dict[str, Any] = {
            "keys": self.keys,
            "sequence_by": self.sequence_by,
            "stored_as_scd_type": stored_as_scd_type,
            "ignore_null_updates": self.ignore_null_updates,
            "apply_as_deletes": self.apply_as_deletes,
            "column_list": self.column_list,
            "except_column_list": self.except_column_list or None,
        }
        if stored_as_scd_type == 1:
            # Only the change stream has __op; a dlt-meta feed truncates only when it says how.
            default = CHANGE_STREAM_TRUNCATES if self.is_change_stream else None
            args["apply_as_truncates"] = self.apply_as_truncates or default
        else:
            args["track_history_column_list"] = self.track_history_column_list
            args["track_history_except_column_list"] = self.track_history_except_column_list
        return {name: value for name, value in args.items() if value is not None}

    # -- targets --
    @property
    def scd2_table(self) -> str | None:
        """The SCD2 history table; None for an SCD1 flow, or one that applies no changes."""
        if self.silver_cdc_apply_changes is None and self.silver_apply_changes_from_snapshot is None:
            return None
        if self.scd_type != 2:
            return None
        declared = self.cdc_lakehouse.scd2_table if self.cdc_lakehouse else None
        return declared or f"{self.replica_table}_history"

    @property
    def gold_table(self) -> str:
        return self._extension.gold_table or self.replica_table

    @property
    def column_filters(self) -> ColumnFilters:
        return self.cdc_lakehouse.column_filters if self.cdc_lakehouse else ColumnFilters()


class Onboarding(BaseModel):
    """A loaded onboarding file. ``flows`` are the enabled flows, in file order."""

    model_config = ConfigDict(frozen=True)

    path: str
    env: str
    all_flows: list[DataFlow]
    # dlt-meta keys dropped because they do not change the results, one line each.
    warnings: list[str] = []

    @property
    def flows(self) -> list[DataFlow]:
        """The enabled change-stream (binlog/shadow) flows."""
        return [flow for flow in self.all_flows if flow.enabled and flow.is_change_stream]

    @property
    def dlt_meta_flows(self) -> list[DataFlow]:
        """The plain dlt-meta flows: ``cdc_feed`` and ``snapshot`` kinds."""
        return [flow for flow in self.all_flows if not flow.is_change_stream]

    @property
    def sources(self) -> list[str]:
        return sorted({flow.source for flow in self.flows})

    @property
    def groups(self) -> list[str]:
        return sorted({flow.data_flow_group for flow in self.all_flows if flow.enabled})

    def for_source(self, name: str) -> list[DataFlow]:
        flows = [flow for flow in self.flows if flow.source == name]
        if not flows:
            raise KeyError(f"{self.path}: no enabled flow for source {name!r} (sources: {self.sources})")
        return flows

    def for_group(self, name: str) -> list[DataFlow]:
        return [flow for flow in self.flows if flow.data_flow_group == name]

    def for_table(self, source: str, qualified_table: str) -> DataFlow | None:
        """The enabled flow replicating ``schema.table`` of ``source``; None if not replicated."""
        wanted = qualified_table.casefold()
        found = (f for f in self.flows if f.source == source and f.qualified_table.casefold() == wanted)
        return next(found, None)

    def flow(self, data_flow_id: str | int) -> DataFlow:
        for flow in self.all_flows:
            if flow.data_flow_id == str(data_flow_id):
                return flow
        raise KeyError(f"{self.path}: no flow with data_flow_id={data_flow_id}")


# --- loading -----------------------------------------------------------------------------------


def load_onboarding(path: str | PathLike[str], env: str = DEFAULT_ENV) -> Onboarding:
    """Read and validate an onboarding file, resolving ``*_<env>`` keys for ``env``."""
    where = str(path)
    data, duplicates = _read_yaml(Path(path), where)
    onboarding = parse_onboarding(data, env=env, where=where)
    flows = [_schema_path_from(flow, Path(path).parent) for flow in onboarding.all_flows]
    return onboarding.model_copy(update={"all_flows": flows, "warnings": duplicates + onboarding.warnings})


def _schema_path_from(flow: DataFlow, folder: Path) -> DataFlow:
    """The flow with its relative file paths taken relative to ``folder`` (the onboarding
    file's), so the files are found whatever the working directory: ``source_schema_path``, and
    a dlt-meta flow's ``source_path`` and expectation and transformation files."""
    details_keys = ["source_schema_path"] + ([] if flow.is_change_stream else ["source_path"])
    flow_keys = [] if flow.is_change_stream else [
        "bronze_data_quality_expectations_json", "silver_data_quality_expectations_json", "silver_transformation_json"]
    appends = {f"{layer}_append_flows": [_details_from(a, ["source_schema_path", "source_path"], folder)
                                         for a in flow.append_flows(layer)] for layer in ("bronze", "silver")}
    return _details_from(flow, details_keys, folder).model_copy(
        update={**appends, **_relative_to(flow, flow_keys, folder)})


_Sourced = TypeVar("_Sourced", "DataFlow", "AppendFlow")


def _details_from(model: _Sourced, keys: list[str], folder: Path) -> _Sourced:
    """``model`` (a flow or an append flow) with the ``keys`` of its source_details relative to ``folder``."""
    details = model.source_details
    return model.model_copy(update={"source_details": details.model_copy(update=_relative_to(details, keys, folder))})


def _relative_to(model: BaseModel, keys: list[str], folder: Path) -> dict[str, str]:
    values = {key: getattr(model, key) for key in keys}
    return {key: str(folder / value) for key, value in values.items()
            if value and not Path(value).is_absolute() and not _URI.match(value)}


def parse_onboarding(data: Any, env: str = DEFAULT_ENV, where: str = "<onboarding>") -> Onboarding:
    """Validate already-parsed onboarding data (a list of flow mappings)."""
    if not isinstance(env, str) or not _ENV_NAME.match(env):
        raise OnboardingError(f"{where}: env must be letters and digits, e.g. dev (got {env!r})")
    if not isinstance(data, list) or not data:
        raise OnboardingError(f"{where}: must be a non-empty list of flows (got {_kind(data)})")
    envs = _envs_of(data)
    if envs and env not in envs:  # a typo in the env would otherwise drop every per-env key
        raise OnboardingError(f"{where}: env {env!r} has no keys in this file (its envs: {', '.join(sorted(envs))})")
    parsed: list[tuple[str, DataFlow]] = []
    problems: list[str] = []
    ignored: dict[str, list[str]] = {}
    for index, raw in enumerate(data, start=1):
        flow_id = raw.get("data_flow_id") if isinstance(raw, Mapping) else None
        label = _label(index, flow_id)
        flow, flow_problems, flow_warnings = _parse_flow(raw, env)
        problems += [f"{where}: {label}: {problem}" for problem in flow_problems]
        for warning in flow_warnings:
            ignored.setdefault(warning, []).append(str(flow_id if flow_id not in (None, "") else f"#{index}"))
        if flow is not None:
            parsed.append((label, flow))
    problems += [f"{where}: {problem}" for problem in _cross_flow_problems(parsed)]
    if problems:
        raise OnboardingError(problems)
    # One line per ignored key and reason, not per flow: a dlt-meta file repeats its keys.
    warnings = [f"{where}: {warning} (data_flow_id {', '.join(ids)})" for warning, ids in ignored.items()]
    return Onboarding(path=where, env=env, all_flows=[flow for _, flow in parsed], warnings=warnings)


def _envs_of(data: list[Any]) -> set[str]:
    """The env suffixes of the per-env keys of the flows in ``data``."""
    envs = set()
    for raw in data:
        if not isinstance(raw, Mapping):
            continue
        details = raw.get("source_details")
        keys = [*raw, *(details if isinstance(details, Mapping) else ())]
        for key in map(str, keys):
            base, _, suffix = key.rpartition("_")
            if base in _ENV_KEYS and _ENV_NAME.match(suffix):
                envs.add(suffix)
    return envs


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys, which PyYAML would silently overwrite; except
    keys that are ignored anyway (dlt-meta's own files repeat some), which are warnings."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self.duplicates: list[str] = []


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    first_line: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *anchor` may be overridden by explicit keys on purpose
        key = loader.construct_object(key_node, deep=True)
        if key in first_line and _is_ignored(key):
            line = key_node.start_mark.line + 1
            loader.duplicates.append(f"line {line}: duplicate key {key!r} (first at line {first_line[key]}): "
                                     f"ignored: {IGNORED_KEYS[_is_ignored(key)]}")
        elif key in first_line:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {first_line[key]})",
                key_node.start_mark,
            )
        first_line[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _is_ignored(key: Any) -> str:
    """The IGNORED_KEYS entry of ``key`` (with or without its env suffix), else ''."""
    text = str(key)
    base = text.rpartition("_")[0]
    return text if text in IGNORED_KEYS else base if base in IGNORED_KEYS else ""


def _read_yaml(path: Path, where: str) -> tuple[Any, list[str]]:
    """The file's data, and warnings about duplicate keys that do not matter."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as exc:
        raise OnboardingError(f"{where}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    loader = _StrictLoader(text)
    try:
        return loader.get_single_data(), [f"{where}: {line}" for line in loader.duplicates]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise OnboardingError(f"{where}: {at}invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise OnboardingError(f"{where}: invalid YAML: {exc}") from None
    finally:
        loader.dispose()


def _parse_flow(raw: Any, env: str) -> tuple[DataFlow | None, list[str], list[str]]:
    """The flow, its problems, and the warnings about keys it ignores."""
    if not isinstance(raw, Mapping):
        return None, [f"must be a mapping of onboarding keys (got {_kind(raw)})"], []
    resolved, problems = _resolve_env(raw, FLOW_ENV_KEYS, env, "")
    problems += _resolve_details(resolved, env, "")
    for layer in ("bronze", "silver"):
        flows = resolved.get(f"{layer}_append_flows")
        for index, append in enumerate(flows if isinstance(flows, list) else []):
            if isinstance(append, Mapping):
                flows[index] = dict(append)
                problems += _resolve_details(flows[index], env, f"{layer}_append_flows[{index}].")
    warnings = [
        f"{_render_loc((key,), env)}: ignored: {IGNORED_KEYS[key]}"
        for key in list(resolved) if key in IGNORED_KEYS and resolved.pop(key) is not None
    ]
    try:
        flow = DataFlow.model_validate(resolved)
    except ValidationError as exc:
        problems += [_describe(error, env) for error in exc.errors()]
        if resolved.get("silver_table") is None and _needs_silver(resolved):  # reported with the others
            problems.append("silver_table: required key is missing")
        return None, problems, warnings
    if problems:
        return None, problems, warnings
    kind_problems, kind_warnings = _kind_problems(flow, env)
    if flow.silver_table is None and _needs_silver(dict(iter(flow))):  # as a missing key: no further checks
        return None, kind_problems, warnings + kind_warnings
    return flow, kind_problems + _flow_problems(flow), warnings + kind_warnings


def _resolve_details(flow: dict[Any, Any], env: str, prefix: str) -> list[str]:
    """Resolve the env keys of ``flow``'s source_details in place; the problems found."""
    details = flow.get("source_details")
    if not isinstance(details, Mapping):
        return []
    flow["source_details"], problems = _resolve_env(details, SOURCE_DETAILS_ENV_KEYS, env, f"{prefix}source_details.")
    return problems


def _resolve_env(raw: Mapping[Any, Any], bases: frozenset[str], env: str, prefix: str):
    """Keep ``<base>_<env>`` as ``<base>``; drop other environments' values."""
    resolved: dict[Any, Any] = {}
    problems: list[str] = []
    for key, value in raw.items():
        base, _, suffix = str(key).rpartition("_")
        if key in bases:
            problems.append(f"{prefix}{key}: is set per environment in dlt-meta; write {key}_{env}")
        elif base in bases:
            if suffix == env:
                resolved[base] = value
        else:
            resolved[key] = value
    return resolved, problems


# --- error messages ----------------------------------------------------------------------------


def _describe(error: Mapping[str, Any], env: str) -> str:
    loc = error["loc"]
    field = _render_loc(loc, env)
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"{field}: {_unknown_key(loc, env)}"
    if kind == "missing":
        return f"{field}: required key is missing"
    if kind in ("too_short", "string_too_short"):
        return f"{field}: must not be empty"
    if kind == "value_error":
        return f"{field}: {str(error['msg']).removeprefix('Value error, ')}"
    return f"{field}: wrong type or value: {error['msg']} (got {_short(error.get('input'))})"


def _render_loc(loc: tuple[Any, ...], env: str) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            name = f"{part}_{env}" if part in _ENV_KEYS else str(part)
            text += f".{name}" if text else name
    return text


def _unknown_key(loc: tuple[Any, ...], env: str) -> str:
    key = str(loc[-1])
    if key in UNSUPPORTED_KEYS:
        return f"dlt-meta key not supported by cdc-lakehouse: {UNSUPPORTED_KEYS[key]}"
    model = _model_at(loc[:-1])
    if model is DataFlow and key in CdcLakehouse.model_fields:
        return "unknown key; cdc-lakehouse settings go under cdc_lakehouse:"
    known = [f"{name}_{env}" if name in _ENV_KEYS else name for name in (model.model_fields if model else ())]
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
    return f"unknown key (did you mean {close[0]!r}?)" if close else "unknown key"


def _model_at(path: tuple[Any, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] = DataFlow
    for part in path:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        annotation = _unwrap_optional(field.annotation) if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model


def _unwrap_optional(annotation: Any) -> Any:
    # `Model | None` names the model for "did you mean" in its keys.
    models = [arg for arg in get_args(annotation) if arg is not type(None)]
    return models[0] if len(models) == 1 else annotation


def _label(index: int, flow_id: Any) -> str:
    return f"flow #{index} (data_flow_id={flow_id})" if flow_id not in (None, "") else f"flow #{index}"


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: "a string"}.get(type(value), type(value).__name__)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --- rules pydantic cannot express field by field ----------------------------------------------

_CDC = "silver_cdc_apply_changes"
_FILTERS = "cdc_lakehouse.column_filters"
_REMOVED = {"drop": "dropped", "mask": "masked", "hash": "hashed", "rename": "renamed away"}


def _kind_problems(flow: DataFlow, env: str) -> tuple[list[str], list[str]]:
    """What the flow's kind requires, cannot honour (errors) or does not use (warnings)."""
    if flow.is_change_stream:
        return _change_stream_problems(flow, env)
    silver = ["silver_database", "silver_table"] if _needs_silver(dict(iter(flow))) else []
    required = ["bronze_database", "bronze_table", *silver]
    problems = [f"{_render_loc((key,), env)}: required key is missing" for key in required if not getattr(flow, key)]
    if flow.kind == "cdc_feed":
        return problems + _feed_problems(flow), []
    return problems + _snapshot_problems(flow), []


def _needs_silver(fields: Mapping[str, Any]) -> bool:
    """Whether a flow (its fields, validated or not) has silver tables: all flows do but a plain
    cloudFiles flow that sets no silver key (a bronze-only flow: dlt-meta onboards the bronze and
    silver layers separately)."""
    if fields.get("cdc_lakehouse") is not None or str(fields.get("source_format")).lower() == "snapshot":
        return True
    return any(str(key).startswith("silver_") and value not in (None, {}, []) for key, value in fields.items())


def _change_stream_problems(flow: DataFlow, env: str) -> tuple[list[str], list[str]]:
    set_keys = {key for key, value in flow if value not in (None, {}, [])}
    set_keys |= {f"source_details.{key}" for key, value in flow.source_details if value is not None}
    problems = [f"{_render_loc((key,), env)}: not supported for a {flow.kind} flow: {why}"
                for key, why in CHANGE_STREAM_UNSUPPORTED.items() if key in set_keys]
    problems += [f"{key}: not supported for a {flow.kind} flow (it reads the change stream)"
                 for key in ("bronze_apply_changes_from_snapshot", "silver_apply_changes_from_snapshot",
                             "source_details.snapshot_format") if key in set_keys]
    if flow.source_format != "cloudFiles":
        problems.append(f"source_format: must be cloudFiles for a {flow.kind} flow (got {flow.source_format!r})")
    for key in ("source_database", "source_table"):
        if getattr(flow.source_details, key) is None:
            problems.append(f"source_details.{key}: required key is missing")
    if flow.silver_cdc_apply_changes is None:
        problems.append(f"{_CDC}: required key is missing")
    if flow.silver_table is None:
        problems.append("silver_table: required key is missing")
    warnings = [f"{_render_loc(tuple(key.split('.')), env)}: ignored by {flow.kind} flows: {why}"
                for key, why in CHANGE_STREAM_IGNORED.items() if key in set_keys]
    if flow.silver_cdc_apply_changes is not None and flow.silver_cdc_apply_changes.flow_name:
        warnings.append(f"{_CDC}.flow_name: ignored by {flow.kind} flows: the pipeline names their flows")
    return problems, warnings


FEED_FORMATS = ("json", "csv", "parquet")
SNAPSHOT_FORMATS = ("csv", "json", "parquet", "delta")


def _feed_problems(flow: DataFlow) -> list[str]:
    problems = [problem for layer in ("bronze", "silver") for index, append in enumerate(flow.append_flows(layer))
                for problem in append.problems(f"{layer}_append_flows[{index}]")]
    if flow.silver_append_flows and flow.silver_cdc_apply_changes is not None:
        problems.append(f"silver_append_flows: not supported with {_CDC} (rows appended to the replicas would "
                        f"bypass the changes applied to them)")
    for key in ("bronze_apply_changes_from_snapshot", "silver_apply_changes_from_snapshot"):
        if getattr(flow, key) is not None:
            problems.append(f"{key}: only for source_format snapshot")
    if flow.source_details.snapshot_format is not None:
        problems.append("source_details.snapshot_format: only for source_format snapshot")
    if not flow.source_path:
        problems.append("source_details.source_path_<env>: required key is missing (where the feed's files are)")
    fmt = reader_format(flow.bronze_reader_options)
    if fmt not in FEED_FORMATS:
        problems.append(f"bronze_reader_options: cloudFiles.format must be one of {', '.join(FEED_FORMATS)} "
                        f"(got {fmt!r})")
    return problems


def _snapshot_problems(flow: DataFlow) -> list[str]:
    problems = [f"{key}: required key is missing (a snapshot flow applies successive full loads)"
                for key in ("bronze_apply_changes_from_snapshot", "silver_apply_changes_from_snapshot")
                if getattr(flow, key) is None]
    if flow.silver_cdc_apply_changes is not None:
        problems.append(f"{_CDC}: not for source_format snapshot (use silver_apply_changes_from_snapshot)")
    for key in ("bronze_data_quality_expectations_json", "bronze_quarantine_table",
                "silver_data_quality_expectations_json"):
        if getattr(flow, key):
            problems.append(f"{key}: not supported for a snapshot flow (AUTO CDC FROM SNAPSHOT would read "
                            f"dropped rows as deletes)")
    problems += [f"{key}: not supported for a snapshot flow (its tables hold the latest full load)"
                 for key in ("bronze_append_flows", "silver_append_flows") if getattr(flow, key)]
    if flow.source_details.source_metadata is not None:
        problems.append("source_details.source_metadata: only for source_format cloudFiles")
    fmt = flow.source_details.snapshot_format
    if fmt not in SNAPSHOT_FORMATS:
        problems.append(f"source_details.snapshot_format: must be one of {', '.join(SNAPSHOT_FORMATS)} (got {fmt!r})")
    elif fmt == "delta" and not (flow.source_details.source_database and flow.source_details.source_table):
        problems.append("source_details: a delta snapshot needs source_database and source_table")
    elif fmt != "delta" and not flow.source_path:
        problems.append("source_details.source_path_<env>: required key is missing (the snapshot files' "
                        "prefix: <prefix><version>.<format>)")
    return problems


def reader_format(options: Mapping[str, str]) -> str | None:
    """The ``cloudFiles.format`` of reader options (Spark option names ignore case)."""
    return next((value.lower() for key, value in options.items() if key.lower() == "cloudfiles.format"), None)


# AUTO CDC arguments the flows do not pass on (the local runtime has no such argument, and a
# change-stream flow's replicas are applied in commit order by several flows).
_UNPASSED = ("ignore_null_updates_column_list", "ignore_null_updates_except_column_list")
_FEED_ONLY = ("where", "once")


def _flow_problems(flow: DataFlow) -> list[str]:
    cdc = flow.silver_cdc_apply_changes
    if cdc is None:
        return []
    problems = _key_problems(flow) + _filter_problems(flow.column_filters)
    problems += [f"{_CDC}.{name}: not supported by cdc-lakehouse (use ignore_null_updates)"
                 for name in _UNPASSED if getattr(cdc, name) is not None]
    if flow.is_change_stream:
        problems += [f"{_CDC}.{name}: not supported for a {flow.kind} flow (its changes come in whole transactions)"
                     for name in _FEED_ONLY if getattr(cdc, name)]
    if cdc.column_list is not None and cdc.except_column_list is not None:
        problems.append(f"{_CDC}: column_list and except_column_list cannot be used together")
    if cdc.track_history_column_list is not None and cdc.track_history_except_column_list is not None:
        problems.append(
            f"{_CDC}: track_history_column_list and track_history_except_column_list "
            f"cannot be used together"
        )
    problems += _scd_type_problems(flow)
    return problems


def _key_problems(flow: DataFlow) -> list[str]:
    cdc = flow.cdc
    problems = []
    for key in cdc.keys:
        if _contains(cdc.except_column_list or [], key):
            problems.append(f"{_CDC}.except_column_list: key column {key!r} cannot be excluded")
        if cdc.column_list is not None and not _contains(cdc.column_list, key):
            problems.append(f"{_CDC}.column_list: must include key column {key!r}")
        removal = flow.column_filters.removal_of(key)
        if removal:
            problems.append(f"{_FILTERS}.{removal}: key column {key!r} cannot be {_REMOVED[removal]}")
    return problems


def _filter_problems(filters: ColumnFilters) -> list[str]:
    problems = []
    for column in filters.drop:
        for other in ("mask", "hash", "rename"):
            if _contains(getattr(filters, other), column):
                problems.append(f"{_FILTERS}: column {column!r} is both dropped and in {other}")
    for column in filters.mask:
        if _contains(filters.hash, column):
            problems.append(f"{_FILTERS}: column {column!r} is both masked and hashed")
    targets = list(filters.rename.values())
    for target in sorted({t for t in targets if targets.count(t) > 1}):
        problems.append(f"{_FILTERS}.rename: several columns are renamed to {target!r}")
    return problems


def _scd_type_problems(flow: DataFlow) -> list[str]:
    cdc = flow.cdc
    if cdc.scd_type == 2:
        problems = []
        if cdc.apply_as_truncates:
            problems.append(f"{_CDC}.apply_as_truncates: only allowed with scd_type 1")
        if flow.scd2_table and flow.scd2_table.casefold() == flow.replica_table.casefold():
            problems.append("cdc_lakehouse.scd2_table: must differ from silver_table (the SCD1 replica)")
        return problems
    problems = [
        f"{_CDC}.{name}: only allowed with scd_type 2"
        for name in ("track_history_column_list", "track_history_except_column_list")
        if getattr(cdc, name) is not None
    ]
    if flow.cdc_lakehouse and flow.cdc_lakehouse.scd2_table:
        problems.append(
            "cdc_lakehouse.scd2_table: only allowed with scd_type 2 (an SCD1 flow keeps no history)"
        )
    return problems


def _cross_flow_problems(parsed: list[tuple[str, DataFlow]]) -> list[str]:
    ids = ((f.data_flow_id, label, "data_flow_id: duplicate of") for label, f in parsed)
    dlt_meta = [(label, f) for label, f in parsed if not f.is_change_stream]
    streams = [(label, f) for label, f in parsed if f.is_change_stream]
    return [*_clashes(ids), *_clashes(_dlt_meta_claims(dlt_meta)), *_change_stream_clashes(streams)]


def _dlt_meta_claims(flows: list[tuple[str, DataFlow]]) -> Iterator[tuple[Any, str, str]]:
    # Each table of a dlt-meta flow has one writer: two flows into one would mix their rows.
    for label, f in flows:
        targets = [f.bronze_target, f.bronze_quarantine_target, f.silver_target, f.silver_quarantine_target,
                   f.scd2_target]
        for name in dict.fromkeys(t for t in targets if t):
            yield _local_name(name), label, f"table {name} is also written by"


def _local_name(name: str) -> str:
    return ".".join(name.split(".")[-2:]).casefold()


def _change_stream_clashes(parsed: list[tuple[str, DataFlow]]) -> list[str]:
    enabled = [(label, flow) for label, flow in parsed if flow.enabled]
    tables = (
        ((f.source, f.qualified_table.casefold()), label,
         f"source_details: {f.source} table {f.qualified_table} is already replicated by")
        for label, f in enabled
    )
    return [*_clashes(tables), *_clashes(_target_claims(enabled))]


def _target_claims(enabled: list[tuple[str, DataFlow]]) -> Iterator[tuple[Any, str, str]]:
    for label, f in enabled:
        # All change-stream replicas are in the pipeline's silver schema.
        names = [("silver_table", f.silver_table), ("cdc_lakehouse.scd2_table", f.scd2_table)]
        for field, name in names:
            if name:
                text = f"{field}: silver table {name} is also written by"
                yield ("silver", name.casefold()), label, text
        # gold_table defaults to silver_table, so two sources' "customers" meet here first.
        gold = f"cdc_lakehouse.gold_table: gold table {f.gold_table} is also written by"
        yield ("gold", f.gold_table.casefold()), label, gold


def _clashes(claims: Iterable[tuple[Any, str, str]]) -> Iterator[str]:
    """``label: text <owner>`` for each claim already made by an earlier flow."""
    owners: dict[Any, str] = {}
    for claim, label, text in claims:
        if claim in owners and owners[claim] != label:  # a flow's own clash is _flow_problems'
            yield f"{label}: {text} {owners[claim]}"
        else:
            owners[claim] = label


def _qualified(catalog: str | None, database: str | None, table: str | None) -> str:
    # dlt-meta files also write the catalog into the database ("cat.schema"), without a catalog key.
    if database and "." in database:
        catalog = None
    return ".".join(part for part in (catalog, database, table) if part)


def _contains(names: Iterable[str], column: str) -> bool:
    # Spark resolves column names case-insensitively.
    return column.casefold() in {name.casefold() for name in names}


def _copy(names: list[str] | None) -> list[str] | None:
    return None if names is None else list(names)
