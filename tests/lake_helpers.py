"""Paths and small file helpers shared by the tests (a plain module: ``conftest`` names clash
between test folders)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DEMO_ONBOARDING = REPO / "conf" / "onboarding.yml"


def demo_flows() -> list[dict]:
    """The demo onboarding's flows as raw mappings, their schema files made absolute so that
    the flows can be written to an onboarding file anywhere."""
    flows = yaml.safe_load(DEMO_ONBOARDING.read_text())
    for flow in flows:
        details = flow["source_details"]
        if details.get("source_schema_path"):
            details["source_schema_path"] = str(DEMO_ONBOARDING.parent / details["source_schema_path"])
    return flows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
