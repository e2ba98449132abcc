"""The CLI names acceptance tests rely on: run, pipeline run, tables, sql, demo."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from cdc_lakehouse.cli import DEMO_STEPS, build_parser, main
from cdc_lakehouse.storage import LakeStore
from lake_helpers import REPO, write_jsonl


def _json_out(capsys, argv) -> object:
    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_tables_json_lists_every_layer(demo_lake, capsys):
    tables = {t["name"]: t for t in _json_out(capsys, ["tables", "--lake", str(demo_lake), "--json"])}
    assert {"bronze", "silver", "gold", "system"} <= {t["layer"] for t in tables.values()}
    assert tables["silver.shop_orders"]["rows"] == 73
    assert tables["silver.shop_pg_order_items"]["rows"] == 172
    assert set(tables["bronze.shop_binlog_events"]) == {"name", "layer", "path", "version", "rows"}


def test_sql_json_answers_from_the_lake(demo_lake, capsys):
    rows = _json_out(capsys, [
        "sql", "--lake", str(demo_lake), "--json",
        "SELECT user, role, count(*) AS changes FROM silver.shop_changes "
        "WHERE `table` = 'orders' AND key = '{\"order_id\":\"42\"}' GROUP BY user, role ORDER BY user",
    ])
    assert [(r["user"], r["role"]) for r in rows] == [
        ("alice", "app_writer"), ("bob", "app_writer"), ("carol", "support"), ("dave", "admin"),
    ]


def test_sql_keeps_a_string_that_names_a_table_as_written(demo_lake, capsys):
    """Before, the CLI rewrote ``schema.table`` text everywhere in the query, literals included."""
    rows = _json_out(capsys, ["sql", "--lake", str(demo_lake), "--json",
                              "SELECT 'silver.shop_orders' AS t, count(*) AS n FROM silver.shop_orders"])
    assert rows == [{"t": "silver.shop_orders", "n": 73}]


def test_each_demo_step_is_a_command_the_user_can_run_again(demo_lake, tmp_path):
    """``make demo`` runs DEMO_STEPS in one process and prints each as a command line."""
    commands = set()
    for step in DEMO_STEPS:
        argv = shlex.split(shlex.join([p.format(landing=tmp_path, lake=demo_lake) for p in step]))
        args = build_parser().parse_args(argv)  # exits on an argument the command does not take
        assert Path(args.lake) == demo_lake
        commands.add(args.func.__name__)
    assert commands == {"cmd_run", "cmd_reconcile", "cmd_tables", "cmd_sql", "cmd_dashboard"}


def test_rerun_of_the_demo_reads_and_writes_nothing(demo_lake_copy, spark):
    """Nothing landed since the demo's update: the rerun is decided quiet before any flow plans
    (runtime/quiet_update.py), and no table gets a new version, not even the event log or a
    view that reads the clock."""
    store = LakeStore(spark, demo_lake_copy)
    versions = {t.name: t.version for t in store.list_tables()}

    assert main(["run", "--lake", str(demo_lake_copy)]) == 0

    assert {t.name: t.version for t in store.list_tables()} == versions


def test_config_error_names_file_and_entry(tmp_path, capsys):
    bad = tmp_path / "onboarding.yml"
    bad.write_text((REPO / "conf/onboarding.yml").read_text().replace("keys: [customer_id]", "keys: []", 1))
    assert main(["run", "--config", str(bad), "--lake", str(tmp_path / "lake")]) == 2
    err = capsys.readouterr().err
    assert "onboarding.yml" in err and "data_flow_id=101" in err and "keys" in err


def test_the_default_onboarding_file_is_the_working_directory_s(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--lake", str(tmp_path / "lake")]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "no onboarding file at conf/onboarding.yml" in said and "--config FILE" in said


def test_run_lists_the_dlt_meta_keys_it_ignores(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no landing folder: the run stops after loading the file
    assert main(["run", "--config", str(REPO / "tests/data/dlt_meta/onboarding.json"), "--env", "prod"]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "warning:" in said and "bronze_table_path_prod: ignored: tables are managed by the pipeline" in said


def test_the_default_landing_folder_is_the_working_directory_s(tmp_path, monkeypatch, capsys):
    """An installed wheel has no fixtures to default to (tests/test_wheel.py)."""
    shutil.copytree(REPO / "conf", tmp_path / "conf")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--lake", str(tmp_path / "lake")]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "no landing folder at fixtures/landing" in said and "--landing DIR" in said
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize("command", [["snapshot", "reconcile"], ["housekeeping"]])
def test_the_job_steps_default_onboarding_file_is_the_working_directory_s(tmp_path, monkeypatch, capsys, command):
    """As run's: the package's location says nothing about where a wheel's user keeps it."""
    monkeypatch.chdir(tmp_path)
    argv = [*command, "--catalog", "main", "--landing", "/Volumes/main/landing"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    assert "the following arguments are required: --config" in capsys.readouterr().err
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "onboarding.yml").write_text("")
    assert build_parser().parse_args(argv).config == "conf/onboarding.yml"


def test_a_missing_schema_file_is_one_line_naming_flow_and_file(tmp_path, capsys):
    moved = tmp_path / "onboarding.yml"  # the demo's file without its conf/schemas folder
    moved.write_text((REPO / "conf/onboarding.yml").read_text())
    assert main(["run", "--config", str(moved), "--lake", str(tmp_path / "lake")]) == 2
    said = "".join(capsys.readouterr().err.split())  # the console may wrap the line
    missing = tmp_path / "schemas/shop/shop.customers.ddl"
    assert f"error:flow101(shop.customers):source_schema_path{missing}:cannotread" in said


def test_pipeline_run_on_any_folder(tmp_path, capsys):
    landing = tmp_path / "landing"
    write_jsonl(landing / "orders/1.jsonl", [{"order_id": 1, "customer": "a", "amount": 2.0, "region": "eu"}])
    (landing / "refunds").mkdir()
    lake = tmp_path / "lake"
    assert main(["pipeline", "run", "--source", str(REPO / "tests/pipelines/basic/*.py"),
                 "--lake", str(lake), "--conf", f"test.landing={landing}"]) == 0
    rows = _json_out(capsys, ["sql", "--lake", str(lake), "--json", "SELECT * FROM gold.revenue_by_region"])
    assert rows == [{"region": "eu", "revenue": 2.0, "orders": 1}]


@pytest.mark.parametrize("argv, said", [
    (["tables", "--lake", "{missing}"], "no lake at {missing}"),
    (["sql", "--lake", "{missing}", "SELECT 1"], "no lake at {missing}"),
    (["dashboard", "--lake", "{missing}", "--out", "{tmp}/d.html"], "no lake at {missing}"),
    (["run", "--landing", "{missing}", "--lake", "{tmp}/lake"], "no landing folder at {missing}"),
])
def test_a_mistyped_folder_is_an_error_that_names_it(tmp_path, capsys, argv, said):
    """Before, an empty table or an empty pipeline run (exit 0), or Spark's analysis error."""
    missing = str(tmp_path / "typo")
    fill = lambda text: text.format(missing=missing, tmp=tmp_path)  # noqa: E731
    with pytest.raises(SystemExit) as stopped:
        main([fill(a) for a in argv])
    assert stopped.value.code == 2
    assert fill(said) in capsys.readouterr().err
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize("argv, said", [
    (["pipeline", "run", "--source", "x.py", "--lake", "{tmp}/lake", "--conf", "foo"], "expected key=value, not 'foo'"),
    (["housekeeping", "--tombstone-hours", "-1", "--lake", "{tmp}", "--landing", "{tmp}"], "must be a non-negative number, not -1"),
    (["remote", "follow", "--poll-seconds", "-1"], "must be a non-negative number, not -1"),
    (["remote", "start", "--timeout-minutes", "-1"], "must be a positive number, not -1"),
    (["snapshot", "diff", "--lake", "{tmp}/typo", "--table", "t", "--snapshot", "{tmp}"], "no lake at {tmp}/typo"),
])
def test_a_bad_value_is_an_error_that_names_it(tmp_path, capsys, argv, said):
    fill = lambda text: text.format(tmp=tmp_path)  # noqa: E731
    with pytest.raises(SystemExit) as stopped:
        main([fill(a) for a in argv])
    assert stopped.value.code == 2
    assert fill(said) in capsys.readouterr().err


def test_a_dashboard_file_that_cannot_be_read_is_an_error_before_spark(demo_lake, tmp_path, capsys):
    missing = tmp_path / "none.lvdash.json"
    assert main(["dashboard", "--lake", str(demo_lake), "--out", str(tmp_path / "d.html"), "--dashboard", str(missing)]) == 2
    assert f"cannot read the dashboard file {missing}" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["snapshot", "reconcile"], ["housekeeping"]])
def test_a_missing_landing_folder_of_a_job_step_is_an_error(demo_lake, tmp_path, capsys, command):
    """Checked when the step runs (the job's Volume path must parse on any machine)."""
    missing = tmp_path / "typo"
    assert main([*command, "--lake", str(demo_lake), "--landing", str(missing)]) == 2
    assert f"no landing folder at {missing}" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["tables"], ["sql", "SELECT 1"], ["dashboard", "--out", "{tmp}/d.html"],
                                     ["snapshot", "diff", "--table", "t", "--snapshot", "{tmp}"],
                                     ["housekeeping", "--landing", "{tmp}"]])
def test_a_folder_without_tables_is_not_a_lake(tmp_path, capsys, command):
    """A mistyped path to an existing folder read as a lake with no tables: an empty listing, or
    a snapshot diff that would seed the replica (exit 0)."""
    folder = tmp_path / "not_a_lake"
    (folder / "silver").mkdir(parents=True)
    with pytest.raises(SystemExit) as stopped:
        main([*[a.format(tmp=tmp_path) for a in command], "--lake", str(folder)])
    assert stopped.value.code == 2
    assert f"{folder} is not a lake: it holds no tables" in " ".join(capsys.readouterr().err.split())


def test_a_wrong_query_is_one_error_line(demo_lake, capsys):
    """Before, Spark's analysis error with a Python traceback and the query plan (exit 1)."""
    assert main(["sql", "--lake", str(demo_lake), "SELECT * FROM gold.shop_order"]) == 2
    said = capsys.readouterr().err
    assert "error: [TABLE_OR_VIEW_NOT_FOUND] The table or view `gold`.`shop_order` cannot be found" in said
    assert "Traceback" not in said and "UnresolvedRelation" not in said and "JVM" not in said
    assert main(["sql", "--lake", str(demo_lake), "SELEC 1"]) == 2
    assert "error: [PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'" in capsys.readouterr().err


def test_sql_says_when_it_shows_fewer_rows_than_match(demo_lake, capsys):
    query = "SELECT id FROM range(3) ORDER BY id"
    assert _json_out(capsys, ["sql", "--lake", str(demo_lake), "--json", "--limit", "2", query]) == [{"id": 0}, {"id": 1}]
    assert main(["sql", "--lake", str(demo_lake), "--json", "--limit", "2", query]) == 0
    assert "note: more rows match; showing the first 2" in capsys.readouterr().err
    assert main(["sql", "--lake", str(demo_lake), "--json", "--limit", "3", query]) == 0
    assert "note" not in capsys.readouterr().err


def test_the_run_summary_says_what_expectations_did_not_failed_rows():
    """A quarantine table's rule drops every good line: "1 (1394 failed rows)" read as bad data."""
    from cdc_lakehouse.cli import expectation_outcome
    from cdc_lakehouse.runtime.expectations import ExpectationResult

    quarantine = [ExpectationResult("bronze.q", "is_bad", "drop", passed=3, failed=1394)]
    assert expectation_outcome(quarantine) == "1 rule: 1394 rows dropped"
    mixed = [ExpectationResult("t", "a", "warn", 5, 2), ExpectationResult("t", "b", "warn", 6, 1),
             ExpectationResult("t", "c", "drop", 7, 0)]
    assert expectation_outcome(mixed) == "3 rules: 3 rows warned, 0 rows dropped"
    assert expectation_outcome([]) == ""
