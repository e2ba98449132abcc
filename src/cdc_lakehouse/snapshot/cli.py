"""``cdc-lakehouse snapshot reconcile|diff`` and ``cdc-lakehouse housekeeping``.

Locally the commands address a lake directory (``--lake DIR``); in the Databricks job they
address Unity Catalog tables (``--catalog C``), exactly one of the two.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from cdc_lakehouse.cli_types import is_lake, lake_dir, missing_landing, non_negative_float
from cdc_lakehouse.console import stderr_console, stdout_console

# As `run`'s, the working directory's: an installed wheel has no repo to take it from (a job task
# passes --config), and the demo runs from the repo's root.
DEFAULT_CONFIG = Path("conf") / "onboarding.yml"


def add_snapshot_commands(subparsers) -> None:
    snapshot = subparsers.add_parser("snapshot", help="turn full snapshots into corrective changes (CONTRACT §5)")
    commands = snapshot.add_subparsers(dest="snapshot_command", required=True)

    reconcile = commands.add_parser(
        "reconcile", help="compare new complete snapshots with the replicas; write their corrective changes",
    )
    _where(reconcile, lake_must_exist=False)  # a first reconcile may come before the first run
    _onboarding(reconcile)
    reconcile.add_argument("--landing", required=True, help="landing root (<landing>/<source>/snapshot/...)")
    reconcile.add_argument("--new-lake", action="store_true",
                           help="--lake has no tables yet: the first snapshots seed its replicas")
    reconcile.add_argument("--json", action="store_true", help="print the outcomes as JSON")
    reconcile.set_defaults(func=cmd_reconcile)

    diff = commands.add_parser("diff", help="dry run: count the corrective changes of one snapshot, write nothing")
    _where(diff)
    _onboarding(diff, required=False)
    diff.add_argument("--table", required=True, help="the replica to compare with, e.g. silver.shop_products")
    diff.add_argument("--snapshot", required=True, help="the snapshot folder (<...>/snapshot/<schema>.<table>/<id>)")
    diff.add_argument("--json", action="store_true")
    diff.set_defaults(func=cmd_diff)


def add_housekeeping_command(subparsers) -> None:
    from cdc_lakehouse.housekeeping.run import STEPS

    hk = subparsers.add_parser(
        "housekeeping", help="compaction, tombstone expiry, landing archive, shadow acks, OPTIMIZE/VACUUM",
    )
    _where(hk)
    _onboarding(hk)
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


def _where(parser, lake_must_exist: bool = True) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--lake", type=lake_dir if lake_must_exist else str, help="local lake directory (delta-rs)")
    where.add_argument("--catalog", help="Unity Catalog catalog (Databricks job compute)")


def _onboarding(parser, required: bool = True) -> None:
    default = str(DEFAULT_CONFIG) if DEFAULT_CONFIG.is_file() else None
    parser.add_argument("--config", default=default, required=required and default is None,
                        help="onboarding file (default: conf/onboarding.yml in the working directory, if there is one)")
    parser.add_argument("--env", default="dev", help="onboarding environment (default dev)")
    parser.add_argument("--silver-schema", default="silver")
    parser.add_argument("--bronze-schema", default="bronze")


def _load_onboarding(args):
    from cdc_lakehouse.config import load_onboarding

    return load_onboarding(args.config, env=args.env) if args.config else None


def _check_landing(args) -> None:
    """Checked by the command, not when parsing: the Databricks job's parameters name a Volume
    that exists only in the workspace, and they must parse anywhere (tests/test_bundle.py)."""
    if not Path(args.landing).is_dir():
        raise LookupError(missing_landing(args.landing))


# -- commands -----------------------------------------------------------------------------
def cmd_reconcile(args) -> int:
    from cdc_lakehouse.snapshot.reconcile import reconcile_landing
    from cdc_lakehouse.snapshot.tables import open_store

    onboarding = _load_onboarding(args)  # fail fast on a bad file, before Spark starts
    _check_landing(args)
    if args.lake and not args.new_lake and not is_lake(Path(args.lake)):
        # A mistyped lake would pass for a new one: every snapshot would be recorded as done
        # with corrections that seed empty replicas, and the real lake would never get them.
        raise LookupError(f"{args.lake} is not a lake: it holds no tables. To seed a new lake's replicas "
                          "from the first snapshots, before its first pipeline run, pass --new-lake")
    spark, store = open_store(args)
    outcomes = reconcile_landing(spark, store, onboarding, Path(args.landing), args.silver_schema)
    _print_outcomes([o.as_dict() for o in outcomes], args.json, "snapshot reconcile")
    return 0


def cmd_diff(args) -> int:
    from cdc_lakehouse.snapshot.reconcile import diff_snapshot
    from cdc_lakehouse.snapshot.tables import open_store

    onboarding = _load_onboarding(args)
    spark, store = open_store(args)
    outcome = diff_snapshot(spark, store, Path(args.snapshot), args.table, onboarding, args.silver_schema)
    _print_outcomes([outcome.as_dict()], args.json, f"snapshot diff (dry run) against {args.table}")
    return 0 if outcome.status == "dry_run" else 1


def cmd_housekeeping(args) -> int:
    from cdc_lakehouse.housekeeping.maintenance import RetentionTooShort, check_retention
    from cdc_lakehouse.housekeeping.run import Options, housekeeping
    from cdc_lakehouse.housekeeping.summary import housekeeping_summary
    from cdc_lakehouse.snapshot.tables import open_store

    onboarding = _load_onboarding(args)
    _check_landing(args)
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
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    table = Table(title="housekeeping (--json for every table's details)")
    for column in ("step", "seconds", "done"):
        table.add_column(column, overflow="fold")
    for step, seconds, done in housekeeping_summary(report):
        table.add_row(step, seconds, done)
    stdout_console().print(table)
    return 0


# -- output -------------------------------------------------------------------------------
COUNTS = ("snapshot_rows", "replica_rows", "inserts", "updates", "deletes", "unchanged", "superseded")


def _print_outcomes(rows: list[dict], as_json: bool, title: str) -> None:
    if as_json:
        print(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        stdout_console().print(f"{title}: no snapshot folders found")
        return
    stdout_console().print(_one_outcome(rows[0], title) if len(rows) == 1 else _outcomes(rows, title))


def _values(row: dict) -> dict:
    counts = row["counts"] or {}
    return {"status": row["status"], **{c: str(counts.get(c, "")) for c in COUNTS}, "reason": row["reason"] or ""}


def _one_outcome(row: dict, title: str) -> Table:
    """One line per value: each count beside its name, and all of them on 80 columns."""
    table = Table(title=title)
    table.add_column("")
    table.add_column(f"{row['source']} {row['table']} {row['snapshot_id']}", overflow="fold")
    for name, value in _values(row).items():
        table.add_row(name, value)
    return table


def _outcomes(rows: list[dict], title: str) -> Table:
    """One row per snapshot: a backlog of many stays a list."""
    table = Table(title=title)
    for column in ("source", "table", "snapshot", *_values(rows[0])):
        table.add_column(column, overflow="fold")
    for r in rows:
        table.add_row(r["source"], r["table"], r["snapshot_id"], *_values(r).values())
    return table
