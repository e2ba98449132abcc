"""Local Delta tables written by delta-spark, the engine Databricks runs.

Every write is a Spark job of the tasks (``DataFrameWriter.save`` in Delta format, or
``DeltaTable.merge``): no row passes through the driver. The driver reads only the Delta log:
the snapshot of a table (``DeltaLog``, the object delta-spark's own commands use) for its
version, id and app transactions, and the JSON commit files for what a commit did.

Exactly-once: a writer's ``Commit`` is Delta's app transaction (``txnAppId``/``txnVersion``,
as a foreachBatch writer sets them; for MERGE, the session settings Delta reads for DML). Delta
skips a write whose version the table already holds. A batch that a racing writer committed
while this one wrote is reported as ``ConcurrentCommit``, whether Delta's optimistic concurrency
refused the commit or the race ended before this writer's transaction began.
"""

from __future__ import annotations

import functools

import json
import shutil
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.errors import PySparkException
from py4j.protocol import Py4JJavaError
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_lakehouse.paths import glob_literal
from cdc_lakehouse.storage.delta_log import checksum, checksum_transactions, commit_actions, latest_version, listed_files
from cdc_lakehouse.storage.delta_txn import DeltaTransactions, OpenTransaction
from cdc_lakehouse.storage.session_conf import settings
from cdc_lakehouse.storage.small_rewrite import inserted, matches_any, merged, merged_with_changes, replaced
from cdc_lakehouse.storage.base import (
    Commit, ConcurrentCommit, LakePaths, StreamingSourceChanged, TableInfo, UpsertSpec, where_predicate,
)

# Delta's exceptions for a commit that another writer's commit made impossible.
_CONCURRENT = ("ConcurrentAppendException", "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
               "ConcurrentTransactionException", "ConcurrentWriteException", "MetadataChangedException",
               "ProtocolChangedException")
# The settings delta-spark reads for a DML command's app transaction and commit metadata.
_DML_SETTINGS = ("spark.databricks.delta.write.txnAppId", "spark.databricks.delta.write.txnVersion",
                 "spark.databricks.delta.commitInfo.userMetadata")
# How the store's MERGE into a small table runs (docs/storage.md, "The cost of a commit"):
# without adaptive re-planning, which submits each shuffle stage of MERGE's two joins as a job
# of its own (9 Spark jobs a MERGE of 100 rows into 200k become 6). Into a larger table it
# stays on: there its switch to a broadcast join, once it sees how small the source is, saves
# shuffling the whole table. Delta's copy of the source stays (materializeSource=auto): the
# pipeline's sources are persisted lazily, which Delta refuses to MERGE from uncopied.
_SMALL_TABLE_PLAN = {"spark.sql.adaptive.enabled": "false"}
_SMALL_TABLE_BYTES = 64 * 1024 * 1024
# Under this a MERGE writes the whole table again, in one job (``_merge_by_rewrite``).
REWRITE_BYTES = 8 * 1024 * 1024
# How many commits back a writer looks for its own: others' commits after it are a race.
_RACING_COMMITS = 16
# Characters Parquet cannot hold in a column name: a table with such a name (a source column
# "Mixed Case", say) is made with column mapping, as Delta requires and Databricks does.
_UNMAPPABLE = set(" ,;{}()\n\t=")
_COLUMN_MAPPING = {"delta.columnMapping.mode": "name", "delta.minReaderVersion": "2", "delta.minWriterVersion": "5"}
_PHYSICAL_NAME = "delta.columnMapping.physicalName"


class DeltaSparkStore(LakePaths):
    """A lake directory of Delta tables named ``schema.table`` (``<lake>/<schema>/<table>``)."""

    def __init__(self, spark: SparkSession, lake: str | Path, commit_hook=None, rewrite_bytes: int = REWRITE_BYTES):
        """``rewrite_bytes``: a MERGE into a table of fewer bytes writes it again (0: never)."""
        self.spark = spark
        self.rewrite_bytes = rewrite_bytes
        self.lake = Path(lake).resolve()
        self.placed = {}
        # Called as hook("before"|"after", table) around every data commit: the seam where
        # reliability tests stop a run, as a crash would, at every commit point.
        self.commit_hook = commit_hook
        self._update_defaults: tuple | None = None

    def _uri(self, name: str) -> str:
        return str(self.path(name))

    # -- the Delta log ----------------------------------------------------------------------
    # Each step of a JVM name (``jvm.org.apache...``) and each default argument is a py4j round
    # trip: looked up once per store, not at each of the thousands of log reads of an update.
    @functools.cached_property
    def _delta_log_class(self):
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        return jvm.org.apache.spark.sql.delta.DeltaLog

    def _log(self, name: str):
        return self._delta_log_class.forTable(self.spark._jsparkSession, self._uri(name))

    def _snapshot(self, name: str):
        """The latest snapshot, or None when there is no table."""
        if not (self.path(name) / "_delta_log").is_dir():
            return None
        log = self._log(name)
        if self._update_defaults is None:  # Scala's None values: the same for every table
            self._update_defaults = (getattr(log, "update$default$2")(), getattr(log, "update$default$3")())
        snapshot = log.update(False, *self._update_defaults)
        return None if snapshot.version() < 0 else snapshot

    def _existing(self, name: str):
        snapshot = self._snapshot(name)
        if snapshot is None:
            raise self._missing(name)
        return snapshot

    def _missing(self, name: str) -> LookupError:
        return LookupError(f"table {name} does not exist in {self.lake}")

    def _commit_file(self, name: str, version: int) -> list[dict]:
        return commit_actions(self.path(name) / "_delta_log", version)

    # -- reads ------------------------------------------------------------------------------
    def exists(self, name: str) -> bool:
        return self.version(name) is not None

    def versioned(self) -> bool:
        return True

    def version(self, name: str) -> int | None:
        return latest_version(self.path(name) / "_delta_log")

    def table_id(self, name: str) -> str | None:
        """Delta's id of the table: kept by every later write, new when it is created again."""
        snapshot = self._snapshot(name)
        return None if snapshot is None else str(snapshot.metadata().id())

    def committed_version(self, name: str, app_id: str) -> int | None:
        latest = self.version(name)
        if latest is None:
            return None
        # Delta's checksum file of the version lists its app transactions: read there, no
        # Spark job (asking the snapshot rebuilds its state from the log: 3 jobs a version).
        known = checksum_transactions(self.path(name) / "_delta_log", latest)
        if known is not None:
            return known.get(app_id)
        version = self._existing(name).transactions().get(app_id)
        return int(version.get()) if version.isDefined() else None

    def read(self, name: str, version: int | None = None) -> DataFrame:
        """The table as of ``version``, by default the version it has now. Pinned: an unpinned
        Delta read finds the latest version again each time it runs, so a frame read before a
        write would see that write.

        A version whose checksum file lists its data files is read as those Parquet files, as
        the delta-rs store reads a snapshot's: a Delta read plans its scan again in every query
        that reads it (Delta's ``PrepareDeltaScan`` rebuilds and filters the version's file
        list, with Spark jobs), which was a third of the driver's work in a small update; the
        file list is all a small table's scan needs (docs/storage.md, "Reads of small tables")."""
        at = self.version(name) if version is None else version
        if at is None:
            raise self._missing(name)
        listed = listed_files(self.path(name) / "_delta_log", at)
        if listed is not None:
            paths, schema = listed
            return self._files(name, T.StructType.fromJson(json.loads(schema)), paths)
        return self.spark.read.format("delta").option("versionAsOf", at).load(self._uri(name))

    def column_max(self, name: str, column: str):
        return self.read(name).agg(F.max(column)).collect()[0][0]  # an aggregate has one row

    def row_count(self, name: str) -> int:
        return self.read(name).count()  # delta-spark answers from the log's statistics

    def size_bytes(self, name: str) -> int | None:
        latest = self.version(name)
        return None if latest is None else self._size_at(name, latest)

    def _size_at(self, name: str, version: int) -> int | None:
        """From the checksum file of ``version`` (None: a version without one)."""
        return (checksum(self.path(name) / "_delta_log", version) or {}).get("tableSizeBytes")

    def read_appended(self, name: str, after: int | None, up_to: int) -> tuple[DataFrame, int]:
        """Rows appended after version ``after`` (None: from the start) up to ``up_to``, and how
        many (from the commits' statistics), as Delta's streaming source reads an append-only
        table: the files the commits between added, refused when a commit removed one."""
        if after is None:
            table = self.read(name, up_to)
            return table, table.count()
        added: list[tuple[str, int | None]] = []
        for version in range(after + 1, up_to + 1):
            for action in self._commit_file(name, version):
                removed = action.get("remove")
                if removed is not None and removed.get("dataChange", True):
                    raise StreamingSourceChanged(
                        f"{name}: a file was removed or rewritten between versions {after} and {up_to}; a "
                        "streaming read needs an append-only source (full-refresh the reader, or read it as a batch)")
                add = action.get("add")
                if add is not None and add.get("dataChange", True):
                    added.append((add["path"], _num_records(add)))
        df = self._files(name, self._schema(name, up_to), [p for p, _ in added])
        counts = [n for _, n in added if n is not None]
        return df, sum(counts) if len(counts) == len(added) else df.count()

    def _schema(self, name: str, version: int) -> T.StructType:
        """The table's schema at ``version`` as its log holds it: with column mapping, each
        field's metadata names its physical column."""
        found = (checksum(self.path(name) / "_delta_log", version) or {}).get("metadata")
        text = found["schemaString"] if found else self._existing(name).metadata().schemaString()
        return T.StructType.fromJson(json.loads(text))

    def _files(self, name: str, logical: T.StructType, paths: list[str]) -> DataFrame:
        """Data files of the table read as Parquet, under their logical column names (with column
        mapping a file holds each column under its physical name)."""
        physical = _physical(logical)
        assert isinstance(physical, T.StructType)
        if paths:
            root = self.path(name)
            files = [glob_literal(str(root / _unquote(p))) for p in paths]
            df = self.spark.read.schema(physical).option("basePath", str(root)).parquet(*files)
        else:  # no file: the frame their read gives, so its columns carry no column mapping's metadata either
            df = self.spark.createDataFrame([], physical)
        if physical.simpleString() == logical.simpleString():  # no column mapping
            return df
        # A cast between structs goes by position: nested fields get their logical names back.
        return df.select(*[F.col(f"`{p.name}`").cast(f.dataType).alias(f.name)
                           for p, f in zip(physical.fields, logical.fields)])

    def list_tables(self) -> list[TableInfo]:
        infos = []
        for log in sorted(self.lake.glob("*/*/_delta_log")):
            name = f"{log.parent.parent.name}.{log.parent.name}"
            snapshot = self._snapshot(name)
            if snapshot is None:
                continue
            infos.append(TableInfo(name=name, path=str(log.parent), version=int(snapshot.version()),
                                   row_count=self.row_count(name), properties=_configuration(snapshot)))
        return infos

    # -- writes -----------------------------------------------------------------------------
    def append(self, name: str, df: DataFrame, commit: Commit | None = None, **table_opts) -> int:
        return self._save(name, df, "append", commit, **table_opts)

    def overwrite(self, name: str, df: DataFrame, commit: Commit | None = None, **table_opts) -> int:
        return self._save(name, df, "overwrite", commit, **table_opts)

    def replace_where(self, name: str, df: DataFrame, where: dict[str, list], commit: Commit | None = None) -> int:
        if self._holds(name, commit):
            return 0
        rewritten = self._replace_by_rewrite(name, df, where, commit)
        if rewritten is not None:
            return rewritten
        return self._save(name, df, "overwrite", commit, replace_where=where_predicate(where))

    def _save(self, name: str, df: DataFrame, mode: str, commit: Commit | None, partition_by=None,
              properties=None, comment=None, replace_where: str | None = None) -> int:
        if self._holds(name, commit):
            return 0
        if replace_where is None and not self.exists(name) and _creatable_in_one_commit(df):
            return self._create(name, df, commit, partition_by, properties, comment)
        if replace_where is None and self.exists(name):
            written = self._write_plainly(name, df, mode, partition_by, commit)
            if written is not None:
                self._set_properties(name, properties, comment)
                return written
        writer = df.write.format("delta").mode(mode)
        if replace_where is not None:
            writer = writer.option("replaceWhere", replace_where)
        elif mode == "overwrite":
            writer = writer.option("overwriteSchema", "true")
        else:
            writer = writer.option("mergeSchema", "true")
        if partition_by and replace_where is None:
            writer = writer.partitionBy(*partition_by)
        if commit is not None:
            writer = writer.option("txnAppId", commit.app_id).option("txnVersion", commit.version)
        if not self.exists(name):  # Delta's own settings take effect from the first version on
            settings = {k: str(v) for k, v in (properties or {}).items() if k.startswith("delta.")}
            if _needs_column_mapping(df.schema):
                self._create_mapped(name, df.schema, partition_by if replace_where is None else None, settings)
            else:
                writer = writer.options(**settings)
        with self._committing(name, commit) as token:
            writer.option("userMetadata", token).save(self._uri(name))
        rows = self._rows_committed(name, token)
        self._set_properties(name, properties, comment)
        return rows

    @functools.cached_property
    def _transactions(self) -> DeltaTransactions:
        return DeltaTransactions(self.spark)

    def _write_plainly(self, name: str, df: DataFrame, mode: str, partition_by, commit: Commit | None) -> int | None:
        """A write that only adds ``df``'s files (and for an overwrite removes the table's),
        committed by ``delta_txn`` without Delta rebuilding the table's state; the rows written,
        or None when the write needs Delta's writer (``_removed_by_plain_write``)."""
        txn = self._transactions.start(self._uri(name))
        removed = self._removed_by_plain_write(name, txn.read_version, df, mode, partition_by, commit)
        if removed is None:
            return None
        token = self._commit_files(name, txn, df, mode == "overwrite", removed, commit)
        return 0 if token is None else self._rows_committed(name, token)

    def _commit_files(self, name: str, txn: OpenTransaction, df: DataFrame, overwrite: bool, removed: list[dict],
                      commit: Commit | None) -> str | None:
        """``df`` written and committed in ``txn``: the commit's token, or None when the table
        had the batch when ``txn`` read it (a racing writer's: ``_committing`` reports it)."""
        with self._committing(name, commit) as token:
            if self._holds(name, commit, txn.read_version):
                return None
            txn.write(df, overwrite, removed, commit, token)
        return token

    def _removed_by_plain_write(self, name: str, version: int, df: DataFrame, mode: str, partition_by,
                                commit: Commit | None) -> list[dict] | None:
        """Whether a write of ``df`` into ``name`` at ``version`` needs no more than its files
        and an app transaction (``delta_txn``): the table's schema and partitioning as the
        version's checksum gives them, unchanged, its app transactions listed there, and for an
        overwrite the files it lists. Then the files an overwrite removes ([] for an append);
        else None: Delta's writer decides."""
        found = checksum(self.path(name) / "_delta_log", version) or {}
        metadata = found.get("metadata")
        if commit is not None and "setTransactions" not in found:
            return None
        if metadata is None or metadata.get("configuration", {}).get("delta.columnMapping.mode", "none") != "none":
            return None
        partitioning = list(partition_by or [])
        if partitioning != metadata.get("partitionColumns", []) and (partitioning or mode == "overwrite"):
            return None
        files = found.get("allFiles") if mode == "overwrite" else []
        if files is None or any(f.get("deletionVector") for f in files):
            return None
        table = T.StructType.fromJson(json.loads(metadata["schemaString"]))
        return files if table.simpleString() == df.schema.simpleString() else None

    def _create(self, name: str, df: DataFrame, commit: Commit | None, partition_by, properties: dict | None,
                comment: str | None) -> int:
        """A new table from ``df`` in one commit with its properties and comment (CREATE TABLE AS
        SELECT; written first and altered after, a table's first version took two commits)."""
        writer = df.writeTo(f"delta.`{self._uri(name).replace('`', '``')}`").using("delta")
        for key, value in _wanted_properties(properties, comment).items():
            writer = writer.tableProperty(key, value)
        if partition_by:
            writer = writer.partitionedBy(*[F.col(c) for c in partition_by])
        with self._committing(name, commit) as token, self._dml_settings(commit, token, {}):
            try:
                writer.create()
            except (Py4JJavaError, PySparkException) as exc:
                if commit is not None and self.exists(name):  # another writer made it meanwhile
                    raise ConcurrentCommit(name, commit) from exc
                raise
        return self._rows_committed(name, token)

    def _create_mapped(self, name: str, schema: T.StructType, partition_by, settings: dict[str, str]) -> None:
        """An empty table with column mapping, made before its first write: Delta refuses a write
        that creates a mapped table with a Change Data Feed (it counts the new physical names as a
        rename), but takes writes into one that exists."""
        from delta.tables import DeltaTable

        builder = DeltaTable.createIfNotExists(self.spark).location(self._uri(name)).addColumns(schema)
        if partition_by:
            builder = builder.partitionedBy(*partition_by)
        for key, value in {**settings, **_COLUMN_MAPPING}.items():
            builder = builder.property(key, value)
        builder.execute()

    def upsert(self, name: str, df: DataFrame, spec: UpsertSpec, commit: Commit | None = None, **table_opts) -> int:
        """MERGE ``df`` into ``name`` by key; creates the table from ``df`` when absent."""
        if self._holds(name, commit):
            return 0
        rewritten = self._merge_by_rewrite(name, df, spec, commit)
        if rewritten is not None:
            return rewritten
        flag = spec.delete_flag
        snapshot = self._snapshot(name)
        if snapshot is None:
            kept = df if flag is None else df.filter(~F.col(flag)).drop(flag)
            return self._save(name, kept, "append", commit, **table_opts)
        from delta.tables import DeltaTable

        columns = [c for c in df.columns if c != flag]
        keys = (*spec.keys, *spec.extra_match_columns)
        match = " AND ".join(f"t.`{k}` = s.`{k}`" for k in keys)
        values: dict[str, str | Column] = {f"`{c}`": f"s.`{c}`" for c in columns}
        keep = "true" if flag is None else f"NOT s.`{flag}`"
        merge = (DeltaTable.forPath(self.spark, self._uri(name)).alias("t")
                 .merge(df.alias("s"), match).withSchemaEvolution())
        if flag is not None:
            merge = merge.whenMatchedDelete(f"s.`{flag}`")
        merge = merge.whenMatchedUpdate(keep, values).whenNotMatchedInsert(keep, values)
        plan = _SMALL_TABLE_PLAN if self._small(name, snapshot) else {}
        with self._committing(name, commit) as token, self._dml_settings(commit, token, plan):
            merge.execute()
        return self._rows_committed(name, token)

    def _merge_by_rewrite(self, name: str, df: DataFrame, spec: UpsertSpec, commit: Commit | None) -> int | None:
        """A MERGE into a small table (``_rewritable``) as one overwrite of it with what the
        MERGE leaves (``small_rewrite``): 1 Spark job against the MERGE's 6; with
        ``spec.keep_appends``, one more finds whether any key matches, and a MERGE that only
        inserts is committed as an append of those rows, as Delta's is. The source's rows, or
        None when Delta's MERGE runs."""
        found = self._rewritable(name, df, spec.delete_flag, commit, with_changes=True)
        if found is None:
            return None
        txn, table, removed, feeds = found
        counted = Observation(f"rows of the MERGE into {name}")
        # Asking whether a key matches computes the source: kept for the write that follows.
        cached = spec.keep_appends and not df.is_cached
        if cached:
            df.persist()
        try:
            with settings(self.spark, _SMALL_TABLE_PLAN):
                if spec.keep_appends and not matches_any(table, df, spec):
                    token = self._commit_files(name, txn, inserted(table, df, spec, counted), False, [], commit)
                else:
                    merge = merged_with_changes if feeds else merged
                    token = self._commit_files(name, txn, merge(table, df, spec, counted), True, removed, commit)
        finally:
            if cached:
                df.unpersist()
        return self._observed_rows(token, counted, df)

    def _replace_by_rewrite(self, name: str, df: DataFrame, where: dict[str, list], commit: Commit | None) -> int | None:
        """``replaceWhere`` into a small table (``_rewritable``) as one overwrite of it: 1 Spark
        job against Delta's 5. The rows written, or None when Delta's writer runs."""
        found = self._rewritable(name, df, None, commit, with_changes=False)
        if found is None:
            return None
        txn, table, removed, _ = found
        counted = Observation(f"rows replacing some of {name}")
        with settings(self.spark, _SMALL_TABLE_PLAN):
            token = self._commit_files(name, txn, replaced(table, df, where_predicate(where), counted), True, removed,
                                       commit)
        return self._observed_rows(token, counted, df)

    def _rewritable(self, name: str, df: DataFrame, flag: str | None, commit: Commit | None,
                    with_changes: bool) -> tuple[OpenTransaction, DataFrame, list[dict], bool] | None:
        """For a write of ``df`` (less the column ``flag``) that may write the table again
        whole: a transaction that reads the whole table, the table as of its read version, the
        files an overwrite removes and whether the table has a change data feed. None for a
        table of ``rewrite_bytes`` or more, a partitioned one, one with a change data feed
        unless the write writes its rows too (``with_changes``: else an overwrite would read
        there as every row deleted and inserted again), and for ``df`` whose columns or types
        differ from the table's (schema evolution, casts)."""
        if not self.exists(name):
            return None
        txn = self._transactions.start(self._uri(name))
        version, log = txn.read_version, self.path(name) / "_delta_log"
        size = self._size_at(name, version)
        feeds = _feeds_changes(log, version)
        if size is None or size >= self.rewrite_bytes or feeds and not with_changes or listed_files(log, version) is None:
            return None  # a table the checksum file does not list is read, and so written, by Delta
        table = self.read(name, version)
        if _column_types(df, flag) != _column_types(table):
            return None  # the write widens or casts (a struct that gained fields, say)
        # The result has the table's columns and types: its files are checked before it is planned.
        removed = self._removed_by_plain_write(name, version, table, "overwrite", None, commit)
        if removed is None:
            return None
        txn.read_whole_table()  # as a MERGE's read: any write landing meanwhile conflicts
        return txn, table, removed, feeds

    @staticmethod
    def _observed_rows(token: str | None, counted: Observation, df: DataFrame) -> int:
        """The rows ``counted`` saw in a write committed by ``token`` (0: none, the batch was in)."""
        if token is None:
            return 0
        rows = counted.get.get("rows")  # none when Spark left the counting branch out of the plan
        return int(rows) if rows is not None else df.count()

    def _small(self, name: str, snapshot) -> bool:
        """Whether the table's data files at ``snapshot`` add up to less than
        ``_SMALL_TABLE_BYTES`` (from the checksum file; a version without one counts as large)."""
        size = self._size_at(name, int(snapshot.version()))
        return size is not None and size < _SMALL_TABLE_BYTES

    def _holds(self, name: str, commit: Commit | None, version: int | None = None) -> bool:
        """Whether the table has the writer's batch (its version, or a later one) in: then
        nothing is written, and no commit point passed. As of its newest version, or of
        ``version`` (a transaction's read version, whose checksum the caller read)."""
        if commit is None:
            return False
        if version is None:
            held = self.committed_version(name, commit.app_id)
        else:
            held = (checksum_transactions(self.path(name) / "_delta_log", version) or {}).get(commit.app_id)
        return held is not None and held >= commit.version

    @contextmanager
    def _committing(self, name: str, commit: Commit | None) -> Iterator[str]:
        """Around one write: the commit hook, and the racing writer's batch reported as such.
        Yields the token the commit carries as its user metadata, by which it is found again."""
        token = uuid.uuid4().hex
        self._around_commit("before", name)
        try:
            yield token
        except (Py4JJavaError, PySparkException) as exc:
            if commit is not None and _concurrent(exc):
                raise ConcurrentCommit(name, commit) from exc
            raise
        if commit is not None and self._find(name, token) is None:
            # Delta skipped the write: the batch was not in when this writer looked, and is now.
            raise ConcurrentCommit(name, commit)
        self._around_commit("after", name)

    @contextmanager
    def _dml_settings(self, commit: Commit | None, token: str, plan: dict[str, str]) -> Iterator[None]:
        """The session settings of one MERGE: its app transaction and token (Delta reads them
        for DML, not as writer options), and how it runs (``plan``)."""
        values: dict[str, str] = dict(plan, **{_DML_SETTINGS[2]: token})
        if commit is not None:
            values.update({_DML_SETTINGS[0]: commit.app_id, _DML_SETTINGS[1]: str(commit.version)})
        with settings(self.spark, values):
            yield

    def _find(self, name: str, token: str) -> dict | None:
        """The commitInfo of this writer's commit, looked for from the newest version down (a
        racing writer may have committed after it)."""
        newest = self.version(name)
        if newest is None:
            return None
        for v in range(newest, max(newest - _RACING_COMMITS, -1), -1):
            for action in self._commit_file(name, v):
                info = action.get("commitInfo")
                if info is not None and info.get("userMetadata") == token:
                    return info
        return None

    def _rows_committed(self, name: str, token: str) -> int:
        """Rows the commit wrote (a MERGE: rows of its source), from its metrics; 0 when Delta
        skipped the write because the table already held the batch."""
        info = self._find(name, token)
        if info is None:
            return 0
        metrics = info.get("operationMetrics") or {}
        for key in ("numSourceRows", "numOutputRows"):
            if key in metrics:
                return int(metrics[key])
        return 0

    def _around_commit(self, stage: str, name: str) -> None:
        if self.commit_hook is not None:
            self.commit_hook(stage, name)

    def _set_properties(self, name: str, properties: dict | None, comment: str | None) -> None:
        """Pipeline properties (``quality``, ``pipelines.*``) and Delta's own, set once, when
        they differ: an ALTER TABLE commits a new version. Delta keeps a ``comment`` property as
        the table's description, not among its properties."""
        wanted = _wanted_properties(properties, comment)
        if not wanted:
            return
        snapshot = self._existing(name)
        current = {**_configuration(snapshot), "comment": snapshot.metadata().description()}
        changed = {k: v for k, v in wanted.items() if current.get(k) != v}
        if changed:
            assignments = ", ".join(f"{_sql_string(k)} = {_sql_string(v)}" for k, v in changed.items())
            self.spark.sql(f"ALTER TABLE delta.`{self._uri(name)}` SET TBLPROPERTIES ({assignments})")

    # -- maintenance --------------------------------------------------------------------------
    def drop(self, name: str) -> None:
        shutil.rmtree(self.path(name), ignore_errors=True)
        # A table made again at the path is another table: no cached log of this one may serve it.
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        jvm.org.apache.spark.sql.delta.DeltaLog.invalidateCache(self.spark._jsparkSession,
                                                                 jvm.org.apache.hadoop.fs.Path(self._uri(name)))

    def delete_where(self, name: str, predicate: str) -> int:
        """``predicate`` in Spark SQL (plain comparisons, so that the delta-rs store parses it too)."""
        self._existing(name)
        result = self.spark.sql(f"DELETE FROM delta.`{self._uri(name)}` WHERE {predicate}").collect()
        return int(result[0][0]) if result else 0

    def optimize(self, name: str) -> dict[str, int]:
        from delta.tables import DeltaTable

        metrics = DeltaTable.forPath(self.spark, self._uri(name)).optimize().executeCompaction().collect()[0].metrics
        return {"files_added": int(metrics.numFilesAdded), "files_removed": int(metrics.numFilesRemoved)}

    def vacuum(self, name: str, retention_hours: float, enforce_retention: bool = True) -> int:
        """How many data files went (Delta's VACUUM reports none of them unless as a dry run)."""
        self._existing(name)
        check = "spark.databricks.delta.retentionDurationCheck.enabled"
        before = _data_files(self.path(name))
        self.spark.conf.set(check, str(enforce_retention).lower())
        try:
            self.spark.sql(f"VACUUM delta.`{self._uri(name)}` RETAIN {float(retention_hours)} HOURS").collect()
        finally:
            self.spark.conf.unset(check)
        return len(before - _data_files(self.path(name)))

    def history(self, name: str, limit: int | None = None) -> list[dict]:
        from delta.tables import DeltaTable

        self._existing(name)
        rows = DeltaTable.forPath(self.spark, self._uri(name)).history(limit).collect()
        return [row.asDict(recursive=True) for row in rows]


def _creatable_in_one_commit(df: DataFrame) -> bool:
    """Whether CREATE TABLE AS SELECT can make a table from ``df``: not with column mapping (see
    ``_create_mapped``), nor from a plan that counts rows for an ``Observation`` (expectations):
    Spark takes those counts from a write it runs itself, not from the inner write of a CTAS."""
    return not _needs_column_mapping(df.schema) and not _observed(df)


def _observed(df: DataFrame) -> bool:
    """Whether the plan counts rows for an ``Observation``."""
    return "CollectMetrics" in df._jdf.queryExecution().logical().toString()


def _wanted_properties(properties: dict | None, comment: str | None) -> dict[str, str]:
    """A table's properties as Delta keeps them; its ``comment`` is the table's description."""
    wanted = {k: str(v) for k, v in (properties or {}).items()}
    if comment:
        wanted["comment"] = comment
    return wanted


def _concurrent(exc: Exception) -> bool:
    """Raised by the JVM as it is (the class named in its text), or as delta-spark's Python class
    of the same name once ``delta`` is imported (its text names only the error class)."""
    text = " ".join([str(exc), *(kind.__name__ for kind in type(exc).__mro__)])
    return any(kind in text for kind in _CONCURRENT)


def _data_files(table: Path) -> set[Path]:
    """The table's data files: no log, no hidden sidecar (the local file system's ``.crc``)."""
    return {f for f in table.rglob("*") if f.is_file() and not f.name.startswith((".", "_"))
            and "_delta_log" not in f.parts}


def _needs_column_mapping(schema: T.DataType) -> bool:
    if isinstance(schema, T.StructType):
        return any(bool(_UNMAPPABLE & set(f.name)) or _needs_column_mapping(f.dataType) for f in schema.fields)
    if isinstance(schema, T.ArrayType):
        return _needs_column_mapping(schema.elementType)
    if isinstance(schema, T.MapType):
        return _needs_column_mapping(schema.keyType) or _needs_column_mapping(schema.valueType)
    return False


def _physical(schema: T.DataType) -> T.DataType:
    """The type as the data files hold it: every field under its physical name."""
    if isinstance(schema, T.StructType):
        return T.StructType([T.StructField(f.metadata.get(_PHYSICAL_NAME, f.name), _physical(f.dataType), f.nullable)
                             for f in schema.fields])
    if isinstance(schema, T.ArrayType):
        return T.ArrayType(_physical(schema.elementType), schema.containsNull)
    if isinstance(schema, T.MapType):
        return T.MapType(_physical(schema.keyType), _physical(schema.valueType), schema.valueContainsNull)
    return schema


def _num_records(add: dict) -> int | None:
    stats = add.get("stats")
    if not stats:
        return None
    return json.loads(stats).get("numRecords")


def _unquote(path: str) -> str:
    """A data file's path in the log is a URI-encoded path relative to the table."""
    return urllib.parse.unquote(path)


def _iterate(collection) -> Iterator:
    """The elements of a Scala collection in the JVM."""
    items = collection.iterator()
    while items.hasNext():
        yield items.next()


def _column_types(df: DataFrame, leaving_out: str | None = None) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in df.schema.fields if f.name != leaving_out}


def _feeds_changes(log: Path, version: int) -> bool:
    """Whether the table at ``version`` has a change data feed (from its checksum file)."""
    metadata = (checksum(log, version) or {}).get("metadata") or {}
    return str(metadata.get("configuration", {}).get("delta.enableChangeDataFeed", "false")).lower() == "true"


def _configuration(snapshot) -> dict[str, str]:
    """The table's properties (a Scala map in the JVM)."""
    return {str(pair._1()): str(pair._2()) for pair in _iterate(snapshot.metadata().configuration())}


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"

