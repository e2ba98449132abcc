"""Numbers reach the change stream, the replicas and the audit exactly as the source wrote them.

Spark's JSON parser reads a number into a STRING as a double: ``12345678901234567890.123456789``
becomes ``1.2345678901234567E19``, and a DECIMAL(38,9) replica would then hold
12345678901234567000. One pipeline run, bronze to gold, with a binlog source and a shadow source:
a price of 20 integer and 9 decimal digits is inserted, then changed in its last digit only.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.storage import DeltaRsStore
from silver_support import run_project

BIG, BIGGER = "12345678901234567890.123456789", "12345678901234567890.123456790"
DDL = "id BIGINT, price DECIMAL(38,9), label STRING"


def _flow(n: int, source: str, capture: str) -> dict:
    return {
        "data_flow_id": str(n), "data_flow_group": "g", "source_format": "cloudFiles",
        "source_details": {"source_database": "app", "source_table": "items", "source_schema_path": "items.ddl"},
        "bronze_database_dev": "bronze", "bronze_table": f"{source}_items",
        "silver_database_dev": "silver", "silver_table": f"{source}_items",
        "silver_cdc_apply_changes": {"keys": ["id"], "sequence_by": "__sequence", "scd_type": "1",
                                     "apply_as_deletes": "__op = 'DELETE'",
                                     "except_column_list": ["__op", "__sequence", "__commit_ts", "__txn_id"]},
        "cdc_lakehouse": {"capture": capture, "source": source},
    }


def _binlog(events: list[tuple[str, dict]]) -> str:
    """One transaction per (type, rows); numbers are written as ``"<price>"`` and unquoted below."""
    lines, pos = [], 4
    for xid, (kind, rows) in enumerate(events, start=1):
        for etype, extra in (("begin", {"thread_id": 1}),
                             (kind, {"schema": "app", "table": "items", "primary_key": ["id"], "rows": [rows]}),
                             ("commit", {"xid": xid})):
            lines.append(json.dumps({"server_id": 1, "file": "mysql-bin.000001", "pos": pos, "ts": 1772442000 + pos,
                                     "gtid": None, "type": etype, **extra}))
            pos += 100
    return "\n".join(lines) + "\n"


def _unquote_prices(text: str) -> str:
    for number in (BIG, BIGGER):
        text = text.replace(f'"{number}"', number)
    return text


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("exact_numbers")
    landing, lake = root / "landing", root / "lake"
    (root / "items.ddl").write_text(DDL)
    (root / "onboarding.yml").write_text(yaml.safe_dump([_flow(1, "my", "binlog"), _flow(2, "pg", "shadow")]))
    row = {"id": 1, "price": BIG, "label": "0.00"}
    binlog = _binlog([("insert", {"after": row}), ("update", {"before": row, "after": {**row, "price": BIGGER}})])
    (landing / "my" / "binlog").mkdir(parents=True)
    (landing / "my" / "binlog" / "mysql-bin.000001.jsonl").write_text(_unquote_prices(binlog))
    shadow = landing / "pg" / "shadow"
    (shadow / "_transactions").mkdir(parents=True)
    (shadow / "app.items").mkdir()
    (shadow / "_transactions" / "t.jsonl").write_text("".join(
        json.dumps({"txn_id": str(n), "end_ts": f"2026-03-02T09:00:0{n}.000000Z", "db_user": "u", "db_role": "r",
                    "client": None, "application": None}) + "\n" for n in (1, 2)))
    changes = [{"txn_id": "1", "op_ts": "2026-03-02T09:00:01.000000Z", "op_seq": 1, "op": "I", "key": {"id": 1},
                "old_key": None, "values": row},
               {"txn_id": "2", "op_ts": "2026-03-02T09:00:02.000000Z", "op_seq": 1, "op": "U", "key": {"id": 1},
                "old_key": None, "values": {"price": BIGGER}}]
    (shadow / "app.items" / "c.jsonl").write_text(_unquote_prices("".join(json.dumps(c) + "\n" for c in changes)))
    run_project(spark, landing, lake, root / "onboarding.yml")
    return lake


@pytest.mark.parametrize("source", ["my", "pg"])
def test_the_change_stream_keeps_the_numbers_as_written(spark, lake, source):
    changes = DeltaRsStore(spark, lake).read(f"silver.{source}_changes").orderBy("sequence").collect()
    assert [(c["op"], json.loads(c["row"], parse_float=str)["price"], c["changed_columns"]) for c in changes] == [
        ("INSERT", BIG, ["id", "label", "price"]), ("UPDATE", BIGGER, ["price"])]
    assert [json.loads(c["row"], parse_float=str)["label"] for c in changes] == ["0.00", "0.00"]


@pytest.mark.parametrize("source", ["my", "pg"])
def test_the_replica_holds_the_exact_decimal(spark, lake, source):
    replica = DeltaRsStore(spark, lake).read(f"silver.{source}_items")
    # No tolerance: by default the comparison lets decimals differ in their 17th digit.
    assertDataFrameEqual(replica, spark.createDataFrame([(1, Decimal(BIGGER), "0.00")], DDL), rtol=0, atol=0)


def test_the_audit_shows_the_values_as_written(spark, lake):
    audit = DeltaRsStore(spark, lake).read("gold.audit_log").filter("operation = 'UPDATE'")
    found = {r["source"]: r["changed_values"] for r in audit.collect()}
    change = {"price": {"before": BIG, "after": BIGGER}}
    assert {source: {c: v.asDict() for c, v in values.items()} for source, values in found.items()} == {
        "my": change, "pg": change}
