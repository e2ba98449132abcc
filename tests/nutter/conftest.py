"""The notebooks here (``test_nutter_*.py``, "# Databricks notebook source") are Nutter test
notebooks for the workspace; pytest does not collect them as test modules. They run locally
through ``test_fixtures_on_local_lake.py``."""

from pathlib import Path

HERE = Path(__file__).resolve().parent


def is_notebook(path: Path) -> bool:
    with path.open(encoding="utf-8") as handle:
        return handle.readline().strip() == "# Databricks notebook source"


collect_ignore = [p.name for p in HERE.glob("*.py") if is_notebook(p)]
