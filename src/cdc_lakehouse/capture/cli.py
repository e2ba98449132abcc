"""``cdc-lakehouse capture ...``: shadow DDL, shadow export and binlog capture from live sources.

Wire into the main CLI with ``add_capture_commands(subparsers)``; standalone:
``python -m cdc_lakehouse.capture.cli capture binlog --host ... --landing DIR``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from pathlib import Path

from cdc_lakehouse.cli_types import positive_int

from .event_buffer import DEFAULT_BUFFER_BYTES
from .sqlquote import TableName

PASSWORD_ENV = "CDC_CAPTURE_PASSWORD"


def _clean_errors(cmd):
    """Bad input, a missing table, a file that cannot be written, or a server that refuses
    (unreachable, bad login, no binary log): one line and exit code 2, in any parent CLI."""
    def run(args) -> int:
        try:
            return cmd(args)
        except (ValueError, LookupError, OSError, *_database_errors()) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except ModuleNotFoundError as exc:  # a capture host with only one database's driver
            print(f"error: {exc}: install it to capture from this kind of server", file=sys.stderr)
            return 2
    run.__name__ = cmd.__name__
    return run


def _database_errors() -> tuple[type[BaseException], ...]:
    """The drivers' base errors; a capture host may have only one of the drivers installed."""
    found = []
    for module, name in (("psycopg", "Error"), ("pymysql", "MySQLError")):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except ImportError:
            continue
    return tuple(found)


def _table(text: str) -> TableName:
    try:
        return TableName.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _mariadb_statements(args, table: TableName) -> list[str]:
    from . import ddl_mariadb

    columns, keys = args.column, args.key
    table_columns = None  # unknown: --column names what to capture, maybe not every column
    if args.dsn and not columns:
        from .connect import connect
        from .introspect import mariadb_columns

        conn = connect(args.dsn)
        try:
            columns, pk = mariadb_columns(conn, table)
        finally:
            conn.close()
        keys, table_columns = keys or pk, columns
    if not columns:
        raise ValueError("--dialect mariadb needs the table's columns: --dsn or --column ...")
    return ddl_mariadb.shadow_statements(table, columns, keys or [], table_columns)


def _apply(dsn: str, statements: list[str]) -> None:
    from .connect import POSTGRES, connect, dialect_of

    conn = connect(dsn)
    try:
        if dialect_of(dsn) == POSTGRES:
            conn.autocommit = True
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
    finally:
        conn.close()


@_clean_errors
def cmd_shadow_ddl(args) -> int:
    _check_dialect(args)
    if args.dialect == "postgres":
        from . import ddl_postgres

        statements = [ddl_postgres.shadow_ddl(args.table, args.key or None)]
        script = statements[0]
    else:
        from .ddl_mariadb import render_script

        statements = _mariadb_statements(args, args.table)
        script = render_script(statements)
    if args.apply:
        if not args.dsn:
            raise ValueError("--apply needs --dsn")
        _apply(args.dsn, statements)
        print(f"applied shadow capture DDL for {args.table.qualified}", file=sys.stderr)
    else:
        sys.stdout.write(script)
    return 0


def _check_dialect(args) -> None:
    """DDL of one dialect run on the other's server would fail half-way through the script."""
    from .connect import dialect_of

    if args.dsn and dialect_of(args.dsn) != args.dialect:
        raise ValueError(f"--dialect {args.dialect} but --dsn is a {dialect_of(args.dsn)} server")
    if args.dialect == "postgres" and args.column:
        raise ValueError("--column is for --dialect mariadb; postgres shadow DDL needs no column list")


@_clean_errors
def cmd_binlog_marker_ddl(args) -> int:
    from .ddl_mariadb import marker_statements, render_script

    statements = marker_statements(args.table)
    if args.apply:
        if not args.dsn:
            raise ValueError("--apply needs --dsn")
        _apply(args.dsn, statements)
    else:
        sys.stdout.write(render_script(statements))
    return 0


@_clean_errors
def cmd_schema_ddl(args) -> int:
    from .connect import connect, dialect_of
    from .schema_ddl import table_ddls

    if (args.schema or len(args.table) > 1) and not args.out_dir:
        raise ValueError("several tables (--schema, or more than one --table): write them with --out-dir DIR")
    conn = connect(args.dsn)
    try:
        ddls = table_ddls(conn, dialect_of(args.dsn), args.table, args.schema)
    finally:
        conn.close()
    if args.out_dir or args.out:
        _write_ddls(ddls, args.out, args.out_dir)
    else:
        sys.stdout.write(*ddls.values())
    return 0


def _write_ddls(ddls: dict, out: Path | None, out_dir: Path | None) -> None:
    from cdc_lakehouse.contract.landing import table_folder

    for table, ddl in ddls.items():
        path = out or out_dir / f"{table_folder(table.schema, table.table)}.ddl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(ddl)
        print(f"wrote {path}: the source_schema_path of the {table.qualified} flow", file=sys.stderr)


def _default_source(dsn: str) -> str:
    from urllib.parse import urlsplit

    from .connect import dialect_of

    return urlsplit(dsn).path.strip("/") or dialect_of(dsn)


@_clean_errors
def cmd_shadow_export(args) -> int:
    from .shadow_export import export_once

    source = args.source or _default_source(args.dsn)
    result = export_once(args.dsn, args.landing, source, args.state, args.batch_rows, args.purge)
    print(json.dumps({"source": source, "batches": result.batches, "txn_rows": result.txn_rows,
                      "change_rows": result.change_rows,
                      "files": [str(f) for f in result.files or []], "purge": args.purge,
                      "purged_txns": result.purged_txns,
                      "purged_change_rows": result.purged_change_rows}))
    return 0


@_clean_errors
def cmd_binlog(args) -> int:
    from .binlog import BinlogConfig, capture

    cfg = BinlogConfig(host=args.host, port=args.port, user=args.user,
                       password=args.password if args.password is not None
                       else os.environ.get(PASSWORD_ENV, ""),
                       reader_server_id=args.server_id, landing=Path(args.landing),
                       source=args.source, state_dir=args.state, follow=args.follow,
                       start=args.start, capture_schema=args.capture_schema,
                       buffer_bytes=args.buffer_mb * 2**20)
    result = capture(cfg)
    pos = result.position
    print(json.dumps({"source": args.source, "transactions": result.transactions,
                      "events": result.events, "sessions": result.sessions,
                      "files": [str(f) for f in result.files], "spilled_transactions": result.spilled_transactions,
                      "skipped_transactions": result.skipped_transactions, "new_epoch": result.new_epoch,
                      "position": {"file": pos.file, "pos": pos.pos, "epoch": pos.epoch} if pos else None}))
    return 0


def add_capture_commands(subparsers) -> argparse.ArgumentParser:
    """Register ``capture`` and its subcommands on an argparse subparsers object."""
    capture = subparsers.add_parser("capture", help="capture changes from live source databases")
    sub = capture.add_subparsers(dest="capture_command", required=True)

    ddl = sub.add_parser("shadow-ddl", help="print (or --apply) the shadow-table capture DDL")
    ddl.add_argument("--dialect", choices=("postgres", "mariadb"), required=True)
    ddl.add_argument("--table", type=_table, required=True, help="schema.table (parts may be \"quoted\")")
    ddl.add_argument("--key", nargs="+", default=[], help="key columns (default: the primary key)")
    ddl.add_argument("--column", nargs="+", default=[],
                     help="mariadb: the table's columns (default: read them with --dsn)")
    ddl.add_argument("--dsn", help="postgresql://... or mariadb://... (for --apply / mariadb columns)")
    ddl.add_argument("--apply", action="store_true", help="run the DDL on --dsn instead of printing it")
    ddl.set_defaults(func=cmd_shadow_ddl)

    marker = sub.add_parser("binlog-marker-ddl",
                            help="print (or --apply) MariaDB triggers that name each binlog "
                                 "transaction's session (user attribution before MariaDB 11.5)")
    marker.add_argument("--table", type=_table, required=True)
    marker.add_argument("--dsn")
    marker.add_argument("--apply", action="store_true")
    marker.set_defaults(func=cmd_binlog_marker_ddl)

    types = sub.add_parser("schema-ddl", help="print (or write) tables' column types as Spark DDL, "
                                              "for each flow's source_details.source_schema_path")
    types.add_argument("--dsn", required=True, help="postgresql://... or mariadb://...")
    which = types.add_mutually_exclusive_group(required=True)
    which.add_argument("--table", type=_table, nargs="+", default=[], help="schema.table (parts may be \"quoted\")")
    which.add_argument("--schema", help="every table of this schema (needs --out-dir)")
    where = types.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, help="file to write, for one table (default: print)")
    where.add_argument("--out-dir", type=Path, help="folder to write <schema>.<table>.ddl files into")
    types.set_defaults(func=cmd_schema_ddl)

    export = sub.add_parser("shadow-export", help="export committed shadow rows to landing files")
    export.add_argument("--dsn", required=True)
    export.add_argument("--landing", required=True, type=Path)
    export.add_argument("--source", help="source name (default: the DSN's database)")
    export.add_argument("--state", type=Path, help="journal and ledger folder (default <landing>/<source>/.capture)")
    export.add_argument("--batch-rows", type=positive_int, default=50_000)
    export.add_argument("--purge", choices=("ack", "on_landing"), default="ack",
                        help="when exported rows leave the source: once <landing>/<source>/_ack.json "
                             "(written by housekeeping) covers them (default), or as soon as their "
                             "landing file is durable (deployments without housekeeping)")
    export.set_defaults(func=cmd_shadow_export)

    binlog = sub.add_parser("binlog", help="capture a MariaDB/MySQL row-based binlog")
    binlog.add_argument("--host", required=True)
    binlog.add_argument("--port", type=int, default=3306)
    binlog.add_argument("--user", default="root")
    binlog.add_argument("--password", help=f"default: ${PASSWORD_ENV}")
    binlog.add_argument("--server-id", type=int, default=4242,
                        help="this reader's replica server id (unique among the server's replicas)")
    binlog.add_argument("--landing", required=True, type=Path)
    binlog.add_argument("--source", default="binlog", help="source name (default: binlog)")
    binlog.add_argument("--state", type=Path, help="checkpoint folder (default <landing>/<source>/.capture)")
    binlog.add_argument("--follow", action="store_true", help="keep reading new events until interrupted")
    binlog.add_argument("--start", choices=("earliest", "current"), default="earliest",
                        help="where to start without a checkpoint (also the new epoch of a start on another server)")
    binlog.add_argument("--capture-schema", default="cdc_capture")
    binlog.add_argument("--buffer-mb", type=positive_int, default=DEFAULT_BUFFER_BYTES // 2**20,
                        help="events held in memory (MB); a larger transaction is held in a hidden file "
                             "next to the landing files until its commit (default %(default)s)")
    binlog.set_defaults(func=cmd_binlog)
    return capture


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cdc-lakehouse", description=__doc__)
    add_capture_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
