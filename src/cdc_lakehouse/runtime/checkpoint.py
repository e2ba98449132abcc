"""Per-flow streaming progress: a write-ahead log of planned batches, as Spark's offset log.

Batch N's input (source offsets) is written here *before* the batch runs; the batch's output
commit carries ``(flow, N)`` as a Delta app transaction. On restart a planned batch whose
output commit is missing is re-run with exactly the same input, so nothing is lost or doubled.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path


REFRESH = "refresh.json"


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

    def write_offsets(self, batch: int, offsets: dict) -> None:
        """Atomic: a crash leaves either no plan or the whole plan."""
        _write_json(self.offsets_dir / f"{batch}.json", offsets)

    def refresh(self) -> dict:
        """What the last completed refresh of a materialized view recorded (unchanged_views.py)."""
        path = self.dir / REFRESH
        return json.loads(path.read_text()) if path.exists() else {}

    def write_refresh(self, record: dict) -> None:
        _write_json(self.dir / REFRESH, record)

    def files_seen(self, source_id: str, before_batch: int) -> set[str]:
        """Every file a file source has planned in batches before ``before_batch``."""
        seen: set[str] = set()
        for batch in self.batches():
            if batch < before_batch:
                seen.update(self.offsets(batch).get(source_id, {}).get("files", []))
        return seen

    def reset(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp"
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)
