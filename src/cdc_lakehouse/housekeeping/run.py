"""``cdc-lakehouse housekeeping``: the job step after each pipeline update.

Steps, in order (each reported, each can be left out with ``--skip``):

1. ``compaction``  latest change per row of each source's change stream -> ``<changes>_compacted``
2. ``tombstones``  expire AUTO CDC tombstones (and compacted deletes) older than the threshold
3. ``archive``     move landing files every reading flow has committed to ``<source>/_archive/``
4. ``acks``        ``<landing>/<source>/_ack.json`` for shadow sources (capture purges by it)
5. ``optimize``    OPTIMIZE + VACUUM every Delta table (last, so it also tidies what 1-2 wrote)

With ``--catalog`` (Databricks) steps 2, 3 and 5 belong to the platform: pipelines expire their
own tombstones and run OPTIMIZE/VACUUM on their tables, and Auto Loader's checkpoints cannot
be read to archive safely (docs/snapshots.md); they are reported as skipped with the reason.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from cdc_lakehouse.housekeeping import ack, archive, compaction, maintenance, tombstones
from cdc_lakehouse.housekeeping.checkpoints import load_progress, streamed_tables

STEPS = ("compaction", "tombstones", "archive", "acks", "optimize")
ON_DATABRICKS = {
    "tombstones": "pipelines expire AUTO CDC tombstones themselves (pipelines.cdc.tombstoneGCThresholdInSeconds)",
    "archive": "Auto Loader checkpoints are not readable here: see docs/snapshots.md (cloudFiles.cleanSource)",
    "optimize": "Databricks runs OPTIMIZE/VACUUM on pipeline tables (pipeline maintenance)",
}


@dataclass(frozen=True)
class Options:
    retention_hours: float = maintenance.DELTA_DEFAULT_RETENTION_HOURS
    tombstone_hours: float | None = None  # default: retention_hours
    archive_after_hours: float | None = None  # default: retention_hours
    allow_short_retention: bool = False
    skip: frozenset[str] = frozenset()
    bronze: str = "bronze"
    silver: str = "silver"


def housekeeping(spark, store, onboarding, landing: Path, lake: Path | None, options: Options) -> dict:
    """Run the steps; ``lake`` is None for Unity Catalog (``--catalog``)."""
    maintenance.check_retention(options.retention_hours, options.allow_short_retention)  # fail before any work
    report: dict = {}
    for step in STEPS:
        started = time.monotonic()
        if step in options.skip:
            report[step] = {"skipped": "--skip"}
            continue
        if lake is None and step in ON_DATABRICKS:
            report[step] = {"skipped": ON_DATABRICKS[step]}
            continue
        report[step] = {"result": STEP_FUNCTIONS[step](spark, store, onboarding, Path(landing), lake, options),
                        "seconds": round(time.monotonic() - started, 3)}
    return report


def _compaction(spark, store, onboarding, landing, lake, options):
    return [compaction.compact(store, f"{options.silver}.{source}_changes") for source in onboarding.sources]


def _tombstones(spark, store, onboarding, landing, lake, options):
    hours = options.retention_hours if options.tombstone_hours is None else options.tombstone_hours
    return tombstones.expire(store, hours)


def _archive(spark, store, onboarding, landing, lake, options):
    hours = options.retention_hours if options.archive_after_hours is None else options.archive_after_hours
    return archive.archive(landing, onboarding, load_progress(lake, store), hours)


def _acks(spark, store, onboarding, landing, lake, options):
    written = []
    for source in sorted({f.source for f in onboarding.flows if f.capture == "shadow"}):
        found = ack.shadow_ack(store, source, options.bronze, options.silver)
        if found is not None:
            written.append({**found, "file": str(ack.write_ack(landing, found))})
    return written


def _optimize(spark, store, onboarding, landing, lake, options):
    streamed = streamed_tables(load_progress(lake, store))
    return maintenance.optimize_and_vacuum(store, options.retention_hours, options.allow_short_retention, streamed)


STEP_FUNCTIONS = {"compaction": _compaction, "tombstones": _tombstones, "archive": _archive,
                  "acks": _acks, "optimize": _optimize}
