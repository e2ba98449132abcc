"""What a full refresh forgets, for the whole pipeline or a selection of its tables, and what
goes with a table deleted from the lake: its rows, its AUTO CDC state and the progress of the
flows that write it. On Databricks a flow's checkpoint lives with its table, so a deleted table
is rebuilt from its sources; here the checkpoints live apart, so they are forgotten explicitly.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from cdc_lakehouse.cdc.apply import state_table_name
from cdc_lakehouse.runtime.checkpoint import FlowCheckpoint
from cdc_lakehouse.runtime.flow_state import state_table_name as flow_state_table
from cdc_lakehouse.runtime.graph import Dataset, PipelineDefinitionError, PipelineGraph
from cdc_lakehouse.storage import TableStore

RESET_ALLOWED = "pipelines.reset.allowed"


def reset_allowed(dataset: Dataset) -> bool:
    return str(dataset.table_properties.get(RESET_ALLOWED, "true")).lower() != "false"


def selected_tables(graph: PipelineGraph, names: Iterable[str]) -> list[str]:
    """The tables a full refresh selection names; a clear error for a name that is none."""
    tables = sorted(n for n, d in graph.datasets.items() if d.persisted)
    wrong = [n for n in names if n not in tables]
    if wrong:
        raise PipelineDefinitionError(
            f"the full refresh selection names {', '.join(wrong)}, which the pipeline does not publish "
            f"as a table; its tables: {', '.join(tables)}"
        )
    return sorted(set(names))


class TableReset:
    def __init__(self, graph: PipelineGraph, store: TableStore, checkpoints: Path):
        self.graph, self.store, self.checkpoints = graph, store, checkpoints

    def reset(self, names: Iterable[str]) -> None:
        """Full refresh of ``names``. Tables with ``pipelines.reset.allowed = false`` (raw
        history) keep their rows and the progress of the flows writing them, as on Databricks."""
        for name in names:
            if reset_allowed(self.graph.datasets[name]):
                self.forget(name)

    def forget(self, name: str) -> None:
        if self.graph.datasets[name].persisted:
            self.store.drop(name)
            self.store.drop(state_table_name(name))
        for flow in self.graph.flows_into(name):
            self.store.drop(flow_state_table(name, flow.name))
            self._checkpoint(flow.name).reset()

    def deleted(self, name: str) -> bool:
        """Whether ``name`` is gone from the lake though flows have written it before."""
        if not self.graph.datasets[name].persisted or self.store.exists(name):
            return False
        return any(self._checkpoint(f.name).batches() for f in self.graph.flows_into(name))

    def _checkpoint(self, flow: str) -> FlowCheckpoint:
        return FlowCheckpoint(self.checkpoints, flow)
