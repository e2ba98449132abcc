"""Gold logic on small hand-made change streams: commit points, replicas at a point, audit rows
with column filters, quarantine attribution, anomalies per table, and the dashboard's widget queries."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest
import yaml
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.config import load_onboarding, parse_onboarding
from cdc_lakehouse.dashboard import lakeview
from cdc_lakehouse.gold import health, inputs
from cdc_lakehouse.gold.audit import audit_rows
from cdc_lakehouse.gold.commit_point import at_point, commit_point, commit_point_at, source_watermark
from cdc_lakehouse.gold.replicas import replica_as_of, replica_at
from cdc_lakehouse.settings import PipelineSettings
from cdc_lakehouse.silver.apply_policy import anomalies
from lake_helpers import REPO, demo_flows

CHANGES_DDL = (
    "source string, schema string, table string, key string, op string, row string, before string, "
    "changed_columns array<string>, anomalies array<string>, op_count bigint, txn_id string, "
    "commit_ts timestamp, sequence struct<position:bigint,txn:string>, user string, role string, origin string"
)


def customers_flow(declared=True, **filters):
    """The demo's shop_pg customers flow, with other column filters if given; ``declared``
    False leaves out its schema file (types inferred)."""
    flows = demo_flows()
    flow = next(f for f in flows if f["data_flow_id"] == "201")
    if not declared:
        flow["source_details"].pop("source_schema_path")
    if filters:
        flow["cdc_lakehouse"]["column_filters"] = filters
        flow["silver_cdc_apply_changes"].pop("track_history_column_list")
    return parse_onboarding([flow]).flows[0]


def change(position, txn, op, row, before=None, key=None, changed=None, user="alice", role="app_writer", table="customers"):
    image = json.loads(row if op != "DELETE" else before if row is None else row)
    key = key or json.dumps({"customer_id": str(image["customer_id"])}, separators=(",", ":"))
    return ("shop_pg", "shop", table, key, op, row, before, changed or sorted(image), [], 1, txn,
            datetime(2026, 3, 2, 9, 0, position), (position, txn), user, role, "shadow")


def with_pairs(row, pairs):
    """The change row with impossible pairs in its ``anomalies`` column."""
    return row[:8] + (pairs,) + row[9:]


def stream(spark, *rows):
    return spark.createDataFrame(list(rows), CHANGES_DDL)


ANN = '{"customer_id":1,"name":"Ann","email":"ann@example.com","city":"Oslo","tier":"gold"}'
ANN_BERGEN = ANN.replace("Oslo", "Bergen")
BOB = '{"customer_id":2,"name":"Bob","email":"bob@example.com","city":"Rome","tier":"bronze"}'


@pytest.fixture
def changes(spark):
    return stream(
        spark,
        change(1, "t1", "INSERT", ANN),
        change(2, "t2", "INSERT", BOB),
        change(3, "t3", "UPDATE", ANN_BERGEN, before=ANN, changed=["city"], user="carol", role="support"),
        change(4, "t4", "DELETE", BOB, before=BOB),
    )


def names(df) -> list[str]:
    return sorted(r["name"] for r in df.collect())


def test_replica_at_commit_points(spark, changes):
    flow = customers_flow()
    assert names(replica_as_of(changes, flow, (1, "t1"))) == ["Ann"]
    assert names(replica_as_of(changes, flow, (2, "t2"))) == ["Ann", "Bob"]
    assert names(replica_as_of(changes, flow, (4, "t4"))) == ["Ann"]
    at_3 = replica_as_of(changes, flow, (3, "t3"))
    assert [(r["name"], r["city"]) for r in at_3.orderBy("name").collect()] == [("Ann", "Bergen"), ("Bob", "Rome")]
    assert at_3.columns == ["customer_id", "name", "email", "city", "tier"]


def test_replica_is_independent_of_arrival_order_and_redelivery(spark, changes):
    flow = customers_flow()
    shuffled = stream(spark, *reversed(changes.collect())).unionByName(changes)
    assertDataFrameEqual(replica_as_of(shuffled, flow, (4, "t4")), replica_as_of(changes, flow, (4, "t4")))


@pytest.mark.parametrize(("declared", "columns"), [
    (True, ["customer_id", "name", "email", "city", "tier"]),  # known before any change
    (False, ["customer_id"]),
])
def test_nothing_before_the_first_commit_gives_an_empty_replica_with_its_key(spark, changes, declared, columns):
    replica = replica_as_of(changes, customers_flow(declared), (0, ""))
    assert replica.count() == 0 and replica.columns == columns


def test_transaction_recorded_again_counts_at_its_latest_recording(spark, changes):
    """A shadow transaction recorded again with a later end time moves to its new place."""
    again = stream(spark, change(5, "t1", "INSERT", ANN))
    point = commit_point(spark, "shop_pg", 5, "t1")
    pinned = at_point(changes.unionByName(again), point, "shop_pg").filter("txn_id = 't1'")
    assert [r["sequence"]["position"] for r in pinned.collect()] == [5]


def test_watermark_of_a_stream(spark, changes):
    row = source_watermark("shop_pg", changes, ["gold.shop_pg_customers"]).first()
    assert (row["sequence"]["position"], row["txn_id"], row["transactions"], row["changes"]) == (4, "t4", 4, 4)
    assert row["gold_tables"] == ["gold.shop_pg_customers"]


TXN_COUNTS_DDL = "txn_id string, status string, sequence_position bigint, rows_changed bigint"


def test_watermark_counts_from_the_transactions_table_equal_the_distinct_counts(spark, changes):
    """The transactions table's rows (one per transaction) give the counts the whole stream's
    distinct counts give: a re-emitted change counts once, a transaction past the point, rolled
    back or without changes not at all, and snapshot corrections (no transaction rows) as well."""
    re_emitted = changes.filter("txn_id = 't2'")
    correction = stream(spark, change(4, "snap:1", "UPDATE", ANN_BERGEN, ANN)).withColumn("origin", F.lit("snapshot"))
    every = changes.unionByName(re_emitted).unionByName(correction)
    txns = spark.createDataFrame([
        (r["txn_id"], "committed", r["position"], r["n"])
        for r in changes.groupBy("txn_id", F.col("sequence.position").alias("position"))
        .agg(F.count_distinct("schema", "table", "key").alias("n")).collect()
    ] + [("t9", "committed", 9, 3), ("t0", "rolled_back", 1, 0), ("t8", "committed", 2, 0)], TXN_COUNTS_DDL)
    by_transactions = source_watermark("shop_pg", every, [], txns)
    assertDataFrameEqual(by_transactions, source_watermark("shop_pg", every, []))
    assert by_transactions.first()["transactions"] == 5


def test_watermark_of_an_empty_stream_shows_the_source_with_nothing_applied(spark):
    row = source_watermark("new_source", stream(spark), []).first()
    assert (row["source"], row["sequence"], row["transactions"], row["changes"]) == ("new_source", None, 0, 0)
    points = source_watermark("new_source", stream(spark), [])
    assert replica_at(stream(spark), customers_flow(), points).count() == 0


def test_commit_point_at_a_time(spark, changes):
    at = commit_point_at(changes, "shop_pg", "2026-03-02 09:00:03.5").first()
    assert (at["source"], at["sequence"]["txn"]) == ("shop_pg", "t3")
    assert commit_point_at(changes, "shop_pg", "2026-03-01").count() == 0


def test_audit_rows_apply_the_column_filters(spark, changes):
    flow = customers_flow(hash=["email"], mask=["city"], drop=["tier"], rename={"name": "full_name"})
    rows = {r["txn_id"]: r.asDict(recursive=True) for r in audit_rows(changes, flow, "gold.shop_pg_customers").collect()}
    insert, update, delete = rows["t1"], rows["t3"], rows["t4"]
    hashed = spark.sql("SELECT sha2('ann@example.com', 256)").first()[0]
    assert insert["after"] == {"customer_id": "1", "full_name": "Ann", "email": hashed, "city": "****"}
    assert insert["before"] is None and sorted(insert["changed_columns"]) == ["city", "customer_id", "email", "full_name"]
    assert update["changed_values"] == {"city": {"before": "****", "after": "****"}}
    assert (update["user"], update["role"], update["operation"]) == ("carol", "support", "UPDATE")
    assert delete["after"] is None and delete["before"]["full_name"] == "Bob"
    assert insert["key_values"] == {"customer_id": "1"}


def test_audit_rows_show_values_as_text_hashed_as_in_the_replicas(spark, changes):
    """The demo onboarding hashes shop_pg e-mails: the audit shows the replica's value."""
    row = audit_rows(changes, customers_flow(), "gold.x").filter("txn_id = 't3'").first().asDict(recursive=True)
    assert row["changed_values"] == {"city": {"before": "Oslo", "after": "Bergen"}}
    replica = replica_as_of(changes, customers_flow(), (3, "t3")).filter("customer_id = 1").first()
    assert row["after"] == {c: str(v) for c, v in replica.asDict().items()}


def test_a_change_the_replicas_could_not_apply_has_no_audit_row(spark):
    """A NULL key, a key value that does not fit the declared BIGINT, an unknown operation: in
    silver's anomalies with their reasons, in no replica, so in no audit row (docs/gold.md)."""
    ann = change(1, "t1", "INSERT", ANN)
    no_key = change(2, "t2", "INSERT", '{"customer_id":null,"name":"Nul"}', key='{"customer_id":null}')
    misfit = change(3, "t3", "INSERT", '{"customer_id":"c-3","name":"Cy"}', key='{"customer_id":"c-3"}')
    unknown = change(4, "t4", "UPSERT", ANN_BERGEN)
    flow = customers_flow()
    rows = audit_rows(stream(spark, ann, no_key, misfit, unknown), flow, "gold.shop_pg_customers")
    assert [(r["txn_id"], r["operation"]) for r in rows.collect()] == [("t1", "INSERT")]
    typed = stream(spark, ann, no_key, misfit, unknown)
    assert replica_as_of(typed, flow, (4, "t4")).count() == 1


def test_quarantined_line_attributed_to_its_table(spark):
    lines = spark.createDataFrame([
        ('{"schema":"shop","table":"orders","type":"update"}', "/l/shop/binlog/a.jsonl"),
        ("not json", "/l/shop_pg/shadow/shop.orders/b.jsonl"),
        ("{}", "/l/shop/snapshot/shop.products/snap-1/part-0.jsonl"),
        ('{"txn_id": 1}', "/l/shop_pg/shadow/_transactions/c.jsonl"),
    ], "_raw string, _source_file string")
    tables = [r[0] for r in lines.select(health.quarantined_table()).collect()]
    assert tables == ["shop.orders", "shop.orders", "shop.products", health.NO_TABLE]


def test_anomalies_per_table_count_each_change_once_with_every_kind(spark):
    """From silver's anomalies table: a change with two anomalies (an insert of an existing key
    that was also an impossible pair) counts once, a transaction recorded again counts once."""
    twice = with_pairs(change(2, "t2", "INSERT", ANN), ["INSERT after INSERT"])
    changes = stream(
        spark,
        change(1, "t1", "INSERT", ANN),
        twice, twice, with_pairs(change(3, "t2", "INSERT", ANN), ["INSERT after INSERT"]),  # re-emit, re-record
        change(4, "t4", "DELETE", None, before=BOB),
        change(5, "t5", "UPDATE", '{"product_id":9}', key='{"product_id":"9"}', table="products"),
    )
    rows = health.changes_with_anomalies(anomalies(changes))
    assertDataFrameEqual(health.anomalies_per_table(rows), spark.createDataFrame([
        ("shop.customers", 2, ["delete_of_missing_key", "insert_after_insert", "insert_of_existing_key"]),
        ("shop.products", 1, ["update_of_missing_key"]),
    ], "table string, anomalous_changes bigint, anomalies array<string>"))


def test_a_source_without_a_change_stream_has_no_anomalies(spark):
    """Only binlog and shadow sources get silver.<source>_anomalies: others count none, unread."""
    settings = PipelineSettings(landing_path="/l", onboarding=load_onboarding(REPO / "conf/onboarding.yml"))
    assert [inputs.has_change_stream(settings, s) for s in ("shop", "shop_pg", "snapshot_only")] == [True, True, False]

    def read(name):
        raise AssertionError(f"{name} read for a source without a change stream")

    rows = health.anomaly_rows(read, settings, "snapshot_only", spark)
    assert rows.count() == 0 and rows.columns == ["table", "change", "anomaly"]
    assert health.anomalies_per_table(rows).count() == 0


def test_widget_sql_groups_by_the_fields_that_are_not_aggregates():
    board = lakeview.load()
    datasets = lakeview.dataset_queries(board)
    by_name = {w.name: w for w in lakeview.widgets(board)}
    sql = lakeview.widget_sql(by_name["changes_by_user"], datasets)
    assert sql.startswith("SELECT `user` AS `user`, SUM(`changes`) AS `sum(changes)`, `role` AS `role` FROM (")
    assert sql.endswith(") AS dataset GROUP BY `user`, `role`")
    assert "GROUP BY" not in lakeview.widget_sql(by_name["recent_changes_table"], datasets)


def test_dashboard_file_is_deployed_by_the_bundle_and_names_tables_alone():
    """Catalog and schema are the target's (dataset_catalog, dataset_schema): one file serves all."""
    spec = yaml.safe_load((REPO / "resources/cdc_lakehouse.dashboard.yml").read_text())
    board = spec["resources"]["dashboards"]["cdc_lakehouse_dashboard"]
    assert board["file_path"] == "../src/dashboards/cdc_lakehouse.lvdash.json"
    assert board["dataset_catalog"] == "${var.catalog}"
    assert board["dataset_schema"] == "${resources.schemas.gold.name}"
    for name, sql in lakeview.dataset_queries(lakeview.load()).items():
        assert "FROM " in sql and "${" not in sql and not re.search(r"\bgold\.", sql), name


def test_a_table_not_created_yet_is_skipped(spark):
    """Locally an AUTO CDC target exists only after its first change (on Databricks, always)."""
    from cdc_lakehouse.gold.inputs import existing

    def read(name):
        if name == "silver.missing":
            raise LookupError(name)
        return spark.range(1)

    assert [name for name, _ in existing(read, ["silver.a", "silver.missing", "silver.b"])] == ["silver.a", "silver.b"]


def test_tied_commit_times_are_counted_among_committed_transactions(spark):
    at = datetime(2026, 3, 2, 9, 0, 1)
    txns = spark.createDataFrame([
        ("a", "committed", at), ("b", "committed", at), ("c", "committed", at.replace(second=2)),
        ("d", "rolled_back", at.replace(second=2)), ("e", "open", None), ("f", "committed", at.replace(second=3)),
        ("g", "committed", at.replace(second=3)), ("h", "committed", at.replace(second=3)),
    ], "txn_id string, status string, commit_ts timestamp")
    assert health.tied_commits(txns).first()["tied_commit_transactions"] == 5
    assert health.tied_commits(txns.limit(0)).first()["tied_commit_transactions"] == 0
