"""The onboarding file's models: a dlt-meta flow (``DataFlow``) with its parts, and the loaded
file (``Onboarding``). What one key holds is checked here; rules across keys and flows are
``flow_rules``', and reading a file is ``loading``'s.

Flow kinds (``DataFlow.kind``): a flow with ``cdc_lakehouse:`` is a change-stream flow (``binlog``
or ``shadow`` capture, transactions, coherent gold). A plain dlt-meta flow without it is either a
``cdc_feed`` (``source_format: cloudFiles``, or ``delta``: a Delta table's rows read as a stream;
rows with an operation and a sequence column, applied
with AUTO CDC, or, without ``silver_cdc_apply_changes``, appended to a plain silver table) or a
``snapshot`` flow (``source_format: snapshot``: AUTO CDC FROM SNAPSHOT of successive full loads).
A dlt-meta flow without ``source_format`` is silver-only (``DataFlow.has_bronze``), as dlt-meta's
silver onboarding reads it: its silver tables read a bronze table that another flow fills, in the
same file or in an earlier run on the lake (dlt-meta's "silver fanout").

Semantics that differ from dlt-meta, because one flow here feeds several tables:
- ``silver_table`` is always the SCD1 current-state replica; with ``scd_type: 2`` the flow also
  keeps an SCD2 history table (``cdc_lakehouse.scd2_table``).
- Column names in ``silver_cdc_apply_changes`` are silver names, i.e. after
  ``column_filters.rename``; the ``column_filters`` lists use source column names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from os import PathLike
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, field_validator

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
        if value is not None and is_uri(value):
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
            service = "a Kafka broker" if value.lower() == "kafka" else "an Azure Event Hubs namespace"
            raise ValueError(f"a {value.lower()} append flow reads {service}, which cdc-lakehouse cannot start "
                             f"(use cloudFiles or delta)")
        raise ValueError(f"must be cloudFiles or delta (got {value!r})")


SINK_FORMATS = ("delta", "kafka", "eventhub")


def _clauses(value: Any) -> Any:
    # dlt-meta's sinks write where_clause as one condition or as a list of them.
    return [value] if isinstance(value, str) else value


class Sink(_Strict):
    """One of dlt-meta's ``bronze_sinks`` / ``silver_sinks`` (DLTSinkWriter): the rows of the
    flow's view (bronze: as read; silver: as transformed), through ``select_exp`` and each
    ``where_clause``, appended by the flow ``<name>_flow`` to a destination outside the
    pipeline's tables (``dp.create_sink``): a Delta table (``tableName`` or ``path``), or a
    Kafka or Event Hubs topic."""

    name: Name
    format: Name
    options: Options
    select_exp: list[str] | None = None
    where_clause: Annotated[list[str], BeforeValidator(_clauses)] = []

    @field_validator("name")
    @classmethod
    def _lower_name(cls, value: str) -> str:
        return value.lower()  # dlt-meta lowercases sink names

    @field_validator("format")
    @classmethod
    def _sink_format(cls, value: str) -> str:
        if value.lower() not in SINK_FORMATS:
            raise ValueError(f"must be one of {', '.join(SINK_FORMATS)}, dlt-meta's sink formats (got {value!r})")
        return value.lower()

    def option(self, name: str) -> str | None:
        """The option ``name``, written in any case (Spark option names ignore case)."""
        return next((value for key, value in self.options.items() if key.lower() == name.lower()), None)


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

    def args(self, stored_as_scd_type: int, default_truncates: str | None = None) -> dict[str, Any]:
        """Keyword arguments for ``dp.create_auto_cdc_flow`` building the SCD1 current state (1)
        or the SCD2 history (2); ``target``, ``source``, ``name`` and ``once`` are the caller's."""
        args: dict[str, Any] = {
            "keys": list(self.keys),
            "sequence_by": self.sequence_by,
            "stored_as_scd_type": stored_as_scd_type,
            "ignore_null_updates": self.ignore_null_updates,
            "apply_as_deletes": self.apply_as_deletes,
            "column_list": _copy(self.column_list),
            "except_column_list": list(self.except_column_list or []) or None,
            "ignore_null_updates_column_list": _copy(self.ignore_null_updates_column_list),
            "ignore_null_updates_except_column_list": _copy(self.ignore_null_updates_except_column_list),
        }
        if stored_as_scd_type == 1:
            args["apply_as_truncates"] = self.apply_as_truncates or default_truncates
        else:
            args["track_history_column_list"] = _copy(self.track_history_column_list)
            args["track_history_except_column_list"] = _copy(self.track_history_except_column_list)
        return {name: value for name, value in args.items() if value is not None}


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
            if contains_column(getattr(self, name), source):
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
    source_format: Name | None = None  # None: a silver-only flow, reading a bronze table it does not fill
    source_details: SourceDetails = SourceDetails()

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
    bronze_cdc_apply_changes: CdcApplyChanges | None = None  # AUTO CDC of a cdc_feed's files into bronze
    bronze_apply_changes_from_snapshot: SnapshotApplyChanges | None = None
    bronze_append_flows: list[AppendFlow] = []
    bronze_sinks: list[Sink] = []

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
    silver_sinks: list[Sink] = []

    cdc_lakehouse: CdcLakehouse | None = None

    @field_validator("source_format")
    @classmethod
    def _known_source_format(cls, value: str | None) -> str | None:
        if value is None:
            return None
        for known in ("cloudFiles", "delta", "snapshot"):
            if value.lower() == known.lower():
                return known
        if value.lower() in ("kafka", "eventhub"):
            service = "a Kafka broker" if value.lower() == "kafka" else "an Azure Event Hubs namespace"
            raise ValueError(f"a {value.lower()} flow reads {service}, which cdc-lakehouse cannot start (use "
                             f"cloudFiles or delta)")
        raise ValueError(
            f"must be cloudFiles (landing files read with Auto Loader), delta (a Delta table read as a stream) "
            f"or snapshot (successive full loads) (got {value!r})"
        )

    # -- kind --
    @property
    def kind(self) -> Literal["binlog", "shadow", "cdc_feed", "snapshot"]:
        """binlog/shadow: a change-stream flow (``cdc_lakehouse:``); cdc_feed or snapshot: a plain
        dlt-meta flow (source_format cloudFiles or delta, or snapshot; a silver-only flow is a snapshot flow
        when it applies its bronze table as snapshots, as dlt-meta's silver onboarding reads it)."""
        if self.cdc_lakehouse is not None:
            return self.cdc_lakehouse.capture
        silver_snapshot = self.source_format is None and self.silver_apply_changes_from_snapshot is not None
        return "snapshot" if self.source_format == "snapshot" or silver_snapshot else "cdc_feed"

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

    def sinks(self, layer: str) -> list[Sink]:
        """The flow's ``<layer>_sinks`` (bronze or silver)."""
        return list(getattr(self, f"{layer}_sinks"))

    @property
    def has_bronze(self) -> bool:
        """False for a silver-only dlt-meta flow (no source_format): it reads its bronze table,
        which another flow of the file, or of an earlier run on the lake, fills."""
        return self.source_format is not None

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

    def apply_changes_args(self, stored_as_scd_type: int = 1, layer: str = "silver") -> dict[str, Any]:
        """Keyword arguments for ``dp.create_auto_cdc_flow`` building the layer's
        SCD1 table (1) or SCD2 history (2); ``target`` and ``source`` are the caller's."""
        cdc = self.cdc if layer == "silver" else self.bronze_cdc_apply_changes
        if cdc is None or stored_as_scd_type not in (1, 2) or stored_as_scd_type > cdc.scd_type:
            raise ValueError(f"flow {self.data_flow_id} has no SCD{stored_as_scd_type} table in {layer}")
        # Only the change stream has __op; a dlt-meta feed truncates only when it says how.
        return cdc.args(stored_as_scd_type, CHANGE_STREAM_TRUNCATES if self.is_change_stream else None)

    def auto_cdc(self, layer: str) -> CdcApplyChanges | None:
        """The layer's ``<layer>_cdc_apply_changes`` (bronze or silver), if it applies changes."""
        return self.bronze_cdc_apply_changes if layer == "bronze" else self.silver_cdc_apply_changes

    def target(self, layer: str) -> str | None:
        """The layer's table: bronze_target or silver_target."""
        return self.bronze_target if layer == "bronze" else self.silver_target

    def history_target(self, layer: str) -> str | None:
        """The layer's SCD2 history table: ``scd2_target`` for silver; for bronze, with
        ``bronze_cdc_apply_changes`` of scd_type 2, ``<bronze_table>_history`` beside it (the
        bronze table is the current state, as ``silver_table`` is)."""
        if layer == "silver":
            return self.scd2_target
        cdc = self.bronze_cdc_apply_changes
        return f"{self.bronze_target}_history" if cdc is not None and cdc.scd_type == 2 else None

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



def reader_format(options: Mapping[str, str]) -> str | None:
    """The ``cloudFiles.format`` of reader options (Spark option names ignore case)."""
    return next((value.lower() for key, value in options.items() if key.lower() == "cloudfiles.format"), None)


def is_uri(path: str) -> bool:
    """Whether a path names its file system (``dbfs:/...``, ``s3://...``)."""
    return bool(_URI.match(path))


def contains_column(names: Iterable[str], column: str) -> bool:
    """Whether ``column`` is among ``names``, as Spark resolves column names: ignoring case."""
    return column.casefold() in {name.casefold() for name in names}


def _qualified(catalog: str | None, database: str | None, table: str | None) -> str:
    # dlt-meta files also write the catalog into the database ("cat.schema"), without a catalog key.
    if database and "." in database:
        catalog = None
    return ".".join(part for part in (catalog, database, table) if part)


def _copy(names: list[str] | None) -> list[str] | None:
    return None if names is None else list(names)
