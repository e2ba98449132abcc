"""Deterministic "shop" source workload and its landing files (docs: shared/design/CONTRACT.md).

A seeded simulator of a small MariaDB-like ``shop`` database (customers, products, orders,
order_items) runs a few hundred transactions from several users and roles, then writes:

* the binlog capture form for source ``shop`` (CONTRACT §2.1 events, §2.2 sessions),
* the trigger/shadow capture form of the same logical workload for source ``shop_pg``
  (CONTRACT §2.3 transaction rows, §2.4 change rows),
* a complete snapshot of ``shop.products`` at the last binlog commit (§2.5),
* the expected final source state of every table, for both sources.

The data deliberately contains the awkward cases the pipeline must handle: multi-table
transactions, several operations on one row inside a transaction (every allowed cell of §3),
key-changing updates, deletes, rolled-back transactions, DDL (a column added mid-stream),
commits sharing one second, a clock step back, a COMMIT query without XID, transactions
without GTID, thread ids reused by other users, a transaction spanning two binlog files, a
shadow update setting a column to NULL, a transaction row recorded twice and a transaction row
landing in a later file than its change rows.

Everything is derived from the seed: no wall clock, byte-identical output for a given
``(seed, n_txns)``.

Usage::

    python -m cdc_lakehouse.demo.shop_workload --out fixtures [--seed 7] [--txns 300]

This module is the command line; the work is done by ``shop_model`` (the database and the
logical workload), ``shop_simulation`` with ``shop_transactions`` (the seeded run),
``shop_landing`` (the landing forms, written through ``contract``) and ``shop_summary``.
"""

from __future__ import annotations

import argparse
import json
import sys

# The demo's API, as tests and docs use it from here.
from .shop_landing import render_files, write_landing
from .shop_model import DDLS, DEFAULT_SEED, DEFAULT_TXNS, MIN_TXNS, PHONE_DDL, Workload
from .shop_simulation import generate
from .shop_summary import summarize

__all__ = ["DDLS", "PHONE_DDL", "Workload", "generate", "main", "render_files", "summarize", "write_landing"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cdc_lakehouse.demo.shop_workload",
                                 description="Write the shop demo workload as landing files.")
    ap.add_argument("--out", required=True, help="output directory (gets landing/ and expected/)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--txns", type=int, default=DEFAULT_TXNS,
                    help=f"number of source transactions (>= {MIN_TXNS})")
    ap.add_argument("--summary", action="store_true", help="print what is in the data as JSON")
    args = ap.parse_args(argv)
    if args.txns < MIN_TXNS:
        ap.error(f"--txns must be at least {MIN_TXNS}")
    paths = write_landing(args.out, seed=args.seed, n_txns=args.txns)
    print(f"wrote {len(paths)} files under {args.out}")
    if args.summary:
        print(json.dumps(summarize(args.seed, args.txns), indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
