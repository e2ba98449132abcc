"""Canonical row keys: a JSON object of the key columns, sorted by name, values as text, so a
key built from a binlog image and one written by a shadow trigger compare equal.

A key value is Spark's JSON reading of it: a whole number exactly, any other number as a
double (``1.50`` -> ``1.5``). Where that double loses digits the source wrote (a
DECIMAL(38,20) key), the key takes the number's own digits from the JSON text instead
(plain notation, trailing zeros of the fraction dropped). Only keys with a value read as a
double are looked at again, by JVM expressions that ``CASE`` evaluates lazily: a Python
function would be handed every row (a 10M-row snapshot seed took 220 s instead of 178 s)."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

_DOUBLE_START = list("-0123456789")
_NUMBER_TOKEN = r"\s*:\s*(-?[0-9][0-9.eE+-]*)"


def canonical(key_map: Column, json_text: Column) -> Column:
    """The key's JSON, from ``key_map`` as ``from_json`` read it from ``json_text``."""
    # A double's text always has a ".": most keys have none, and one look clears them.
    return _let(key_map, lambda m: _let(_sorted_json(m), lambda text: F.when(
        F.instr(text, ".") > 0, _sorted_json(exact_values(m, json_text))).otherwise(text)))


def _sorted_json(key_map: Column) -> Column:
    return F.to_json(F.map_from_entries(F.array_sort(F.map_entries(key_map))))


def from_json_object(json_col: Column) -> Column:
    return canonical(F.from_json(json_col, "map<string,string>"), json_col)


def image_map(image: Column) -> Column:
    """A full row image (JSON text) as column -> value text."""
    return F.from_json(image, "map<string,string>")


def from_image_map(columns: Column, key_columns: Column, image: Column) -> Column:
    """The key of a row image (``image``, read as ``columns`` by ``image_map``), given the names
    of the key columns (``primary_key``). Pass the map as a column computed before: read inside
    the lambda, an expression is evaluated again for every key column."""
    key_map = F.map_from_arrays(key_columns, F.transform(key_columns, lambda k: columns[k]))
    return canonical(key_map, image)


def exact_values(key_map: Column, json_text: Column) -> Column:
    """``key_map`` (values as ``from_json`` reads them from ``json_text``) with each number that
    a double rounded given its digits as written."""
    return F.transform_values(key_map, lambda name, value: _exact(name, value, json_text))


def _let(value: Column, body) -> Column:
    """``body(value)`` with ``value`` computed once: an expression named twice is built, planned
    and evaluated twice, and these are planned again at every streamed micro-batch."""
    return F.transform(F.array(value), body)[0]


def _exact(name: Column, value: Column, json_text: Column) -> Column:
    like_double = value.substr(1, 1).isin(*_DOUBLE_START) & (F.instr(value, ".") > 0)
    # the Python API takes only a literal pattern
    token = F.call_function("regexp_extract", json_text, _token_pattern(name), F.lit(1))

    def exact(t: Column) -> Column:
        rounded = (
            (t != "") & (_digits(t) != _digits(value))
            # the token of another value of the same name (in a nested object) is not this one
            & (t.try_cast("double") == value.try_cast("double"))
        )
        return F.when(rounded, _plain_decimal(t)).otherwise(value)

    return F.when(like_double, _let(token, exact)).otherwise(value)


def _token_pattern(name: Column) -> Column:
    """A Java regex for ``"name": <number>``, the name as JSON writes it, quoted by \\Q..\\E."""
    as_json = F.to_json(F.array(name))  # ["name"], escaped as JSON escapes it
    quoted = F.replace(as_json.substr(F.lit(2), F.length(as_json) - 2), F.lit(r"\E"), F.lit(r"\E\\E\Q"))
    return F.concat(F.lit(r"\Q"), quoted, F.lit(r"\E" + _NUMBER_TOKEN))


def _digits(number: Column) -> Column:
    """The significant digits of a number's text: ``1.2345E-7`` and ``0.00000012345`` -> 12345."""
    return F.regexp_replace(F.regexp_replace(number, r"[eE].*$|[-.]", ""), r"^0+|0+$", "")


def _plain_decimal(number: Column) -> Column:
    """A JSON number's value as plain decimal text, whatever its spelling: ``10.50e-1`` and
    ``1.050`` -> ``1.05``."""
    def part(n: int) -> Column:
        return F.regexp_extract(number, r"^(-?)([0-9]*)\.?([0-9]*)(?:[eE]([+-]?[0-9]+))?$", n)

    whole = part(2)
    parsed = F.struct(part(1).alias("sign"), F.concat(whole, part(3)).alias("digits"),
                      (F.length(whole) + F.coalesce(part(4).try_cast("int"), F.lit(0))).alias("point"))
    return _let(parsed, _placed_point)


def _placed_point(p: Column) -> Column:
    """``p.digits`` with the decimal point after ``p.point`` of them, in plain notation."""
    digits, point, size = p["digits"], p["point"], F.length(p["digits"])
    text = (
        F.when(point <= 0, F.concat(F.lit("0."), F.repeat(F.lit("0"), -point), digits))
        .when(point >= size, F.concat(digits, F.repeat(F.lit("0"), point - size)))
        .otherwise(F.concat(digits.substr(F.lit(1), point), F.lit("."), digits.substr(point + 1, size)))
    )
    text = F.regexp_replace(text, r"^0+(?=[0-9])", "")
    return F.concat(p["sign"], F.regexp_replace(F.regexp_replace(text, r"(\.[0-9]*[1-9])0+$", "$1"), r"\.0+$", ""))
