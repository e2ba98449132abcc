"""Quarantined shadow change lines hold their transactions (silver/shadow_gaps.py, issue 41 case 1):
none is applied without one of its change rows; a corrected line completes it."""

from __future__ import annotations

import json


from cdc_lakehouse.bronze.kinds import SHADOW_CHANGES, SHADOW_TRANSACTIONS
from cdc_lakehouse.bronze.landing import bronze_rows, checked_lines, quarantined_rows
from cdc_lakehouse.silver.change_stream import shadow_change_batch
from cdc_lakehouse.silver.shadow_gaps import marked, outstanding, without_held
from cdc_lakehouse.silver.transactions_table import shadow_transactions_table

FOLDER = "file:/landing/src/shadow"
ONBOARDED = ["app.t"]


def _op(key: int, a, op_seq: int = 1) -> str:
    return json.dumps({"txn_id": "Q1", "op_ts": "2026-03-02T09:00:01.000000Z", "op_seq": op_seq, "op": "I",
                       "key": {"id": key}, "old_key": None, "values": {"id": key, "a": a}})


def _landed(spark, kind, files: dict[str, list[str]]):
    """(accepted, quarantined) bronze rows of ``files`` (name -> lines) as bronze makes them."""
    data = [("".join(line + "\n" for line in lines), f"{FOLDER}/{name}") for name, lines in files.items()]
    lines = checked_lines(spark.createDataFrame(data, "value string, _source_file string"), kind, "src", ONBOARDED)
    return bronze_rows(lines.filter("_reason IS NULL"), kind), quarantined_rows(lines.filter("_reason IS NOT NULL"))


def _txns(spark):
    row = {"txn_id": "Q1", "end_ts": "2026-03-02T09:00:01.000001Z", "db_user": "u", "db_role": "r",
           "client": None, "application": None}
    return _landed(spark, SHADOW_TRANSACTIONS, {"_transactions/t1.jsonl": [json.dumps(row)]})[0]


def test_a_transaction_waits_for_its_quarantined_line_and_completes_with_the_corrected_one(spark):
    txns = _txns(spark)
    first = {"app.t/c1.jsonl": [_op(5, "five"), _op(6, float("nan"), op_seq=2)]}  # json.dumps writes NaN
    changes, quarantined = _landed(spark, SHADOW_CHANGES, first)
    held = outstanding(quarantined, changes, ONBOARDED)
    [row] = held.collect()  # the accepted row 5 of Q1 corrects nothing: another key, another op_seq
    assert row.txn_id == "Q1" and row.held_because.startswith("quarantined line 2 of file:/landing/src/shadow/app.t/c1.jsonl")
    ready = without_held(txns, held)
    stream = shadow_change_batch(changes, ready, changes, ready)
    assert stream.count() == 0  # not row 5 alone
    table = marked(shadow_transactions_table("src", ready, changes, stream), held)
    assert [(r.txn_id, r.status) for r in table.collect()] == [("Q1", "incomplete")]

    corrected, _ = _landed(spark, SHADOW_CHANGES, {"app.t/c2.jsonl": [_op(6, "six", op_seq=2)]})
    everything = changes.unionByName(corrected)
    assert outstanding(quarantined, everything, ONBOARDED).count() == 0
    net = shadow_change_batch(corrected, txns.limit(0), everything, without_held(txns, outstanding(quarantined, everything, ONBOARDED)))
    assert sorted(r.row for r in net.collect()) == ['{"id":5,"a":"five"}', '{"id":6,"a":"six"}']


def test_a_quarantined_line_of_a_table_no_flow_onboards_holds_nothing(spark):
    _, quarantined = _landed(spark, SHADOW_CHANGES, {"app.other/c1.jsonl": [_op(6, float("nan"))]})
    changes, _ = _landed(spark, SHADOW_CHANGES, {"app.t/c1.jsonl": [_op(5, "five")]})
    assert outstanding(quarantined, changes, ONBOARDED).count() == 0
