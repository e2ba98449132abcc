"""Apply policy (issue #4): inserts of existing keys, updates and deletes of missing keys,
impossible pairs and changes the replicas cannot take all end in ``silver.<source>_anomalies``
with what the replicas did; one table's bad data never stops the other tables.

Unit tests on small change streams, a property test against a plain-Python model, and one
pipeline run (bronze, silver and gold) on a hand-made landing folder: gold's health datasets show
exactly the anomalies silver recorded.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.runtime.runner import run_pipeline
from cdc_lakehouse.silver.apply_policy import ANOMALY_COLUMNS, anomalies
from cdc_lakehouse.silver.replica_input import replica_changes
from cdc_lakehouse.contract.corrections import CHANGE_STREAM_SCHEMA
from cdc_lakehouse.storage import LakeStore
from lake_helpers import REPO, demo_flows, write_jsonl
from property_settings import examples

T0 = datetime(2026, 3, 2, 9, 0, 0)
SHOWN = ["key", "txn_id", "op", "anomaly", "applied_as"]


def key_of(order_id) -> str:
    """The canonical key of an order (values as text, no spaces)."""
    return json.dumps({"order_id": order_id if order_id is None else str(order_id)}, separators=(",", ":"))


def change(key, op, pos, row=None, *, txn=None, table="orders", pairs=(), origin="binlog", sequence=True):
    """One change-stream row; ``key`` is the order_id (None: no key at all)."""
    txn = txn or f"t{pos}"
    key_json = None if key is None else key_of(None if key == "null" else key)
    if row is None and op in ("INSERT", "UPDATE"):
        row = json.dumps({"order_id": key, "status": f"s{pos}"})
    seq = (pos, txn) if sequence else None
    return ("src", "app", table, key_json, op, row, None, [], list(pairs), 1, txn,
            T0 + timedelta(seconds=pos), seq, "u", "r", origin)


def stream(spark, rows):
    return spark.createDataFrame(rows, CHANGE_STREAM_SCHEMA)


def expected(spark, rows):
    """(order_id, txn, op, anomaly, applied_as) tuples as the shown columns."""
    return spark.createDataFrame(
        [(key_of(k), t, o, a, w) for k, t, o, a, w in rows],
        "key string, txn_id string, op string, anomaly string, applied_as string",
    )


def shown(df):
    return df.select(*SHOWN)


# -- the policy ---------------------------------------------------------------------------------
def test_insert_of_an_existing_key_and_update_or_delete_of_a_missing_key(spark):
    changes = stream(spark, [
        change(1, "INSERT", 1), change(1, "INSERT", 2),                          # row exists: upsert
        change(2, "UPDATE", 3),                                                  # never inserted
        change(3, "INSERT", 4), change(3, "DELETE", 5), change(3, "DELETE", 6),  # already deleted
        change(3, "UPDATE", 7),                                                  # deleted, updated again
        change(4, "INSERT", 8), change(4, "UPDATE", 9), change(4, "DELETE", 10), change(4, "INSERT", 11),  # fine
    ])
    assertDataFrameEqual(shown(anomalies(changes)), expected(spark, [
        (1, "t2", "INSERT", "insert_of_existing_key", "UPDATE"),
        (2, "t3", "UPDATE", "update_of_missing_key", "INSERT"),
        (3, "t6", "DELETE", "delete_of_missing_key", "NONE"),
        (3, "t7", "UPDATE", "update_of_missing_key", "INSERT"),
    ]))


def test_details_name_the_previous_transaction(spark):
    changes = stream(spark, [change(1, "INSERT", 1), change(1, "INSERT", 2), change(3, "DELETE", 3),
                             change(3, "DELETE", 4)])
    details = {r["txn_id"]: r["detail"] for r in anomalies(changes).collect()}
    assert details == {
        "t2": "INSERT of a key whose row exists (last changed by INSERT in transaction t1); "
              "AUTO CDC upserts: the row takes the inserted values",
        "t3": "DELETE of a key without a row (never inserted); nothing to delete: AUTO CDC only keeps a tombstone",
        "t4": "DELETE of a key without a row (deleted in transaction t3); nothing to delete: "
              "AUTO CDC only keeps a tombstone",
    }


def test_keys_are_judged_per_table(spark):
    changes = stream(spark, [change(1, "INSERT", 1, table="orders"), change(1, "UPDATE", 2, table="lines")])
    assertDataFrameEqual(shown(anomalies(changes)),
                         expected(spark, [(1, "t2", "UPDATE", "update_of_missing_key", "INSERT")]))


def test_snapshot_corrections_count_like_any_change(spark):
    changes = stream(spark, [
        change(1, "INSERT", 1, txn="snap:1", origin="snapshot"), change(1, "UPDATE", 2),  # fine
        change(2, "DELETE", 3), change(2, "DELETE", 4, txn="snap:2", origin="snapshot"),
    ])
    result = anomalies(changes)
    assertDataFrameEqual(shown(result), expected(spark, [(2, "t3", "DELETE", "delete_of_missing_key", "NONE"),
                                                         (2, "snap:2", "DELETE", "delete_of_missing_key", "NONE")]))
    assert {r["origin"] for r in result.collect()} == {"binlog", "snapshot"}


@pytest.mark.parametrize("origin", ["binlog", "shadow"])
def test_repeated_and_shuffled_changes_give_the_same_anomalies(spark, origin):
    rows = [change(1, "INSERT", 1, origin=origin), change(1, "INSERT", 2, origin=origin),
            change(2, "UPDATE", 3, origin=origin), change(2, "DELETE", 4, origin=origin),
            change(2, "DELETE", 5, origin=origin, pairs=["DELETE after DELETE"])]
    mixed = rows + rows[:3]  # a transaction emitted again repeats its changes
    random.Random(7).shuffle(mixed)
    assertDataFrameEqual(anomalies(stream(spark, mixed)), anomalies(stream(spark, rows)))


def test_a_shadow_transaction_recorded_again_later_counts_at_its_latest_sequence(spark):
    rows = [change(2, "UPDATE", 3, origin="shadow"), change(2, "INSERT", 4, origin="shadow"),
            change(2, "UPDATE", 30, txn="t3", origin="shadow")]  # t3 again, committed after t4
    assertDataFrameEqual(shown(anomalies(stream(spark, rows))), expected(spark, []))


def test_binlog_transactions_sharing_a_txn_id_stay_apart(spark):
    """An xid repeats across servers and restarts; the sequence (commit position) tells them apart."""
    rows = [change(1, "INSERT", 1, txn="xid:1"), change(1, "INSERT", 2, txn="xid:1")]
    assertDataFrameEqual(shown(anomalies(stream(spark, rows))),
                         expected(spark, [(1, "xid:1", "INSERT", "insert_of_existing_key", "UPDATE")]))


# -- impossible pairs and rejected changes --------------------------------------------------------
def test_impossible_pairs_are_one_row_each_with_the_transaction(spark):
    changes = stream(spark, [
        change(1, "INSERT", 1, pairs=["INSERT after INSERT", "INSERT after INSERT"]),
        change(2, "NONE", 2, pairs=["UPDATE after INSERT and DELETE"]),
        change(3, "INSERT", 3), change(3, "INSERT", 4, pairs=["INSERT after UPDATE"]),
    ])
    result = anomalies(changes)
    assertDataFrameEqual(shown(result), expected(spark, [
        (1, "t1", "INSERT", "insert_after_insert", "INSERT"),
        (2, "t2", "NONE", "update_after_insert_and_delete", "NONE"),
        (3, "t4", "INSERT", "insert_after_update", "UPDATE"),
        (3, "t4", "INSERT", "insert_of_existing_key", "UPDATE"),
    ]))
    detail = result.filter("txn_id = 't1'").first()["detail"]
    assert detail.endswith("INSERT after INSERT (2 times)"), detail


def test_changes_the_replicas_cannot_take_are_anomalies_and_held_back(spark):
    changes = stream(spark, [
        change(1, "INSERT", 1),
        change(2, "UPSERT", 2),
        change("null", "INSERT", 3, row=json.dumps({"order_id": None, "status": "x"})),
        change(None, "UPDATE", 4, row=json.dumps({"status": "x"})),
        change(5, "INSERT", 5, row="not json"),
        change(6, "UPDATE", 6, sequence=False),
        change(7, "NONE", 7),
    ])
    result = anomalies(changes).select("txn_id", "anomaly", "applied_as", "detail")
    got = {r["txn_id"]: (r["anomaly"], r["applied_as"]) for r in result.collect()}
    assert got == {
        "t2": ("unknown_op", "NONE"), "t3": ("incomplete_key", "NONE"), "t4": ("incomplete_key", "NONE"),
        "t5": ("bad_row_image", "NONE"), "t6": ("missing_sequence", "NONE"),
    }
    assert result.filter(F.col("detail").isNull()).count() == 0
    assertDataFrameEqual(replica_changes(changes).select("order_id", "__txn_id"),
                         spark.createDataFrame([(1, "t1")], "order_id bigint, __txn_id string"))


def test_a_change_keyed_on_other_columns_than_the_replica_is_held_back_with_its_anomaly(spark):
    """After a key column is renamed at the source, AUTO CDC would find no key value and fail
    the flow (and the update) on every run: the change is held back instead, for this table only."""
    renamed = list(change(2, "INSERT", 2, row=json.dumps({"Order_Ref": 2, "status": "x"})))
    renamed[3] = '{"Order_Ref":"2"}'  # the change's key
    changes = stream(spark, [change(1, "INSERT", 1), tuple(renamed)])
    keys = F.array(F.lit("order_id"))
    got = anomalies(changes, keys=keys).select("txn_id", "anomaly", "applied_as", "detail").collect()
    assert [(r["txn_id"], r["anomaly"], r["applied_as"]) for r in got] == [("t2", "missing_key_column", "NONE")]
    assert "lacks a column the replica is keyed on (order_id)" in got[0]["detail"]
    assertDataFrameEqual(replica_changes(changes, keys=["ORDER_ID"]).select("order_id", "__txn_id"),
                         spark.createDataFrame([(1, "t1")], "order_id bigint, __txn_id string"))


def test_a_partial_update_or_delete_of_a_never_inserted_row_keeps_its_key(spark):
    """Shadow capture rebuilds rows from history: a row never inserted has no key column in its
    image (an update carries its changed columns, a delete no image at all)."""
    changes = stream(spark, [change(1, "INSERT", 1), change(2, "UPDATE", 2, row=json.dumps({"status": "paid"})),
                             change(3, "DELETE", 3, row=None)])
    assertDataFrameEqual(
        replica_changes(changes).select("order_id", "status", "__op"),
        spark.createDataFrame([(1, "s1", "INSERT"), (2, "paid", "UPDATE"), (3, None, "DELETE")],
                              "order_id bigint, status string, __op string"),
    )


@pytest.mark.parametrize(("key", "image", "types"), [
    ({"code": "42"}, {"code": "42", "n": 1}, [("code", "string"), ("n", "bigint")]),   # text that looks numeric
    ({"id": "1.5"}, {"id": 1.5, "n": 1}, [("id", "double"), ("n", "bigint")]),
    ({"on": "true"}, {"on": True}, [("on", "boolean")]),
])
def test_keys_do_not_change_the_types_of_full_images(spark, key, image, types):
    rows = [("src", "app", "t", json.dumps(key), "INSERT", json.dumps(image), None, [], [], 1, "t1", T0, (1, "t1"),
             "u", "r", "binlog")]
    typed = replica_changes(stream(spark, rows))
    assert typed.dtypes[:len(types)] == types


def test_the_table_has_the_declared_columns(spark):
    result = anomalies(stream(spark, [change(1, "UPDATE", 1)]))
    assert result.columns == [name for name, _, _ in ANOMALY_COLUMNS]


# -- property: the anomalies of a model ---------------------------------------------------------
OPS = st.sampled_from(["INSERT", "UPDATE", "DELETE", "UPSERT"])  # UPSERT: unknown, held back
HISTORIES = st.lists(st.tuples(st.integers(0, 2), OPS), min_size=1, max_size=12)


def model(history):
    """(key, txn, anomaly, applied_as) of a history of (key, op) in commit order."""
    exists, found = {}, set()
    for pos, (key, op) in enumerate(history, 1):
        had = exists.get(key, False)
        if op == "UPSERT":  # never applied: the next change is judged against the one before
            found.add((key, f"t{pos}", "unknown_op", "NONE"))
            continue
        if op == "INSERT" and had:
            found.add((key, f"t{pos}", "insert_of_existing_key", "UPDATE"))
        if op == "UPDATE" and not had:
            found.add((key, f"t{pos}", "update_of_missing_key", "INSERT"))
        if op == "DELETE" and not had:
            found.add((key, f"t{pos}", "delete_of_missing_key", "NONE"))
        exists[key] = op != "DELETE"
    return found


@settings(max_examples=examples(12), phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=HISTORIES, repeats=st.lists(st.integers(0, 11), max_size=4), seed=st.integers(0, 99))
def test_anomalies_match_a_model_whatever_the_delivery(spark, history, repeats, seed):
    rows = [change(key, op, pos) for pos, (key, op) in enumerate(history, 1)]
    delivered = rows + [rows[i % len(rows)] for i in repeats]
    random.Random(seed).shuffle(delivered)
    got = {(json.loads(r["key"])["order_id"], r["txn_id"], r["anomaly"], r["applied_as"])
           for r in anomalies(stream(spark, delivered)).collect()}
    assert got == {(str(k), t, a, w) for k, t, a, w in model(history)}


# -- one pipeline run -------------------------------------------------------------------------
FILE = "mysql-bin.000001"


def _event(pos, etype, **fields):
    event = {"server_id": 1, "file": FILE, "pos": pos, "ts": 1772442000 + pos // 100, "gtid": None, "type": etype,
             "xid": None, "thread_id": 21, "schema": None, "table": None, "primary_key": None, "rows": None,
             "query": None}
    return {**event, **fields}


def _transaction(xid, *row_events):
    """BEGIN, row events (kind, table, rows), COMMIT at positions xid*1000 onwards."""
    pos = xid * 1000
    keys = {"products": ["product_id"], "orders": ["order_id"]}
    events = [_event(pos, "begin")]
    for i, (kind, table, rows) in enumerate(row_events, 1):
        events.append(_event(pos + i, kind, schema="shop", table=table, primary_key=keys[table], rows=rows))
    return events + [_event(pos + 99, "commit", xid=xid)]


def _product(pid, name, price):
    return {"product_id": pid, "name": name, "price": price}


def _order(oid, status):
    return {"order_id": oid, "customer_id": 7, "status": status, "total": 10.5}


BINLOG = [
    *_transaction(1, ("insert", "products", [{"after": _product(1, "pen", 1.5)}, {"after": _product(2, "ink", 2.5)}]),
                  ("insert", "orders", [{"after": _order(1, "new")}, {"after": _order(2, "new")}])),
    *_transaction(2, ("insert", "products", [{"after": _product(1, "pen v2", 1.75)}]),   # key 1 exists
                  ("update", "products", [{"before": _product(3, "cap", 3.5), "after": _product(3, "cap", 4.5)}]),
                  ("delete", "products", [{"before": _product(4, "nib", 0.5)}]),         # never inserted
                  ("insert", "orders", [{"after": _order(None, "bad")}]),                 # key column NULL
                  ("update", "orders", [{"before": _order(1, "new"), "after": _order(1, "paid")}])),
    *_transaction(3, ("insert", "orders", [{"after": _order(5, "new")}]),
                  ("insert", "orders", [{"after": _order(5, "again")}])),                # impossible pair
    # The key column renamed at the source: the event is keyed on order_ref, the replica on
    # order_id. Once this failed the orders flow, and with it the whole update, on every run.
    _event(4000, "begin"),
    _event(4001, "insert", schema="shop", table="orders", primary_key=["order_ref"],
           rows=[{"after": {"order_ref": 9, "customer_id": 7, "status": "renamed", "total": 10.5}}]),
    _event(4099, "commit", xid=4),
]
CORRECTION = {  # a snapshot correction (landing file in the change-stream shape) with an unknown op
    "source": "shop", "schema": "shop", "table": "orders", "key": '{"order_id":"2"}', "op": "UPSERT",
    "row": json.dumps(_order(2, "lost")), "before": None, "changed_columns": [], "anomalies": [], "op_count": 1,
    "txn_id": "snapshot:s1", "commit_ts": "2026-03-02T10:00:00.000000Z",
    "sequence": {"position": 9_000_000, "txn": "snapshot:s1"},
    "user": "snapshot", "role": "snapshot", "origin": "snapshot",
}


def _onboarding(tmp_path, tables):
    flows = demo_flows()
    chosen = [f for f in flows
              if f["cdc_lakehouse"]["source"] == "shop" and f["source_details"]["source_table"] in tables]
    path = tmp_path / "onboarding.yml"
    path.write_text(yaml.safe_dump(chosen))
    return path


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("apply-policy")
    landing, lake = tmp / "landing", tmp / "lake"
    write_jsonl(landing / "shop/sessions/sessions.jsonl",
                [{"server_id": 1, "thread_id": 21, "connected_at": "2026-03-02T08:00:00Z",
                  "user": "api", "role": "app"}])
    write_jsonl(landing / f"shop/binlog/{FILE}.jsonl", BINLOG)
    write_jsonl(landing / "shop/corrections/shop.orders/s1.jsonl", [CORRECTION])
    sources = [str(REPO / "src" / layer / "**" / "*.py") for layer in ("bronze", "silver", "gold")]
    run_pipeline(spark, sources, lake, {"cdc_lakehouse.landing_path": str(landing),
                                        "cdc_lakehouse.onboarding_file": str(_onboarding(tmp, {"products", "orders"}))})
    return LakeStore(spark, lake)


def test_pipeline_replicas_follow_the_policy(spark, lake):
    """The demo's declared types (conf/schemas): declared columns the images lack are NULL."""
    assertDataFrameEqual(lake.read("silver.shop_products"), spark.createDataFrame(
        [(1, None, "pen v2", Decimal("1.75"), None), (2, None, "ink", Decimal("2.50"), None),
         (3, None, "cap", Decimal("4.50"), None)],
        "product_id bigint, sku string, name string, price decimal(10,2), stock int"))


def test_pipeline_bad_rows_of_one_table_do_not_stop_the_others(spark, lake):
    """orders got a row with a NULL key and a change with an unknown op: both held back, the
    rest of orders and every other table applied."""
    total = Decimal("10.50")
    assertDataFrameEqual(lake.read("silver.shop_orders"), spark.createDataFrame(
        [(1, 7, "paid", total, None), (2, 7, "new", total, None), (5, 7, "again", total, None)],
        "order_id bigint, customer_id bigint, status string, total decimal(12,2), created_at timestamp"))


def test_pipeline_anomalies_table(spark, lake):
    table = lake.read("silver.shop_anomalies")
    assert table.columns == [name for name, _, _ in ANOMALY_COLUMNS]
    got = table.select("table", "key", "txn_id", "op", "anomaly", "applied_as", "origin")
    assertDataFrameEqual(got, spark.createDataFrame([
        ("products", '{"product_id":"1"}', "xid:2", "INSERT", "insert_of_existing_key", "UPDATE", "binlog"),
        ("products", '{"product_id":"3"}', "xid:2", "UPDATE", "update_of_missing_key", "INSERT", "binlog"),
        ("products", '{"product_id":"4"}', "xid:2", "DELETE", "delete_of_missing_key", "NONE", "binlog"),
        ("orders", '{"order_id":null}', "xid:2", "INSERT", "incomplete_key", "NONE", "binlog"),
        ("orders", '{"order_id":"5"}', "xid:3", "INSERT", "insert_after_insert", "INSERT", "binlog"),
        ("orders", '{"order_id":"2"}', "snapshot:s1", "UPSERT", "unknown_op", "NONE", "snapshot"),
        ("orders", '{"order_ref":"9"}', "xid:4", "INSERT", "missing_key_column", "NONE", "binlog"),
    ], "table string, key string, txn_id string, op string, anomaly string, applied_as string, origin string"))
    assert table.filter(F.col("detail").isNull() | F.col("user").isNull() | F.col("sequence").isNull()).count() == 0


def test_pipeline_audit_log_has_the_applied_changes_only(spark, lake):
    """The NULL key, the UPSERT and the change keyed on order_ref reached no replica: no audit
    row says they did (issue 68); the insert after an insert was applied, with its anomaly."""
    audit = lake.read("gold.audit_log").filter("`table` = 'orders'")
    assert {(r["key"], r["operation"]) for r in audit.collect()} == {
        ('{"order_id":"1"}', "INSERT"), ('{"order_id":"1"}', "UPDATE"), ('{"order_id":"2"}', "INSERT"),
        ('{"order_id":"5"}', "INSERT")}
    again = audit.filter("key = '{\"order_id\":\"5\"}'").first()
    assert again["anomalies"] == ["INSERT after INSERT"]  # the pair, as the change stream names it


# -- gold: the dashboard's health datasets show exactly these anomalies -------------------------
PRODUCT_KINDS = ["delete_of_missing_key", "insert_of_existing_key", "update_of_missing_key"]
ORDER_KINDS = ["incomplete_key", "insert_after_insert", "missing_key_column", "unknown_op"]


def test_pipeline_gold_data_quality_counts_the_anomalies_per_table(spark, lake):
    got = lake.read("gold.data_quality").select("source", "table", "anomalous_changes", "anomalies")
    assertDataFrameEqual(got, spark.createDataFrame([
        ("shop", "shop.products", 3, PRODUCT_KINDS),
        ("shop", "shop.orders", 4, ORDER_KINDS),
    ], "source string, table string, anomalous_changes bigint, anomalies array<string>"))


def test_pipeline_gold_replication_health_counts_the_anomalous_changes(spark, lake):
    got = lake.read("gold.replication_health").select("source", "anomalous_changes")
    assertDataFrameEqual(got, spark.createDataFrame([("shop", 7)], "source string, anomalous_changes bigint"))
