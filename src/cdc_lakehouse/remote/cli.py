"""``cdc-lakehouse remote start|follow|health``: the deployed pipeline, from a terminal.

Wired into the main parser with ``add_remote_commands(sub)``. The SDK is imported only when a
remote command runs, so the local commands do not pay for it.

Authentication is the Databricks CLI's: ``DATABRICKS_HOST`` + ``DATABRICKS_TOKEN`` (or OAuth
M2M) in the environment, else ``--profile`` / the ``DEFAULT`` profile of ``~/.databrickscfg``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from cdc_lakehouse.cli_types import non_negative_float, positive_float, positive_int

DEFAULT_PIPELINE = "cdc-lakehouse-dev"  # name given by the bundle to the dev target's pipeline


def add_remote_commands(subparsers) -> argparse.ArgumentParser:
    """Register ``remote start``, ``remote follow`` and ``remote health`` on ``subparsers``."""
    remote = subparsers.add_parser(
        "remote", help="operate the pipeline deployed on Databricks (databricks-sdk)",
        description="Operate the deployed pipeline on Databricks through databricks-sdk.",
    )
    remote_sub = remote.add_subparsers(dest="remote_command", required=True)

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--profile", default=os.environ.get("DATABRICKS_CONFIG_PROFILE"),
                        help="~/.databrickscfg profile (default: environment, then DEFAULT)")

    pipeline = argparse.ArgumentParser(add_help=False)
    pipeline.add_argument("--pipeline", default=os.environ.get("CDC_LAKEHOUSE_PIPELINE", DEFAULT_PIPELINE),
                          help="pipeline id or name; a dev deployment's '[dev <user>] ' prefix may be "
                               f"left out (default: $CDC_LAKEHOUSE_PIPELINE or {DEFAULT_PIPELINE})")

    follow_opts = argparse.ArgumentParser(add_help=False)
    follow_opts.add_argument("--poll-seconds", type=non_negative_float, default=5.0)
    follow_opts.add_argument("--timeout-minutes", type=positive_float, default=None,
                             help="stop following (not the update) after this long")
    follow_opts.add_argument("--json", action="store_true", help="one JSON event per line")

    start = remote_sub.add_parser(
        "start", parents=[common, pipeline, follow_opts], help="start a pipeline update",
        description="Start a pipeline update. Without a table selection the whole pipeline is "
                    "updated; with --full-refresh-table/--refresh-table only the named tables are.",
    )
    start.add_argument("--full-refresh", action="store_true", help="reset every table, then recompute all")
    start.add_argument("--full-refresh-table", action="append", default=[], metavar="TABLE",
                       help="reset and recompute this table (repeatable)")
    start.add_argument("--refresh-table", action="append", default=[], metavar="TABLE",
                       help="update this table without a reset (repeatable)")
    start.add_argument("--validate-only", action="store_true", help="check the pipeline code, write nothing")
    start.add_argument("--follow", action="store_true", help="follow the update until it ends")
    start.set_defaults(func=cmd_start)

    follow = remote_sub.add_parser(
        "follow", parents=[common, pipeline, follow_opts], help="follow an update from the pipeline events",
        description="Print an update's events until it ends; exit 0 if it COMPLETED, 1 otherwise.",
    )
    follow.add_argument("--update-id", help="default: the pipeline's latest update")
    follow.set_defaults(func=cmd_follow)

    health = remote_sub.add_parser(
        "health", parents=[common], help="print the gold health summary through a SQL warehouse",
        description="SELECT the gold health table through a SQL warehouse (Statement Execution API).",
    )
    health.add_argument("--warehouse-id", default=os.environ.get("DATABRICKS_WAREHOUSE_ID"),
                        help="SQL warehouse id (default: $DATABRICKS_WAREHOUSE_ID)")
    health.add_argument("--catalog", default=os.environ.get("CDC_LAKEHOUSE_CATALOG", "main"),
                        help="Unity Catalog catalog the pipeline publishes to (bundle variable `catalog`)")
    health.add_argument("--gold-schema", default=os.environ.get("CDC_LAKEHOUSE_GOLD_SCHEMA", "gold"),
                        help="the target's gold schema: gold in prod, dev_<user>_gold in a dev deployment "
                             "(default: $CDC_LAKEHOUSE_GOLD_SCHEMA or gold)")
    health.add_argument("--table", default=None, help="[catalog.]schema.table (default: the gold health table)")
    health.add_argument("--limit", type=positive_int, default=1000)
    health.add_argument("--poll-seconds", type=non_negative_float, default=2.0,
                        help="status poll interval once the first 30 s wait is over")
    health.add_argument("--json", action="store_true")
    health.set_defaults(func=cmd_health)
    return remote


# --------------------------------------------------------------------------------- commands


def _connect(args):
    from cdc_lakehouse.remote.workspace import connect

    return connect(profile=args.profile)


def _run(command):
    """One line on stderr for what the user can fix (exit 2), never a traceback."""
    from databricks.sdk.errors import DatabricksError

    from cdc_lakehouse.remote.health import StatementFailed
    from cdc_lakehouse.remote.pipelines import RemoteError

    try:
        return command()
    except (RemoteError, StatementFailed, DatabricksError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def cmd_start(args) -> int:
    from cdc_lakehouse.remote import pipelines

    def command() -> int:
        w = _connect(args)
        pipeline_id = pipelines.resolve_pipeline(w, args.pipeline)
        update_id = pipelines.start_update(
            w, pipeline_id,
            full_refresh=args.full_refresh,
            full_refresh_tables=args.full_refresh_table,
            refresh_tables=args.refresh_table,
            validate_only=args.validate_only,
        )
        print(f"started update {update_id} of pipeline {pipeline_id}")
        if not args.follow:
            return 0
        return _follow(w, pipeline_id, update_id, args)

    return _run(command)


def cmd_follow(args) -> int:
    from cdc_lakehouse.remote import pipelines

    def command() -> int:
        w = _connect(args)
        pipeline_id = pipelines.resolve_pipeline(w, args.pipeline)
        update_id = args.update_id or pipelines.latest_update_id(w, pipeline_id)
        return _follow(w, pipeline_id, update_id, args)

    return _run(command)


def _follow(w, pipeline_id: str, update_id: str, args) -> int:
    from cdc_lakehouse.remote import pipelines

    result = pipelines.follow_update(
        w, pipeline_id, update_id,
        out=lambda line: print(line, flush=True),
        poll_seconds=args.poll_seconds,
        timeout_seconds=args.timeout_minutes * 60 if args.timeout_minutes is not None else None,
        as_json=args.json,
    )
    for line in pipelines.summary_lines(result):
        print(line, file=sys.stderr if args.json else sys.stdout)
    return 0 if result.ok else 1


def _health_table(args) -> str:
    from cdc_lakehouse.remote.health import HEALTH_TABLE

    return args.table or f"{args.gold_schema}.{HEALTH_TABLE}"


def cmd_health(args) -> int:
    from cdc_lakehouse.remote import health

    def command() -> int:
        if not args.warehouse_id:
            raise ValueError("--warehouse-id is required (or set DATABRICKS_WAREHOUSE_ID)")
        w = _connect(args)
        result = health.health_summary(
            w, args.warehouse_id, args.catalog, _health_table(args), limit=args.limit,
            poll_seconds=args.poll_seconds,
        )
        if args.json:
            print(json.dumps(result.records(), indent=2))
            return 0
        from rich.table import Table

        from cdc_lakehouse.console import stdout_console

        table = Table(title=f"{args.catalog}.{_health_table(args)}")
        for column in result.columns:
            table.add_column(column)
        for row in result.rows:
            table.add_row(*["NULL" if v is None else str(v) for v in row])
        stdout_console().print(table)
        return 0

    return _run(command)
