"""``cdc-lakehouse snapshot reconcile|diff``: the commands of snapshot reconciliation (the
``snapshot`` layer does the work). A tool, outside that layer: it reads the command line and
prints with rich; ``job_args`` says where the tables are (``--lake`` or ``--catalog``).
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from cdc_lakehouse.cli_types import is_lake
from cdc_lakehouse.console import stdout_console
from cdc_lakehouse.job_args import add_onboarding, add_where, check_landing, load_onboarding_of, open_store


def add_snapshot_commands(subparsers) -> None:
    snapshot = subparsers.add_parser("snapshot", help="turn full snapshots into corrective changes (CONTRACT §5)")
    commands = snapshot.add_subparsers(dest="snapshot_command", required=True)

    reconcile = commands.add_parser(
        "reconcile", help="compare new complete snapshots with the replicas; write their corrective changes",
    )
    add_where(reconcile, lake_must_exist=False)  # a first reconcile may come before the first run
    add_onboarding(reconcile)
    reconcile.add_argument("--landing", required=True, help="landing root (<landing>/<source>/snapshot/...)")
    reconcile.add_argument("--new-lake", action="store_true",
                           help="--lake has no tables yet: the first snapshots seed its replicas")
    reconcile.add_argument("--json", action="store_true", help="print the outcomes as JSON")
    reconcile.set_defaults(func=cmd_reconcile)

    diff = commands.add_parser("diff", help="dry run: count the corrective changes of one snapshot, write nothing")
    add_where(diff)
    add_onboarding(diff, required=False)
    diff.add_argument("--table", required=True, help="the replica to compare with, e.g. silver.shop_products")
    diff.add_argument("--snapshot", required=True, help="the snapshot folder (<...>/snapshot/<schema>.<table>/<id>)")
    diff.add_argument("--json", action="store_true")
    diff.set_defaults(func=cmd_diff)


# -- commands -----------------------------------------------------------------------------
def cmd_reconcile(args) -> int:
    from cdc_lakehouse.snapshot.reconcile import reconcile_landing

    onboarding = load_onboarding_of(args)  # fail fast on a bad file, before Spark starts
    check_landing(args)
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

    onboarding = load_onboarding_of(args)
    spark, store = open_store(args)
    outcome = diff_snapshot(spark, store, Path(args.snapshot), args.table, onboarding, args.silver_schema)
    _print_outcomes([outcome.as_dict()], args.json, f"snapshot diff (dry run) against {args.table}")
    return 0 if outcome.status == "dry_run" else 1


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
