"""dlt-meta's dataflow specs (``src.dataflow_spec`` there), as a dlt-meta notebook's functions
get them: ``BronzeDataflowSpec`` and ``SilverDataflowSpec``, with dlt-meta's field names and
values (``sourceDetails["path"]``, ``readerConfigOptions``, ``targetDetails["table"]``, ...),
built from a flow of the onboarding file. So a ``bronze_custom_transform_func`` or
``bronze_next_snapshot_and_version`` written for dlt-meta runs unchanged.

Only the fields such functions read are here; dlt-meta's bookkeeping (version, dates, the
spec table's JSON of append flows, sinks and expectations) is not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from cdc_lakehouse.bronze import dlt_meta
from cdc_lakehouse.config import DataFlow
from cdc_lakehouse.config.models import CdcApplyChanges, SnapshotApplyChanges


@dataclass(frozen=True)
class BronzeDataflowSpec:
    dataFlowId: str
    dataFlowGroup: str
    sourceFormat: str | None
    sourceDetails: dict[str, str]
    readerConfigOptions: dict[str, str]
    targetDetails: dict[str, str]
    tableProperties: dict[str, str]
    cdcApplyChanges: str | None = None
    applyChangesFromSnapshot: str | None = None
    targetFormat: str = "delta"


@dataclass(frozen=True)
class SilverDataflowSpec:
    dataFlowId: str
    dataFlowGroup: str
    sourceFormat: str | None
    sourceDetails: dict[str, str]  # the bronze table it reads, as dlt-meta's silver spec has it
    readerConfigOptions: dict[str, str]
    targetDetails: dict[str, str]
    tableProperties: dict[str, str]
    selectExp: list[str] = field(default_factory=list)
    whereClause: list[str] = field(default_factory=list)
    cdcApplyChanges: str | None = None
    applyChangesFromSnapshot: str | None = None
    targetFormat: str = "delta"


def bronze_spec(flow: DataFlow) -> BronzeDataflowSpec:
    """dlt-meta's bronze spec of ``flow`` (onboard_dataflowspec: source details by their
    dlt-meta names, the path and catalog for the env)."""
    details = flow.source_details
    source = {"path": details.source_path, "catalog": details.source_catalog, "source_database": details.source_database,
              "source_table": details.source_table, "snapshot_format": details.snapshot_format}
    return BronzeDataflowSpec(
        dataFlowId=flow.data_flow_id, dataFlowGroup=flow.data_flow_group, sourceFormat=flow.source_format,
        sourceDetails=_present(source), readerConfigOptions=dict(flow.bronze_reader_options),
        targetDetails=_table(flow.bronze_catalog, flow.bronze_database, flow.bronze_table),
        tableProperties=dict(flow.bronze_table_properties), cdcApplyChanges=_json(flow.bronze_cdc_apply_changes),
        applyChangesFromSnapshot=_json(flow.bronze_apply_changes_from_snapshot))


def silver_spec(flow: DataFlow) -> SilverDataflowSpec:
    """dlt-meta's silver spec of ``flow``: it reads the bronze table, through the select and where
    of its ``silver_transformation_json`` entry."""
    shape = dlt_meta.transformation(flow)
    return SilverDataflowSpec(
        dataFlowId=flow.data_flow_id, dataFlowGroup=flow.data_flow_group, sourceFormat=flow.source_format,
        sourceDetails=_table(flow.bronze_catalog, flow.bronze_database, flow.bronze_table), readerConfigOptions={},
        targetDetails=_table(flow.silver_catalog, flow.silver_database, flow.silver_table),
        tableProperties=dict(flow.silver_table_properties), selectExp=list(shape.select_exp),
        whereClause=list(shape.where_clause), cdcApplyChanges=_json(flow.silver_cdc_apply_changes),
        applyChangesFromSnapshot=_json(flow.silver_apply_changes_from_snapshot))


def _table(catalog: str | None, database: str | None, table: str | None) -> dict[str, str]:
    return _present({"catalog": catalog, "database": database, "table": table})


def _present(values: dict[str, str | None]) -> dict[str, str]:
    return {key: value for key, value in values.items() if value is not None}


def _json(args: CdcApplyChanges | SnapshotApplyChanges | None) -> str | None:
    # dlt-meta keeps these as JSON text, scd_type a string ("1", "2")
    if args is None:
        return None
    return json.dumps({**args.model_dump(exclude_none=True), "scd_type": str(args.scd_type)})
