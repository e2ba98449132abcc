"""The capture commands, through add_capture_commands on a parser of our own, on live servers."""

from __future__ import annotations

import argparse
import json
import socket
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


def _closed_port() -> int:
    """A loopback port nothing listens on: connecting is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("command", [
    ("capture", "shadow-export", "--dsn", "postgresql://u@127.0.0.1:{port}/shop", "--landing", "{tmp}"),
    ("capture", "shadow-export", "--dsn", "mariadb://u@127.0.0.1:{port}/shop", "--landing", "{tmp}"),
    ("capture", "binlog", "--host", "127.0.0.1", "--port", "{port}", "--landing", "{tmp}"),
])
def test_a_server_that_refuses_is_one_line_not_a_traceback(tmp_path, capsys, command):
    port = _closed_port()
    assert cli(*[part.format(port=port, tmp=tmp_path) for part in command]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "127.0.0.1" in err and "Traceback" not in err


@pytest.mark.parametrize("argv, said", [
    (("--dialect", "mariadb", "--dsn", "postgresql://u@h/db", "--column", "id"), "--dialect mariadb but --dsn is a postgres server"),
    (("--dialect", "postgres", "--column", "id"), "--column is for --dialect mariadb"),
])
def test_shadow_ddl_options_that_contradict_each_other_are_errors(capsys, argv, said):
    assert cli("capture", "shadow-ddl", "--table", "shop.orders", *argv) == 2
    assert said in capsys.readouterr().err


def test_export_batch_rows_must_be_positive(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli("capture", "shadow-export", "--dsn", "postgresql://u@h/db", "--landing", str(tmp_path), "--batch-rows", "0")
    assert "must be a positive number, not 0" in capsys.readouterr().err


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
