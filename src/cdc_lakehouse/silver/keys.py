"""Canonical row keys: a JSON object of the key columns, sorted by name, values as text, so a
key built from a binlog image and one written by a shadow trigger compare equal.

A key value's text is what Spark's JSON parser gives: integers and strings as written, other
numbers as the double they read as (``1.50`` -> ``1.5``). A number with more significant digits
than a double keeps would read as a rounded double, and two keys differing only in their last
digits would become one: such a value keeps its exact digits instead (``long_fractions``).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_lakehouse.bronze.json_text import DOUBLE_DIGITS, long_fraction_members

_SPACE = "[ \\t\\n\\r]*"
# A member whose value is a number with a fraction or an exponent and more digits than a double
# keeps. Only the rows it finds go through Python (json_text.long_fractions), which decides.
_LONG_FRACTION = (
    f"{_SPACE}:{_SPACE}-?(?:[0-9]*\\.[0-9]*(?<=[0-9.]{{{DOUBLE_DIGITS + 2}}})|[0-9]{{{DOUBLE_DIGITS + 1},}}[eE])"
)
_ANY_NAME = '"(?:[^"\\\\]|\\\\.)*"'
_TEXTS = "map<string,string>"


def canonical(key_map: Column) -> Column:
    return F.to_json(F.map_from_entries(F.array_sort(F.map_entries(key_map))))


def from_json_object(json_col: Column) -> Column:
    return canonical(image_map(json_col))


def image_map(image: Column, names: Column | None = None) -> Column:
    """A JSON object (a row image, a key) as member -> value text. The members ``names`` (an
    array column; None: every member) keep their exact digits where a double would round them."""
    if names is None:
        long_member = F.lit(_ANY_NAME + _LONG_FRACTION)
    else:
        # \\Q..\\E: a column name is matched as it is, whatever characters it has.
        quoted = F.transform(names, lambda n: F.concat(F.lit('"\\Q'), n, F.lit('\\E"')))
        long_member = F.concat(F.lit("(?:"), F.array_join(quoted, "|"), F.lit(")" + _LONG_FRACTION))
    exact = F.coalesce(
        long_fraction_members(F.when(F.regexp(image, long_member), image)), F.create_map().cast(_TEXTS)
    )
    return F.map_zip_with(F.from_json(image, _TEXTS), exact, lambda _, parsed, kept: F.coalesce(kept, parsed))


def from_image_map(columns: Column, key_columns: Column) -> Column:
    """The key of a row image (``image_map``), given the names of the key columns
    (``primary_key``). Pass the map as a column computed before: read inside the lambda, an
    expression is evaluated again for every key column."""
    return canonical(F.map_from_arrays(key_columns, F.transform(key_columns, lambda k: columns[k])))
