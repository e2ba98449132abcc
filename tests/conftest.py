"""One Spark session for the whole test run; every test gets its own lake and landing folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_lakehouse.runtime.session import get_spark


@pytest.fixture(scope="session")
def spark():
    session = get_spark("cdc-lakehouse-tests")
    yield session
    session.stop()


@pytest.fixture
def lake(tmp_path) -> Path:
    return tmp_path / "lake"


@pytest.fixture
def landing(tmp_path) -> Path:
    path = tmp_path / "landing"
    path.mkdir()
    return path
