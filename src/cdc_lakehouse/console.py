"""Where the command line prints its tables and progress."""

from __future__ import annotations

import sys

from rich.console import Console

PIPED_WIDTH = 200


def stdout_console() -> Console:
    return _console(stderr=False)


def stderr_console() -> Console:
    return _console(stderr=True)


def _console(stderr: bool) -> Console:
    """The terminal's width on a terminal; wide when piped (make, CI logs, a test's capture),
    where rich would otherwise cut every table to 80 columns and shorten its headers."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr) if stream.isatty() else Console(stderr=stderr, width=PIPED_WIDTH)
