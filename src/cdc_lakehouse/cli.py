"""``cdc-lakehouse``: run the pipeline locally and look at the lake."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

from rich.table import Table

from cdc_lakehouse.capture.cli import add_capture_commands
from cdc_lakehouse.cli_types import key_value, lake_dir, landing_dir, missing_landing, positive_int
from cdc_lakehouse.console import stderr_console, stdout_console
from cdc_lakehouse.dashboard.cli import add_dashboard_command
from cdc_lakehouse.housekeeping.cli import add_housekeeping_command
from cdc_lakehouse.project_files import pipeline_sources
from cdc_lakehouse.remote.cli import add_remote_commands
from cdc_lakehouse.snapshot_cli import add_snapshot_commands

# Relative to the working directory, as the default onboarding file: an installed wheel has no
# fixtures, and the demo runs from the repo's root. A Path, not a str: argparse checks a str
# default with the argument's type, before the clearer error about a missing onboarding file.
DEFAULT_LANDING = Path("fixtures") / "landing"

console = stderr_console()


def _spark():
    from cdc_lakehouse.runtime.session import get_spark

    return get_spark()


def _store(spark, lake: str):
    from cdc_lakehouse.storage import LakeStore

    return LakeStore(spark, lake)


def cmd_run(args) -> int:
    from cdc_lakehouse.bronze.unread import unread_folders
    from cdc_lakehouse.config import OnboardingError, load_onboarding

    if not Path(args.config).is_file():
        raise OnboardingError(f"no onboarding file at {args.config} (the default is conf/onboarding.yml in the "
                              "working directory): pass --config FILE")
    onboarding = load_onboarding(args.config, env=args.env)  # fail fast, with the file and entry named
    for warning in onboarding.warnings:  # dlt-meta keys that do not change the results
        console.print(f"[yellow]warning:[/yellow] {warning}")
    if not Path(args.landing).is_dir():  # only the default: argparse checked a given folder
        raise LookupError(f"{missing_landing(str(args.landing))} (the default is fixtures/landing in the "
                          "working directory): pass --landing DIR")
    landing = str(Path(args.landing).resolve())
    configuration = {
        "cdc_lakehouse.landing_path": landing,
        "cdc_lakehouse.onboarding_file": str(Path(args.config).resolve()),
        "cdc_lakehouse.env": args.env,
    }
    for unread in unread_folders(landing, onboarding):
        console.print(f"[yellow]warning:[/yellow] {unread.warning}")
    code = _run(pipeline_sources(), args.lake, configuration, args)
    _warn_tables_not_onboarded(args.lake)
    return code


def _warn_tables_not_onboarded(lake: str) -> None:
    from cdc_lakehouse.bronze.summary import changed_file_warnings, not_onboarded_warnings

    store = _store(_spark(), lake)
    if store.exists("gold.landing_summary"):
        summary = store.read("gold.landing_summary")
        for line in not_onboarded_warnings(summary) + changed_file_warnings(summary):
            console.print(f"[yellow]warning:[/yellow] {line}")


def cmd_pipeline_run(args) -> int:
    configuration = dict(args.conf)
    return _run(args.source, args.lake, configuration, args)


def _run(sources, lake, configuration, args) -> int:
    from cdc_lakehouse.runtime.runner import failed_update, run_pipeline

    with console.status("starting Spark"):
        spark = _spark()
    try:
        with console.status(f"running pipeline into {lake}"):
            result = run_pipeline(spark, sources, lake, configuration, args.full_refresh or args.full_refresh_table,
                                  refresh=args.refresh_table)
    except Exception as exc:
        failed = failed_update(exc)
        if failed is None:  # the update stopped as a whole (main says why)
            raise
        _print_update(failed)
        _print_failures(failed)
        return 2
    _print_update(result)
    return 0


def _print_failures(result) -> None:
    """The failed flows with their errors, and what they kept from running: the update failed,
    the flows that do not depend on them ran and committed."""
    from rich.markup import escape

    for e in result.failed:
        # The same line as an update that stopped as a whole: the error, then the flow it stopped
        # (the event log's message starts with the exception's class, which that line leaves out).
        kind, _, text = (e.message or "").partition(": ")
        message = text if kind.isidentifier() else e.message or ""
        console.print(f"[red]error:[/red] {escape(message)} (in flow '{escape(e.flow)}' into {escape(e.target)})")
    skipped = result.skipped_by_failure
    if skipped:
        names = ", ".join(sorted(e.flow for e in skipped))
        console.print(f"[yellow]skipped[/yellow] (they read what a failed flow did not update): {escape(names)}")
    console.print(f"update {result.update_id} failed: {len(result.failed)} flow(s) failed, {len(skipped)} skipped; "
                  "the next update retries them from their checkpoints")


def _print_update(result) -> None:
    table = Table(title=f"update {result.update_id}")
    for column in ("flow", "target", "status", "batch", "read", "written", "expectations", "s"):
        table.add_column(column)
    for e in result.events:
        table.add_row(
            e.flow, e.target, e.status, str(e.batch_id), str(e.rows_read), str(e.rows_written),
            expectation_outcome(e.expectations), str(e.duration_s),
        )
    console.print(table)


def expectation_outcome(results) -> str:
    """What a flow's expectations did, by action: a quarantine table's rule drops every good
    row, which "failed rows" made read as bad data."""
    if not results:
        return ""
    done = {"drop": "dropped", "warn": "warned", "fail": "failed"}
    counts: dict[str, int] = {}
    for r in results:
        what = done.get(r.action, r.action)
        counts[what] = counts.get(what, 0) + r.failed
    rules = f"{len(results)} rule{'s' if len(results) > 1 else ''}"
    return f"{rules}: " + ", ".join(f"{n} row{'' if n == 1 else 's'} {what}" for what, n in counts.items())


def cmd_tables(args) -> int:
    from cdc_lakehouse.runtime.catalog import layer_of

    spark = _spark()
    rows = [
        {"name": t.name, "layer": layer_of(t.name, t.properties), "path": t.path,
         "version": t.version, "rows": t.row_count}
        for t in _store(spark, args.lake).list_tables()
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = Table(title=f"tables in {args.lake}")
    for column in ("name", "layer", "version", "rows", "path"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["name"], r["layer"], str(r["version"]), str(r["rows"]), r["path"])
    stdout_console().print(table)
    return 0


def cmd_sql(args) -> int:
    from pyspark.errors import PySparkException

    from cdc_lakehouse.runtime.catalog import quiet_spark_errors, run_sql

    spark = _spark()
    try:
        with quiet_spark_errors():  # PySpark logs the error whole; we print it once
            df = run_sql(spark, args.lake, args.query)
            rows = [r.asDict(recursive=True) for r in df.limit(args.limit + 1).collect()]
    except PySparkException as exc:  # the user's query: Spark's message says what is wrong
        console.print(f"[red]error:[/red] {_first_paragraph(str(exc))}")
        return 2
    if len(rows) > args.limit:
        rows = rows[: args.limit]
        console.print(f"[yellow]note:[/yellow] more rows match; showing the first {args.limit} (--limit N shows more)")
    if args.json:
        print(json.dumps(rows, indent=2, default=_json_default))
        return 0
    table = Table()
    for column in df.columns:
        table.add_column(column)
    for r in rows:
        table.add_row(*[_cell(r[c]) for c in df.columns])
    stdout_console().print(table)
    return 0


# What ``make demo`` runs. One process for all of them: as seven commands, each started its own
# Python and Spark JVM, which together took about as long as the two pipeline updates.
DEMO_STEPS: tuple[tuple[str, ...], ...] = (
    ("run", "--landing", "{landing}", "--lake", "{lake}", "--full-refresh"),
    ("snapshot", "reconcile", "--landing", "{landing}", "--lake", "{lake}"),
    ("run", "--landing", "{landing}", "--lake", "{lake}"),
    ("tables", "--lake", "{lake}"),
    ("sql", "--lake", "{lake}", "SELECT * FROM gold.landing_summary ORDER BY source, bronze_table"),
    ("sql", "--lake", "{lake}", "SELECT * FROM gold.replication_health"),
    ("dashboard", "--lake", "{lake}", "--out", "{lake}/dashboard.html"),
)


def cmd_demo(args) -> int:
    """Each step is the command it prints, so a user can run any of them again on its own."""
    from rich.markup import escape

    for step in DEMO_STEPS:
        argv = [part.format(landing=args.landing, lake=args.lake) for part in step]
        console.print(f"[bold]$ cdc-lakehouse {escape(shlex.join(argv))}[/bold]")
        code = main(argv)
        if code:
            return code
    return 0


def _first_paragraph(message: str) -> str:
    """Spark's error without the query plan or JVM stack trace it appends."""
    lines = []
    for line in message.strip().splitlines():
        if line.startswith(("'", "+-", ":-", "JVM stacktrace")) or not line.strip():
            break
        lines.append(line)
    return "\n".join(lines)


def _json_default(value):
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return str(value)


def _cell(value) -> str:
    return "NULL" if value is None else str(value)


def _refresh_options(parser: argparse.ArgumentParser) -> None:
    """As ``remote start`` and a Databricks update: everything, or a selection of tables."""
    parser.add_argument("--full-refresh", action="store_true",
                        help="recompute every table from its input, as a Databricks full refresh")
    parser.add_argument("--full-refresh-table", action="append", default=[], metavar="TABLE",
                        help="reset this table and recompute it from its input (repeatable); "
                             "only the selected tables are updated")
    parser.add_argument("--refresh-table", action="append", default=[], metavar="TABLE",
                        help="update this table without a reset (repeatable); only the selected tables are updated")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cdc-lakehouse", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the project pipeline once over all new landing input")
    run.add_argument("--config", default=str(Path("conf") / "onboarding.yml"),
                     help="onboarding file (default: conf/onboarding.yml in the working directory)")
    run.add_argument("--env", default="dev", help="which `_<env>` keys of the onboarding file apply (default dev)")
    run.add_argument("--landing", default=DEFAULT_LANDING, type=landing_dir,
                     help="landing root (default: fixtures/landing in the working directory)")
    run.add_argument("--lake", default=".lake", help="the lake directory, made on the first run (default .lake)")
    _refresh_options(run)
    run.set_defaults(func=cmd_run)

    pipeline = sub.add_parser("pipeline", help="run any folder of dlt pipeline files")
    pipeline_sub = pipeline.add_subparsers(dest="pipeline_command", required=True)
    prun = pipeline_sub.add_parser("run")
    prun.add_argument("--source", action="append", required=True, help="glob of pipeline files")
    prun.add_argument("--lake", required=True, help="the lake directory, made on the first run")
    prun.add_argument("--conf", action="append", default=[], type=key_value, help="key=value pipeline configuration")
    _refresh_options(prun)
    prun.set_defaults(func=cmd_pipeline_run)

    tables = sub.add_parser("tables", help="list the lake's tables")
    tables.add_argument("--lake", default=".lake", type=lake_dir, help="the lake directory (default .lake)")
    tables.add_argument("--json", action="store_true", help="print JSON instead of a table")
    tables.set_defaults(func=cmd_tables)

    sql = sub.add_parser("sql", help="Spark SQL with every table registered under its name")
    sql.add_argument("query", help="e.g. \"SELECT * FROM gold.audit_log WHERE user = 'api'\"")
    sql.add_argument("--lake", default=".lake", type=lake_dir, help="the lake directory (default .lake)")
    sql.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sql.add_argument("--limit", type=positive_int, default=1000,
                     help="print at most this many rows (default 1000; a note says when more match)")
    sql.set_defaults(func=cmd_sql)

    demo = sub.add_parser("demo", help="what make demo runs: two updates around a snapshot reconcile, then a look "
                                       "at the lake, in one process")
    demo.add_argument("--landing", required=True, type=landing_dir,
                      help="a copy of fixtures/landing: snapshot reconcile writes its corrections there")
    demo.add_argument("--lake", default=".lake", help="the lake directory (default .lake)")
    demo.set_defaults(func=cmd_demo)

    add_capture_commands(sub)
    add_remote_commands(sub)
    add_dashboard_command(sub)
    add_snapshot_commands(sub)
    add_housekeeping_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except Exception as exc:  # one clear line for the user; the traceback helps nobody here
        from cdc_lakehouse.bronze.dlt_meta import DltMetaFileError
        from cdc_lakehouse.cdc.apply import CdcInputError
        from cdc_lakehouse.config import OnboardingError
        from cdc_lakehouse.runtime.graph import PipelineDefinitionError
        from cdc_lakehouse.runtime.checkpoint import ConcurrentPlan
        from cdc_lakehouse.runtime.lake_lock import LakeLocked
        from cdc_lakehouse.silver.declared_types import DeclaredSchemaError
        from cdc_lakehouse.storage import ConcurrentCommit

        clear = (OnboardingError, PipelineDefinitionError, DeclaredSchemaError, LakeLocked, ConcurrentPlan,
                 ConcurrentCommit, LookupError, CdcInputError, DltMetaFileError)
        if isinstance(exc, clear):
            from rich.markup import escape

            where = "".join(f" ({note})" for note in getattr(exc, "__notes__", []))
            console.print(f"[red]error:[/red] {escape(f'{exc}{where}')}")  # a message's [...] is text
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
