"""Shadow capture edge cases the live end-to-end run found, on a tiny hand-written landing:

* a table whose name needs escaping in a folder name (space, quotes, ``;``) is still the
  onboarded table (the file path is a URI, and the capture %-escapes names);
* a row that changed key twice (1 -> 2 -> 3) and is then partially updated in a later run is
  rebuilt from its whole history, not from the last key only;
* a transaction of a user without a role keeps a NULL role (``unknown`` is for "no one knows");
* without ``op_seq``, operations at the same ``op_ts`` combine in log order, and two of them that
  differ only in their values are two operations, also when their file is delivered again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.contract.landing import table_folder
from cdc_lakehouse.storage import LakeStore
from silver_support import run_project

SOURCE, ODD = "src", 'odd "t"; --'
EXCEPT = ["__op", "__sequence", "__commit_ts", "__txn_id"]


def _flow(n: int, table: str, silver_table: str) -> dict:
    return {
        "data_flow_id": str(n), "data_flow_group": "g", "source_format": "cloudFiles",
        "source_details": {"source_database": "app", "source_table": table},
        "bronze_database_dev": "bronze", "bronze_table": f"{SOURCE}_{silver_table}",
        "silver_database_dev": "silver", "silver_table": f"{SOURCE}_{silver_table}",
        "silver_cdc_apply_changes": {"keys": ["id"], "sequence_by": "__sequence", "scd_type": "1",
                                     "apply_as_deletes": "__op = 'DELETE'", "except_column_list": EXCEPT},
        "cdc_lakehouse": {"capture": "shadow", "source": SOURCE},
    }


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _txn(n: int, role: str | None = "writer") -> dict:
    return {"txn_id": str(n), "end_ts": f"2026-03-02T09:00:0{n}.000000Z", "db_user": f"u{n}", "db_role": role,
            "client": None, "application": None}


def _op(n: int, op: str, key: dict, old: dict | None = None, values: dict | None = None) -> dict:
    return {"txn_id": str(n), "op_ts": f"2026-03-02T09:00:0{n}.000000Z", "op_seq": 1, "op": op, "key": key,
            "old_key": old, "values": values}


def _untimed(op: str, key: dict, at: str, values: dict | None = None) -> dict:
    """An operation of transaction 5 without op_seq, at ``at`` past 09:00:05."""
    return {"txn_id": "5", "op_ts": f"2026-03-02T09:00:05.{at}Z", "op_seq": None, "op": op, "key": key,
            "old_key": None, "values": values}


# Row 1 is inserted and deleted at the same time (nothing, in log order); row 2 gets two updates
# at the same time that differ only in their values.
SAME_TIME = [
    _untimed("I", {"id": 1}, "100000", {"id": 1, "a": "x", "b": "x"}),
    _untimed("D", {"id": 1}, "100000"),
    _untimed("I", {"id": 2}, "000001", {"id": 2, "a": "x", "b": "x"}),
    _untimed("U", {"id": 2}, "100000", {"a": "y"}),
    _untimed("U", {"id": 2}, "100000", {"b": "z"}),
    # Row 3: x, then y, then x again at one time: three updates, the last one wins.
    _untimed("I", {"id": 3}, "000001", {"id": 3, "a": "a0", "b": "b"}),
    _untimed("U", {"id": 3}, "100000", {"a": "x"}),
    _untimed("U", {"id": 3}, "100000", {"a": "y"}),
    _untimed("U", {"id": 3}, "100000", {"a": "x"}),
]


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("shadow_edges")
    landing, lake = root / "landing", root / "lake"
    (root / "onboarding.yml").write_text(yaml.safe_dump([_flow(1, "t", "t"), _flow(2, ODD, "odd_t"), _flow(3, "n", "n")]))
    shadow = landing / SOURCE / "shadow"
    _write(shadow / "_transactions" / "t1.jsonl", [_txn(1), _txn(2), _txn(3, role=None), _txn(5)])
    _write(shadow / table_folder("app", "n") / "c1.jsonl", SAME_TIME)
    _write(shadow / table_folder("app", "t") / "c1.jsonl", [
        _op(1, "I", {"id": 1}, None, {"id": 1, "a": "x", "b": "b0"}),
        _op(2, "U", {"id": 2}, {"id": 1}, {"id": 2}),
        _op(3, "U", {"id": 3}, {"id": 2}, {"id": 3}),
    ])
    _write(shadow / table_folder("app", ODD) / "c1.jsonl", [_op(1, "I", {"id": 7}, None, {"id": 7, "a": "odd"})])
    run_project(spark, landing, lake, root / "onboarding.yml", ("bronze", "silver"))
    _write(shadow / "_transactions" / "t2.jsonl", [_txn(4)])
    _write(shadow / table_folder("app", "t") / "c2.jsonl", [_op(4, "U", {"id": 3}, None, {"b": "y"})])
    _write(shadow / table_folder("app", "n") / "c1-again.jsonl", SAME_TIME)
    run_project(spark, landing, lake, root / "onboarding.yml", ("bronze", "silver"))
    return lake


def test_a_table_name_that_needs_escaping_is_replicated(spark, lake):
    replica = LakeStore(spark, lake).read("silver.src_odd_t")
    assertDataFrameEqual(replica, spark.createDataFrame([(7, "odd")], "id long, a string"))


def test_a_row_is_rebuilt_along_its_whole_chain_of_key_changes(spark, lake):
    replica = LakeStore(spark, lake).read("silver.src_t").select("id", "a", "b")
    assertDataFrameEqual(replica, spark.createDataFrame([(3, "x", "y")], "id long, a string, b string"))


def test_a_user_without_a_role_keeps_a_null_role(spark, lake):
    txns = LakeStore(spark, lake).read("silver.src_transactions").select("txn_id", "user", "role")
    expected = spark.createDataFrame([("1", "u1", "writer"), ("2", "u2", "writer"), ("3", "u3", None),
                                      ("4", "u4", "writer"), ("5", "u5", "writer")], "txn_id string, user string, role string")
    assertDataFrameEqual(txns, expected)


def test_operations_at_the_same_time_combine_in_log_order(spark, lake):
    store = LakeStore(spark, lake)
    replica = store.read("silver.src_n").select("id", "a", "b")
    assertDataFrameEqual(replica, spark.createDataFrame([(2, "y", "z"), (3, "x", "b")], "id long, a string, b string"))
    net = store.read("silver.src_changes").filter("`table` = 'n' AND op <> 'NONE'").select("key", "op", "op_count")
    expected = spark.createDataFrame([('{"id":"2"}', "INSERT", 3), ('{"id":"3"}', "INSERT", 4)], "key string, op string, op_count long")
    assertDataFrameEqual(net.distinct(), expected)
