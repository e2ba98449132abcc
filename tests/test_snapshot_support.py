"""Helpers for the snapshot and housekeeping tests: small crafted landings (binlog transactions,
snapshot folders), a one-table onboarding, and pipeline runs over bronze and silver only (gold
is not needed to see corrections reach the change stream and the replicas)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import yaml

from cdc_lakehouse.config import load_onboarding
from cdc_lakehouse.runtime.runner import run_pipeline
from cdc_lakehouse.snapshot.reconcile import reconcile_landing
from cdc_lakehouse.storage import LakeStore
from lake_helpers import REPO, write_jsonl
from silver_support import onboarding_for

SILVER_SOURCES = [str(REPO / "src" / layer / "**" / "*.py") for layer in ("bronze", "silver")]
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
PRODUCTS = "shop.products"


def products_onboarding(tmp_path: Path, scd_type: int = 2, **cdc_lakehouse) -> Path:
    """The demo's `shop` source restricted to shop.products, with its SCD2 history when asked."""
    path = onboarding_for(tmp_path, {"shop"})
    flows = [f for f in yaml.safe_load(path.read_text()) if f["source_details"]["source_table"] == "products"]
    flows[0]["silver_cdc_apply_changes"]["scd_type"] = str(scd_type)
    flows[0]["cdc_lakehouse"].update(cdc_lakehouse)
    path.write_text(yaml.safe_dump(flows))
    return path


def run(spark, landing: Path, lake: Path, onboarding: Path):
    return run_pipeline(spark, SILVER_SOURCES, lake, {
        "cdc_lakehouse.landing_path": str(landing), "cdc_lakehouse.onboarding_file": str(onboarding),
    })


def reconcile(spark, landing: Path, lake: Path, onboarding: Path):
    return reconcile_landing(spark, LakeStore(spark, lake), load_onboarding(onboarding), landing)


def product(product_id: int, name: str, price: float) -> dict:
    return {"product_id": product_id, "name": name, "price": price}


# silver.shop_products in the demo's declared types (conf/schemas/shop/shop.products.ddl)
PRODUCTS_REPLICA = "product_id long, sku string, name string, price decimal(10,2), stock int"


def products(spark, rows):
    """The replica rows expected for ``(product_id, name, price)`` tuples (sku and stock unset)."""
    return spark.createDataFrame([(i, None, name, Decimal(str(price)), None) for i, name, price in rows],
                                 PRODUCTS_REPLICA)


class Binlog:
    """Binlog events of committed transactions on shop.products, with real (file, pos) order."""

    def __init__(self, file: str = "mysql-bin.000001", start: int = 4, ts: datetime = T0):
        self.file, self.pos, self.ts = file, start, ts
        self.events: list[dict] = []

    def _event(self, type_: str, **fields) -> dict:
        event = {"server_id": 1, "file": self.file, "pos": self.pos, "ts": int(self.ts.timestamp()),
                 "gtid": None, "type": type_, "xid": None, "thread_id": None, "schema": None, "table": None,
                 "primary_key": None, "rows": None, "query": None, **fields}
        self.events.append(event)
        self.pos += 100
        return event

    def txn(self, xid: int, *changes: tuple) -> dict:
        """``changes``: ("insert", after) | ("update", before, after) | ("delete", before).
        Returns the commit's position, as a snapshot manifest names it."""
        self.ts += timedelta(seconds=1)
        self._event("begin", thread_id=7)
        for change in changes:
            kind, images = change[0], change[1:]
            rows = {"insert": lambda a: [{"after": a}], "update": lambda b, a: [{"before": b, "after": a}],
                    "delete": lambda b: [{"before": b}]}[kind](*images)
            self._event(kind, schema="shop", table="products", primary_key=["product_id"], rows=rows)
        commit = self._event("commit", xid=xid)
        return {"file": commit["file"], "pos": commit["pos"]}

    def write(self, landing: Path, name: str) -> Path:
        path = write_jsonl(landing / "shop" / "binlog" / name, self.events)
        self.events = []
        return path


def write_snapshot(landing: Path, snapshot_id: str, rows: list[dict], *, table: str = PRODUCTS,
                   key=("product_id",), position=None, taken_at: datetime = T0, complete: bool = True,
                   row_count: int | None = None, source: str = "shop", parts: int = 1,
                   manifest: bool = True) -> Path:
    folder = landing / source / "snapshot" / table / snapshot_id
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(parts):
        write_jsonl(folder / f"part-{i:05d}.jsonl", rows[i::parts])
    if manifest:
        (folder / "_manifest.json").write_text(json.dumps({
            "snapshot_id": snapshot_id, "table": table, "key": list(key),
            "taken_at": taken_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "position": position,
            "row_count": len(rows) if row_count is None else row_count, "complete": complete,
        }))
    return folder
