"""``cdc-lakehouse snapshot reconcile``: new complete snapshots -> corrective changes (CONTRACT §5).

Runs as a job step *before* the pipeline update: a pipeline flow cannot read the replica it
builds (a cycle), so the comparison happens here and its result enters the pipeline as landing
files that the ``<source>_snapshot_corrections`` append flow adds to ``silver.<source>_changes``.

Per table and run at most one snapshot is reconciled: the next one must be compared with a
replica that already has the previous corrections applied. Of several new snapshots of a table
the latest (by ``taken_at``) is reconciled and the older ones are recorded as skipped (the
latest contains what they would have corrected); a snapshot taken before one already reconciled
is skipped too. A table whose previous corrections are not applied yet waits.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import datetime

from pyspark.sql import functions as F

from cdc_lakehouse.cdc.apply import SEQ
from cdc_lakehouse.silver import keys as canonical_keys
from cdc_lakehouse.snapshot import compare as cmp
from cdc_lakehouse.snapshot.corrections import change_stream, read_corrections, write_jsonl
from cdc_lakehouse.snapshot.ledger import QUARANTINED, RECONCILED, SKIPPED, Ledger
from cdc_lakehouse.snapshot.manifest import (
    UNKNOWN_SOURCE, InvalidSnapshot, Manifest, SnapshotFolder, SnapshotNotReady, discover, folder_of,
)
from cdc_lakehouse.snapshot.sequence import Sequence, snapshot_sequence, txn_id

WAITING, NOT_ONBOARDED, DRY_RUN = "waiting", "not_onboarded", "dry_run"


@dataclass
class Outcome:
    source: str
    table: str
    snapshot_id: str
    status: str  # reconciled | quarantined | skipped | waiting | not_onboarded | dry_run
    reason: str | None = None
    counts: dict | None = None
    sequence: dict | None = None
    corrections_file: str | None = None
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def reconcile_landing(spark, store, onboarding, landing, silver: str = "silver") -> list[Outcome]:
    """Every onboarded source's new snapshots, one per table."""
    outcomes: list[Outcome] = []
    for source in onboarding.sources:
        ledger = Ledger(landing, source)
        # Auto Loader wants the folder it watches to exist, even before the first snapshot.
        ledger.root.mkdir(parents=True, exist_ok=True)
        by_table: dict[str, list[SnapshotFolder]] = defaultdict(list)
        for folder in discover(landing, source):
            by_table[folder.table].append(folder)
        for table, folders in sorted(by_table.items()):
            flow = onboarding.for_table(source, table)
            outcomes += reconcile_table(spark, store, flow, folders, ledger, silver)
    return outcomes


def reconcile_table(spark, store, flow, folders: list[SnapshotFolder], ledger: Ledger, silver: str) -> list[Outcome]:
    new = [f for f in folders if ledger.status(f.table, f.snapshot_id) is None]
    if flow is None:
        return [Outcome(f.source, f.table, f.snapshot_id, NOT_ONBOARDED, "no enabled flow replicates this table")
                for f in new]
    outcomes, ready = [], []
    for folder in new:
        try:
            ready.append((folder, folder.read_manifest()))
        except SnapshotNotReady as exc:
            outcomes.append(Outcome(folder.source, folder.table, folder.snapshot_id, WAITING, str(exc)))
        except InvalidSnapshot as exc:
            outcomes.append(quarantine(ledger, folder, str(exc)))
    if not ready:
        return outcomes
    previous = latest_reconciled(ledger, flow.qualified_table)
    fresh, stale = split_stale(ready, previous)
    outcomes += [skip(ledger, folder, reason) for folder, reason in stale]
    if not fresh:
        return outcomes
    spec = cmp.TableSpec.from_flow(flow, silver)
    pending = unapplied(spark, store, spec, ledger, previous)
    if pending:
        reason = f"{pending} correction(s) of snapshot {previous['snapshot_id']} are not applied yet: run the pipeline first"
        return outcomes + [Outcome(f.source, f.table, f.snapshot_id, WAITING, reason) for f, _ in fresh]
    order = sorted(fresh, key=lambda fm: (fm[1].taken_at, fm[1].snapshot_id))
    folder, manifest = order[-1]
    outcomes += [skip(ledger, f, f"superseded by the later snapshot {manifest.snapshot_id}") for f, _ in order[:-1]]
    outcomes.append(reconcile_snapshot(spark, store, spec, flow.capture, folder, manifest, ledger, silver))
    return outcomes


def split_stale(ready: list[tuple[SnapshotFolder, Manifest]], previous: dict | None):
    """Snapshots taken before the last reconciled one are stale: it already corrected the
    replica to a later state, and an "as of now" one would be sequenced after it and undo that."""
    if previous is None:
        return ready, []
    last = datetime.fromisoformat(previous["taken_at"])
    reason = f"taken before snapshot {previous['snapshot_id']}, which is already reconciled"
    return [fm for fm in ready if fm[1].taken_at >= last], [(f, reason) for f, m in ready if m.taken_at < last]


def reconcile_snapshot(spark, store, spec: cmp.TableSpec, capture: str | None, folder: SnapshotFolder,
                       manifest: Manifest, ledger: Ledger | None, silver: str, dry_run: bool = False) -> Outcome:
    """Compare one snapshot with the replica and publish its corrections (unless ``dry_run``)."""
    started = time.monotonic()
    try:
        return _reconcile(spark, store, spec, capture, folder, manifest, ledger, silver, dry_run, started)
    finally:
        spark.catalog.clearCache()  # the persisted difference is not needed past this snapshot


def _reconcile(spark, store, spec, capture, folder, manifest, ledger, silver, dry_run, started) -> Outcome:
    outcome = Outcome(folder.source, folder.table, folder.snapshot_id, DRY_RUN if dry_run else RECONCILED)
    try:
        diff, counts, sequence = corrective_changes(spark, store, spec, capture, folder, manifest, silver)
    except InvalidSnapshot as exc:
        if dry_run:
            outcome.status, outcome.reason = QUARANTINED, str(exc)
            return outcome
        return quarantine(ledger, folder, str(exc))
    outcome.counts, outcome.sequence = counts.as_dict(), sequence.as_dict()
    if not dry_run:
        commit_ts = manifest.position.txn_end_ts or manifest.taken_at
        changes = change_stream(diff, spec.source, spec.table, manifest.snapshot_id, sequence, commit_ts)
        target = ledger.corrections_file(folder.table, folder.snapshot_id)
        written = write_jsonl(changes, target)
        expected = sum(counts.ops.values())
        if written != expected:
            raise RuntimeError(f"{target}: wrote {written} corrections, expected {expected}")
        outcome.corrections_file = str(target)
        outcome.seconds = round(time.monotonic() - started, 3)
        ledger.write_status(folder.table, folder.snapshot_id, RECONCILED, taken_at=manifest.taken_at.isoformat(),
                            counts=outcome.counts, sequence=outcome.sequence, changes=written,
                            seconds=outcome.seconds)
    outcome.seconds = round(time.monotonic() - started, 3)
    return outcome


def corrective_changes(spark, store, spec: cmp.TableSpec, capture, folder: SnapshotFolder, manifest: Manifest, silver: str):
    """(diff rows, counts, sequence); ``InvalidSnapshot`` when the snapshot must be quarantined."""
    if sorted(manifest.key) != sorted(spec.source_keys):
        raise InvalidSnapshot(f"manifest key {list(manifest.key)} differs from the replica's key {spec.source_keys}")
    parts = folder.parts()
    if not parts and manifest.row_count:
        raise InvalidSnapshot(f"manifest says {manifest.row_count} rows but there are no part-* files")
    sequence = snapshot_sequence(manifest, capture, store, f"{silver}.{spec.source}_changes")
    counts = cmp.Counts()
    lines = cmp.read_lines(spark, parts)
    if store.exists(spec.replica):
        replica = store.read(spec.replica)
        state = cmp.later_state(store, spec, sequence.position)
        schema = cmp.parse_schema(replica, spec, cmp.first_row_columns(parts))
        counts.snapshot_rows, counts.keyless_rows = cmp.non_object_lines(lines)
        ops = None if counts.keyless_rows else cmp.compare(
            cmp.read_rows(spark, parts, spec, schema), replica, state, spec, sequence.column(), counts)
        counts.replica_rows = store.row_count(spec.replica)
        diff = None if ops is None else cmp.difference_rows(
            lines, schema, replica, ops, spec, sum(counts.ops.values()) <= cmp.BROADCAST_LIMIT
        )
    else:
        diff = cmp.seed_rows(lines, spec, counts)
    check_rows(counts, manifest)
    return diff, counts, sequence


def check_rows(counts: cmp.Counts, manifest: Manifest) -> None:
    if counts.keyless_rows:
        raise InvalidSnapshot(
            f"{counts.keyless_rows} row(s) have no value for key {list(manifest.key)} "
            "(missing, null, not of the replica's type, or the line is not a JSON object)"
        )
    if counts.duplicate_keys:
        raise InvalidSnapshot(
            f"duplicate keys: {counts.duplicate_keys} key(s) occur in more than one row, e.g. "
            f"{counts.duplicate_examples}; a snapshot holds one row per key, and picking one would be a guess"
        )
    if counts.snapshot_rows != manifest.row_count:
        raise InvalidSnapshot(f"manifest says row_count {manifest.row_count}, the part files hold {counts.snapshot_rows} rows")


def quarantine(ledger: Ledger, folder: SnapshotFolder, reason: str) -> Outcome:
    ledger.write_status(folder.table, folder.snapshot_id, QUARANTINED, reason=reason, folder=str(folder.path))
    return Outcome(folder.source, folder.table, folder.snapshot_id, QUARANTINED, reason)


def skip(ledger: Ledger, folder: SnapshotFolder, reason: str) -> Outcome:
    ledger.write_status(folder.table, folder.snapshot_id, SKIPPED, reason=reason, folder=str(folder.path))
    return Outcome(folder.source, folder.table, folder.snapshot_id, SKIPPED, reason)


def latest_reconciled(ledger: Ledger, table: str) -> dict | None:
    done = [r for r in ledger.records(table) if r["status"] == RECONCILED and r.get("taken_at")]
    return max(done, key=lambda r: (r["taken_at"], r["snapshot_id"])) if done else None


def unapplied(spark, store, spec: cmp.TableSpec, ledger: Ledger, previous: dict | None) -> int:
    """How many of the previous snapshot's corrections the replica has not applied yet.

    Judged on the AUTO CDC state (latest applied sequence per key): a key whose state is older
    than its correction is not applied; a newer one is applied or overtaken by a later change.
    A key without state cannot tell (a new key not applied yet, or a tombstone housekeeping
    expired); if no key can tell, the corrections count as applied once they are in the change
    stream, whose replica flows apply them in the same pipeline update.
    """
    if previous is None or not previous.get("changes"):
        return 0
    if state_reached(store, spec, previous):
        return 0
    path = ledger.corrections_file(spec.table, previous["snapshot_id"])
    if not path.exists():
        path = ledger.archive_root / spec.table / path.name
    corrections = read_corrections(spark, path)
    if store.exists(spec.state):
        state = store.read(spec.state)
        # The key's text values as the state holds them: a key's text is no cast of its typed value
        # (a DECIMAL(38,20) 1.5 casts to 1.50000000000000000000, a timestamp loses its "T").
        values = canonical_keys.image_map(F.col("key"))
        typed = corrections.select(
            *[values[s].try_cast(state.schema[k].dataType).alias(k) for k, s in zip(spec.keys, spec.source_keys)],
            F.col("sequence").alias("__c_seq"),
        )
        small = previous["changes"] <= cmp.BROADCAST_LIMIT
        judged = state.join(F.broadcast(typed) if small else typed, list(spec.keys)).agg(
            F.count(F.lit(1)).alias("present"), F.sum(F.when(F.col(SEQ) < F.col("__c_seq"), 1).otherwise(0)).alias("behind"),
        ).first()
        if judged["present"]:
            return int(judged["behind"] or 0)
    changes = f"{spec.source}_changes"
    table = f"{spec.replica.rsplit('.', 1)[0]}.{changes}"
    ingested = store.exists(table) and store.read(table).filter(
        F.col("txn_id") == txn_id(previous["snapshot_id"])).limit(1).count() > 0
    return 0 if ingested else int(previous["changes"])


def state_reached(store, spec: cmp.TableSpec, previous: dict) -> bool:
    """Whether some key's AUTO CDC state is at the previous snapshot's own sequence.

    A snapshot's corrections enter the change stream in one commit and the replica flow applies
    them in one state commit, so one key at that sequence means all are applied. This reads one
    column of the state instead of the corrections file (the seed's holds the whole table). When
    no key is there (later changes overtook them all, or none was applied) the keys decide."""
    recorded = previous.get("sequence")
    if not recorded or not store.exists(spec.state):
        return False
    txn = Sequence.of_snapshot(recorded["position"], previous["snapshot_id"]).txn
    at = (F.col(f"{SEQ}.position") == recorded["position"]) & (F.col(f"{SEQ}.txn") == txn)
    return store.read(spec.state).filter(at).limit(1).count() > 0


def _check_same_table(folder: SnapshotFolder, manifest: Manifest, flow, replica: str) -> None:
    """A snapshot of another table would be judged by its key or columns, which hides the mix-up.
    A folder outside a landing layout (``<source>/snapshot/...``) has no source to compare."""
    source = flow.source if folder.source == UNKNOWN_SOURCE else folder.source
    if (source, manifest.table) != (flow.source, flow.qualified_table):
        raise LookupError(f"the snapshot is of {manifest.table} from source {source}, but {replica} "
                          f"replicates {flow.qualified_table} from source {flow.source}")


def diff_snapshot(spark, store, snapshot_path, replica: str, onboarding=None, silver: str = "silver") -> Outcome:
    """Dry run of one snapshot folder against a replica table: the counts, nothing written.
    The flow whose ``silver_table`` is ``replica`` (if any) gives keys and column filters.
    ``LookupError`` for a folder or a table that is not there (a typo must not read as a seed)."""
    folder = folder_of(snapshot_path)
    if not folder.path.is_dir():
        raise LookupError(f"no snapshot folder at {folder.path}")
    replica = replica if "." in replica else f"{silver}.{replica}"
    flows = onboarding.flows if onboarding is not None else []
    flow = next((f for f in flows if f"{silver}.{f.silver_table}" == replica), None)
    seeds = not store.exists(replica)
    if flow is None and seeds:
        raise LookupError(f"{replica} is neither a table of the lake nor the replica of an onboarded flow")
    try:
        manifest = folder.read_manifest()
    except SnapshotNotReady as exc:
        return Outcome(folder.source, folder.table, folder.snapshot_id, WAITING, str(exc))
    except InvalidSnapshot as exc:
        return Outcome(folder.source, folder.table, folder.snapshot_id, QUARANTINED, str(exc))
    if flow is not None:
        _check_same_table(folder, manifest, flow, replica)
        spec, capture = cmp.TableSpec.from_flow(flow, silver), flow.capture
    else:
        spec = cmp.TableSpec(source=folder.source, table=manifest.table, keys=manifest.key, replica=replica)
        capture = None
    outcome = reconcile_snapshot(spark, store, spec, capture, folder, manifest, None, silver, dry_run=True)
    if seeds and outcome.status == DRY_RUN:
        outcome.reason = f"{replica} does not exist yet: this snapshot would seed it (every row an INSERT)"
    return outcome
