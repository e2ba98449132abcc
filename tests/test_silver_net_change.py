"""CONTRACT §3: every cell of the combining table, on real Spark."""

from __future__ import annotations

import json

import pytest
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.silver.net_change import combine

OPS_SCHEMA = "txn string, key string, old_key string, ord long, op string, row string, before string"
OUT_SCHEMA = "txn string, key string, op string, row string, before string, anomalies array<string>"

K1, K2 = '{"id":"1"}', '{"id":"2"}'


def img(**values) -> str:
    return json.dumps(values)


def _net(spark, ops):
    df = spark.createDataFrame([("t1", k, ok, i, op, row, before) for i, (k, ok, op, row, before) in enumerate(ops)], OPS_SCHEMA)
    return combine(df, ["txn"]).select("txn", "key", "op", "row", "before", "anomalies")


def _expect(spark, rows):
    return spark.createDataFrame([("t1", *r) for r in rows], OUT_SCHEMA)


A, B, C = img(id=1, v="a"), img(id=1, v="b"), img(id=1, v="c")

CELLS = [
    # first, second -> net op, row, before, anomalies
    ("I then U", [(K1, None, "I", A, None), (K1, None, "U", B, A)], ("INSERT", B, None, [])),
    ("I then D", [(K1, None, "I", A, None), (K1, None, "D", None, A)], ("NONE", None, None, [])),
    ("U then U", [(K1, None, "U", B, A), (K1, None, "U", C, B)], ("UPDATE", C, A, [])),
    ("U then D", [(K1, None, "U", B, A), (K1, None, "D", None, B)], ("DELETE", B, A, [])),
    ("D then I", [(K1, None, "D", None, A), (K1, None, "I", B, None)], ("UPDATE", B, A, [])),
    ("I then I", [(K1, None, "I", A, None), (K1, None, "I", B, None)], ("INSERT", B, None, ["INSERT after INSERT"])),
    ("U then I", [(K1, None, "U", B, A), (K1, None, "I", C, None)], ("UPDATE", C, A, ["INSERT after UPDATE"])),
    ("D then U", [(K1, None, "D", None, A), (K1, None, "U", B, A)], ("DELETE", A, A, ["UPDATE after DELETE"])),
    ("D then D", [(K1, None, "D", None, A), (K1, None, "D", None, A)], ("DELETE", A, A, ["DELETE after DELETE"])),
]


@pytest.mark.parametrize("name,ops,net", CELLS, ids=[c[0] for c in CELLS])
def test_combining_table(spark, name, ops, net):
    assertDataFrameEqual(_net(spark, ops), _expect(spark, [(K1, *net)]))


def test_single_operations_pass_through(spark):
    ops = [(K1, None, "I", A, None), (K2, None, "D", None, img(id=2, v="z"))]
    assertDataFrameEqual(
        _net(spark, ops),
        _expect(spark, [(K1, "INSERT", A, None, []), (K2, "DELETE", img(id=2, v="z"), img(id=2, v="z"), [])]),
    )


def test_key_change_is_delete_of_old_key_and_insert_of_new_key(spark):
    moved = img(id=2, v="a")
    ops = [(K1, None, "I", A, None), (K2, K1, "U", moved, A)]
    # Inserted then renamed in one transaction: nothing at the old key, an insert at the new one.
    assertDataFrameEqual(
        _net(spark, ops), _expect(spark, [(K1, "NONE", None, None, []), (K2, "INSERT", moved, None, [])])
    )


def test_key_change_of_an_existing_row(spark):
    moved = img(id=2, v="b")
    ops = [(K2, K1, "U", moved, A)]
    assertDataFrameEqual(
        _net(spark, ops), _expect(spark, [(K1, "DELETE", A, A, []), (K2, "INSERT", moved, None, [])])
    )


def test_operation_order_not_arrival_order_decides(spark):
    df = spark.createDataFrame(
        [("t1", K1, None, 2, "D", None, B), ("t1", K1, None, 1, "I", B, None), ("t1", K1, None, 3, "I", C, None)],
        OPS_SCHEMA,
    )
    out = combine(df, ["txn"]).select("txn", "key", "op", "row", "before", "anomalies")
    assertDataFrameEqual(out, _expect(spark, [(K1, "INSERT", C, None, [])]))
