"""Row images (JSON text) -> typed columns, with types read off the JSON values themselves.

Integers become BIGINT, other numbers DOUBLE, booleans BOOLEAN, strings STRING; nested objects
and arrays stay JSON text. A column seen only as NULL is STRING.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType, DataType, DecimalType, DoubleType, FloatType, IntegralType, LongType,
    StringType, StructField, StructType, _parse_datatype_string,
)


def _column_type(t: DataType) -> DataType:
    if isinstance(t, IntegralType):
        return LongType()
    if isinstance(t, (DecimalType, DoubleType, FloatType)):
        return DoubleType()
    if isinstance(t, BooleanType):
        return BooleanType()
    return StringType()


def infer_row_schema(images: DataFrame, column: str = "row") -> StructType:
    """The schema of the JSON objects in ``column``, in the column order of the first image."""
    first = images.filter(F.col(column).isNotNull()).select(F.json_object_keys(column).alias("k")).first()
    variant_schema = images.select(F.expr(f"schema_of_variant_agg(parse_json(`{column}`))")).first()[0]
    if first is None or variant_schema is None:
        return StructType([])
    ddl = variant_schema.replace("OBJECT<", "STRUCT<").replace("VOID", "STRING")
    fields = {f.name: _column_type(f.dataType) for f in _parse_datatype_string(ddl).fields}
    order = [k for k in first["k"] if k in fields] + sorted(k for k in fields if k not in first["k"])
    return StructType([StructField(name, fields[name]) for name in order])


def typed(changes: DataFrame, schema: StructType, column: str = "row") -> DataFrame:
    """The image's columns next to the change's own columns (``column`` itself is dropped)."""
    parsed = F.from_json(F.col(column), schema)
    return changes.select(*[parsed[f.name].alias(f.name) for f in schema.fields], *[c for c in changes.columns if c != column])
