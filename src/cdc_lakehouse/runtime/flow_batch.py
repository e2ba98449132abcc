"""One micro-batch of one flow: which input it reads, and whether its output is committed."""

from __future__ import annotations

import functools
import json
import os

from pyspark.sql import DataFrame

from cdc_lakehouse.runtime import file_identity, file_source
from cdc_lakehouse.runtime.fingerprint import DEFINITION, definition_fingerprint
from cdc_lakehouse.storage import Commit, StreamingSourceChanged


WHOLE = "whole:"  # offsets entry of a table a streaming flow also reads whole (its version)
SNAPSHOT = "snapshot"  # offsets entry of an AUTO CDC FROM SNAPSHOT batch: the version it applied


class NoNewInput(Exception):
    """A streaming flow has nothing new to read in this update."""


class FlowBatch:
    def __init__(self, runner, flow, checkpoint):
        self.runner = runner
        self.flow = flow
        self.checkpoint = checkpoint
        self.app_id = f"cdc-lakehouse/{flow.name}"
        self.id = 0
        self.replay = False
        self.planned: dict = {}
        self.previous: dict = {}
        self.previous_id: int | None = None
        self.offsets: dict = {}
        self.streaming = False
        self.new_input = False
        self.rows_read = 0
        self.reads: list[tuple[str, str]] = []  # every input read, in order: the key of a shared view
        self.view_refresh = None  # partition_refresh.ViewRefresh of a view refreshed by partition
        self.state = None  # flow_state.DeltaFlowState of a query or append flow
        self._listings: dict[tuple[str, str], list[str]] = {}
        self._compared: dict[str, tuple[str, int]] = {}  # file_identity.compare of seen files

    @property
    def store(self):
        return self.runner.store

    @property
    def recomputes_all(self) -> bool:
        """A batch query, written over the whole table: not streamed, not refreshed by partition."""
        return not self.streaming and self.view_refresh is None

    @functools.cached_property
    def definition(self) -> str:
        target = self.runner.graph.datasets[self.flow.target]
        return definition_fingerprint(self.runner.pipeline_fingerprint, target, self.flow)

    # -- lifecycle --------------------------------------------------------------------------
    def open(self) -> int:
        """Pick the batch id: re-run a planned batch whose output is missing, else the next."""
        committed = self._committed()
        batches = self.checkpoint.batches()
        last = batches[-1] if batches else None
        if self.flow.once and committed >= 0:
            raise NoNewInput
        if last is not None and committed < last:
            self.id, self.replay, self.planned = last, True, self.checkpoint.offsets(last)
        else:
            self.id = max(committed, -1 if last is None else last) + 1
        earlier = [b for b in batches if b < self.id]
        self.previous_id = earlier[-1] if earlier else None
        self.previous = self.checkpoint.offsets(self.previous_id)
        return self.id

    def commit(self) -> Commit:
        return Commit(self.app_id, self.id)

    def already_committed(self, table: str) -> bool:
        version = self.store.committed_version(table, self.app_id) if self.store.exists(table) else None
        return version is not None and version >= self.id

    def _committed(self) -> int:
        """The last batch every sink holds: the recorded one (checkpoint.py), or the last that
        each sink's app transaction names (lakes before the record; a stop just before it)."""
        versions = [
            self.store.committed_version(t, self.app_id) if self.store.exists(t) else None
            for t in self.runner.sink_tables(self.flow)
        ]
        return max(self.checkpoint.committed_batch(), min(-1 if v is None else v for v in versions))

    def record_committed(self) -> None:
        """Every sink holds this batch's output, or had nothing to take from it."""
        self.checkpoint.write_committed(self.id)

    def commit_plan(self) -> None:
        # A view's refresh overwrites it from its input as of now, so a re-run plans afresh.
        if self.view_refresh is not None or (self.streaming and not self.replay):
            self.checkpoint.write_offsets(self.id, {**self.offsets, DEFINITION: self.definition}, new=not self.replay)

    def quiet(self) -> bool:
        """Whether every source the last batch read has nothing new, and the flow is defined as
        it was then (a changed definition may read other sources). Then the flow has nothing to
        do, and it is known before the flow plans its query, which costs more than the check."""
        sources = self._sources_under_this_definition()
        if self.replay or not sources:
            return False
        if not self.store.exists(self.flow.target):  # deleted, or never made (an untyped AUTO CDC target)
            return False
        return all(self._source_quiet(source, offset) for source, offset in sources.items())

    def _sources_under_this_definition(self) -> dict:
        """The sources, with their offsets, that the flow last read as it is defined now: those
        of the last batch, or those of a later update that found nothing new in them."""
        if self.previous.get(DEFINITION) == self.definition:
            return {k: v for k, v in self.previous.items() if k not in (DEFINITION, SNAPSHOT)}
        confirmed = self.checkpoint.confirmed()
        if confirmed.get("after_batch") == self.previous_id and confirmed.get("definition") == self.definition:
            return confirmed["sources"]
        return {}

    def confirm_definition(self) -> None:
        """This batch read every source (its query was built) under a new definition and found
        nothing new: recorded with what it read, so that the next update skips the flow without
        planning it again (a code change must not make every quiet update plan every flow until
        new input lands). A flow that found its sources empty from the start is confirmed with
        no batch before it, unless it planned its empty first batch to create its table: a once
        flow, or one appending to a table another flow created, plans none."""
        if not self.streaming or self.new_input or self.replay:
            return
        if self.previous_id is None and self.checkpoint.batches():
            return
        if self.previous.get(DEFINITION) != self.definition:
            self.checkpoint.write_confirmed(self.previous_id, self.definition, self.offsets)

    def record_snapshot(self, version: int) -> None:
        """An AUTO CDC FROM SNAPSHOT batch applied snapshot ``version``: recorded with the tables
        its source read, so that an update in which none of them changed skips the flow."""
        self.checkpoint.write_offsets(self.id, {**self.offsets, SNAPSHOT: {"version": version}, DEFINITION: self.definition})

    def applied_snapshot(self) -> int | None:
        return self.previous.get(SNAPSHOT, {}).get("version")

    def _source_quiet(self, source: str, offset: dict) -> bool:
        kind, _, name = source.partition(":")
        if kind in ("table", WHOLE.rstrip(":")) and name in self.runner.graph.datasets:
            self.runner.require(name, self)
            return self.store.version(name) == offset.get("version") and self._same_table(name, offset)
        if kind in ("table", WHOLE.rstrip(":")) and self.store.exists(name):  # a table no pipeline defines
            return self.store.version(name) == offset.get("version") and self._same_table(name, offset)
        if kind == "files":
            # Listing without the recorded filter finds at least the files the flow would read.
            seen = self._files_seen.get(source, {})
            listed = self._listing(name, offset.get("listing", {}))
            # Stat only: a seen file whose size and time are as read is not read again.
            fresh = [f for f in listed if f not in seen or not file_identity.looks_unchanged(f, seen[f])]
            return not fresh or not self._new_files(source, fresh)[0]
        return False

    # -- reads ------------------------------------------------------------------------------
    def read(self, name: str) -> DataFrame:
        wanted_by = f"flow '{self.flow.name}'"
        if name not in self.runner.graph.datasets and self.store.exists(name):
            return self._read_outside(name)
        if self.view_refresh is not None and self.runner.graph.dataset(name, wanted_by).kind != "view":
            self.runner.require(name, self)
            return self.view_refresh.read(name)
        if self.view_refresh is not None:
            self.view_refresh.read_view(name)
        # A whole-table read needs no version in the key: the table's flows have run before it
        # is read, and nothing else writes it in this update (a runner is one update).
        self.reads.append((f"read:{name}", ""))
        df = self.runner.read_dataset(name, wanted_by, self)
        if self.store.exists(name):  # for a streaming flow, a change to it wakes the flow (quiet)
            self.offsets[f"{WHOLE}{name}"] = {"version": self.store.version(name)}
        return df

    def _read_outside(self, name: str) -> DataFrame:
        """A table of the lake that no pipeline defines (a source table, as a Unity Catalog
        table is on Databricks): read as it is now; a new version of it wakes the flow."""
        version = self.store.version(name)
        self.reads.append((f"read:{name}", str(version)))
        self.offsets[f"{WHOLE}{name}"] = {"version": version}
        return self.store.read(name)

    def read_stream(self, name: str) -> DataFrame:
        """The rows appended to ``name`` since the flow's last batch; ``name`` is a dataset of
        the pipeline, or a table of the lake that none defines (a source table)."""
        if name in self.runner.graph.datasets or not self.store.exists(name):
            dataset = self.runner.graph.dataset(name, f"flow '{self.flow.name}'")
            if dataset.kind == "view":
                return self.runner.evaluate_view(dataset, self)
            self.runner.require(name, self)
        self.streaming = True
        source = f"table:{name}"
        recorded = self.previous.get(source, {})
        if not self._same_table(name, recorded):
            raise StreamingSourceChanged(
                f"flow '{self.flow.name}' reads {name} as a stream, but {name} was deleted and created again "
                f"since its last batch (Delta table id {self.store.table_id(name)}, the checkpoint recorded "
                f"{recorded['table_id']}): its rows cannot be told from the ones already read; full-refresh "
                f"{self.flow.target} (cdc-lakehouse run --full-refresh-table {self.flow.target})"
            )
        start = recorded.get("version")
        end = self._planned(source, "version") if self.replay else self.store.version(name)
        df, rows = self.store.read_appended(name, start, end)
        self._record(source, {"version": end, "table_id": self.store.table_id(name)}, rows, after=start)
        return df

    def _same_table(self, name: str, offset: dict) -> bool:
        """Whether ``name`` is the table the offset was taken of (offsets before table ids: yes)."""
        return offset.get("table_id") in (None, self.store.table_id(name))

    def read_files(self, path: str, fmt: str, options: dict, schema) -> DataFrame:
        self.streaming = True
        folder = os.path.abspath(path)
        source, listing = f"files:{folder}", file_source.listing_options(options)
        if self.replay:
            files, starts = self._planned(source, "files"), self.planned[source].get("starts", {})
        else:
            files, starts = self._new_files(source, self._listing(folder, listing))
        if not files:
            self._record(source, {"files": [], "listing": listing}, 0)
            empty = file_source.empty_frame(self.runner.spark, fmt, options, schema)
            if empty is None:
                raise NoNewInput
            return empty
        df = file_source.read_files(self.runner.spark, files, fmt, options, schema, starts)
        identities = {f: file_identity.identity(f) for f in files}
        # Counting the new rows costs one pass over the new files; the event log needs it.
        offset = {"files": files, "identities": identities, "listing": listing, **({"starts": starts} if starts else {})}
        self._record(source, offset, df.count())
        return df

    def _new_files(self, source: str, listed: list[str]) -> tuple[list[str], dict[str, int]]:
        """The files to read (not read before, or grown since: runtime/file_identity.py) that
        are not being written, and where each grown one is read from."""
        seen = self._files_seen.get(source, {})
        starts = {}
        for f in listed:
            if f in seen:
                # The quiet check and the read of one batch ask alike: each file is read once.
                if f not in self._compared:
                    self._compared[f] = file_identity.compare(f, seen[f])
                kind, start = self._compared[f]
                if kind == file_identity.GROWN:
                    starts[f] = start
        files = file_source.settled([f for f in listed if f not in seen or f in starts])
        return files, {f: starts[f] for f in files if f in starts}

    @functools.cached_property
    def _files_seen(self) -> dict[str, dict]:
        return self.checkpoint.files_seen(self.id)

    def _listing(self, path: str, listing: dict) -> list[str]:
        """The folder's files, listed once per batch (``quiet`` and the read ask alike)."""
        key = (path, json.dumps(listing, sort_keys=True))
        if key not in self._listings:
            self._listings[key] = file_source.list_files(path, listing)
        return self._listings[key]

    def _planned(self, source: str, key: str):
        if source not in self.planned:
            raise RuntimeError(
                f"flow '{self.flow.name}' re-runs batch {self.id} but its plan has no input "
                f"'{source}': the flow's sources changed since the interrupted run; full-refresh it"
            )
        return self.planned[source][key]

    def _record(self, source: str, offset: dict, rows: int, after=None) -> None:
        """``after``: where a table read started (its offset says only where it ends)."""
        self.offsets[source] = offset
        self.reads.append((source, json.dumps({"after": after, **offset}, sort_keys=True)))
        self.rows_read += rows
        self.new_input = self.new_input or rows > 0
