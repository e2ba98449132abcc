"""The dashboard page as people read it, in real headless Chromium, on the demo lake after two
updates (the second refreshes only the health view and its history, as an update where nothing
new landed does): durations with units in the lag tile and on the lag axes, panels without rows
saying so in one line, no panel wider than a 1366-px screen allows, and the lag history with one
line per source and a point per update. Also: the durations the dashboard's SQL writes are the
ones the page's Python writes, and the Lakeview file carries the formats the page shows."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from browser import measured
from cdc_lakehouse.cli import main
from cdc_lakehouse.dashboard import lakeview
from cdc_lakehouse.storage import LakeStore

HEALTH, HISTORY = "gold.replication_health", "gold.replication_health_history"
DURATION = re.compile(r"^-?\d+ (s|min|h|d)( \d+ (s|min|h))?$")
# Panels the demo fixtures leave without rows: no transaction held, no line quarantined, no anomaly.
EMPTY_ON_THE_DEMO = {"held_table": "No held transactions", "quarantine_by_table": "No quarantined lines",
                     "anomalies_by_table": "No changes with anomalies"}
GRID_ROW_PX = 60  # .grid's grid-auto-rows in lakeview.PAGE

# Each panel's size against what it holds, the lag tile and the lag history's traces and ticks.
PROBE = """
const history = document.getElementById('chart-lag_over_time');
window.probe = {
  page: {scrolled: document.documentElement.scrollWidth, width: window.innerWidth},
  panels: [...document.querySelectorAll('.widget')].map(w => ({
    name: w.dataset.widget, table: w.classList.contains('table'), height: w.clientHeight,
    wider: w.scrollWidth - w.clientWidth, taller: w.scrollHeight - w.clientHeight,
    sideways: Math.max(0, ...[...w.querySelectorAll('.scroll')].map(s => s.scrollWidth - s.clientWidth)),
    counter: (w.querySelector('.counter-value') || {}).textContent || null,
    empty: (w.querySelector('p.empty') || {}).textContent || null,
  })),
  lag_lines: history ? history.data.map(t => ({source: t.name, points: t.x.length})) : null,
  lag_ticks: [...document.querySelectorAll('#chart-lag_over_time .ytick text')].map(t => t.textContent),
};
"""


@pytest.fixture(scope="module")
def lake(demo_lake, tmp_path_factory) -> Path:
    copy = Path(shutil.copytree(demo_lake, tmp_path_factory.mktemp("dashboard") / "lake"))
    assert main(["run", "--lake", str(copy), "--refresh-table", HEALTH, "--refresh-table", HISTORY]) == 0
    return copy


@pytest.fixture(scope="module")
def probe(lake, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("page")
    page = out / "dashboard.html"
    assert main(["dashboard", "--lake", str(lake), "--out", str(page)]) == 0
    found = measured(page, out / "profile", PROBE, width=1366)
    found["panels"] = {p["name"]: p for p in found["panels"]}
    return found


def test_the_lag_tile_reads_in_units(probe):
    assert DURATION.match(probe["panels"]["max_lag"]["counter"]), probe["panels"]["max_lag"]


def test_panels_without_rows_say_so_in_one_line(probe):
    titles = {w.name: w.title for w in lakeview.widgets(lakeview.load())}
    empty = {name: p for name, p in probe["panels"].items() if p["empty"]}
    assert {name: empty[name]["empty"] for name in EMPTY_ON_THE_DEMO if name in empty} == EMPTY_ON_THE_DEMO
    for name, panel in empty.items():
        assert panel["empty"] == lakeview.empty_message(titles[name])
        assert panel["height"] <= GRID_ROW_PX and panel["taller"] <= 0, panel


def test_no_panel_overflows_a_1366_px_screen(probe):
    assert probe["page"]["scrolled"] <= probe["page"]["width"] == 1366
    for panel in probe["panels"].values():
        assert panel["wider"] <= 0 and panel["sideways"] <= 0, panel
        assert panel["table"] or panel["taller"] <= 0, panel  # a long table scrolls down, nothing else does


def test_lag_history_has_a_line_per_source_and_a_point_per_update(probe, lake, spark):
    store = LakeStore(spark, lake)
    sources = sorted(r["source"] for r in store.read(HEALTH).select("source").collect())
    log = store.read("pipeline.event_log")
    updates = log.filter((F.col("target") == HEALTH) & (F.col("status") == "COMPLETED")).select("update_id").distinct()
    assert len(sources) >= 2 and updates.count() == 2
    assert sorted(probe["lag_lines"], key=lambda t: t["source"]) == [{"source": s, "points": 2} for s in sources]
    assert probe["lag_ticks"] and all(DURATION.match(t) for t in probe["lag_ticks"]), probe["lag_ticks"]


SECONDS = [0, 0.4, 5.7, 59, 60, 61, 372, 3599, 3600, 3660, 7199, 86399, 86400, 90061, 24099015, -3]


@pytest.mark.parametrize("sql_type", ["BIGINT", "DOUBLE"])  # timestampdiff gives BIGINT
def test_the_datasets_write_durations_as_the_page_does(spark, sql_type):
    values = ", ".join(f"({s})" for s in [*SECONDS, "NULL"])
    text = lakeview.DURATION_SQL.format(s="s")
    found = spark.sql(f"SELECT s, {text} AS text FROM (SELECT CAST(v AS {sql_type}) AS s FROM VALUES {values} AS t(v))")
    cast = int if sql_type == "BIGINT" else float
    expected = {cast(s): lakeview.duration_text(cast(s)) for s in SECONDS}
    assert {r["s"]: r["text"] for r in found.collect()} == {**expected, None: None}


def test_the_lakeview_file_carries_the_formats_the_page_shows():
    board = lakeview.load()
    queries = lakeview.dataset_queries(board)
    for dataset, seconds in (("replication_health", "lag_seconds"), ("largest_lag", "lag_seconds"),
                             ("held_transactions", "age_seconds")):
        assert lakeview.DURATION_SQL.format(s=seconds) in queries[dataset], dataset
    axes = [w.spec["encodings"]["y"] for w in lakeview.widgets(board) if w.kind in lakeview.CHARTS]
    durations = [y for y in axes if lakeview.seconds_per_unit(y["fieldName"])]
    assert len(durations) == 2  # lag per source, lag history: hours on Lakeview, which has no duration format
    assert all(y["displayName"].endswith("(h)") and y["format"]["type"] == "number-plain" for y in durations)


def test_an_empty_panel_takes_one_row_and_the_rows_below_move_up():
    def cell(name: str, y: int, height: int, x: int = 0, empty: bool = False) -> lakeview.Cell:
        position = {"x": x, "y": y, "width": 3, "height": height}
        return lakeview.Cell(lakeview.Widget(name, "page", "table", {}, position), "", empty)

    cells = [cell("a", 0, 2), cell("held", 2, 5, empty=True), cell("left", 7, 6, empty=True), cell("right", 7, 6, x=3),
             cell("below", 13, 4)]
    assert lakeview.grid_rows(cells) == [(0, 2), (2, 1), (3, 1), (3, 6), (9, 4)]
