"""Shadow rows exported but not purged yet, and the acknowledgement that lets the export purge them.

Shadow ids are taken at INSERT, not at COMMIT, so no id high-water mark can say "exported so
far" (a transaction in flight may hold lower ids than rows already exported). The ledger
therefore names exactly what was exported: one record per batch,
``<state>/shadow-exported/batch-<n>.json``, written once and shrunk as rows are purged::

    {"batch": 7, "txns": {"<txn_id>": {"end_ts": "...Z" | null,   # null: no transaction row yet
                                        "row": true,               # a transaction-table row (PostgreSQL)
                                        "changes": {"<shadow table>": [[first id, last id], ...]}}}}

Reads skip what the ledger names; a purge deletes rows of covered transactions and only then
forgets them, so every step may be repeated after a crash.

The acknowledgement is ``<landing>/<source>/_ack.json``, written by housekeeping
(``cdc_lakehouse.housekeeping.ack``, docs/snapshots.md): every landed transaction with
``end_ts <= watermark_end_ts`` is applied.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

from cdc_lakehouse.contract.landing import ack_path
from cdc_lakehouse.contract.publication import fsync_dir, remove_orphans

from . import state as state_file
from .shadow_readers import Batch, Ranges

LEDGER_FOLDER = "shadow-exported"


def read_ack(landing, source: str) -> datetime | None:
    """The acknowledged ``watermark_end_ts``; None while housekeeping has written none."""
    path = ack_path(landing, source)
    try:
        ack = json.loads(path.read_text(encoding="utf-8"))  # replaced atomically: whole or absent
    except FileNotFoundError:
        return None
    if not isinstance(ack, dict) or ack.get("source") != source or ack.get("capture") != "shadow" \
            or not isinstance(ack.get("watermark_end_ts"), str):
        raise ValueError(f"{path} is not a shadow acknowledgement of source {source!r}")
    return parse_ts(ack["watermark_end_ts"])


def parse_ts(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def to_ranges(ids) -> list[list[int]]:
    """Ids as sorted [first, last] runs of consecutive ids (an exact set: gaps stay gaps)."""
    return _merge([[i, i] for i in ids])


def _ids(ranges) -> list[int]:
    return [i for lo, hi in ranges for i in range(lo, hi + 1)]


def _entry() -> dict:
    return {"end_ts": None, "row": False, "changes": {}}


def record_of(batch: Batch, number: int) -> dict:
    """The ledger record of one exported batch."""
    txns: dict[str, dict] = defaultdict(_entry)
    for row in batch.txns:
        entry = txns[row["txn_id"]]
        entry["end_ts"] = max(filter(None, (entry["end_ts"], row["end_ts"])), key=parse_ts)
    for txn in batch.txn_ids:
        txns[txn]["row"] = True
    for shadow, ids in batch.change_ids.items():
        by_txn = defaultdict(list)
        for i, txn in zip(ids, batch.change_txns[shadow]):
            by_txn[txn].append(i)
        for txn, txn_ids in by_txn.items():
            txns[txn]["changes"][shadow] = to_ranges(txn_ids)
    return {"batch": number, "txns": dict(txns)}


class Ledger:
    def __init__(self, folder: Path):
        self.folder = folder
        remove_orphans(folder)  # a record save that a crash cut short
        self.records = {p: json.loads(p.read_text(encoding="utf-8"))
                        for p in sorted(folder.glob("batch-*.json"))} if folder.is_dir() else {}

    def add(self, record: dict) -> None:
        """Write a batch's record (again: the same content, when a journaled batch is finished)."""
        path = self.folder / f"batch-{record['batch']:06d}.json"
        self.folder.mkdir(parents=True, exist_ok=True)
        state_file.save(path, record)
        self.records[path] = record

    def skip_txns(self) -> list[str]:
        return sorted({t for r in self.records.values() for t, e in r["txns"].items() if e["row"]})

    def skip_ids(self) -> Ranges:
        ids = defaultdict(list)
        for r in self.records.values():
            for entry in r["txns"].values():
                for shadow, ranges in entry["changes"].items():
                    ids[shadow].extend(ranges)
        return {shadow: _merge(ranges) for shadow, ranges in ids.items()}

    def txns(self) -> set[str]:
        return {t for r in self.records.values() for t in r["txns"]}

    def covered(self, watermark: datetime) -> set[str]:
        """Transactions whose end_ts is known and at or before the watermark. A transaction
        recorded again (split over batches) counts with its latest end_ts."""
        ends = defaultdict(list)
        for r in self.records.values():
            for txn, entry in r["txns"].items():
                if entry["end_ts"]:
                    ends[txn].append(parse_ts(entry["end_ts"]))
        return {txn for txn, times in ends.items() if max(times) <= watermark}

    def rows_of(self, txns: set[str]) -> tuple[list[str], dict[str, list[int]]]:
        """Transaction-table ids and change-row ids (per shadow table) of ``txns``."""
        txn_rows, change_ids = set(), defaultdict(list)
        for r in self.records.values():
            for txn in txns & r["txns"].keys():
                entry = r["txns"][txn]
                if entry["row"]:
                    txn_rows.add(txn)
                for shadow, ranges in entry["changes"].items():
                    change_ids[shadow].extend(_ids(ranges))
        return sorted(txn_rows), {shadow: sorted(ids) for shadow, ids in change_ids.items()}

    def forget(self, txns: set[str]) -> None:
        """Drop purged transactions; a record left empty is deleted."""
        for path, record in list(self.records.items()):
            if not txns & record["txns"].keys():
                continue
            record["txns"] = {t: e for t, e in record["txns"].items() if t not in txns}
            if record["txns"]:
                state_file.save(path, record)
            else:
                path.unlink(missing_ok=True)
                fsync_dir(path.parent)
                del self.records[path]


def _merge(ranges: list[list[int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out
