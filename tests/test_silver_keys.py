"""Canonical row keys: one text per key value, whichever capture wrote it, and never one text
for two values."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from property_settings import examples
from cdc_lakehouse.silver import keys
from cdc_lakehouse.snapshot.compare import canonical_key


def _key_texts(spark, value: str) -> set[str]:
    """The key of a row whose key column ``k`` holds ``value`` (JSON number text), as binlog (from
    the row image and its primary key), shadow (from the key object) and snapshot (from the
    line) build it. The image also has a member ``k`` in a nested object, before the key's own."""
    image = f'{{"v": 1.0000000000000000000001, "n": {{"k": 1.0000000000000000000002}}, "k": {value}}}'
    key = f'{{"k": {value}}}'
    df = spark.createDataFrame([(image, key)], "image string, key string")
    names = F.array(F.lit("k"))
    row = df.withColumn("image_map", keys.image_map(F.col("image"))).select(
        keys.from_image_map(F.col("image_map"), names, F.col("image")),
        keys.from_json_object(F.col("key")),
        canonical_key(F.col("image"), ["k"]),
    ).first()
    return set(row)


@pytest.mark.parametrize(("value", "text"), [
    ("1.50", "1.5"), ("1e2", "100.0"), ("0.30000000000000004", "0.30000000000000004"),  # as a double reads them
    ("123456789012345678901234567890", "123456789012345678901234567890"),  # integers as written
    ("1.00000000000000000001", "1.00000000000000000001"),  # more digits than a double keeps: exact
    ("1.000000000000000000010", "1.00000000000000000001"),  # one value, one text
    ("10.0000000000000000001e-1", "1.0"),  # a spelling no database writes a DECIMAL in: as a double
    ("1.00000000000000000000", "1.0"),  # no more digits than a double keeps, once the zeros are dropped
    ("1772442000.123456", "1.772442000123456E9"),  # 16 digits a double holds: its text as before
    ("123456789012345678.12345678901234567891", "123456789012345678.12345678901234567891"),  # all 38
])
def test_every_capture_writes_one_text_per_value(spark, value, text):
    assert _key_texts(spark, value) == {f'{{"k":"{text}"}}'}


@pytest.mark.parametrize("pair", [("1.00000000000000000001", "1.00000000000000000002"),
                                  ("123456789012345678.12345678901234567891", "123456789012345678.12345678901234567892")])
def test_values_a_double_cannot_tell_apart_keep_apart(spark, pair):
    first, second = (_key_texts(spark, value) for value in pair)
    assert first.isdisjoint(second)


def test_any_key_column_name_and_a_long_string_value(spark):
    """A column name of any characters, written escaped or not (``json.dumps`` writes ``ó`` as
    ``\\u00f3``), and a key string of any length before it."""
    name = 'có.b\\E(c|d)*'  # in JSON: "c\\u00f3.b\\E(c|d)*"
    image = json.dumps({"s": "x" * 20000, name: Decimal("1.00000000000000000001")}, default=str).replace(
        '"1.00000000000000000001"', "1.00000000000000000001")
    df = spark.createDataFrame([(image,)], "image string")
    names = F.array(F.lit(name), F.lit("s"))
    row = df.withColumn("m", keys.image_map(F.col("image"))).select(
        keys.from_image_map(F.col("m"), names, F.col("image")), keys.from_json_object(F.col("image"))).first()
    assert json.loads(row[0]) == json.loads(row[1]) == {name: "1.00000000000000000001", "s": "x" * 20000}


def _spellings(value: Decimal) -> list[str]:
    """JSON numbers in plain notation with a fraction and at most 38 digits (as databases write
    DECIMAL values) that all spell ``value``."""
    plain = format(value, "f")
    plain = plain if "." in plain else plain + ".0"
    return [s for s in (plain, plain + "0", plain + "000") if _decimal_digits(s) <= 38]


def _decimal_digits(number: str) -> int:
    whole, fraction = number.lstrip("-").split(".")
    return len(whole.lstrip("0") + fraction)


@settings(max_examples=examples(15))
@given(st.lists(st.builds(lambda digits, scale, sign: sign * Decimal(digits).scaleb(-scale),
                          st.one_of(st.integers(1, 10**6), st.integers(1, 10**37 - 1)),
                          st.integers(0, 30), st.sampled_from([1, -1])),
                min_size=1, max_size=12, unique=True))
def test_a_key_value_has_one_text_and_two_values_never_share_one(spark, values):
    """Whatever its spelling and however many digits it has: the property behind the examples
    above, against the values themselves as the model."""
    spelled = [(str(v), s) for v in values for s in _spellings(v)]
    df = spark.createDataFrame(spelled, "value string, number string")
    found = df.select("value", keys.from_json_object(F.concat(F.lit('{"k": '), "number", F.lit("}"))).alias("key"))
    texts = {}
    for row in found.collect():
        texts.setdefault(row["value"], set()).add(row["key"])
    assert all(len(t) == 1 for t in texts.values()), texts
    assert len({t.pop() for t in texts.values()}) == len(values)
