"""Canonical row keys: a JSON object of the key columns, sorted by name, values as text, so a
key built from a binlog image and one written by a shadow trigger compare equal."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def canonical(key_map: Column) -> Column:
    return F.to_json(F.map_from_entries(F.array_sort(F.map_entries(key_map))))


def from_json_object(json_col: Column) -> Column:
    return canonical(F.from_json(json_col, "map<string,string>"))


def image_map(image: Column) -> Column:
    """A full row image (JSON text) as column -> value text."""
    return F.from_json(image, "map<string,string>")


def from_image_map(columns: Column, key_columns: Column) -> Column:
    """The key of a row image (``image_map``), given the names of the key columns
    (``primary_key``). Pass the map as a column computed before: read inside the lambda, an
    expression is evaluated again for every key column."""
    return canonical(F.map_from_arrays(key_columns, F.transform(key_columns, lambda k: columns[k])))
