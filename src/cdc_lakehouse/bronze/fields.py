"""Typed bronze columns from the fields of a JSON line, with what did not fit set aside.

Scalars are typed by Spark's JSON parser; objects and arrays keep their exact source text
(``json_text``); timestamps must be ISO-8601 with a zone, so their meaning never depends on the
session time zone. A field present with a value that does not fit its type is *bad*; bad and
unknown fields go to ``_rescued_data`` (JSON text), as Auto Loader's rescued data column does,
so bronze never fails on them and loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.bronze.json_text import json_fields

ISO_TIMESTAMP = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$"
JSON_TEXT = {"object": "{", "array": "["}
_TEXTS, _RESCUED = "__field_texts", "__rescued_entries"  # working columns of parse_fields


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # a Spark type (string, long, boolean, array<string>), timestamp, object or array

    @property
    def parse_type(self) -> str:
        return "string" if self.type in ("timestamp", *JSON_TEXT) else self.type


def parse_fields(lines: DataFrame, fields: tuple[Field, ...], extra_bad: dict[str, Callable[[], Column]]) -> DataFrame:
    """Adds ``_fields`` (raw text by name; NULL if the line is not one JSON object, and then
    ``_json_problem`` may say why), a typed
    column per field, ``_bad_fields`` and ``_rescued_data``. ``extra_bad`` holds conditions for
    fields whose value is bad in ways their type does not show."""
    parsed = lines.select("*", json_fields("_raw").alias("__line")).select(
        "*", F.col("__line.fields").alias("_fields"), F.col("__line.problem").alias("_json_problem")).drop("__line")
    if not fields:
        return parsed.select("*", F.array().cast("array<string>").alias("_bad_fields"))
    schema = ", ".join(f"`{f.name}` {f.parse_type}" for f in fields)
    # Each field's text is looked up once: a map lookup scans the keys, and the checks below
    # read every text several times (Spark keeps a projection apart when merging it would
    # evaluate its expressions again).
    texts = F.struct(*[F.try_element_at("_fields", F.lit(f.name)).alias(f.name) for f in fields])
    parsed = parsed.select("*", F.from_json("_raw", schema).alias("_parsed"), texts.alias(_TEXTS))
    # A line that is not one JSON object has no fields, even where Spark's parser finds some (it
    # takes the last of two members of one name, and reads bytes that are not UTF-8 as U+FFFD).
    whole = F.col("_fields").isNotNull()
    typed = parsed.select("*", *[F.when(whole, _typed(f)).alias(f.name) for f in fields])
    bad = [F.when(_is_bad(f) | extra_bad.get(f.name, _never)(), F.lit(f.name)) for f in fields]
    flagged = typed.withColumn("_bad_fields", F.array_compact(F.array(*bad)))
    rescued = flagged.withColumn(_RESCUED, _rescued_entries([f.name for f in fields]))
    return rescued.withColumn("_rescued_data", _rescued_json()).drop("_parsed", _TEXTS, _RESCUED)


def _never() -> Column:
    return F.lit(False)


def raw(name: str) -> Column:
    """The field's source text; NULL when absent."""
    return F.col(f"{_TEXTS}.`{name}`")


def utc_timestamp(text: Column) -> Column:
    return F.when(text.rlike(ISO_TIMESTAMP), F.try_to_timestamp(text))


def _typed(field: Field) -> Column:
    if field.type in JSON_TEXT:
        return F.when(raw(field.name).startswith(JSON_TEXT[field.type]), raw(field.name))
    value = F.col(f"_parsed.`{field.name}`")
    return utc_timestamp(value) if field.type == "timestamp" else value


def _is_bad(field: Field) -> Column:
    present = raw(field.name).isNotNull() & (raw(field.name) != "null")
    wrong = F.col(f"`{field.name}`").isNull()
    if field.type == "string":
        wrong = wrong | raw(field.name).startswith("{") | raw(field.name).startswith("[")
    return F.coalesce(present & wrong, F.lit(False))


def _rescued_entries(known: list[str]) -> Column:
    """The unknown and bad fields, as map entries (NULL or empty when none)."""
    known_sql = ", ".join(f"'{name}'" for name in known)
    entries = F.expr(f"map_entries(map_filter(_fields, (k, v) -> NOT k IN ({known_sql}) OR array_contains(_bad_fields, k)))")
    # Nearly every line has only known, good fields: counting them spares filtering its map.
    known_present = sum((F.when(raw(name).isNotNull(), 1).otherwise(0) for name in known), F.lit(0))
    return F.when((F.size("_fields") != known_present) | (F.size("_bad_fields") > 0), entries)


def _rescued_json() -> Column:
    """The rescued entries as one JSON object of their source text; NULL when none."""
    member = "concat(regexp_extract(to_json(array(e.key)), '^.(.*).$', 1), ':', e.value)"
    return F.expr(
        f"CASE WHEN size({_RESCUED}) > 0 THEN concat('{{', array_join(transform({_RESCUED}, e -> {member}), ','), '}}') END"
    )
