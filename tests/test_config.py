"""Onboarding configuration: the demo file, accessors, env resolution and every validation error."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:  # the package is not installed in the venv
    sys.path.insert(0, str(ROOT / "src"))

from cdc_lakehouse.config import (  # noqa: E402
    DataFlow,
    OnboardingError,
    load_onboarding,
    parse_onboarding,
)
from cdc_lakehouse.config.models import SourceMetadata  # noqa: E402

DEMO = ROOT / "conf" / "onboarding.yml"
DELETE = object()


# --- the demo file -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo():
    return load_onboarding(DEMO)


def test_demo_has_eight_flows_over_two_sources(demo):
    assert len(demo.flows) == 8
    assert demo.env == "dev"
    assert demo.sources == ["shop", "shop_pg"]
    assert [f.capture for f in demo.for_source("shop")] == ["binlog"] * 4
    assert [f.capture for f in demo.for_source("shop_pg")] == ["shadow"] * 4
    tables = ["shop.customers", "shop.products", "shop.orders", "shop.order_items"]
    for source in demo.sources:
        assert [f.qualified_table for f in demo.for_source(source)] == tables


def test_demo_customers_accessors(demo):
    flow = demo.for_table("shop_pg", "shop.customers")
    assert isinstance(flow, DataFlow)
    assert (flow.source, flow.capture, flow.data_flow_id) == ("shop_pg", "shadow", "201")
    assert (flow.schema_name, flow.table_name, flow.qualified_table) == ("shop", "customers", "shop.customers")
    assert flow.keys == ["customer_id"]
    assert flow.sequence_by == "__sequence"
    assert flow.scd_type == 2
    assert flow.apply_as_deletes == "__op = 'DELETE'"
    assert flow.except_column_list == ["__op", "__sequence", "__commit_ts", "__txn_id"]
    assert flow.track_history_column_list == ["name", "email", "city", "tier"]
    assert flow.track_history_except_column_list is None
    assert flow.silver_table == "shop_pg_customers"
    assert flow.scd2_table == "shop_pg_customers_history"
    assert flow.gold_table == "shop_pg_customers"
    assert flow.column_filters.hash == ["email"]
    assert flow.column_filters.drop == flow.column_filters.mask == []
    assert flow.bronze_table_properties == {"pipelines.reset.allowed": "false"}


def test_demo_shop_is_unfiltered_and_names_none_of_the_keys_change_stream_flows_ignore(demo):
    flows = demo.for_source("shop")
    assert all(f.column_filters == type(f.column_filters)() for f in flows)
    assert {(f.bronze_table, f.bronze_database, f.silver_database, f.source_path) for f in flows} == {(None,) * 4}
    assert demo.warnings == []


def test_demo_scd1_and_composite_keys(demo):
    products = demo.for_table("shop", "shop.products")
    assert products.scd_type == 1
    assert products.scd2_table is None
    assert products.track_history_column_list is None
    orders = demo.for_table("shop", "shop.orders")
    assert (orders.scd_type, orders.scd2_table) == (2, "shop_orders_history")
    assert orders.track_history_column_list is None  # every column is history
    assert demo.for_table("shop", "shop.order_items").keys == ["order_id", "line_no"]


def test_apply_changes_args(demo):
    customers = demo.for_table("shop", "shop.customers")
    assert customers.apply_changes_args(1) == {
        "keys": ["customer_id"],
        "sequence_by": "__sequence",
        "stored_as_scd_type": 1,
        "ignore_null_updates": False,
        "apply_as_deletes": "__op = 'DELETE'",
        "apply_as_truncates": "__op = 'TRUNCATE'",  # the change stream's (silver/truncates.py)
        "except_column_list": ["__op", "__sequence", "__commit_ts", "__txn_id"],
    }
    history = customers.apply_changes_args(2)
    assert history["stored_as_scd_type"] == 2
    assert history["track_history_column_list"] == ["name", "email", "city", "tier"]
    with pytest.raises(ValueError, match="no SCD2 table"):
        demo.for_table("shop", "shop.products").apply_changes_args(2)


def test_lookups(demo):
    assert demo.flow(104).table_name == "order_items"
    assert demo.for_table("shop", "SHOP.Orders").data_flow_id == "103"
    assert demo.for_table("shop", "shop.unreplicated") is None
    assert demo.for_group("demo") == demo.flows
    with pytest.raises(KeyError, match="no enabled flow for source 'nope'"):
        demo.for_source("nope")
    with pytest.raises(KeyError):
        demo.flow("999")


def test_landing_paths(demo):
    binlog = demo.for_table("shop", "shop.customers")
    shadow = demo.for_table("shop_pg", "shop.customers")
    assert binlog.landing_path("/landing/") == "/landing/shop/binlog"
    assert shadow.landing_path(Path("/landing")) == "/landing/shop_pg/shadow/shop.customers"
    assert shadow.snapshot_path("/landing") == "/landing/shop_pg/snapshot/shop.customers"


# --- environments ------------------------------------------------------------------------------


def test_env_suffixed_keys_resolve_for_the_chosen_env(tmp_path):
    envs = {"bronze_database_prod": "bronze", "silver_database_dev": "silver_dev", "silver_database_prod": "silver",
            "source_details__source_path_prod": "/Volumes/prod/feeds/stores"}
    path = write(tmp_path, [make_feed_flow(bronze_database_dev="bronze_dev", **envs)])
    dev, prod = load_onboarding(path).flow(301), load_onboarding(path, env="prod").flow(301)
    assert (dev.bronze_database, dev.silver_database) == ("bronze_dev", "silver_dev")
    assert (prod.bronze_database, prod.silver_database) == ("bronze", "silver")
    assert dev.source_path == str(tmp_path / "feeds" / "stores")  # relative to the file
    assert prod.source_path == "/Volumes/prod/feeds/stores"
    assert prod.bronze_table == dev.bronze_table  # not env-specific


def test_env_without_its_keys_is_an_error(tmp_path):
    message = error_of(tmp_path, [make_feed_flow()], env="stag")
    assert message == f"{tmp_path / 'onboarding.yml'}: env 'stag' has no keys in this file (its envs: dev, prod)"
    only_prod = make_feed_flow(source_details__source_path_stag="x", bronze_database_dev=DELETE)
    message = error_of(tmp_path, [only_prod], env="stag")
    entry = f"{tmp_path / 'onboarding.yml'}: flow #1 (data_flow_id=301)"
    assert f"{entry}: bronze_database_stag: required key is missing" in message
    assert "silver_database_stag: required key is missing" in message


def test_env_name_must_be_simple():
    with pytest.raises(OnboardingError, match="env must be letters and digits"):
        parse_onboarding([make_flow()], env="dev_eu")


# --- validation errors -------------------------------------------------------------------------


def make_flow(flow_id="101", table="customers", **changes):
    """A valid flow; ``changes`` maps dotted paths (``__`` for ``.``) to values or DELETE."""
    flow = {
        "data_flow_id": flow_id,
        "data_flow_group": "g1",
        "source_format": "cloudFiles",
        "source_details": {
            "source_database": "shop",
            "source_table": table,
            "source_path_dev": f"/landing/shop/shadow/shop.{table}",
        },
        "bronze_database_dev": "bronze_dev",
        "bronze_database_prod": "bronze",
        "bronze_table": f"shop_shadow_{table}",
        "silver_database_dev": "silver_dev",
        "silver_database_prod": "silver",
        "silver_table": f"shop_{table}",
        "silver_cdc_apply_changes": {
            "keys": ["customer_id"],
            "sequence_by": "__sequence",
            "scd_type": "2",
            "apply_as_deletes": "__op = 'DELETE'",
            "except_column_list": ["__op", "__sequence"],
        },
        "cdc_lakehouse": {"capture": "shadow", "source": "shop"},
    }
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = flow
        for name in parents:
            node = node.setdefault(name, {})
        if value is DELETE:
            del node[leaf]
        else:
            node[leaf] = copy.deepcopy(value)
    return flow


def error_of(tmp_path, flows, env="dev") -> str:
    path = tmp_path / "onboarding.yml"
    path.write_text(yaml.safe_dump(flows, sort_keys=False))
    with pytest.raises(OnboardingError) as caught:
        load_onboarding(path, env=env)
    return str(caught.value)


CDC = "silver_cdc_apply_changes"
SINGLE_FLOW_ERRORS = {
    "unknown key": (
        {"bronze_tabel": "x"},
        "bronze_tabel: unknown key (did you mean 'bronze_table'?)",
    ),
    "unknown nested key": (
        {f"{CDC}__sequence": "x"},
        f"{CDC}.sequence: unknown key (did you mean 'sequence_by'?)",
    ),
    "extension key outside cdc_lakehouse": (
        {"capture": "binlog"},
        "capture: unknown key; cdc-lakehouse settings go under cdc_lakehouse:",
    ),
    "unsupported dlt-meta key": (
        {"bronze_custom_transform_func": "f"},
        "bronze_custom_transform_func: a function, not an onboarding key: a dlt-meta notebook passes it to "
        "DataflowPipeline.invoke_dlt_pipeline",
    ),
    "bronze AUTO CDC": (
        {"bronze_cdc_apply_changes": {"keys": ["id"], "sequence_by": "ts", "scd_type": "1"}},
        "bronze_cdc_apply_changes: not supported for a shadow flow: its bronze keeps the raw landing data",
    ),
    "missing key": ({"silver_table": DELETE}, "silver_table: required key is missing"),
    "missing nested key": (
        {"cdc_lakehouse__capture": DELETE},
        "cdc_lakehouse.capture: required key is missing",
    ),
    "missing extension makes a feed flow": (
        {"cdc_lakehouse": DELETE},
        "bronze_reader_options: cloudFiles.format must be one of json, csv, parquet, orc, xml, text, binaryfile (got None;",
    ),
    "missing source table": (
        {"source_details__source_table": DELETE},
        "source_details.source_table: required key is missing",
    ),
    "env key without suffix": (
        {"bronze_database": "b"},
        "bronze_database: is set per environment in dlt-meta; write bronze_database_dev",
    ),
    "wrong type": (
        {f"{CDC}__keys": "customer_id"},
        f"{CDC}.keys: wrong type or value: Input should be a valid list (got 'customer_id')",
    ),
    "wrong type in a list": (
        {f"{CDC}__except_column_list": ["__op", {"a": 1}]},
        f"{CDC}.except_column_list[1]: wrong type or value: Input should be a valid string",
    ),
    "bad capture": (
        {"cdc_lakehouse__capture": "logical"},
        "cdc_lakehouse.capture: wrong type or value: Input should be 'binlog' or 'shadow'",
    ),
    "bad source name": (
        {"cdc_lakehouse__source": "shop/eu"},
        "cdc_lakehouse.source: must be letters, digits, '_' or '-'",
    ),
    "bad source format": (
        {"source_format": "parquet"},
        "source_format: must be cloudFiles (landing files read with Auto Loader), delta (a Delta table read as a "
        "stream) or snapshot",
    ),
    "scd_type 3": ({f"{CDC}__scd_type": "3"}, f"{CDC}.scd_type: must be 1 or 2 (got '3')"),
    "scd_type bool": ({f"{CDC}__scd_type": True}, f"{CDC}.scd_type: must be 1 or 2 (got True)"),
    "empty keys": ({f"{CDC}__keys": []}, f"{CDC}.keys: must not be empty"),
    "empty sequence_by": ({f"{CDC}__sequence_by": " "}, f"{CDC}.sequence_by: must not be empty"),
    "key in except_column_list": (
        {f"{CDC}__except_column_list": ["__op", "Customer_ID"]},
        f"{CDC}.except_column_list: key column 'customer_id' cannot be excluded",
    ),
    "key missing from column_list": (
        {f"{CDC}__except_column_list": DELETE, f"{CDC}__column_list": ["name"]},
        f"{CDC}.column_list: must include key column 'customer_id'",
    ),
    "column_list with except_column_list": (
        {f"{CDC}__column_list": ["customer_id", "name"]},
        f"{CDC}: column_list and except_column_list cannot be used together",
    ),
    "key dropped": (
        {"cdc_lakehouse__column_filters": {"drop": ["customer_id"]}},
        "cdc_lakehouse.column_filters.drop: key column 'customer_id' cannot be dropped",
    ),
    "key masked": (
        {"cdc_lakehouse__column_filters": {"mask": ["customer_id"]}},
        "cdc_lakehouse.column_filters.mask: key column 'customer_id' cannot be masked",
    ),
    "key hashed": (
        {"cdc_lakehouse__column_filters": {"hash": ["customer_id"]}},
        "cdc_lakehouse.column_filters.hash: key column 'customer_id' cannot be hashed",
    ),
    "key renamed away": (
        {"cdc_lakehouse__column_filters": {"rename": {"customer_id": "id"}}},
        "cdc_lakehouse.column_filters.rename: key column 'customer_id' cannot be renamed away",
    ),
    "key masked under its source name": (
        {
            f"{CDC}__keys": ["id"],
            "cdc_lakehouse__column_filters": {"rename": {"cust_id": "id"}, "mask": ["cust_id"]},
        },
        "cdc_lakehouse.column_filters.mask: key column 'id' cannot be masked",
    ),
    "dropped and hashed": (
        {"cdc_lakehouse__column_filters": {"drop": ["email"], "hash": ["email"]}},
        "cdc_lakehouse.column_filters: column 'email' is both dropped and in hash",
    ),
    "unknown filter": (
        {"cdc_lakehouse__column_filters": {"encrypt": ["email"]}},
        "cdc_lakehouse.column_filters.encrypt: unknown key",
    ),
    "both track_history lists": (
        {f"{CDC}__track_history_column_list": ["name"], f"{CDC}__track_history_except_column_list": ["city"]},
        f"{CDC}: track_history_column_list and track_history_except_column_list cannot be used together",
    ),
    "track_history on SCD1": (
        {f"{CDC}__scd_type": 1, f"{CDC}__track_history_column_list": ["name"]},
        f"{CDC}.track_history_column_list: only allowed with scd_type 2",
    ),
    "scd2_table on SCD1": (
        {f"{CDC}__scd_type": "1", "cdc_lakehouse__scd2_table": "h"},
        "cdc_lakehouse.scd2_table: only allowed with scd_type 2",
    ),
    "history table named like the replica": (
        {"cdc_lakehouse__scd2_table": "shop_customers"},
        "cdc_lakehouse.scd2_table: must differ from silver_table (the SCD1 replica)",
    ),
}


@pytest.mark.parametrize("changes, expected", SINGLE_FLOW_ERRORS.values(), ids=SINGLE_FLOW_ERRORS.keys())
def test_single_flow_errors_name_file_entry_and_field(tmp_path, changes, expected):
    flows = [make_flow("100", "products", **{f"{CDC}__keys": ["product_id"]}), make_flow(**changes)]
    message = error_of(tmp_path, flows)
    assert f"{tmp_path / 'onboarding.yml'}: flow #2 (data_flow_id=101): {expected}" in message


def test_error_without_a_data_flow_id_names_the_index(tmp_path):
    message = error_of(tmp_path, [make_flow(data_flow_id=DELETE)])
    assert message == f"{tmp_path / 'onboarding.yml'}: flow #1: data_flow_id: required key is missing"


def test_all_problems_are_reported_at_once(tmp_path):
    with pytest.raises(OnboardingError) as caught:
        load_onboarding(write(tmp_path, [make_flow(silver_table=DELETE, **{f"{CDC}__keys": []})]))
    assert len(caught.value.problems) == 2
    assert str(caught.value).count("\n") == 1


def test_numeric_ids_and_scd_types_are_accepted(tmp_path):
    onboarding = load_onboarding(write(tmp_path, [make_flow(101, **{f"{CDC}__scd_type": 2})]))
    assert onboarding.flows[0].data_flow_id == "101"
    assert onboarding.flows[0].scd_type == 2


# --- errors across flows -----------------------------------------------------------------------


def test_duplicate_data_flow_id(tmp_path):
    message = error_of(tmp_path, [make_flow("101"), make_flow("101", "orders", **{f"{CDC}__keys": ["order_id"]})])
    assert message == (
        f"{tmp_path / 'onboarding.yml'}: flow #2 (data_flow_id=101): data_flow_id: "
        "duplicate of flow #1 (data_flow_id=101)"
    )


def test_same_source_table_twice(tmp_path):
    second = make_flow("102", silver_table="customers_again", bronze_table="raw_again")
    message = error_of(tmp_path, [make_flow("101"), second])
    assert message == (
        f"{tmp_path / 'onboarding.yml'}: flow #2 (data_flow_id=102): source_details: "
        "shop table shop.customers is already replicated by flow #1 (data_flow_id=101)"
    )


def test_same_table_from_another_source_or_in_a_disabled_flow_is_fine(tmp_path):
    other_source = make_flow("102", silver_table="pg_customers", bronze_table="pg_raw",
                             cdc_lakehouse__source="shop_pg")
    disabled = make_flow("103", silver_table="old", bronze_table="old_raw", cdc_lakehouse__enabled=False)
    onboarding = load_onboarding(write(tmp_path, [make_flow("101"), other_source, disabled]))
    assert [f.data_flow_id for f in onboarding.flows] == ["101", "102"]
    assert len(onboarding.all_flows) == 3


def test_two_flows_writing_one_silver_or_gold_table(tmp_path):
    orders = {f"{CDC}__keys": ["order_id"]}
    same_silver = make_flow("102", "orders", silver_table="shop_customers", **orders)
    message = error_of(tmp_path, [make_flow("101"), same_silver])
    assert "flow #2 (data_flow_id=102): silver_table: silver table shop_customers is also written by flow #1" in message
    same_gold = make_flow("102", "orders", cdc_lakehouse__gold_table="shop_customers", **orders)
    message = error_of(tmp_path, [make_flow("101"), same_gold])
    assert message.endswith(
        "flow #2 (data_flow_id=102): cdc_lakehouse.gold_table: gold table shop_customers "
        "is also written by flow #1 (data_flow_id=101)"
    )


# --- file-level errors -------------------------------------------------------------------------


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    path = tmp_path / "onboarding.yml"
    path.write_text('- data_flow_id: "101"\n  bronze_table: [unclosed\n  silver_table: x\n')
    with pytest.raises(OnboardingError, match=r"onboarding\.yml: line 3, column \d+: invalid YAML"):
        load_onboarding(path)


def test_duplicate_yaml_key_is_an_error(tmp_path):
    path = tmp_path / "onboarding.yml"
    path.write_text('- data_flow_id: "101"\n  bronze_table: a\n  bronze_table: b\n')
    with pytest.raises(OnboardingError) as caught:
        load_onboarding(path)
    assert str(caught.value) == (
        f"{path}: line 3, column 3: invalid YAML: duplicate key 'bronze_table' (first at line 2)"
    )


def test_yaml_merge_keys_may_be_overridden(tmp_path):
    path = tmp_path / "onboarding.yml"
    first = yaml.safe_dump([make_flow()], sort_keys=False)
    path.write_text(first.replace("- data_flow_id:", "- &base\n  data_flow_id:", 1)
                    + '- <<: *base\n  data_flow_id: "102"\n  cdc_lakehouse: {capture: shadow, source: other}\n'
                    + "  silver_table: other_customers\n  bronze_table: other_raw\n")
    assert [f.source for f in load_onboarding(path).flows] == ["shop", "other"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("flows: []\n", "must be a non-empty list of flows (got a mapping)"),
        ("", "must be a non-empty list of flows (got nothing)"),
        ("- just a string\n", "flow #1: must be a mapping of onboarding keys (got a string)"),
    ],
)
def test_wrong_top_level_shape(tmp_path, text, expected):
    path = tmp_path / "onboarding.yml"
    path.write_text(text)
    with pytest.raises(OnboardingError) as caught:
        load_onboarding(path)
    assert str(caught.value) == f"{path}: {expected}"


def test_missing_file(tmp_path):
    with pytest.raises(OnboardingError, match=r"nope\.yml: cannot read"):
        load_onboarding(tmp_path / "nope.yml")


def write(tmp_path, flows) -> Path:
    path = tmp_path / "onboarding.yml"
    path.write_text(yaml.safe_dump(flows, sort_keys=False))
    return path


# --- dlt-meta flows: cdc_feed and snapshot kinds, warnings ----------------------------------------


def make_feed_flow(flow_id="301", table="stores", **changes):
    """A plain dlt-meta cloudFiles CDC feed (no cdc_lakehouse:), as dlt-meta's demo writes one."""
    flow = make_flow(flow_id, table, cdc_lakehouse=DELETE, **{
        "source_details__source_path_dev": f"feeds/{table}",
        "bronze_table": table, "silver_table": table,
        "bronze_reader_options": {"cloudFiles.format": "csv", "header": "true"},
        f"{CDC}__keys": ["store_id"], f"{CDC}__sequence_by": "dmsTimestamp",
        f"{CDC}__apply_as_deletes": "Op = 'D'", f"{CDC}__except_column_list": ["Op", "dmsTimestamp"],
    })
    return _apply(flow, changes)


# dlt-meta's tests/resources/onboarding_ac_bronze_type2.json, SCD1
BRONZE_CDC = {"keys": ["store_id"], "sequence_by": "dmsTimestamp", "scd_type": "1", "apply_as_deletes": "Op = 'D'",
              "except_column_list": ["Op", "dmsTimestamp", "_rescued_data"]}


def make_snapshot_flow(flow_id="302", table="stores", **changes):
    """A dlt-meta ``source_format: snapshot`` flow over CSV full loads ``LOAD_<n>.csv``."""
    apply = {"keys": ["store_id"], "scd_type": "1"}
    flow = {
        "data_flow_id": flow_id, "data_flow_group": "g1", "source_format": "snapshot",
        "source_details": {"source_path_dev": f"snapshots/{table}/LOAD_", "snapshot_format": "csv"},
        "bronze_reader_options": {"header": "true"},
        "bronze_database_dev": "main.bronze_dev", "bronze_table": table,
        "bronze_apply_changes_from_snapshot": apply,
        "silver_catalog_dev": "main", "silver_database_dev": "silver_dev", "silver_table": table,
        "silver_apply_changes_from_snapshot": apply,
    }
    return _apply(flow, changes)


def _apply(flow, changes):
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = flow
        for name in parents:
            node = node.setdefault(name, {})
        if value is DELETE:
            node.pop(leaf, None)
        else:
            node[leaf] = copy.deepcopy(value)
    return flow


def append_flow(**changes):
    """A dlt-meta append flow of more files, as dlt-meta's integration tests write one."""
    flow = {"name": "more_stores", "create_streaming_table": False, "source_format": "cloudFiles",
            "source_details": {"source_path_dev": "more/stores", "source_schema_path": "stores.ddl"},
            "reader_options": {"cloudFiles.format": "json"}, "once": False}
    return {**flow, **changes}


def make_bronze_only_flow(flow_id="301", **changes):
    """A dlt-meta cloudFiles flow with no silver key (dlt-meta's integration test group A2)."""
    flow = make_feed_flow(flow_id, **{CDC: DELETE}, silver_table=DELETE, silver_database_dev=DELETE,
                          silver_database_prod=DELETE, bronze_quarantine_table="stores_q")
    return _apply(flow, changes)


def test_a_plain_dlt_meta_cloudfiles_flow_is_a_cdc_feed(tmp_path):
    onboarding = load_onboarding(write(tmp_path, [make_flow(), make_feed_flow()]))
    feed = onboarding.flow(301)
    assert feed.kind == "cdc_feed" and not feed.is_change_stream
    assert [f.data_flow_id for f in onboarding.flows] == ["101"]  # the change-stream flows
    assert [f.data_flow_id for f in onboarding.dlt_meta_flows] == ["301"]
    assert (feed.bronze_target, feed.silver_target, feed.scd2_target) == (
        "bronze_dev.stores", "silver_dev.stores", "silver_dev.stores_history")
    assert feed.source_path == str(tmp_path / "feeds" / "stores")  # relative to the onboarding file
    assert feed.apply_changes_args(1) == {  # no change-stream TRUNCATE: the feed has no __op
        "keys": ["store_id"], "sequence_by": "dmsTimestamp", "stored_as_scd_type": 1,
        "ignore_null_updates": False, "apply_as_deletes": "Op = 'D'", "except_column_list": ["Op", "dmsTimestamp"]}


def test_a_bronze_only_feed_applying_its_changes_to_bronze(tmp_path):
    flow = load_onboarding(write(tmp_path, [make_bronze_only_flow(
        bronze_cdc_apply_changes={**BRONZE_CDC, "scd_type": "2", "flow_name": "stores_cdc"})])).flow(301)
    assert (flow.target("bronze"), flow.history_target("bronze")) == ("bronze_dev.stores", "bronze_dev.stores_history")
    assert flow.auto_cdc("bronze").flow_name == "stores_cdc" and flow.auto_cdc("silver") is None
    assert flow.apply_changes_args(2, "bronze") == {
        "keys": ["store_id"], "sequence_by": "dmsTimestamp", "stored_as_scd_type": 2, "ignore_null_updates": False,
        "apply_as_deletes": "Op = 'D'", "except_column_list": ["Op", "dmsTimestamp", "_rescued_data"]}
    with pytest.raises(ValueError, match="no silver_cdc_apply_changes"):
        flow.apply_changes_args(1)


def test_null_update_column_lists_load_and_reach_auto_cdc(tmp_path):
    """dlt-meta passes them to create_auto_cdc_flow; so do the pipeline's flows (both layers)."""
    flows = [make_feed_flow(**{f"{CDC}__ignore_null_updates_column_list": ["address"]}),
             make_bronze_only_flow("302", bronze_table="stores2", bronze_quarantine_table="stores2_q",
                                   bronze_cdc_apply_changes={**BRONZE_CDC, "scd_type": "2",
                                                             "ignore_null_updates_except_column_list": ["address"]})]
    onboarding = load_onboarding(write(tmp_path, flows))
    assert onboarding.flow(301).apply_changes_args(2)["ignore_null_updates_column_list"] == ["address"]
    bronze = onboarding.flow(302).apply_changes_args(1, "bronze")
    assert bronze["ignore_null_updates_except_column_list"] == ["address"] and not bronze["ignore_null_updates"]


def test_a_delta_feed_streams_a_table_in_place_of_files(tmp_path):
    flow = make_feed_flow(source_format="delta", bronze_reader_options=DELETE, source_details={
        "source_catalog_dev": "main", "source_database": "dlt_meta_source", "source_table": "stores"})
    feed = load_onboarding(write(tmp_path, [flow])).flow(301)
    assert (feed.kind, feed.source_details.table, feed.source_path) == ("cdc_feed", "main.dlt_meta_source.stores", None)


def test_a_snapshot_flow(tmp_path):
    flow = load_onboarding(write(tmp_path, [make_snapshot_flow()])).flow(302)
    assert flow.kind == "snapshot"
    assert (flow.bronze_target, flow.silver_target) == ("main.bronze_dev.stores", "main.silver_dev.stores")
    assert flow.silver_apply_changes_from_snapshot.args() == {"keys": ["store_id"], "stored_as_scd_type": 1}
    assert flow.source_path == str(tmp_path / "snapshots" / "stores" / "LOAD_")


DLT_META_ERRORS = {
    "feed without a source path": (
        make_feed_flow(source_details__source_path_dev=DELETE), "source_details.source_path_<env>: required"),
    "feed in an unknown format": (
        make_feed_flow(bronze_reader_options={"cloudFiles.format": "avro"}),
        "bronze_reader_options: cloudFiles.format must be one of json, csv, parquet, orc, xml, text, binaryfile (got "
        "'avro'; avro needs Spark's external avro module, which cdc-lakehouse's Spark lacks)"),
    "feed without its bronze database": (make_feed_flow(bronze_database_dev=DELETE),
                                         "bronze_database_dev: required key is missing"),
    "snapshot without silver apply": (make_snapshot_flow(silver_apply_changes_from_snapshot=DELETE),
                                      "silver_apply_changes_from_snapshot: required key is missing"),
    "snapshot in an unknown format": (make_snapshot_flow(source_details__snapshot_format="xml"),
                                      "source_details.snapshot_format: must be one of csv, json, parquet, delta"),
    "kafka append flow": (make_feed_flow(bronze_append_flows=[append_flow(source_format="kafka")]),
                          "bronze_append_flows[0].source_format: a kafka append flow reads a Kafka broker, which "
                          "cdc-lakehouse cannot start (use cloudFiles or delta)"),
    "append flow without its path": (
        make_feed_flow(bronze_append_flows=[append_flow(source_details={"source_path_prod": "x"})]),
        "bronze_append_flows[0].source_details.source_path_<env>: required key is missing"),
    "delta append flow without a table": (
        make_feed_flow(**{CDC: DELETE}, silver_append_flows=[append_flow(source_format="delta")]),
        "silver_append_flows[0].source_details: a delta append flow needs source_database and source_table"),
    "silver append flow into replicas": (
        make_feed_flow(silver_append_flows=[append_flow()]),
        f"silver_append_flows: not supported with {CDC} (rows appended to the replicas would bypass"),
    "append flow creating the table": (make_feed_flow(bronze_append_flows=[append_flow(create_streaming_table=True)]),
                                       "bronze_append_flows[0].create_streaming_table: must be false"),
    "snapshot with append flows": (make_snapshot_flow(bronze_append_flows=[append_flow()]),
                                   "bronze_append_flows: not supported for a snapshot flow"),
    "change stream with metadata columns": (
        make_flow(source_details__source_metadata={"include_autoloader_metadata_column": "True"}),
        "source_details.source_metadata: not supported for a shadow flow"),
    "change stream with a transformation": (
        make_flow(silver_transformation_json_dev="t.json"),
        "silver_transformation_json_dev: not supported for a shadow flow: a select or where over change rows could drop "
        "changes or alter keys and sequences; use cdc_lakehouse.column_filters"),
    "null updates ignored two ways": (
        make_feed_flow(**{f"{CDC}__ignore_null_updates": True, f"{CDC}__ignore_null_updates_column_list": ["address"]}),
        f"{CDC}: ignore_null_updates and ignore_null_updates_column_list cannot be used together"),
    "null updates ignored on a key": (
        make_bronze_only_flow(bronze_cdc_apply_changes={**BRONZE_CDC, "ignore_null_updates_except_column_list": [
            "store_id"]}),
        "bronze_cdc_apply_changes.ignore_null_updates_except_column_list: key column 'store_id' cannot be listed"),
    "null updates ignored on a column left out": (
        make_feed_flow(**{f"{CDC}__ignore_null_updates_column_list": ["Op"]}),
        f"{CDC}.ignore_null_updates_column_list: column 'Op' is not applied"),
    "change stream ignoring null updates": (
        make_flow(**{f"{CDC}__ignore_null_updates_column_list": ["email"]}),
        f"{CDC}.ignore_null_updates_column_list: not supported for a shadow flow (its changes carry whole rows, "
        f"where a NULL is a value the source set)"),
    "delta feed without its table": (make_feed_flow(source_format="delta", source_details=DELETE),
                                     "source_details: a delta flow needs source_database and source_table"),
    "silver reader options": (make_feed_flow(silver_reader_options={"skipChangeCommits": "true"}),
                              "silver_reader_options: dlt-meta key not implemented by cdc-lakehouse: silver streams "
                              "the bronze table without reader options"),
    "kafka feed": (make_feed_flow(source_format="kafka"),
                   "source_format: a kafka flow reads a Kafka broker, which cdc-lakehouse cannot start"),
    "change stream with a where": (make_flow(**{f"{CDC}__where": "tier = 'gold'"}),
                                   f"{CDC}.where: not supported for a shadow flow"),
    "bronze AUTO CDC with silver": (make_feed_flow(bronze_cdc_apply_changes=BRONZE_CDC),
                                    "bronze_cdc_apply_changes: not supported with silver tables in the flow"),
    "bronze AUTO CDC with append flows": (
        make_bronze_only_flow(bronze_cdc_apply_changes=BRONZE_CDC, bronze_append_flows=[append_flow()]),
        "bronze_append_flows: not supported with bronze_cdc_apply_changes"),
    "bronze AUTO CDC of snapshots": (make_snapshot_flow(bronze_cdc_apply_changes=BRONZE_CDC),
                                     "bronze_cdc_apply_changes: only for source_format cloudFiles"),
    "bronze AUTO CDC of SCD1 with history columns": (
        make_bronze_only_flow(bronze_cdc_apply_changes={**BRONZE_CDC, "track_history_column_list": ["address"]}),
        "bronze_cdc_apply_changes.track_history_column_list: only allowed with scd_type 2"),
    "bronze AUTO CDC leaving out its key": (
        make_bronze_only_flow(bronze_cdc_apply_changes={**BRONZE_CDC, "except_column_list": ["store_id"]}),
        "bronze_cdc_apply_changes.except_column_list: key column 'store_id' cannot be excluded"),
    "change stream with snapshot apply": (
        make_flow(silver_apply_changes_from_snapshot={"keys": ["customer_id"], "scd_type": 1}),
        "silver_apply_changes_from_snapshot: not supported for a shadow flow"),
}


@pytest.mark.parametrize("flow, expected", DLT_META_ERRORS.values(), ids=DLT_META_ERRORS.keys())
def test_dlt_meta_flow_errors(tmp_path, flow, expected):
    assert expected in error_of(tmp_path, [flow])


def test_a_feed_with_metadata_columns_append_flows_and_no_apply_changes(tmp_path):
    metadata = {"include_autoloader_metadata_column": "True", "select_metadata_cols": {"file": "_metadata.file_name"}}
    delta = append_flow(name="old_stores", source_format="delta",
                        source_details={"source_database": "main.bronze_dev", "source_table": "old_stores"})
    flow = load_onboarding(write(tmp_path, [make_feed_flow(**{CDC: DELETE}, source_details__source_metadata=metadata,
                                                           bronze_append_flows=[append_flow()],
                                                           silver_append_flows=[delta])])).flow(301)
    assert flow.kind == "cdc_feed" and flow.scd2_target is None
    assert flow.source_details.source_metadata == SourceMetadata(
        include_autoloader_metadata_column=True, select_metadata_cols={"file": "_metadata.file_name"})
    [more] = flow.append_flows("bronze")
    assert (more.name, more.source_format, more.once) == ("more_stores", "cloudFiles", False)
    # source_path_dev resolved for the env, both paths taken relative to the onboarding file
    assert more.source_details.source_path == str(tmp_path / "more" / "stores")
    assert more.source_details.source_schema_path == str(tmp_path / "stores.ddl")
    [old] = flow.append_flows("silver")
    assert old.source_details.table == "main.bronze_dev.old_stores"


def delta_sink(name="stores_out", **options):
    """A dlt-meta sink (dlt-meta's tests/resources/onboarding_sink.json shape) of format delta."""
    return {"name": name, "format": "delta", "options": options or {"tablename": "sinks.stores"}}


def test_sinks_of_a_feed(tmp_path):
    by_path = {**delta_sink("Stores_Copy", path="out/stores"), "select_exp": ["store_id"], "where_clause": "a = 1"}
    flow = load_onboarding(write(tmp_path, [make_feed_flow(bronze_sinks=[delta_sink()], silver_sinks=[by_path])])).flow(301)
    [bronze] = flow.sinks("bronze")
    assert (bronze.name, bronze.format, bronze.option("tableName"), bronze.where_clause) == (
        "stores_out", "delta", "sinks.stores", [])
    [silver] = flow.sinks("silver")
    assert silver.name == "stores_copy"  # dlt-meta lowercases sink names
    assert silver.option("path") == str(tmp_path / "out" / "stores")  # relative to the onboarding file
    assert (silver.select_exp, silver.where_clause) == (["store_id"], ["a = 1"])


SINK_ERRORS = {
    "kafka sink": (make_feed_flow(bronze_sinks=[{"name": "k", "format": "kafka", "options": {
        "kafka_sink_servers_secret_scope_name": "scope", "kafka_sink_servers_secret_scope_key": "servers"}}]),
        "bronze_sinks[0].format: a kafka sink needs a Kafka broker (kafka.bootstrap.servers from the secret scope "
        "'scope'), which cdc-lakehouse cannot start: use a delta sink"),
    "eventhub sink": (make_feed_flow(silver_sinks=[{"name": "e", "format": "eventhub", "options": {}}]),
                      "silver_sinks[0].format: an eventhub sink needs an Azure Event Hubs namespace, which"),
    "unknown format": (make_feed_flow(bronze_sinks=[{"name": "a", "format": "avro", "options": {}}]),
                       "bronze_sinks[0].format: must be one of delta, kafka, eventhub"),
    "delta sink naming no table": (make_feed_flow(bronze_sinks=[delta_sink(mergeSchema="true")]),
                                   "bronze_sinks[0].options: a delta sink writes one table: name it with tableName "
                                   "or with path (got neither)"),
    "delta sink naming two": (make_feed_flow(bronze_sinks=[delta_sink(tableName="a.b", path="/c")]),
                              "(got tableName and path)"),
    "sink into the flow's own table": (make_feed_flow(silver_sinks=[delta_sink(tableName="main.bronze_dev.stores")]),
                                       "silver_sinks[0]: table main.bronze_dev.stores is also written by flow #1"),
    "two sinks of one name": (make_feed_flow(bronze_sinks=[delta_sink()], silver_sinks=[delta_sink(path="/x")]),
                              "silver_sinks[0]: sink stores_out is also defined by flow #1 (data_flow_id=301): "
                              "bronze_sinks[0]"),
    "snapshot flow": (make_snapshot_flow(silver_sinks=[delta_sink()]), "silver_sinks: not supported for a snapshot flow"),
    "change stream": (make_flow(bronze_sinks=[delta_sink()]),
                      "bronze_sinks: not supported for a shadow flow: its outputs are the gold tables"),
}


@pytest.mark.parametrize("flow, expected", SINK_ERRORS.values(), ids=SINK_ERRORS.keys())
def test_sink_errors(tmp_path, flow, expected):
    assert expected in error_of(tmp_path, [flow])


def test_a_bronze_only_flow_has_no_silver_tables(tmp_path):
    flow = load_onboarding(write(tmp_path, [make_bronze_only_flow()])).flow(301)
    assert flow.kind == "cdc_feed" and not flow.has_silver
    assert (flow.bronze_target, flow.bronze_quarantine_target) == ("bronze_dev.stores", "bronze_dev.stores_q")
    assert (flow.silver_target, flow.silver_quarantine_target, flow.scd2_target) == (None, None, None)
    with pytest.raises(ValueError, match="flow 301 is bronze-only: it has no silver_table"):
        flow.replica_table


def test_bronze_only_flows_claim_their_bronze_tables_only(tmp_path):
    onboarding = load_onboarding(write(tmp_path, [make_bronze_only_flow(), make_feed_flow("302", "products")]))
    assert [f.has_silver for f in onboarding.dlt_meta_flows] == [False, True]
    message = error_of(tmp_path, [make_bronze_only_flow(), make_bronze_only_flow("302")])
    assert "flow #2 (data_flow_id=302): table bronze_dev.stores is also written by flow #1" in message


def make_silver_only_flow(flow_id="303", table="stores_eu", **changes):
    """A dlt-meta flow with no source of its own (dlt-meta's silver fanout demo): its silver table
    reads a bronze table that another flow fills."""
    flow = {"data_flow_id": flow_id, "data_flow_group": "g1", "bronze_database_dev": "bronze_dev",
            "bronze_table": "stores", "silver_database_dev": "silver_dev", "silver_table": table,
            "silver_transformation_json_dev": "t.json"}
    return _apply(flow, changes)


def test_a_silver_only_flow_reads_a_bronze_table_it_does_not_fill(tmp_path):
    onboarding = load_onboarding(write(tmp_path, [make_feed_flow(**{CDC: DELETE}), make_silver_only_flow()]))
    flow = onboarding.flow(303)  # the feed's bronze table is not claimed twice: the silver-only flow reads it
    assert flow.kind == "cdc_feed" and not flow.has_bronze and flow.has_silver
    assert (flow.bronze_target, flow.silver_target, flow.scd2_target) == ("bronze_dev.stores", "silver_dev.stores_eu",
                                                                          None)
    assert flow.silver_transformation_json == str(tmp_path / "t.json")
    alone = load_onboarding(write(tmp_path, [make_silver_only_flow()]))  # an earlier run's bronze table
    assert not alone.flow(303).has_bronze


def test_a_silver_only_flow_applying_snapshots_is_a_snapshot_flow(tmp_path):
    apply = {"keys": ["store_id"], "scd_type": "2"}
    flow = load_onboarding(write(tmp_path, [make_silver_only_flow(silver_apply_changes_from_snapshot=apply)])).flow(303)
    assert flow.kind == "snapshot" and flow.scd2_target == "silver_dev.stores_eu_history"


SILVER_ONLY_ERRORS = {
    "bronze reader options": (
        make_silver_only_flow(bronze_reader_options={"header": "true"}),
        "bronze_reader_options: not for a silver-only flow (it has no source_format: it reads bronze_dev.stores, "
        "which another flow fills)"),
    "source details": (make_silver_only_flow(source_details={"source_path_dev": "x"}),
                       "source_details: not for a silver-only flow"),
    "bronze expectations": (make_silver_only_flow(bronze_data_quality_expectations_json_dev="dqe.json"),
                            "bronze_data_quality_expectations_json_dev: not for a silver-only flow"),
    "bronze append flows": (make_silver_only_flow(bronze_append_flows=[append_flow()]),
                            "bronze_append_flows: not for a silver-only flow"),
    "bronze sinks": (make_silver_only_flow(bronze_sinks=[delta_sink()]), "bronze_sinks: not for a silver-only flow"),
    "no silver table either": (make_silver_only_flow(silver_table=DELETE),
                               "source_format: required key is missing (only a silver-only flow"),
    "no bronze table to read": (make_silver_only_flow(bronze_table=DELETE), "bronze_table: required key is missing"),
    "silver append flows into replicas": (
        make_silver_only_flow(**{f"{CDC}__keys": ["store_id"], f"{CDC}__sequence_by": "ts", f"{CDC}__scd_type": "1"},
                              silver_append_flows=[append_flow()]),
        f"silver_append_flows: not supported with {CDC}"),
    "change stream without source_format": (make_flow(source_format=DELETE), "source_format: required key is missing"),
}


@pytest.mark.parametrize("flow, expected", SILVER_ONLY_ERRORS.values(), ids=SILVER_ONLY_ERRORS.keys())
def test_silver_only_flow_errors(tmp_path, flow, expected):
    assert expected in error_of(tmp_path, [flow])


def test_two_silver_only_flows_writing_one_silver_table(tmp_path):
    message = error_of(tmp_path, [make_silver_only_flow(), make_silver_only_flow("304")])
    assert "flow #2 (data_flow_id=304): table silver_dev.stores_eu is also written by flow #1" in message


SILVER_TABLE_MISSING = {
    "feed with silver keys": make_feed_flow(silver_table=DELETE),
    "feed with a silver transformation only": make_bronze_only_flow(silver_transformation_json_dev="t.json"),
    "snapshot": make_snapshot_flow(silver_table=DELETE),
    "change stream": make_flow(silver_table=DELETE),
    "change stream with scd2": make_flow(silver_table=DELETE, cdc_lakehouse__scd2_table="history"),
}


@pytest.mark.parametrize("flow", SILVER_TABLE_MISSING.values(), ids=SILVER_TABLE_MISSING.keys())
def test_silver_table_is_required_unless_the_flow_is_bronze_only(tmp_path, flow):
    assert "(data_flow_id=" in (message := error_of(tmp_path, [flow]))
    assert ": silver_table: required key is missing" in message


def test_a_feed_with_silver_keys_also_needs_its_silver_database(tmp_path):
    message = error_of(tmp_path, [make_bronze_only_flow(silver_table="stores")])
    assert "silver_database_dev: required key is missing" in message


def test_a_silver_quarantine_table(tmp_path):
    flow = load_onboarding(write(tmp_path, [make_feed_flow(silver_quarantine_table="stores_q")])).flow(301)
    assert flow.silver_quarantine_target == "silver_dev.stores_q"
    named = make_feed_flow(silver_quarantine_table="stores_q", silver_database_quarantine_dev="main.quarantine")
    assert load_onboarding(write(tmp_path, [named])).flow(301).silver_quarantine_target == "main.quarantine.stores_q"


def test_two_dlt_meta_flows_writing_one_table(tmp_path):
    message = error_of(tmp_path, [make_feed_flow(), make_snapshot_flow(bronze_database_dev="bronze_dev")])
    assert "flow #2 (data_flow_id=302): table bronze_dev.stores is also written by flow #1" in message


def test_dlt_meta_keys_that_do_not_change_results_are_warnings(tmp_path):
    layout = {"bronze_table_path_dev": "/x", "bronze_table_path_prod": "/y", "silver_cluster_by": ["store_id"],
              "bronze_quarantine_table_cluster_by": ["store_id"], "silver_quarantine_table_comment": "q"}
    onboarding = load_onboarding(write(tmp_path, [make_feed_flow(**layout), make_feed_flow("302", "products", **layout)]))
    assert len(onboarding.dlt_meta_flows) == 2
    where = str(tmp_path / "onboarding.yml")
    assert f"{where}: bronze_table_path_dev: ignored: tables are managed by the pipeline, in its catalog storage " \
           "(data_flow_id 301, 302)" in onboarding.warnings
    assert len(onboarding.warnings) == 4  # one line per key, not per flow; other envs' values say nothing


def test_snapshot_flows_warn_about_the_keys_dlt_meta_ignores_for_them(tmp_path):
    """dlt-meta applies a snapshot flow's full loads as read: no expectations, quarantine, metadata."""
    flow = make_snapshot_flow(bronze_data_quality_expectations_json_dev="dqe.json", bronze_quarantine_table="q",
                              silver_data_quality_expectations_json_dev="dqe.json",
                              source_details__source_metadata={"include_autoloader_metadata_column": "True"})
    lines = [line.split(": ", 1)[1] for line in load_onboarding(write(tmp_path, [flow])).warnings]
    assert "silver_data_quality_expectations_json_dev: ignored by snapshot flows, as dlt-meta ignores it: AUTO CDC " \
           "FROM SNAPSHOT would read a row an expectation dropped as a delete (data_flow_id 302)" in lines
    assert [line.split(":")[0] for line in lines] == [
        "bronze_data_quality_expectations_json_dev", "silver_data_quality_expectations_json_dev",
        "bronze_quarantine_table", "source_details.source_metadata"]


def test_change_stream_flows_warn_about_the_dlt_meta_keys_they_do_not_use(tmp_path):
    binlog = make_flow(cdc_lakehouse={"capture": "binlog", "source": "shop"})
    onboarding = load_onboarding(write(tmp_path, [binlog, make_flow("201", "orders")]))
    lines = [line.split(": ", 1)[1] for line in onboarding.warnings]
    assert any(line.startswith("bronze_database_dev: ignored by binlog flows: its bronze tables are in the "
                               "pipeline's bronze schema") for line in lines)
    assert any(line.startswith("source_details.source_path_dev: ignored by shadow flows") for line in lines)
