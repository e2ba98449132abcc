"""Paths as readers take them literally.

Spark and Auto Loader read a path as a Hadoop glob (``[x]`` is a character class), so a
literal one is escaped (``glob_literal``). delta-rs gives a table's files as %-encoded URIs
(``/lake/a%20b/...``, ``file:///...``), and Spark reads a string it is given as a path, taking
``%20`` for three characters of a name. The local store is on this machine, so its URIs are
decoded to paths before Spark sees them (``local_path``).
"""

from __future__ import annotations

from urllib.parse import unquote, urlparse


def local_path(uri: str) -> str:
    """``file:/a/b%20c``, ``file:///a/b c`` or ``/a/b%20c`` -> ``/a/b c``; other schemes are kept whole."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme in ("", "file") else uri


# Characters Hadoop's glob (Spark's and Auto Loader's paths) reads as a pattern; a backslash escapes them.
_GLOB_SPECIAL = "\\*?[]{}"


def glob_literal(path: str) -> str:
    """``path`` escaped so that a reader's glob matches it literally: a landing folder named
    ``land [x]`` is that folder, not ``land x``. Patterns may follow it (``shadow/*.*``)."""
    return "".join(f"\\{c}" if c in _GLOB_SPECIAL else c for c in path)
