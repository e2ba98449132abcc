"""Snapshot folders and their manifests (CONTRACT §2.5).

``<landing>/<source>/snapshot/<schema>.<table>/<snapshot_id>/_manifest.json`` plus ``part-*``
files of full rows. A folder is read only once its manifest says ``complete: true``; until then
it is *waiting* (not an error: capture may still be writing). A manifest that is readable but
wrong (fields missing, a position that is no position, a folder it does not match) makes the
snapshot *invalid*, which reconcile quarantines with the reason.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from cdc_lakehouse.bronze import binlog_position
from cdc_lakehouse.contract.landing import MANIFEST, SNAPSHOT

PART_GLOB = "part-*"
_ISO_WITH_ZONE = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$")
_FILE_NUMBER = re.compile(r"(\d+)$")


class SnapshotNotReady(Exception):
    """No complete manifest yet: the snapshot is not read (CONTRACT §2.5)."""


class InvalidSnapshot(Exception):
    """A complete snapshot that cannot be reconciled as delivered; quarantined with this reason."""


@dataclass(frozen=True)
class Position:
    """Which committed changes the snapshot already contains: a binlog position, a shadow commit
    time, or None ("as of now")."""

    file: str | None = None
    pos: int | None = None
    epoch: int = 0  # binlog: the capture's count of position restarts (docs/binlog-epochs.md)
    txn_end_ts: datetime | None = None

    @property
    def kind(self) -> str:
        if self.file is not None:
            return "binlog"
        return "shadow" if self.txn_end_ts is not None else "now"

    def sequence_position(self) -> int | None:
        """The change-stream ``sequence.position`` of the change committed at this position:
        the binlog LSN (bronze/binlog_position.py, as silver's ``log_position``) or the commit
        time in unix microseconds (as shadow sequences); None for "now"."""
        if self.file is not None:
            return binlog_position.lsn(self.epoch, int(_FILE_NUMBER.search(self.file).group(1)), self.pos)
        if self.txn_end_ts is not None:
            return _unix_micros(self.txn_end_ts)
        return None


@dataclass(frozen=True)
class Manifest:
    snapshot_id: str
    table: str
    key: tuple[str, ...]
    taken_at: datetime
    position: Position
    row_count: int


@dataclass(frozen=True)
class SnapshotFolder:
    source: str
    table: str  # "<schema>.<table>", from the folder name
    snapshot_id: str  # from the folder name
    path: Path

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def parts(self) -> list[Path]:
        return sorted(p for p in self.path.glob(PART_GLOB) if p.is_file())

    def read_manifest(self) -> Manifest:
        """The manifest, once complete; ``SnapshotNotReady`` before, ``InvalidSnapshot`` if wrong."""
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise SnapshotNotReady("no _manifest.json yet") from None
        except (ValueError, UnicodeError):
            # Manifests are small and written last; an unreadable one is most likely still
            # being copied, so it waits rather than being quarantined on a partial upload.
            raise SnapshotNotReady("_manifest.json is not readable JSON (yet)") from None
        if not isinstance(data, dict):
            raise InvalidSnapshot("_manifest.json is not a JSON object")
        if data.get("complete") is not True:
            raise SnapshotNotReady("manifest is not complete yet")
        return parse_manifest(data, self)


def discover(landing: str | Path, source: str) -> list[SnapshotFolder]:
    """Every snapshot folder of a source, in a stable order (table, snapshot id)."""
    root = Path(landing) / source / SNAPSHOT
    if not root.is_dir():
        return []
    found = []
    for table_dir in sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith((".", "_"))):
        for snap_dir in sorted(d for d in table_dir.iterdir() if d.is_dir() and not d.name.startswith((".", "_"))):
            found.append(SnapshotFolder(source, table_dir.name, snap_dir.name, snap_dir))
    return found


UNKNOWN_SOURCE = "?"  # of a snapshot folder outside a landing layout (``<source>/snapshot/...``)


def folder_of(path: str | Path) -> SnapshotFolder:
    """A snapshot folder given by path (``.../<source>/snapshot/<schema>.<table>/<id>``)."""
    path = Path(path).resolve()
    if path.name == MANIFEST:
        path = path.parent
    source = path.parent.parent.parent.name if path.parent.parent.name == SNAPSHOT else UNKNOWN_SOURCE
    return SnapshotFolder(source, path.parent.name, path.name, path)


def parse_manifest(data: dict, folder: SnapshotFolder) -> Manifest:
    problems = []
    snapshot_id, table = data.get("snapshot_id"), data.get("table")
    if snapshot_id != folder.snapshot_id or table != folder.table:
        problems.append(
            f"manifest names {table}/{snapshot_id} but lies in {folder.table}/{folder.snapshot_id}"
        )
    key = data.get("key")
    if not (isinstance(key, list) and key and all(isinstance(k, str) and k for k in key)):
        problems.append("key must be a non-empty list of column names")
    taken_at = _timestamp(data.get("taken_at"), "taken_at", problems)
    position = _position(data.get("position"), problems)
    row_count = data.get("row_count")
    if row_count is None:
        problems.append("row_count is missing (the number of rows in the part files)")
    elif not (isinstance(row_count, int) and not isinstance(row_count, bool) and row_count >= 0):
        problems.append("row_count must be a whole number >= 0")
    if problems:
        raise InvalidSnapshot("invalid manifest: " + "; ".join(problems))
    return Manifest(snapshot_id, table, tuple(key), taken_at, position, row_count)


def _position(value, problems: list[str]) -> Position:
    if value is None:
        return Position()
    if not isinstance(value, dict):
        problems.append("position must be {file, pos[, epoch]}, {txn_end_ts} or null")
        return Position()
    if set(value) in ({"file", "pos"}, {"file", "pos", "epoch"}):
        return _binlog_position(value["file"], value["pos"], value.get("epoch", 0), problems)
    if set(value) == {"txn_end_ts"}:
        return Position(txn_end_ts=_timestamp(value["txn_end_ts"], "position.txn_end_ts", problems))
    problems.append("position must be {file, pos[, epoch]}, {txn_end_ts} or null")
    return Position()


def _binlog_position(file, pos, epoch, problems: list[str]) -> Position:
    number = _FILE_NUMBER.search(file) if isinstance(file, str) else None
    ok = (number and int(number.group(1)) <= binlog_position.MAX_FILE_NUMBER
          and isinstance(pos, int) and 0 <= pos < (1 << binlog_position.FILE_SHIFT)
          and isinstance(epoch, int) and 0 <= epoch <= binlog_position.MAX_EPOCH)
    if not ok:
        problems.append(f"position {{file, pos, epoch}} needs a binlog file numbered up to "
                        f"{binlog_position.MAX_FILE_NUMBER}, a position >= 0 and an epoch 0 to {binlog_position.MAX_EPOCH}")
        return Position()
    return Position(file=file, pos=pos, epoch=epoch)


def _timestamp(value, name: str, problems: list[str]) -> datetime | None:
    """ISO-8601 with a zone, as bronze requires: a time without zone has no single meaning."""
    if not (isinstance(value, str) and _ISO_WITH_ZONE.match(value.strip())):
        problems.append(f"{name} must be an ISO-8601 time with a zone (Z or +hh:mm)")
        return None
    text = value.strip().replace("Z", "+00:00")
    text = re.sub(r"\.(\d{6})\d+", r".\1", text)  # Python keeps microseconds, as the lake does
    return datetime.fromisoformat(text).astimezone(timezone.utc)


def _unix_micros(value: datetime) -> int:
    delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
