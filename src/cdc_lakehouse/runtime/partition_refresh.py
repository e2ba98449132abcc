"""Materialized views refreshed by partition instead of in full.

Databricks refreshes a materialized view incrementally when it can: one whose windows all
partition by the same columns is recomputed only for the partitions its new input touches. The
local runtime does the same for a view that names those columns in the table property
``cdc_lakehouse.refresh.partition_by`` (comma-separated; on Databricks it is a plain table
property). The view must read exactly one table, which has those columns, and each output row
must keep its partition's values in the columns of the same names; one that reads a pipeline
view (``@dp.temporary_view``) is always recomputed in full. A partition column the view derives from an
input row is named with its SQL expression over the input, ``day=to_date(commit_ts)``: the
output's ``day`` holds that expression's value for every input row of the partition.

The view's checkpoint records, per refresh, the input table's version and the fingerprint of
the view's definition (fingerprint.py). When the input only grew since then (appends, as a
streaming table does) and the definition is the same, the refresh recomputes the partitions of
the appended rows and keeps every other row of the view; when the input did not change at all,
the update skips the view. Anything else recomputes the view in full: the first refresh, a
rewritten input (compaction, full refresh), a changed definition, a second input.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.runtime.fingerprint import DEFINITION
from cdc_lakehouse.settings import REFRESH_BY_PARTITION
from cdc_lakehouse.storage import StreamingSourceChanged

BROADCAST_ROWS = 1_000_000  # appended rows up to which their partitions are broadcast
# Touched partitions up to which a refresh replaces only their rows in the view (one commit that
# names them); above it, and for values with no plain literal, the view is written whole.
REPLACE_PARTITIONS = 500


class FullRefreshNeeded(Exception):
    """The view read something a partition refresh cannot restrict: recompute it in full."""


def partition_columns(target) -> list[str]:
    """The output columns the view is partitioned by (``name`` or ``name=expression``)."""
    return list(partition_expressions(target))


def partition_expressions(target) -> dict[str, str]:
    """Each partition column's SQL expression over the input row (its own name when plain)."""
    value = str(target.table_properties.get(REFRESH_BY_PARTITION, "")).strip()
    # Split at the commas between columns, not those inside an expression's parentheses.
    parts, depth, current = [], 0, ""
    for char in value:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    found = {}
    for part in filter(None, (p.strip() for p in parts)):
        name, _, expression = part.partition("=")
        found[name.strip()] = expression.strip() or f"`{name.strip()}`"
    return found


@dataclass
class Partitions:
    """The partitions one refresh recomputes: those of the rows appended to ``table``."""

    table: str
    version: int
    expressions: dict[str, str]  # partition column -> its expression over an input row
    touched: DataFrame
    small: bool

    @property
    def columns(self) -> list[str]:
        return list(self.expressions)

    def restrict(self, df: DataFrame) -> DataFrame:
        """The input rows of ``df`` in a touched partition (NULL matches NULL)."""
        return _join(df, self.touched, [F.expr(e) for e in self.expressions.values()], self.columns, self.small,
                     "left_semi")

    def keep_untouched(self, view: DataFrame) -> DataFrame:
        return _join(view, self.touched, [view[c] for c in self.columns], self.columns, self.small, "left_anti")

    def values(self, limit: int) -> dict[str, list] | None:
        """The touched partitions' values by column (``TableStore.replace_where``), when there
        are at most ``limit`` of them and each is NULL, text, a whole number or a boolean."""
        rows = self.touched.limit(limit + 1).collect()
        plain = all(v is None or isinstance(v, (str, int, bool)) for r in rows for v in r)
        if not rows or len(rows) > limit or not plain:
            return None
        return {c: [r[c] for r in rows] for c in self.columns}


def _join(df: DataFrame, touched: DataFrame, values: list, columns: list[str], small: bool, how: str) -> DataFrame:
    """``df`` joined to the touched partitions, ``values`` (columns or expressions of ``df``)
    matched to ``touched``'s ``columns``."""
    right = touched.select(*[F.col(c).alias(f"__p_{c}") for c in columns])
    right = F.broadcast(right) if small else right
    condition = [v.eqNullSafe(right[f"__p_{c}"]) for v, c in zip(values, columns)]
    return df.join(right, condition, how)


class ViewRefresh:
    """One refresh of an opted-in view: the input versions it reads (recorded in the batch's
    offsets) and the partitions it recomputes (None: all of them)."""

    def __init__(self, store, target, batch):
        self.store, self.target, self.batch = store, target, batch
        self.expressions = partition_expressions(target)
        self.columns = list(self.expressions)
        self.partitions = self._plan()
        self.replacing: dict[str, list] | None = None  # the partitions the write replaces

    def _plan(self) -> Partitions | None:
        previous, inputs = self.batch.previous, [k for k in self.batch.previous if k.startswith("table:")]
        if previous.get(DEFINITION) != self.batch.definition or len(inputs) != 1:
            return None
        if any(k.startswith("view:") for k in previous):
            return None
        table = inputs[0].removeprefix("table:")
        if table not in self.batch.runner.graph.datasets:
            return None
        self.batch.runner.ensure(table)  # this update's appends first: the view reads them
        if not (self.store.exists(self.target.name) and self.store.exists(table)):
            return None
        end = self.store.version(table)
        try:
            appended, rows = self.store.read_appended(table, previous[inputs[0]]["version"], end)
        except StreamingSourceChanged:
            return None
        try:
            touched = appended.select(*[F.expr(e).alias(c) for c, e in self.expressions.items()]).distinct()
        except AnalysisException:  # the input lacks a column the partitions are made of
            return None
        return Partitions(table, end, self.expressions, touched, rows <= BROADCAST_ROWS)

    def read(self, name: str) -> DataFrame:
        """The view's read of table ``name``: all of it, or its touched partitions."""
        if self.partitions is None:
            version = self.store.version(name)
            self.batch.offsets[f"table:{name}"] = {"version": version}
            return self.store.read(name, version)
        if name != self.partitions.table:
            raise FullRefreshNeeded(name)
        self.batch.offsets[f"table:{name}"] = {"version": self.partitions.version}
        return self.partitions.restrict(self.store.read(name, self.partitions.version))

    def read_view(self, name: str) -> None:
        """A view's rows cannot be restricted to partitions, nor can its inputs be told apart
        from the view's: recorded, so that this view is always recomputed in full."""
        if self.partitions is not None:
            raise FullRefreshNeeded(name)
        self.batch.offsets[f"view:{name}"] = {}

    def recompute_all(self) -> None:
        self.partitions = None
        self.batch.offsets = {}  # commit_plan adds the definition

    def describe(self) -> str:
        if self.partitions is None:
            return "recomputed in full"
        return f"recomputed the partitions ({', '.join(self.columns)}) of rows appended to {self.partitions.table}"

    def view(self, recomputed: DataFrame) -> DataFrame:
        """What the refresh writes: the recomputed rows, in place of the touched partitions'
        (``replacing``), or the whole view: those rows and every row of the others as it was."""
        if self.partitions is None:
            return recomputed
        self.replacing = self.partitions.values(REPLACE_PARTITIONS)
        if self.replacing is not None:
            return recomputed
        kept = self.partitions.keep_untouched(self.store.read(self.target.name))
        return kept.unionByName(recomputed, allowMissingColumns=True)
