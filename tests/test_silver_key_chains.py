"""Chains of key changes in shadow change rows (issue 38, case 3): a row whose key changes many
times, within one transaction or over several, keeps its other columns, at any chain length.

Shadow updates carry only the changed columns (CONTRACT §2.4), so the row after a key change is
the old key's row with the change applied; silver rebuilds it fold round by fold round, one
level of the chain per round. The batch form (local runtime) finds how many rounds a batch
needs; the streaming form (Databricks) plans a fixed number and marks the changes of a row at
the end of a longer chain with an anomaly instead of showing a wrong row silently.

The reference is a replay of the operations on a dict. The pipeline's side is the emitted net
changes, replayed in commit order (one per transaction and row, so order inside a transaction
does not matter).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from property_settings import examples

from cdc_lakehouse.silver import shadow_changes as sc

CHANGES_DDL = ("_source string, txn_id string, schema string, table string, op_ts timestamp, op_seq long, "
               "op string, key string, old_key string, values string, _source_file string, _line long")
TXNS_DDL = "_source string, txn_id string, end_ts timestamp, db_user string, db_role string"
START = datetime(2026, 3, 2, 9, 0, 0)

# A step: ("rekey", new key) or ("a" / "b", value); and whether a new transaction starts with it.
step = st.tuples(st.one_of(st.tuples(st.just("rekey"), st.integers(0, 5)),
                           st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 99))), st.booleans())


def landed(spark, steps: list[tuple[tuple[str, int], bool]]):
    """Bronze change and transaction rows of: insert row 0, then ``steps``; and the replay."""
    state, current = {0: {"id": 0, "a": -1, "b": -1}}, 0
    txn, seq, changes = 0, 0, [("I", 0, None, {"id": 0, "a": -1, "b": -1}, 0, 0)]
    for (kind, value), new_txn in steps:
        txn, seq = (txn + 1, 0) if new_txn else (txn, seq + 1)
        if kind == "rekey":
            if value == current:
                continue  # not a key change
            state[value] = {**state.pop(current), "id": value}
            changes.append(("U", value, current, {"id": value}, txn, seq))
            current = value
        else:
            state[current][kind] = value
            changes.append(("U", current, None, {kind: value}, txn, seq))
    rows = [("src", f"T{t:02}", "app", "t", START + timedelta(seconds=t, microseconds=s), s, op,
             json.dumps({"id": key}), None if old is None else json.dumps({"id": old}), json.dumps(values), "c.jsonl", i)
            for i, (op, key, old, values, t, s) in enumerate(changes)]
    txns = [("src", f"T{t:02}", START + timedelta(seconds=t, milliseconds=900), "u", "r") for t in range(txn + 1)]
    return spark.createDataFrame(rows, CHANGES_DDL), spark.createDataFrame(txns, TXNS_DDL), state


def replayed(net) -> dict[int, dict]:
    """The emitted net changes applied in commit order."""
    state: dict[int, dict] = {}
    for r in net.orderBy("txn_id").collect():
        key = int(json.loads(r["key"])["id"])
        if r["op"] == "DELETE":
            state.pop(key)
        elif r["op"] in ("INSERT", "UPDATE"):
            state[key] = json.loads(r["row"])
    return state


def batch_form(changes, txns):
    return sc.net_changes(changes, txns, changes, txns)


@settings(max_examples=examples(6), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=24))
def test_any_chain_of_key_changes_keeps_the_rows_columns(spark, steps):
    changes, txns, expected = landed(spark, steps)
    assert replayed(batch_form(changes, txns)) == expected


def test_a_chain_of_twenty_key_changes_in_one_transaction(spark):
    steps = [(("a", 7), False)] + [(("rekey", k), False) for k in range(1, 21)]
    changes, txns, expected = landed(spark, steps)
    assert expected == {20: {"id": 20, "a": 7, "b": -1}}
    assert replayed(batch_form(changes, txns)) == expected


def test_a_chain_of_twenty_key_changes_over_twenty_transactions(spark):
    steps = [(("rekey", k), True) for k in range(1, 21)] + [(("b", 3), True)]
    changes, txns, expected = landed(spark, steps)
    assert replayed(batch_form(changes, txns)) == expected


def _streaming_fold(changes, txns):
    """The streaming form's fold, planned without looking at the data, on a batch."""
    ops = sc.operations(sc.distinct_changes(changes), sc.latest_transactions(txns))
    return sc.flag_long_chains(sc.emitted(sc.full_rows(ops, streaming=True)), ops, sc.KEY_CHANGE_ROUNDS)


def test_the_streaming_form_marks_a_chain_longer_than_it_plans_for(spark):
    short = sc.KEY_CHANGE_ROUNDS - 1  # the longest chain it rebuilds
    changes, txns, expected = landed(spark, [(("rekey", k), False) for k in range(1, short + 1)])
    net = _streaming_fold(changes, txns)
    assert replayed(net) == expected
    assert all(sc.CHAIN_TOO_LONG not in r["anomalies"] for r in net.collect())
    changes, txns, _ = landed(spark, [(("rekey", k), True) for k in range(1, short + 3)])
    flagged = {int(json.loads(r["key"])["id"]) for r in _streaming_fold(changes, txns).collect()
               if sc.CHAIN_TOO_LONG in r["anomalies"]}
    assert flagged == {short + 1, short + 2}
