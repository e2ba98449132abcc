"""One Spark session for the whole test run; every test gets its own lake and landing folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdc_lakehouse.runtime.session import get_spark

REPO = Path(__file__).resolve().parents[1]


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


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
