"""Landing files (CONTRACT §2): where they go, how values are written, and durable atomic writes.

A landing file appears under its final name only when complete and on disk: it is written to a
hidden temporary name in the same folder, fsynced, renamed, and the folder is fsynced. Readers
therefore never see a partial file, and a crash leaves at most a temporary file that the next
run removes.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import Iterable
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from urllib.parse import quote

TMP_PREFIX = ".cdc-tmp-"
# Characters a folder name cannot carry literally: path separators, the escape itself, controls.
_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) not in "/\\%")


def table_folder(schema: str, table: str) -> str:
    """``<schema>.<table>``; ``/``, ``\\``, ``%`` and control characters are %-escaped."""
    name = quote(f"{schema}.{table}", safe=_SAFE)
    return "%2E" + name[1:] if name.startswith(".") else name


def source_dir(landing: Path | str, source: str) -> Path:
    return Path(landing) / quote(source, safe=_SAFE)


def iso_utc(value: datetime) -> str:
    """ISO-8601 UTC with microseconds; a naive datetime is taken as UTC."""
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def to_json(value) -> str:
    """Compact JSON that keeps decimals exact and writes temporal values as ISO strings."""
    if isinstance(value, Decimal):
        return _decimal(value)
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(str(k), ensure_ascii=False) + ":" + to_json(v)
                              for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(to_json(v) for v in value) + "]"
    return json.dumps(_plain(value), ensure_ascii=False, separators=(",", ":"), default=_unknown)


def _decimal(value: Decimal) -> str:
    if not value.is_finite():
        return "null"
    return format(value, "f")


def _plain(value):
    """Values JSON has no type for, as strings (recursively for containers)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if isinstance(value, datetime):
        return iso_utc(value) if value.tzinfo else value.isoformat()
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return _duration(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _binary(bytes(value))
    if isinstance(value, float) and value != value:
        return None
    return value


def _duration(value: timedelta) -> str:
    """MySQL TIME values arrive as timedelta; written as [-]HH:MM:SS[.ffffff] like the server."""
    us = value // timedelta(microseconds=1)
    sign, us = ("-", -us) if us < 0 else ("", us)
    s, frac = divmod(us, 1_000_000)
    text = f"{sign}{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
    return f"{text}.{frac:06d}" if frac else text


def _binary(value: bytes) -> str:
    """Text stored in a binary column stays text; other bytes become ``base64:<data>``."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(value).decode("ascii")


def _unknown(value):
    return str(value)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_temp(folder: Path, lines: Iterable[str]) -> Path:
    """Write ``lines`` (JSON texts) to a durable hidden temporary file in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"{TMP_PREFIX}{uuid.uuid4().hex}.part"  # no .jsonl: never listed as input
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line)
            f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    return tmp


def publish(tmp: Path, final: Path) -> None:
    """Rename a durable temporary file to its final name and make the rename durable."""
    os.replace(tmp, final)
    fsync_dir(final.parent)


def write_file(final: Path, lines: Iterable[str]) -> Path:
    publish(write_temp(final.parent, lines), final)
    return final


def remove_orphans(folder: Path, keep: set[str] = frozenset()) -> int:
    """Delete temporary files a crashed run left behind (except those named in ``keep``)."""
    if not folder.is_dir():
        return 0
    n = 0
    for p in folder.glob(f"{TMP_PREFIX}*"):
        if str(p) not in keep:
            p.unlink(missing_ok=True)
            n += 1
    return n
