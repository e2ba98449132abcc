"""The top-level fields of a JSON object line, each as its exact source text.

Spark's ``from_json``, ``get_json_object`` and the variant type all re-render nested values
(``0.00`` becomes ``0.0`` or ``0``, a 20-digit decimal becomes a rounded double); only its file
reader keeps them exact, and that reader cannot give line numbers. Row images must keep what
the source sent, so lines are split here, with the standard library only: the module is
pickled by value into the Spark workers and needs nothing installed there.
"""

from __future__ import annotations

import json
import sys

from pyspark import cloudpickle
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StringType

_WS = " \t\r\n"


class _NotAnObject(ValueError):
    pass


def _reject(token: str):
    # NaN and Infinity are Python extensions, not JSON.
    raise _NotAnObject(f"not JSON: {token}")


def top_level_fields(text: str | None) -> dict[str, str] | None:
    """``{"a": 1, "b": {"c": 0.00}}`` -> ``{"a": "1", "b": '{"c": 0.00}'}``; None unless
    ``text`` is exactly one JSON object (surrounding whitespace allowed)."""
    if text is None:
        return None
    # Built per call: a decoder holds a C scanner, which cannot be pickled to the workers.
    parser = json.JSONDecoder(parse_constant=_reject)
    try:
        fields, end = _object(parser, text, _skip(text, 0))
    except (ValueError, RecursionError):
        return None
    return fields if _skip(text, end) == len(text) else None


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _expect(text: str, i: int, char: str) -> int:
    if i >= len(text) or text[i] != char:
        raise _NotAnObject(f"expected {char!r} at {i}")
    return i + 1


def _object(parser, text: str, i: int) -> tuple[dict[str, str], int]:
    i = _skip(text, _expect(text, i, "{"))
    fields: dict[str, str] = {}
    if text.startswith("}", i):
        return fields, i + 1
    while True:
        key, i = json.decoder.scanstring(text, _expect(text, i, '"'))
        start = _skip(text, _expect(text, _skip(text, i), ":"))
        _, end = parser.raw_decode(text, start)
        fields[key] = text[start:end]
        i = _skip(text, end)
        if text.startswith("}", i):
            return fields, i + 1
        i = _skip(text, _expect(text, i, ","))


# Databricks workers may not have our package on their path; the function travels with its code.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

# Arrow-optimized UDFs need pandas, which the local runtime does not install.
json_fields = F.udf(top_level_fields, MapType(StringType(), StringType()), useArrow=False)
