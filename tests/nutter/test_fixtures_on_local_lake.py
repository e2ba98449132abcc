"""The Nutter fixtures of this folder, run locally: the same classes a user runs in the workspace
with ``nutter run``, here against the demo lake (``cdc-lakehouse run`` on ``fixtures/``, built once per test run), so
they are never stale. The bundle's pipeline configuration resolves to exactly that run's.

Each notebook is imported as a module (its workspace-only last cell is skipped: no ``dbutils``),
each ``NutterFixture`` subclass in it is given a ``LocalLake`` and ``execute_tests()`` runs it
with the real Nutter runtime (``nutter==0.1.35``).
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path

import pytest
from pyspark.sql import functions as F

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))  # nutter_lake, as the notebooks import it in the workspace

from nutter_lake import LocalLake  # noqa: E402


def is_notebook(path: Path) -> bool:
    with path.open(encoding="utf-8") as handle:
        return handle.readline().strip() == "# Databricks notebook source"


NOTEBOOKS = sorted(p for p in HERE.glob("test_*.py") if is_notebook(p))
LOCAL_VALUES = {"onboarding_file": str(REPO / "conf" / "onboarding.yml"), "onboarding_env": "dev"}
# The bundle's landing volume holds what fixtures/landing holds locally.
LOCAL_LANDING = str(REPO / "fixtures" / "landing")


def pipeline_configuration() -> dict[str, str]:
    """The configuration keys resources/cdc_lakehouse.pipeline.yml passes, made local: ${var.*}
    from LOCAL_VALUES, each layer's schema resource named as a production deploy with the default
    variables names it (bronze, silver, gold: the local lake's schemas), the landing volume."""
    import re

    import yaml

    spec = yaml.safe_load((REPO / "resources" / "cdc_lakehouse.pipeline.yml").read_text(encoding="utf-8"))
    configuration = spec["resources"]["pipelines"]["cdc_lakehouse"]["configuration"]

    def local(value: str) -> str:
        value = re.sub(r"\$\{resources\.schemas\.(\w+)\.name\}", lambda m: m.group(1), value)
        return re.sub(r"\$\{var\.(\w+)\}", lambda m: LOCAL_VALUES[m.group(1)], value)

    local_configuration = {key: local(str(value)) for key, value in configuration.items() if key != "cdc_lakehouse.landing_path"}
    return {"cdc_lakehouse.landing_path": LOCAL_LANDING, **local_configuration}

SOURCES = {"binlog_sources": ["shop"], "shadow_sources": ["shop_pg"]}


def nutter():
    try:
        from runtime.nutterfixture import NutterFixture
    except ImportError as exc:  # a missing dev dependency, not a skipped test
        pytest.fail(f"the Nutter runtime is needed: pip install nutter==0.1.35 (dev extra) ({exc})")
    return NutterFixture


def fixtures_in(notebook: Path) -> list[type]:
    base = nutter()
    spec = importlib.util.spec_from_file_location(f"nutter_notebook_{notebook.stem}", notebook)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [c for c in vars(module).values()
            if inspect.isclass(c) and issubclass(c, base) and c is not base and c.__module__ == module.__name__]


@pytest.fixture(scope="module")
def local_lake(spark, demo_lake) -> LocalLake:
    return LocalLake(spark, demo_lake)


def test_the_bundle_configuration_is_the_demo_run_configuration() -> None:
    """So the demo lake is the lake the deployed pipeline builds from the same landing files."""
    from cdc_lakehouse.cli import build_parser

    demo = build_parser().parse_args(["run"])
    assert pipeline_configuration() == {
        "cdc_lakehouse.landing_path": str(Path(demo.landing).resolve()),
        "cdc_lakehouse.onboarding_file": str(Path(demo.config).resolve()),
        "cdc_lakehouse.env": demo.env,
        # the CLI's defaults, PipelineSettings', and the bundle's schema resources in prod
        "cdc_lakehouse.bronze_schema": "bronze", "cdc_lakehouse.silver_schema": "silver",
        "cdc_lakehouse.gold_schema": "gold",
    }


def run_fixture(cls: type, lake) -> object:
    parameters = inspect.signature(cls.__init__).parameters
    sources = {k: v for k, v in SOURCES.items() if k in parameters or any(
        p.kind is p.VAR_KEYWORD for p in parameters.values())}
    return cls(lake, **sources).execute_tests()


def test_every_notebook_is_a_nutter_test_notebook() -> None:
    assert NOTEBOOKS, "no Nutter notebooks in tests/nutter"
    for notebook in NOTEBOOKS:
        text = notebook.read_text(encoding="utf-8")
        assert notebook.name.startswith("test_"), "nutter runs notebooks named test_* (or *_test)"
        assert "from runtime.nutterfixture import NutterFixture" in text
        assert "result.exit(dbutils)" in text, f"{notebook.name}: the workspace run must report to nutter"
        assert fixtures_in(notebook), f"{notebook.name}: no NutterFixture subclass"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_fixture_passes_on_the_local_lake(notebook: Path, local_lake) -> None:
    for cls in fixtures_in(notebook):
        result = run_fixture(cls, local_lake)
        assert result.test_results.test_cases > 0, f"{cls.__name__} has no test case"
        assert result.test_results.passed(), result.to_string()


# ---------------------------------------------------------------- the fixtures do bite


class TamperedLake:
    """The local lake with one table replaced: what a fixture must catch."""

    def __init__(self, lake, **replacements):
        self.lake, self.replacements = lake, replacements

    def table(self, name):
        replace = self.replacements.get(name.replace(".", "__"))
        return replace(self.lake.table(name)) if replace else self.lake.table(name)

    def flow_progress(self):
        replace = self.replacements.get("flow_progress")
        return replace(self.lake.flow_progress()) if replace else self.lake.flow_progress()


def failures(notebook: str, lake) -> dict[str, str]:
    (cls,) = fixtures_in(HERE / notebook)
    results = run_fixture(cls, lake).test_results.results
    return {r.test_name: str(r.exception) for r in results if not r.passed}


def test_gold_fixture_catches_a_count_that_disagrees_with_bronze(local_lake) -> None:
    lake = TamperedLake(local_lake, gold__landing_summary=lambda df: df.withColumn(
        "rows", F.when(F.col("bronze_table") == "bronze.shop_sessions", F.col("rows") + 1).otherwise(F.col("rows"))))
    found = failures("test_nutter_gold.py", lake)
    assert list(found) == ["landing_summary"] and "disagree" in found["landing_summary"]
    assert "bronze.shop_sessions" in found["landing_summary"]


def test_bronze_fixture_catches_untraceable_rows(local_lake) -> None:
    lake = TamperedLake(local_lake, bronze__shop_sessions=lambda df: df.withColumn(
        "_source_file", F.when(F.col("thread_id") % 2 == 0, F.lit(None)).otherwise(F.col("_source_file"))))
    found = failures("test_nutter_bronze.py", lake)
    assert list(found) == ["sessions"] and "untraceable" in found["sessions"]


def test_event_log_fixture_catches_a_failed_flow(local_lake) -> None:
    lake = TamperedLake(local_lake, flow_progress=lambda df: df.withColumn(
        "status", F.when(F.col("flow") == "bronze.shop_binlog_events", F.lit("FAILED")).otherwise(F.col("status"))))
    found = failures("test_nutter_event_log.py", lake)
    assert list(found) == ["latest_update"] and "bronze.shop_binlog_events" in found["latest_update"]


def test_gold_audit_fixture_catches_a_replica_ahead_of_its_audit(local_lake) -> None:
    lake = TamperedLake(local_lake, gold__shop_orders=lambda df: df.unionByName(df.limit(1)))
    found = failures("test_nutter_gold_audit.py", lake)
    assert list(found) == ["replicas_at_the_watermark"] and "gold.shop_orders" in found["replicas_at_the_watermark"]
