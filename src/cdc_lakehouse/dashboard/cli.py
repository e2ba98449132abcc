"""``cdc-lakehouse dashboard``: the Lakeview dashboard's queries, run on a local lake, as HTML.

Imports nothing but the standard library at module level: the CLI registers this command on
every machine, also where Spark is not installed (capture hosts).
"""

from __future__ import annotations

from pathlib import Path

from cdc_lakehouse.cli_types import lake_dir


def add_dashboard_command(subparsers) -> None:
    dashboard = subparsers.add_parser(
        "dashboard", help="render the Lakeview dashboard's queries on a local lake as an HTML page with charts")
    dashboard.add_argument("--lake", default=".lake", type=lake_dir)
    dashboard.add_argument("--out", required=True, help="HTML file to write")
    dashboard.add_argument("--dashboard", help="the .lvdash.json file (default: the project's, src/dashboards)")
    dashboard.set_defaults(func=cmd_dashboard)


def cmd_dashboard(args) -> int:
    from cdc_lakehouse.dashboard import lakeview
    from cdc_lakehouse.project_files import dashboard_file
    from cdc_lakehouse.runtime.session import get_spark

    path = args.dashboard or dashboard_file()
    try:
        spec = lakeview.load(path)  # before Spark starts
    except (OSError, ValueError) as exc:
        raise LookupError(f"cannot read the dashboard file {path}: {exc}") from exc
    spark = get_spark()
    page = lakeview.render(spark, args.lake, spec,
                             title=f"cdc-lakehouse: {Path(args.lake).resolve().name}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    print(out)
    return 0
