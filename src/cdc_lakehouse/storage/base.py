"""The one small interface the pipeline runtime and jobs use to read and write Delta tables."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pyspark.sql import DataFrame


@dataclass(frozen=True)
class Commit:
    """Progress committed atomically with the data: Delta's idempotent-writer transaction.

    A writer that records ``(app_id, version)`` in the same Delta commit as its data can ask the
    table afterwards whether that version is already in, so a crash between "data written" and
    "progress recorded" can neither lose nor duplicate a batch.
    """

    app_id: str
    version: int


class StreamingSourceChanged(RuntimeError):
    """A streaming read found rows removed or rewritten in an append-only source."""


class ConcurrentCommit(RuntimeError):
    """Another writer committed to the table while this one wrote the same batch: two updates
    of one lake ran at once (past its lock: runtime/lake_lock.py). Delta took the other's commit
    and refused this one, so nothing is in twice; the update stops here."""

    def __init__(self, table: str, commit: Commit):
        super().__init__(f"another writer committed to {table} while this update wrote batch {commit.version} "
                         f"of {commit.app_id}: two updates ran on the lake at once; this one stops, and "
                         "nothing was written twice (run the update again once the other has ended)")


@dataclass(frozen=True)
class UpsertSpec:
    """A keyed MERGE: matched rows are updated (or deleted when ``delete_flag`` is true),
    unmatched rows inserted (unless flagged for delete)."""

    keys: tuple[str, ...]
    delete_flag: str | None = None
    # Extra join conditions on the target, e.g. a SCD2 version column.
    extra_match_columns: tuple[str, ...] = field(default_factory=tuple)
    # A MERGE that only inserts commits as an append, as Delta's does, so that a reader of the
    # table's appended rows (a streaming read, a view refreshed by partition) reads on. False
    # for a table only its writer reads (AUTO CDC's state): finding out costs a Spark job.
    keep_appends: bool = True


@dataclass(frozen=True)
class TableInfo:
    name: str
    path: str
    version: int
    row_count: int
    properties: dict


class TableStore(Protocol):
    def exists(self, name: str) -> bool: ...

    def versioned(self) -> bool:
        """Whether ``version``, ``committed_version`` and ``read_appended`` answer: a lake's
        tables have versions; Unity Catalog's are read whole by the job steps (no version seam)."""
        ...

    def read(self, name: str) -> DataFrame: ...

    def read_appended(self, name: str, after: int | None, up_to: int) -> tuple[DataFrame, int]:
        """Rows appended after version ``after`` up to ``up_to``, and their count."""

    def version(self, name: str) -> int | None: ...

    def table_id(self, name: str) -> str | None:
        """Delta's id of the table: the same until the table is deleted and created again."""

    def column_max(self, name: str, column: str):
        """The largest value of a (nested: ``a.b``) column, NULL for none."""

    def row_count(self, name: str) -> int: ...

    def size_bytes(self, name: str) -> int | None:
        """The bytes of the table's data files now, from its log without a Spark job; None
        when that is not known cheaply (or there is no such table)."""

    def committed_version(self, name: str, app_id: str) -> int | None: ...

    def append(self, name: str, df: DataFrame, commit: Commit | None = None, **table_opts) -> int: ...

    def overwrite(self, name: str, df: DataFrame, commit: Commit | None = None, **table_opts) -> int: ...

    def upsert(self, name: str, df: DataFrame, spec: UpsertSpec, commit: Commit | None = None, **table_opts) -> int: ...

    def replace_where(self, name: str, df: DataFrame, where: dict[str, list], commit: Commit | None = None) -> int:
        """Replace the rows whose ``where`` columns hold one of the listed value tuples (the
        ``i``-th values of every column form one tuple; None matches NULL) by ``df``, in one
        commit; every row of ``df`` must be such a row. Values are text, whole or finite numbers,
        booleans or None; ValueError for any other (partition_refresh passes no other)."""
        ...

    def list_tables(self) -> list[TableInfo]: ...

    # -- maintenance: housekeeping and full refresh, on a lake's own tables -------------------
    def drop(self, name: str) -> None:
        """Delete the table and its files; nothing happens when there is none."""

    def delete_where(self, name: str, predicate: str) -> int:
        """Delete the rows a SQL predicate selects, rewriting only the files holding them; how many."""
        ...

    def optimize(self, name: str) -> dict[str, int]:
        """Rewrite small files into larger ones: ``files_added``, ``files_removed``."""
        ...

    def vacuum(self, name: str, retention_hours: float, enforce_retention: bool = True) -> int:
        """Remove the files no version within the retention needs; how many were removed."""
        ...

    def history(self, name: str, limit: int | None = None) -> list[dict]:
        """The table's commits, newest first: operation, parameters and metrics of each."""
        ...


DEFAULT_SCHEMA = "default"


def lake_table_path(lake: Path, name: str) -> Path:
    """Where a lake keeps table ``schema.table``: ``<lake>/<schema>/<table>`` (a catalog prefix
    has no meaning locally; a bare name is in schema ``default``)."""
    parts = name.split(".")
    if len(parts) == 1:
        parts = [DEFAULT_SCHEMA, *parts]
    return lake / parts[-2] / parts[-1]


class LakePaths:
    """Where a lake's store keeps each table: ``lake_table_path``, but for a table placed at a
    folder of its own (a pipeline's Delta sink by path, which Delta tables elsewhere may read)."""

    lake: Path
    placed: dict[str, Path]

    def path(self, name: str) -> Path:
        return self.placed.get(name) or lake_table_path(self.lake, name)

    def place(self, name: str, folder: str | Path) -> None:
        """Keep table ``name`` at ``folder`` from now on."""
        self.placed[name] = Path(folder).resolve()


def where_predicate(where: dict[str, list]) -> str:
    """``(a = 1 AND b IS NULL) OR (...)``: one conjunction per value tuple of ``replace_where``."""
    columns = list(where)
    tuples = zip(*(where[c] for c in columns))
    return " OR ".join("(" + " AND ".join(_equals(c, v) for c, v in zip(columns, values)) + ")" for values in tuples)


def _equals(column: str, value) -> str:
    name = f"`{column}`"
    if value is None:
        return f"{name} IS NULL"
    if isinstance(value, bool):
        return f"{name} = {str(value).lower()}"
    if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        return f"{name} = {value!r}"
    if isinstance(value, str):
        return f"{name} = '" + value.replace("'", "''") + "'"
    raise ValueError(f"no SQL literal for {value!r} of column {column}")
