"""The Lakeview dashboard file, run locally: its dataset queries and widget queries with Spark SQL
on a lake, rendered as one HTML page with plotly charts (plotly.js inlined: no network).

A widget's query is what Lakeview runs: the widget's field expressions over its dataset, grouped
by the fields that are not aggregates (unless the query is ``disaggregated``).

Durations read as people read them (``279 d 3 h``, ``6 min 12 s``): the datasets keep seconds and
add the text ``DURATION_SQL`` makes of them, which tiles and tables show (Lakeview has no duration
number format); a field named ``*_seconds`` or ``*_hours`` is a duration, shown so here and on
chart axes (on Lakeview, charts plot hours). A table or chart without rows says so in one line
("No held transactions"), one grid row high, and the rows it leaves empty close up.
"""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pyspark.sql import SparkSession

from cdc_lakehouse.project_files import dashboard_file

# The schema the dashboard's datasets read from when they name a table alone: on Databricks the
# bundle's dataset_schema (the target's gold schema), locally the lake's gold.
DASHBOARD_SCHEMA = "gold"
AGGREGATE = re.compile(r"^\s*(SUM|COUNT|COUNT_IF|AVG|MIN|MAX|MEDIAN|ANY_VALUE|COUNT_DISTINCT)\s*\(", re.IGNORECASE)
CHARTS = ("bar", "line", "area", "scatter")

DURATION_UNITS = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))
DURATION_FIELD = re.compile(r"_(seconds|hours)\b")  # a field holding a duration, e.g. max(lag_hours)
SECONDS_PER = {"seconds": 1, "hours": 3600}
# Axis steps a reader counts in: seconds, minutes, hours, days.
TICK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
              86400, 2 * 86400, 7 * 86400, 14 * 86400, 30 * 86400, 60 * 86400, 90 * 86400, 180 * 86400, 365 * 86400)
# The dashboard's datasets turn seconds (``{s}``) into text with this expression, as duration_text
# does: the largest unit and the next one when not zero. NULL stays NULL.
DURATION_SQL = (
    "CASE WHEN {s} IS NULL THEN NULL "
    "WHEN {s} < 60 THEN concat(CAST(CAST({s} AS BIGINT) AS STRING), ' s') "
    "WHEN {s} < 3600 THEN concat_ws(' ', concat(CAST(floor({s} / 60) AS STRING), ' min'), "
    "nullif(concat(CAST(floor({s} % 60) AS STRING), ' s'), '0 s')) "
    "WHEN {s} < 86400 THEN concat_ws(' ', concat(CAST(floor({s} / 3600) AS STRING), ' h'), "
    "nullif(concat(CAST(floor({s} % 3600 / 60) AS STRING), ' min'), '0 min')) "
    "ELSE concat_ws(' ', concat(CAST(floor({s} / 86400) AS STRING), ' d'), "
    "nullif(concat(CAST(floor({s} % 86400 / 3600) AS STRING), ' h'), '0 h')) END"
)


@dataclass
class Widget:
    name: str
    page: str
    kind: str  # bar | line | area | scatter | counter | table | text
    spec: dict
    position: dict
    query: dict | None = None
    text: str | None = None

    @property
    def title(self) -> str:
        frame = self.spec.get("frame", {})
        return frame.get("title") or self.name


def load(path: str | Path | None = None) -> dict:
    """The given .lvdash.json file, or the project's."""
    return json.loads(Path(path or dashboard_file()).read_text(encoding="utf-8"))


def dataset_queries(dashboard: dict) -> dict[str, str]:
    return {d["name"]: "".join(d["queryLines"]) for d in dashboard["datasets"]}


def widgets(dashboard: dict) -> list[Widget]:
    found = []
    for page in dashboard["pages"]:
        for item in page["layout"]:
            w = item["widget"]
            if "textbox_spec" in w:
                found.append(Widget(w["name"], page["name"], "text", {}, item["position"], text=w["textbox_spec"]))
                continue
            query = w["queries"][0]["query"]
            found.append(Widget(w["name"], page["name"], w["spec"]["widgetType"], w["spec"], item["position"], query))
    return found


def widget_sql(widget: Widget, datasets: dict[str, str]) -> str:
    """The widget's query over its dataset, as Lakeview builds it."""
    query = widget.query
    fields = query["fields"]
    select = ", ".join(f"{f['expression']} AS `{f['name']}`" for f in fields)
    sql = f"SELECT {select} FROM ({datasets[query['datasetName']]}) AS dataset"
    groups = [f["expression"] for f in fields if not AGGREGATE.match(f["expression"])]
    if not query.get("disaggregated") and groups and len(groups) < len(fields):
        sql += " GROUP BY " + ", ".join(groups)
    return sql


class LakeQueries:
    """Runs the dashboard's SQL on a lake, as Spark SQL (runtime/catalog.py), gold tables named alone."""

    def __init__(self, spark: SparkSession, lake: str | Path):
        self.spark, self.lake = spark, lake

    def rows(self, sql: str) -> tuple[list[str], list[dict]]:
        from cdc_lakehouse.runtime.catalog import run_sql  # local runtime only

        df = run_sql(self.spark, self.lake, sql, default_schema=DASHBOARD_SCHEMA)
        return df.columns, [r.asDict() for r in df.collect()]


# -- durations --------------------------------------------------------------------------
def duration_text(seconds: float | None) -> str:
    """Seconds as people read them, as ``DURATION_SQL`` writes them: ``42 s``, ``6 min 12 s``,
    ``2 h``, ``279 d 3 h``."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{int(seconds)} s"
    for (unit, size), (smaller, smaller_size) in zip(DURATION_UNITS, DURATION_UNITS[1:]):
        if seconds >= size:
            whole, rest = divmod(seconds, size)
            part = int(rest // smaller_size)
            return f"{int(whole)} {unit}" + (f" {part} {smaller}" if part else "")
    raise AssertionError("unreachable: seconds >= 60 is at least a minute")


def seconds_per_unit(field: str) -> int | None:
    """How many seconds one unit of ``field`` is, when its name says it holds a duration."""
    found = DURATION_FIELD.search(field)
    return SECONDS_PER[found.group(1)] if found else None


def duration_ticks(top: float, most: int = 6) -> list[float]:
    """Axis ticks from 0 past ``top`` (seconds), at most ``most`` steps, at a step people count in."""
    largest = TICK_STEPS[-1]
    step = next((s for s in TICK_STEPS if top / s <= most), largest * math.ceil(top / largest / most))
    return [float(step * i) for i in range(int(top // step) + 2)]


def empty_message(title: str) -> str:
    """What a panel without rows says: ``No`` and what its title counts, e.g. 'Quarantined lines
    per table' -> 'No quarantined lines'."""
    subject = re.split(r" per | by | over |, | \(", title, maxsplit=1)[0]
    return f"No {subject[:1].lower()}{subject[1:]}"


# -- HTML -----------------------------------------------------------------------------------
@dataclass
class Cell:
    widget: Widget
    body: str
    empty: bool = False


def render(spark: SparkSession, lake: str | Path, dashboard: dict, title: str = "cdc-lakehouse") -> str:
    import plotly.offline

    queries = LakeQueries(spark, lake)
    datasets = dataset_queries(dashboard)
    display = {p["name"]: p["displayName"] for p in dashboard["pages"]}
    sections = []
    for page in dashboard["pages"]:
        cells = [_cell(w, queries, datasets) for w in widgets(dashboard) if w.page == page["name"]]
        placed = "".join(_placed(cell, y, height) for cell, (y, height) in zip(cells, grid_rows(cells)))
        sections.append(f"<section><h2>{html.escape(display[page['name']])}</h2><div class=\"grid\">{placed}</div></section>")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return PAGE.format(
        title=html.escape(title), plotly=plotly.offline.get_plotlyjs(), sections="".join(sections), stamp=stamp,
    )


def grid_rows(cells: list[Cell]) -> list[tuple[int, int]]:
    """Each cell's first grid row and the rows it spans: an empty one takes one row, and the
    rows no cell takes any more are dropped, so what is below moves up."""
    spans = [(c.widget.position["y"], 1 if c.empty else c.widget.position["height"]) for c in cells]
    taken = sorted({row for y, height in spans for row in range(y, y + height)})
    moved = {row: i for i, row in enumerate(taken)}
    return [(moved[y], height) for y, height in spans]


def _placed(cell: Cell, y: int, height: int) -> str:
    p = cell.widget.position
    style = f"grid-column: {p['x'] + 1} / span {p['width']}; grid-row: {y + 1} / span {height};"
    kind = cell.widget.kind + (" empty" if cell.empty else "")
    return f"<div class=\"widget {kind}\" data-widget=\"{html.escape(cell.widget.name)}\" style=\"{style}\">{cell.body}</div>"


def _cell(widget: Widget, queries: LakeQueries, datasets: dict[str, str]) -> Cell:
    if widget.kind == "text":
        return Cell(widget, _markdown(widget.text or ""))
    columns, rows = queries.rows(widget_sql(widget, datasets))
    title = f"<h3>{html.escape(widget.title)}</h3>"
    if _is_empty(widget, rows):
        return Cell(widget, f"{title}<p class=\"empty\">{html.escape(empty_message(widget.title))}</p>", empty=True)
    return Cell(widget, title + _body(widget, columns, rows))


def _is_empty(widget: Widget, rows: list[dict]) -> bool:
    """A table without rows, or a chart without a value other than 0 (axes around nothing)."""
    if widget.kind == "table":
        return not rows
    if widget.kind in CHARTS:
        y = widget.spec["encodings"]["y"]["fieldName"]
        return not any(r[y] for r in rows)
    return False


def _body(widget: Widget, columns: list[str], rows: list[dict]) -> str:
    if widget.kind == "counter":
        field = widget.spec["encodings"]["value"]["fieldName"]
        value = rows[0][field] if rows else None
        return f"<div class=\"counter-value\">{html.escape(_shown(field, value))}</div>"
    if widget.kind == "table":
        return _table(widget, rows)
    if widget.kind in CHARTS:
        return _chart(widget, rows)
    return f"<p>widget type {html.escape(widget.kind)} is not rendered locally</p>"


def _table(widget: Widget, rows: list[dict]) -> str:
    columns = widget.spec["encodings"]["columns"]
    head = "".join(f"<th>{html.escape(c.get('displayName', c['fieldName']))}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_shown(c['fieldName'], r[c['fieldName']]))}</td>" for c in columns) + "</tr>"
        for r in rows
    )
    return f"<div class=\"scroll\"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def _chart(widget: Widget, rows: list[dict]) -> str:
    import plotly.graph_objects as go

    enc = widget.spec["encodings"]
    x, y = enc["x"]["fieldName"], enc["y"]["fieldName"]
    color = enc.get("color", {}).get("fieldName")
    unit = seconds_per_unit(y)
    series: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (_sort_key(r[x]), _text(r.get(color)))):
        series.setdefault(_text(r[color]) if color else enc["y"].get("displayName", y), []).append(r)
    fig = go.Figure()
    for name, points in series.items():
        xs, ys = [p[x] for p in points], [_scaled(p[y], unit) for p in points]
        # A duration's hover text reads as the axis does (seconds plotted, "6 min 12 s" shown).
        hover = dict(customdata=[duration_text(v) for v in ys], hovertemplate="%{x}<br>%{customdata}") if unit else {}
        if widget.kind == "bar":
            fig.add_trace(go.Bar(name=name, x=xs, y=ys, **hover))
        else:
            fill = "tozeroy" if widget.kind == "area" else None
            mode = "markers" if widget.kind == "scatter" else "lines+markers"
            fig.add_trace(go.Scatter(name=name, x=xs, y=ys, mode=mode, fill=fill, **hover))
    fig.update_layout(
        barmode="stack", margin=dict(l=60, r=20, t=10, b=50), height=320, showlegend=bool(color),
        xaxis_title=enc["x"].get("displayName", x), yaxis_title=_axis_title(enc["y"].get("displayName", y), unit),
    )
    if unit:
        ticks = duration_ticks(_stacked_top(fig, widget.kind == "bar"))
        # From zero, as a lag reads; the ticks are those in range.
        fig.update_yaxes(tickvals=ticks, ticktext=[duration_text(t) for t in ticks], rangemode="tozero")
    if enc["x"].get("scale", {}).get("type") == "categorical":  # biggest first, as a reader scans a ranking
        fig.update_xaxes(type="category", categoryorder="total descending")
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"chart-{widget.name}",
                       config={"displaylogo": False, "responsive": True})


def _scaled(value, unit: int | None):
    return value * unit if unit and value is not None else value


def _axis_title(title: str, unit: int | None) -> str:
    """A duration axis reads in its own units: the unit Lakeview's title names is dropped."""
    return re.sub(r"\s*\((s|h|seconds|hours)\)$", "", title) if unit else title


def _stacked_top(fig, stacked: bool) -> float:
    """The highest value plotted, the sum per x of stacked bars."""
    totals: dict = {}
    for trace in fig.data:
        for x, y in zip(trace.x, trace.y):
            if y is not None:
                totals[x] = totals.get(x, 0) + y if stacked else max(totals.get(x, y), y)
    return max([0.0, *totals.values()])


def _sort_key(value):
    return (value is None, value if value is not None else 0)


def _shown(field: str, value) -> str:
    """A table cell or tile: a duration field as durations read, anything else as _text."""
    unit = seconds_per_unit(field)
    return duration_text(value * unit) if unit and value is not None else _text(value)


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def _markdown(text: str) -> str:
    """Headings and paragraphs of the dashboard's text boxes; `code` kept as code."""
    parts = []
    for line in text.splitlines():
        escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(line))
        heading = re.match(r"^(#{1,6})\s+(.*)$", escaped)
        parts.append(f"<h{len(heading.group(1)) + 1}>{heading.group(2)}</h{len(heading.group(1)) + 1}>" if heading
                     else f"<p>{escaped}</p>" if escaped.strip() else "")
    return "".join(parts)


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<script type="text/javascript">{plotly}</script>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5rem; color: #1b3139; background: #f6f7f9; }}
section {{ margin-bottom: 2rem; }}
.grid {{ display: grid; grid-template-columns: repeat(6, minmax(0, 1fr)); grid-auto-rows: 60px; gap: 12px; }}
.widget {{ background: #fff; border-radius: 6px; padding: 8px 12px; overflow: hidden;
          box-shadow: 0 1px 2px rgba(0,0,0,.15); }}
.widget h3 {{ font-size: 0.95rem; margin: 0 0 6px; }}
.counter-value {{ font-size: 2.2rem; font-weight: 600; }}
.scroll {{ overflow: auto; height: calc(100% - 2rem); }}
table {{ border-collapse: collapse; font-size: 0.8rem; width: 100%; }}
/* Long ids and keys wrap anywhere: a table fits its panel, never scrolls sideways. */
th, td {{ text-align: left; vertical-align: top; padding: 2px 6px; border-bottom: 1px solid #e4e7eb;
          overflow-wrap: anywhere; }}
p.empty {{ color: #6b7280; font-size: 0.9rem; line-height: 1.2; margin: 0; }}
footer {{ color: #666; font-size: 0.8rem; }}
</style>
</head>
<body>
<h1>{title}</h1>
{sections}
<footer>Rendered {stamp} from the queries of src/dashboards/cdc_lakehouse.lvdash.json.</footer>
</body>
</html>
"""
