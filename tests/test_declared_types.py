"""Declared column types (``source_details.source_schema_path``): a replica takes the types of
the source table's schema file, not the types its values happen to show. A value that does not
fit is held back with an anomaly; a column the file does not declare is applied without it, and
named in an anomaly; a schema file that cannot be used stops the update with the flow and file
named. Without a schema file, a streaming change stream (Databricks) is a clear error. Unit tests
on small change streams, then one pipeline run on the demo's declared shop.products."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.config import OnboardingError, load_onboarding
from cdc_lakehouse.runtime.runner import run_pipeline
from cdc_lakehouse.silver.apply_policy import anomalies
from cdc_lakehouse.silver.declared_types import DeclaredSchemaError, declared_table
from cdc_lakehouse.silver.replica_input import replica_changes
from cdc_lakehouse.contract.corrections import CHANGE_STREAM_SCHEMA
from cdc_lakehouse.storage import LakeStore
from test_snapshot_support import SILVER_SOURCES, Binlog, products_onboarding, reconcile, run, write_snapshot

T0 = datetime(2026, 3, 2, 9, 0, 0)
DDL = "order_id BIGINT, price DECIMAL(10,2), placed DATE, note STRING"


def onboarding_flow(tmp_path, ddl: str | None = DDL, schema_path: str = "schemas/app.orders.ddl",
                    filters: dict | None = None, **apply):
    """One binlog flow of table app.orders whose schema file (relative to the onboarding file,
    which is loaded from elsewhere) holds ``ddl``; ``filters``: its column filters."""
    if ddl is not None:
        (tmp_path / "schemas").mkdir(exist_ok=True)
        (tmp_path / schema_path).write_text(ddl)
    flow = {
        "data_flow_id": "1", "data_flow_group": "g", "source_format": "cloudFiles",
        "source_details": {"source_database": "app", "source_table": "orders", "source_schema_path": schema_path},
        "bronze_database_dev": "bronze", "bronze_table": "src_binlog_events",
        "silver_database_dev": "silver", "silver_table": "src_orders",
        "silver_cdc_apply_changes": {"keys": ["order_id"], "sequence_by": "__sequence", "scd_type": "1", **apply},
        "cdc_lakehouse": {"capture": "binlog", "source": "src", **({"column_filters": filters} if filters else {})},
    }
    path = tmp_path / "onboarding.yml"
    path.write_text(yaml.safe_dump([flow]))
    return load_onboarding(path).flows[0]


def change(order_id, op, pos, row):
    """A change of app.orders; ``row`` is the image as a dict, or as JSON text to write it exactly."""
    key = json.dumps({"order_id": str(order_id)}, separators=(",", ":"))
    image = row if row is None or isinstance(row, str) else json.dumps(row)
    return ("src", "app", "orders", key, op, image, None, [], [], 1, f"t{pos}",
            T0 + timedelta(seconds=pos), (pos, f"t{pos}"), "u", "r", "binlog")


def stream(spark, rows):
    return spark.createDataFrame(rows, CHANGE_STREAM_SCHEMA)


@pytest.fixture()
def orders(tmp_path):
    flow = onboarding_flow(tmp_path)
    return flow, declared_table(flow)


def test_a_declared_table_takes_the_declared_types_whatever_the_values_look_like(spark, orders):
    flow, table = orders
    # 0 would infer BIGINT, 19.99 DOUBLE and the date STRING; the file says otherwise.
    changes = stream(spark, [
        change(1, "INSERT", 1, {"order_id": 1, "price": 0, "placed": "2026-03-01", "note": None}),
        change(2, "INSERT", 2, {"order_id": 2, "price": 19.99, "placed": "2026-03-02", "note": "gift"}),
    ])
    typed = replica_changes(changes, flow.column_filters, table).select("order_id", "price", "placed", "note")
    assertDataFrameEqual(typed, spark.createDataFrame(
        [(1, Decimal("0.00"), date(2026, 3, 1), None), (2, Decimal("19.99"), date(2026, 3, 2), "gift")], DDL))


def test_a_value_that_does_not_fit_is_held_back_with_an_anomaly(spark, orders):
    flow, table = orders
    changes = stream(spark, [
        change(1, "INSERT", 1, {"order_id": 1, "price": 5, "placed": "2026-03-01"}),
        change(1, "UPDATE", 2, {"order_id": 1, "price": "five", "placed": "2026-03-01"}),
        change(1, "DELETE", 3, {"order_id": 1, "price": "five", "placed": "never"}),  # a delete needs its key only
    ])
    typed = replica_changes(changes, flow.column_filters, table)
    applied = [(r["__txn_id"], r["__op"]) for r in typed.orderBy("__txn_id").collect()]
    assert applied == [("t1", "INSERT"), ("t3", "DELETE")]
    found = anomalies(changes, [table]).select("txn_id", "anomaly", "applied_as", "detail").collect()
    assert [(r["txn_id"], r["anomaly"], r["applied_as"]) for r in found] == [("t2", "value_does_not_fit", "NONE")]
    assert "price (decimal(10,2)): not applied" in found[0]["detail"]


def test_more_decimals_than_the_declared_scale_do_not_fit(spark, orders):
    """Spark would round 1.234 to 1.23: a change in value, so held back like any misfit."""
    flow, table = orders
    changes = stream(spark, [change(1, "INSERT", 1, {"order_id": 1, "price": 1.234}),
                             change(2, "INSERT", 2, {"order_id": 2, "price": 1.2300})])
    assert [r["order_id"] for r in replica_changes(changes, flow.column_filters, table).collect()] == [2]
    assert [r["anomaly"] for r in anomalies(changes, [table]).collect()] == ["value_does_not_fit"]


KINDS = "order_id BIGINT, p DECIMAL(10,2), f FLOAT, x DOUBLE, d DATE, n INT"


@pytest.mark.parametrize(("value", "fits"), [
    ('"p":100.0', True), ('"p":1.2E-5', False), ('"p":1.5E1', True),   # Spark would read 0.00 for 1.2E-5
    ('"f":0.5', True), ('"f":1e300', False), ('"x":1e300', True),      # a FLOAT overflows to infinity
    ('"d":"2026-03-01"', True), ('"d":"2026-03-01T10:00:00"', False),  # the time would be cut off
    ('"n":3', True), ('"n":3.7', False), ('"n":3000000000', False),
])
def test_a_value_spark_would_change_does_not_fit(spark, tmp_path, value, fits):
    flow = onboarding_flow(tmp_path, KINDS)
    changes = stream(spark, [change(1, "INSERT", 1, '{"order_id":1,%s}' % value)])
    assert replica_changes(changes, flow.column_filters, declared_table(flow)).count() == (1 if fits else 0)


def test_only_values_that_reach_the_replica_must_fit(spark, tmp_path):
    flow = onboarding_flow(tmp_path, filters={"drop": ["placed"]}, except_column_list=["price"])
    table = declared_table(flow)
    bad_but_unused = {"order_id": 1, "price": "five", "placed": "never", "note": "x"}
    changes = stream(spark, [change(1, "INSERT", 1, bad_but_unused)])
    assert replica_changes(changes, flow.column_filters, table).count() == 1
    assert anomalies(changes, [table]).count() == 0


def test_a_key_that_does_not_fit_holds_back_even_a_delete(spark, tmp_path):
    flow = onboarding_flow(tmp_path)
    table = declared_table(flow)
    changes = stream(spark, [change("A-1", "DELETE", 1, None)])
    assert replica_changes(changes, flow.column_filters, table).count() == 0
    found = anomalies(changes, [table]).collect()
    assert [(r["anomaly"], r["applied_as"]) for r in found] == [("value_does_not_fit", "NONE")]
    assert "order_id (bigint)" in found[0]["detail"]


def test_an_undeclared_column_is_applied_without_it_and_named(spark, tmp_path):
    flow = onboarding_flow(tmp_path, except_column_list=["secret"])
    table = declared_table(flow)
    changes = stream(spark, [
        change(1, "INSERT", 1, {"order_id": 1, "price": 5, "color": "red", "size": 3, "secret": "x"}),
        change(2, "INSERT", 2, {"order_id": 2, "price": 6}),
    ])
    typed = replica_changes(changes, flow.column_filters, table)
    assert typed.columns[:4] == ["order_id", "price", "placed", "note"]
    assert typed.count() == 2
    found = anomalies(changes, [table]).collect()
    assert [(r["txn_id"], r["anomaly"], r["applied_as"]) for r in found] == [("t1", "undeclared_column", "INSERT")]
    assert "not declared in source_schema_path: color, size;" in found[0]["detail"]  # secret is excluded anyway


def test_undeclared_tables_of_the_source_keep_inferred_types_and_no_new_anomalies(spark, orders):
    _, table = orders
    other = [("src", "app", "items", '{"id":"1"}', "INSERT", '{"id":1,"anything":"x"}', None, [], [], 1, "t9",
              T0, (9, "t9"), "u", "r", "binlog")]
    assert anomalies(stream(spark, other), [table]).count() == 0


def test_without_a_schema_file_a_streaming_change_stream_is_a_clear_error(spark, tmp_path):
    changes = spark.readStream.schema(CHANGE_STREAM_SCHEMA).json(str(tmp_path))
    with pytest.raises(DeclaredSchemaError, match="^flow 1 .app.orders.: a streaming .*source_schema_path"):
        replica_changes(changes, table="flow 1 (app.orders)")


def test_with_a_schema_file_a_streaming_change_stream_is_typed_without_looking_at_rows(spark, orders, tmp_path):
    flow, table = orders
    landing = tmp_path / "changes"
    landing.mkdir()
    stream(spark, [change(1, "INSERT", 1, {"order_id": 1, "price": 2.5})]).write.parquet(str(landing / "part"))
    changes = spark.readStream.schema(CHANGE_STREAM_SCHEMA).parquet(str(landing / "part"))
    typed = replica_changes(changes, flow.column_filters, table)
    query = typed.writeStream.format("memory").queryName("declared_typed").trigger(availableNow=True).start()
    query.awaitTermination()
    assert [(r["order_id"], r["price"]) for r in spark.table("declared_typed").collect()] == [(1, Decimal("2.50"))]


@pytest.mark.parametrize(("ddl", "apply", "problem"), [
    (None, {}, "cannot read"),
    ("order_id BIGINT, price NUMBERISH", {}, "not a Spark DDL schema"),
    ("price DECIMAL(10,2)", {}, "declares no column for the key order_id"),
    (DDL, {"column_list": ["order_id", "status"]}, "declares no column for the column_list entry status"),
    (DDL, {"scd_type": "2", "track_history_column_list": ["price", "tier"]},
     "declares no column for the track_history_column_list entry tier"),
])
def test_a_schema_file_that_cannot_be_used_names_the_flow_and_the_file(spark, tmp_path, ddl, apply, problem):
    flow = onboarding_flow(tmp_path, ddl, **apply)
    with pytest.raises(DeclaredSchemaError, match=problem) as error:
        declared_table(flow)
    assert "flow 1 (app.orders)" in str(error.value)
    assert str(tmp_path / "schemas" / "app.orders.ddl") in str(error.value)


def test_the_pipeline_applies_the_declared_types_and_records_what_they_refuse(spark, tmp_path):
    """The demo's shop.products flow (conf/schemas/shop/shop.products.ddl), bronze to silver."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    onboarding = products_onboarding(tmp_path, scd_type=2)
    flows = yaml.safe_load(onboarding.read_text())  # its schema file, copied to be edited below
    (tmp_path / "products.ddl").write_text(Path(flows[0]["source_details"]["source_schema_path"]).read_text())
    flows[0]["source_details"]["source_schema_path"] = "products.ddl"
    onboarding.write_text(yaml.safe_dump(flows))
    tea = {"product_id": 1, "sku": "A", "name": "tea", "price": 3.5, "stock": 7}
    log = Binlog()
    log.txn(1, ("insert", tea))
    log.txn(2, ("insert", {"product_id": 2, "sku": "B", "name": "mug", "price": "cheap", "stock": 1}))
    log.txn(3, ("update", tea, {**tea, "price": 3.75, "color": "green"}))
    log.write(landing, "mysql-bin.000001.jsonl")
    run(spark, landing, lake, onboarding)

    store = LakeStore(spark, lake)
    declared = "product_id bigint, sku string, name string, price decimal(10,2), stock int"
    assertDataFrameEqual(store.read("silver.shop_products"),
                         spark.createDataFrame([(1, "A", "tea", Decimal("3.75"), 7)], declared))
    history = store.read("silver.shop_products_history")
    columns = history.select("product_id", "sku", "name", "price", "stock")
    assert columns.schema == spark.createDataFrame([], declared).schema
    assert sorted(r["price"] for r in history.collect()) == [Decimal("3.50"), Decimal("3.75")]
    found = store.read("silver.shop_anomalies").select("key", "txn_id", "anomaly", "applied_as", "detail").collect()
    assert sorted((r["key"], r["txn_id"], r["anomaly"], r["applied_as"]) for r in found) == [
        ('{"product_id":"1"}', "xid:3", "undeclared_column", "UPDATE"),
        ('{"product_id":"2"}', "xid:2", "value_does_not_fit", "NONE"),
    ]
    assert any("price (decimal(10,2))" in r["detail"] for r in found)
    assert any("color" in r["detail"] for r in found)

    # A snapshot with the undeclared column: the replica never holds it, so it corrects nothing.
    write_snapshot(landing, "s1", [{**tea, "price": 3.75, "color": "green"}])
    [outcome] = reconcile(spark, landing, lake, onboarding)
    assert {k: outcome.counts[k] for k in ("inserts", "updates", "deletes", "unchanged")} == {
        "inserts": 0, "updates": 0, "deletes": 0, "unchanged": 1}

    # Declaring the new column and refreshing the replicas brings its values in.
    (tmp_path / "products.ddl").write_text(f"{declared}, color string")
    run_pipeline(spark, SILVER_SOURCES, lake, {"cdc_lakehouse.landing_path": str(landing),
                                               "cdc_lakehouse.onboarding_file": str(onboarding)}, full_refresh=True)
    assert [r.asDict() for r in store.read("silver.shop_products").select("product_id", "color").collect()] == [
        {"product_id": 1, "color": "green"}]


def test_a_uri_is_refused_when_the_onboarding_file_loads(tmp_path):
    with pytest.raises(OnboardingError, match="source_schema_path: .*not a URI"):
        onboarding_flow(tmp_path, schema_path="dbfs:/schemas/app.orders.ddl", ddl=None)


def test_a_string_column_keeps_numbers_as_written_and_a_snapshot_of_the_row_corrects_nothing(spark, tmp_path):
    """Spark's parser reads a number into a STRING through a double (``0.00`` -> ``0.0``), while
    its JSON file reader, which reads snapshots, keeps the text: the two must agree, or every
    snapshot would correct the row again."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    onboarding = products_onboarding(tmp_path, scd_type=1)
    flows = yaml.safe_load(onboarding.read_text())
    (tmp_path / "products.ddl").write_text("product_id BIGINT, sku STRING, name STRING, price DECIMAL(10,2), stock INT")
    flows[0]["source_details"]["source_schema_path"] = "products.ddl"
    onboarding.write_text(yaml.safe_dump(flows))
    placeholder = {"product_id": 1, "sku": "SKU", "name": "NAME", "price": 1.5, "stock": 7}
    exact = {'"SKU"': "0.00", '"NAME"': '{"grams": 12345678901234567890.10}'}

    def as_written(path: Path) -> None:
        text = path.read_text()
        for old, new in exact.items():
            text = text.replace(old, new)
        path.write_text(text)

    log = Binlog()
    log.txn(1, ("insert", placeholder))
    as_written(log.write(landing, "mysql-bin.000001.jsonl"))
    run(spark, landing, lake, onboarding)
    replica = LakeStore(spark, lake).read("silver.shop_products").select("sku", "name").collect()
    assert [tuple(r) for r in replica] == [("0.00", '{"grams": 12345678901234567890.10}')]

    as_written(write_snapshot(landing, "s1", [placeholder]) / "part-00000.jsonl")
    [outcome] = reconcile(spark, landing, lake, onboarding)
    assert {k: outcome.counts[k] for k in ("inserts", "updates", "deletes", "unchanged")} == {
        "inserts": 0, "updates": 0, "deletes": 0, "unchanged": 1}
