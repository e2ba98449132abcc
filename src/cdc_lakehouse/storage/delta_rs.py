"""Local Delta tables: committed by delta-rs, read by Spark straight from the snapshot's files.

Spark cannot load the Delta jars here, so reads list the active files of the Delta snapshot
(delta-rs) and hand them to Spark's Parquet reader with the table schema; no table is ever
collected on the driver. Writes hand Spark's batch to delta-rs as Arrow (arrow_handoff.py).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from cdc_lakehouse.storage.arrow_handoff import STAGE_INPUT_BYTES, arrow_batch
from cdc_lakehouse.storage.base import (
    Commit, ConcurrentCommit, LakePaths, StreamingSourceChanged, TableInfo, UpsertSpec, where_predicate,
)
from cdc_lakehouse.paths import glob_literal, local_path

class DeltaRsStore(LakePaths):
    """A lake directory of Delta tables named ``schema.table`` (``<lake>/<schema>/<table>``)."""

    def __init__(self, spark: SparkSession, lake: str | Path, commit_hook=None, stage_above_bytes: int = STAGE_INPUT_BYTES):
        self.spark = spark
        self.stage_above_bytes = stage_above_bytes
        self.lake = Path(lake).resolve()
        self.placed = {}
        if any(c in str(self.lake) for c in "[]"):  # delta-rs reads such a path as a URL host
            raise ValueError(f"delta-rs cannot hold Delta tables under a path with '[' or ']' "
                             f"({self.lake}): choose another lake folder")
        # Called as hook("before"|"after", table) around every data commit: the seam where
        # reliability tests stop a run, as a crash would, at every commit point.
        self.commit_hook = commit_hook
        self._snapshots: dict[tuple, DeltaTable] = {}

    def _around_commit(self, stage: str, name: str) -> None:
        if self.commit_hook is not None:
            self.commit_hook(stage, name)

    def _table(self, name: str, version: int | None = None) -> DeltaTable | None:
        """The table's snapshot at ``version`` (None: the latest), loaded once per store: an
        update asks for the same tables hundreds of times, and loading one replays its log."""
        path = str(self.path(name))
        born = _creation(path)
        if born is None:  # no table, or its first commit was cleaned up: nothing to key a cache on
            try:
                return DeltaTable(path, version=version)
            except TableNotFoundError:
                return None
        key = (path, born, version)
        table = self._snapshots.get(key)
        if table is None:
            table = self._snapshots[key] = DeltaTable(path, version=version)
        elif version is None:
            table.update_incremental()
        return table

    def _existing(self, name: str, version: int | None = None) -> DeltaTable:
        table = self._table(name, version)
        if table is None:
            raise LookupError(f"table {name} does not exist in {self.lake}")
        return table

    # -- reads ------------------------------------------------------------------------------
    def exists(self, name: str) -> bool:
        return DeltaTable.is_deltatable(str(self.path(name)))

    def versioned(self) -> bool:
        return True

    def version(self, name: str) -> int | None:
        table = self._table(name)
        return None if table is None else table.version()

    def table_id(self, name: str) -> str | None:
        """The id Delta gives a table when it is created: kept by every later write, new when
        the table is deleted and created again."""
        table = self._table(name)
        return None if table is None else str(table.metadata().id)

    def committed_version(self, name: str, app_id: str) -> int | None:
        table = self._table(name)
        return None if table is None else table.transaction_version(app_id)

    def read(self, name: str, version: int | None = None) -> DataFrame:
        table = self._existing(name, version)
        return self._files_as_dataframe(table, _files(table))

    def column_max(self, name: str, column: str):
        """From the files' statistics when every file has one for the column (no pass over
        the rows), else computed by Spark."""
        actions = pa.table(self._existing(name).get_add_actions(flatten=True))
        stat = f"max.{column}"
        if stat in actions.column_names and actions.column(stat).null_count == 0:
            return pc.max(actions.column(stat)).as_py()
        return self.read(name).agg(F.max(column)).collect()[0][0]

    def row_count(self, name: str) -> int:
        """From the Delta log's statistics (no pass over the rows) when every file has them."""
        try:
            return _row_count(self._existing(name))
        except MissingStatistics:
            return self.read(name).count()

    def size_bytes(self, name: str) -> int | None:
        """From the add actions of the table's latest snapshot (loaded once per version)."""
        table = self._table(name)
        if table is None:
            return None
        return int(pc.sum(pa.table(table.get_add_actions(flatten=True)).column("size_bytes")).as_py() or 0)

    def read_appended(self, name: str, after: int | None, up_to: int) -> tuple[DataFrame, int]:
        """Rows appended after version ``after`` (None: from the start) up to ``up_to``, and
        how many there are (from the Delta log, without reading the rows)."""
        table = self._existing(name, up_to)
        before = set() if after is None else set(_files(self._existing(name, after)))
        now = _files(table)
        removed = before.difference(now)
        if removed:
            raise StreamingSourceChanged(
                f"{name}: {len(removed)} file(s) were removed or rewritten between versions "
                f"{after} and {up_to}; a streaming read needs an append-only source "
                "(full-refresh the reader, or read it as a batch)"
            )
        added = [f for f in now if f not in before]
        root = str(self.path(name))
        return self._files_as_dataframe(table, added), _row_count(table, {os.path.relpath(f, root) for f in added})

    def _files_as_dataframe(self, table: DeltaTable, files: list[str]) -> DataFrame:
        schema = from_arrow_schema(pa.schema(table.schema().to_arrow()))
        if not files:
            return self.spark.createDataFrame([], schema)
        reader = self.spark.read.schema(schema)
        if table.metadata().partition_columns:
            reader = reader.option("basePath", local_path(table.table_uri))
        return reader.parquet(*[glob_literal(f) for f in files])  # exact files: no pattern in them

    def list_tables(self) -> list[TableInfo]:
        infos = []
        for log in sorted(self.lake.glob("*/*/_delta_log")):
            name = f"{log.parent.parent.name}.{log.parent.name}"
            table = DeltaTable(str(log.parent))
            infos.append(
                TableInfo(
                    name=name,
                    path=str(log.parent),
                    version=table.version(),
                    row_count=_row_count(table),
                    properties=dict(table.metadata().configuration),
                )
            )
        return infos

    # -- writes -----------------------------------------------------------------------------
    def append(self, name: str, df: DataFrame, commit: Commit | None = None, **table_opts) -> int:
        return self._write(name, df, "append", commit, **table_opts)

    def overwrite(self, name: str, df: DataFrame, commit: Commit | None = None, **table_opts) -> int:
        return self._write(name, df, "overwrite", commit, **table_opts)

    def replace_where(self, name: str, df: DataFrame, where: dict[str, list], commit: Commit | None = None) -> int:
        predicate = where_predicate(where)
        with arrow_batch(df, self.stage_above_bytes) as batch:
            self._around_commit("before", name)
            write_deltalake(str(self.path(name)), batch.data, mode="overwrite", predicate=predicate,
                            commit_properties=_commit_properties(commit))
            self._around_commit("after", name)
            return batch.num_rows

    def _write(self, name, df, mode, commit, **table_opts) -> int:
        with arrow_batch(df, self.stage_above_bytes) as batch:
            self._write_arrow(name, batch.data, mode, commit, **table_opts)
            return batch.num_rows

    def _write_arrow(self, name, data: pa.Table | pa.RecordBatchReader, mode, commit, partition_by=None, properties=None, comment=None):
        path = self.path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        # An append of a writer's batch is checked and committed on one snapshot: a batch already
        # in is not written again, and Delta refuses a commit of the same batch made by a writer
        # racing this one since (two updates on one lake: issue 41 case 2). Without a table yet,
        # it is created only if no racing writer created it first.
        guarded = commit is not None and mode == "append"
        snapshot = self._table(name) if guarded else None
        if snapshot is not None and _holds(snapshot, commit):
            return
        creates = guarded and snapshot is None
        self._around_commit("before", name)
        try:
            self._commit_arrow(snapshot or str(path), data, "error" if creates else mode, commit,
                               partition_by, properties, comment)
        except DeltaError as exc:
            raced = isinstance(exc, CommitFailedError) or (creates and self.exists(name))
            if not (guarded and raced):
                raise
            raise ConcurrentCommit(name, commit) from exc
        self._around_commit("after", name)
        self._set_properties(name, properties)

    @staticmethod
    def _commit_arrow(table: DeltaTable | str, data, mode, commit, partition_by, properties, comment) -> None:
        write_deltalake(
            table,
            data,
            mode=mode,
            partition_by=partition_by or None,
            schema_mode="overwrite" if mode == "overwrite" else "merge",
            configuration=_delta_configuration(properties),
            description=comment,
            commit_properties=_commit_properties(commit),
        )

    def upsert(self, name: str, df: DataFrame, spec: UpsertSpec, commit: Commit | None = None, **table_opts) -> int:
        """MERGE ``df`` into ``name`` by key; creates the table from ``df`` when absent."""
        # In key order, so the files a MERGE writes each hold a narrow key range: later batches
        # of nearby keys (recent orders) then rewrite few files, not every one.
        with arrow_batch(df, self.stage_above_bytes) as batch:
            data = batch.table().sort_by([(k, "ascending") for k in spec.keys])
        flag = spec.delete_flag
        if not self.exists(name):
            kept = data if flag is None else data.filter(pc.invert(data[flag])).drop_columns([flag])
            self._write_arrow(name, kept, "append", commit, **_keyed_table_opts(table_opts))
            return data.num_rows
        target = self._existing(name)
        before = target.version()
        columns = [c for c in data.column_names if c != flag]
        match = " AND ".join(f"t.`{k}` = s.`{k}`" for k in (*spec.keys, *spec.extra_match_columns))
        # Only target files whose statistics overlap the batch's keys can match: say so, so
        # that delta-rs skips the others instead of reading the whole table.
        bounds = _key_range(data, spec.keys[0])
        match = f"{match} AND {bounds}" if bounds else match
        updates = {f"`{c}`": f"s.`{c}`" for c in columns}
        keep = None if flag is None else f"NOT s.`{flag}`"
        merger = target.merge(
            data, predicate=match, source_alias="s", target_alias="t", merge_schema=True,
            commit_properties=_commit_properties(commit),
        )
        if flag is not None:
            merger = merger.when_matched_delete(predicate=f"s.`{flag}`")
        self._around_commit("before", name)
        merger.when_matched_update(updates, predicate=keep).when_not_matched_insert(
            updates, predicate=keep
        ).execute()
        if commit is not None and self.version(name) == before:
            # delta-rs commits nothing for a MERGE that changes nothing, not even the writer's
            # version: without it the batch would count as never written and be re-run at
            # every update, and nothing after it would ever be read.
            empty = pa.schema(target.schema().to_arrow()).empty_table()
            write_deltalake(str(self.path(name)), empty, mode="append", commit_properties=_commit_properties(commit))
        self._around_commit("after", name)
        return data.num_rows

    def _set_properties(self, name: str, properties: dict | None) -> None:
        """Pipeline properties (``quality``, ``pipelines.*``) are not Delta settings, so delta-rs
        only takes them through ALTER; set them once, when they differ."""
        wanted = {k: str(v) for k, v in (properties or {}).items() if not k.startswith("delta.")}
        table = self._existing(name)
        current = table.metadata().configuration
        if any(current.get(k) != v for k, v in wanted.items()):
            table.alter.set_table_properties(wanted, raise_if_not_exists=False)

    # -- maintenance --------------------------------------------------------------------------
    def drop(self, name: str) -> None:
        path = self.path(name)
        shutil.rmtree(path, ignore_errors=True)
        # A table made again at the path is another table: no snapshot of this one may serve it.
        self._snapshots = {k: t for k, t in self._snapshots.items() if k[0] != str(path)}

    def delete_where(self, name: str, predicate: str) -> int:
        """``predicate`` in SQL that DataFusion parses as Spark does (plain comparisons)."""
        metrics = self._existing(name).delete(predicate)
        return int(metrics.get("num_deleted_rows", 0))

    def optimize(self, name: str) -> dict[str, int]:
        metrics = self._existing(name).optimize.compact()
        return {"files_added": metrics["numFilesAdded"], "files_removed": metrics["numFilesRemoved"]}

    def vacuum(self, name: str, retention_hours: float, enforce_retention: bool = True) -> int:
        removed = self._existing(name).vacuum(retention_hours=int(retention_hours), dry_run=False,
                                              enforce_retention_duration=enforce_retention)
        return len(removed)

    def history(self, name: str, limit: int | None = None) -> list[dict]:
        return self._existing(name).history(limit)


def _creation(path: str) -> tuple[int, int] | None:
    """Which table lives at ``path``: its first commit file's inode and time. A table deleted
    and created again (a full refresh) has a new one, so no snapshot of the old is reused."""
    try:
        st = os.stat(os.path.join(path, "_delta_log", "00000000000000000000.json"))
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _holds(table: DeltaTable, commit: Commit) -> bool:
    """Whether the snapshot has the writer's batch (its version, or a later one) in."""
    version = table.transaction_version(commit.app_id)
    return version is not None and version >= commit.version


def _commit_properties(commit: Commit | None) -> CommitProperties | None:
    if commit is None:
        return None
    return CommitProperties(app_transactions=[Transaction(commit.app_id, commit.version)])


# Files of keyed (MERGE) tables: a copy-on-write MERGE rewrites every file holding a changed
# key, so smaller files make its cost follow the changes; Databricks tunes file sizes down for
# MERGE-heavy tables the same way (and writes deletion vectors, which delta-rs cannot yet).
KEYED_TARGET_FILE_SIZE = 16 * 1024 * 1024


def _keyed_table_opts(table_opts: dict) -> dict:
    properties = {"delta.targetFileSize": str(KEYED_TARGET_FILE_SIZE), **(table_opts.get("properties") or {})}
    return {**table_opts, "properties": properties}


def _delta_configuration(properties: dict | None) -> dict | None:
    # delta-rs validates the configuration at write time and knows only Delta's own keys.
    delta = {k: str(v) for k, v in (properties or {}).items() if k.startswith("delta.")}
    return delta or None


class MissingStatistics(RuntimeError):
    """A data file of the table has no row count in the Delta log (another writer left it out)."""


def _row_count(table: DeltaTable, only_files: set[str] | None = None) -> int:
    """Rows in the table (or in some of its files) from the add actions' statistics."""
    actions = pa.table(table.get_add_actions(flatten=True))
    if not actions.num_rows:
        return 0
    paths = actions.column("path").to_pylist()
    counts = actions.column("num_records").to_pylist()
    wanted = [c for p, c in zip(paths, counts) if only_files is None or p in only_files]
    if any(c is None for c in wanted):
        raise MissingStatistics(f"{table.table_uri}: a data file has no row count statistics")
    return int(sum(wanted))


def _key_range(data: pa.Table, key: str) -> str | None:
    """``t.key BETWEEN min AND max`` of the batch, for integer and text keys."""
    column = data[key]
    if not (pa.types.is_integer(column.type) or pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return None
    bounds = pc.min_max(column)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is None:
        return None
    literal = (lambda v: "'" + v.replace("'", "''") + "'") if isinstance(low, str) else str
    return f"t.`{key}` >= {literal(low)} AND t.`{key}` <= {literal(high)}"


def _files(table: DeltaTable) -> list[str]:
    """The table's data files as local paths (delta-rs gives %-encoded URIs)."""
    return [local_path(uri) for uri in table.file_uris()]
