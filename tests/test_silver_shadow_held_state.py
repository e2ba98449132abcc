"""Shadow transaction assembly from held state (silver/shadow_held.py): a batch folds its new
change rows onto the held images instead of the whole history, holds change rows whose
transaction row has not arrived, and where input is late, recorded again or delivered again
gives what assembling from all of bronze gives.

One small lake, one table ``t`` (key ``id``), updated step by step (each step one pipeline
update of bronze and silver):

* ``held``: T1 inserts rows 1 and 2; T2 updates row 1, but T2's transaction row is not there;
* ``arrived``: T2's transaction row lands; T3 updates a column of row 2;
* ``renamed``: T4 changes row 1's key to 3;
* ``late``: L, committed between T2 and T3, updates row 2 (late: before row 2's image);
* ``recorded_again``: T3 is recorded again with a later end_ts;
* ``redelivered``: the first change file again, under another name;
* ``new``: T6 updates rows 2 and 3;
* ``snapshot``: a snapshot of ``t`` also holds row 4, which no change inserted: reconciled (a
  job step before the update), it lands as a correction;
* ``partial``: P7 updates only column ``a`` of row 4, which the shadow history never saw.

The transactions table (silver/shadow_transactions.py) is checked at every step against the one
computed from all of bronze and the change stream.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.contract.landing import table_folder
from cdc_lakehouse.silver import shadow_changes, shadow_held, shadow_transactions
from cdc_lakehouse.silver.change_stream import shadow_change_batch
from cdc_lakehouse.silver.transactions_table import shadow_transactions_table
from cdc_lakehouse.storage import LakeStore
from silver_support import run_project
from test_snapshot_support import reconcile, write_snapshot

SOURCE = "src"
STATE = f"silver.__flow_state_{SOURCE}_shadow_changes"
CHANGES, TXNS = f"bronze.{SOURCE}_shadow_changes", f"bronze.{SOURCE}_shadow_transactions"
STREAM = f"silver.{SOURCE}_changes"
CORRECTIONS = f"silver.{SOURCE}_snapshot_corrections"
EXCEPT = ["__op", "__sequence", "__commit_ts", "__txn_id"]


def _flow() -> dict:
    return {
        "data_flow_id": "1", "data_flow_group": "g", "source_format": "cloudFiles",
        "source_details": {"source_database": "app", "source_table": "t"},
        "bronze_database_dev": "bronze", "bronze_table": f"{SOURCE}_t",
        "silver_database_dev": "silver", "silver_table": f"{SOURCE}_t",
        "silver_cdc_apply_changes": {"keys": ["id"], "sequence_by": "__sequence", "scd_type": "1",
                                     "apply_as_deletes": "__op = 'DELETE'", "except_column_list": EXCEPT},
        "cdc_lakehouse": {"capture": "shadow", "source": SOURCE},
    }


def _txn(txn: str, at: str) -> dict:
    """``at``: seconds past 09:00, with microseconds."""
    return {"txn_id": txn, "end_ts": f"2026-03-02T09:00:{at}Z", "db_user": "u", "db_role": "r",
            "client": None, "application": None}


def _op(txn: str, at: str, op: str, key: int, values: dict | None = None, old: int | None = None) -> dict:
    return {"txn_id": txn, "op_ts": f"2026-03-02T09:00:{at}Z", "op_seq": 1, "op": op, "key": {"id": key},
            "old_key": None if old is None else {"id": old}, "values": values}


FIRST_CHANGES = [
    _op("T1", "01.000000", "I", 1, {"id": 1, "a": "x", "b": "b0"}),
    _op("T1", "01.000000", "I", 2, {"id": 2, "a": "y", "b": "b1"}),
    _op("T2", "02.000000", "U", 1, {"a": "x2"}),
]
# Per step: the files it lands, by folder ("_transactions" or the table's).
STEPS: list[tuple[str, dict[str, dict[str, list[dict]]]]] = [
    # X: an orphan change row of a table no flow onboards; it must not hold the source.
    ("held", {"_transactions": {"t1.jsonl": [_txn("T1", "01.000000")]}, "t": {"c1.jsonl": FIRST_CHANGES},
              "other": {"o1.jsonl": [_op("X", "01.500000", "I", 9, {"id": 9})]}}),
    ("arrived", {"_transactions": {"t2.jsonl": [_txn("T2", "02.000000"), _txn("T3", "03.000000")]},
                 "t": {"c2.jsonl": [_op("T3", "03.000000", "U", 2, {"b": "b2"})]}}),
    ("renamed", {"_transactions": {"t3.jsonl": [_txn("T4", "04.000000")]},
                 "t": {"c3.jsonl": [_op("T4", "04.000000", "U", 3, {"id": 3}, old=1)]}}),
    ("late", {"_transactions": {"t4.jsonl": [_txn("L", "02.500000")]},
              "t": {"c4.jsonl": [_op("L", "02.500000", "U", 2, {"a": "late"})]}}),
    ("recorded_again", {"_transactions": {"t5.jsonl": [_txn("T3", "09.000000")]}}),
    ("redelivered", {"t": {"c1-again.jsonl": FIRST_CHANGES}}),
    ("new", {"_transactions": {"t6.jsonl": [_txn("T6", "11.000000")]},
             "t": {"c6.jsonl": [_op("T6", "11.000000", "U", 2, {"a": "a6"}), _op("T6", "11.000000", "U", 3, {"b": "b6"})]}}),
    ("snapshot", {}),
    ("partial", {"_transactions": {"t7.jsonl": [_txn("P7", "12.000000")]},
                 "t": {"c7.jsonl": [_op("P7", "12.000000", "U", 4, {"a": "a7"})]}}),
]
SNAPSHOT = [{"id": 2, "a": "a6", "b": "b2"}, {"id": 3, "a": "x2", "b": "b6"}, {"id": 4, "a": "s4", "b": "t4"}]


@dataclass
class Step:
    files: list[str]  # the landing files' names
    replica: dict[int, tuple]  # id -> (a, b) in silver.src_t
    state: list  # the flow's held state
    transactions: list  # silver.src_transactions
    expected_transactions: list  # that table as computed from all of bronze and the change stream
    schema: object  # of both


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def held(spark, tmp_path_factory) -> tuple[Path, dict[str, Step]]:
    root = tmp_path_factory.mktemp("shadow_held")
    landing, lake = root / "landing", root / "lake"
    (root / "onboarding.yml").write_text(yaml.safe_dump([_flow()]))
    shadow = landing / SOURCE / "shadow"
    folders = {"_transactions": shadow / "_transactions", "t": shadow / table_folder("app", "t"),
               "other": shadow / table_folder("app", "other")}
    steps = {}
    for name, landed in STEPS:
        for folder, files in landed.items():
            for file, rows in files.items():
                _write(folders[folder] / file, rows)
        if name == "snapshot":
            write_snapshot(landing, "s1", SNAPSHOT, table="app.t", key=("id",), source=SOURCE)
            [reconciled] = reconcile(spark, landing, lake, root / "onboarding.yml")
            assert reconciled.counts["inserts"] == 1
        run_project(spark, landing, lake, root / "onboarding.yml", ("bronze", "silver"))
        store = LakeStore(spark, lake)
        replica = {r["id"]: (r["a"], r["b"]) for r in store.read(f"silver.{SOURCE}_t").collect()}
        onboarded = store.read(CHANGES).filter("_onboarded")
        expected = shadow_transactions_table(SOURCE, store.read(TXNS), onboarded, store.read(STREAM))
        steps[name] = Step([f for files in landed.values() for f in files], replica, store.read(STATE).collect(),
                           store.read(f"silver.{SOURCE}_transactions").select(*expected.columns).collect(),
                           expected.collect(), expected.schema)
    return lake, steps


def _pending(step: Step) -> list[str]:
    return sorted(r["txn_id"] for r in step.state if r["kind"] == shadow_held.PENDING)


def _images(step: Step) -> dict[str, dict | None]:
    return {r["key"]: r["image"] and dict(r["image"]) for r in step.state if r["kind"] == shadow_held.IMAGE}


def test_a_change_whose_transaction_row_has_not_arrived_is_held_then_applied(held):
    _, steps = held
    assert steps["held"].replica == {1: ("x", "b0"), 2: ("y", "b1")}
    assert _pending(steps["held"]) == ["T2"]
    assert steps["arrived"].replica[1] == ("x2", "b0")
    assert _pending(steps["arrived"]) == []


def test_partial_updates_rebuild_full_rows_from_the_held_images(held):
    _, steps = held
    assert steps["arrived"].replica == {1: ("x2", "b0"), 2: ("y", "b2")}
    assert _images(steps["arrived"]) == {'{"id":"1"}': {"id": "1", "a": '"x2"', "b": '"b0"'},
                                         '{"id":"2"}': {"id": "2", "a": '"y"', "b": '"b2"'}}


def test_a_key_change_continues_the_old_keys_held_image(held):
    _, steps = held
    assert steps["renamed"].replica == {2: ("y", "b2"), 3: ("x2", "b0")}
    images = _images(steps["renamed"])
    assert images['{"id":"1"}'] is None  # a tombstone: the old key's history ended at the key change
    assert images['{"id":"3"}'] == {"id": "3", "a": '"x2"', "b": '"b0"'}


def test_late_recorded_again_and_redelivered_input_then_new_input_apply_as_from_history(held):
    _, steps = held
    assert steps["late"].replica == {2: ("y", "b2"), 3: ("x2", "b0")}  # L is older than T3
    assert steps["recorded_again"].replica == {2: ("late", "b2"), 3: ("x2", "b0")}  # T3 now after L
    assert steps["redelivered"].replica == steps["recorded_again"].replica
    assert steps["new"].replica == {2: ("a6", "b2"), 3: ("x2", "b6")}
    assert _pending(steps["new"]) == []


def test_a_partial_update_of_a_row_a_snapshot_set_keeps_its_other_columns(spark, held):
    lake, steps = held
    assert steps["snapshot"].replica == {2: ("a6", "b2"), 3: ("x2", "b6"), 4: ("s4", "t4")}
    assert _images(steps["snapshot"])['{"id":"4"}'] == {"id": "4", "a": '"s4"', "b": '"t4"'}
    assert steps["partial"].replica == {2: ("a6", "b2"), 3: ("x2", "b6"), 4: ("a7", "t4")}
    change = LakeStore(spark, lake).read(STREAM).filter("txn_id = 'P7'").select("op", "row", "before").collect()
    assert [r.asDict() for r in change] == [{"op": "UPDATE", "row": '{"id":4,"a":"a7","b":"t4"}',
                                             "before": '{"id":4,"a":"s4","b":"t4"}'}]


def test_the_streaming_form_continues_the_snapshot_s_row_too(spark, held):
    """The streaming form (Databricks) folds the whole history with all corrections; run on the
    partial step's rows as its micro-batch, it emits what the held state did."""
    lake, steps = held
    store = LakeStore(spark, lake)
    changes, txns = store.read(CHANGES).filter("_onboarded"), store.read(TXNS)
    name = F.element_at(F.split("_source_file", "/"), -1)
    new = steps["partial"].files
    net = shadow_changes.streamed_net_changes(changes.filter(name.isin(new)), txns.filter(name.isin(new)),
                                              changes, txns, store.read(CORRECTIONS))
    assert [(r["row"], r["before"]) for r in net.collect()] == [
        ('{"id":4,"a":"a7","b":"t4"}', '{"id":4,"a":"s4","b":"t4"}')]


def test_the_change_stream_batch_by_batch_equals_the_one_assembled_from_all_of_bronze(spark, held):
    """Each update's changes as ``shadow_changes.net_changes`` (no flow state here) gives them
    from the bronze rows landed up to that update."""
    lake, steps = held
    store = LakeStore(spark, lake)
    changes, txns = store.read(CHANGES).filter("_onboarded"), store.read(TXNS)
    corrections = store.read(CORRECTIONS)
    name = F.element_at(F.split("_source_file", "/"), -1)
    expected, landed = None, []
    for step, _ in STEPS:
        new = steps[step].files
        landed += new
        seen = corrections if step in ("snapshot", "partial") else corrections.limit(0)
        batch = shadow_change_batch(changes.filter(name.isin(new)), txns.filter(name.isin(new)),
                                    changes.filter(name.isin(landed)), txns.filter(name.isin(landed)), (seen, seen))
        expected = batch if expected is None else expected.unionByName(batch)
    stream = store.read(f"silver.{SOURCE}_changes").filter("origin = 'shadow'")
    assertDataFrameEqual(stream, expected.select(*stream.columns))


def test_a_batch_of_new_rows_reads_no_bronze_change_row(spark, held):
    """The batch's operations come from its new rows and the state: a read of the bronze change
    rows would fail the batch."""
    lake, _ = held
    store = LakeStore(spark, lake)
    changes, txns = store.read(CHANGES), store.read(TXNS)
    unread = changes.filter(F.raise_error(F.lit("the bronze change rows were read")).isNull())
    template_change = changes.filter("txn_id = 'T6'").first().asDict()
    template_txn = txns.filter("txn_id = 'T6'").first().asDict()
    new_change = spark.createDataFrame(
        [{**template_change, "txn_id": "T7", "key": '{"id": 2}', "values": '{"b": "b7"}', "_source_file": "new", "_line": 1}],
        changes.schema)
    new_txn = spark.createDataFrame([{**template_txn, "txn_id": "T7", "_source_file": "new", "_line": 1}], txns.schema)
    new_txn = new_txn.withColumn("end_ts", F.col("end_ts") + F.expr("INTERVAL 1 SECOND"))
    net, kept = shadow_held.assemble(new_change, new_txn, unread, txns.unionByName(new_txn), store.read(STATE))
    rows = net.select("txn_id", "key", "op", "row", "before").collect()
    assert [r.asDict() for r in rows] == [{"txn_id": "T7", "key": '{"id":"2"}', "op": "UPDATE",
                                          "row": '{"id":2,"a":"a6","b":"b7"}', "before": '{"id":2,"a":"a6","b":"b2"}'}]
    images = {r["key"]: dict(r["image"]) for r in kept.filter(F.col("kind") == shadow_held.IMAGE).collect() if r["image"]}
    assert images['{"id":"2"}'] == {"id": "2", "a": '"a6"', "b": '"b7"'}


def test_the_transactions_table_step_by_step_equals_the_one_computed_from_everything(spark, held):
    _, steps = held
    for name, _ in STEPS:
        step = steps[name]
        assertDataFrameEqual(spark.createDataFrame(step.transactions, step.schema),
                             spark.createDataFrame(step.expected_transactions, step.schema))
    statuses = {r["txn_id"]: r["status"] for r in steps["held"].transactions}
    assert statuses == {"T1": "committed", "T2": "open"}  # not X, of a table no flow onboards
    again = {r["txn_id"]: r["commit_ts"].second for r in steps["recorded_again"].transactions}
    assert again["T3"] == 9


def test_a_batch_of_new_rows_reads_no_bronze_change_row_for_the_transactions_table(spark, held):
    """T8's change row and T7's transaction row are new, T7's change row is held: the rows
    come from the state and the new rows, and T8 is held with its first operation's time."""
    lake, _ = held
    store = LakeStore(spark, lake)
    changes, txns = store.read(CHANGES), store.read(TXNS)
    unread = changes.filter(F.raise_error(F.lit("the bronze change rows were read")).isNull())
    template = changes.filter("txn_id = 'T6'").first().asDict()
    new_change = spark.createDataFrame([{**template, "txn_id": "T8", "_source_file": "new", "_line": 2}], changes.schema)
    new_txn = spark.createDataFrame([{**txns.filter("txn_id = 'T6'").first().asDict(), "txn_id": "T7",
                                      "_source_file": "new", "_line": 1}], txns.schema)
    previous = spark.createDataFrame([("T7", template["op_ts"])], "txn_id string, begin_ts timestamp")
    stream = store.read(STREAM)
    emitted = stream.filter("txn_id = 'T6'").withColumn("txn_id", F.lit("T7"))
    rows, kept = shadow_transactions.batch_rows(SOURCE, new_txn, txns.unionByName(new_txn), new_change, unread,
                                                emitted, stream.unionByName(emitted), previous)
    got = {r["txn_id"]: (r["status"], r["begin_ts"] == template["op_ts"], r["rows_changed"]) for r in rows.collect()}
    assert got == {"T7": ("committed", True, 2), "T8": ("open", True, 0)}
    assert [r["txn_id"] for r in kept.collect()] == ["T8"]


def test_a_held_transactions_ddl_is_kept_until_its_transaction_row_arrives(spark, held):
    """T9's DROP TABLE row lands without its transaction row: the state keeps the statement,
    and the row T9 gets when its transaction row lands names it (gold.data_quality reads it)."""
    lake, _ = held
    store = LakeStore(spark, lake)
    changes, txns, stream = store.read(CHANGES), store.read(TXNS), store.read(STREAM)
    template = changes.filter("txn_id = 'T6'").first().asDict()
    drop = spark.createDataFrame([{**template, "txn_id": "T9", "op": "A", "key": "{}", "old_key": None,
                                   "values": '{"statement": "DROP TABLE app.t"}', "_source_file": "new", "_line": 1}],
                                 changes.schema)
    none, nothing_held = stream.limit(0), spark.createDataFrame([], "txn_id string, begin_ts timestamp")
    _, kept = shadow_transactions.batch_rows(SOURCE, txns.limit(0), txns, drop, changes.unionByName(drop),
                                             none, stream, nothing_held)
    assert [(r.txn_id, r.last_ddl.statement, r.last_ddl.table) for r in kept.collect()] == [("T9", "DROP TABLE app.t", "app.t")]
    arrived = spark.createDataFrame([{**txns.filter("txn_id = 'T6'").first().asDict(), "txn_id": "T9",
                                      "_source_file": "later", "_line": 1}], txns.schema)
    unread = changes.filter(F.raise_error(F.lit("the bronze change rows were read")).isNull())
    rows, kept = shadow_transactions.batch_rows(SOURCE, arrived, txns.unionByName(arrived), changes.limit(0), unread,
                                                none, stream, kept)
    assert [(r.txn_id, r.status, r.ddl, r.ddl_table) for r in rows.collect()] == [
        ("T9", "committed", "DROP TABLE app.t", "app.t")]
    assert kept.count() == 0
