"""The Lakeview dashboard file, run locally: its dataset queries and widget queries with Spark SQL
on a lake, rendered as one HTML page with plotly charts (plotly.js inlined: no network).

A widget's query is what Lakeview runs: the widget's field expressions over its dataset, grouped
by the fields that are not aggregates (unless the query is ``disaggregated``).
"""

from __future__ import annotations

import html
import json
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


# -- HTML -----------------------------------------------------------------------------------
def render(spark: SparkSession, lake: str | Path, dashboard: dict, title: str = "cdc-lakehouse") -> str:
    import plotly.offline

    queries = LakeQueries(spark, lake)
    datasets = dataset_queries(dashboard)
    display = {p["name"]: p["displayName"] for p in dashboard["pages"]}
    sections = []
    for page in dashboard["pages"]:
        cells = [_cell(w, queries, datasets) for w in widgets(dashboard) if w.page == page["name"]]
        sections.append(f"<section><h2>{html.escape(display[page['name']])}</h2>"
                        f"<div class=\"grid\">{''.join(cells)}</div></section>")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return PAGE.format(
        title=html.escape(title), plotly=plotly.offline.get_plotlyjs(), sections="".join(sections), stamp=stamp,
    )


def _cell(widget: Widget, queries: LakeQueries, datasets: dict[str, str]) -> str:
    p = widget.position
    style = f"grid-column: {p['x'] + 1} / span {p['width']}; grid-row: {p['y'] + 1} / span {p['height']};"
    if widget.kind == "text":
        body = _markdown(widget.text)
    else:
        columns, rows = queries.rows(widget_sql(widget, datasets))
        body = _body(widget, columns, rows)
        body = f"<h3>{html.escape(widget.title)}</h3>{body}"
    return f"<div class=\"widget {widget.kind}\" data-widget=\"{html.escape(widget.name)}\" style=\"{style}\">{body}</div>"


def _body(widget: Widget, columns: list[str], rows: list[dict]) -> str:
    if widget.kind == "counter":
        value = rows[0][widget.spec["encodings"]["value"]["fieldName"]] if rows else None
        return f"<div class=\"counter-value\">{html.escape(_text(value))}</div>"
    if widget.kind == "table":
        return _table(widget, rows)
    if widget.kind in CHARTS:
        return _chart(widget, rows)
    return f"<p>widget type {html.escape(widget.kind)} is not rendered locally</p>"


def _table(widget: Widget, rows: list[dict]) -> str:
    columns = widget.spec["encodings"]["columns"]
    head = "".join(f"<th>{html.escape(c.get('displayName', c['fieldName']))}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_text(r[c['fieldName']]))}</td>" for c in columns) + "</tr>" for r in rows
    )
    empty = "" if rows else f"<tr><td colspan=\"{len(columns)}\" class=\"empty\">no rows</td></tr>"
    return f"<div class=\"scroll\"><table><thead><tr>{head}</tr></thead><tbody>{body}{empty}</tbody></table></div>"


def _chart(widget: Widget, rows: list[dict]) -> str:
    import plotly.graph_objects as go

    enc = widget.spec["encodings"]
    x, y = enc["x"]["fieldName"], enc["y"]["fieldName"]
    color = enc.get("color", {}).get("fieldName")
    series: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (_sort_key(r[x]), _text(r.get(color)))):
        series.setdefault(_text(r[color]) if color else enc["y"].get("displayName", y), []).append(r)
    fig = go.Figure()
    for name, points in series.items():
        xs, ys = [p[x] for p in points], [p[y] for p in points]
        if widget.kind == "bar":
            fig.add_trace(go.Bar(name=name, x=xs, y=ys))
        else:
            fill = "tozeroy" if widget.kind == "area" else None
            mode = "markers" if widget.kind == "scatter" else "lines+markers"
            fig.add_trace(go.Scatter(name=name, x=xs, y=ys, mode=mode, fill=fill))
    categorical = enc["x"].get("scale", {}).get("type") == "categorical"
    fig.update_layout(
        barmode="stack", margin=dict(l=50, r=20, t=10, b=50), height=320, showlegend=bool(color),
        xaxis_title=enc["x"].get("displayName", x), yaxis_title=enc["y"].get("displayName", y),
    )
    if categorical:  # biggest first, as a reader scans a ranking
        fig.update_xaxes(type="category", categoryorder="total descending")
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"chart-{widget.name}",
                       config={"displaylogo": False, "responsive": True})


def _sort_key(value):
    return (value is None, value if value is not None else 0)


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
.grid {{ display: grid; grid-template-columns: repeat(6, 1fr); grid-auto-rows: 60px; gap: 12px; }}
.widget {{ background: #fff; border-radius: 6px; padding: 8px 12px; overflow: hidden;
          box-shadow: 0 1px 2px rgba(0,0,0,.15); }}
.widget h3 {{ font-size: 0.95rem; margin: 0 0 6px; }}
.counter-value {{ font-size: 2.2rem; font-weight: 600; }}
.scroll {{ overflow: auto; height: calc(100% - 2rem); }}
table {{ border-collapse: collapse; font-size: 0.8rem; width: 100%; }}
th, td {{ text-align: left; padding: 2px 6px; border-bottom: 1px solid #e4e7eb; white-space: nowrap; }}
td.empty {{ color: #888; }}
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
