"""Column types must not depend on which rows happen to come first.

Silver types a replica's columns from the JSON values of each batch; the target's columns widen
as later batches reveal their types (cdc/widening.py). Two runs, both capture forms in one
pipeline:

* shadow (``bench_pg``): run 1 inserts an order with ``"discount": 0`` (a source may write a
  whole NUMERIC without its fraction); run 2 updates it to ``5.5``. The column is created
  BIGINT; 5.5 must not then be stored as 5.
* binlog (``bench``): run 1's only row has ``"note": null``; run 2 sets ``"note": 7`` and
  ``"total": 5.5`` (``0.0`` before). A column first seen only as NULL must take the type of its
  values (not stay STRING with 7 kept as the text '7').
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cdc_lakehouse.storage import LakeStore

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench import harness  # noqa: E402
from bench.workload import write_onboarding  # noqa: E402

LAYERS = ("bronze", "silver")


def _ev(file, pos, etype, **kw):
    ev = {"server_id": 7, "file": file, "pos": pos, "ts": 1772442000 + pos, "gtid": None, "type": etype, "xid": None,
          "thread_id": 1, "schema": None, "table": None, "primary_key": None, "rows": None, "query": None}
    ev.update(kw)
    return json.dumps(ev)


def _binlog_txn(file, xid, kind, image):
    return "\n".join([_ev(file, 1, "begin"),
                      _ev(file, 2, kind, schema="app", table="orders", primary_key=["order_id"], rows=[image]),
                      _ev(file, 3, "commit", xid=xid)]) + "\n"


def _shadow(landing, n, op_ts, end_ts, op, values):
    (landing / "bench_pg/shadow/_transactions").mkdir(parents=True, exist_ok=True)
    (landing / "bench_pg/shadow/app.orders").mkdir(parents=True, exist_ok=True)
    (landing / f"bench_pg/shadow/_transactions/t{n}.jsonl").write_text(json.dumps(
        {"txn_id": str(n), "end_ts": end_ts, "db_user": "u", "db_role": "r", "client": None, "application": None}) + "\n")
    (landing / f"bench_pg/shadow/app.orders/c{n}.jsonl").write_text(json.dumps(
        {"txn_id": str(n), "op_ts": op_ts, "op_seq": 1, "op": op, "key": {"order_id": 1},
         "old_key": None, "values": values}) + "\n")


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("types")
    landing, lake = tmp / "landing", tmp / "lake"
    onboarding = write_onboarding(tmp / "onboarding.yml", ("orders",), ("binlog", "shadow"))
    binlog = landing / "bench/binlog"
    binlog.mkdir(parents=True)
    before = {"order_id": 1, "note": None, "total": 0.0}
    (binlog / "mysql-bin.000001.jsonl").write_text(_binlog_txn("mysql-bin.000001", 1, "insert", {"after": before}))
    _shadow(landing, 1, "2026-03-02T09:00:00.500000Z", "2026-03-02T09:00:01.000000Z", "I", {"order_id": 1, "discount": 0, "status": "new"})
    harness.run_project(spark, landing, lake, onboarding, layers=LAYERS)
    (binlog / "mysql-bin.000002.jsonl").write_text(_binlog_txn(
        "mysql-bin.000002", 2, "update", {"before": before, "after": {"order_id": 1, "note": 7, "total": 5.5}}))
    _shadow(landing, 2, "2026-03-02T09:00:01.500000Z", "2026-03-02T09:00:02.000000Z", "U", {"discount": 5.5})
    harness.run_project(spark, landing, lake, onboarding, layers=LAYERS)
    return lake


def test_shadow_decimal_values_keep_their_fraction(spark, lake):
    row = LakeStore(spark, lake).read("silver.bench_pg_orders").first()
    assert row["discount"] == 5.5


def test_binlog_numbers_keep_their_values(spark, lake):
    row = LakeStore(spark, lake).read("silver.bench_orders").first()
    assert row["total"] == 5.5


def test_binlog_column_first_seen_as_null_gets_the_type_of_its_values(spark, lake):
    replica = LakeStore(spark, lake).read("silver.bench_orders")
    assert replica.schema["note"].dataType.simpleString() == "bigint"
    assert replica.first()["note"] == 7
