"""Gold on the shop fixtures (binlog source): coherent replicas while silver is half updated,
replicas as of a past commit point, the audit question of CONTRACT §7, health, comments, and the
dashboard (its queries on the lake, and the HTML rendered in headless Chromium).

One pipeline history is shared by the module, in three runs:
1. sessions and binlog files 1-2: GTID 0-1-299 (order 59 and its items) begins in file 2 and
   commits in file 3, so it is held;
2. file 3, the snapshot and two bad lines, stopped by a crash right after silver.shop_orders is
   committed and before silver.shop_order_items is: silver is torn, order 59 is in the orders
   replica and its items are not in the items replica;
3. the same again, to the end.

The anomaly counts are also checked on the shared README demo lake (``demo_lake``).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.config import load_onboarding
from cdc_lakehouse.demo import shop_workload
from cdc_lakehouse.dashboard import lakeview
from cdc_lakehouse.gold import audit, commit_point, health, schemas
from cdc_lakehouse.gold.commit_point import replication_watermark
from cdc_lakehouse.gold.replicas import replica_as_of, replica_at
from cdc_lakehouse.runtime.catalog import run_sql
from cdc_lakehouse.runtime.loader import load_pipeline
from cdc_lakehouse.runtime.runner import pipeline_configuration, run_pipeline
from cdc_lakehouse.settings import PipelineSettings
from cdc_lakehouse.storage import LakeStore
from browser import rendered_dom
from lake_helpers import REPO
from silver_support import FIXTURES, PROJECT_SOURCES, TABLES, expected_frame, expected_rows, onboarding_for, run_project

SOURCE = "shop"
CHANGES = "silver.shop_changes"
CRASH_AFTER = "silver.shop_orders"  # the replica updated before silver.shop_order_items
SPLIT_GTID = "0-1-299"  # the transaction that inserts order 59 and its three items
BAD_LINES = [
    # a row event without rows: quarantined, about shop.orders
    {"server_id": 1, "file": "mysql-bin.000009", "pos": 4, "ts": 1772449000, "type": "update", "schema": "shop",
     "table": "orders", "primary_key": ["order_id"], "rows": []},
    "this line is not JSON",
]
ORDER_42 = (
    "SELECT user, role, operation, changed_values FROM gold.audit_log "
    "WHERE source = 'shop' AND `table` = 'orders' AND key_values['order_id'] = '42' ORDER BY sequence"
)


class Crash(BaseException):
    """The process dies here: no flow's error handling sees it (a flow's Exception fails only
    that flow and what reads it; runtime/runner.py)."""


@dataclass
class History:
    lake: Path
    settings: PipelineSettings
    store: LakeStore
    after_first: dict[str, int] = field(default_factory=dict)  # table -> Delta version after run 1
    at_crash: dict[str, int] = field(default_factory=dict)  # table -> Delta version at the crash
    crashed_after: str = ""  # the silver replica whose commit the crash followed
    commits: list[str] = field(default_factory=list)  # tables committed in run 2, in order
    last_commits: list[str] = field(default_factory=list)  # and in run 3
    states: dict = field(default_factory=dict)

    def flow(self, table: str):
        return next(f for f in self.settings.onboarding.flows if f.table_name == table)

    def read(self, name: str, versions: dict[str, int] | None = None):
        return self.store.read(name, versions[name] if versions else None)

    def watermark(self, versions: dict[str, int] | None = None):
        return self.read("gold.replication_watermark", versions).filter(F.col("source") == SOURCE).first()["sequence"]

    def as_of(self, table: str, point):
        """The replica as of ``point``, from the final change stream (computed once)."""
        key = (table, tuple(point))
        if key not in self.states:
            self.states[key] = replica_as_of(self.store.read(CHANGES), self.flow(table), point).cache()
        return self.states[key]


def _deliver(landing: Path, paths: list[Path]) -> None:
    for src in paths:
        dest = landing / src.relative_to(FIXTURES / "landing")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dest, dirs_exist_ok=True)
        else:
            shutil.copy(src, dest)


def _versions(store: LakeStore) -> dict[str, int]:
    return {t.name: t.version for t in store.list_tables()}


def _crash_after(history: History, replica: str):
    def hook(stage: str, table: str) -> None:
        if stage == "after":
            history.commits.append(table)
        if stage == "after" and table == replica and not history.crashed_after:
            history.crashed_after = table
            raise Crash(f"stopped after the commit to {table}")

    return hook


def _run_with(spark, landing: Path, lake: Path, onboarding: Path, store: LakeStore) -> None:
    configuration = {"cdc_lakehouse.landing_path": str(landing), "cdc_lakehouse.onboarding_file": str(onboarding)}
    run_pipeline(spark, PROJECT_SOURCES, lake, configuration, store=store)


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory) -> History:
    tmp = tmp_path_factory.mktemp("gold")
    landing, lake, onboarding = tmp / "landing", tmp / "lake", onboarding_for(tmp, {SOURCE})
    settings = PipelineSettings(landing_path=str(landing), onboarding=load_onboarding(onboarding))
    shop = FIXTURES / "landing" / SOURCE
    h = History(lake, settings, LakeStore(spark, lake))

    _deliver(landing, [shop / "sessions", shop / "binlog/mysql-bin.000001.jsonl", shop / "binlog/mysql-bin.000002.jsonl"])
    run_project(spark, landing, lake, onboarding)
    h.after_first = _versions(h.store)

    _deliver(landing, [shop / "binlog/mysql-bin.000003.jsonl", shop / "snapshot"])
    (landing / SOURCE / "binlog/zz-bad.jsonl").write_text(
        "".join((json.dumps(line) if isinstance(line, dict) else line) + "\n" for line in BAD_LINES))
    crashing = LakeStore(spark, lake, commit_hook=_crash_after(h, CRASH_AFTER))
    with pytest.raises(Crash):
        _run_with(spark, landing, lake, onboarding, crashing)
    h.at_crash = _versions(h.store)

    recording = LakeStore(spark, lake, commit_hook=lambda stage, table: stage == "after" and h.last_commits.append(table))
    _run_with(spark, landing, lake, onboarding, recording)
    return h


def _same_rows(actual, expected) -> None:
    assertDataFrameEqual(actual.select(*expected.columns), expected)


# -- coherence ------------------------------------------------------------------------------
def _order_59(orders, items) -> tuple[int, int]:
    return orders.filter("order_id = 59").count(), items.filter("order_id = 59").count()


def test_silver_is_torn_at_the_crash(history):
    """The hazard gold must not pass on: at the crash silver shows half of a transaction."""
    assert history.crashed_after == CRASH_AFTER
    orders, items = (history.read(f"silver.shop_{t}", history.at_crash) for t in ("orders", "order_items"))
    assert _order_59(orders, items) == (1, 0)
    old, new = history.watermark(history.after_first), history.watermark()
    _same_rows(orders, history.as_of("orders", new))
    _same_rows(items, history.as_of("order_items", old))
    assert history.read("gold.audit_transactions").filter(F.col("gtid") == SPLIT_GTID).first()["sequence"] > old


def test_gold_replicas_stay_at_one_commit_point_while_silver_is_torn(history):
    point = history.watermark(history.at_crash)
    assert point == history.watermark(history.after_first)
    gold = {t: history.read(f"gold.{history.flow(t).gold_table}", history.at_crash) for t in TABLES}
    assert _order_59(gold["orders"], gold["order_items"]) == (0, 0)
    for table in TABLES:
        _same_rows(gold[table], history.as_of(table, point))


def test_gold_refreshed_over_torn_silver_is_coherent(spark, history):
    """A gold refresh at the moment of the crash (the pipeline's own functions, on the lake as the
    crash left it): every replica at the same, newer commit point."""
    at_crash = LakeStore(spark, history.lake)

    def read(name):
        return at_crash.read(name, history.at_crash.get(name))

    points = replication_watermark(read, history.settings)
    point = points.filter(F.col("source") == SOURCE).first()["sequence"]
    assert point == history.watermark() and point != history.watermark(history.after_first)
    gold = {t: replica_at(read(CHANGES), history.flow(t), points) for t in TABLES}
    assert _order_59(gold["orders"], gold["order_items"]) == (1, 3)
    for table in TABLES:
        _same_rows(gold[table], history.as_of(table, point))


def test_gold_waits_for_every_silver_replica_of_the_source(history):
    """Gold replicas are refreshed only after all silver replicas, so a stop in silver never
    leaves them half refreshed: the crash left every gold table as it was."""
    gold = {f"gold.{history.flow(t).gold_table}" for t in TABLES} | {"gold.replication_watermark"}
    silver = {f"silver.{t}" for f in history.settings.onboarding.flows for t in (f.silver_table, f.scd2_table) if t}
    assert not gold & set(history.commits)
    assert all(history.at_crash[name] == history.after_first[name] for name in gold)
    order = history.last_commits
    assert max(order.index(t) for t in silver & set(order)) < min(order.index(t) for t in gold)


def test_gold_replicas_equal_the_source_state(spark, history):
    for table in TABLES:
        replica = history.read(f"gold.{history.flow(table).gold_table}")
        assertDataFrameEqual(replica, expected_frame(spark, SOURCE, table, replica.schema))
        _same_rows(history.read(f"silver.{history.flow(table).silver_table}"), replica)


def test_watermark_is_the_last_transaction_applied(history):
    row = history.read("gold.replication_watermark").first()
    changes = history.read(CHANGES)
    last = changes.orderBy(F.col("sequence").desc()).first()
    assert (row["source"], row["sequence"], row["txn_id"], row["commit_ts"]) == (
        SOURCE, last["sequence"], last["txn_id"], last["commit_ts"])
    applied = changes.filter("op <> 'NONE'")
    assert row["changes"] == applied.select("txn_id", "schema", "table", "key").distinct().count()
    in_file_order = ("customers", "products", "orders", "order_items")
    assert row["gold_tables"] == [f"gold.{history.flow(t).gold_table}" for t in in_file_order]


def test_replica_as_of_a_past_commit_point(history):
    """The replicas as of the first run's commit point, computed from today's change stream,
    equal what gold showed back then (when later transactions had not even landed)."""
    past = history.watermark(history.after_first)
    assert past != history.watermark()
    for table in TABLES:
        flow = history.flow(table)
        _same_rows(history.as_of(table, past), history.read(f"gold.{flow.gold_table}", history.after_first))


def test_as_of_sql_pattern_over_the_audit_log(spark, history):
    """docs/gold.md's SQL: orders as of a transaction, from gold.audit_log alone."""
    past = history.watermark(history.after_first)
    query = f"""
        SELECT CAST(last.after['order_id'] AS BIGINT) AS order_id, last.after['status'] AS status
        FROM (SELECT max_by(struct(operation, after), sequence) AS last
              FROM gold.audit_log
              WHERE source = 'shop' AND schema = 'shop' AND `table` = 'orders'
                AND sequence <= (SELECT sequence FROM gold.audit_transactions
                                 WHERE source = 'shop' AND txn_id = '{past["txn"]}')
              GROUP BY key)
        WHERE last.operation <> 'DELETE'"""
    then = history.read("gold.shop_orders", history.after_first).select("order_id", "status")
    assertDataFrameEqual(run_sql(spark, history.lake, query), then)


# -- audit ----------------------------------------------------------------------------------
def test_who_changed_order_42_with_which_role_and_what(history, capsys):
    from cdc_lakehouse.cli import main

    assert main(["sql", "--lake", str(history.lake), "--json", ORDER_42]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["user"], r["role"], r["operation"]) for r in rows] == [
        ("alice", "app_writer", "INSERT"), ("carol", "support", "UPDATE"),
        ("dave", "admin", "UPDATE"), ("bob", "app_writer", "UPDATE"),
    ]
    assert rows[0]["changed_values"]["status"] == {"before": None, "after": "new"}
    assert rows[1]["changed_values"] == {"status": {"before": "new", "after": "on_hold"}}
    assert rows[2]["changed_values"] == {"status": {"before": "on_hold", "after": "paid"},
                                         "total": {"before": "161.47", "after": "160.11"}}
    assert rows[3]["changed_values"] == {"status": {"before": "paid", "after": "shipped"}}


def test_audit_log_has_every_applied_change_once_with_who_and_what(history):
    log = history.read("gold.audit_log")
    # The demo's ALTER TABLE ... ADD COLUMN phone is a row keyed by its statement.
    key = F.coalesce("key", F.when(F.col("op") == "ALTER", F.col("row"))).alias("key")
    applied = history.read(CHANGES).filter("op <> 'NONE'").select("txn_id", "schema", "table", key).distinct()
    assertDataFrameEqual(log.select("txn_id", "schema", "table", "key"), applied)
    assert log.filter("operation = 'ALTER'").select("after").first()[0] == {"statement": shop_workload.PHONE_DDL}
    dml = F.col("operation").isin("INSERT", "UPDATE", "DELETE")
    incomplete = log.filter(
        F.col("user").isNull() | F.col("role").isNull() | F.col("commit_ts").isNull() | F.col("sequence").isNull()
        | (dml & (F.size("changed_columns") == 0))
        | ~(dml | (F.col("operation") == "ALTER"))
        | ((F.col("operation") == "INSERT") & (F.col("before").isNotNull() | F.col("after").isNull()))
        | ((F.col("operation") == "DELETE") & (F.col("after").isNotNull() | F.col("before").isNull()))
        | (F.array_sort(F.map_keys("changed_values")) != F.array_sort("changed_columns"))
    )
    assert incomplete.count() == 0, incomplete.limit(3).collect()


def test_audit_transactions_are_the_committed_transactions_with_changes(history):
    txns = history.read("gold.audit_transactions")
    silver = history.read("silver.shop_transactions").filter("status = 'committed'")
    assertDataFrameEqual(txns.select("txn_id", "user", "role", "rows_changed", "tables"),
                         silver.select("txn_id", "user", "role", "rows_changed", "tables"))
    order_59 = txns.filter(F.col("gtid") == SPLIT_GTID).first()  # the transaction split across runs
    assert {"shop.orders", "shop.order_items"} <= set(order_59["tables"]) and order_59["inserts"] == 4


def test_auditor_views(history):
    last = history.read("gold.audit_row_last_change").filter(
        "source = 'shop' AND `table` = 'orders' AND key_values['order_id'] = '42'").first()
    assert (last["user"], last["role"], last["operation"], last["changes"], last["row_exists"]) == (
        "bob", "app_writer", "UPDATE", 4, True)
    by_day = history.read("gold.audit_changes_by_user_day")
    assert by_day.agg(F.sum("changes")).first()[0] == history.read("gold.audit_log").count()
    alice = by_day.filter("user = 'alice'").select("role").distinct().collect()
    assert [r["role"] for r in alice] == ["app_writer"]


# -- health ---------------------------------------------------------------------------------
def test_held_transaction_and_its_age_while_its_commit_has_not_landed(history):
    held = history.read("gold.held_transactions", history.after_first).collect()
    assert [(r["txn_id"], r["status"], r["gtid"]) for r in held] == [("gtid:0-1-299", "open", "0-1-299")]
    assert held[0]["age_seconds"] > 0
    row = history.read("gold.replication_health", history.after_first).first()
    assert (row["held_transactions"], row["oldest_held_begin_ts"]) == (1, held[0]["begin_ts"])
    assert history.read("gold.held_transactions").count() == 0


RELEASE_TXNS = "txn_id string, status string, begin_ts timestamp, commit_ts timestamp, begin_position long, " \
               "sequence_position long, rows_changed long"


def test_a_release_policy_stops_a_held_transaction_holding_gold_back(spark):
    """With cdc_lakehouse.held_release_after_minutes, a held transaction begun that long before
    the source's newest commit is released: counted as such, and gold's commit point no longer
    waits for it. H began at 10:05; B, after it in commit order, committed at 10:30."""
    at = datetime.fromisoformat
    txns = spark.createDataFrame([
        ("A", "committed", at("2026-03-02 10:00:00"), at("2026-03-02 10:00:00"), 90, 100, 1),
        ("H", "open", at("2026-03-02 10:05:00"), None, 150, None, 0),
        ("B", "committed", at("2026-03-02 10:29:00"), at("2026-03-02 10:30:00"), 190, 200, 1),
    ], RELEASE_TXNS)
    changes = spark.createDataFrame([(100, "A"), (200, "B")], "position long, txn string").select(
        F.struct("position", "txn").alias("sequence"))

    def applied(minutes):
        return sorted(r["sequence"]["txn"] for r in commit_point.before_held(changes, txns, minutes).collect())

    assert applied(None) == ["A"] and applied(30) == ["A"]  # 10:05 is not 30 minutes before 10:30
    assert applied(25) == ["A", "B"]
    point = spark.createDataFrame([((200, "B"),)], f"sequence {schemas.SEQUENCE}")
    stats = health.transaction_stats(commit_point.with_release(txns, 25), point).first()
    assert (stats["held_transactions"], stats["released_held_transactions"]) == (1, 1)


def test_a_held_transaction_begun_after_the_newest_commit_is_never_released(history):
    """gtid:0-1-299 waits for its commit, which lands in the next run: no commit of the source
    comes after its begin, so even a policy of 0 minutes does not release it."""
    def read(name):
        return history.read(name, history.after_first)

    for settings in (history.settings, replace(history.settings, held_release_after_minutes=0)):
        held = health.held_transactions(read, settings).collect()
        assert [(r["txn_id"], r["released"]) for r in held] == [("gtid:0-1-299", False)]
        assert health.replication_health(read, settings).first()["released_held_transactions"] == 0


def test_replication_health_after_the_last_run(history):
    row = history.read("gold.replication_health").first()
    watermark = history.read("gold.replication_watermark").first()
    assert (row["source"], row["sequence"], row["last_commit_ts"]) == (SOURCE, watermark["sequence"], watermark["commit_ts"])
    assert row["lag_seconds"] > 0 and row["pending_transactions"] == 0 and row["held_transactions"] == 0
    assert (row["rolled_back_transactions"], row["quarantined_lines"], row["anomalous_changes"]) == (14, 2, 0)


def test_health_history_keeps_the_row_of_each_update_that_measured_it(history):
    """One version of the source's health row per update whose event log has the view refreshed
    (the crashed run has none): held as it was then, the latest one the view itself."""
    log = history.read("pipeline.event_log")
    measured = log.filter((F.col("target") == "gold.replication_health") & (F.col("status") == "COMPLETED"))
    past = history.read("gold.replication_health_history").filter(F.col("source") == SOURCE)
    assert past.count() == measured.select("update_id").distinct().count() == 2
    assert [r["held_transactions"] for r in past.orderBy("__START_AT").collect()] == [1, 0]
    now = history.read("gold.replication_health")
    assertDataFrameEqual(past.filter(F.col("__END_AT").isNull()).select(*now.columns), now)


QUALITY_ANOMALIES = "source string, table string, anomalous_changes bigint, anomalies array<string>"


def test_gold_shows_the_anomalies_silver_recorded(spark, history):
    """The shop fixtures have no anomalies (silver.shop_anomalies is empty), so gold shows none
    per table. tests/test_apply_policy.py checks a lake with anomalies of six kinds."""
    assert history.read("silver.shop_anomalies").count() == 0
    tables = [history.flow(t).qualified_table for t in TABLES] + [health.NO_TABLE]
    quality = history.read("gold.data_quality").select("source", "table", "anomalous_changes", "anomalies")
    assertDataFrameEqual(quality, spark.createDataFrame([(SOURCE, t, 0, []) for t in tables], QUALITY_ANOMALIES))


def test_demo_lake_gold_shows_the_anomalies_silver_recorded(spark, demo_lake):
    """The README demo (every source of conf/onboarding.yml): no anomaly in either source's
    silver.<source>_anomalies, so every table and source shows 0 and no kinds."""
    store = LakeStore(spark, demo_lake)
    sources = {"shop", "shop_pg"}
    assert {s: store.read(f"silver.{s}_anomalies").count() for s in sources} == {s: 0 for s in sources}
    flows = load_onboarding(REPO / "conf/onboarding.yml").flows  # what `cdc-lakehouse run` onboards
    expected = [(f.source, f.qualified_table, 0, []) for f in flows]
    quality = store.read("gold.data_quality").select("source", "table", "anomalous_changes", "anomalies")
    assertDataFrameEqual(quality, spark.createDataFrame(expected, QUALITY_ANOMALIES))
    health_rows = store.read("gold.replication_health").select("source", "anomalous_changes")
    assertDataFrameEqual(health_rows, spark.createDataFrame([(s, 0) for s in sorted(sources)],
                                                            "source string, anomalous_changes bigint"))


def test_quarantine_counted_per_table(history):
    quality = {r["table"]: r for r in history.read("gold.data_quality").collect()}
    assert set(quality) == {"shop.customers", "shop.products", "shop.orders", "shop.order_items", health.NO_TABLE}
    assert (quality["shop.orders"]["quarantined_lines"], quality[health.NO_TABLE]["quarantined_lines"]) == (1, 1)
    assert quality["shop.orders"]["quarantine_tables"] == ["bronze.shop_binlog_events_quarantine"]
    assert quality["shop.customers"]["quarantined_lines"] == 0


def test_rows_per_layer(history):
    rows = {(r["table"], r["dataset"]): r["rows"] for r in history.read("gold.rows_per_layer").collect()}
    for table in TABLES:
        flow = history.flow(table)
        gold = rows[(flow.qualified_table, f"gold.{flow.gold_table}")]
        assert gold == rows[(flow.qualified_table, f"silver.{flow.silver_table}")] == len(expected_rows(SOURCE, table))
        audited = history.read("gold.audit_log").filter(F.col("table") == table).count()
        assert rows[(flow.qualified_table, "gold.audit_log")] == audited <= rows[(flow.qualified_table, CHANGES)]
        assert rows[(flow.qualified_table, "bronze.shop_binlog_events")] > 0


# -- comments and declared schemas ----------------------------------------------------------
def test_every_gold_dataset_has_a_comment_and_column_comments(spark, history):
    configuration = {"cdc_lakehouse.landing_path": history.settings.landing_path,
                     "cdc_lakehouse.onboarding_file": history.settings.onboarding.path}
    with pipeline_configuration(spark, configuration):
        graph = load_pipeline(spark, [p for p in PROJECT_SOURCES if "/gold/" in p])
    fixed = {f"gold.{t.name}": t for t in schemas.FIXED}
    for name, dataset in graph.datasets.items():
        assert dataset.comment, f"{name} has no comment"
        if name in fixed:
            assert dataset.schema == fixed[name].ddl
            assert all(c for _, _, c in fixed[name].columns), f"{name}: a column without comment"
    assert set(fixed) <= set(graph.datasets)


BUILDERS = {
    "replication_watermark": lambda read, s: replication_watermark(read, s),
    "audit_log": audit.audit_log,
    "audit_transactions": audit.audit_transactions,
    "audit_changes_by_user_day": lambda read, s: audit.changes_by_user_day(read("gold.audit_log")),
    "audit_row_last_change": lambda read, s: audit.row_last_change(read("gold.audit_log")),
    "replication_health": health.replication_health,
    "held_transactions": health.held_transactions,
    "data_quality": health.data_quality,
    "rows_per_layer": health.rows_per_layer,
}


@pytest.mark.parametrize("table", schemas.FIXED, ids=lambda t: t.name)
def test_builders_return_exactly_the_declared_columns_and_types(spark, history, table):
    """On Databricks the declared schema must match the query, not just be castable to it."""
    from pyspark.sql.types import StructType

    built = BUILDERS[table.name](history.store.read, history.settings).schema
    declared = StructType.fromDDL(table.ddl)
    assert [(f.name, f.dataType.simpleString()) for f in built.fields] == [
        (f.name, f.dataType.simpleString()) for f in declared.fields]


# -- dashboard ------------------------------------------------------------------------------
def test_every_dashboard_query_runs_on_the_lake(spark, history):
    board = lakeview.load()
    datasets = lakeview.dataset_queries(board)
    queries = lakeview.LakeQueries(spark, history.lake)
    filled = {name for name, sql in datasets.items() if queries.rows(sql)[1]}
    assert filled >= {"replication_health", "largest_lag", "lag_history", "data_quality", "quarantine_per_table",
                      "rows_per_layer", "activity", "changes_by_user_role", "biggest_transactions", "recent_changes",
                      "landing_summary"}
    used = set()
    for widget in lakeview.widgets(board):
        if widget.kind != "text":
            queries.rows(lakeview.widget_sql(widget, datasets))
            used.add(widget.query["datasetName"])
    assert used == set(datasets), "a dataset no widget shows"


def test_dashboard_html_renders_its_charts_in_headless_chromium(history, tmp_path):
    import argparse

    from cdc_lakehouse.dashboard.cli import add_dashboard_command

    parser = argparse.ArgumentParser()
    add_dashboard_command(parser.add_subparsers())
    page = tmp_path / "dashboard.html"
    args = parser.parse_args(["dashboard", "--lake", str(history.lake), "--out", str(page)])
    assert args.func(args) == 0
    charts = [w for w in lakeview.widgets(lakeview.load()) if w.kind in lakeview.CHARTS]
    dom = rendered_dom(page, tmp_path / "profile")
    for widget in charts:  # drawn, or without rows and saying so
        chart = dom.split(f'id="chart-{widget.name}"', 1)
        if len(chart) == 1:
            empty = f'class="widget {widget.kind} empty" data-widget="{widget.name}"'
            assert empty in dom and lakeview.empty_message(widget.title) in dom, f"chart {widget.name} missing"
            continue
        assert "main-svg" in chart[1].split('id="chart-', 1)[0], f"chart {widget.name} did not render"


def test_schema_changes_the_replicas_do_not_follow_are_counted_per_table(history):
    quality = {r["table"]: r for r in history.read("gold.data_quality").collect()}
    changed = {t: (r["schema_changes"], r["last_schema_change"], r["dropped_at"])
               for t, r in quality.items() if r["schema_changes"]}
    assert changed == {table: (1, query, None) for table, query in
                       ((f"shop.{t}", q) for t, q in shop_workload.DDLS.values())}


def test_a_drop_table_marks_the_table_dropped_until_it_is_created_again(spark):
    ts = [datetime(2026, 3, 2, 9, 0, s) for s in range(6)]
    transactions = spark.createDataFrame([
        ("committed", "shop.a", "ALTER TABLE a ADD c int", ts[1], 1),
        ("committed", "shop.a", "/* x */ DROP TABLE `a` /* generated by server */", ts[2], 2),
        ("committed", "shop.b", "DROP TABLE b", ts[3], 3),
        ("committed", "shop.b", "CREATE TABLE b (x int)", ts[4], 4),
        ("committed", "shop.c", "TRUNCATE TABLE c", ts[5], 5),
        ("committed", None, None, ts[0], 0),
    ], "status string, ddl_table string, ddl string, commit_ts timestamp, sequence_position bigint")
    got = {r["table"]: tuple(r)[1:] for r in health.schema_changes(transactions).collect()}
    assert got == {"shop.a": (2, "/* x */ DROP TABLE `a` /* generated by server */", ts[2]),
                   "shop.b": (2, "CREATE TABLE b (x int)", None)}
