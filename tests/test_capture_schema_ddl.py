"""``cdc-lakehouse capture schema-ddl``: a live table's columns as the Spark DDL a flow's
``source_schema_path`` names. The types must hold every value the capture writes: a row of every
kind of column is captured (binlog for MariaDB, shadow export for PostgreSQL) and typed with the
generated DDL, and no value may be lost (``misfit_fields``) or change."""

from __future__ import annotations

import argparse
import json
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from live import fixtures
from pyspark.sql import functions as F
from pyspark.sql.types import _parse_datatype_string

from cdc_lakehouse.capture.cli import add_capture_commands
from cdc_lakehouse.contract.landing import to_json
from cdc_lakehouse.capture.schema_ddl import SourceColumn, spark_type
from cdc_lakehouse.capture.sqlquote import my_ident
from cdc_lakehouse.silver.declared_types import as_text, misfit_fields


def cli(*argv) -> int:
    parser = argparse.ArgumentParser(prog="cdc-lakehouse")
    add_capture_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


@pytest.mark.parametrize(("column", "expected"), [
    (SourceColumn("n", "int", unsigned=True), "BIGINT"),
    (SourceColumn("n", "bigint", unsigned=True), "DECIMAL(20,0)"),
    (SourceColumn("n", "numeric", 50, 2), "DECIMAL(38,0)"),   # wider than Spark's: integer digits first
    (SourceColumn("n", "numeric", 65, 50), "DECIMAL(38,23)"),
    (SourceColumn("n", "numeric", 5, -2), "DECIMAL(7,0)"),     # PostgreSQL negative scale
    (SourceColumn("n", "numeric"), "DECIMAL(38,18)"),         # PostgreSQL NUMERIC without precision
    (SourceColumn("n", "decimal", 10, 0), "DECIMAL(10,0)"),
    (SourceColumn("n", "USER-DEFINED"), "STRING"),
])
def test_types_beyond_spark_s_own_are_mapped_to_hold_values_exactly_or_as_text(column, expected):
    assert spark_type(column) == expected


def typed_without_loss(spark, ddl: str, image: dict) -> dict:
    schema = _parse_datatype_string(ddl)
    row = spark.createDataFrame([(to_json(image),)], "row string")  # numbers exactly as landed
    parsed = row.select(F.from_json("row", as_text(schema)).alias("raw"), F.from_json("row", schema).alias("t"))
    found = parsed.select(misfit_fields(F.col("raw"), F.col("t"), schema.fields).alias("misfits"), "t").first()
    assert found["misfits"] == [], found["misfits"]
    return found["t"].asDict()


MARIADB_COLUMNS = (
    "id INT UNSIGNED PRIMARY KEY, big BIGINT, ubig BIGINT UNSIGNED, price DECIMAL(10,2), ratio DOUBLE, "
    "flag TINYINT(1), d DATE, dt DATETIME(6), t TIME, y YEAR, name VARCHAR(20), e ENUM('a','b'), j JSON"
)
MARIADB_DDL = ("id BIGINT,\nbig BIGINT,\nubig DECIMAL(20,0),\nprice DECIMAL(10,2),\nratio DOUBLE,\nflag INT,\n"
               "d DATE,\ndt TIMESTAMP,\nt STRING,\ny INT,\nname STRING,\ne STRING,\nj STRING\n")


def test_mariadb_table_types_hold_its_binlog_values(spark, tmp_path, capsys):
    maria = fixtures.mariadb()
    schema = fixtures.unique_schema("ddl")
    conn = maria.connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {my_ident(schema)}")
        cur.execute(f"CREATE TABLE {my_ident(schema)}.t ({MARIADB_COLUMNS})")
        cur.execute(f"INSERT INTO {my_ident(schema)}.t VALUES (4000000000, -5, 18446744073709551615, 1234.50, 0.25, "
                    "1, '2026-03-01', '2026-03-01 10:11:12.123456', '10:11:12', 2026, 'Zoë', 'b', '{\"k\": [1]}')")
    conn.close()
    capsys.readouterr()
    assert cli("capture", "schema-ddl", "--dsn", maria.dsn, "--table", f"{schema}.t") == 0
    ddl = capsys.readouterr().out
    assert ddl == MARIADB_DDL
    assert cli("capture", "binlog", "--host", "127.0.0.1", "--port", str(maria.port),
               "--landing", str(tmp_path), "--source", "mb") == 0
    image = _binlog_insert(tmp_path / "mb" / "binlog", schema)
    typed = typed_without_loss(spark, ddl, image)
    assert typed == {
        "id": 4000000000, "big": -5, "ubig": Decimal("18446744073709551615"), "price": Decimal("1234.50"),
        "ratio": 0.25, "flag": 1, "d": date(2026, 3, 1), "dt": datetime(2026, 3, 1, 10, 11, 12, 123456),
        "t": image["t"], "y": 2026, "name": "Zoë", "e": "b", "j": image["j"],
    }


def _binlog_insert(folder: Path, schema: str) -> dict:
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            event = json.loads(line, parse_float=Decimal)
            if event["type"] == "insert" and event["schema"] == schema:
                return event["rows"][0]["after"]
    raise AssertionError(f"no insert of {schema}.t in {folder}")


POSTGRES_COLUMNS = (
    "id integer PRIMARY KEY, big bigint, price numeric(10,2), any_number numeric, r real, dp double precision, "
    "ok boolean, d date, ts timestamp, tstz timestamptz, t time, name varchar(20), body text, j jsonb, tags int[]"
)
POSTGRES_DDL = ("id INT,\nbig BIGINT,\nprice DECIMAL(10,2),\nany_number DECIMAL(38,18),\nr FLOAT,\ndp DOUBLE,\n"
                "ok BOOLEAN,\nd DATE,\nts TIMESTAMP,\ntstz TIMESTAMP,\nt STRING,\nname STRING,\nbody STRING,\n"
                "j STRING,\ntags STRING\n")


def postgres_schema(*statements: str):
    """The shared PostgreSQL server, a new schema and an autocommit connection, after running
    ``statements`` (``{s}`` stands for the quoted schema)."""
    pg, schema = fixtures.postgres(), fixtures.unique_schema("ddl")
    conn = pg.connect()
    conn.autocommit = True
    with conn.cursor() as cur:
        for statement in (f'CREATE SCHEMA "{schema}"', *statements):
            cur.execute(statement.replace("{s}", f'"{schema}"'))
    return pg, schema, conn


def test_postgres_table_types_hold_its_shadow_values(spark, tmp_path, capsys):
    pg, schema, conn = postgres_schema(f"CREATE TABLE {{s}}.t ({POSTGRES_COLUMNS})")
    capsys.readouterr()
    table = f"{schema}.t"
    assert cli("capture", "schema-ddl", "--dsn", pg.dsn, "--table", table, "--out", str(tmp_path / "t.ddl")) == 0
    ddl = (tmp_path / "t.ddl").read_text()
    assert ddl == POSTGRES_DDL
    assert cli("capture", "shadow-ddl", "--dialect", "postgres", "--table", table, "--dsn", pg.dsn, "--apply") == 0
    with conn.cursor() as cur:
        cur.execute(f'INSERT INTO "{schema}".t VALUES (1, -5, 1234.50, 12345678901234567890.123456789, 0.5, 0.25, '
                    "true, '2026-03-01', '2026-03-01 10:11:12.5', '2026-03-01 10:11:12+02', '10:11:12', 'Zoë', "
                    "'long text', '{\"k\": [1]}', '{1,2}')")
    conn.close()
    assert cli("capture", "shadow-export", "--dsn", pg.dsn, "--landing", str(tmp_path / "landing"),
               "--source", "pg", "--purge", "on_landing") == 0
    image = _shadow_values(tmp_path / "landing" / "pg" / "shadow" / f"{schema}.t")
    typed = typed_without_loss(spark, ddl, image)
    assert typed == {
        "id": 1, "big": -5, "price": Decimal("1234.50"), "any_number": Decimal("12345678901234567890.123456789"),
        "r": 0.5, "dp": 0.25, "ok": True, "d": date(2026, 3, 1), "ts": datetime(2026, 3, 1, 10, 11, 12, 500000),
        "tstz": datetime(2026, 3, 1, 8, 11, 12), "t": image["t"], "name": "Zoë", "body": "long text",
        "j": '{"k":[1]}', "tags": "[1,2]",  # as JSON text
    }


def _shadow_values(folder: Path) -> dict:
    lines = [line for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()]
    rows = [json.loads(line, parse_float=Decimal) for line in lines]
    assert len(rows) == 1, rows
    return rows[0]["values"]


def test_a_missing_table_is_one_line(capsys):
    assert cli("capture", "schema-ddl", "--dsn", fixtures.postgres().dsn, "--table", "nowhere.t") == 2
    assert capsys.readouterr().err.strip() == "error: no table nowhere.t (or no privilege to see its columns)"


def test_every_table_of_a_schema_gets_its_file(tmp_path, capsys):
    pg, schema, conn = postgres_schema(
        "CREATE TABLE {s}.a (id bigint PRIMARY KEY, amount numeric(8,3))",
        'CREATE TABLE {s}."odd/name" (id integer PRIMARY KEY)',
        "CREATE VIEW {s}.v AS SELECT id FROM {s}.a",  # not a table: no file
    )
    conn.close()
    assert cli("capture", "schema-ddl", "--dsn", pg.dsn, "--schema", schema, "--out-dir", str(tmp_path)) == 0
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        f"{schema}.a.ddl": "id BIGINT,\namount DECIMAL(8,3)\n", f"{schema}.odd%2Fname.ddl": "id INT\n"}
    assert capsys.readouterr().err.count("wrote ") == 2


@pytest.mark.parametrize("which", [("--schema", "shop"), ("--table", "shop.a", "shop.b")])
def test_several_tables_need_a_folder(capsys, which):
    assert cli("capture", "schema-ddl", "--dsn", "postgresql://u@127.0.0.1:9/db", *which) == 2
    assert "write them with --out-dir DIR" in capsys.readouterr().err
