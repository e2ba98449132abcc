"""Snapshot vs current replica, partition-parallel by key, never collected on the driver.

Two passes over the snapshot:

1. *Narrow compare.* Spark's JSON reader parses each snapshot row with the replica's column
   types (several times faster than ``from_json`` on the lines: it parses bytes, not decoded
   text); the flow's column filters run (so a hashed e-mail compares with a hashed e-mail), and
   each row is reduced to its key columns plus a 128-bit digest of its other values. A full
   outer join with the replica's (key, digest) gives the op of every key that differs
   (``cdc.snapshot.diff_ops``); a window over the join's shuffle by key counts the rows of each
   key as the join runs, to find keyless rows and duplicate keys. Only keys and digests are
   shuffled. A line that is no JSON object is caught first, from the text.
2. *Rows of the difference.* Only for the keys that differ are full rows fetched: the snapshot
   line (the source's own JSON) for INSERT/UPDATE, the replica row for UPDATE/DELETE. Each row of
   pass 1 carries its line's place in the scan (``AT``: both passes read the same files in the
   same splits, so the n-th row of a split is its n-th non-blank line), so the lines of the
   difference are found without cutting a key out of every line; they are parsed and joined by
   key, which checks that they are the rows pass 1 read. Should that not find them all, every
   line's key is parsed instead. The join strategy follows the size of the difference, as the
   patent suggests: a small difference is broadcast to the tasks reading the big sides (hash
   join, no shuffle of the table); a large one is joined by a shuffle join.

A key whose replica state (the AUTO CDC state table) was applied at a sequence later than the
snapshot's is *superseded*: a change committed after the snapshot's position already decided
it, so no correction is written (AUTO CDC would ignore one anyway).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from cdc_lakehouse.cdc.apply import SEQ, state_table_name
from cdc_lakehouse.cdc.snapshot import OP, diff_ops
from cdc_lakehouse.silver import keys as canonical_keys
from cdc_lakehouse.silver.declared_types import declared_table
from cdc_lakehouse.silver.filters import apply_column_filters
from cdc_lakehouse.silver.net_change import changed_columns
from cdc_lakehouse.silver.typing import typed

LINE, KEY, N, RN, D1, D2, AT = "__line", "__key", "__n", "__rn", "__d1", "__d2", "__at"
BROADCAST_LIMIT = 2_000_000  # differing keys up to which the difference is broadcast


@dataclass(frozen=True)
class TableSpec:
    """One replicated table as reconcile sees it (from the onboarding flow)."""

    source: str
    table: str  # "<schema>.<table>" at the source
    keys: tuple[str, ...]  # replica (silver) key columns
    replica: str  # e.g. silver.shop_products
    filters: object | None = None  # onboarding ColumnFilters
    column_list: tuple[str, ...] | None = None
    except_columns: frozenset[str] = frozenset()
    declared: frozenset[str] | None = None  # source columns of the flow's schema file, if it has one

    @classmethod
    def from_flow(cls, flow, silver_schema: str = "silver") -> "TableSpec":
        declared = declared_table(flow)
        return cls(
            source=flow.source, table=flow.qualified_table, keys=tuple(flow.keys),
            replica=f"{silver_schema}.{flow.silver_table}", filters=flow.column_filters,
            column_list=tuple(flow.column_list) if flow.column_list else None,
            except_columns=frozenset(flow.except_column_list),
            declared=frozenset(declared.schema.names) if declared else None,
        )

    @property
    def state(self) -> str:
        return state_table_name(self.replica)

    def source_name(self, column: str) -> str:
        return self.filters.source_name(column) if self.filters is not None else column

    def silver_name(self, column: str) -> str:
        return self.filters.silver_name(column) if self.filters is not None else column

    @property
    def source_keys(self) -> list[str]:
        return [self.source_name(k) for k in self.keys]

    def replicated(self, silver_column: str) -> bool:
        """Whether a silver column can be in the replica at all (column_list / except list)."""
        if self.column_list is not None:
            return silver_column in self.column_list
        return silver_column not in self.except_columns

    def removed_at_source(self, source_column: str) -> bool:
        return self.filters is not None and source_column in self.filters.drop

    def undeclared(self, source_column: str) -> bool:
        """A column the schema file leaves out: the replica never holds it (undeclared_column)."""
        return self.declared is not None and source_column not in self.declared


@dataclass
class Counts:
    snapshot_rows: int = 0
    replica_rows: int = 0
    keyless_rows: int = 0
    duplicate_keys: int = 0
    duplicate_examples: list = field(default_factory=list)
    ops: dict = field(default_factory=dict)  # op -> corrective changes written
    superseded: dict = field(default_factory=dict)  # op -> differences a later change decided

    @property
    def unchanged(self) -> int:
        return self.snapshot_rows - self.ops.get("INSERT", 0) - self.ops.get("UPDATE", 0) - sum(
            n for op, n in self.superseded.items() if op != "DELETE"
        )

    def as_dict(self) -> dict:
        return {
            "snapshot_rows": self.snapshot_rows, "replica_rows": self.replica_rows,
            "inserts": self.ops.get("INSERT", 0), "updates": self.ops.get("UPDATE", 0),
            "deletes": self.ops.get("DELETE", 0), "unchanged": self.unchanged,
            "superseded": sum(self.superseded.values()),
        }


def _no_string() -> Column:
    return F.lit(None).cast("string")


# -- reading the snapshot ------------------------------------------------------------------
def read_lines(spark, parts: list[Path]) -> DataFrame:
    """One row per non-blank line of the part files (``.gz`` decompressed by Spark)."""
    if not parts:
        return spark.createDataFrame([], f"{LINE} string, {AT} long")
    text = spark.read.text([str(p) for p in parts])
    return text.filter(F.trim("value") != "").select(F.col("value").alias(LINE), _place())


def _place() -> Column:
    """A row's place in its scan: split number and row within the split (``AT``)."""
    return F.monotonically_increasing_id().alias(AT)


def first_row_columns(parts: list[Path]) -> list[str]:
    """The columns of the snapshot's first row: a table dump's rows all have the same columns,
    so this names columns the replica does not have yet without a pass over the data."""
    for part in parts:
        opener = gzip.open if part.name.endswith(".gz") else open
        with opener(part, "rt", encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    try:
                        row = json.loads(line)
                    except ValueError:
                        return []
                    return list(row) if isinstance(row, dict) else []
    return []


def canonical_key(line: Column, source_keys: list[str]) -> Column:
    """The key as silver writes it (canonical JSON, values as text); NULL when a key value is
    missing or the line is not a JSON object."""
    values = F.from_json(line, "map<string,string>")
    present = F.lit(True)
    for k in source_keys:
        present = present & values[k].isNotNull()
    pairs = F.map_from_arrays(F.array(*[F.lit(k) for k in source_keys]), F.array(*[values[k] for k in source_keys]))
    return F.when(F.coalesce(present, F.lit(False)), canonical_keys.canonical(pairs, line))


# -- pass 1: narrow compare ----------------------------------------------------------------
def parse_schema(replica: DataFrame, spec: TableSpec, snapshot_columns: list[str]) -> StructType:
    """Source-named columns with the replica's types; hashed/masked columns as text (their
    replica type is the filter's output), snapshot-only columns as text unless the replica can
    never hold them (dropped, excluded, or left out of the flow's schema file)."""
    filtered = set(spec.filters.hash) | set(spec.filters.mask) if spec.filters is not None else set()
    fields, names = [], set()
    for f in replica.schema.fields:
        name = spec.source_name(f.name)
        fields.append(StructField(name, StringType() if name in filtered else f.dataType))
        names.add(name)
    for column in snapshot_columns:
        new = column not in names and not spec.removed_at_source(column) and not spec.undeclared(column)
        if new and spec.replicated(spec.silver_name(column)):
            fields.append(StructField(column, StringType()))
    return StructType(fields)


def typed_rows(lines: DataFrame, spec: TableSpec, schema: StructType) -> DataFrame:
    """Lines parsed as the replica would hold them (silver's ``typed``): typed, filtered,
    silver column names."""
    parsed = typed(lines.select(LINE, F.col(LINE).alias("__row_text")), schema, column="__row_text")
    return apply_column_filters(parsed, spec.filters)


def read_rows(spark, parts: list[Path], spec: TableSpec, schema: StructType) -> DataFrame:
    """The snapshot as the replica would hold it, parsed by Spark's JSON reader. Its rows are
    the lines' rows once ``non_object_lines`` found none (the reader would unpack an array), each
    with its line's place (``AT``, as ``read_lines`` numbers the lines)."""
    parsed = spark.read.schema(schema).json([str(p) for p in parts]).select("*", _place())
    return apply_column_filters(parsed, spec.filters)


def non_object_lines(lines: DataFrame) -> tuple[int, int]:
    """(lines, lines that are no JSON object), from the text alone."""
    row = lines.agg(F.count(F.lit(1)), F.sum(F.when(F.ltrim(LINE).startswith("{"), 0).otherwise(1))).first()
    return int(row[0]), int(row[1] or 0)


def compared_columns(typed: DataFrame, spec: TableSpec) -> list[str]:
    return [c for c in typed.columns if c not in (LINE, AT) and c not in spec.keys]


def with_digest(df: DataFrame, columns: list[str]) -> DataFrame:
    """Two xxhash64 digests (128 bits) of the values. Spark's hashes skip NULLs, so a mask of
    which values are NULL goes in too: (NULL, 'a') and ('a', NULL) must not digest alike."""
    nulls = F.concat(F.lit("#"), *[F.when(F.col(c).isNull(), "1").otherwise("0") for c in columns])
    values = [F.col(c) for c in columns]
    return df.withColumns({D1: F.xxhash64(nulls, *values), D2: F.xxhash64(F.lit("second digest"), nulls, *values)})


def replica_digests(replica: DataFrame, columns: list[str], keys: list[str]) -> DataFrame:
    missing = {c: F.lit(None).cast("string") for c in columns if c not in replica.columns}
    return with_digest(replica.withColumns(missing), columns).select(*keys, D1, D2)


def _keyless(keys: list[str]) -> Column:
    keyless = F.lit(False)
    for k in keys:
        keyless = keyless | F.col(k).isNull()
    return keyless


def key_checks(grouped: DataFrame, keys: list[str], counts: Counts) -> None:
    """Rows, rows without a (parseable) key, duplicate keys and a few examples: one pass."""
    keyless = _keyless(keys)
    row = grouped.agg(
        F.sum(N).alias("rows"),
        F.sum(F.when(keyless, F.col(N)).otherwise(0)).alias("keyless"),
        F.sum(F.when(~keyless & (F.col(N) > 1), 1).otherwise(0)).alias("dups"),
    ).first()
    counts.snapshot_rows, counts.keyless_rows = int(row["rows"] or 0), int(row["keyless"] or 0)
    counts.duplicate_keys = int(row["dups"] or 0)
    if counts.duplicate_keys:
        _record_examples(grouped.filter(~keyless & (F.col(N) > 1)), keys, counts)


def _record_examples(duplicated: DataFrame, keys: list[str], counts: Counts) -> None:
    examples = duplicated.orderBy(F.col(N).desc(), *keys).limit(3)
    counts.duplicate_examples = [
        {**{("key" if k == KEY else k): r[k] for k in keys}, "rows": r[N]} for r in examples.select(*keys, N).collect()
    ]


def counted_by_key(narrow: DataFrame, keys: list[str]) -> DataFrame:
    """``narrow`` with its key's row count (``N``) and its place among them (``RN``). A window,
    not a grouping: its shuffle by key and its sort are the ones the join with the replica
    needs, so the snapshot is shuffled once and no table of every key is built."""
    per_key = Window.partitionBy(*keys).orderBy(*keys)  # all rows of a key are peers: N counts them all
    return narrow.withColumn(N, F.count(F.lit(1)).over(per_key)).withColumn(RN, F.row_number().over(per_key))


def _first_of_duplicate(keys: list[str]) -> Column:
    return ~_keyless(keys) & (F.col(N) > 1) & (F.col(RN) == 1)


def later_state(store, spec: TableSpec, position: int) -> DataFrame | None:
    """The replica's AUTO CDC state, or None when it cannot hold a key applied after the
    snapshot's ``position``: its files' statistics put every applied sequence before it, as
    they always do for an "as of now" snapshot. Saves a pass over the state and over the
    difference."""
    if not store.exists(spec.state):
        return None
    latest = store.column_max(spec.state, f"{SEQ}.position")
    return None if latest is None or latest < position else store.read(spec.state)


def superseded_keys(ops: DataFrame, state: DataFrame, keys: list[str], sequence: Column, small: bool) -> DataFrame:
    """Keys of ``ops`` that AUTO CDC applied at a sequence after the snapshot's."""
    wanted = F.broadcast(ops.select(*keys)) if small else ops.select(*keys)
    return state.join(wanted, keys, "left_semi").filter(F.col(SEQ) > sequence).select(*keys)


def compare(typed: DataFrame, replica: DataFrame, state: DataFrame | None, spec: TableSpec,
            sequence: Column, counts: Counts) -> DataFrame | None:
    """The ops (key columns + ``__snapshot_op``) of the keys to correct; None when the snapshot
    has keyless rows or duplicate keys (see ``counts``; its rows are counted before, from the
    lines). The result is persisted: it is small (the difference) and read by several steps.
    ``state``: the AUTO CDC state rows that may be later than the snapshot (``later_state``)."""
    keys = list(spec.keys)
    columns = compared_columns(typed, spec)
    counted = counted_by_key(with_digest(typed, columns).select(*keys, D1, D2, AT), keys)
    # Keyless rows (no key: never matched, so always kept) and every row of a duplicated key are
    # kept in the result, so one pass over it counts them with the ops.
    ops = diff_ops(counted, replica_digests(replica, columns, keys), keys, (N, RN, AT), F.col(f"s.{N}") > 1).persist()
    keyless = F.col(N).isNotNull() & _keyless(keys)  # N: a snapshot row (a DELETE has none)
    found = ops.groupBy(OP, keyless.alias("keyless"), _first_of_duplicate(keys).alias("first_dup")).count().collect()
    counts.keyless_rows = sum(r["count"] for r in found if r["keyless"])
    counts.duplicate_keys = sum(r["count"] for r in found if r["first_dup"])
    if counts.keyless_rows or counts.duplicate_keys:
        if counts.duplicate_keys:
            _record_examples(ops.filter(_first_of_duplicate(keys)), keys, counts)
        ops.unpersist()
        return None
    if state is None:  # no key can have been applied after the snapshot: every difference is corrected
        counts.ops = {op: sum(r["count"] for r in found if r[OP] == op) for op in {r[OP] for r in found}}
        return ops.drop(N, RN)
    small = sum(r["count"] for r in found) <= BROADCAST_LIMIT
    late = superseded_keys(ops, state, keys, sequence, small).withColumn("__late", F.lit(True))
    marked = ops.join(F.broadcast(late) if small else late, keys, "left").persist()
    by_op = marked.groupBy(OP, F.col("__late").isNotNull().alias("late")).count().collect()
    counts.ops = {r[OP]: r["count"] for r in by_op if not r["late"]}
    counts.superseded = {r[OP]: r["count"] for r in by_op if r["late"]}
    ops.unpersist()
    return marked.filter(F.col("__late").isNull()).drop("__late", N, RN)


# -- pass 2: rows of the difference ------------------------------------------------------
def image(df: DataFrame, spec: TableSpec) -> Column:
    """A replica row as a JSON image with source column names (NULLs kept, as binlog images)."""
    named = [F.col(c).alias(spec.source_name(c)) for c in df.columns]
    return F.to_json(F.struct(*named), {"ignoreNullFields": "false"})


def differing_columns(columns: list[str], spec: TableSpec) -> Column:
    """Source names of the values that differ, compared as the replica holds them."""
    marks = [F.when(~F.col(f"s.{c}").eqNullSafe(F.col(f"r.{c}")), F.lit(spec.source_name(c))) for c in columns]
    return F.array_sort(F.filter(F.array(*marks), lambda x: x.isNotNull())) if marks else F.array().cast("array<string>")


def difference_rows(lines: DataFrame, schema: StructType, replica: DataFrame, ops: DataFrame, spec: TableSpec,
                    small: bool) -> DataFrame:
    """key, op, row, before, changed_columns of every correction.

    The snapshot is scanned once more to find the lines of the difference, which are then parsed
    in full. Both sides of the difference are persisted: each feeds two branches."""
    keys = list(spec.keys)
    pick = (lambda df: F.broadcast(df)) if small else (lambda df: df)
    snap = snapshot_lines(lines, schema, ops.filter(F.col(OP) != "DELETE"), spec, pick)
    changed = typed_rows(snap.filter(F.col(OP) == "UPDATE").select(LINE), spec, schema)
    columns = compared_columns(changed, spec)
    rep = replica.join(pick(ops.filter(F.col(OP) != "INSERT")), keys)
    rep = rep.select(*keys, OP, image(replica, spec).alias("__image"), *[c for c in replica.columns if c not in keys]).persist()
    src_keys = spec.source_keys
    inserts = snap.filter(F.col(OP) == "INSERT").select(
        canonical_key(F.col(LINE), src_keys).alias("key"), F.lit("INSERT").alias("op"), F.col(LINE).alias("row"),
        _no_string().alias("before"), changed_columns(_no_string(), F.col(LINE)).alias("changed_columns"),
    )
    deletes = rep.filter(F.col(OP) == "DELETE").select(
        canonical_key(F.col("__image"), src_keys).alias("key"), F.lit("DELETE").alias("op"),
        F.col("__image").alias("row"), F.col("__image").alias("before"),
        changed_columns(F.col("__image"), _no_string()).alias("changed_columns"),
    )
    s, r = changed.alias("s"), _with_columns(rep.filter(F.col(OP) == "UPDATE"), columns).alias("r")
    updates = s.join(r, [F.col(f"s.{k}") == F.col(f"r.{k}") for k in keys]).select(
        canonical_key(F.col(f"s.{LINE}"), src_keys).alias("key"), F.lit("UPDATE").alias("op"),
        F.col(f"s.{LINE}").alias("row"), F.col("r.__image").alias("before"),
        differing_columns(columns, spec).alias("changed_columns"),
    )
    return inserts.unionByName(updates).unionByName(deletes)


def snapshot_lines(lines: DataFrame, schema: StructType, wanted: DataFrame, spec: TableSpec, pick) -> DataFrame:
    """(keys, op, line) of the lines of ``wanted`` (keys, op, AT), persisted. The lines at the
    wanted places are parsed and joined by key; if that finds fewer lines than keys, every
    line's key is."""
    keys = list(spec.keys)
    key_schema = StructType([f for f in schema.fields if f.name in spec.source_keys])
    by_key = pick(wanted.drop(AT))
    # Cached, so that the join's "key is not null" is not pushed below the lookup, which would
    # parse every line after all.
    candidates = lines.join(pick(wanted.select(AT)), AT, "left_semi").select(LINE).persist()
    found = typed_rows(candidates, spec, key_schema).join(by_key, keys).persist()
    complete = found.count() == wanted.count()
    candidates.unpersist()
    if complete:
        return found
    found.unpersist()
    return typed_rows(lines, spec, key_schema).join(by_key, keys).persist()


def _with_columns(df: DataFrame, columns: list[str]) -> DataFrame:
    """Snapshot-only columns are NULL on the replica side."""
    return df.withColumns({c: F.lit(None).cast("string") for c in columns if c not in df.columns})


# -- first snapshot of a table: every row an INSERT ------------------------------------
def seed_rows(lines: DataFrame, spec: TableSpec, counts: Counts) -> DataFrame | None:
    """No replica yet: the snapshot seeds it. Only the keys are parsed (to find keyless rows and
    duplicates); the rows go on as the source's own JSON text."""
    src_keys = spec.source_keys
    keyed = lines.select(LINE, canonical_key(F.col(LINE), src_keys).alias(KEY))
    grouped = keyed.groupBy(KEY).agg(F.count(F.lit(1)).alias(N), F.lit(0).alias(D1))
    key_checks(grouped, [KEY], counts)
    if counts.keyless_rows or counts.duplicate_keys:
        return None
    counts.ops = {"INSERT": counts.snapshot_rows}
    return keyed.select(
        F.col(KEY).alias("key"), F.lit("INSERT").alias("op"), F.col(LINE).alias("row"),
        _no_string().alias("before"), changed_columns(_no_string(), F.col(LINE)).alias("changed_columns"),
    )
