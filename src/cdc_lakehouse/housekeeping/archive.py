"""Archiving landing files once every flow that reads them has committed them.

A landing file moves to ``<landing>/<source>/_archive/<same relative path>`` when

* every pipeline input it belongs to (a bronze landing kind, the snapshot corrections) has been
  read by at least one flow, and every flow reading that input has the file in a *committed*
  batch of its checkpoint (a planned but uncommitted batch is re-run with the same files after a
  crash, so its files must stay);
* a snapshot file's snapshot has been handled by reconcile (reconciled, quarantined or skipped):
  reconcile reads snapshots from the landing folder;
* it is older than the archive age (``--archive-after-hours``).

Files no pipeline input covers are left where they are. Restoring is a move back
(``_archive/<path>`` -> ``<path>``); a full refresh reads only what is in the landing folders.
Local only: it reads the local runtime's checkpoints (on Databricks see docs/snapshots.md).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import time
from dataclasses import dataclass
from pathlib import Path

from cdc_lakehouse.bronze.kinds import landing_kinds
from cdc_lakehouse.contract.landing import ACK_FILE, SNAPSHOT
from cdc_lakehouse.snapshot.ledger import ARCHIVE, CORRECTIONS, Ledger

CORRECTIONS_FILTER = "*.jsonl"


@dataclass(frozen=True)
class Input:
    """One file input of the pipeline: a folder (or glob) and the file names it takes."""

    source_id: str  # "files:<abs path>", as the checkpoints name it
    roots: tuple[str, ...]
    name_filter: str | None

    def takes(self, path: str) -> bool:
        name = os.path.basename(path)
        wanted = fnmatch.fnmatch(name, self.name_filter) if self.name_filter else not name.startswith(("_", "."))
        return wanted and any(path.startswith(root + os.sep) for root in self.roots)


def pipeline_inputs(landing: Path, onboarding) -> list[Input]:
    """The bronze landing kinds of each source and its snapshot corrections."""
    base = os.path.realpath(landing)
    specs = [(source, kind.folder, kind.name_filter) for source, kind in landing_kinds(onboarding)]
    specs += [(source, CORRECTIONS, CORRECTIONS_FILTER) for source in onboarding.sources]
    inputs = []
    for source, folder, name_filter in specs:
        pattern = os.path.join(base, source, folder)
        roots = tuple(sorted(glob.glob(pattern))) if glob.has_magic(pattern) else (pattern,)
        inputs.append(Input(f"files:{pattern}", roots, name_filter))
    return inputs


def archive(landing: Path, onboarding, progress, older_than_hours: float, now: float | None = None) -> dict:
    """Move every archivable landing file; returns counts and the files kept with why."""
    now = time.time() if now is None else now
    inputs = pipeline_inputs(landing, onboarding)
    readers = _readers(progress, inputs)
    moved, kept = [], {}
    for source in onboarding.sources:
        root = Path(os.path.realpath(landing)) / source
        ledger = Ledger(landing, source)
        for path in _landing_files(root):
            reason = _why_kept(str(path), inputs, readers, ledger, root)
            if reason is None and now - path.stat().st_mtime < older_than_hours * 3600:
                reason = "younger than the archive age"
            if reason is None:
                moved.append(str(_move(path, root)))
            else:
                kept[reason] = kept.get(reason, 0) + 1
    return {"archived": len(moved), "kept": kept, "files": moved}


def _readers(progress, inputs: list[Input]) -> dict[Input, list[set[str]]]:
    """Input -> per flow reading it, the files its committed batches consumed.

    Checkpoints name a file source by its folder only, and two inputs may share a folder with
    different name filters (snapshot manifests and parts): a flow belongs to the inputs whose
    filter takes every file it ever planned. Paths are compared as real paths, since the
    pipeline and this command may name the landing folder differently.
    """
    by_input: dict[Input, list[set[str]]] = {}
    for flow in progress:
        for source_id in flow.sources():
            if not source_id.startswith("files:"):
                continue
            folder = os.path.realpath(source_id.removeprefix("files:"))
            planned = {os.path.realpath(f) for b in flow.batches.values() for f in b.get(source_id, {}).get("files", [])}
            consumed = {os.path.realpath(f) for f in flow.consumed(source_id)}
            for item in inputs:
                if item.source_id == f"files:{folder}" and all(item.takes(f) for f in planned):
                    by_input.setdefault(item, []).append(consumed)
    return by_input


def _landing_files(root: Path):
    """Data files under a source folder: not the archive, not hidden files, not status files."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not (Path(dirpath) == root and d == ARCHIVE))
        for name in sorted(filenames):
            if not name.startswith(".") and not name.endswith((".status.json", ACK_FILE)):
                yield Path(dirpath) / name


def _why_kept(path: str, inputs: list[Input], readers: dict, ledger: Ledger, root: Path) -> str | None:
    covering = [i for i in inputs if i.takes(path)]
    if not covering:
        return "not a pipeline input"
    for item in covering:
        flows = readers.get(item, [])
        if not flows:
            return "no flow has read its input yet"
        if any(path not in consumed for consumed in flows):
            return "not committed by every flow reading it"
    parts = Path(path).relative_to(root).parts
    if parts[0] == SNAPSHOT and len(parts) >= 4 and ledger.status(parts[1], parts[2]) is None:
        return "snapshot not reconciled yet"
    return None


def _move(path: Path, root: Path) -> Path:
    target = root / ARCHIVE / path.relative_to(root)
    target.parent.mkdir(parents=True, exist_ok=True)
    n = 1
    while target.exists():  # a re-delivered name archived twice keeps both copies
        target = target.with_name(f"{path.name}.{n}")
        n += 1
    os.replace(path, target)
    return target
