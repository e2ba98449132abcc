"""What is in the shop workload's data: counts of the awkward cases the pipeline must handle
(printed by ``python -m cdc_lakehouse.demo.shop_workload --summary``)."""

from __future__ import annotations

from .shop_landing import render_binlog, render_shadow
from .shop_model import DEFAULT_SEED, DEFAULT_TXNS, ORDER_42, TABLE_ORDER, Workload, key_of
from .shop_simulation import generate


def _combine_cells(w: Workload) -> dict[str, int]:
    """Count, over committed transactions, the §3 cells hit by consecutive ops on one key."""
    cells: dict[str, int] = {}
    for txn in w.txns:
        if txn.outcome != "commit":
            continue
        seqs: dict[tuple, list[str]] = {}
        for op in txn.ops:
            if op.kind == "update":
                ko, kn = key_of(op.table, op.before), key_of(op.table, op.after)
                if ko != kn:
                    seqs.setdefault((op.table, ko), []).append("D")
                    seqs.setdefault((op.table, kn), []).append("I")
                    continue
                seqs.setdefault((op.table, kn), []).append("U")
            elif op.kind == "insert":
                seqs.setdefault((op.table, key_of(op.table, op.after)), []).append("I")
            else:
                seqs.setdefault((op.table, key_of(op.table, op.before)), []).append("D")
        for s in seqs.values():
            for a, b in zip(s, s[1:]):
                cells[a + b] = cells.get(a + b, 0) + 1
    return cells


def summarize(seed: int = DEFAULT_SEED, n_txns: int = DEFAULT_TXNS) -> dict:
    w = generate(seed, n_txns)
    binlog = render_binlog(w)
    events = [ev for evs in binlog.values() for ev in evs]
    ends = [ev for ev in events if ev["type"] in ("commit", "ddl")]
    commits = [t for t in w.txns if t.outcome == "commit"]
    txn_files, changes = render_shadow(w)
    txn_rows = [r for rows in txn_files.values() for r in rows]
    change_rows = [r for rows in changes.values() for r in rows]
    ids = [r["txn_id"] for r in txn_rows]
    o42 = []
    for t in w.txns:
        if t.outcome == "commit" and any(op.table in ("orders", "order_items") and
                                         (op.before or op.after)["order_id"] == ORDER_42
                                         for op in t.ops):
            o42.append({"index": t.index, "label": t.label, "user": t.user, "role": t.role,
                        "gtid": t.gtid, "xid": t.xid, "pg_txn_id": t.pg_txn_id})
    return {
        "transactions": len(w.txns),
        "committed_dml": len(commits),
        "rolled_back": sum(t.outcome == "rollback" for t in w.txns),
        "ddl": sum(t.outcome == "ddl" for t in w.txns),
        "binlog_files": sorted(binlog),
        "binlog_events": len(events),
        "commit_without_xid": sum(ev["type"] == "commit" and ev["xid"] is None for ev in events),
        "txns_without_gtid": sum(t.gtid is None for t in w.txns),
        "same_second_commit_pairs": sum(a["ts"] == b["ts"] for a, b in zip(ends, ends[1:])),
        "clock_steps_back": sum(b["ts"] < a["ts"] for a, b in zip(ends, ends[1:])),
        "multi_table_txns": sum(len({op.table for op in t.ops}) > 1 for t in commits),
        "multi_row_events": sum(ev["rows"] is not None and len(ev["rows"]) > 1 for ev in events),
        "key_changing_updates": sum(op.kind == "update" and key_of(op.table, op.before) !=
                                    key_of(op.table, op.after) for t in commits for op in t.ops),
        "deletes": sum(op.kind == "delete" for t in commits for op in t.ops),
        "same_row_cells": dict(sorted(_combine_cells(w).items())),
        "shadow_updates_with_null": sum(r["op"] == "U" and None in r["values"].values()
                                        for r in change_rows),
        "shadow_change_rows": len(change_rows),
        "shadow_txn_rows": len(txn_rows),
        "shadow_txns_recorded_twice": len(ids) - len(set(ids)),
        "sessions": len(w.sessions),
        "threads_reused_by_other_user": sum(
            len({s["user"] for s in w.sessions if s["thread_id"] == tid}) > 1
            for tid in sorted({s["thread_id"] for s in w.sessions})),
        "unknown_user_txns": sum(t.user == "unknown" for t in w.txns),
        "order_42": o42,
        "final_rows": {t: len(w.final[t]) for t in TABLE_ORDER},
    }
