"""Bronze over crafted landing folders: every landed line is a bronze row or a quarantined line,
kept as the source wrote it, with where it came from (issue 3, CONTRACT §2)."""

from __future__ import annotations

import gzip
import json
from functools import reduce
from pathlib import Path

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.bronze.summary import not_onboarded_warnings
from cdc_lakehouse.runtime.runner import run_pipeline
from cdc_lakehouse.storage import DeltaRsStore, LakeStore
from lake_helpers import REPO

BRONZE = str(REPO / "src/bronze/*.py")
GOLD = str(REPO / "src/gold/landing_summary.py")
ONBOARDING = REPO / "tests/data/bronze/onboarding.yml"
BINLOG_ONLY = REPO / "tests/data/bronze/onboarding_binlog.yml"


def compact(**fields) -> str:
    return json.dumps(fields, separators=(",", ":"))


def event(pos, type_, file="mysql-bin.000001", **fields) -> str:
    return compact(server_id=1, file=file, pos=pos, ts=1772442000 + pos // 100, type=type_, **fields)


def write(landing: Path, relative: str, lines: list[str], end: str = "\n") -> None:
    path = landing / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(line + end for line in lines).encode()
    path.write_bytes(gzip.compress(data) if relative.endswith(".gz") else data)


def run(spark, landing, lake, onboarding=ONBOARDING, gold=False):
    sources = [BRONZE, *([GOLD] if gold else [])]
    conf = {"cdc_lakehouse.landing_path": str(landing), "cdc_lakehouse.onboarding_file": str(onboarding)}
    return run_pipeline(spark, sources, lake, conf)


# -- the crafted landing ----------------------------------------------------------------------
INSERT_ANN = (
    '{"server_id":1,"file":"mysql-bin.000001","pos":120,"ts":1772442001,"type":"insert","schema":"shop",'
    '"table":"customers","primary_key":["customer_id"],"rows":[{"after":{"customer_id":1,"name":"Ann",'
    '"balance":0.00,"credit":12345678901234567.891}}]}'
)
ROWS_ANN = '[{"after":{"customer_id":1,"name":"Ann","balance":0.00,"credit":12345678901234567.891}}]'
ROWS_PHONE = (
    '[{"before":{"customer_id":1,"name":"Ann","balance":0.00,"phone":null},'
    '"after":{"customer_id":1,"name":"Ann","balance":10.50,"phone":"+41 44 000 00 00"}}]'
)
KEY = {"primary_key": ["order_id"]}
BINLOG_1 = [
    event(4, "begin", thread_id=11),
    INSERT_ANN,
    '{"server_id":1,"file":"mysql-bin.000001","pos":',  # 3: cut short, in the middle of the file
    "",  # 4
    event(300, "commit", xid=10),
    event(400, "ddl", thread_id=15, schema="shop", table="customers",
          query="ALTER TABLE shop.customers ADD COLUMN phone varchar(20)"),
    event(500, "begin", thread_id=12, annotate="checkout"),  # 7: a field the contract does not know
    event(600, "update", schema="shop", table="customers", primary_key=["customer_id"], rows=[])
    .replace('"rows":[]', f'"rows":{ROWS_PHONE}'),
    event(700, "heartbeat"),  # 9
    event(800, "insert", schema="shop", table="orders", rows=[{"after": {"order_id": 7}}]),  # 10
    event(900, "insert", schema="shop", table="orders", **KEY, rows=[{"after": {"status": "new"}}]),  # 11
    event(1000, "delete", schema="shop", table="orders", **KEY, rows=[{"before": {"order_id": 7}}])
    .replace('"pos":1000', '"pos":"1000"'),  # 12
    event(1100, "insert", schema="shop", table="audit_log", primary_key=["id"], rows=[{"after": {"id": 1}}]),
    event(1200, "commit", xid=11),
]
BINLOG_2 = [
    event(4, "begin", file="mysql-bin.000002", thread_id=11),
    event(100, "insert", file="mysql-bin.000002", schema="shop", table="orders", **KEY,
          rows=[{"after": {"order_id": 8, "total": 1}}]),
    event(200, "commit", file="mysql-bin.000002", xid=12),
]
SESSIONS = [
    compact(server_id=1, thread_id=11, connected_at="2026-03-02T08:55:00Z", user="etl", role="etl_batch"),
    compact(server_id=1, thread_id=12, connected_at="2026-03-02T10:57:13.123456+02:00", user="alice", role=None),
    compact(server_id=1, thread_id=13, connected_at="2026-03-02 08:58:02", user="bob", role="app"),
    compact(server_id=1, connected_at="2026-03-02T08:59:00Z", user="carol", role="support"),
    compact(server_id=1, thread_id=14, connected_at="yesterday", user="dave", role="admin"),
]
TXN = dict(db_user="etl", db_role="etl_batch", client="10.0.4.9", application="nightly-etl")
TRANSACTIONS = [
    compact(txn_id="7301", end_ts="2026-03-02T09:00:11.222694Z", **TXN),
    compact(end_ts="2026-03-02T09:00:12Z", **TXN),
    compact(txn_id="7302", end_ts="2026-02-30T09:00:00Z", **TXN),
    compact(txn_id="7301", end_ts="2026-03-02T09:00:13.000001Z", **TXN),  # recorded again, later
]


def change(op, key, values=None, old_key=None, **fields) -> str:
    base = dict(txn_id="7301", op_ts="2026-03-02T09:00:11.100001Z", op_seq=1, op=op, key=key)
    return compact(**{**base, "old_key": old_key, "values": values, **fields})


ORDER_CHANGES = [
    '{"txn_id":"7301","op_ts":"2026-03-02T09:00:11.100001Z","op_seq":1,"op":"I","key":{"order_id":1},'
    '"old_key":null,"values":{"order_id":1,"status":"new","total":0.00}}',
    change("U", {"order_id": 1}, {"total": 99.9}, op_seq=2),
    change("D", {"order_id": 1}, op_seq=3),
    change("X", {"order_id": 1}, {"total": 1}),  # 4
    change("U", None, {"total": 1}),  # 5
    change("U", {"order_id": 1}, {"total": 1}, txn_id=None),  # 6
    change("I", {"order_id": 2}, {"status": "new"}),  # 7
    change("U", {"order_id": 2}, {"total": 1}, op_ts="not a time"),  # 8
    "not json",  # 9
    change("U", {"order_id": 3}, {"order_id": 3}, old_key={"order_id": 2}, txn_id="7302"),
]
SNAPSHOT_PART = ['{"customer_id":1,"name":"Ann","balance":0.00}', "[1, 2]", '{"customer_id":2,"name":"Bob"}']

CRAFTED = {
    "shop/binlog/mysql-bin.000001.jsonl": (BINLOG_1, "\n"),
    "shop/binlog/mysql-bin.000002.jsonl.gz": (BINLOG_2, "\n"),
    "shop/binlog/mysql-bin.000002.retry.jsonl": (BINLOG_2, "\n"),  # delivered twice
    "shop/binlog/mysql-bin.000003.jsonl": ([event(4, "begin", file="mysql-bin.000003"),
                                            event(50, "rollback", file="mysql-bin.000003")], "\r\n"),
    "shop/binlog/empty.jsonl": ([], "\n"),
    "shop/sessions/sessions-0001.jsonl": (SESSIONS, "\n"),
    "shop/snapshot/shop.customers/snap-1/part-00000.jsonl": (SNAPSHOT_PART, "\n"),
    "shop/snapshot/shop.audit_log/snap-2/part-00000.jsonl.gz": (['{"id":1}'], "\n"),
    "shop_pg/shadow/_transactions/txns-0001.jsonl": (TRANSACTIONS, "\n"),
    "shop_pg/shadow/shop.orders/changes-0001.jsonl": (ORDER_CHANGES, "\n"),
    "shop_pg/shadow/shop.audit_log/changes-0001.jsonl": ([change("I", {"id": 1}, {"id": 1})], "\n"),
}
KIND_OF_FILE = {
    "shop/binlog/": "shop_binlog_events", "shop/sessions/": "shop_sessions",
    "shop/snapshot/": "shop_snapshot_rows", "shop_pg/shadow/_transactions/": "shop_pg_shadow_transactions",
    "shop_pg/shadow/shop.": "shop_pg_shadow_changes",
}


# Landed where no flow reads: a source the onboarding does not name, a shadow folder of the
# binlog source shop, and a file beside the source folders.
UNREAD = {
    "crm/binlog/mysql-bin.000001.jsonl": [event(4, "begin")],
    "crm/sessions/s.jsonl": [],
    "shop/shadow/shop.customers/changes-0001.jsonl": ['{"txn_id":"1"}'],
    "notes.txt": ["landing of the crafted tests"],
}


@pytest.fixture(scope="module")
def crafted(spark, tmp_path_factory):
    # Paths are literal: a landing under brackets and braces (no glob pattern), a lake under a
    # space (delta-rs %-encodes it).
    root = tmp_path_factory.mktemp("crafted")
    landing, lake = root / "a [b] {c}" / "landing", root / "l m" / "lake"
    for relative, (lines, end) in CRAFTED.items():
        write(landing, relative, lines, end)
    for relative, lines in UNREAD.items():
        write(landing, relative, lines)
    result = run(spark, landing, lake, gold=True)
    return LakeStore(spark, lake), result


def test_a_lake_path_delta_rs_cannot_store_is_a_clear_error(spark, tmp_path):
    with pytest.raises(ValueError, match=r"cannot hold Delta tables under a path with '\[' or '\]'"):
        DeltaRsStore(spark, tmp_path / "lake [1]")


def relative_file():
    return F.regexp_extract("_source_file", r"/landing/(.*)$", 1).alias("file")


def landed_lines(spark, table: str):
    expected = [
        (relative, i)
        for relative, (lines, _) in CRAFTED.items()
        if next(t for prefix, t in KIND_OF_FILE.items() if relative.startswith(prefix)) == table
        for i in range(1, len(lines) + 1)
    ]
    return spark.createDataFrame(expected, "file string, _line long")


# -- accounting -------------------------------------------------------------------------------
@pytest.mark.parametrize("table", sorted(set(KIND_OF_FILE.values())))
def test_every_landed_line_is_a_bronze_row_or_quarantined(spark, crafted, table):
    store, _ = crafted
    kept = store.read(f"bronze.{table}").select(relative_file(), "_line")
    quarantined = store.read(f"bronze.{table}_quarantine").select(relative_file(), "_line")
    assertDataFrameEqual(kept.unionByName(quarantined), landed_lines(spark, table))


def test_quarantine_keeps_the_raw_line_and_says_why(spark, crafted):
    store, _ = crafted
    f1, changes = "shop/binlog/mysql-bin.000001.jsonl", "shop_pg/shadow/shop.orders/changes-0001.jsonl"
    expected = [
        ("shop_binlog_events", f1, 3, BINLOG_1[2], "unparseable line: not one JSON object"),
        ("shop_binlog_events", f1, 4, "", "blank line"),
        ("shop_binlog_events", f1, 9, BINLOG_1[8], "unknown type heartbeat"),
        ("shop_binlog_events", f1, 10, BINLOG_1[9], "row event without primary_key"),
        ("shop_binlog_events", f1, 11, BINLOG_1[10],
         "row images without every primary_key column (insert: after, update: both, delete: before)"),
        ("shop_binlog_events", f1, 12, BINLOG_1[11], "wrong type or unparseable value: pos"),
        *[("shop_sessions", "shop/sessions/sessions-0001.jsonl", line, SESSIONS[line - 1], why)
          for line, why in [(3, "wrong type or unparseable value: connected_at"), (4, "missing thread_id"),
                            (5, "wrong type or unparseable value: connected_at")]],
        *[("shop_pg_shadow_transactions", "shop_pg/shadow/_transactions/txns-0001.jsonl", line,
           TRANSACTIONS[line - 1], why)
          for line, why in [(2, "missing txn_id"), (3, "wrong type or unparseable value: end_ts")]],
        *[("shop_pg_shadow_changes", changes, line, ORDER_CHANGES[line - 1], why)
          for line, why in [(4, "unknown op X"), (5, "missing key"), (6, "missing txn_id"),
                            (7, "insert values without every key column"),
                            (8, "wrong type or unparseable value: op_ts"),
                            (9, "unparseable line: not one JSON object: expected '{' at character 0")]],
        ("shop_snapshot_rows", "shop/snapshot/shop.customers/snap-1/part-00000.jsonl", 2, "[1, 2]",
         "unparseable line: not one JSON object: expected '{' at character 0"),
    ]
    actual = reduce(DataFrame.unionByName, [
        store.read(f"bronze.{t}_quarantine").select(F.lit(t).alias("table"), relative_file(), "_line", "_raw", "_reason")
        for t in sorted(set(KIND_OF_FILE.values()))
    ])
    assertDataFrameEqual(
        actual,
        spark.createDataFrame(expected, "table string, file string, _line long, _raw string, _reason string"),
    )


# -- what bronze keeps ------------------------------------------------------------------------
def test_row_images_keep_the_source_text_and_columns_added_by_ddl(crafted):
    store, _ = crafted
    rows = dict(
        store.read("bronze.shop_binlog_events").filter("file = 'mysql-bin.000001' AND pos IN (120, 600)")
        .select("pos", "rows").collect()
    )
    assert rows == {120: ROWS_ANN, 600: ROWS_PHONE}


def test_shadow_values_and_snapshot_rows_keep_the_source_text(crafted):
    store, _ = crafted
    first = store.read("bronze.shop_pg_shadow_changes").filter("_line = 1 AND `table` = 'orders'").first()
    assert (first["schema"], first["key"], first["values"]) == (
        "shop", '{"order_id":1}', '{"order_id":1,"status":"new","total":0.00}'
    )
    rows = store.read("bronze.shop_snapshot_rows").filter("snapshot_id = 'snap-1'").orderBy("_line")
    assert [(r["table"], r["row"]) for r in rows.collect()] == [
        ("shop.customers", SNAPSHOT_PART[0]), ("shop.customers", SNAPSHOT_PART[2])
    ]


def test_unknown_fields_are_rescued_not_fatal(crafted):
    store, _ = crafted
    begin = store.read("bronze.shop_binlog_events").filter("file = 'mysql-bin.000001' AND pos = 500").first()
    assert (begin["type"], begin["thread_id"], begin["_rescued_data"]) == ("begin", 12, '{"annotate":"checkout"}')
    others = store.read("bronze.shop_binlog_events").filter("pos <> 500 OR file <> 'mysql-bin.000001'")
    assert others.filter("_rescued_data IS NOT NULL").count() == 0


def test_timestamps_are_parsed_as_utc_with_microseconds(spark, crafted):
    store, _ = crafted
    micros = "yyyy-MM-dd HH:mm:ss.SSSSSS"
    assertDataFrameEqual(
        store.read("bronze.shop_sessions").selectExpr("thread_id", f"date_format(connected_at, '{micros}') AS at"),
        spark.createDataFrame([(11, "2026-03-02 08:55:00.000000"), (12, "2026-03-02 08:57:13.123456")],
                              "thread_id long, at string"),
    )
    assertDataFrameEqual(
        store.read("bronze.shop_pg_shadow_transactions").selectExpr("txn_id", f"date_format(end_ts, '{micros}') AS at"),
        spark.createDataFrame([("7301", "2026-03-02 09:00:11.222694"), ("7301", "2026-03-02 09:00:13.000001")],
                              "txn_id string, at string"),
    )


def test_a_duplicate_delivery_is_kept_twice_with_its_file(spark, crafted):
    store, _ = crafted
    events = store.read("bronze.shop_binlog_events").filter("file = 'mysql-bin.000002'")
    assertDataFrameEqual(
        events.select("pos", relative_file(), "_line"),
        spark.createDataFrame(
            [(pos, f"shop/binlog/{name}", line) for name in ("mysql-bin.000002.jsonl.gz", "mysql-bin.000002.retry.jsonl")
             for line, pos in enumerate((4, 100, 200), start=1)],
            "pos long, file string, _line long",
        ),
    )


def test_crlf_lines_and_provenance(crafted):
    store, _ = crafted
    crlf = store.read("bronze.shop_binlog_events").filter("file = 'mysql-bin.000003'").orderBy("_line").collect()
    assert [(r["type"], r["_line"], r["_source"]) for r in crlf] == [("begin", 1, "shop"), ("rollback", 2, "shop")]
    assert all(r["_ingested_at"] is not None and r["_source_file"].endswith("mysql-bin.000003.jsonl") for r in crlf)


# -- onboarding and accounting in gold ----------------------------------------------------------
def test_tables_not_onboarded_are_kept_flagged_and_counted(spark, crafted):
    store, _ = crafted
    assertDataFrameEqual(
        store.read("bronze.shop_pg_shadow_changes").groupBy("schema", "table", "_onboarded").count(),
        spark.createDataFrame([("shop", "orders", True, 4), ("shop", "audit_log", False, 1)],
                              "schema string, table string, _onboarded boolean, count long"),
    )
    summary = store.read("gold.landing_summary").select(
        "source", "bronze_table", "rows", "files", "quarantined_rows", "not_onboarded_rows", "not_onboarded_tables"
    )
    assertDataFrameEqual(summary.filter("bronze_table IS NOT NULL"), spark.createDataFrame([
        ("shop", "bronze.shop_binlog_events", 16, 4, 6, 1, ["shop.audit_log"]),
        ("shop", "bronze.shop_sessions", 2, 1, 3, 0, []),
        ("shop", "bronze.shop_snapshot_manifests", 0, 0, 0, 0, []),
        ("shop", "bronze.shop_snapshot_rows", 3, 2, 1, 1, ["shop.audit_log"]),
        ("shop_pg", "bronze.shop_pg_shadow_transactions", 2, 1, 2, 0, []),
        ("shop_pg", "bronze.shop_pg_shadow_changes", 5, 2, 6, 1, ["shop.audit_log"]),
        ("shop_pg", "bronze.shop_pg_snapshot_manifests", 0, 0, 0, 0, []),
        ("shop_pg", "bronze.shop_pg_snapshot_rows", 0, 0, 0, 0, []),
    ], "source string, bronze_table string, rows long, files long, quarantined_rows long, not_onboarded_rows long, "
       "not_onboarded_tables array<string>"))


def test_landing_no_flow_reads_is_a_summary_row_with_its_reason(spark, crafted):
    store, _ = crafted
    unread = store.read("gold.landing_summary").filter("bronze_table IS NULL").select("source", "files", "note")
    assertDataFrameEqual(unread, spark.createDataFrame([
        ("crm", 1, "crm/binlog: source crm is not onboarded: no enabled flow names it"),
        ("crm", 1, "crm/sessions: source crm is not onboarded: no enabled flow names it"),
        ("shop", 1, "shop/shadow: source shop lands in binlog, sessions, snapshot only (its capture); "
                    "this folder is not read"),
        (None, 1, "notes.txt: a file outside every <source>/ folder"),
    ], "source string, files long, note string"))


def test_the_run_warns_of_tables_no_flow_onboards(crafted):
    store, _ = crafted
    assert not_onboarded_warnings(store.read("gold.landing_summary")) == [
        f"bronze.{table}: 1 row(s) of tables no flow onboards (shop.audit_log); kept in bronze, not replicated"
        for table in ("shop_binlog_events", "shop_snapshot_rows", "shop_pg_shadow_changes")
    ]


def test_event_log_counts_rows_and_expectations_per_flow(crafted):
    _, result = crafted
    kept, quarantined = result.event("bronze.shop_binlog_events"), result.event("bronze.shop_binlog_events_quarantine")
    # Files are read whole: one row read per non-empty file.
    assert (kept.rows_read, kept.rows_written, quarantined.rows_written) == (4, 16, 6)
    failed = {e.name: e.failed for e in kept.expectations}
    assert failed == {
        "required fields present": 3, "binlog position in range": 0, "row-based logging": 0, "known event type": 1, "row event names its table": 0,
        "row event has a primary key": 1, "row event has rows": 0, "row images carry the primary key": 1,
        "ddl has its query": 0, "fields have their contract types": 1,
    }
    assert [(e.passed, e.failed) for e in quarantined.expectations] == [(6, 16)]


def test_bronze_schemas_are_the_contract(crafted):
    store, _ = crafted
    provenance = "_source:string,_source_file:string,_line:bigint,_ingested_at:timestamp,_file_size:bigint,_file_modified_at:timestamp"
    expected = {
        "shop_binlog_events": "server_id:bigint,file:string,pos:bigint,ts:bigint,gtid:string,type:string,"
        "xid:bigint,thread_id:bigint,schema:string,table:string,primary_key:array<string>,rows:string,"
        "query:string,epoch:bigint,_rescued_data:string",
        "shop_sessions": "server_id:bigint,thread_id:bigint,connected_at:timestamp,user:string,role:string,"
        "_rescued_data:string",
        "shop_pg_shadow_transactions": "txn_id:string,end_ts:timestamp,db_user:string,db_role:string,"
        "client:string,application:string,_rescued_data:string",
        "shop_pg_shadow_changes": "schema:string,table:string,txn_id:string,op_ts:timestamp,op_seq:bigint,"
        "op:string,key:string,old_key:string,values:string,_rescued_data:string,_onboarded:boolean",
        "shop_snapshot_manifests": "snapshot_id:string,table:string,key:array<string>,taken_at:timestamp,"
        "position_file:string,position_pos:bigint,position_txn_end_ts:timestamp,row_count:bigint,"
        "complete:boolean,_rescued_data:string",
        "shop_snapshot_rows": "table:string,snapshot_id:string,row:string",
    }
    for table, columns in expected.items():
        assert store.read(f"bronze.{table}").schema.simpleString() == f"struct<{columns},{provenance}>", table
        assert store.read(f"bronze.{table}_quarantine").schema.simpleString() == (
            f"struct<_raw:string,_reason:string,{provenance}>"
        )


# -- incremental runs -------------------------------------------------------------------------
def test_a_transaction_continued_in_a_later_run_is_appended(spark, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write(landing, "shop/binlog/mysql-bin.000005-a.jsonl",
          [event(4, "begin", file="mysql-bin.000005", thread_id=11),
           event(90, "insert", file="mysql-bin.000005", schema="shop", table="orders", **KEY,
                 rows=[{"after": {"order_id": 1}}])])
    run(spark, landing, lake, BINLOG_ONLY)
    write(landing, "shop/binlog/mysql-bin.000005-b.jsonl",
          [event(180, "update", file="mysql-bin.000005", schema="shop", table="orders", **KEY,
                 rows=[{"before": {"order_id": 1}, "after": {"order_id": 1, "total": 2}}]),
           event(260, "commit", file="mysql-bin.000005", xid=5)])
    write(landing, "shop/binlog/mysql-bin.000004.jsonl", [event(4, "begin", file="mysql-bin.000004")])  # late
    second = run(spark, landing, lake, BINLOG_ONLY).event("bronze.shop_binlog_events")

    assert (second.rows_read, second.rows_written) == (2, 3)  # only the two new files
    events = LakeStore(spark, lake).read("bronze.shop_binlog_events")
    assertDataFrameEqual(
        events.select("file", "pos", "type", relative_file().alias("landed_as"), "_line"),
        spark.createDataFrame([
            ("mysql-bin.000005", 4, "begin", "shop/binlog/mysql-bin.000005-a.jsonl", 1),
            ("mysql-bin.000005", 90, "insert", "shop/binlog/mysql-bin.000005-a.jsonl", 2),
            ("mysql-bin.000005", 180, "update", "shop/binlog/mysql-bin.000005-b.jsonl", 1),
            ("mysql-bin.000005", 260, "commit", "shop/binlog/mysql-bin.000005-b.jsonl", 2),
            ("mysql-bin.000004", 4, "begin", "shop/binlog/mysql-bin.000004.jsonl", 1),
        ], "file string, pos long, type string, landed_as string, _line long"),
    )


# -- snapshot manifests -----------------------------------------------------------------------
MANIFEST = dict(snapshot_id="snap-1", table="shop.customers", key=["customer_id"], taken_at="2026-03-02T10:20:33Z",
                position={"file": "mysql-bin.000003", "pos": 51333}, row_count=2, complete=True)


def manifest(folder: str, **changes) -> tuple[str, str]:
    document = json.dumps({**MANIFEST, "snapshot_id": folder, **changes}, indent=2)  # one document, many lines
    return document, f"file:/landing/shop/snapshot/shop.customers/{folder}/_manifest.json"


def test_snapshot_manifests_are_one_document_each(spark):
    from cdc_lakehouse.bronze.kinds import SNAPSHOT_MANIFESTS
    from cdc_lakehouse.bronze.landing import bronze_rows, checked_lines, quarantined_rows

    files = spark.createDataFrame([
        manifest("snap-1"),
        manifest("snap-2", position={"txn_end_ts": "2026-03-02T10:20:33.000042Z"}),
        manifest("snap-3", position=None, complete=False, row_count=None),
        manifest("snap-4", position={"file": "mysql-bin.000003"}),
        manifest("snap-5", table="shop.orders"),
        manifest("snap-6", key=[]),
        ("{not json", "file:/landing/shop/snapshot/shop.customers/snap-7/_manifest.json"),
        ("", "file:/landing/shop/snapshot/shop.customers/snap-8/_manifest.json"),
    ], "value string, _source_file string")
    lines = checked_lines(files, SNAPSHOT_MANIFESTS, "shop", ["shop.customers"]).cache()

    kept = bronze_rows(lines.filter("_reason IS NULL"), SNAPSHOT_MANIFESTS).selectExpr(
        "snapshot_id", "`table`", "key", "string(taken_at)", "position_file", "position_pos",
        "date_format(position_txn_end_ts, 'HH:mm:ss.SSSSSS')", "row_count", "complete", "_line")
    assertDataFrameEqual(kept, spark.createDataFrame([
        ("snap-1", "shop.customers", ["customer_id"], "2026-03-02 10:20:33", "mysql-bin.000003", 51333, None, 2, True, 1),
        ("snap-2", "shop.customers", ["customer_id"], "2026-03-02 10:20:33", None, None, "10:20:33.000042", 2, True, 1),
        ("snap-3", "shop.customers", ["customer_id"], "2026-03-02 10:20:33", None, None, None, None, False, 1),
    ], kept.schema))
    assertDataFrameEqual(
        quarantined_rows(lines.filter("_reason IS NOT NULL")).select(
            F.regexp_extract("_source_file", "(snap-[0-9])", 1).alias("snapshot"), "_reason"),
        spark.createDataFrame([
            ("snap-4", "wrong type or unparseable value: position"),
            ("snap-5", "table or snapshot_id differs from the <schema>.<table>/<snapshot_id> folder"),
            ("snap-6", "key has no columns"),
            ("snap-7", "unparseable line: not one JSON object: expected '\"' at character 1"),
            ("snap-8", "blank line"),
        ], "snapshot string, _reason string"),
    )


def test_snapshot_manifests_land_from_the_snapshot_folder(spark, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    document, _ = manifest("snap-1")
    write(landing, "shop/snapshot/shop.customers/snap-1/_manifest.json", [document])
    write(landing, "shop/snapshot/shop.customers/snap-1/part-00000.jsonl", SNAPSHOT_PART[:1])
    run(spark, landing, lake, BINLOG_ONLY)
    assert LakeStore(spark, lake).read("bronze.shop_snapshot_manifests").count() == 1


# -- the demo -----------------------------------------------------------------------------------
def fixture_lines(relative_glob: str) -> list[str]:
    return [line for path in sorted((REPO / "fixtures/landing").glob(relative_glob))
            for line in path.read_text().splitlines()]


def test_the_demo_fixtures_land_whole_and_exact(spark, demo_lake):
    from cdc_lakehouse.runtime.catalog import run_sql

    landed = {
        "bronze.shop_snapshot_manifests": len(list((REPO / "fixtures/landing").glob("shop/snapshot/*/*/_manifest.json"))),
        "bronze.shop_binlog_events": len(fixture_lines("shop/binlog/*.jsonl")),
        "bronze.shop_sessions": len(fixture_lines("shop/sessions/*.jsonl")),
        "bronze.shop_snapshot_rows": len(fixture_lines("shop/snapshot/*/*/part-*")),
        "bronze.shop_pg_shadow_transactions": len(fixture_lines("shop_pg/shadow/_transactions/*.jsonl")),
        "bronze.shop_pg_shadow_changes": len(fixture_lines("shop_pg/shadow/*.*/*.jsonl")),
        "bronze.shop_pg_snapshot_rows": 0,
        "bronze.shop_pg_snapshot_manifests": 0,
    }
    summary = run_sql(spark, demo_lake, "SELECT bronze_table, rows, quarantined_rows, not_onboarded_rows "
                                    "FROM gold.landing_summary")
    assertDataFrameEqual(summary, spark.createDataFrame(
        [(table, rows, 0, 0) for table, rows in landed.items()],
        "bronze_table string, rows long, quarantined_rows long, not_onboarded_rows long"))

    row_events = [json.loads(line) | {"text": line} for line in fixture_lines("shop/binlog/*.jsonl")]
    exact = [(e["file"], e["pos"], e["text"].split('"rows":', 1)[1].rsplit(',"query":', 1)[0])
             for e in row_events if e["rows"] is not None]
    assertDataFrameEqual(
        run_sql(spark, demo_lake, "SELECT file, pos, `rows` FROM bronze.shop_binlog_events WHERE `rows` IS NOT NULL"),
        spark.createDataFrame(exact, "file string, pos long, rows string"),
    )


def test_a_byte_order_mark_and_crlf_line_ends_are_not_content(spark):
    """As JSON Lines readers do: a file that starts with a UTF-8 BOM and ends its lines with CRLF
    gives the lines without them (the BOM once made the first line, often a BEGIN, "not JSON")."""
    from cdc_lakehouse.bronze.lines import numbered_lines

    files = spark.createDataFrame([("f", '\ufeff{"a":1}\r\n{"b":"\ufeff"}\r\n')], "_source_file string, value string")
    assertDataFrameEqual(numbered_lines(files).select("_source_file", "_line", "_raw"), spark.createDataFrame(
        [("f", 1, '{"a":1}'), ("f", 2, '{"b":"\ufeff"}')], "_source_file string, _line long, _raw string"),
        checkRowOrder=False, ignoreNullable=True)


def test_a_line_with_bytes_that_are_not_utf8_is_quarantined_with_its_reason(spark, tmp_path):
    """Spark reads such bytes as U+FFFD: bronze would keep a value the source never had."""
    from cdc_lakehouse.bronze.kinds import BINLOG_EVENTS
    from cdc_lakehouse.bronze.landing import checked_lines

    good = event(4, "begin").encode()
    bad = event(8, "ddl", query="x").replace('"x"', '"caf\xe9"').encode("latin-1")  # é in Latin-1
    path = tmp_path / "mysql-bin.000001.jsonl"
    path.write_bytes(good + b"\n" + bad + b"\n")
    files = spark.read.format("text").option("wholetext", "true").load(str(path)).select(
        "value", F.col("_metadata.file_path").alias("_source_file"))
    reasons = [r["_reason"] for r in checked_lines(files, BINLOG_EVENTS, "shop", []).orderBy("_line").collect()]
    assert reasons == [None, "not UTF-8: the line has bytes that are not UTF-8 (read as U+FFFD, or U+FFFD itself)"]


def test_a_grown_file_gives_its_new_lines_and_a_rewritten_one_is_reported(spark, tmp_path):
    """Issue 41 case 3: a file read while a writer was still appending (its last line cut, the
    file settled) is read again from that line once it grows: the cut line comes complete (the
    quarantined cut stays, as its record) and the new lines follow, each at its own line number.
    A file rewritten with other content is not read again; gold.landing_summary says so."""
    import os

    from cdc_lakehouse.bronze.summary import changed_file_warnings

    landing, lake = tmp_path / "landing", tmp_path / "lake"
    lines = [event(4, "begin"), event(50, "rollback"), event(60, "begin"), event(70, "rollback")]
    grown = landing / "shop/binlog/grown.jsonl"
    write(landing, "shop/binlog/grown.jsonl", lines[:2])
    grown.write_text(grown.read_text() + lines[2][:20])  # a writer stopped mid-line
    write(landing, "shop/binlog/rewritten.jsonl", [event(80, "begin")])
    os.utime(grown, (0, 0))  # long unchanged: settled, read as it is
    run(spark, landing, lake, gold=True)
    write(landing, "shop/binlog/grown.jsonl", lines)
    write(landing, "shop/binlog/rewritten.jsonl", [event(90, "begin"), event(95, "rollback")])
    run(spark, landing, lake, gold=True)

    store = LakeStore(spark, lake)
    kept = store.read("bronze.shop_binlog_events").filter(F.col("_source_file").endswith("grown.jsonl"))
    assert sorted((r._line, r.pos) for r in kept.collect()) == [(1, 4), (2, 50), (3, 60), (4, 70)]
    cut = store.read("bronze.shop_binlog_events_quarantine").select("_line").collect()
    assert [r._line for r in cut] == [3]
    others = store.read("bronze.shop_binlog_events").filter(F.col("_source_file").endswith("rewritten.jsonl"))
    assert [r.pos for r in others.collect()] == [80]
    [warning] = changed_file_warnings(store.read("gold.landing_summary"))
    assert "rewritten.jsonl: changed after bronze read it" in warning and warning.startswith("bronze.shop_binlog_events:")
