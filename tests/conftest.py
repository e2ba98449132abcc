"""One Spark session for the whole test run; every test gets its own lake and landing folders,
except that the README demo lake (``cdc-lakehouse run`` on ``fixtures/``) is built once and
shared read-only: tests that write to it take ``demo_lake_copy``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cdc_lakehouse.runtime.session import get_spark
from cdc_lakehouse.storage import ENGINES, DeltaRsStore, DeltaSparkStore


# pytester runs a pytest inside a test (the suite's own timeout is tested so); spark_timeout
# cancels the Spark jobs of a test that pytest-timeout stopped.
pytest_plugins = ["pytester", "spark_timeout"]

import property_settings  # noqa: E402,F401 (loads the Hypothesis profile before any test module)
from tiny_data import TINY_DATA  # noqa: E402


@pytest.fixture(scope="session")
def spark():
    session = get_spark("cdc-lakehouse-tests")
    for key, value in TINY_DATA.items():
        session.conf.set(key, value)
    yield session
    session.stop()


@pytest.fixture(params=ENGINES)
def make_store(request, spark):
    """A store of each engine that remains: the store's behavioural tests run against every one."""
    engine = {"delta-spark": DeltaSparkStore, "delta-rs": DeltaRsStore}[request.param]
    return lambda lake, **options: engine(spark, lake, **options)


@pytest.fixture(scope="session")
def held_lake(spark, tmp_path_factory):
    """The lake of tests/held_steps.py, shared by the tests of held state and of gold's commit point."""
    import held_steps

    return held_steps.build(spark, tmp_path_factory.mktemp("held"))


@pytest.fixture
def lake(tmp_path) -> Path:
    return tmp_path / "lake"


@pytest.fixture
def landing(tmp_path) -> Path:
    path = tmp_path / "landing"
    path.mkdir()
    return path


@pytest.fixture(scope="session")
def demo_lake(spark, tmp_path_factory) -> Path:
    """The lake ``make demo`` builds in its first update (its snapshot step corrects nothing):
    every layer, every source of conf/onboarding.yml, run by the CLI on fixtures/landing.
    Read-only: several test modules share it."""
    from cdc_lakehouse.cli import main

    lake = tmp_path_factory.mktemp("demo") / "lake"
    assert main(["run", "--lake", str(lake)]) == 0
    return lake


@pytest.fixture
def demo_lake_copy(demo_lake, tmp_path) -> Path:
    """A private copy of the demo lake, for tests that run the pipeline on it again."""
    return Path(shutil.copytree(demo_lake, tmp_path / "demo_lake"))
