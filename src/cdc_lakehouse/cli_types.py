"""Argument types of the command line. Checked when the arguments are parsed, before Spark
starts or a server is called: a mistyped value is an error that names it (exit 2), not an empty
result or a traceback.

Only the standard library: the command line registers its commands on capture hosts too,
where Spark is not installed."""

from __future__ import annotations

import argparse
from pathlib import Path


def lake_dir(value: str) -> str:
    """A lake that must exist already (to list, query, render or compare with it)."""
    if not Path(value).is_dir():
        raise argparse.ArgumentTypeError(f"no lake at {value} (`cdc-lakehouse run --lake {value}` makes one)")
    if not is_lake(Path(value)):
        raise argparse.ArgumentTypeError(not_a_lake(value))
    return value


def is_lake(path: Path) -> bool:
    """A folder holding at least one table (``<schema>/<table>/_delta_log``): a mistyped path to
    an existing folder would otherwise read as a lake with no tables."""
    return any(path.glob("*/*/_delta_log"))


def not_a_lake(value: str) -> str:
    return f"{value} is not a lake: it holds no tables (`cdc-lakehouse run --lake {value}` makes one)"


def landing_dir(value: str) -> str:
    if not Path(value).is_dir():
        raise argparse.ArgumentTypeError(missing_landing(value))
    return value


def missing_landing(value: str) -> str:
    return f"no landing folder at {value}"


def positive_int(text: str) -> int:
    return _at_least(int, text, zero_allowed=False)


def positive_float(text: str) -> float:
    return _at_least(float, text, zero_allowed=False)


def non_negative_float(text: str) -> float:
    return _at_least(float, text, zero_allowed=True)


def _at_least(kind, text: str, zero_allowed: bool):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value != value or value < 0 or (value == 0 and not zero_allowed):  # value != value: NaN
        raise argparse.ArgumentTypeError(f"must be a {'non-negative' if zero_allowed else 'positive'} number, not {text}")
    return value


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, not {text!r}")
    return key, value
