"""Row images (JSON text) -> typed columns, with types read off the JSON values themselves.

Integers become BIGINT, other numbers DOUBLE, booleans BOOLEAN, strings STRING; nested objects
and arrays stay JSON text. A column seen only as NULL is STRING.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType, DataType, DecimalType, DoubleType, FloatType, IntegralType, LongType,
    StringType, StructField, StructType, _parse_datatype_string,
)

from cdc_lakehouse.bronze.json_text import exact_image_values

_PARSED, _TEXTS, _SPARE = "__image", "__image_texts", "__fallback_image"  # working columns of typed()


def _column_type(t: DataType) -> DataType:
    if isinstance(t, IntegralType):
        return LongType()
    if isinstance(t, (DecimalType, DoubleType, FloatType)):
        return DoubleType()
    if isinstance(t, BooleanType):
        return BooleanType()
    return StringType()


_RECENT = 4  # inferences remembered, for the next reader of the same rows


@dataclass(frozen=True)
class _Inferred:
    images: DataFrame
    columns: tuple
    schema: StructType


_inferred: list[_Inferred] = []


def infer_row_schema(images: DataFrame, column: str = "row", also: str | None = None) -> StructType:
    """The schema of the JSON objects in ``column``, in the column order of the first image.

    ``also`` names a second column of JSON objects (a change's key) whose values count for the
    types too, so that a value taken from it always fits its column; its fields that no image
    has come last, sorted.

    A replica's SCD1 and SCD2 flows type the same rows: each evaluates the typed view (which
    records what it read) before the runtime hands it the first reader's rows, so the second
    gets the first's schema instead of a second pass over the images."""
    for seen in _inferred:
        same_session = seen.images.sparkSession is images.sparkSession
        if same_session and seen.columns == (column, also) and seen.images.sameSemantics(images):
            return seen.schema
    schema = _inferred_schema(images, column, also)
    _inferred[:] = [*_inferred[-(_RECENT - 1):], _Inferred(images, (column, also), schema)]
    return schema


def _inferred_schema(images: DataFrame, column: str, also: str | None) -> StructType:
    # One job for both: the first image's keys and the types of every value. The keys are taken
    # before the explode: an expression beside a generator runs once per generated row.
    with_keys = images.select(F.json_object_keys(column).alias("__keys"), column, *([also] if also else []))
    objects = F.explode(F.array(column, also)) if also else F.col(column)
    found = with_keys.select("__keys", objects.alias("__json")).agg(
        F.first("__keys", ignorenulls=True).alias("keys"),
        F.expr("schema_of_variant_agg(parse_json(__json))").alias("types"),
    ).first()
    leading, variant_schema = found["keys"] or [], found["types"]
    if variant_schema is None or not variant_schema.startswith("OBJECT<"):
        return StructType([])
    ddl = variant_schema.replace("OBJECT<", "STRUCT<").replace("VOID", "STRING")
    fields = {f.name: _column_type(f.dataType) for f in _parse_datatype_string(ddl).fields}
    order = [k for k in leading if k in fields] + sorted(k for k in fields if k not in leading)
    return StructType([StructField(name, fields[name]) for name in order])


def typed(changes: DataFrame, schema: StructType, column: str = "row", fallback: str | None = None) -> DataFrame:
    """The image's columns next to the change's own columns (``column`` and ``fallback`` are
    dropped). A value the image lacks (or has as NULL) is taken from the JSON object in
    ``fallback`` when that has it. A STRING column holds a number or a nested value as the
    source wrote it (Spark's parser would read ``0.00`` as ``0.0``, a 20-digit decimal as a
    double), so it equals what Spark's JSON file reader gives a snapshot's row."""
    # Parsed in a projection of their own: read once per field in one projection, each image
    # was parsed again for every column (a 40-column table: 5x slower).
    texts = {f.name for f in schema.fields if isinstance(f.dataType, StringType)}
    structs = [F.from_json(F.col(column), schema).alias(_PARSED)]
    if texts:
        # Python reads only the images where Spark's parser would change a STRING value; the
        # others are passed as NULL (a UDF runs on every row, even inside a CASE).
        changed = F.col(column).rlike(_non_string_value_of(texts))
        structs.append(exact_image_values(F.when(changed, F.col(column))).alias(_TEXTS))
    if fallback:
        structs.append(F.from_json(F.col(fallback), schema).alias(_SPARE))
    parsed = changes.select("*", *structs)

    def value(name: str):
        field = F.col(_PARSED)[name]
        if name in texts:
            field = F.coalesce(F.try_element_at(_TEXTS, F.lit(name)), field)
        return F.coalesce(field, F.col(_SPARE)[name]) if fallback else field

    own = [c for c in changes.columns if c not in (column, fallback)]
    return parsed.select(*[value(f.name).alias(f.name) for f in schema.fields], *own)


def _non_string_value_of(names) -> str:
    """A regex finding a member of one of ``names`` whose value is a number, object or array
    (true, false and null read the same either way). It may also find such a member inside a
    nested value, which only costs the exact read; a name the source wrote with escapes for
    plain characters is not found."""
    quoted = "|".join(re.escape(json.dumps(name, ensure_ascii=False)[1:-1]) for name in sorted(names))
    return f'"(?:{quoted})"[ \\t\\n\\r]*:[ \\t\\n\\r]*[-0-9{{\\[]'
