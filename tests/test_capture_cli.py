"""The capture commands, through add_capture_commands on a parser of our own, on live servers."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
from live import fixtures

from cdc_lakehouse.capture.cli import add_capture_commands
from cdc_lakehouse.capture.sqlquote import my_ident


def cli(*argv) -> int:
    parser = argparse.ArgumentParser(prog="cdc-lakehouse")
    add_capture_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


def test_shadow_ddl_prints_postgres_sql(capsys):
    assert cli("capture", "shadow-ddl", "--dialect", "postgres", "--table", "shop.orders") == 0
    out = capsys.readouterr().out
    assert "pg_current_xact_id()" in out and 'ON "shop"."orders"' in out
    assert "DEFERRABLE INITIALLY DEFERRED" in out


def test_mariadb_ddl_needs_columns(capsys):
    assert cli("capture", "shadow-ddl", "--dialect", "mariadb", "--table", "shop.orders") == 2
    assert "--column" in capsys.readouterr().err


def test_apply_export_and_binlog_on_live_mariadb(tmp_path, capsys):
    maria = fixtures.mariadb()
    schema = fixtures.unique_schema("cli")
    conn = maria.connect()
    cur = conn.cursor()
    cur.execute(f"CREATE DATABASE {my_ident(schema)}")
    cur.execute(f"CREATE TABLE {my_ident(schema)}.t (id int PRIMARY KEY, v text)")
    assert cli("capture", "shadow-ddl", "--dialect", "mariadb", "--table", f"{schema}.t",
               "--dsn", maria.dsn) == 0
    assert "WITH SYSTEM VERSIONING" in capsys.readouterr().out
    assert cli("capture", "shadow-ddl", "--dialect", "mariadb", "--table", f"{schema}.t",
               "--dsn", maria.dsn, "--apply") == 0
    assert cli("capture", "binlog-marker-ddl", "--table", f"{schema}.t", "--dsn", maria.dsn,
               "--apply") == 0
    cur.execute(f"INSERT INTO {my_ident(schema)}.t VALUES (1, 'x')")
    conn.close()
    capsys.readouterr()
    assert cli("capture", "shadow-export", "--dsn", maria.dsn, "--landing", str(tmp_path),
               "--source", "ms", "--purge", "on_landing") == 0  # shared server: leave no rows behind
    report = json.loads(capsys.readouterr().out)
    assert report["change_rows"] >= 1 and (tmp_path / "ms" / "shadow" / f"{schema}.t").is_dir()
    assert cli("capture", "binlog", "--host", "127.0.0.1", "--port", str(maria.port),
               "--landing", str(tmp_path), "--source", "mb") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["events"] > 0 and report["position"]["file"].startswith("mysql-bin.")


@pytest.mark.parametrize("dialect", ["postgres"])
def test_module_entry_point(dialect):
    proc = subprocess.run([sys.executable, "-m", "cdc_lakehouse.capture.cli", "capture", "shadow-ddl",
                           "--dialect", dialect, "--table", "a.b", "--key", "id"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "ARRAY[E'id']::text[]" in proc.stdout
