"""Helpers the capture tests share: live servers and unique schema names."""

from __future__ import annotations

import itertools

from . import servers

_counter = itertools.count(1)


def postgres():
    return servers.shared("postgres")


def mariadb():
    return servers.shared("mariadb")


def unique_schema(prefix: str) -> str:
    """Servers live for the whole test run; every test works in a schema of its own."""
    return f"{prefix}_{next(_counter)}"
