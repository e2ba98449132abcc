"""``cdc-lakehouse housekeeping``: the command of the job step after each pipeline update
(``run`` does the work). Where the tables are comes from ``job_args`` (``--lake`` or ``--catalog``).

Imports no Spark at module level: the CLI registers this command on every machine, also where
Spark is not installed (capture hosts).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table

from cdc_lakehouse.cli_types import non_negative_float
from cdc_lakehouse.console import stderr_console, stdout_console
from cdc_lakehouse.job_args import add_onboarding, add_where, check_landing, load_onboarding_of, open_store


def add_housekeeping_command(subparsers: argparse._SubParsersAction) -> None:
    from cdc_lakehouse.housekeeping.run import STEPS

    hk = subparsers.add_parser(
        "housekeeping", help="compaction, tombstone expiry, landing archive, shadow acks, OPTIMIZE/VACUUM",
    )
    add_where(hk)
    add_onboarding(hk)
    hk.add_argument("--landing", required=True)
    hk.add_argument("--retention-hours", type=non_negative_float, default=168.0, help="VACUUM retention (default 168)")
    hk.add_argument("--tombstone-hours", type=non_negative_float, help="expire tombstones older than this (default: retention)")
    hk.add_argument("--archive-after-hours", type=non_negative_float,
                    help="archive committed landing files older than this (default: retention)")
    hk.add_argument("--allow-short-retention", action="store_true",
                    help="accept a retention below Delta's 168 h safety limit")
    hk.add_argument("--skip", action="append", choices=STEPS, default=[], help="leave a step out (repeatable)")
    hk.add_argument("--json", action="store_true")
    hk.set_defaults(func=cmd_housekeeping)


def cmd_housekeeping(args: argparse.Namespace) -> int:
    from cdc_lakehouse.housekeeping.maintenance import RetentionTooShort, check_retention
    from cdc_lakehouse.housekeeping.run import Options, housekeeping

    onboarding = load_onboarding_of(args)
    check_landing(args)
    try:
        check_retention(args.retention_hours, args.allow_short_retention)  # before Spark starts
    except RetentionTooShort as exc:
        stderr_console().print(f"[red]error:[/red] {exc}")
        return 2
    options = Options(
        retention_hours=args.retention_hours, tombstone_hours=args.tombstone_hours,
        archive_after_hours=args.archive_after_hours, allow_short_retention=args.allow_short_retention,
        skip=frozenset(args.skip), bronze=args.bronze_schema, silver=args.silver_schema,
    )
    spark, store = open_store(args)
    report = housekeeping(spark, store, onboarding, Path(args.landing), Path(args.lake) if args.lake else None, options)
    _print_report(report, args.json)
    return 0


def _print_report(report: dict, as_json: bool) -> None:
    from cdc_lakehouse.housekeeping.summary import housekeeping_summary

    if as_json:
        print(json.dumps(report, indent=2, default=str))
        return
    table = Table(title="housekeeping (--json for every table's details)")
    for column in ("step", "seconds", "done"):
        table.add_column(column, overflow="fold")
    for step, seconds, done in housekeeping_summary(report):
        table.add_row(step, seconds, done)
    stdout_console().print(table)
