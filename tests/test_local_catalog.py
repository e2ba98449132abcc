"""Spark SQL names over a local lake (runtime/catalog.py): pure string rewriting, no Spark."""

from cdc_lakehouse.runtime.catalog import rewrite

TABLES = ["gold.audit_log", "gold.audit_transactions", "silver.shop_orders"]


def test_schema_qualified_names_point_at_the_tables_views():
    assert rewrite("SELECT * FROM gold.audit_log JOIN `silver`.`shop_orders` o", TABLES) == (
        "SELECT * FROM gold__audit_log JOIN silver__shop_orders o")


def test_a_table_named_alone_is_read_from_the_default_schema_as_lakeview_does():
    sql = "SELECT audit_log FROM audit_log a JOIN (SELECT max(x) FROM `audit_transactions`) t"
    assert rewrite(sql, TABLES, default_schema="gold") == (
        "SELECT audit_log FROM gold__audit_log a JOIN (SELECT max(x) FROM gold__audit_transactions) t")


def test_without_a_default_schema_a_name_alone_is_left_as_written():
    assert rewrite("SELECT * FROM audit_log", TABLES) == "SELECT * FROM audit_log"
    assert rewrite("SELECT * FROM shop_orders", TABLES, default_schema="gold") == "SELECT * FROM shop_orders"
