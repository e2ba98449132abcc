"""A small reference replayer of landing files, written from CONTRACT §2 alone.

It shares no code with the capture package: it reads the files as a pipeline would, keeps
committed transactions only, orders them by commit, applies their changes (shadow partial
updates and key changes, binlog row images) and returns the resulting tables. It also says who
ran each transaction. Anything a well-behaved capture never writes (a change to a missing row,
an insert over an existing one, a change row of no transaction) is an AssertionError.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from urllib.parse import unquote


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line, parse_float=Decimal) for line in f if line.strip()]


def _files(folder: Path) -> list[Path]:
    """Landing files as a reader lists them: ``*.jsonl``, never hidden or temporary ones."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.jsonl") if not p.name.startswith((".", "_")))


def _key(row: dict, keys: list[str]) -> tuple:
    return tuple(row[k] for k in keys)


@dataclass
class Replay:
    tables: dict[str, dict[tuple, dict]]  # "schema.table" -> key -> row
    who: dict[str, tuple[str, str | None]]  # transaction id -> (user, role)
    txns_by_marker: dict[int, str]  # txlog txn_no -> transaction id


# ------------------------------------------------------------------------------------------
# shadow (§2.3, §2.4)
# ------------------------------------------------------------------------------------------


def replay_shadow(source_root: Path, keys: dict[str, list[str]]) -> Replay:
    """``keys``: "schema.table" -> key columns, for the tables to rebuild."""
    base = source_root / "shadow"
    end_ts: dict[str, str] = {}
    who: dict[str, tuple] = {}
    for path in _files(base / "_transactions"):
        for r in read_jsonl(path):
            if r["end_ts"] >= end_ts.get(r["txn_id"], ""):  # the latest record wins
                end_ts[r["txn_id"]] = r["end_ts"]
                who[r["txn_id"]] = (r["db_user"], r["db_role"])
    ops = []
    seen = set()
    for folder in sorted(p for p in base.iterdir() if p.is_dir() and p.name != "_transactions"):
        table = unquote(folder.name)
        for path in _files(folder):
            for r in read_jsonl(path):
                assert r["txn_id"] in end_ts, f"change row of unknown transaction {r}"
                ident = (table, r["txn_id"], r["op_seq"])
                assert ident not in seen, f"change row exported twice: {ident}"
                seen.add(ident)
                if table in keys:
                    ops.append((end_ts[r["txn_id"]], int(r["txn_id"]), r["op_seq"], table, r))
    ops.sort(key=lambda o: o[:3])
    tables: dict[str, dict[tuple, dict]] = {t: {} for t in keys}
    markers = {}
    for _, _, _, table, r in ops:
        _apply_shadow(tables[table], keys[table], r)
        if table.endswith(".txlog") and r["op"] == "I":
            markers[int(r["values"]["txn_no"])] = r["txn_id"]
    return Replay(tables, who, markers)


def _apply_shadow(rows: dict, keys: list[str], r: dict) -> None:
    key = _key(r["key"], keys)
    if r["op"] == "I":
        assert r["old_key"] is None and key not in rows, f"insert over existing row {r}"
        assert _key(r["values"], keys) == key
        rows[key] = dict(r["values"])
    elif r["op"] == "U":
        old = key if r["old_key"] is None else _key(r["old_key"], keys)
        assert old in rows, f"update of a missing row {r}"
        new = {**rows.pop(old), **r["values"]}
        assert _key(new, keys) == key and key not in rows, f"bad key change {r}"
        rows[key] = new
    else:
        assert r["op"] == "D" and r["values"] is None
        assert rows.pop(key, None) is not None, f"delete of a missing row {r}"


# ------------------------------------------------------------------------------------------
# binlog (§2.1, §2.2)
# ------------------------------------------------------------------------------------------


def _file_no(name: str) -> int:
    m = re.search(r"\.(\d+)$", name)
    return int(m.group(1)) if m else 0


def binlog_transactions(source_root: Path) -> list[list[dict]]:
    """Committed transactions in log order; each is its events from begin to commit."""
    events = {}
    for path in _files(source_root / "binlog"):
        for ev in read_jsonl(path):
            events[(ev["server_id"], ev["file"], ev["pos"])] = ev  # a repeat is the same event
    txns, cur = [], None
    for ev in sorted(events.values(), key=lambda e: (e["server_id"], _file_no(e["file"]), e["pos"])):
        if ev["type"] == "begin":
            assert cur is None, f"begin inside a transaction at {ev['file']}:{ev['pos']}"
            cur = [ev]
        elif ev["type"] in ("insert", "update", "delete", "statement"):  # a statement is never applied
            assert cur is not None, f"row event outside a transaction at {ev['file']}:{ev['pos']}"
            cur.append(ev)
        elif ev["type"] in ("commit", "rollback"):
            assert cur is not None
            if ev["type"] == "commit":
                txns.append(cur + [ev])
            cur = None
        else:
            assert ev["type"] == "ddl" and cur is None
    assert cur is None, "binlog ends inside a transaction"
    return txns


def _epoch(iso: str) -> int:
    return int(datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp())


def resolve_session(sessions: list[dict], server_id: int, thread_id, ts: int) -> tuple[str, str | None]:
    """CONTRACT §2.2: the session on that thread that connected most recently before ``ts``."""
    best = None
    for s in sessions:
        t = _epoch(s["connected_at"])
        if (s["server_id"], s["thread_id"]) == (server_id, thread_id) and t < ts:
            if best is None or t >= best[0]:
                best = (t, s["user"], s["role"])
    return (best[1], best[2]) if best else ("unknown", "unknown")


def replay_binlog(source_root: Path, keys: dict[str, list[str]]) -> Replay:
    sessions = [s for p in _files(source_root / "sessions") for s in read_jsonl(p)]
    tables: dict[str, dict[tuple, dict]] = {t: {} for t in keys}
    who, markers = {}, {}
    for txn in binlog_transactions(source_root):
        begin = txn[0]
        txn_id = f"{begin['server_id']}:{begin['file']}:{begin['pos']}"
        who[txn_id] = resolve_session(sessions, begin["server_id"], begin["thread_id"], begin["ts"])
        for ev in txn[1:-1]:
            table = f"{ev['schema']}.{ev['table']}"
            if table not in keys:
                continue
            assert ev["primary_key"] == keys[table], (table, ev["primary_key"])
            for image in ev["rows"]:
                _apply_image(tables[table], keys[table], ev["type"], image)
                if table.endswith(".txlog") and ev["type"] == "insert":
                    markers[int(image["after"]["txn_no"])] = txn_id
    return Replay(tables, who, markers)


def _apply_image(rows: dict, keys: list[str], kind: str, image: dict) -> None:
    if kind == "insert":
        key = _key(image["after"], keys)
        assert key not in rows, f"insert over existing row {image}"
        rows[key] = image["after"]
        return
    old = _key(image["before"], keys)
    assert rows.get(old) == image["before"], f"before image differs from the replica: {image}"
    del rows[old]
    if kind == "update":
        new = _key(image["after"], keys)
        assert new not in rows
        rows[new] = image["after"]
