"""Running the project pipeline in reliability tests and comparing whole lakes.

Used by tests/test_reliability*.py and tests/test_property_pipeline*.py (and usable from a
shell): run the project's pipeline files on a landing folder with an onboarding file, capture
the lake as a kill at a commit point would leave it, and compare every table of two lakes.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import functions as F

from cdc_lakehouse.runtime.runner import run_pipeline
from cdc_lakehouse.storage import LakeStore

REPO = Path(__file__).resolve().parents[1]
LAYERS = ("bronze", "silver", "gold")
EVENT_LOG = "pipeline.event_log"
# A version per update, like the event log: a re-run that ends as the reference did has more.
HEALTH_HISTORY = "gold.replication_health_history"

# Columns whose values come from the wall clock of the run that wrote them, not from the data:
# two correct runs differ there. Everything else must be identical.
VOLATILE_COLUMNS = frozenset({
    "_ingested_at",  # bronze: ingestion time
    "__updated_at",  # AUTO CDC state: when the key's state was written
    "measured_at", "lag_seconds", "age_seconds", "oldest_held_age_seconds",  # gold health: now - ...
    "recorded_at",  # snapshot ledger: when computed
})


# The gold files of replicas and audit alone: a pipeline may list only some files, and tests
# that check neither health nor landing views (src/gold/health.py, landing_summary.py) skip
# their five views and the health history: the views were about a sixth of a small update on
# delta-spark (bench/RESULTS.md, 2026-12-07, before the history).
GOLD_WITHOUT_HEALTH = ("bronze", "silver", "gold/replicas.py", "gold/audit.py")


def sources(layers=LAYERS) -> list[str]:
    """The pipeline files of ``layers``: a layer's folder, or one file of it (``gold/audit.py``)."""
    return [str(REPO / "src" / layer) if layer.endswith(".py") else str(REPO / "src" / layer / "**" / "*.py")
            for layer in layers]


def conf(landing: Path, onboarding: Path) -> dict:
    return {"cdc_lakehouse.landing_path": str(landing), "cdc_lakehouse.onboarding_file": str(onboarding)}


def run_project(spark, landing: Path, lake: Path, onboarding: Path, store=None, layers=LAYERS):
    """One pipeline update of the project's pipeline files (bronze, silver, gold)."""
    return run_pipeline(spark, sources(layers), lake, conf(landing, onboarding), store=store)


# -- whole-lake comparison --------------------------------------------------------------------
def table_names(spark, lake: Path, exclude=(EVENT_LOG, HEALTH_HISTORY)) -> list[str]:
    return sorted(t.name for t in LakeStore(spark, lake).list_tables() if t.name not in exclude)


def table_content(spark, lake: Path, name: str, volatile=VOLATILE_COLUMNS) -> tuple[list[str], list[str]]:
    """(schema as ``name type`` strings, rows as canonical JSON sorted), volatile columns left out.
    For the small lakes of tests: the rows are collected."""
    df = LakeStore(spark, lake).read(name)
    kept = [f for f in df.schema.fields if f.name not in volatile]
    schema = [f"{f.name} {f.dataType.simpleString()}" for f in kept]
    if not kept:
        return schema, []
    as_json = F.to_json(F.struct(*[F.col(f"`{f.name}`") for f in kept]))
    rows = sorted(r[0] for r in df.select(as_json).collect())
    return schema, rows


@dataclass
class LakeDiff:
    missing_tables: list[str] = field(default_factory=list)
    extra_tables: list[str] = field(default_factory=list)
    differing: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.missing_tables or self.extra_tables or self.differing)

    def __str__(self) -> str:
        parts = []
        if self.missing_tables:
            parts.append(f"missing tables: {self.missing_tables}")
        if self.extra_tables:
            parts.append(f"unexpected tables: {self.extra_tables}")
        parts += [f"{t}: {why}" for t, why in self.differing.items()]
        return "\n".join(parts) or "identical"


def snapshot_lake(spark, lake: Path, tables: list[str] | None = None, volatile=VOLATILE_COLUMNS) -> dict:
    """Every table's (schema, rows), to compare lakes after the reference lake is gone."""
    return {t: table_content(spark, lake, t, volatile) for t in (tables or table_names(spark, lake))}


def diff_lakes(spark, reference: dict, lake: Path, tables: list[str] | None = None, volatile=VOLATILE_COLUMNS) -> LakeDiff:
    """Compare ``lake`` with a ``snapshot_lake`` of the reference; ``tables`` limits both sides."""
    diff = LakeDiff()
    present = set(table_names(spark, lake))
    names = present & set(tables) if tables is not None else present
    wanted = set(reference) if tables is None else set(tables)
    diff.missing_tables = sorted(wanted - names)
    diff.extra_tables = sorted(names - wanted)
    for name in sorted(wanted & names):
        schema, rows = table_content(spark, lake, name, volatile)
        ref_schema, ref_rows = reference[name]
        if schema != ref_schema:
            diff.differing[name] = f"schema {schema} != reference {ref_schema}"
        elif rows != ref_rows:
            extra = sorted(set(rows) - set(ref_rows))[:3]
            gone = sorted(set(ref_rows) - set(rows))[:3]
            diff.differing[name] = (f"{len(rows)} rows vs {len(ref_rows)} in the reference; "
                                    f"e.g. not in reference: {extra}; missing: {gone}")
    return diff


# -- crash states ------------------------------------------------------------------------------
@dataclass
class CommitPoint:
    index: int  # 1-based, in the order of the run
    stage: str  # before | after
    table: str

    @property
    def label(self) -> str:
        return f"#{self.index} {self.stage} {self.table}"


class KillRecorder:
    """A ``commit_hook`` that lists every commit point of a run and copies the lake, as a kill
    (SIGKILL: nothing after it runs) would leave it, at the points ``keep(point, seen)`` picks."""

    def __init__(self, lake: Path, states: Path, keep):
        self.lake, self.states, self.keep = Path(lake), Path(states), keep
        self.points: list[CommitPoint] = []
        self.saved: dict[int, Path] = {}

    def __call__(self, stage: str, table: str) -> None:
        point = CommitPoint(len(self.points) + 1, stage, table)
        if self.keep(point, self.points):
            dest = self.states / f"kill-{point.index:03d}"
            if self.lake.exists():
                shutil.copytree(self.lake, dest, symlinks=True)
            else:
                dest.mkdir(parents=True)
            self.saved[point.index] = dest
        self.points.append(point)


def sample_points(point: CommitPoint, seen: list[CommitPoint], every: bool = False) -> bool:
    """The deterministic subset: the first commit point of the run, and, for every table, the
    point just after its first commit (its data is in, what follows it is not); the last point
    of the run is added by the caller once it is known (it is the event log's last commit)."""
    if every or point.index == 1:
        return True
    return point.stage == "after" and not any(p.table == point.table and p.stage == "after" for p in seen)


def dump(obj) -> str:
    return json.dumps(obj, indent=2, default=str)
