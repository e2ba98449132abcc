"""Runs a loaded pipeline graph once: every flow, upstream first, reading only new input.

Datasets are brought up to date on demand: when a flow reads a dataset, that dataset's flows
run first (which orders the graph by its real dependencies and finds cycles). Each flow run is
one micro-batch whose input is planned in the flow's checkpoint before anything is written.

A flow that fails fails the update, not the flows that do not depend on it (as on Databricks):
its target is left unfinished for the rest of the update, the flows that read it are skipped
(and leave theirs unfinished in turn), every other flow runs and commits, and the update then
raises the first failure. The next update retries the failed flows from their checkpoints.
"""

from __future__ import annotations

import contextlib
import functools
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from cdc_lakehouse import flow_state
from cdc_lakehouse.cdc.apply import CdcSpec, state_table_name
from cdc_lakehouse.runtime import declarations, small_batch
from cdc_lakehouse.runtime.checkpoint import ConcurrentPlan, FlowCheckpoint
from cdc_lakehouse.runtime.event_log import FlowEvent, append_events
from cdc_lakehouse.runtime.expectations import apply_expectations
from cdc_lakehouse.runtime.fingerprint import pipeline_fingerprint
from cdc_lakehouse.runtime.flow_batch import FlowBatch, NoNewInput
from cdc_lakehouse.runtime.flow_state import DeltaFlowState, state_table_name as flow_state_table
from cdc_lakehouse.runtime.graph import Dataset, Flow, PipelineDefinitionError, PipelineGraph
from cdc_lakehouse.runtime.partition_refresh import FullRefreshNeeded, ViewRefresh, partition_columns
from cdc_lakehouse.runtime.quiet_update import forget_whole_update, quiet_update_events, record_whole_update
from cdc_lakehouse.runtime.shared_views import SharedViews
from cdc_lakehouse.runtime.table_reset import TableReset, selected_tables
from cdc_lakehouse.runtime.sinks import reads_only_cached, table_options, write_cdc, write_query, write_snapshot_cdc
from cdc_lakehouse.runtime.unchanged_views import UNCHANGED, RefreshKey, quiet_before_planning, refresh_key
from cdc_lakehouse.settings import REPORTS_FAILURES, SKIPPED_BY_FAILURE as UPSTREAM_FAILED
from cdc_lakehouse.storage import ConcurrentCommit, session_conf

# Errors that stop the whole update at once: the pipeline is wrong as declared, or another update
# writes the same lake. Any other error of a flow fails that flow and what reads it.
STOPS_THE_UPDATE = (PipelineDefinitionError, ConcurrentPlan, ConcurrentCommit)


class UpstreamFailed(Exception):
    """The running flow reads a dataset that a failed flow left unfinished in this update."""

    def __init__(self, dataset: str, why: str):
        super().__init__(f"{dataset} was not updated ({why})")
        self.why = why  # the failure at the root, passed on to what the skipped flow feeds


@dataclass
class RunResult:
    update_id: str
    events: list[FlowEvent] = field(default_factory=list)
    order: list[str] = field(default_factory=list)

    def event(self, flow: str) -> FlowEvent:
        return next(e for e in self.events if e.flow == flow)

    @property
    def failed(self) -> list[FlowEvent]:
        return [e for e in self.events if e.status == "FAILED"]

    @property
    def skipped_by_failure(self) -> list[FlowEvent]:
        return [e for e in self.events if e.status == "SKIPPED" and (e.message or "").startswith(UPSTREAM_FAILED)]


def failed_update(exc: BaseException) -> RunResult | None:
    """The update an error ended, when flows failed in it and the others ran to the end."""
    return getattr(exc, "update", None)


class PipelineRunner:
    def __init__(self, spark: SparkSession, store, graph: PipelineGraph, lake: Path,
                 configuration: dict | None = None, full_refresh: bool | Iterable[str] = False,
                 refresh: Iterable[str] = ()):
        """As Databricks' start-update: ``full_refresh`` True resets every table; names in
        ``full_refresh`` or ``refresh`` select the tables to update (the first reset before)."""
        self.spark = spark
        self.store = store
        self.graph = graph
        for dataset in graph.datasets.values():
            if dataset.location is not None:  # a Delta sink by path: its table is kept there
                store.place(dataset.name, dataset.location)
        self.checkpoints = Path(lake) / "_checkpoints"
        self.configuration = configuration or {}
        self.full_refresh = full_refresh if isinstance(full_refresh, bool) else tuple(full_refresh)
        self.refresh = tuple(refresh)
        self.result = RunResult(update_id=uuid.uuid4().hex[:12])
        self._done: set[str] = set()
        self._running: list[str] = []
        self.shared_views = SharedViews()
        self.tables = TableReset(graph, store, self.checkpoints)
        self.started_over: set[str] = set()
        self.unfinished: dict[str, str] = {}  # dataset -> the failure that left it so, this update
        self._errors: list[Exception] = []  # of the failed flows, in the order they failed
        self._events_written = 0
        self._probing = False  # while the update asks whether any flow has work (quiet_update.py)
        self.session_plan = small_batch.session_settings(spark)  # what a large batch runs with

    @functools.cached_property
    def pipeline_fingerprint(self) -> str:
        return pipeline_fingerprint(self.graph, self.configuration)

    def run(self) -> RunResult:
        """Every flow once; then, if flows failed, their first error, with ``update`` set to
        the result (``failed_update``)."""
        self.graph.validate()
        quiet = self._quiet_update()
        if quiet is not None:  # nothing to do: nothing planned, written or logged
            self.result.events = quiet
            return self.result
        last_was_whole = forget_whole_update(self)
        try:
            tables = self._updated_tables()
            reporters = [n for n in tables if self._reports_failures(n)]
            for name in tables:
                if name not in reporters:
                    self.ensure(name)
            # The reporters read each flow's latest failure from the event log: this update's
            # events first, unless neither it nor the last update (whole) had one to show.
            if self._errors or not last_was_whole:
                self._write_events()
            for name in reporters:
                self.ensure(name)
        finally:
            self._write_events()
        if not self._errors and not self._selects_tables():
            record_whole_update(self)
        if self._errors:
            error = self._errors[0]
            error.update = self.result  # type: ignore[attr-defined]  # read by failed_update
            raise error
        return self.result

    def _quiet_update(self) -> list[FlowEvent] | None:
        """Each flow's SKIPPED event when none has work, judged without running any (ensure
        does nothing meanwhile); else None."""
        self._probing = True
        try:
            return quiet_update_events(self)
        finally:
            self._probing = False

    def _selects_tables(self) -> bool:
        """Whether the update runs only some tables (``refresh`` or a ``full_refresh`` list)."""
        return bool(self.refresh) or (isinstance(self.full_refresh, tuple) and bool(self.full_refresh))

    def _reports_failures(self, name: str) -> bool:
        return self.graph.datasets[name].table_properties.get(REPORTS_FAILURES) == "true"

    def _write_events(self) -> None:
        append_events(self.spark, self.store, self.result.events[self._events_written:])
        self._events_written = len(self.result.events)

    def _updated_tables(self) -> list[str]:
        """Every table, or the selected ones: the others are read as they are, not updated."""
        everything = sorted(n for n, d in self.graph.datasets.items() if d.persisted)
        if self.full_refresh is True:
            if self.refresh:
                raise ValueError("a full refresh of every table takes no selection of tables to refresh")
            self.tables.reset(everything)
            return everything
        reset = self.full_refresh or ()
        if not reset and not self.refresh:
            return everything
        chosen = selected_tables(self.graph, [*reset, *self.refresh])
        self.tables.reset(reset)
        self._done.update(set(everything) - set(chosen))
        return chosen

    # -- dependency order -------------------------------------------------------------------
    def ensure(self, name: str) -> None:
        """Run every flow into ``name`` once in this update, after whatever it reads."""
        if name in self._done or self._probing:
            return
        if name in self._running:
            cycle = " -> ".join([*self._running[self._running.index(name):], name])
            raise PipelineDefinitionError(f"the pipeline has a cycle: {cycle}")
        self._running.append(name)
        try:
            if self.tables.deleted(name):
                self.tables.forget(name)
                self.started_over.add(name)
            for flow in sorted(self.graph.flows_into(name), key=lambda f: f.name):
                self._run_flow(flow)
        finally:
            self._running.pop()
        self._done.add(name)
        self.result.order.append(name)

    def require(self, name: str, batch: FlowBatch) -> None:
        """``ensure`` for a flow about to read ``name``: the flow is skipped when ``name`` was
        left unfinished by a failure, unless it reports failures (it reads ``name`` as it is)."""
        self.ensure(name)
        why = self.unfinished.get(name)
        if why is not None and not self._reports_failures(batch.flow.target):
            raise UpstreamFailed(name, why)

    def _run_flow(self, flow: Flow) -> None:
        started = time.monotonic()
        event = FlowEvent(self.result.update_id, flow.name, flow.target, flow.kind)
        if flow.target in self.started_over:
            event.message = (f"{flow.target} is not in the lake though its flows planned batches before: "
                             "the flow starts over from its sources")
        self.result.events.append(event)
        batch = FlowBatch(self, flow, FlowCheckpoint(self.checkpoints, flow.name))
        batch.state = DeltaFlowState(batch, flow.target) if flow.kind != "auto_cdc_snapshot" else None
        # Spark's UI and status tracker list each job under the flow that ran it; a flow run
        # inside another's (what it reads, brought up to date) hands the group back after.
        outer_group = self.spark.sparkContext.getLocalProperty("spark.jobGroup.id")
        self.spark.sparkContext.setJobGroup(flow.name, f"{flow.kind} flow into {flow.target}")
        token = declarations.running_flow.set(batch)
        state_token = flow_state.set_current(batch.state)
        try:
            self._execute(flow, batch, event)
        except NoNewInput as skipped:
            event.status = "SKIPPED"
            event.message = str(skipped) or "no new input"
        except UpstreamFailed as upstream:
            event.status = "SKIPPED"
            event.message = f"{UPSTREAM_FAILED}{upstream}"
            self.unfinished.setdefault(flow.target, upstream.why)
        except Exception as exc:
            event.status = "FAILED"
            event.message = f"{type(exc).__name__}: {exc}"
            exc.add_note(f"in flow '{flow.name}' into {flow.target}")  # the CLI's error line names it
            if isinstance(exc, STOPS_THE_UPDATE):
                raise
            # What the flow committed before it failed stays; its checkpoint replays the rest.
            self.unfinished.setdefault(flow.target, f"flow '{flow.name}' failed: {event.message}")
            self._errors.append(exc)
        except BaseException as stop:  # the process stops (an interrupt, an exit): nothing else runs
            event.status = "FAILED"
            event.message = f"{type(stop).__name__}: {stop}"
            raise
        finally:
            flow_state.reset_current(state_token)
            declarations.running_flow.reset(token)
            event.duration_s = round(time.monotonic() - started, 3)
            event.rows_read = batch.rows_read
            self.shared_views.flow_ended(self.spark)
            self.spark.sparkContext.setLocalProperty("spark.jobGroup.id", outer_group)  # type: ignore[arg-type]  # None clears it

    def _execute(self, flow: Flow, batch: FlowBatch, event: FlowEvent) -> None:
        target = self.graph.datasets[flow.target]
        event.batch_id = batch.open()
        if batch.quiet():
            raise NoNewInput
        if flow.kind == "query" and quiet_before_planning(batch, target.name):
            raise NoNewInput(UNCHANGED)
        if flow.kind == "auto_cdc_snapshot":
            event.rows_written = write_snapshot_cdc(self, flow, target, batch)
            return
        with pipeline_configuration(self.spark, small_batch.planning_settings(batch, target.name, self.session_plan)):
            self._plan_and_write(flow, target, batch, event)

    def _plan_and_write(self, flow: Flow, target: Dataset, batch: FlowBatch, event: FlowEvent) -> None:
        if flow.kind == "auto_cdc":
            source = batch.read_stream(flow.cdc["source"])
        else:
            source = self._query(flow, target, batch)
        if batch.streaming and not batch.new_input or _nothing_typed_yet(flow, source):
            self._create_empty(flow, target, batch, source)
            batch.confirm_definition()  # the whole query was built: every source was read
            raise NoNewInput
        key = _refresh_key(flow, target, batch, source)
        batch.commit_plan()
        with pipeline_configuration(self.spark, small_batch.writing_settings(batch, target.name, self.session_plan)):
            self._write(flow, target, batch, source, event)
        if key is not None:
            key.record()

    def _write(self, flow: Flow, target: Dataset, batch: FlowBatch, source: DataFrame, event: FlowEvent) -> None:
        """The batch's output, with its expectations, then its state; its checkpoint says so."""
        expectations = target.expectations + declarations.expectations_of(flow.func)
        from_cache = flow.kind != "auto_cdc" and reads_only_cached(source)
        kept, counts = apply_expectations(source, target.name, expectations, counted_now=from_cache)
        if batch.view_refresh is not None:
            kept = batch.view_refresh.view(kept)
            event.message = batch.view_refresh.describe()
        if flow.kind == "auto_cdc":
            event.rows_written = write_cdc(self, flow, target, kept, batch)
        else:
            event.rows_written = write_query(self, target, kept, batch, source, from_cache)
        batch.state.commit()
        batch.record_committed()
        event.expectations = counts()

    def _query(self, flow: Flow, target: Dataset, batch: FlowBatch) -> DataFrame:
        """A query flow's result; of a view refreshed by partition, only its touched partitions."""
        if target.kind != "materialized_view" or not partition_columns(target):
            return flow.query()
        batch.view_refresh = ViewRefresh(self.store, target, batch)
        try:
            return flow.query()
        except FullRefreshNeeded:
            batch.view_refresh.recompute_all()
            return flow.query()

    def _create_empty(self, flow: Flow, target: Dataset, batch: FlowBatch, source: DataFrame) -> None:
        """A streaming table exists from its first update on, even before any input arrives, as
        on Databricks: readers of a source onboarded before its first landing file find it
        empty. Created by an empty batch of the flow, whose plan lets the next updates skip the
        flow while its sources stay empty (``FlowBatch.quiet``). An AUTO CDC target whose
        source has no columns yet (typed from its rows) is created with its first change."""
        if self.store.exists(target.name) or flow.kind == "auto_cdc" and _nothing_typed_yet(flow, source):
            return
        commit = None
        if not flow.once:  # a once flow's one batch is still to come
            batch.commit_plan()
            commit = batch.commit()
        if flow.kind == "auto_cdc":  # applying no change writes the target and its state empty
            write_cdc(self, flow, target, source.limit(0), batch)
        else:
            self.store.append(target.name, source.limit(0), commit, **table_options(target))
        if commit is not None and batch.state is not None:
            # A flow that keeps state has it among its sinks: without it, the empty batch would
            # count as never committed, and replay its empty plan at every later update.
            batch.state.commit()
            batch.record_committed()

    # -- reads from the executing flow ------------------------------------------------------
    def read_dataset(self, name: str, wanted_by: str, batch: FlowBatch | None = None) -> DataFrame:
        dataset = self.graph.dataset(name, wanted_by)
        if dataset.kind == "view":
            return self.evaluate_view(dataset, batch)
        if batch is not None:
            self.require(name, batch)
        else:
            self.ensure(name)
        return self.store.read(name)

    def evaluate_view(self, dataset: Dataset, batch: FlowBatch | None = None) -> DataFrame:
        """The view's rows for the reading flow; the previous reader's, when it read the same input."""
        first_read = len(batch.reads) if batch is not None else 0
        df = dataset.query()  # also records the flow's offsets and rows read, shared or not
        shareable = batch is not None and batch.view_refresh is None
        key = tuple(batch.reads[first_read:]) if shareable and batch is not None else ()
        shared = self.shared_views.lookup(dataset.name, key)
        if shared is not None:
            df, results = shared.df, shared.expectations
        else:
            expectations = dataset.expectations + declarations.expectations_of(dataset.func)
            df, counts = apply_expectations(df, dataset.name, expectations, counted_now=True)
            results = counts()
            df = self.shared_views.keep(dataset.name, key, df, results)
        if results:
            self.result.events.append(
                FlowEvent(self.result.update_id, dataset.name, dataset.name, "view", expectations=results)
            )
        return df

    def sink_tables(self, flow: Flow) -> list[str]:
        sinks = [flow.target, state_table_name(flow.target)] if flow.kind.startswith("auto_cdc") else [flow.target]
        state = flow_state_table(flow.target, flow.name)
        keeps_state = self.store.exists(state) or FlowCheckpoint(self.checkpoints, flow.name).keeps_state()
        return [*sinks, state] if keeps_state else sinks


def pipeline_configuration(spark: SparkSession, configuration: dict) -> contextlib.AbstractContextManager:
    """Pipeline ``configuration`` is read by the files with ``spark.conf.get``, as on Databricks."""
    return session_conf.settings(spark, configuration)


def run_pipeline(spark: SparkSession, sources: list[str], lake: str | Path,
                 configuration: dict | None = None, full_refresh: bool | Iterable[str] = False,
                 store=None, refresh: Iterable[str] = ()) -> RunResult:
    """Load the pipeline files and run one update over everything new; ``full_refresh`` and
    ``refresh`` as in ``PipelineRunner``."""
    from cdc_lakehouse.runtime.lake_lock import lake_lock
    from cdc_lakehouse.runtime.loader import load_pipeline
    from cdc_lakehouse.storage import LakeStore

    configuration = dict(configuration or {})
    store = store or LakeStore(spark, lake)
    with lake_lock(Path(lake)), pipeline_configuration(spark, configuration):
        graph = load_pipeline(spark, sources)
        return PipelineRunner(spark, store, graph, Path(lake), configuration, full_refresh, refresh).run()


def _refresh_key(flow: Flow, target: Dataset, batch: FlowBatch, source: DataFrame) -> RefreshKey | None:
    """The key of a query recomputed in full, recorded once it is written; stops the flow when
    its last refresh recorded the same key."""
    if flow.kind != "query" or not batch.recomputes_all:
        return None
    key = refresh_key(batch, target.name, source)
    if key is not None and key.unchanged():
        raise NoNewInput(UNCHANGED)
    return key


def _nothing_typed_yet(flow: Flow, source: DataFrame) -> bool:
    """An AUTO CDC source typed from its own rows (silver replicas) has no columns while its
    table has no change yet. Its offsets stay where they are: the next update reads it again."""
    keys = CdcSpec.from_params(flow.cdc).keys if flow.kind == "auto_cdc" else []
    return bool(keys) and not set(keys) <= set(source.columns) and source.isEmpty()
