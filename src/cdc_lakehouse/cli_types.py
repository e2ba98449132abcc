"""Argument types for the folders a command reads. Checked when the arguments are parsed, before
Spark starts: a mistyped path is an error that names it (exit 2), not an empty result.

Only the standard library: the command line registers its commands on capture hosts too,
where Spark is not installed."""

from __future__ import annotations

import argparse
from pathlib import Path


def lake_dir(value: str) -> str:
    """A lake that must exist already (to list, query or render it)."""
    if not Path(value).is_dir():
        raise argparse.ArgumentTypeError(f"no lake at {value} (`cdc-lakehouse run --lake {value}` makes one)")
    return value


def landing_dir(value: str) -> str:
    if not Path(value).is_dir():
        raise argparse.ArgumentTypeError(f"no landing folder at {value}")
    return value
