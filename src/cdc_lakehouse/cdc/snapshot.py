"""AUTO CDC from snapshots: each new snapshot becomes the changes that turn the target into it.

Key only in the target -> delete; only in the snapshot -> insert; in both with another
non-key value -> update; identical -> nothing. The changes are then applied like any other
AUTO CDC batch, sequenced by the snapshot version.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.cdc import apply as cdc_apply

VERSION = "__snapshot_version"
IS_DELETE = "__snapshot_delete"
OP = "__snapshot_op"


def snapshot_changes(snapshot: DataFrame, current: DataFrame | None, keys: list[str], version) -> DataFrame:
    """The corrective changes, with ``__snapshot_version`` and ``__snapshot_delete``."""
    version = _version_literal(version)
    snap = snapshot.withColumn(VERSION, version).withColumn(IS_DELETE, F.lit(False))
    if current is None:
        return snap
    joined, in_snap, in_target, differs = _compare(snapshot, current, keys)
    changed = joined.filter(~in_target | ~in_snap | differs)
    return changed.select(
        *[F.when(in_snap, F.col(f"s.{c}")).otherwise(F.col(f"t.{c}")).alias(c) for c in snapshot.columns],
        version.alias(VERSION),
        (~in_snap).alias(IS_DELETE),
    )


def diff_ops(snapshot: DataFrame, current: DataFrame, keys: list[str], carried: tuple[str, ...] = (),
             kept: Column | None = None) -> DataFrame:
    """The key columns and ``__snapshot_op`` (INSERT, UPDATE or DELETE) of every key whose row
    differs between ``snapshot`` and ``current``; identical keys are left out.

    Only the columns of ``snapshot`` are compared, so callers that pass narrow frames (keys plus a
    digest of the values) shuffle a few bytes per row instead of whole rows (snapshot reconcile).
    ``carried`` snapshot columns are not compared but passed through, and rows for which
    ``kept`` (on the snapshot's side, ``s.<column>``) holds are kept even when identical.
    """
    joined, in_snap, in_target, differs = _compare(snapshot, current, keys, carried)
    op = F.when(~in_target, F.lit("INSERT")).when(~in_snap, F.lit("DELETE")).otherwise(F.lit("UPDATE"))
    wanted = ~in_target | ~in_snap | differs
    if kept is not None:
        wanted = wanted | F.coalesce(kept, F.lit(False))
    return joined.filter(wanted).select(
        *[F.coalesce(F.col(f"s.{k}"), F.col(f"t.{k}")).alias(k) for k in keys], op.alias(OP),
        *[F.col(f"s.{c}").alias(c) for c in carried],
    )


def _compare(snapshot: DataFrame, current: DataFrame, keys: list[str], carried: tuple[str, ...] = ()):
    """Full outer join by key; presence on each side and whether a non-key value differs."""
    compared = [c for c in snapshot.columns if c not in carried]
    values = [c for c in compared if c not in keys]
    s, t = snapshot.alias("s"), current.select(*compared).alias("t")
    joined = s.join(t, [F.col(f"s.{k}") == F.col(f"t.{k}") for k in keys], "full_outer")
    in_snap = F.col(f"s.{keys[0]}").isNotNull()
    in_target = F.col(f"t.{keys[0]}").isNotNull()
    differs = F.lit(False)
    for c in values:
        differs = differs | ~F.col(f"s.{c}").eqNullSafe(F.col(f"t.{c}"))
    return joined, in_snap, in_target, differs


def _version_literal(version):
    # Python ints would become INT columns; snapshot versions are BIGINT like Delta versions.
    literal = F.lit(version)
    return literal.cast("long") if isinstance(version, int) else literal


def current_rows(store, target: str, scd_type: int) -> DataFrame | None:
    if not store.exists(target):
        return None
    table = store.read(target)
    if scd_type == 2:
        table = table.filter(F.col(cdc_apply.END_AT).isNull()).drop(cdc_apply.START_AT, cdc_apply.END_AT)
    return table


def _spec(params: dict) -> cdc_apply.CdcSpec:
    return cdc_apply.CdcSpec(
        keys=list(params["keys"]),
        sequence_by=VERSION,
        scd_type=int(params.get("stored_as_scd_type", 1)),
        apply_as_deletes=IS_DELETE,
        except_column_list=[VERSION, IS_DELETE],
        track_history_column_list=params.get("track_history_column_list"),
        track_history_except_column_list=params.get("track_history_except_column_list"),
    )


def apply_snapshots(runner, flow, target, batch, table_opts: dict) -> int:
    """A table source gives one snapshot per update; a function source is called with the
    latest version applied until it returns None, as ``next_snapshot_and_version`` is."""
    spec = _spec(flow.cdc)
    source = flow.cdc["source"]
    written = 0
    for snapshot, version in _snapshots(source, batch):
        current = current_rows(runner.store, target.name, spec.scd_type)
        changes = snapshot_changes(snapshot, current, spec.keys, version)
        written += cdc_apply.apply_changes(runner.store, target.name, changes, spec, batch, table_opts)
        batch.record_snapshot(version)
        batch.id += 1
    return written


def _snapshots(source, batch):
    if isinstance(source, str):
        # Read as the flow's read, so the table's version is recorded with the snapshot and an
        # update in which it did not change skips the flow (FlowBatch.quiet).
        yield batch.read(source), batch.id + 1
        return
    latest = batch.applied_snapshot()
    while True:
        result = source(latest)
        if result is None:
            return
        snapshot, latest = result
        yield snapshot, latest
