"""APPLY CHANGES (AUTO CDC) into a Delta table, as Databricks documents it, for SCD1 and SCD2.

Per key the change with the highest ``sequence_by`` wins; an older change that arrives late
never overwrites newer state. Deletes leave a tombstone in a companion state table
(``__apply_changes_storage_<target>``, the name Databricks uses) holding the latest sequence
applied per key, so a late older change cannot resurrect a deleted row. SCD2 rebuilds the
history of every key the batch touches, so late changes land at their place in history.

``ignore_null_updates`` (every column) and ``ignore_null_updates_column_list`` /
``ignore_null_updates_except_column_list`` (some): a NULL an upsert carries in such a column
keeps the value the row had before it, in sequence order. An upsert that inserts the row (none
before it, or a delete) writes its NULLs; in SCD2 a new version takes the previous version's value.

Order of commits (target first, state last) makes a re-run after a crash exact: until the
state commit lands, the batch is recomputed from the same state and the same input, and each
table skips the write its Delta app transaction says it already has.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, FloatType, StructType

from cdc_lakehouse.cdc.widening import fit_to_target
from cdc_lakehouse.storage import UpsertSpec

SEQ = "__seq"
DELETE = "__is_delete"
TRUNCATE = "__is_truncate"
BROADCAST_KEYS = 1_000_000  # batch keys up to which they are broadcast to table scans
START_AT = "__START_AT"
END_AT = "__END_AT"
DELETED = "__deleted"
UPDATED_AT = "__updated_at"


class CdcInputError(ValueError):
    """Change rows AUTO CDC cannot apply: NULL keys or sequences, conflicting ties."""


def state_table_name(target: str) -> str:
    schema, _, table = target.rpartition(".")
    return f"{schema + '.' if schema else ''}__apply_changes_storage_{table}"


@dataclass(frozen=True)
class CdcSpec:
    keys: list[str]
    sequence_by: str | Column
    scd_type: int = 1
    apply_as_deletes: str | Column | None = None
    apply_as_truncates: str | Column | None = None
    column_list: list[str] | None = None
    except_column_list: list[str] | None = None
    track_history_column_list: list[str] | None = None
    track_history_except_column_list: list[str] | None = None
    ignore_null_updates: bool = False
    ignore_null_updates_column_list: list[str] | None = None
    ignore_null_updates_except_column_list: list[str] | None = None
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_params(cls, params: dict) -> "CdcSpec":
        return cls(
            keys=list(params["keys"]),
            sequence_by=params["sequence_by"],
            scd_type=int(params.get("stored_as_scd_type", 1)),
            apply_as_deletes=params.get("apply_as_deletes"),
            apply_as_truncates=params.get("apply_as_truncates"),
            column_list=params.get("column_list"),
            except_column_list=params.get("except_column_list"),
            track_history_column_list=params.get("track_history_column_list"),
            track_history_except_column_list=params.get("track_history_except_column_list"),
            ignore_null_updates=bool(params.get("ignore_null_updates")),
            ignore_null_updates_column_list=params.get("ignore_null_updates_column_list"),
            ignore_null_updates_except_column_list=params.get("ignore_null_updates_except_column_list"),
        )

    def data_columns(self, columns: list[str]) -> list[str]:
        if self.column_list:
            chosen = [_name(c) for c in self.column_list]
        else:
            excluded = {_name(c) for c in self.except_column_list or []}
            chosen = [c for c in columns if c not in excluded]
        missing = [k for k in self.keys if k not in chosen]
        if missing:
            raise CdcInputError(f"key column(s) {missing} are not among the applied columns {chosen}")
        return chosen

    def null_ignored_columns(self, data_columns: list[str]) -> list[str]:
        """The columns whose NULL in an update keeps the row's value: none, some, or every
        column but the keys (which a change always carries)."""
        given = [name for name, value in (("ignore_null_updates", self.ignore_null_updates),
                                          ("ignore_null_updates_column_list", self.ignore_null_updates_column_list),
                                          ("ignore_null_updates_except_column_list",
                                           self.ignore_null_updates_except_column_list)) if value]
        if len(given) > 1:
            raise CdcInputError(f"{' and '.join(given)} cannot be used together")
        others = [c for c in data_columns if c not in self.keys]
        as_named = {c.casefold(): c for c in others}  # names resolve as Spark resolves them: ignoring case
        if self.ignore_null_updates_column_list:
            chosen = [as_named.get(_name(c).casefold(), _name(c)) for c in self.ignore_null_updates_column_list]
            wrong = [c for c in chosen if c not in others]
            if wrong:
                raise CdcInputError(f"ignore_null_updates_column_list: {wrong} are not among the applied non-key "
                                    f"columns {others}")
            return chosen
        if self.ignore_null_updates_except_column_list:
            excluded = {_name(c).casefold() for c in self.ignore_null_updates_except_column_list}
            return [c for c in others if c.casefold() not in excluded]
        return others if self.ignore_null_updates else []

    def tracked_columns(self, data_columns: list[str]) -> list[str]:
        if self.track_history_column_list:
            return [_name(c) for c in self.track_history_column_list]
        excluded = {_name(c) for c in self.track_history_except_column_list or []}
        return [c for c in data_columns if c not in excluded and c not in self.keys]


def _name(column) -> str:
    return column if isinstance(column, str) else str(column._jc.toString()).strip("`")


def _as_column(expr: str | Column) -> Column:
    return F.expr(expr) if isinstance(expr, str) else expr


# -- preparing a batch ----------------------------------------------------------------------
@dataclass(frozen=True)
class BatchFacts:
    """What one pass over a prepared batch finds: its rows, the range of its first key,
    whether two of its changes share a key and a sequence value, and how many truncates it has."""

    rows: int
    low: object
    high: object
    clashes: bool = False
    truncates: int = 0


def prepare_changes(changes: DataFrame, spec: CdcSpec) -> tuple[DataFrame, list[str], BatchFacts]:
    """The batch as (data columns, __seq, __is_delete, __is_truncate), validated, with exact
    duplicates (a re-delivered change) collapsed."""
    data = spec.data_columns(changes.columns)
    delete = F.coalesce(_as_column(spec.apply_as_deletes), F.lit(False)) if spec.apply_as_deletes is not None else F.lit(False)
    truncate = F.coalesce(_as_column(spec.apply_as_truncates), F.lit(False)) if spec.apply_as_truncates is not None else F.lit(False)
    prepared = changes.select(
        *[F.col(c) for c in data],
        _as_column(spec.sequence_by).alias(SEQ),
        delete.alias(DELETE),
        truncate.alias(TRUNCATE),
    )
    if spec.apply_as_truncates is not None and spec.scd_type == 2:
        raise CdcInputError("apply_as_truncates is only supported for SCD type 1")
    # The batch is read by several steps (checks, history, state): computed once, deduplicated
    # once (each step deduplicating it again shuffled the whole batch again).
    prepared = prepared.dropDuplicates(_comparable(prepared)).persist()
    try:
        return prepared, data, _checked_facts(prepared, spec.keys)
    except CdcInputError:
        prepared.unpersist()
        raise


def _comparable(df: DataFrame) -> list[str]:
    """The columns Spark can compare: a map cannot be (two rows equal in all the others, same
    key and sequence, are one change applied twice; AUTO CDC keeps one of them either way)."""
    return [f.name for f in df.schema.fields if "map<" not in f.dataType.simpleString()]


def _checked_facts(prepared: DataFrame, keys: list[str]) -> BatchFacts:
    """NULL checks, the key range and whether any (key, sequence) repeats, in one job."""
    not_truncate = ~F.col(TRUNCATE)
    null_key = F.lit(False)
    for k in keys:
        null_key = null_key | F.col(k).isNull()
    found = prepared.agg(
        F.sum(F.when(F.col(SEQ).isNull(), 1).otherwise(0)).alias("null_seq"),
        F.sum(F.when(null_key & not_truncate, 1).otherwise(0)).alias("null_key"),
        F.min(F.when(not_truncate, F.col(keys[0]))).alias("low"),
        F.max(F.when(not_truncate, F.col(keys[0]))).alias("high"),
        F.count(F.when(not_truncate, F.lit(1))).alias("rows"),
        F.count_distinct(F.when(not_truncate, F.struct(*keys, SEQ))).alias("pairs"),
        F.count_if(F.col(TRUNCATE)).alias("truncates"),
    ).collect()[0]
    if found["null_seq"]:
        raise CdcInputError(f"{found['null_seq']} change row(s) have a NULL sequence_by value; AUTO CDC needs one to order them")
    if found["null_key"]:
        raise CdcInputError(f"{found['null_key']} change row(s) have a NULL key in {keys}")
    return BatchFacts(int(found["rows"]), found["low"], found["high"], found["pairs"] < found["rows"],
                      int(found["truncates"]))


def distinct_events(prepared: DataFrame, keys: list[str], facts: BatchFacts | None = None) -> DataFrame:
    """The changes of a prepared batch (duplicates already collapsed); two different changes
    with one key and one sequence value cannot be ordered, which is an error, as in Databricks.
    ``facts`` (``prepare_changes``) tell whether there are any; only then are they looked up."""
    events = prepared.filter(~F.col(TRUNCATE))
    if facts is not None and not facts.clashes:
        return events
    clashes = events.groupBy(*keys, SEQ).count().filter("count > 1").limit(3).collect()
    if clashes:
        shown = ", ".join(str({k: r[k] for k in [*keys, SEQ]}) for r in clashes)
        raise CdcInputError(f"different changes share a key and a sequence value: {shown}{_inexact_key_hint(events, keys)}")
    return events


def _inexact_key_hint(events: DataFrame, keys: list[str]) -> str:
    inexact = [k for k in keys if isinstance(events.schema[k].dataType, (DoubleType, FloatType))]
    if not inexact:
        return ""
    return (f"; key column(s) {inexact} hold floating-point numbers, which cannot tell apart keys that differ "
            "past 15 significant digits: declare them DECIMAL")


def latest_per_key(events: DataFrame, keys: list[str]) -> DataFrame:
    newest_first = Window.partitionBy(*keys).orderBy(F.col(SEQ).desc())
    return events.withColumn("__rank", F.row_number().over(newest_first)).filter("__rank = 1").drop("__rank")


# -- applying -------------------------------------------------------------------------------
def apply_changes(store, target: str, changes: DataFrame, spec: CdcSpec, batch, table_opts: dict) -> int:
    prepared, data, facts = prepare_changes(fit_to_target(store, target, changes, table_opts), spec)
    state_name = state_table_name(target)
    if not facts.rows and not facts.truncates and store.exists(target) and store.exists(state_name):
        return 0  # nothing to apply: neither table gets a commit (the checkpoint records the batch)
    state = with_sequence_of(store.read(state_name), prepared) if store.exists(state_name) else None
    events = distinct_events(prepared, spec.keys, facts)
    # Only a batch with a truncate reads the whole state (every key it may delete).
    truncates = spec.apply_as_truncates is not None and facts.truncates > 0
    if truncates:
        events = events.unionByName(_truncate_deletes(prepared, state, spec, data))
    latest = latest_per_key(events, spec.keys)
    # A truncate deletes keys the batch does not name: its scope is that of the result.
    scope = KeyScope.of(latest, spec.keys) if truncates else KeyScope.of_batch(events, spec.keys, facts)
    state_rows = scope.rows_of(state)
    # Both MERGEs below read `effective`: computed once, from the batch's keys' state only.
    effective = _effective(store, target, events, latest, state_rows, scope, spec, data).persist()
    try:
        if not batch.already_committed(target):
            if spec.scd_type == 2:
                _write_history(store, target, events, state_rows, scope, spec, data, batch, table_opts)
            else:
                store.upsert(
                    target, effective.select(*data, DELETE), UpsertSpec(tuple(spec.keys), DELETE),
                    batch.commit(), **table_opts,
                )
        written = 0
        if not batch.already_committed(state_name):
            rows = _state_rows(effective, spec.keys)
            written = store.upsert(state_name, rows, UpsertSpec(tuple(spec.keys), keep_appends=False), batch.commit())
        return written
    finally:
        # ``prepared`` stays cached: a replica's SCD2 flow prepares the same batch as its SCD1
        # flow and finds it there; the runner drops the caches once both have run.
        effective.unpersist()
        scope.release()


def _effective(store, target: str, events: DataFrame, latest: DataFrame, state_rows: DataFrame | None,
               scope: "KeyScope", spec: CdcSpec, data: list[str]) -> DataFrame:
    """Per key, its latest change newer than the state: as it is, or, where the flow ignores NULL
    updates (SCD1; SCD2 resolves them in its history), with each ignored NULL replaced by the
    value before it: an earlier change's of the batch, else the stored row's."""
    ignored = spec.null_ignored_columns(data)
    if not ignored or spec.scd_type != 1:
        return _newer_than_state(latest, state_rows, spec.keys)
    stored = scope.rows_of(store.read(target)) if store.exists(target) else None
    newer = _newer_than_state(events, state_rows, spec.keys)
    return latest_per_key(with_null_updates_ignored(newer, stored, spec.keys, ignored), spec.keys)


def with_sequence_of(state: DataFrame, prepared: DataFrame) -> DataFrame:
    """The state with its sequences read as the batch's type where the flow's ``sequence_by``
    gained trailing fields since (a struct that learned another tie-breaker): an older value has
    NULL there, as Delta reads a field a schema evolution added, and NULL orders first. The
    state's first merge of the wider sequence evolves its schema so (merge with schema evolution)."""
    old, new = state.schema[SEQ].dataType, prepared.schema[SEQ].dataType
    if not (isinstance(old, StructType) and isinstance(new, StructType)) or old == new:
        return state
    if old.fieldNames() != new.fieldNames()[:len(old.fields)]:
        return state  # not an addition of fields: comparing them is an error, as it would be on Databricks
    fields = [F.col(f"{SEQ}.{f.name}") if f.name in old.fieldNames() else F.lit(None).cast(f.dataType) for f in new.fields]
    return state.withColumn(SEQ, F.struct(*[c.alias(f.name) for c, f in zip(fields, new.fields)]))


@dataclass(frozen=True)
class KeyScope:
    """The keys a batch touches, to read only their rows of a keyed table (state, history).

    The key range lets Parquet statistics skip files and row groups; a batch of up to
    ``BROADCAST_KEYS`` keys is then broadcast to the scan, so the table is filtered where it is
    read instead of being shuffled for a join (what makes a small batch into a big table cost
    the batch, not the table)."""

    keys: DataFrame
    names: tuple[str, ...]
    low: object
    high: object
    count: int  # rows naming the keys (at least as many as the keys): decides the broadcast
    cached: list = field(default_factory=list)

    @classmethod
    def of(cls, latest: DataFrame, keys: list[str]) -> "KeyScope":
        row = latest.agg(F.min(keys[0]), F.max(keys[0]), F.count(F.lit(1))).collect()[0]
        return cls(latest.select(*keys), tuple(keys), row[0], row[1], int(row[2]))

    @classmethod
    def of_batch(cls, events: DataFrame, keys: list[str], facts: BatchFacts) -> "KeyScope":
        """The scope of a batch's own changes, from what ``prepare_changes`` found (no job)."""
        return cls(events.select(*keys), tuple(keys), facts.low, facts.high, facts.rows)

    def rows_of(self, table: DataFrame | None) -> DataFrame | None:
        if table is None:
            return None
        if not self.count:
            return table.limit(0)
        first = self.names[0]
        ranged = table.filter(F.col(first).between(F.lit(self.low), F.lit(self.high)))
        keys = F.broadcast(self.keys) if self.count <= BROADCAST_KEYS else self.keys
        # Cached: SCD2 reads these rows several times, and each read would scan the table.
        rows = ranged.join(keys, list(self.names), "left_semi").persist()
        self.cached.append(rows)
        return rows

    def release(self) -> None:
        for rows in self.cached:
            rows.unpersist()


def _newer_than_state(latest: DataFrame, state: DataFrame | None, keys: list[str]) -> DataFrame:
    """``state``: the state rows of the batch's keys (``KeyScope.rows_of``), at most one per change."""
    if state is None:
        return latest
    applied = state.select(*keys, F.col(SEQ).alias("__applied_seq"))
    joined = latest.join(applied, keys, "left")
    return joined.filter(F.col("__applied_seq").isNull() | (F.col(SEQ) > F.col("__applied_seq"))).drop("__applied_seq")


def with_null_updates_ignored(events: DataFrame, stored: DataFrame | None, keys: list[str],
                              columns: list[str]) -> DataFrame:
    """Each upsert's NULL in ``columns`` replaced by the value before it: the latest non-NULL
    value of that column since the key's last delete, in sequence order, else (no delete before
    it among ``events``) the ``stored`` row's (the target's current row, which a deleted key has
    not). The first upsert after a delete, or of a new key, inserts: its NULLs stay NULL."""
    if not columns:
        return events
    in_order = Window.partitionBy(*keys).orderBy(SEQ).rowsBetween(Window.unboundedPreceding, 0)
    marked = events.withColumn("__deletes", F.sum(F.col(DELETE).cast("int")).over(in_order))
    if stored is not None:
        kept = [(F.col(c) if c in stored.columns else F.lit(None)).alias(f"__stored_{c}") for c in columns]
        marked = marked.join(stored.select(*keys, *kept), keys, "left")
    since_delete = Window.partitionBy(*keys, "__deletes").orderBy(SEQ).rowsBetween(Window.unboundedPreceding, 0)
    for c in columns:
        before = F.last(F.when(~F.col(DELETE), F.col(c)), ignorenulls=True).over(since_delete)
        if stored is not None:
            before = F.coalesce(before, F.when(F.col("__deletes") == 0, F.col(f"__stored_{c}")).cast(events.schema[c].dataType))
        marked = marked.withColumn(c, F.when(F.col(DELETE), F.col(c)).otherwise(before))
    return marked.select(*events.columns)


def _state_rows(effective: DataFrame, keys: list[str]) -> DataFrame:
    return effective.select(*keys, SEQ, F.col(DELETE).alias(DELETED), F.current_timestamp().alias(UPDATED_AT))


def _truncate_deletes(prepared: DataFrame, state: DataFrame | None, spec: CdcSpec, data: list[str]) -> DataFrame:
    """A truncate at sequence T deletes every row last changed before T: the rows of the state
    and those the batch itself changed before it."""
    truncate_at = prepared.filter(F.col(TRUNCATE)).agg(F.max(SEQ).alias("__t"))
    changed = prepared.filter(~F.col(TRUNCATE)).select(*spec.keys, SEQ)
    if state is not None:
        changed = changed.unionByName(state.filter(~F.col(DELETED)).select(*spec.keys, SEQ))
    doomed = changed.crossJoin(truncate_at).filter(F.col(SEQ) < F.col("__t")).select(*spec.keys, "__t").distinct()
    others = [F.lit(None).cast(prepared.schema[c].dataType).alias(c) for c in data if c not in spec.keys]
    return doomed.select(
        *spec.keys, *others, F.col("__t").alias(SEQ), F.lit(True).alias(DELETE), F.lit(False).alias(TRUNCATE)
    ).select(*prepared.columns)


# -- SCD2 -----------------------------------------------------------------------------------
def _write_history(store, target, events, state_rows, scope, spec, data, batch, table_opts) -> None:
    """``state_rows``: the state of the batch's keys (``KeyScope.rows_of``)."""
    keys = spec.keys
    existing = _with_new_columns(scope.rows_of(store.read(target)), events, data) if store.exists(target) else None
    every = _all_events(events, existing, state_rows, keys, data)
    # Stored versions hold the values their NULLs kept: a new change's NULL takes the one before it.
    every = with_null_updates_ignored(every, None, keys, spec.null_ignored_columns(data))
    history = build_history(every, keys, data, spec.tracked_columns(data))
    # Cached: the versions are written and also looked up for the stored ones they replace,
    # and each use would fold the events again (windows and a grouping per key).
    history = history.persist()
    try:
        changes = history.withColumn(DELETE, F.lit(False))
        if existing is not None:
            gone = existing.select(*keys, START_AT).join(history.select(*keys, START_AT), [*keys, START_AT], "left_anti")
            changes = changes.unionByName(gone.withColumn(DELETE, F.lit(True)), allowMissingColumns=True)
        store.upsert(target, changes, UpsertSpec(tuple(keys), DELETE, (START_AT,)), batch.commit(), **table_opts)
    finally:
        history.unpersist()


def _with_new_columns(existing: DataFrame, events: DataFrame, data: list[str]) -> DataFrame:
    """The stored versions with the columns the batch brings first (a column the source added)
    as NULL: the versions before it had none. The target gains them as AUTO CDC's does."""
    new = [c for c in data if c not in existing.columns]
    return existing.select("*", *[F.lit(None).cast(events.schema[c].dataType).alias(c) for c in new])


def _all_events(events, existing, state, keys, data) -> DataFrame:
    """New changes plus the changes the stored history and tombstones (``existing`` and
    ``state``: their rows of the batch's keys) already stand for.
    Where both have an event at one sequence value, the stored one wins (re-delivery)."""
    new = events.select(*data, SEQ, DELETE).withColumn("__stored", F.lit(0))
    parts = [new]
    if existing is not None:
        upserts = existing.select(*data, F.col(START_AT).alias(SEQ), F.lit(False).alias(DELETE))
        starts = existing.select(*keys, F.col(START_AT).alias(END_AT))
        closing = existing.filter(F.col(END_AT).isNotNull()).join(starts, [*keys, END_AT], "left_anti")
        deletes = closing.select(*data, F.col(END_AT).alias(SEQ), F.lit(True).alias(DELETE))
        parts += [upserts.withColumn("__stored", F.lit(1)), deletes.withColumn("__stored", F.lit(1))]
        if state is not None:
            parts.append(_open_version_as_applied(existing, state, keys, data).withColumn("__stored", F.lit(1)))
    if state is not None:
        tombstones = state.filter(F.col(DELETED))
        parts.append(
            tombstones.select(*keys, SEQ).withColumn(DELETE, F.lit(True)).withColumn("__stored", F.lit(1))
        )
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part, allowMissingColumns=True)
    preferred = Window.partitionBy(*keys, SEQ).orderBy(F.col("__stored").desc())
    return union.withColumn("__r", F.row_number().over(preferred)).filter("__r = 1").drop("__r", "__stored")


def _open_version_as_applied(existing: DataFrame, state: DataFrame, keys: list[str], data: list[str]) -> DataFrame:
    """Each open version once more at its key's last applied sequence. Its values are that
    change's (an untracked change updates the version in place), so a late change older than it
    to untracked columns must not replace them. A closed version's last in-place change is not
    kept anywhere: there a late older one still wins."""
    applied = state.filter(~F.col(DELETED)).select(*keys, F.col(SEQ).alias("__applied"))
    open_versions = existing.filter(F.col(END_AT).isNull()).join(applied, keys)
    return open_versions.filter(F.col("__applied") > F.col(START_AT)).select(
        *data, F.col("__applied").alias(SEQ), F.lit(False).alias(DELETE))


def build_history(events: DataFrame, keys: list[str], data: list[str], tracked: list[str]) -> DataFrame:
    """Fold ordered events per key into SCD2 versions.

    A version starts at an upsert that follows nothing, a delete, or an upsert with other
    tracked values; untracked changes update the open version in place. A version ends at
    the event that follows its last upsert.
    """
    in_order = Window.partitionBy(*keys).orderBy(SEQ)
    tracked_values = F.struct(*[F.col(c) for c in tracked]) if tracked else F.lit(0)
    marked = (
        events.withColumn("__tracked", tracked_values)
        .withColumn("__prev_delete", F.lag(DELETE).over(in_order))
        .withColumn("__prev_tracked", F.lag("__tracked").over(in_order))
        .withColumn("__next_seq", F.lead(SEQ).over(in_order))
    )
    starts = ~F.col(DELETE) & (
        F.col("__prev_delete").isNull() | F.col("__prev_delete") | ~F.col("__tracked").eqNullSafe(F.col("__prev_tracked"))
    )
    grouped = marked.withColumn(
        "__version", F.sum(F.when(starts, 1).otherwise(0)).over(in_order.rowsBetween(Window.unboundedPreceding, 0))
    ).filter(~F.col(DELETE))
    last = F.max_by(F.struct(*[F.col(c) for c in data if c not in keys], F.col("__next_seq")), F.col(SEQ))
    versions = grouped.groupBy(*keys, "__version").agg(F.min(SEQ).alias(START_AT), last.alias("__last"))
    return versions.select(
        *keys,
        *[F.col(f"__last.{c}").alias(c) for c in data if c not in keys],
        F.col(START_AT),
        F.col("__last.__next_seq").alias(END_AT),
    ).select(*data, START_AT, END_AT)
