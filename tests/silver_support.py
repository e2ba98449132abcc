"""Helpers for pipeline-level tests: run the project pipeline, compare replicas with the
source state the fixtures generator computed independently."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.runtime.runner import run_pipeline
from cdc_lakehouse.storage import LakeStore
from bench.harness import GOLD_WITHOUT_HEALTH, sources  # noqa: F401 (GOLD_WITHOUT_HEALTH: for the tests that import it here)
from lake_helpers import REPO, demo_flows

PROJECT_SOURCES = [str(REPO / "src" / layer / "**" / "*.py") for layer in ("bronze", "silver", "gold")]
FIXTURES = REPO / "fixtures"
TABLES = ("customers", "products", "orders", "order_items")


def onboarding_for(tmp_path: Path, sources: set[str], tables: set[str] | None = None) -> Path:
    """The demo onboarding file restricted to some sources, and to some ``tables`` when given
    (smaller, faster pipelines)."""
    flows = [f for f in demo_flows() if f["cdc_lakehouse"]["source"] in sources
             and (tables is None or f["source_details"]["source_table"] in tables)]
    path = tmp_path / "onboarding.yml"
    path.write_text(yaml.safe_dump(flows))
    return path


def run_project(spark, landing: Path, lake: Path, onboarding: Path, layers=("bronze", "silver", "gold")):
    """One pipeline update; tests that check bronze and silver only leave gold out (faster).
    A layer may also be one file of it (``GOLD_WITHOUT_HEALTH``)."""
    return run_pipeline(
        spark, sources(layers), lake,
        {"cdc_lakehouse.landing_path": str(landing), "cdc_lakehouse.onboarding_file": str(onboarding)},
    )


def expected_rows(source: str, table: str) -> list[dict]:
    path = FIXTURES / "expected" / source / f"shop.{table}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def expected_frame(spark, source: str, table: str, schema):
    """The expected rows as a DataFrame of ``schema`` (a replica's), read from their JSON the way
    the replica reads its images."""
    lines = spark.createDataFrame([(json.dumps(r),) for r in expected_rows(source, table)], "line string")
    return lines.select(F.from_json("line", schema).alias("r")).select("r.*")


def assert_replica_equals_source(spark, lake: Path, source: str, table: str, hashed: tuple[str, ...] = ()) -> None:
    """``hashed`` columns are compared with the SHA-256 of the source value (column filters)."""
    replica = LakeStore(spark, lake).read(f"silver.{source}_{table}")
    expected = expected_frame(spark, source, table, replica.schema)
    for column in hashed:
        expected = expected.withColumn(column, F.sha2(F.col(column), 256))
    assertDataFrameEqual(replica, expected.select(*replica.columns))
