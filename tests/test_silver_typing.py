"""Row images typed from their own JSON values (silver/typing.py), and the inferred schema a
replica's second AUTO CDC flow reuses: only for the same rows, never stale for new ones."""

from __future__ import annotations

import json

from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.silver.typing import infer_row_schema, typed


def _images(spark, *rows: dict):
    return spark.createDataFrame([(json.dumps(r),) for r in rows], "row string")


def test_types_come_from_the_values_in_the_first_images_column_order(spark):
    schema = infer_row_schema(_images(spark, {"id": 1, "name": "a"}, {"price": 2.5, "id": 2}))
    assert schema == StructType([
        StructField("id", LongType()), StructField("name", StringType()), StructField("price", DoubleType()),
    ])


def test_the_same_rows_read_again_keep_their_schema_and_new_rows_get_their_own(spark):
    first = infer_row_schema(_images(spark, {"id": 1, "qty": 3}))
    again = infer_row_schema(_images(spark, {"id": 1, "qty": 3}))  # a second reader, a new DataFrame
    widened = infer_row_schema(_images(spark, {"id": 1, "qty": 3.5, "note": "x"}))
    assert again == first == StructType([StructField("id", LongType()), StructField("qty", LongType())])
    assert widened == StructType([
        StructField("id", LongType()), StructField("qty", DoubleType()), StructField("note", StringType()),
    ])
    rows = _images(spark, {"id": 1, "qty": 3.5, "note": "x"})
    assertDataFrameEqual(typed(rows, widened), spark.createDataFrame([(1, 3.5, "x")], widened))


def test_a_string_column_takes_numbers_and_json_values_as_written(spark):
    lines = ['{"id": 1, "s": 0.00}', '{"id": 2, "s": {"k": [1.50, "a b"]}}', '{"id": 3, "s": "text \\"s\\": 5"}',
             '{"id": 4, "s": null}', '{"id": 5, "s": 12345678901234567890.123}', '{"id": 6, "t": "x", "s": true}']
    images = spark.createDataFrame([(line,) for line in lines], "row string")
    schema = StructType([StructField("id", LongType()), StructField("s", StringType())])
    assertDataFrameEqual(typed(images, schema), spark.createDataFrame(
        [(1, "0.00"), (2, '{"k": [1.50, "a b"]}'), (3, 'text "s": 5'), (4, None), (5, "12345678901234567890.123"),
         (6, "true")], schema))
