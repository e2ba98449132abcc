"""TRUNCATE TABLE at a binlog and at a PostgreSQL shadow source (issue 38, case 2): the replicas
empty at its commit point (SCD2: the open versions close there), gold follows, and the audit
log shows it.

One small lake of both sources' customers tables, two updates: the first holds inserts, a
TRUNCATE and an insert after it in one batch; the second truncates again a table that then has
state from the first."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.bronze import binlog_position
from cdc_lakehouse.gold import audit
from cdc_lakehouse.gold.replicas import replica_as_of
from cdc_lakehouse.contract.landing import table_folder
from cdc_lakehouse.silver import change_stream, schema_changes, shadow_changes, shadow_held, truncates
from cdc_lakehouse.silver.binlog_gaps import with_gaps
from cdc_lakehouse.silver.apply_policy import anomalies
from cdc_lakehouse.silver.declared_types import declared_table
from cdc_lakehouse.silver.replica_input import history_changes, replica_changes
from cdc_lakehouse.storage import LakeStore
from held_steps import event, transaction
from lake_helpers import write_jsonl
from silver_support import onboarding_for, run_project
from test_gold_units import ANN, BOB, change, customers_flow, names, stream


def truncate(pos: int, file: str = "mysql-bin.000001") -> dict:
    return event(pos, "ddl", file, schema="shop", table="customers", thread_id=7,
                 query="/* app */ TRUNCATE TABLE `customers`")


STEPS = [
    ("1.jsonl", transaction(100, [(1, "ann"), (2, "bob")]) + [truncate(200)] + transaction(300, [(3, "cy")])),
    ("2.jsonl", transaction(400, [(4, "dee")]) + [truncate(500)] + transaction(600, [(5, "eve")])),
]


# -- shop_pg: PostgreSQL's TRUNCATE, a shadow change row of op T keyed {} -----------------------
def pg_txn(txn: str, second: int) -> dict:
    return {"txn_id": txn, "end_ts": f"2026-03-02T09:00:{second:02d}.000000Z", "db_user": "alice",
            "db_role": "app_writer", "client": None, "application": None}


def pg_op(txn: str, second: int, seq: int, op: str, key: int | None = None, **values) -> dict:
    """A change row; no ``key``: a truncate or an alter."""
    return {"txn_id": txn, "op_ts": f"2026-03-02T09:00:{second:02d}.000000Z", "op_seq": seq, "op": op,
            "key": {} if key is None else {"customer_id": key}, "old_key": None, "values": values or None}


def pg_position(second: int) -> int:
    return int(datetime(2026, 3, 2, 9, 0, second, tzinfo=timezone.utc).timestamp() * 1_000_000)


PG_CHECK = "ALTER TABLE shop.customers ADD CONSTRAINT tier_set CHECK (tier IS NOT NULL)"
PG_DROP = "DROP TABLE shop.customers"
# P2 updates Ann, truncates, inserts Ann again and Cy: the update is undone by the truncate.
# P3 updates only Cy's tier (the rest of the row comes from the held image); P5 truncates
# after an ALTER TABLE, which it does not undo; P7's truncate waits for its transaction row
# (holding gold back); P8 drops the table (the event trigger's row).
PG_STEPS = [
    ([pg_txn("P1", 1), pg_txn("P2", 2)],
     [pg_op("P1", 1, 1, "I", 1, customer_id=1, name="ann", tier="a"), pg_op("P1", 1, 2, "I", 2, customer_id=2, name="bob", tier="a"),
      pg_op("P2", 2, 1, "U", 1, name="ann1"), pg_op("P2", 2, 2, "T"),
      pg_op("P2", 2, 3, "I", 1, customer_id=1, name="ann2", tier="b"), pg_op("P2", 2, 4, "I", 3, customer_id=3, name="cy", tier="a")]),
    ([pg_txn("P3", 3), pg_txn("P4", 4), pg_txn("P5", 5), pg_txn("P6", 6), pg_txn("P8", 8)],
     [pg_op("P3", 3, 1, "U", 3, tier="gold"), pg_op("P4", 4, 1, "I", 4, customer_id=4, name="dee", tier="a"),
      pg_op("P5", 5, 1, "A", statement=PG_CHECK), pg_op("P5", 5, 2, "T"), pg_op("P6", 6, 1, "I", 5, customer_id=5, name="eve", tier="a"), pg_op("P7", 7, 1, "T"),
      pg_op("P8", 8, 1, "A", statement=PG_DROP)]),
]
PG_TABLE = "shop_pg_customers"


@dataclass
class Step:
    silver: dict[str, set[int]]  # per source: the current keys of its silver customers
    gold: dict[str, set[int]]
    history: list  # (customer_id, __START_AT.position, __END_AT.position) of silver.shop_customers_history
    pg_history: list  # (customer_id, name, tier, __START_AT.position, __END_AT.position) of silver.shop_pg_customers_history
    audit: dict[str, list]  # per source: (operation, key) of gold.audit_log, in commit order
    lake: Path


def _versions(store: LakeStore, table: str, *columns: str) -> list[tuple]:
    found = store.read(table).select(*columns, F.col("__START_AT.position"), F.col("__END_AT.position"))
    return sorted(tuple(r) for r in found.collect())


def _land(landing: Path, step: int) -> None:
    file, events = STEPS[step]
    write_jsonl(landing / "shop" / "binlog" / file, events)
    txns, changes = PG_STEPS[step]
    shadow = landing / "shop_pg" / "shadow"
    write_jsonl(shadow / "_transactions" / f"{step}.jsonl", txns)
    write_jsonl(shadow / table_folder("shop", "customers") / f"{step}.jsonl", changes)


@pytest.fixture(scope="module")
def truncated(spark, tmp_path_factory) -> list[Step]:
    """Both sources, their customers tables only."""
    root: Path = tmp_path_factory.mktemp("truncate")
    landing, lake = root / "landing", root / "lake"
    onboarding = onboarding_for(root, {"shop", "shop_pg"}, {"customers"})
    steps = []
    for step in range(len(STEPS)):
        _land(landing, step)
        run_project(spark, landing, lake, onboarding)
        store = LakeStore(spark, lake)
        ids = lambda df: {r.customer_id for r in df.collect()}  # noqa: E731
        audit = store.read("gold.audit_log").orderBy("sequence", "key")
        steps.append(Step(
            {"shop": ids(store.read("silver.shop_customers")),
             "shop_pg": ids(store.read(f"silver.{PG_TABLE}"))},
            {source: ids(store.read(f"gold.{source}_customers")) for source in ("shop", "shop_pg")},
            _versions(store, "silver.shop_customers_history", "customer_id"),
            _versions(store, f"silver.{PG_TABLE}_history", "customer_id", "name", "tier"),
            {source: [(r.operation, r.key) for r in audit.filter(F.col("source") == source).collect()]
             for source in ("shop", "shop_pg")},
            lake))
    return steps


def test_a_truncate_empties_the_replicas_at_its_commit_point(truncated):
    assert truncated[0].silver["shop"] == truncated[0].gold["shop"] == {3}
    assert truncated[1].silver["shop"] == truncated[1].gold["shop"] == {5}


def test_a_postgres_truncate_empties_the_replicas_and_its_transaction_applies_after_it(truncated):
    assert truncated[0].silver["shop_pg"] == truncated[0].gold["shop_pg"] == {1, 3}
    assert truncated[1].silver["shop_pg"] == truncated[1].gold["shop_pg"] == {5}


def test_a_postgres_truncate_closes_the_open_versions_just_before_its_transaction(truncated):
    p = pg_position
    assert truncated[1].pg_history == [
        (1, "ann", "a", p(1), p(2) - 1), (1, "ann2", "b", p(2), p(5) - 1), (2, "bob", "a", p(1), p(2) - 1),
        (3, "cy", "a", p(2), p(3)), (3, "cy", "gold", p(3), p(5) - 1), (4, "dee", "a", p(4), p(5) - 1),
        (5, "eve", "a", p(6), None)]


def test_the_audit_log_shows_the_postgres_truncates_and_alters_not_what_truncates_undid(truncated):
    assert truncated[1].audit["shop_pg"] == [
        ("INSERT", '{"customer_id":"1"}'), ("INSERT", '{"customer_id":"2"}'), ("TRUNCATE", "{}"),
        ("INSERT", '{"customer_id":"1"}'), ("INSERT", '{"customer_id":"3"}'), ("UPDATE", '{"customer_id":"3"}'),
        ("INSERT", '{"customer_id":"4"}'), ("TRUNCATE", "{}"), ("ALTER", json.dumps({"statement": PG_CHECK}, separators=(",", ":"))),
        ("INSERT", '{"customer_id":"5"}')]


def test_health_counts_the_postgres_alter_and_drop_and_marks_the_table_dropped(spark, truncated):
    quality = LakeStore(spark, truncated[1].lake).read("gold.data_quality").filter(F.col("source") == "shop_pg")
    assert [(r.table, r.schema_changes, r.last_schema_change, r.dropped_at) for r in quality.collect()] == [
        ("shop.customers", 2, PG_DROP, datetime(2026, 3, 2, 9, 0, 8))]


def test_a_postgres_truncate_without_its_transaction_row_is_held(spark, truncated):
    store = LakeStore(spark, truncated[1].lake)
    held = store.read("silver.__flow_state_shop_pg_shadow_changes").filter(F.col("kind") == shadow_held.PENDING)
    assert [(r.txn_id, r.op) for r in held.collect()] == [("P7", "T")]


def test_a_postgres_insert_after_a_truncate_is_no_anomaly(spark, truncated):
    store = LakeStore(spark, truncated[1].lake)
    assert store.read("silver.shop_pg_anomalies").count() == 0


def lsn(pos: int) -> int:
    """The log position of an event in mysql-bin.000001."""
    return binlog_position.lsn(0, 1, pos)


def test_a_truncate_closes_the_open_versions_of_the_history(truncated):
    first, second = truncated
    # Versions start at their transaction's commit and end at the truncate's.
    assert first.history == [(1, lsn(190), lsn(200)), (2, lsn(190), lsn(200)), (3, lsn(390), None)]
    assert second.history == [(1, lsn(190), lsn(200)), (2, lsn(190), lsn(200)), (3, lsn(390), lsn(500)),
                              (4, lsn(490), lsn(500)), (5, lsn(690), None)]


def test_the_audit_log_shows_the_truncate(truncated):
    operations = [op for op, _ in truncated[1].audit["shop"]]
    assert operations == ["INSERT", "INSERT", "TRUNCATE", "INSERT", "INSERT", "TRUNCATE", "INSERT"]
    assert [key for op, key in truncated[1].audit["shop"] if op == "TRUNCATE"] == ["{}", "{}"]


def test_the_streaming_form_emits_the_truncates_the_batch_form_does(spark, truncated):
    """On Databricks the change stream is a stream-static join (silver/arrivals.py); here every
    bronze event is new, so it emits every committed transaction."""
    store = LakeStore(spark, truncated[-1].lake)
    events = with_gaps(store.read("bronze.shop_binlog_events"), store.read("bronze.shop_binlog_events_quarantine"))
    sessions = store.read("bronze.shop_sessions") if store.exists("bronze.shop_sessions") else None
    streamed = change_stream._streamed_binlog_changes(events, events, sessions)
    batch = store.read("silver.shop_changes")
    of_truncates = lambda df: df.filter(F.col("op") == "TRUNCATE").select(  # noqa: E731
        "source", "schema", "table", "key", "op", "txn_id", "commit_ts", "sequence", "user", "role", "origin")
    assertDataFrameEqual(of_truncates(streamed), of_truncates(batch))
    assert of_truncates(batch).count() == 2


def test_the_streaming_form_of_a_shadow_source_emits_what_the_batch_form_did(spark, truncated):
    store = LakeStore(spark, truncated[-1].lake)
    changes = store.read("bronze.shop_pg_shadow_changes").filter("_onboarded")
    txns = store.read("bronze.shop_pg_shadow_transactions")
    net = shadow_changes.streamed_net_changes(changes, txns, changes, txns)
    streamed = change_stream.to_change_stream(net, "shadow", change_stream.shadow_sequence())
    assertDataFrameEqual(streamed.select(*store.read("silver.shop_pg_changes").columns),
                         store.read("silver.shop_pg_changes"))


# -- the same logic on hand-made change streams ------------------------------------------------
def truncate_change(position: int, txn: str) -> tuple:
    return ("shop_pg", "shop", "customers", None, "TRUNCATE", None, None, None, [], 1, txn,
            datetime(2026, 3, 2, 9, 0, position), (position, txn), "alice", "app_writer", "shadow")


@pytest.fixture
def truncated_stream(spark):
    """Ann inserted (1), Bob inserted (2), Bob deleted (3), a TRUNCATE (4), Bob again (5), a
    second TRUNCATE (6), Ann again (7)."""
    return stream(spark, change(1, "t1", "INSERT", ANN), change(2, "t2", "INSERT", BOB),
                  change(3, "t3", "DELETE", BOB, before=BOB), truncate_change(4, "t4"),
                  change(5, "t5", "INSERT", BOB), truncate_change(6, "t6"), change(7, "t7", "INSERT", ANN))


@pytest.mark.parametrize(("point", "expected"), [(3, ["Ann"]), (4, []), (5, ["Bob"]), (6, []), (7, ["Ann"])])
def test_a_replica_as_of_a_commit_point_knows_the_truncates_before_it(truncated_stream, point, expected):
    assert names(replica_as_of(truncated_stream, customers_flow(), (point, f"t{point}"))) == expected


def test_the_history_takes_each_truncate_as_deletes_of_the_keys_open_at_it(truncated_stream):
    flow = customers_flow()
    typing = dict(column_filters=flow.column_filters, declared=declared_table(flow), keys=flow.keys)
    typed = replica_changes(truncated_stream, **typing)
    got = history_changes(typed, truncated_stream, **typing)
    # Bob was deleted before the first truncate (only Ann is open there), Ann was truncated
    # before the second (only Bob is): one DELETE each.
    assert sorted((r["__op"], r["customer_id"], r["__sequence"]["position"]) for r in got.collect()) == [
        ("DELETE", 1, 4), ("DELETE", 2, 3), ("DELETE", 2, 6), ("INSERT", 1, 1), ("INSERT", 1, 7),
        ("INSERT", 2, 2), ("INSERT", 2, 5)]
    assert got.schema == typed.schema


def test_a_truncate_is_no_anomaly_and_the_rows_it_removed_are_gone(spark, truncated_stream):
    assert anomalies(truncated_stream).count() == 0  # Bob and Ann inserted again after a truncate
    bob_updated = truncated_stream.unionByName(stream(spark, change(8, "t8", "UPDATE", BOB, before=BOB)))
    found = anomalies(bob_updated).select("anomaly", "detail").collect()
    assert [r.anomaly for r in found] == ["update_of_missing_key"]
    assert "(truncated in transaction t6)" in found[0].detail


def test_which_statements_truncate(spark):
    queries = {"TRUNCATE TABLE shop.a": True, "truncate a": True, "/* app */\n TRUNCATE `a`": True,
               "ALTER TABLE a TRUNCATE PARTITION p0": False, "DROP TABLE truncate_log": False,
               "TRUNCATED": False, None: False}
    found = spark.createDataFrame([(q,) for q in queries], "query string").select(
        "query", truncates.is_truncate(F.col("query")).alias("truncates"))
    assert {r.query: r.truncates for r in found.collect()} == queries


# -- ALTER TABLE that changes columns (silver/schema_changes.py) --------------------------------
ADD_VIP = "ALTER TABLE `customers` ADD COLUMN `vip` TINYINT(1) NOT NULL DEFAULT 0, ADD INDEX vip_idx (vip)"
ALTERED = [event(700, "ddl", schema="shop", table="customers", thread_id=7, query=ADD_VIP),
           event(800, "begin", thread_id=7),
           event(810, "insert", schema="shop", table="customers", primary_key=["customer_id"],
                 rows=[{"after": {"customer_id": 6, "name": "fay", "email": "f@x", "city": "Oslo", "tier": "a",
                                  "phone": None, "vip": 1}}]),
           event(890, "commit", xid=800)]


@dataclass
class Altered:
    error: str  # of the update that met the ALTER its declaration did not follow
    replica: dict  # customer_id -> vip of silver.shop_customers after the declaration followed
    gold: dict  # the same of gold.shop_customers
    audit: list  # (operation, key) of gold.audit_log for shop, last two


@pytest.fixture(scope="module")
def altered(spark, truncated) -> Altered:
    """The truncate lake's next updates: the binlog source adds a column to a declared table; the
    update stops at it; the declaration then follows and the next update applies everything."""
    lake = truncated[-1].lake
    root = lake.parent
    write_jsonl(root / "landing" / "shop" / "binlog" / "3.jsonl", ALTERED)
    with pytest.raises(Exception) as stopped:
        run_project(spark, root / "landing", lake, root / "onboarding.yml")
    flows = yaml.safe_load((root / "onboarding.yml").read_text())
    [flow] = [f for f in flows if f["cdc_lakehouse"]["source"] == "shop"]
    declared = root / "customers.ddl"
    declared.write_text(Path(flow["source_details"]["source_schema_path"]).read_text().rstrip() + ",\nvip INT\n")
    flow["source_details"]["source_schema_path"] = str(declared)
    (root / "onboarding.yml").write_text(yaml.safe_dump(flows))
    run_project(spark, root / "landing", lake, root / "onboarding.yml")
    store = LakeStore(spark, lake)
    vips = lambda table: {r.customer_id: r.vip for r in store.read(table).collect()}  # noqa: E731
    audit = store.read("gold.audit_log").filter("source = 'shop'").orderBy("sequence", "key")
    return Altered(str(stopped.value), vips("silver.shop_customers"), vips("gold.shop_customers"),
                   [(r.operation, r.key) for r in audit.collect()][-2:])


def test_an_added_column_a_declared_table_does_not_declare_stops_it_naming_the_ddl(altered):
    assert f"ran {ADD_VIP} (transaction pos:1:mysql-bin.000001:700" in altered.error
    assert "does not follow; added: vip. The table's replicas stop" in altered.error  # not the index


def test_once_declared_the_added_column_widens_the_replicas_with_nothing_lost(altered):
    assert altered.replica == altered.gold == {5: None, 6: 1}
    assert altered.audit == [("ALTER", json.dumps({"statement": ADD_VIP}, separators=(",", ":"))),
                             ("INSERT", '{"customer_id":"6"}')]


@pytest.mark.parametrize(("query", "added", "dropped", "renamed"), [
    ("ALTER TABLE t ADD COLUMN a INT, ADD b VARCHAR(3), ADD INDEX i (a), ADD PRIMARY KEY (a)", ["a", "b"], [], []),
    ("alter table t drop column a, drop b, drop index i, drop primary key, alter column c drop default", [], ["a", "b"], []),
    ("ALTER TABLE t RENAME COLUMN a TO b, CHANGE COLUMN c d INT, CHANGE e e BIGINT", [], [], [("a", "b"), ("c", "d")]),
    ("ALTER TABLE t ADD CONSTRAINT c CHECK (a > 0), RENAME TO u", [], [], []),
])
def test_which_columns_an_alter_table_adds_drops_and_renames(spark, query, added, dropped, renamed):
    q = F.lit(query)
    [found] = spark.range(1).select(schema_changes.added_columns(q).alias("a"), schema_changes.dropped_columns(q).alias("d"),
                                    schema_changes.renamed_columns(q).alias("r"), schema_changes.changes_columns(q).alias("c")).collect()
    assert (found.a, found.d, [tuple(p) for p in found.r], found.c) == (added, dropped, renamed, bool(added or dropped or renamed))


def alter_change(position: int, statement: str) -> tuple:
    return ("shop_pg", "shop", "customers", None, "ALTER", json.dumps({"statement": statement}), None, None, [], 1,
            f"t{position}", datetime(2026, 3, 2, 9, 0, position), (position, f"t{position}"), "alice", "dba", "binlog")


@pytest.mark.parametrize(("statement", "stops"), [
    ("ALTER TABLE customers DROP COLUMN city", "dropped: city"),
    ("ALTER TABLE customers RENAME COLUMN tier TO level", "renamed: tier -> level"),
    ("ALTER TABLE customers CHANGE email mail VARCHAR(99)", "renamed: email -> mail"),
    ("ALTER TABLE customers DROP COLUMN legacy, ADD INDEX by_city (city)", None),  # nothing declared changes
    ("DROP TABLE customers", None),  # a shadow drop: health marks it (gold.data_quality)
    ("DROP TABLE customers /* by DROP SCHEMA shop CASCADE */", None),
])
def test_a_declared_table_stops_at_a_drop_or_rename_of_a_declared_column(spark, statement, stops):
    changes = stream(spark, change(1, "t1", "INSERT", ANN), alter_change(2, statement), change(3, "t3", "INSERT", BOB))
    typed = replica_changes(changes, declared=declared_table(customers_flow()), keys=["customer_id"])
    if stops is None:
        assert typed.count() == 2
        assert anomalies(changes).count() == 0
    else:
        with pytest.raises(Exception, match=f"{re.escape(statement)}.*{re.escape(stops)}"):
            typed.collect()


def test_a_table_with_inferred_types_takes_an_alter_as_its_images_show(spark):
    changes = stream(spark, change(1, "t1", "INSERT", ANN), alter_change(2, "ALTER TABLE customers ADD vip INT"),
                     change(3, "t3", "INSERT", BOB.replace('"tier"', '"vip":1,"tier"')))
    typed = replica_changes(changes, keys=["customer_id"])
    assert sorted((r.customer_id, r.vip) for r in typed.collect()) == [(1, None), (2, 1)]


def test_a_row_truncated_after_its_last_change_no_longer_exists_in_the_audit(truncated_stream):
    rows = audit.row_last_change(audit.audit_rows(truncated_stream, customers_flow(), "gold.shop_pg_customers"))
    # Bob was inserted again (5) before the second truncate (6), Ann again (7) after it.
    assert sorted((r.key, r.operation, r.row_exists) for r in rows.collect()) == [
        ('{"customer_id":"1"}', "INSERT", True), ('{"customer_id":"2"}', "INSERT", False)]
