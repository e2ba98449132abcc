"""Landing lines (CONTRACT §2.1-§2.5) built from plain values, fields in the contract's order.

Capture and the workload generators (demo, bench) build every landing line here, so the line
shapes exist once; each keeps its own JSON serialiser (``landing.to_json`` for source values,
faster or legacy-exact ones in the generators), which only turns these dicts into text.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

from .landing import iso_utc

Row = dict[str, Any]

# §2.1, in the order the fields are written (capture appends its ``epoch``).
BINLOG_FIELDS = ("server_id", "file", "pos", "ts", "gtid", "type", "xid", "thread_id", "schema",
                 "table", "primary_key", "rows", "query")
SHADOW_OPS = {"insert": "I", "update": "U", "delete": "D"}  # §2.4 ``op`` of each row operation
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def binlog_event(server_id: int, file: str | None, pos: int | None, ts: int, gtid: str | None,
                 type_: str, *, xid: int | None = None, thread_id: int | None = None,
                 schema: str | None = None, table: str | None = None,
                 primary_key: list[str] | None = None, rows: list[Row] | None = None,
                 query: str | None = None) -> Row:
    """One §2.1 binlog event; the fields a type lacks are null."""
    return {"server_id": server_id, "file": file, "pos": pos, "ts": ts, "gtid": gtid,
            "type": type_, "xid": xid, "thread_id": thread_id, "schema": schema, "table": table,
            "primary_key": primary_key, "rows": rows, "query": query}


def row_image(before: Row | None, after: Row | None) -> Row:
    """One entry of a row event's ``rows`` (§2.1): the sides the operation has, so an insert
    has no ``before`` and a delete no ``after``."""
    return {side: image for side, image in (("before", before), ("after", after)) if image is not None}


def session(server_id: int, thread_id: int, connected_at: str, user: str, role: str | None) -> Row:
    """One §2.2 session line."""
    return {"server_id": server_id, "thread_id": thread_id, "connected_at": connected_at,
            "user": user, "role": role}


def transaction_row(txn_id: str, end_ts: str, db_user: str | None, db_role: str | None,
                    client: str | None, application: str | None) -> Row:
    """One §2.3 transaction table row."""
    return {"txn_id": txn_id, "end_ts": end_ts, "db_user": db_user, "db_role": db_role,
            "client": client, "application": application}


def change_row(txn_id: str, op_ts: str, op_seq: int | None, op: str, key: Row | None,
               old_key: Row | None, values: Row | None) -> Row:
    """One §2.4 shadow change row, as given."""
    return {"txn_id": txn_id, "op_ts": op_ts, "op_seq": op_seq, "op": op, "key": key,
            "old_key": old_key, "values": values}


def change_row_of(txn_id: str, op_ts: str, op_seq: int | None, keys: Iterable[str],
                  before: Row | None, after: Row | None) -> Row:
    """The §2.4 change row of one row operation (``before``/``after`` as in a binlog image):
    the key after it (before it, for a delete), the old key only when it changed, and of an
    update only the changed columns."""
    keys = tuple(keys)
    if before is None:
        assert after is not None, "a row operation has a before image, an after image or both"
        return change_row(txn_id, op_ts, op_seq, "I", _key(keys, after), None, after)
    if after is None:
        return change_row(txn_id, op_ts, op_seq, "D", _key(keys, before), None, None)
    key, old_key = _key(keys, after), _key(keys, before)
    values = {c: v for c, v in after.items() if before.get(c) != v}
    return change_row(txn_id, op_ts, op_seq, "U", key, old_key if old_key != key else None, values)


def _key(keys: tuple[str, ...], row: Row) -> Row:
    return {k: row[k] for k in keys}


def snapshot_manifest(snapshot_id: str, table: str, key: list[str], taken_at: str,
                      position: Row | None, row_count: int) -> Row:
    """A §2.5 manifest of a complete snapshot."""
    return {"snapshot_id": snapshot_id, "table": table, "key": key, "taken_at": taken_at,
            "position": position, "row_count": row_count, "complete": True}


def iso_us(t_us: int) -> str:
    """Epoch microseconds as §2.3/§2.4 time (ISO-8601 UTC, microseconds)."""
    return iso_utc(EPOCH + timedelta(microseconds=t_us))


@functools.lru_cache(maxsize=4096)  # generators write the same second many times in a row
def iso_s(t_s: int) -> str:
    """Epoch seconds as §2.2/§2.5 time (ISO-8601 UTC, seconds)."""
    return (EPOCH + timedelta(seconds=t_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


def binlog_file_name(number: int, base: str = "mysql-bin") -> str:
    """A binlog file's name as the server writes it (§2.1 ``file``): the numeric suffix orders."""
    return f"{base}.{number:06d}"
