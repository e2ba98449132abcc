"""dlt-meta's onboarding keys as cdc-lakehouse reads them: which are written once per environment,
and which it drops (they change no rows) or refuses (they would, and it cannot honour them), each
with the reason the user is told.
"""

from __future__ import annotations

from typing import Any

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
ENV_KEYS = FLOW_ENV_KEYS | SOURCE_DETAILS_ENV_KEYS

# dlt-meta names that are no keys of the file: saying why beats a bare "unknown key".
FUNCTION_NAMES = {
    **dict.fromkeys(
        ("bronze_custom_transform_func", "silver_custom_transform_func", "bronze_next_snapshot_and_version",
         "silver_next_snapshot_and_version"),
        "a function, not an onboarding key: a dlt-meta notebook passes it to DataflowPipeline.invoke_dlt_pipeline "
        "(cdc_lakehouse.dataflow_pipeline; docs/onboarding.md, \"From a dlt-meta notebook\")"),
}

# dlt-meta keys cdc-lakehouse does not implement (docs/onboarding.md, "Not implemented").
NOT_IMPLEMENTED_KEYS = {
    "silver_reader_options": "dlt-meta key not implemented by cdc-lakehouse: silver streams the bronze table "
                             "without reader options (docs/onboarding.md, \"Not implemented\")",
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
# ... and keys that would change its results, which its semantics forbid: errors. Its replicas
# must equal the source at each commit point (CONTRACT sections 3-6): every change of every
# committed transaction, applied in commit order, none dropped, none added beside the stream.
_DROPS_CHANGES = "a landing line a file's rule dropped would be a change missing from the replicas"
CHANGE_STREAM_UNSUPPORTED = {
    "bronze_data_quality_expectations_json": f"its bronze applies the contract's rules (docs/bronze.md); {_DROPS_CHANGES}",
    **dict.fromkeys(("bronze_catalog_quarantine", "bronze_database_quarantine", "bronze_quarantine_table",
                     "bronze_quarantine_table_properties"),
                    "its bronze quarantines what the contract's rules refuse (docs/bronze.md), in its own tables"),
    "silver_transformation_json": "a select or where over change rows could drop changes or alter keys and "
                                  "sequences; use cdc_lakehouse.column_filters",
    "silver_data_quality_expectations_json": "an expectation dropping a change row would leave the replicas unlike "
                                             "the source; values that do not fit become anomalies (docs/onboarding.md)",
    "bronze_cdc_apply_changes": "its bronze keeps the raw landing data; its changes are applied in silver",
    "bronze_append_flows": "appended rows would be changes of no transaction; its bronze reads its landing folder only",
    "silver_append_flows": "appended rows would bypass the changes applied to the replicas",
    "bronze_sinks": "its outputs are the gold tables",
    "silver_sinks": "its outputs are the gold tables",
    "source_details.source_metadata": "its bronze keeps the contract's file columns (docs/bronze.md)",
}


def ignored_key(key: Any) -> str:
    """The IGNORED_KEYS entry of ``key`` (with or without its env suffix), else ''."""
    text = str(key)
    base = text.rpartition("_")[0]
    return text if text in IGNORED_KEYS else base if base in IGNORED_KEYS else ""


def render_key(loc: tuple[Any, ...], env: str) -> str:
    """A key path as the file writes it: ``a.b[0].c``, per-environment keys with their suffix."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            name = f"{part}_{env}" if part in ENV_KEYS else str(part)
            text += f".{name}" if text else name
    return text
