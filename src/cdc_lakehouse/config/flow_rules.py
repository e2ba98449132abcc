"""The rules of an onboarding file that pydantic cannot check key by key: what each flow kind
requires, cannot honour (errors) or does not use (warnings), how a flow's keys fit together, and
which tables two flows would both write.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from cdc_lakehouse.config.dlt_meta_keys import CHANGE_STREAM_IGNORED, CHANGE_STREAM_UNSUPPORTED, render_key
from cdc_lakehouse.config.models import (
    AppendFlow,
    CdcApplyChanges,
    ColumnFilters,
    DataFlow,
    Sink,
    contains_column,
    reader_format,
)

_CDC = "silver_cdc_apply_changes"
_BRONZE_CDC = "bronze_cdc_apply_changes"
_FILTERS = "cdc_lakehouse.column_filters"
_REMOVED = {"drop": "dropped", "mask": "masked", "hash": "hashed", "rename": "renamed away"}


def kind_problems(flow: DataFlow, env: str) -> tuple[list[str], list[str]]:
    """What the flow's kind requires, cannot honour (errors) or does not use (warnings)."""
    if flow.is_change_stream:
        return _change_stream_problems(flow, env)
    silver = ["silver_database", "silver_table"] if needs_silver(dict(iter(flow))) else []
    required = ["bronze_database", "bronze_table", *silver]
    problems = [f"{render_key((key,), env)}: required key is missing" for key in required if not getattr(flow, key)]
    if not flow.has_bronze:
        problems += _silver_only_problems(flow, env)
    elif flow.kind == "cdc_feed":
        problems += _feed_problems(flow)
    else:
        problems += _snapshot_problems(flow)
    if flow.kind == "cdc_feed":
        return problems + _feed_silver_problems(flow), []
    return problems + _snapshot_silver_problems(flow), _snapshot_warnings(flow, env)


def needs_silver(fields: Mapping[str, Any]) -> bool:
    """Whether a flow (its fields, validated or not) has silver tables: all flows do but a plain
    cloudFiles flow that sets no silver key (a bronze-only flow: dlt-meta onboards the bronze and
    silver layers separately). A flow without source_format is silver-only: silver is all it has."""
    if fields.get("cdc_lakehouse") is not None or fields.get("source_format") is None:
        return True
    if str(fields.get("source_format")).lower() == "snapshot":
        return True
    return any(str(key).startswith("silver_") and value not in (None, {}, []) for key, value in fields.items())


def _set_keys(flow: DataFlow) -> set[str]:
    """The keys the flow sets to something, those of source_details as ``source_details.<key>``."""
    set_keys = {key for key, value in flow if value not in (None, {}, []) and key != "source_details"}
    return set_keys | {f"source_details.{key}" for key, value in flow.source_details if value is not None}


def _change_stream_problems(flow: DataFlow, env: str) -> tuple[list[str], list[str]]:
    set_keys = _set_keys(flow)
    problems = [f"{render_key((key,), env)}: not supported for a {flow.kind} flow: {why}"
                for key, why in CHANGE_STREAM_UNSUPPORTED.items() if key in set_keys]
    problems += [f"{key}: not supported for a {flow.kind} flow (its snapshots are reconciled into the change "
                 f"stream, docs/snapshots.md)"
                 for key in ("bronze_apply_changes_from_snapshot", "silver_apply_changes_from_snapshot",
                             "source_details.snapshot_format") if key in set_keys]
    if flow.source_format is None:
        problems.append("source_format: required key is missing")
    elif flow.source_format != "cloudFiles":
        problems.append(f"source_format: must be cloudFiles for a {flow.kind} flow (got {flow.source_format!r})")
    for key in ("source_database", "source_table"):
        if getattr(flow.source_details, key) is None:
            problems.append(f"source_details.{key}: required key is missing")
    if flow.silver_cdc_apply_changes is None:
        problems.append(f"{_CDC}: required key is missing")
    if flow.silver_table is None:
        problems.append("silver_table: required key is missing")
    warnings = [f"{render_key(tuple(key.split('.')), env)}: ignored by {flow.kind} flows: {why}"
                for key, why in CHANGE_STREAM_IGNORED.items() if key in set_keys]
    if flow.silver_cdc_apply_changes is not None and flow.silver_cdc_apply_changes.flow_name:
        warnings.append(f"{_CDC}.flow_name: ignored by {flow.kind} flows: the pipeline names their flows")
    return problems, warnings


# Auto Loader's formats Spark itself reads; avro needs Spark's external avro module, which the
# local Spark lacks (docs/onboarding.md, "Not implemented").
FEED_FORMATS = ("json", "csv", "parquet", "orc", "xml", "text", "binaryfile")
_UNREAD_FORMATS = "avro needs Spark's external avro module, which cdc-lakehouse's Spark lacks"
SNAPSHOT_FORMATS = ("csv", "json", "parquet", "delta")


def _feed_problems(flow: DataFlow) -> list[str]:
    """What a cdc_feed flow's bronze needs: its files, the append flows' sources, its sinks."""
    problems = _append_flows_problems(flow, "bronze") + _sinks_problems(flow, "bronze") + _bronze_cdc_problems(flow)
    if flow.bronze_apply_changes_from_snapshot is not None:
        problems.append("bronze_apply_changes_from_snapshot: only for source_format snapshot")
    if flow.source_details.snapshot_format is not None:
        problems.append("source_details.snapshot_format: only for source_format snapshot")
    return problems + (_delta_feed_problems(flow) if flow.source_format == "delta" else _files_feed_problems(flow))


def _files_feed_problems(flow: DataFlow) -> list[str]:
    problems = []
    if not flow.source_path:
        problems.append("source_details.source_path_<env>: required key is missing (where the feed's files are)")
    fmt = reader_format(flow.bronze_reader_options)
    if fmt not in FEED_FORMATS:
        problems.append(f"bronze_reader_options: cloudFiles.format must be one of {', '.join(FEED_FORMATS)} "
                        f"(got {fmt!r}; {_UNREAD_FORMATS})")
    return problems


def _delta_feed_problems(flow: DataFlow) -> list[str]:
    """dlt-meta's source_format delta: a Delta table, read as a stream, in place of files."""
    details, problems = flow.source_details, []
    if not (details.source_database and details.source_table):
        problems.append("source_details: a delta flow needs source_database and source_table (the table it streams)")
    if details.source_metadata is not None:
        problems.append("source_details.source_metadata: only for source_format cloudFiles (Auto Loader's file "
                        "metadata; a table has none)")
    return problems


def _bronze_cdc_problems(flow: DataFlow) -> list[str]:
    """AUTO CDC into bronze: its table takes no appended rows, and no silver reads it."""
    if flow.bronze_cdc_apply_changes is None:
        return []
    problems = []
    if flow.bronze_append_flows:
        problems.append(f"bronze_append_flows: not supported with {_BRONZE_CDC} (rows appended to the bronze table "
                        f"would bypass the changes applied to it)")
    if flow.has_silver:
        problems.append(f"{_BRONZE_CDC}: not supported with silver tables in the flow: AUTO CDC updates and deletes "
                        f"the bronze rows, which silver cannot read as a stream (on Databricks neither); onboard the "
                        f"bronze layer alone, as dlt-meta's own examples of it do")
    return problems


def _feed_silver_problems(flow: DataFlow) -> list[str]:
    """What a cdc_feed flow's silver does with the bronze rows: append them, or apply them."""
    problems = _append_flows_problems(flow, "silver") + _sinks_problems(flow, "silver")
    if flow.silver_append_flows and flow.silver_cdc_apply_changes is not None:
        problems.append(f"silver_append_flows: not supported with {_CDC} (rows appended to the replicas would "
                        f"bypass the changes applied to them)")
    if flow.silver_apply_changes_from_snapshot is not None:
        problems.append("silver_apply_changes_from_snapshot: only for source_format snapshot")
    return problems


def _append_flows_problems(flow: DataFlow, layer: str) -> list[str]:
    return [problem for index, append in enumerate(flow.append_flows(layer))
            for problem in _append_flow_problems(append, f"{layer}_append_flows[{index}]")]


def _sinks_problems(flow: DataFlow, layer: str) -> list[str]:
    return [problem for index, sink in enumerate(flow.sinks(layer))
            for problem in _sink_problems(sink, f"{layer}_sinks[{index}]")]


def _sink_problems(sink: Sink, where: str) -> list[str]:
    """A delta sink names one table; a kafka or eventhub one needs a broker that no local run has."""
    if sink.format == "kafka":
        servers = sink.option("kafka.bootstrap.servers")
        scope = sink.option("kafka_sink_servers_secret_scope_name")
        at = f" at {servers}" if servers else f" (kafka.bootstrap.servers from the secret scope {scope!r})" if scope else ""
        return [f"{where}.format: a kafka sink needs a Kafka broker{at}, which cdc-lakehouse cannot start: use a "
                f"delta sink (options tableName or path)"]
    if sink.format == "eventhub":
        namespace = sink.option("eventhub.namespace")
        at = f" ({namespace}.servicebus.windows.net)" if namespace else ""
        return [f"{where}.format: an eventhub sink needs an Azure Event Hubs namespace{at}, which cdc-lakehouse "
                f"cannot start: use a delta sink (options tableName or path)"]
    given = [name for name in ("tableName", "path") if sink.option(name)]
    if len(given) != 1:
        return [f"{where}.options: a delta sink writes one table: name it with tableName or with path "
                f"(got {' and '.join(given) or 'neither'})"]
    return []


def _append_flow_problems(append: AppendFlow, where: str) -> list[str]:
    """What an append flow's format needs and lacks (``where``: the key path of the flow)."""
    details, problems = append.source_details, []
    if append.create_streaming_table:
        problems.append(f"{where}.create_streaming_table: must be false (the data flow defines the table)")
    if details.snapshot_format is not None:
        problems.append(f"{where}.source_details.snapshot_format: only for source_format snapshot")
    if append.source_format == "delta" and not (details.source_database and details.source_table):
        problems.append(f"{where}.source_details: a delta append flow needs source_database and source_table")
    elif append.source_format == "cloudFiles" and not details.source_path:
        problems.append(f"{where}.source_details.source_path_<env>: required key is missing")
    fmt = reader_format(append.reader_options)
    if append.source_format == "cloudFiles" and fmt not in FEED_FORMATS:
        problems.append(f"{where}.reader_options: cloudFiles.format must be one of {', '.join(FEED_FORMATS)} "
                        f"(got {fmt!r}; {_UNREAD_FORMATS})")
    return problems


def _snapshot_problems(flow: DataFlow) -> list[str]:
    """What a snapshot flow's bronze needs: its full loads, applied as they come."""
    problems = _snapshot_layer_problems(flow, "bronze")
    if flow.bronze_cdc_apply_changes is not None:
        problems.append(f"{_BRONZE_CDC}: only for source_format cloudFiles (use bronze_apply_changes_from_snapshot)")
    fmt = flow.source_details.snapshot_format
    if fmt not in SNAPSHOT_FORMATS:
        problems.append(f"source_details.snapshot_format: must be one of {', '.join(SNAPSHOT_FORMATS)} (got {fmt!r})")
    elif fmt == "delta" and not (flow.source_details.source_database and flow.source_details.source_table):
        problems.append("source_details: a delta snapshot needs source_database and source_table")
    elif fmt != "delta" and not flow.source_path:
        problems.append("source_details.source_path_<env>: required key is missing (the snapshot files' "
                        "prefix: <prefix><version>.<format>)")
    return problems


# Keys of a snapshot flow dlt-meta does not use (its snapshot flows apply the full loads as read):
# warnings, so that such a file loads as it does in dlt-meta.
_EXPECTATIONS_UNUSED = "AUTO CDC FROM SNAPSHOT would read a row an expectation dropped as a delete"
SNAPSHOT_IGNORED = {
    **dict.fromkeys(("bronze_data_quality_expectations_json", "silver_data_quality_expectations_json"),
                    _EXPECTATIONS_UNUSED),
    **dict.fromkeys(("bronze_catalog_quarantine", "bronze_database_quarantine", "bronze_quarantine_table",
                     "bronze_quarantine_table_properties", "silver_catalog_quarantine", "silver_database_quarantine",
                     "silver_quarantine_table", "silver_quarantine_table_properties"),
                    f"a quarantine table takes the rows of expectations, which {_EXPECTATIONS_UNUSED}"),
    "source_details.source_metadata": "only Auto Loader (source_format cloudFiles) reads file metadata",
}


def _snapshot_warnings(flow: DataFlow, env: str) -> list[str]:
    # A silver-only flow's bronze keys are errors (_silver_only_problems), not warnings.
    set_keys = {key for key in _set_keys(flow) if flow.has_bronze or not key.startswith(("bronze_", "source_"))}
    return [f"{render_key(tuple(key.split('.')), env)}: ignored by snapshot flows, as dlt-meta ignores it: {why}"
            for key, why in SNAPSHOT_IGNORED.items() if key in set_keys]


def _snapshot_silver_problems(flow: DataFlow) -> list[str]:
    """What a snapshot flow's silver needs: the bronze table's full loads, applied as they come."""
    problems = _snapshot_layer_problems(flow, "silver")
    if flow.silver_cdc_apply_changes is not None:
        problems.append(f"{_CDC}: not for source_format snapshot (use silver_apply_changes_from_snapshot)")
    return problems


def _snapshot_layer_problems(flow: DataFlow, layer: str) -> list[str]:
    problems = []
    if getattr(flow, f"{layer}_apply_changes_from_snapshot") is None:
        problems.append(f"{layer}_apply_changes_from_snapshot: required key is missing (a snapshot flow applies "
                        f"successive full loads)")
    if getattr(flow, f"{layer}_append_flows"):
        problems.append(f"{layer}_append_flows: not supported for a snapshot flow (AUTO CDC FROM SNAPSHOT keeps the "
                        f"table equal to the latest full load: appended rows would stay whatever the next load holds)")
    if getattr(flow, f"{layer}_sinks"):
        problems.append(f"{layer}_sinks: not supported for a snapshot flow (dlt-meta's sinks stream the flow's input "
                        f"view; a snapshot flow reads whole full loads, which no stream can follow, on Databricks "
                        f"neither)")
    return problems


# What fills a bronze table: a silver-only flow reads one that another flow fills.
BRONZE_SOURCE_KEYS = (
    "source_details", "bronze_reader_options", "bronze_table_properties", "bronze_data_quality_expectations_json",
    "bronze_catalog_quarantine", "bronze_database_quarantine", "bronze_quarantine_table",
    "bronze_quarantine_table_properties", "bronze_cdc_apply_changes", "bronze_apply_changes_from_snapshot",
    "bronze_append_flows", "bronze_sinks",
)


def _silver_only_problems(flow: DataFlow, env: str) -> list[str]:
    """A flow without source_format fills no bronze table: keys saying how it would are errors."""
    set_keys = {key.partition(".")[0] for key in _set_keys(flow)}
    problems = [f"{render_key((key,), env)}: not for a silver-only flow (it has no source_format: it reads "
                f"{flow.bronze_target}, which another flow fills)" for key in BRONZE_SOURCE_KEYS if key in set_keys]
    if flow.silver_table is None:  # no silver either: more likely a flow that forgot its source_format
        problems.insert(0, "source_format: required key is missing (only a silver-only flow, which reads a "
                           "bronze table another flow fills, has none)")
    return problems


# AUTO CDC arguments a change-stream flow refuses: its replicas are applied in commit order by
# several flows (where, once), from changes that carry whole rows, in which a NULL is a value the
# source set (ignoring it would leave the replica unlike the source).
_NULL_UPDATES = ("ignore_null_updates", "ignore_null_updates_column_list", "ignore_null_updates_except_column_list")
_FEED_ONLY = {
    **dict.fromkeys(("where", "once"), "its changes come in whole transactions"),
    **dict.fromkeys(_NULL_UPDATES, "its changes carry whole rows, where a NULL is a value the source set"),
}


def flow_problems(flow: DataFlow) -> list[str]:
    """How the flow's AUTO CDC keys (of each layer) fit together and with its column filters."""
    problems = _filter_problems(flow.column_filters) if flow.silver_cdc_apply_changes is not None else []
    for layer in ("bronze", "silver"):
        cdc = flow.auto_cdc(layer)
        if cdc is not None:
            problems += _cdc_problems(flow, cdc, f"{layer}_cdc_apply_changes")
    return problems


def _cdc_problems(flow: DataFlow, cdc: CdcApplyChanges, name: str) -> list[str]:
    """One ``<layer>_cdc_apply_changes`` (``name``): its keys, column lists and SCD type."""
    problems = _key_problems(flow, cdc, name) + _null_update_problems(cdc, name)
    if flow.is_change_stream:
        problems += [f"{name}.{arg}: not supported for a {flow.kind} flow ({why})"
                     for arg, why in _FEED_ONLY.items() if getattr(cdc, arg)]
    if cdc.column_list is not None and cdc.except_column_list is not None:
        problems.append(f"{name}: column_list and except_column_list cannot be used together")
    if cdc.track_history_column_list is not None and cdc.track_history_except_column_list is not None:
        problems.append(f"{name}: track_history_column_list and track_history_except_column_list cannot be used "
                        f"together")
    return problems + _scd_type_problems(flow, cdc, name)


def _null_update_problems(cdc: CdcApplyChanges, name: str) -> list[str]:
    """The null-ignoring keys: one of them at most, naming columns the flow applies, no key."""
    given = [arg for arg in _NULL_UPDATES if getattr(cdc, arg)]
    problems = [f"{name}: {' and '.join(given)} cannot be used together"] if len(given) > 1 else []
    for arg in _NULL_UPDATES[1:]:
        for column in getattr(cdc, arg) or []:
            if contains_column(cdc.keys, column):
                problems.append(f"{name}.{arg}: key column {column!r} cannot be listed (a change always carries "
                                f"its key)")
            elif contains_column(cdc.except_column_list or [], column) or (
                    cdc.column_list is not None and not contains_column(cdc.column_list, column)):
                problems.append(f"{name}.{arg}: column {column!r} is not applied (column_list / except_column_list)")
    return problems


def _key_problems(flow: DataFlow, cdc: CdcApplyChanges, name: str) -> list[str]:
    problems = []
    for key in cdc.keys:
        if contains_column(cdc.except_column_list or [], key):
            problems.append(f"{name}.except_column_list: key column {key!r} cannot be excluded")
        if cdc.column_list is not None and not contains_column(cdc.column_list, key):
            problems.append(f"{name}.column_list: must include key column {key!r}")
        removal = flow.column_filters.removal_of(key) if name == _CDC else None
        if removal:
            problems.append(f"{_FILTERS}.{removal}: key column {key!r} cannot be {_REMOVED[removal]}")
    return problems


def _filter_problems(filters: ColumnFilters) -> list[str]:
    problems = []
    for column in filters.drop:
        for other in ("mask", "hash", "rename"):
            if contains_column(getattr(filters, other), column):
                problems.append(f"{_FILTERS}: column {column!r} is both dropped and in {other}")
    for column in filters.mask:
        if contains_column(filters.hash, column):
            problems.append(f"{_FILTERS}: column {column!r} is both masked and hashed")
    targets = list(filters.rename.values())
    for target in sorted({t for t in targets if targets.count(t) > 1}):
        problems.append(f"{_FILTERS}.rename: several columns are renamed to {target!r}")
    return problems


def _scd_type_problems(flow: DataFlow, cdc: CdcApplyChanges, name: str) -> list[str]:
    extension = flow.cdc_lakehouse if name == _CDC else None  # its scd2_table is silver's
    if cdc.scd_type == 2:
        problems = []
        if cdc.apply_as_truncates:
            problems.append(f"{name}.apply_as_truncates: only allowed with scd_type 1")
        if extension and flow.scd2_table and flow.scd2_table.casefold() == flow.replica_table.casefold():
            problems.append("cdc_lakehouse.scd2_table: must differ from silver_table (the SCD1 replica)")
        return problems
    problems = [
        f"{name}.{arg}: only allowed with scd_type 2"
        for arg in ("track_history_column_list", "track_history_except_column_list")
        if getattr(cdc, arg) is not None
    ]
    if extension and extension.scd2_table:
        problems.append(
            "cdc_lakehouse.scd2_table: only allowed with scd_type 2 (an SCD1 flow keeps no history)"
        )
    return problems


def cross_flow_problems(parsed: list[tuple[str, DataFlow]]) -> list[str]:
    """Ids and tables claimed by two flows (``parsed``: each flow with its label)."""
    ids = ((f.data_flow_id, label, "data_flow_id: duplicate of") for label, f in parsed)
    dlt_meta = [(label, f) for label, f in parsed if not f.is_change_stream]
    streams = [(label, f) for label, f in parsed if f.is_change_stream]
    return [*_clashes(ids), *_clashes(_dlt_meta_claims(dlt_meta)), *_change_stream_clashes(streams)]


def _dlt_meta_claims(flows: list[tuple[str, DataFlow]]) -> Iterator[tuple[Any, str, str]]:
    # Each table of a dlt-meta flow has one writer: two flows into one would mix their rows.
    for label, f in flows:
        # A silver-only flow reads its bronze table: it claims none of bronze's.
        bronze = [f.bronze_target, f.bronze_quarantine_target, f.history_target("bronze")] if f.has_bronze else []
        targets = [*bronze, f.silver_target, f.silver_quarantine_target, f.scd2_target]
        if f.kind == "snapshot":  # it writes no quarantine table (its quarantine keys are warnings)
            targets = [t for t in targets if t not in (f.bronze_quarantine_target, f.silver_quarantine_target)]
        for name in dict.fromkeys(t for t in targets if t):
            yield _local_name(name), label, f"table {name} is also written by"
        yield from _sink_claims(label, f)


def _sink_claims(label: str, flow: DataFlow) -> Iterator[tuple[Any, str, str]]:
    # A sink is a dataset of the pipeline, and its Delta table has one writer too, its own
    # flow's tables included: each sink claims as itself.
    for layer in ("bronze", "silver"):
        for index, sink in enumerate(flow.sinks(layer)):
            where = f"{label}: {layer}_sinks[{index}]"
            yield ("sink", sink.name), where, f"sink {sink.name} is also defined by"
            table, path = sink.option("tableName"), sink.option("path")
            if table:
                yield _local_name(table), where, f"table {table} is also written by"
            if path:
                yield ("path", path.rstrip("/")), where, f"path {path} is also written by"


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
        if claim in owners and owners[claim] != label:  # a flow's own clash is flow_problems'
            yield f"{label}: {text} {owners[claim]}"
        else:
            owners[claim] = label
