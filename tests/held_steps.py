"""One small binlog lake updated step by step around a held transaction, shared by the tests of
held state (silver/binlog_held.py) and of gold's commit point (gold/coherent.py).

Steps: ``open`` (A committed, B open, C committed after B's begin, G committed with one of its
two inserts quarantined: a NaN value), ``completed`` (B's commit and G's corrected insert
land), ``redelivered`` (A's file again: below the floor, late), ``new`` (in the next binlog
file an empty transaction E, committed with no changes, then D). Each step keeps the update's result and the tables the tests look at, read at that step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame

from cdc_lakehouse.runtime.runner import RunResult
from cdc_lakehouse.storage import LakeStore
from lake_helpers import write_jsonl
from silver_support import onboarding_for, run_project

STATE = "silver.__flow_state_shop_binlog_changes"
TRANSACTIONS = "silver.shop_transactions"
AUDIT_TRANSACTIONS = "gold.audit_transactions"
CUSTOMER = ["customer_id"]


def event(pos: int, etype: str, file: str = "mysql-bin.000001", **fields) -> dict:
    return {"server_id": 1, "file": file, "pos": pos, "ts": 1772442000 + pos // 100, "gtid": None,
            "type": etype, "xid": None, "thread_id": None, "schema": None, "table": None,
            "primary_key": None, "rows": None, "query": None, **fields}


def insert(pos: int, customer: int, name: str, file: str = "mysql-bin.000001") -> dict:
    row = {"customer_id": customer, "name": name, "email": f"{name}@x", "city": "Oslo", "tier": "gold", "phone": None}
    return event(pos, "insert", file, schema="shop", table="customers", primary_key=CUSTOMER, rows=[{"after": row}])


def transaction(begin: int, customers: list[tuple[int, str]], commit: bool = True, file: str = "mysql-bin.000001") -> list[dict]:
    events = [event(begin, "begin", file, thread_id=7)]
    events += [insert(begin + 10 * (i + 1), c, n, file) for i, (c, n) in enumerate(customers)]
    return events + ([event(begin + 90, "commit", file, xid=begin)] if commit else [])


def with_nan(event: dict) -> dict:
    """The event with a NaN value in its row: no JSON, so bronze quarantines its line."""
    return {**event, "rows": [{"after": {**event["rows"][0]["after"], "phone": float("nan")}}]}


G = transaction(600, [(5, "eve"), (6, "fay")])
STEPS: list[tuple[str, dict[str, list[dict]]]] = [
    ("open", {"1.jsonl": transaction(100, [(1, "ann")]) + transaction(200, [(2, "bob")], commit=False)
              + transaction(300, [(3, "cy")]) + G[:2] + [with_nan(G[2])] + G[3:]}),
    ("completed", {"2.jsonl": [event(290, "commit", xid=200), G[2]]}),
    ("redelivered", {"1-again.jsonl": transaction(100, [(1, "ann")])}),
    ("new", {"3.jsonl": transaction(400, [], file="mysql-bin.000002")
                        + transaction(500, [(4, "dee")], file="mysql-bin.000002")}),
]


@dataclass
class Step:
    result: RunResult
    silver: dict[int, str]  # customer_id -> name in silver.shop_customers
    gold: dict[int, str]  # the same in gold.shop_customers
    state: list  # rows of the binlog change flow's held state
    transactions: DataFrame  # silver.shop_transactions as of this step
    audited: int  # rows of gold.audit_log
    audit_transactions: DataFrame | None  # gold.audit_transactions as of this step


@dataclass
class HeldLake:
    lake: Path
    steps: dict[str, Step]


def _names(store: LakeStore, table: str) -> dict[int, str]:
    return {r["customer_id"]: r["name"] for r in store.read(table).collect()} if store.exists(table) else {}


def build(spark, root: Path) -> HeldLake:
    landing, lake = root / "landing", root / "lake"
    onboarding = onboarding_for(root, {"shop"})
    steps = {}
    for name, files in STEPS:
        for file, events in files.items():
            write_jsonl(landing / "shop" / "binlog" / file, events)
        result = run_project(spark, landing, lake, onboarding)
        store = LakeStore(spark, lake)
        steps[name] = Step(result, _names(store, "silver.shop_customers"), _names(store, "gold.shop_customers"),
                           store.read(STATE).collect() if store.exists(STATE) else [], store.read(TRANSACTIONS),
                           store.read("gold.audit_log").count() if store.exists("gold.audit_log") else 0,
                           store.read(AUDIT_TRANSACTIONS) if store.exists(AUDIT_TRANSACTIONS) else None)
    return HeldLake(lake, steps)
