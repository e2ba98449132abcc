"""Canonical row keys: a JSON object of the key columns, sorted by name, values as text, so a
key built from a binlog image and one written by a shadow trigger compare equal.

A key value's text is what Spark's JSON parser gives: integers and strings as written, other
numbers as the double they read as (``1.50`` -> ``1.5``). A number whose value a double does not
hold would read as a rounded double, and two keys differing only in their last digits would
become one: such a value keeps its exact digits instead (``json_text.long_fractions``).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_lakehouse.bronze.json_text import DOUBLE_DIGITS, long_fraction_members

_SPACE = "[ \\t\\n\\r]*"
# A member whose value is a number with a fraction or an exponent and more digits than a double
# always keeps. Only the rows it finds go through Python (json_text.long_fractions), which decides.
_LONG_FRACTION = (
    f'"{_SPACE}:{_SPACE}-?(?:[0-9]*\\.[0-9]*(?<=[0-9.]{{{DOUBLE_DIGITS + 2}}})|[0-9]{{{DOUBLE_DIGITS + 1},}}[eE])'
)
_TEXTS = "map<string,string>"


def canonical(key_map: Column) -> Column:
    return F.to_json(F.map_from_entries(F.array_sort(F.map_entries(key_map))))


def from_json_object(json_col: Column) -> Column:
    return canonical(image_map(json_col))


def image_map(image: Column, names: Column | None = None) -> Column:
    """A JSON object (a row image, a key) as member -> value text, where a number keeps its exact
    digits if a double would lose some. ``names`` (an array column): only these members are
    looked for (a row whose other members hold long numbers then stays out of Python); None:
    every member."""
    if names is None:
        long_member = F.lit(_LONG_FRACTION)
    else:
        quoted = F.transform(names, lambda n: F.concat(F.lit('"'), _as_regex(_json_text(n))))
        long_member = F.concat(F.lit("(?:"), F.array_join(quoted, "|"), F.lit(")" + _LONG_FRACTION))
    parsed = F.from_json(image, _TEXTS)
    exact = long_fraction_members(F.when(F.regexp(image, long_member), image))
    kept = F.map_zip_with(parsed, exact, lambda _, value, exact_value: F.coalesce(exact_value, value))
    return F.when(F.coalesce(F.size(exact), F.lit(0)) > 0, kept).otherwise(parsed)


def _json_text(name: Column) -> Column:
    """A name as JSON writes it between its quotes (``a"b`` -> ``a\\"b``)."""
    as_array = F.to_json(F.array(name))  # ["..."]
    return as_array.substr(F.lit(3), F.length(as_array) - 4)


def _as_regex(text: Column) -> Column:
    """A regex matching ``text`` literally: each character but a letter, digit or _ escaped."""
    return F.regexp_replace(text, "([^A-Za-z0-9_])", "\\\\$1")


def from_image_map(columns: Column, key_columns: Column) -> Column:
    """The key of a row image (``image_map``), given the names of the key columns
    (``primary_key``). Pass the map as a column computed before: read inside the lambda, an
    expression is evaluated again for every key column."""
    return canonical(F.map_from_arrays(key_columns, F.transform(key_columns, lambda k: columns[k])))
