"""Quoting of names and strings for generated SQL, and the names capture derives from a table.

Every name that comes from outside (schema, table, column) goes through these functions, so a
hostile name such as ``x"; DROP TABLE y; --`` stays one identifier or one string. The forms
chosen do not depend on server settings: PostgreSQL string literals use ``E'...'`` (immune to
``standard_conforming_strings``) and MariaDB strings are hex literals (immune to
``NO_BACKSLASH_ESCAPES`` and the connection character set).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

CAPTURE_SCHEMA = "cdc_capture"
_MAX_SHADOW_STEM = 40  # PostgreSQL names stop at 63 bytes, MariaDB trigger names at 64


class UnsafeName(ValueError):
    """A name that no quoting can carry (NUL), or an empty one."""


def _check(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise UnsafeName("empty name")
    if "\x00" in name:
        raise UnsafeName(f"name contains NUL: {name!r}")
    return name


def pg_ident(name: str) -> str:
    return '"' + _check(name).replace('"', '""') + '"'


def pg_literal(value: str) -> str:
    return "E'" + _check(value).replace("\\", "\\\\").replace("'", "''") + "'"


def pg_text_array(values: list[str]) -> str:
    return "ARRAY[" + ", ".join(pg_literal(v) for v in values) + "]::text[]"


def my_ident(name: str) -> str:
    return "`" + _check(name).replace("`", "``") + "`"


def my_string(value: str) -> str:
    """A utf8mb4 string written as hex: no character of the value reaches the SQL parser."""
    return "_utf8mb4 X'" + _check(value).encode("utf-8").hex() + "'"


@dataclass(frozen=True)
class TableName:
    schema: str
    table: str

    @classmethod
    def parse(cls, text: str) -> "TableName":
        """``schema.table``; either part may be double-quoted to carry dots or quotes."""
        parts = _split_qualified(text)
        if len(parts) != 2:
            raise ValueError(f"expected schema.table, got {text!r}")
        return cls(_check(parts[0]), _check(parts[1]))

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def shadow(self) -> str:
        """Shadow table name: readable, ASCII-only, unique per source table (hash suffix)."""
        stem = re.sub(r"[^a-z0-9_]+", "_", f"{self.schema}_{self.table}".lower()).strip("_")
        digest = hashlib.sha1(self.qualified.encode("utf-8")).hexdigest()[:10]
        return f"shadow_{stem[:_MAX_SHADOW_STEM]}_{digest}"


def _split_qualified(text: str) -> list[str]:
    parts, cur, i, quoted = [], [], 0, False
    while i < len(text):
        ch = text[i]
        if quoted:
            if ch == '"' and text[i + 1:i + 2] == '"':
                cur.append('"')
                i += 1
            elif ch == '"':
                quoted = False
            else:
                cur.append(ch)
        elif ch == '"':
            quoted = True
        elif ch == ".":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    if quoted:
        raise ValueError(f"unterminated quote in {text!r}")
    parts.append("".join(cur))
    return parts
