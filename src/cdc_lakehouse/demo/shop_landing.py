"""The shop workload's landing files (CONTRACT §2): the binlog form for source ``shop`` (§2.1
events, §2.2 sessions), the trigger/shadow form for ``shop_pg`` (§2.3, §2.4), a snapshot of
``shop.products`` at the last binlog commit (§2.5), and the expected final state of both.

Lines are built by ``contract.lines`` and files are published by ``contract.publication``; this
module decides only how the logical workload (``shop_model.Workload``) is laid out in them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path

from cdc_lakehouse.contract.landing import (MANIFEST, binlog_dir, numbered_file, sessions_dir, shadow_table_dir,
                                            snapshot_dir, transactions_dir)
from cdc_lakehouse.contract.lines import (binlog_event, binlog_file_name, change_row_of, iso_s, iso_us,
                                          row_image, snapshot_manifest, transaction_row)
from cdc_lakehouse.contract.publication import write_file

from .shop_model import (BINLOG_SOURCE, DEFAULT_SEED, DEFAULT_TXNS, FILE_START_POS, KEYS, SCHEMA,
                         SERVER_ID, SHADOW_SOURCE, TABLE_ORDER, TXNS_PER_SHADOW_FILE, RowOp, Txn,
                         Workload, money)
from .shop_simulation import generate


def dumps(obj) -> str:
    """Compact deterministic JSON; ``Decimal`` is written as a number with 2 decimals."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, Decimal):
        return format(money(obj), "f")
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, str):
        return json.dumps(obj, ensure_ascii=False)
    if isinstance(obj, dict):
        return "{" + ",".join(json.dumps(k) + ":" + dumps(v) for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in obj) + "]"
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def _pg_row(row: dict | None) -> dict | None:
    """The shadow source (PostgreSQL) never got the binlog-only ``phone`` column."""
    if row is None:
        return None
    return {k: v for k, v in row.items() if k != "phone"}


# --------------------------------------------------------------------------------------------
# Rendering: binlog form
# --------------------------------------------------------------------------------------------


def _event(ts: int, gtid: str | None, etype: str, **fields) -> dict:
    """An event without its place: file and pos are set when the log is cut into files."""
    return binlog_event(SERVER_ID, None, None, ts, gtid, etype, **fields)


def _event_size(ev: dict) -> int:
    """A plausible, deterministic on-disk size of the event (for positions)."""
    t = ev["type"]
    if t == "begin":
        return 42 + 73
    if t == "commit":
        return 31 if ev["xid"] is not None else 77
    if t == "rollback":
        return 79
    if t == "ddl":
        return 42 + 60 + len(ev["query"].encode())
    return 19 + 40 + len(dumps(ev["rows"]).encode()) // 2


def _binlog_txn_events(txn: Txn) -> list[dict]:
    if txn.outcome == "ddl":
        return [_event(txn.server_s(txn.commit_t), txn.gtid, "ddl", thread_id=txn.thread_id,
                       schema=SCHEMA, table=txn.ddl_table, query=txn.ddl_query)]
    evs = [_event(txn.server_s(txn.begin_t), txn.gtid, "begin", thread_id=txn.thread_id)]
    groups: list[list[RowOp]] = []
    for op in txn.ops:
        if groups and groups[-1][0].stmt == op.stmt:
            groups[-1].append(op)
        else:
            groups.append([op])
    for g in groups:
        first = g[0]
        rows = [row_image(op.before, op.after) for op in g]
        evs.append(_event(txn.server_s(first.t), txn.gtid, first.kind, schema=SCHEMA,
                          table=first.table, primary_key=list(KEYS[first.table]), rows=rows))
    end_ts = txn.server_s(txn.commit_t)
    if txn.outcome == "rollback":
        evs.append(_event(end_ts, txn.gtid, "rollback"))
    else:
        evs.append(_event(end_ts, txn.gtid, "commit", xid=txn.xid))
    return evs


def render_binlog(w: Workload) -> dict[str, list[dict]]:
    """Binlog events per binlog file name, in log order, with file and pos filled in."""
    files: dict[str, list[dict]] = {}
    cur, pos = 1, FILE_START_POS
    for txn in w.txns:
        evs = _binlog_txn_events(txn)
        rotate_at = None
        if txn.index in w.boundaries:
            rotate_at = 0
            if txn.index == w.span_index:  # begin and the first row event stay in the old file
                rotate_at = 2
                assert len(evs) > 3, "the spanning transaction needs several row events"
        for j, ev in enumerate(evs):
            if j == rotate_at:
                cur, pos = cur + 1, FILE_START_POS
            ev["file"] = binlog_file_name(cur)
            ev["pos"] = pos
            pos += _event_size(ev)
            files.setdefault(ev["file"], []).append(ev)
    return files


# --------------------------------------------------------------------------------------------
# Rendering: shadow form
# --------------------------------------------------------------------------------------------


def _shadow_change_rows(txn: Txn) -> list[tuple[str, dict]]:
    out = []
    for seq, op in enumerate(txn.ops, 1):
        row = change_row_of(txn.pg_txn_id, iso_us(op.t), seq, KEYS[op.table], _pg_row(op.before),
                            _pg_row(op.after))
        assert row["op"] != "U" or row["values"], (txn.index, op)  # phone-only updates are skipped
        out.append((op.table, row))
    return out


def _txn_row(txn: Txn, end_t: int) -> dict:
    db_user, db_role, client, app = txn.pg_identity
    return transaction_row(txn.pg_txn_id, iso_us(end_t), db_user, db_role, client, app)


def render_shadow(w: Workload) -> tuple[dict[int, list[dict]], dict[tuple[str, int], list[dict]]]:
    """(transaction rows per file number, change rows per (table, file number)).

    Committed transactions are cut into files of ``TXNS_PER_SHADOW_FILE`` in commit order.
    Two twists: the transaction row of the last transaction of file 1 is only in file 2 (its
    change rows must wait for it), and the ``dup_record`` transactions are first recorded with
    the time of their last operation, then again with their commit time in the next file (or
    at the end of the same file when it is the last one).
    """
    committed = [t for t in w.txns if t.outcome == "commit"]
    n_files = (len(committed) + TXNS_PER_SHADOW_FILE - 1) // TXNS_PER_SHADOW_FILE
    head: dict[int, list[dict]] = {c: [] for c in range(1, n_files + 1)}
    body: dict[int, list[dict]] = {c: [] for c in range(1, n_files + 1)}
    tail: dict[int, list[dict]] = {c: [] for c in range(1, n_files + 1)}
    changes: dict[tuple[str, int], list[dict]] = {}
    held_idx = TXNS_PER_SHADOW_FILE - 1 if n_files > 1 else None
    for idx, txn in enumerate(committed):
        chunk = idx // TXNS_PER_SHADOW_FILE + 1
        for table, row in _shadow_change_rows(txn):
            changes.setdefault((table, chunk), []).append(row)
        if idx == held_idx:
            head[chunk + 1].append(_txn_row(txn, txn.commit_t))
        elif txn.dup_record:
            body[chunk].append(_txn_row(txn, txn.ops[-1].t))
            tail[min(chunk + 1, n_files)].append(_txn_row(txn, txn.commit_t))
        else:
            body[chunk].append(_txn_row(txn, txn.commit_t))
    txn_files = {c: head[c] + body[c] + tail[c] for c in range(1, n_files + 1)}
    return txn_files, changes


# --------------------------------------------------------------------------------------------
# Rendering: everything as files
# --------------------------------------------------------------------------------------------


Files = dict[str, list[str]]  # relative path -> its lines (JSON texts, no newlines)
LANDING = Path("landing")
SNAPSHOT_ID = "snap-0001"


def _lines(rows: Iterable[dict | None]) -> list[str]:
    return [dumps(r) for r in rows]


def _sorted_rows(rows: dict[tuple, dict]) -> list[dict]:
    return [rows[k] for k in sorted(rows)]


def _binlog_files(w: Workload, binlog: dict[str, list[dict]]) -> Files:
    out = {(binlog_dir(LANDING, BINLOG_SOURCE) / f"{name}.jsonl").as_posix(): _lines(evs)
           for name, evs in binlog.items()}
    out[(sessions_dir(LANDING, BINLOG_SOURCE) / numbered_file("sessions", 1)).as_posix()] = _lines(w.sessions)
    return out


def _shadow_files(w: Workload) -> Files:
    txn_files, changes = render_shadow(w)
    out = {(transactions_dir(LANDING, SHADOW_SOURCE) / numbered_file("txns", c)).as_posix(): _lines(rows)
           for c, rows in txn_files.items()}
    for (table, c), rows in sorted(changes.items()):
        folder = shadow_table_dir(LANDING, SHADOW_SOURCE, SCHEMA, table)
        out[(folder / numbered_file("changes", c)).as_posix()] = _lines(rows)
    return out


def _snapshot_files(w: Workload, binlog: dict[str, list[dict]]) -> Files:
    """``shop.products`` as of the last binlog commit, taken five minutes after the last event."""
    last_commit = [ev for evs in binlog.values() for ev in evs if ev["type"] == "commit"][-1]
    products = _sorted_rows(w.final["products"])
    manifest = snapshot_manifest(SNAPSHOT_ID, f"{SCHEMA}.products", list(KEYS["products"]),
                                 iso_s(w.txns[-1].server_s(w.txns[-1].commit_t) + 300),
                                 {"file": last_commit["file"], "pos": last_commit["pos"]},
                                 len(products))
    folder = snapshot_dir(LANDING, BINLOG_SOURCE, SCHEMA, "products", SNAPSHOT_ID)
    return {(folder / "part-00000.jsonl").as_posix(): _lines(products),
            (folder / MANIFEST).as_posix(): [dumps(manifest)]}


def _expected_files(w: Workload) -> Files:
    out: Files = {}
    for table in TABLE_ORDER:
        rows = _sorted_rows(w.final[table])
        out[f"expected/{BINLOG_SOURCE}/{SCHEMA}.{table}.jsonl"] = _lines(rows)
        out[f"expected/{SHADOW_SOURCE}/{SCHEMA}.{table}.jsonl"] = _lines(_pg_row(r) for r in rows)
    return out


def render_files(seed: int = DEFAULT_SEED, n_txns: int = DEFAULT_TXNS) -> Files:
    """All output files as {relative path: lines}."""
    w = generate(seed, n_txns)
    binlog = render_binlog(w)
    return {**_binlog_files(w, binlog), **_shadow_files(w), **_snapshot_files(w, binlog),
            **_expected_files(w)}


_OWNED_DIRS = tuple(p.as_posix() for p in (
    binlog_dir(LANDING, BINLOG_SOURCE),
    sessions_dir(LANDING, BINLOG_SOURCE),
    snapshot_dir(LANDING, BINLOG_SOURCE, SCHEMA, "products", SNAPSHOT_ID),
    transactions_dir(LANDING, SHADOW_SOURCE),
    *(shadow_table_dir(LANDING, SHADOW_SOURCE, SCHEMA, t) for t in TABLE_ORDER),
    Path("expected", BINLOG_SOURCE),
    Path("expected", SHADOW_SOURCE),
))
_OWNED_NAME = re.compile(r"^(mysql-bin\.\d+|sessions-\d+|txns-\d+|changes-\d+|part-\d+|"
                         r"shop\.\w+)\.jsonl$|^_manifest\.json$")


def _remove_stale(root: Path, files: Files) -> None:
    """Generated files of an earlier run that this one does not write (e.g. it had more
    transactions); only names this generator writes, in folders it owns, are touched."""
    for d in _OWNED_DIRS:
        p = root / d
        if p.is_dir():
            for f in sorted(p.iterdir()):
                if f.is_file() and _OWNED_NAME.match(f.name) and f"{d}/{f.name}" not in files:
                    f.unlink()


def write_landing(out_dir: Path | str, seed: int = DEFAULT_SEED, n_txns: int = DEFAULT_TXNS) -> list[Path]:
    """Write landing files and expected state under ``out_dir``; returns the written paths.

    Each file is published whole (``contract.publication``), and only when its content changed,
    so a pipeline reading the fixtures never sees a partial or needlessly renewed file.
    """
    root = Path(out_dir)
    files = render_files(seed, n_txns)
    _remove_stale(root, files)
    written = []
    for rel, lines in sorted(files.items()):
        p = root / rel
        if not p.exists() or p.read_bytes() != "".join(f"{line}\n" for line in lines).encode("utf-8"):
            write_file(p, lines)
        written.append(p)
    return written
