"""Landing files (CONTRACT §2): where they go and how values are written in their lines.

Files appear in the landing only through ``contract.publication`` (whole, or not at all).
"""

from __future__ import annotations

import base64
import json
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from urllib.parse import quote

# Characters a folder name cannot carry literally: path separators, the escape itself, controls.
_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) not in "/\\%")


def table_folder(schema: str, table: str) -> str:
    """``<schema>.<table>``; ``/``, ``\\``, ``%`` and control characters are %-escaped."""
    name = quote(f"{schema}.{table}", safe=_SAFE)
    return "%2E" + name[1:] if name.startswith(".") else name


def source_dir(landing: Path | str, source: str) -> Path:
    return Path(landing) / quote(source, safe=_SAFE)


# The folders of a source's landing (CONTRACT §2).
BINLOG = "binlog"
SESSIONS = "sessions"
SHADOW = "shadow"
TRANSACTIONS = "_transactions"  # inside SHADOW, beside one folder per table
SNAPSHOT = "snapshot"
MANIFEST = "_manifest.json"


def binlog_dir(landing: Path | str, source: str) -> Path:
    return source_dir(landing, source) / BINLOG


def sessions_dir(landing: Path | str, source: str) -> Path:
    return source_dir(landing, source) / SESSIONS


def shadow_dir(landing: Path | str, source: str) -> Path:
    return source_dir(landing, source) / SHADOW


def transactions_dir(landing: Path | str, source: str) -> Path:
    return shadow_dir(landing, source) / TRANSACTIONS


def shadow_table_dir(landing: Path | str, source: str, schema: str, table: str) -> Path:
    return shadow_dir(landing, source) / table_folder(schema, table)


def snapshot_dir(landing: Path | str, source: str, schema: str, table: str, snapshot_id: str) -> Path:
    return source_dir(landing, source) / SNAPSHOT / table_folder(schema, table) / snapshot_id


def numbered_file(prefix: str, number: int, width: int = 4) -> str:
    """``<prefix>-<number, zero-padded>.jsonl``: generated files sort in writing order."""
    return f"{prefix}-{number:0{width}d}.jsonl"


# The shadow export's acknowledgement, written by housekeeping, read by the export (docs/snapshots.md).
ACK_FILE = "_ack.json"


def ack_path(landing: Path | str, source: str) -> Path:
    """``<landing>/<source>/_ack.json``: every landed transaction of the source up to its
    ``watermark_end_ts`` is applied."""
    return source_dir(landing, source) / ACK_FILE


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
