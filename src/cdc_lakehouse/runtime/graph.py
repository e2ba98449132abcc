"""What pipeline source files declare: datasets (tables, views) and the flows that fill them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


class PipelineDefinitionError(ValueError):
    """A pipeline that cannot run as declared: unknown names, cycles, duplicates."""


@dataclass(frozen=True)
class Expectation:
    name: str
    constraint: str
    action: str  # "warn" | "drop" | "fail"


@dataclass
class Dataset:
    name: str
    kind: str  # "table" | "streaming_table" | "materialized_view" | "view"
    comment: str | None = None
    table_properties: dict = field(default_factory=dict)
    partition_cols: list[str] | None = None
    schema: Any = None
    expectations: list[Expectation] = field(default_factory=list)
    func: Callable | None = None  # views and query-defined tables
    source_file: str | None = None
    location: str | None = None  # a Delta sink by path: the folder its table is kept in, not the lake's

    @property
    def persisted(self) -> bool:
        return self.kind != "view"

    def query(self) -> Any:
        return _call(self.func, f"dataset '{self.name}'")


@dataclass
class Flow:
    """One query writing into one target: an append/query flow or an AUTO CDC flow."""

    name: str
    target: str
    kind: str  # "query" | "append" | "auto_cdc" | "auto_cdc_snapshot"
    func: Callable | None = None
    once: bool = False
    cdc: dict = field(default_factory=dict)  # AUTO CDC parameters, as documented
    source_file: str | None = None

    def query(self) -> Any:
        return _call(self.func, f"flow '{self.name}'")


def _call(func: Callable | None, what: str) -> Any:
    """A declared query's DataFrame; a table declared without one (``create_streaming_table``)
    is filled by other flows and has none to call."""
    if func is None:
        raise PipelineDefinitionError(f"{what} has no query function")
    return func()


@dataclass
class PipelineGraph:
    datasets: dict[str, Dataset] = field(default_factory=dict)
    flows: dict[str, Flow] = field(default_factory=dict)

    def add_dataset(self, dataset: Dataset) -> None:
        existing = self.datasets.get(dataset.name)
        if existing is not None:
            raise PipelineDefinitionError(
                f"dataset '{dataset.name}' is defined twice "
                f"({existing.source_file or '?'} and {dataset.source_file or '?'})"
            )
        self.datasets[dataset.name] = dataset

    def add_flow(self, flow: Flow) -> None:
        if flow.name in self.flows:
            raise PipelineDefinitionError(f"flow '{flow.name}' is defined twice")
        self.flows[flow.name] = flow

    def dataset(self, name: str, wanted_by: str) -> Dataset:
        if name not in self.datasets:
            known = ", ".join(sorted(self.datasets)) or "none"
            raise PipelineDefinitionError(
                f"{wanted_by} reads unknown dataset '{name}' (defined datasets: {known})"
            )
        return self.datasets[name]

    def flows_into(self, target: str) -> list[Flow]:
        return [f for f in self.flows.values() if f.target == target]

    def validate(self) -> None:
        """Errors knowable before running: flows without a target, tables without a flow."""
        for flow in self.flows.values():
            self.dataset(flow.target, f"flow '{flow.name}'")
            if self.datasets[flow.target].kind == "view":
                raise PipelineDefinitionError(f"flow '{flow.name}' cannot write into view '{flow.target}'")
            if flow.kind.startswith("auto_cdc") and isinstance(flow.cdc.get("source"), str):
                self.dataset(flow.cdc["source"], f"flow '{flow.name}'")
        for ds in self.datasets.values():
            if ds.persisted and not self.flows_into(ds.name):
                raise PipelineDefinitionError(
                    f"table '{ds.name}' has no flow writing into it "
                    "(add @dp.append_flow or an AUTO CDC flow targeting it)"
                )
