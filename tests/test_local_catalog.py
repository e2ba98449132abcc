"""Spark SQL over a local lake (runtime/catalog.py): the lake's tables in Spark's catalog, the
query's text as written."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import AnalysisException
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.runtime.catalog import run_sql
from cdc_lakehouse.storage import LakeStore


def _lake(spark, root: Path, orders: list[tuple[int, str]]) -> Path:
    store = LakeStore(spark, root)
    store.append("silver.shop_orders", spark.createDataFrame(orders, "order_id int, status string"))
    store.append("gold.audit_log", spark.createDataFrame([("silver.shop_orders", 1)], "table_name string, n int"))
    return root


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> Path:
    return _lake(spark, tmp_path_factory.mktemp("catalog") / "lake", [(1, "new"), (2, "paid")])


def test_string_literals_comments_and_aliases_that_look_like_tables_stay_as_written(spark, lake):
    got = run_sql(spark, lake, """
        SELECT 'silver.shop_orders' AS `gold.audit_log`, /* silver.shop_orders */ count(*) AS n
        FROM silver.shop_orders -- gold.audit_log
        WHERE 'silver.shop_orders' = 'silver.shop_orders'""")
    assert got.columns == ["gold.audit_log", "n"]
    assert [tuple(r) for r in got.collect()] == [("silver.shop_orders", 2)]


def test_a_filter_on_a_table_name_matches_it(spark, lake):
    got = run_sql(spark, lake, "SELECT n FROM `gold`.`audit_log` WHERE table_name = 'silver.shop_orders'")
    assert [r.n for r in got.collect()] == [1]


def test_a_table_named_alone_is_read_from_the_default_schema_as_lakeview_does(spark, lake):
    current = spark.catalog.currentDatabase()
    got = run_sql(spark, lake, "SELECT a.n FROM audit_log a JOIN (SELECT max(n) AS m FROM `audit_log`) t ON a.n = t.m",
                  default_schema="gold")
    assert [r.n for r in got.collect()] == [1]
    assert spark.catalog.currentDatabase() == current  # the session's own schema is left as it was


def test_a_table_the_lake_does_not_have_fails_with_sparks_error_naming_it(spark, lake):
    with pytest.raises(AnalysisException) as error:
        run_sql(spark, lake, "SELECT * FROM silver.shop_refunds")
    assert error.value.getCondition() == "TABLE_OR_VIEW_NOT_FOUND"
    assert "`silver`.`shop_refunds`" in str(error.value)
    with pytest.raises(AnalysisException, match="audit_log"):
        run_sql(spark, lake, "SELECT * FROM audit_log")  # named alone, no default schema


def test_another_lake_of_the_same_process_reads_its_own_tables_and_their_later_writes(spark, lake, tmp_path):
    run_sql(spark, lake, "SELECT * FROM silver.shop_orders").collect()
    other = _lake(spark, tmp_path / "other", [(7, "sent")])
    store = LakeStore(spark, other)
    version = store.version("silver.shop_orders")
    assertDataFrameEqual(run_sql(spark, other, "SELECT * FROM silver.shop_orders"),
                         spark.createDataFrame([(7, "sent")], "order_id int, status string"))
    assert store.version("silver.shop_orders") == version  # registering a table commits nothing
    store.append("silver.shop_orders", spark.createDataFrame([(8, "new")], "order_id int, status string"))
    assert run_sql(spark, other, "SELECT count(*) AS n FROM silver.shop_orders").first().n == 2
    assert run_sql(spark, lake, "SELECT count(*) AS n FROM silver.shop_orders").first().n == 2  # the first lake's


def test_registering_the_tables_a_query_names_logs_no_error(spark, tmp_path, capsys):
    """A table is registered after Spark found it missing: PySpark logs such errors whole."""
    lake = _lake(spark, tmp_path / "quiet", [(1, "new")])
    capsys.readouterr()
    assert run_sql(spark, lake, "SELECT count(*) AS n FROM silver.shop_orders JOIN gold.audit_log").first().n == 1
    said = capsys.readouterr()
    assert "TABLE_OR_VIEW_NOT_FOUND" not in said.err + said.out
