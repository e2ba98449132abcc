"""Durable JSON state of a capture tool (its checkpoint or journal), replaced atomically."""

from __future__ import annotations

import json
from pathlib import Path

from cdc_lakehouse.contract.publication import publish, write_temp

STATE_FOLDER = ".capture"  # hidden: pipeline readers skip names starting with "."


def default_state_dir(source_root: Path) -> Path:
    return source_root / STATE_FOLDER


def load(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def save(path: Path, state: dict) -> None:
    publish(write_temp(path.parent, [json.dumps(state, sort_keys=True)]), path)
