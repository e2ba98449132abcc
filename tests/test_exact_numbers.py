"""Numbers reach the change stream, the replicas and the audit exactly as the source wrote them.

Spark's JSON parser reads a number into a STRING as a double: ``12345678901234567890.123456789``
becomes ``1.2345678901234567E19``, and a DECIMAL(38,9) replica would then hold
12345678901234567000. One pipeline run, bronze to gold, with a binlog source and a shadow source:
a price of 20 integer and 9 decimal digits is inserted, then changed in its last digit only.
Keys too: two rows whose DECIMAL keys differ in their 20th decimal, inserted in one transaction,
stay two rows (read as doubles, their keys would be one, and the transaction's net change one
insert).
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.storage import LakeStore
from silver_support import GOLD_WITHOUT_HEALTH, run_project

BIG, BIGGER = "12345678901234567890.123456789", "12345678901234567890.123456790"
DDL = "id BIGINT, price DECIMAL(38,9), label STRING"
CODE, NEXT_CODE = "1.00000000000000000001", "1.00000000000000000002"
CODES_DDL = "code DECIMAL(38,20), label STRING"
KEY = {"items": "id", "codes": "code"}


def _flow(n: int, source: str, capture: str, table: str = "items") -> dict:
    return {
        "data_flow_id": str(n), "data_flow_group": "g", "source_format": "cloudFiles",
        "source_details": {"source_database": "app", "source_table": table, "source_schema_path": f"{table}.ddl"},
        "bronze_database_dev": "bronze", "bronze_table": f"{source}_{table}",
        "silver_database_dev": "silver", "silver_table": f"{source}_{table}",
        "silver_cdc_apply_changes": {"keys": [KEY[table]], "sequence_by": "__sequence", "scd_type": "1",
                                     "apply_as_deletes": "__op = 'DELETE'",
                                     "except_column_list": ["__op", "__sequence", "__commit_ts", "__txn_id"]},
        "cdc_lakehouse": {"capture": capture, "source": source},
    }


def _binlog(events: list[tuple[str, str, list[dict]]]) -> str:
    """One transaction per (type, table, rows); numbers are written as ``"<number>"`` and unquoted below."""
    lines, pos = [], 4
    for xid, (kind, table, rows) in enumerate(events, start=1):
        for etype, extra in (("begin", {"thread_id": 1}),
                             (kind, {"schema": "app", "table": table, "primary_key": [KEY[table]], "rows": rows}),
                             ("commit", {"xid": xid})):
            lines.append(json.dumps({"server_id": 1, "file": "mysql-bin.000001", "pos": pos, "ts": 1772442000 + pos,
                                     "gtid": None, "type": etype, **extra}))
            pos += 100
    return "\n".join(lines) + "\n"


def _unquote_prices(text: str) -> str:
    for number in (BIG, BIGGER, CODE, NEXT_CODE):
        text = text.replace(f'"{number}"', number)
    return text


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("exact_numbers")
    landing, lake = root / "landing", root / "lake"
    (root / "items.ddl").write_text(DDL)
    (root / "codes.ddl").write_text(CODES_DDL)
    flows = [_flow(1, "my", "binlog"), _flow(2, "pg", "shadow"), _flow(3, "my", "binlog", "codes"),
             _flow(4, "pg", "shadow", "codes")]
    (root / "onboarding.yml").write_text(yaml.safe_dump(flows))
    row = {"id": 1, "price": BIG, "label": "0.00"}
    codes = [{"code": CODE, "label": "a"}, {"code": NEXT_CODE, "label": "b"}]
    binlog = _binlog([("insert", "items", [{"after": row}]),
                      ("update", "items", [{"before": row, "after": {**row, "price": BIGGER}}]),
                      ("insert", "codes", [{"after": code} for code in codes])])
    (landing / "my" / "binlog").mkdir(parents=True)
    (landing / "my" / "binlog" / "mysql-bin.000001.jsonl").write_text(_unquote_prices(binlog))
    shadow = landing / "pg" / "shadow"
    (shadow / "_transactions").mkdir(parents=True)
    (shadow / "app.items").mkdir()
    (shadow / "_transactions" / "t.jsonl").write_text("".join(
        json.dumps({"txn_id": str(n), "end_ts": f"2026-03-02T09:00:0{n}.000000Z", "db_user": "u", "db_role": "r",
                    "client": None, "application": None}) + "\n" for n in (1, 2, 3)))
    changes = [{"txn_id": "1", "op_ts": "2026-03-02T09:00:01.000000Z", "op_seq": 1, "op": "I", "key": {"id": 1},
                "old_key": None, "values": row},
               {"txn_id": "2", "op_ts": "2026-03-02T09:00:02.000000Z", "op_seq": 1, "op": "U", "key": {"id": 1},
                "old_key": None, "values": {"price": BIGGER}}]
    (shadow / "app.items" / "c.jsonl").write_text(_unquote_prices("".join(json.dumps(c) + "\n" for c in changes)))
    inserts = [{"txn_id": "3", "op_ts": "2026-03-02T09:00:03.000000Z", "op_seq": n, "op": "I",
                "key": {"code": code["code"]}, "old_key": None, "values": code} for n, code in enumerate(codes, start=1)]
    (shadow / "app.codes").mkdir()
    (shadow / "app.codes" / "c.jsonl").write_text(_unquote_prices("".join(json.dumps(c) + "\n" for c in inserts)))
    run_project(spark, landing, lake, root / "onboarding.yml", GOLD_WITHOUT_HEALTH)
    return lake


@pytest.mark.parametrize("source", ["my", "pg"])
def test_the_change_stream_keeps_the_numbers_as_written(spark, lake, source):
    changes = LakeStore(spark, lake).read(f"silver.{source}_changes").filter("table = 'items'").orderBy("sequence").collect()
    assert [(c["op"], json.loads(c["row"], parse_float=str)["price"], c["changed_columns"]) for c in changes] == [
        ("INSERT", BIG, ["id", "label", "price"]), ("UPDATE", BIGGER, ["price"])]
    assert [json.loads(c["row"], parse_float=str)["label"] for c in changes] == ["0.00", "0.00"]


@pytest.mark.parametrize("source", ["my", "pg"])
def test_the_replica_holds_the_exact_decimal(spark, lake, source):
    replica = LakeStore(spark, lake).read(f"silver.{source}_items")
    # No tolerance: by default the comparison lets decimals differ in their 17th digit.
    assertDataFrameEqual(replica, spark.createDataFrame([(1, Decimal(BIGGER), "0.00")], DDL), rtol=0, atol=0)


@pytest.mark.parametrize("source", ["my", "pg"])
def test_keys_that_differ_past_a_doubles_digits_stay_two_rows(spark, lake, source):
    store = LakeStore(spark, lake)
    changes = store.read(f"silver.{source}_changes").filter("table = 'codes'")
    assert sorted((c["op"], c["key"]) for c in changes.collect()) == [
        ("INSERT", f'{{"code":"{CODE}"}}'), ("INSERT", f'{{"code":"{NEXT_CODE}"}}')]
    expected = spark.createDataFrame([(Decimal(CODE), "a"), (Decimal(NEXT_CODE), "b")], CODES_DDL)
    assertDataFrameEqual(store.read(f"silver.{source}_codes"), expected, rtol=0, atol=0)
    assert store.read(f"silver.{source}_anomalies").count() == 0


def test_the_audit_shows_the_values_as_written(spark, lake):
    audit = LakeStore(spark, lake).read("gold.audit_log").filter("operation = 'UPDATE'")
    found = {r["source"]: r["changed_values"] for r in audit.collect()}
    change = {"price": {"before": BIG, "after": BIGGER}}
    assert {source: {c: v.asDict() for c, v in values.items()} for source, values in found.items()} == {
        "my": change, "pg": change}
