"""JSON text taken apart with every number exactly as the source wrote it.

Spark's ``from_json``, ``get_json_object`` and the variant type all re-render nested values
(``0.00`` becomes ``0.0`` or ``0``, a 20-digit decimal becomes a rounded double); only its file
reader keeps them exact, and that reader cannot give line numbers. Row images must keep what
the source sent, so landing lines are split here (bronze) and row images are taken apart here
(silver, gold), with the standard library only: the module is pickled by value into the Spark
workers and needs nothing installed there.
"""

from __future__ import annotations

import json
import sys

from pyspark import cloudpickle
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, StringType, StructField, StructType

_WS = " \t\r\n"
# Spark's text reader turns bytes that are not UTF-8 into U+FFFD. Taking such a line would store
# a value the source never had, so it is refused; a source that really holds U+FFFD is rare, and
# the reason says that too.
NOT_UTF8 = "\ufffd"
NOT_UTF8_REASON = "not UTF-8: the line has bytes that are not UTF-8 (read as U+FFFD, or U+FFFD itself)"


class _NotAnObject(ValueError):
    pass


def _reject(token: str):
    # NaN and Infinity are Python extensions, not JSON.
    raise _NotAnObject(f"{token} is not JSON")


def top_level_fields(text: str | None) -> dict[str, str] | None:
    """``{"a": 1, "b": {"c": 0.00}}`` -> ``{"a": "1", "b": '{"c": 0.00}'}``; None unless
    ``text`` is exactly one JSON object (surrounding whitespace allowed)."""
    return line_fields(text)[0]


def line_fields(text: str | None) -> tuple[dict[str, str] | None, str | None]:
    """``top_level_fields`` and, when that is None, what is wrong with the text. A member named
    twice in any object is wrong: JSON readers disagree on which one counts."""
    if text is None:
        return None, None
    if NOT_UTF8 in text:
        return None, NOT_UTF8_REASON
    # Built per call: a decoder holds a C scanner, which cannot be pickled to the workers.
    parser = json.JSONDecoder(parse_constant=_reject, object_pairs_hook=_unique_members)
    try:
        fields, end = _object(parser, text, _skip(text, 0))
    except _NotAnObject as bad:
        return None, str(bad)
    except (ValueError, RecursionError):
        return None, None
    return (fields, None) if _skip(text, end) == len(text) else (None, None)


def _unique_members(pairs: list[tuple[str, object]]) -> dict:
    found = dict(pairs)
    if len(found) != len(pairs):
        _twice(next(k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i])))
    return found


def _twice(key: str):
    raise _NotAnObject(f"member {json.encoder.encode_basestring(key)} appears twice")


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _expect(text: str, i: int, char: str) -> int:
    if i >= len(text) or text[i] != char:
        raise _NotAnObject(f"expected {char!r} at character {i}")
    return i + 1


def _object(parser, text: str, i: int) -> tuple[dict[str, str], int]:
    i = _skip(text, _expect(text, i, "{"))
    fields: dict[str, str] = {}
    if text.startswith("}", i):
        return fields, i + 1
    while True:
        key, i = json.decoder.scanstring(text, _expect(text, i, '"'))
        if key in fields:
            _twice(key)
        start = _skip(text, _expect(text, _skip(text, i), ":"))
        _, end = parser.raw_decode(text, start)
        fields[key] = text[start:end]
        i = _skip(text, end)
        if text.startswith("}", i):
            return fields, i + 1
        i = _skip(text, _expect(text, i, ","))


class _Number(str):
    """A JSON number as the source wrote it."""


def _parsed(text: str | None):
    """The JSON value of ``text`` with numbers as ``_Number``; None if it is no JSON."""
    if text is None:
        return None
    try:
        return json.loads(text, parse_int=_Number, parse_float=_Number, parse_constant=_reject)
    except (ValueError, RecursionError):
        return None


_LITERALS = {True: "true", False: "false", None: "null"}


def _nested(members: dict) -> bool:
    return any(isinstance(v, (dict, list)) for v in members.values())


def _scalar(value) -> str:
    if isinstance(value, str):
        return str(value) if isinstance(value, _Number) else json.encoder.encode_basestring(value)
    return _LITERALS[value]


def _flat_members(found: dict) -> dict[str, str]:
    """The members of a parsed object without nested values, as JSON text."""
    return {k: _scalar(v) for k, v in found.items()}


def _object_text(members: dict[str, str]) -> str:
    quote = json.encoder.encode_basestring
    return "{" + ",".join([f"{quote(k)}:{v}" for k, v in members.items()]) + "}"


def compact_members(text: str | None) -> dict[str, str] | None:
    """``{"a": 1.50, "b": {"c": [1, 2]}}`` -> ``{"a": "1.50", "b": '{"c": [1, 2]}'}``: each
    member of one JSON object as JSON text, numbers and nested values as written; None unless
    an object."""
    found = _parsed(text)
    if not isinstance(found, dict):
        return None
    if _nested(found):
        # Nested values as written, not re-rendered: a STRING column holding JSON then equals
        # what Spark's JSON file reader gives a snapshot's row, which is the source's text.
        return top_level_fields(text)
    return _flat_members(found)


def row_images(text: str | None) -> list[tuple[str | None, str | None]] | None:
    """A binlog row event's ``rows`` (``[{"before": {..}, "after": {..}}, ..]``) -> one
    (before, after) pair per row, each image a JSON object without spaces between its members,
    which are as ``compact_members`` gives them (None where absent or null); None unless
    ``text`` is an array of objects."""
    found = _parsed(text)
    if not isinstance(found, list) or not all(isinstance(row, dict) for row in found):
        return None
    raw: list[dict[str, str]] = []

    def image(n: int, side: str) -> str | None:
        value = found[n].get(side)
        if value is None:
            return None
        if isinstance(value, dict) and not _nested(value):
            return _object_text(_flat_members(value))
        if not raw:  # rare (JSON columns): the row's own text is needed
            raw.extend(_elements(text))
        members = compact_members(raw[n][side])
        return raw[n][side] if members is None else _object_text(members)

    return [(image(n, "before"), image(n, "after")) for n in range(len(found))]


def image_values(text: str | None) -> dict[str, str | None] | None:
    """A row image as column -> value text, as an auditor and a STRING column read it: strings
    decoded, numbers as written, nested values as ``compact_members`` gives them, null as None;
    None unless an object."""
    found = _parsed(text)
    if not isinstance(found, dict):
        return None
    if _nested(found):
        members = top_level_fields(text)  # as compact_members gives them, without parsing again
        return {k: json.loads(v) if v.startswith('"') else None if v == "null" else v for k, v in members.items()}
    return {k: str(v) if isinstance(v, str) else None if v is None else _LITERALS[v] for k, v in found.items()}


def _elements(text: str) -> list[dict[str, str]]:
    """The members of each object of a non-empty JSON array of objects, as source text."""
    parser = json.JSONDecoder(parse_constant=_reject)
    i = _skip(text, _expect(text, _skip(text, 0), "["))
    elements: list[dict[str, str]] = []
    while True:
        members, end = _object(parser, text, i)
        elements.append(members)
        i = _skip(text, end)
        if text.startswith("]", i):
            return elements
        i = _skip(text, _expect(text, i, ","))


# Databricks workers may not have our package on their path; the function travels with its code.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

# Arrow-optimized UDFs need pandas, which the local runtime does not install.
_LINE = StructType([StructField("fields", MapType(StringType(), StringType())), StructField("problem", StringType())])
json_fields = F.udf(line_fields, _LINE, useArrow=False)  # struct<fields, problem>
_IMAGE_PAIR = StructType([StructField("before", StringType()), StructField("after", StringType())])
exact_row_images = F.udf(row_images, ArrayType(_IMAGE_PAIR), useArrow=False)

# A dict returned by a UDF arrives as a Java hash map, in no order; entries keep the source's.
_ENTRIES = ArrayType(StructType([StructField("key", StringType()), StructField("value", StringType())]))
_member_entries = F.udf(lambda text: _entries(compact_members(text)), _ENTRIES, useArrow=False)
_value_entries = F.udf(lambda text: _entries(image_values(text)), _ENTRIES, useArrow=False)


def _entries(members: dict | None) -> list | None:
    return None if members is None else list(members.items())


def exact_members(text: Column) -> Column:
    """``compact_members`` of a column of JSON objects, as a map in the source's order."""
    return F.map_from_entries(_member_entries(text))


def exact_image_values(text: Column) -> Column:
    """``image_values`` of a column of row images, as a map in the source's order."""
    return F.map_from_entries(_value_entries(text))
