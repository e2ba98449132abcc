"""What the local runtime's streaming checkpoints say about consumed input.

``<lake>/_checkpoints/<flow>/offsets/<batch>.json`` holds each planned batch's input: for file
sources ``{"files:<folder>": {"files": [...]}}``, for table sources ``{"table:<name>": {...}}``.
A batch's output commit carries the Delta app transaction ``cdc-lakehouse/<flow>`` = batch id,
so a planned batch is committed once some table records that version or a later one, or the
checkpoint records it as committed (a batch that had nothing to write commits no table).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_lakehouse.runtime.checkpoint import FlowCheckpoint

if TYPE_CHECKING:  # for the annotations only: the store's module loads Spark and Delta
    from cdc_lakehouse.storage import TableStore

APP_PREFIX = "cdc-lakehouse/"


@dataclass
class FlowProgress:
    flow: str
    batches: dict[int, dict] = field(default_factory=dict)  # batch id -> offsets
    committed: int = -1  # highest committed batch id

    def consumed(self, source_id: str) -> set[str]:
        """Files of ``source_id`` read by committed batches."""
        files: set[str] = set()
        for batch, offsets in self.batches.items():
            if batch <= self.committed:
                files.update(offsets.get(source_id, {}).get("files", []))
        return files

    def sources(self) -> set[str]:
        return {s for offsets in self.batches.values() for s in offsets}


def load_progress(lake: Path, store: TableStore) -> list[FlowProgress]:
    root = Path(lake) / "_checkpoints"
    if not root.is_dir():
        return []
    flows = []
    for folder in sorted(p for p in root.iterdir() if (p / "offsets").is_dir()):
        batches = {int(f.stem): json.loads(f.read_text()) for f in (folder / "offsets").glob("*.json")}
        flows.append(FlowProgress(folder.name, batches, FlowCheckpoint(root, folder.name).committed_batch()))
    _committed_batches(store, flows)
    return flows


def _committed_batches(store: TableStore, flows: list[FlowProgress]) -> None:
    """The committed batch of each flow: the highest app-transaction version any table has for it
    (its target; for AUTO CDC also its state table, which commits last), or the one its
    checkpoint records."""
    tables = [info.name for info in store.list_tables()]
    for progress in flows:
        versions = [store.committed_version(t, APP_PREFIX + progress.flow) for t in tables]
        progress.committed = max([progress.committed, *(v for v in versions if v is not None)])


def streamed_tables(flows: list[FlowProgress]) -> dict[str, list[str]]:
    """Table -> the flows that read it as a stream."""
    readers: dict[str, list[str]] = defaultdict(list)
    for progress in flows:
        for source in progress.sources():
            if source.startswith("table:"):
                readers[source.removeprefix("table:")].append(progress.flow)
    return dict(readers)
