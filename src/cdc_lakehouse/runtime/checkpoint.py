"""Per-flow streaming progress: a write-ahead log of planned batches, as Spark's offset log.

Batch N's input (source offsets) is written here *before* the batch runs; the batch's output
commit carries ``(flow, N)`` as a Delta app transaction. On restart a planned batch whose
output commit is missing is re-run with exactly the same input, so nothing is lost or doubled.

Once every sink of batch N holds its output, N is recorded as committed (``COMMITTED``, as
Spark's commit log). A sink the batch had nothing to write to is then left as it was, without a
commit of its own: its last app transaction may be older than N. A run stopped before the record
re-runs N, which finds its writes done (app transactions) or, where it wrote nothing, nothing
to write again: the same input gives the same empty output.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path


REFRESH = "refresh.json"
KEEPS_STATE = "keeps_state"  # the flow keeps state between batches (runtime/flow_state.py)
COMMITTED = "committed.json"  # the last batch whose output every sink holds
CONFIRMED = "confirmed.json"  # a definition under which the last plan's sources had nothing new
SEEN = "files_seen.json"  # the files planned by a flow's batches up to one, per file source
COMPACT_EVERY = 10


class ConcurrentPlan(RuntimeError):
    """Another update planned the same batch of a flow: two updates ran on one lake at once."""

    def __init__(self, flow: str, batch: int):
        super().__init__(f"another update planned batch {batch} of flow {flow} at the same time: two updates "
                         "ran on the lake at once; this one stops before writing anything (run it again "
                         "once the other has ended)")


class FlowCheckpoint:
    def __init__(self, root: Path, flow: str):
        self.dir = root / flow.replace("/", "_")
        self.offsets_dir = self.dir / "offsets"

    def batches(self) -> list[int]:
        if not self.offsets_dir.exists():
            return []
        return sorted(int(p.stem) for p in self.offsets_dir.glob("*.json"))

    def last_batch(self) -> int | None:
        batches = self.batches()
        return batches[-1] if batches else None

    def offsets(self, batch: int | None) -> dict:
        if batch is None:
            return {}
        return json.loads((self.offsets_dir / f"{batch}.json").read_text())

    def write_offsets(self, batch: int, offsets: dict, new: bool = False) -> None:
        """Atomic: a crash leaves either no plan or the whole plan. A ``new`` plan is only
        written where there is none: Spark's offset log does the same, so that of two updates
        racing on one lake (past its lock) only one plans a batch, and the other stops."""
        try:
            write_json(self.offsets_dir / f"{batch}.json", offsets, exclusive=new)
        except FileExistsError:
            raise ConcurrentPlan(self.dir.name, batch) from None

    def committed_batch(self) -> int:
        """The last batch recorded as committed by ``write_committed``; -1 when none is."""
        return int(read_json(self.dir / COMMITTED).get("batch", -1))

    def write_committed(self, batch: int) -> None:
        write_json(self.dir / COMMITTED, {"batch": batch})

    def refresh(self) -> dict:
        """What the last completed refresh of a materialized view recorded (unchanged_views.py)."""
        return read_json(self.dir / REFRESH)

    def write_refresh(self, record: dict) -> None:
        write_json(self.dir / REFRESH, record)

    def keeps_state(self) -> bool:
        return (self.dir / KEEPS_STATE).exists()

    def mark_keeps_state(self) -> None:
        if not self.keeps_state():
            self.dir.mkdir(parents=True, exist_ok=True)
            (self.dir / KEEPS_STATE).touch()

    def confirmed(self) -> dict:
        """The definition a later update ran the flow under, finding nothing new after batch
        ``after_batch``: its next update may skip the flow as if that batch had been planned
        under it."""
        return read_json(self.dir / CONFIRMED)

    def write_confirmed(self, after_batch: int | None, definition: str, sources: dict) -> None:
        record = {"after_batch": after_batch, "definition": definition, "sources": sources}
        write_json(self.dir / CONFIRMED, record)

    def files_seen(self, before_batch: int) -> dict[str, dict[str, list | None]]:
        """Every file each file source has planned in batches before ``before_batch``, with its
        identity when last read (runtime/file_identity.py; None if not recorded): the compacted
        list plus the plans after it, so the cost follows the batches since the last
        compaction, not the flow's age (as Spark's file source log). Compacted again every
        ``COMPACT_EVERY`` batches."""
        compact = read_json(self.dir / SEEN)
        through = compact.get("through_batch", -1)
        if through >= before_batch:  # never asked by a running flow: it plans after the last batch
            compact, through = {}, -1
        seen = {source: _identities(files) for source, files in compact.get("sources", {}).items()}
        later = [b for b in self.batches() if through < b < before_batch]
        for batch in later:
            for source, offset in self.offsets(batch).items():
                if isinstance(offset, dict) and "files" in offset:
                    known = offset.get("identities", {})
                    seen.setdefault(source, {}).update({f: known.get(f) for f in offset["files"]})
        if len(later) >= COMPACT_EVERY:
            compacted = {source: dict(sorted(files.items())) for source, files in seen.items()}
            write_json(self.dir / SEEN, {"through_batch": before_batch - 1, "sources": compacted})
        return seen

    def reset(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _identities(files: list | dict) -> dict:
    """A compacted source: path -> identity (a list of paths before identities were kept)."""
    return dict(files) if isinstance(files, dict) else dict.fromkeys(files)


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def write_json(path: Path, data: dict, exclusive: bool = False) -> None:
    """Written whole or not at all; ``exclusive``: only where no file is (else FileExistsError)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"  # one per writer
    tmp.write_text(json.dumps(data, sort_keys=True))
    try:
        if exclusive:
            os.link(tmp, path)  # atomic, and fails where a file exists (os.replace would replace it)
        else:
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
