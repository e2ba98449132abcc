"""The acknowledgement a shadow source's capture reads before purging shadow rows.

``<landing>/<source>/_ack.json`` (replaced atomically after each housekeeping run):

```
{"source": "shop_pg", "capture": "shadow",
 "applied_through": {"end_ts": "...Z", "txn_id": "7475", "position": 1772..},  # highest applied commit
 "watermark_end_ts": "...Z",   # every landed transaction with end_ts <= this is applied
 "held_transactions": 0,       # change rows whose transaction row has not landed yet
 "written_at": "...Z"}
```

``applied_through`` is the newest shadow transaction in ``silver.<source>_changes`` (housekeeping
runs after the pipeline update, whose replica flows apply that stream). It is not enough for a
purge: a transaction whose change rows landed without its transaction row is held (CONTRACT
§2.4) and may have an older ``end_ts``. ``watermark_end_ts`` is therefore capped just below the
earliest operation of any held transaction: a capture may purge exported shadow rows of
transactions with ``end_ts <= watermark_end_ts``. docs/snapshots.md describes the handshake.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pyspark.sql import functions as F

# The capture side reads the acknowledgement: it owns the file's name and place.
from cdc_lakehouse.contract.landing import ack_path
from cdc_lakehouse.contract.publication import write_atomically


def shadow_ack(store, source: str, bronze: str = "bronze", silver: str = "silver") -> dict | None:
    changes = f"{silver}.{source}_changes"
    if not store.exists(changes):
        return None
    top = (store.read(changes).filter(F.col("origin") == "shadow")
           .orderBy(F.col("sequence").desc()).select("sequence", F.unix_micros("commit_ts").alias("end")).first())
    if top is None:
        return None
    applied_end = _from_micros(top["end"])
    held_count, held_from = held(store, source, bronze)
    watermark = applied_end if held_from is None or held_from > applied_end else held_from - timedelta(microseconds=1)
    return {
        "source": source, "capture": "shadow",
        "applied_through": {"end_ts": _iso(applied_end), "txn_id": top["sequence"]["txn"],
                            "position": top["sequence"]["position"]},
        "watermark_end_ts": _iso(watermark), "held_transactions": held_count,
        "written_at": _iso(datetime.now(timezone.utc)),
    }


def held(store, source: str, bronze: str) -> tuple[int, datetime | None]:
    """Transactions with change rows but no transaction row yet, and their earliest operation."""
    changes, txns = f"{bronze}.{source}_shadow_changes", f"{bronze}.{source}_shadow_transactions"
    if not store.exists(changes):
        return 0, None
    rows = store.read(changes)
    if store.exists(txns):
        rows = rows.join(store.read(txns).select("txn_id"), "txn_id", "left_anti")
    # Micros, not collected timestamps: Python would render those in its own local zone.
    found = rows.agg(F.countDistinct("txn_id").alias("n"), F.min(F.unix_micros("op_ts")).alias("first")).first()
    return int(found["n"]), None if found["first"] is None else _from_micros(found["first"])


def write_ack(landing, ack: dict) -> Path:
    path = ack_path(landing, ack["source"])
    write_atomically(path, json.dumps(ack, indent=1))
    return path


def _iso(value: datetime) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _from_micros(micros: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=micros)
