"""Type widening of AUTO CDC targets and key-range pruning of MERGE, on real Delta tables."""

from __future__ import annotations

from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.cdc.widening import fit_to_target
from cdc_lakehouse.storage import LakeStore, UpsertSpec


def _table(spark, store, name, rows, ddl):
    store.overwrite(name, spark.createDataFrame(rows, ddl))
    return store.read(name)


def test_bigint_column_widens_to_double_for_a_fractional_batch(spark, lake):
    store = LakeStore(spark, lake)
    _table(spark, store, "silver.t", [(1, 0)], "id long, price long")
    batch = fit_to_target(store, "silver.t", spark.createDataFrame([(1, 5.5)], "id long, price double"), {})
    assert store.read("silver.t").schema["price"].dataType.simpleString() == "double"
    assertDataFrameEqual(store.read("silver.t"), spark.createDataFrame([(1, 0.0)], "id long, price double"))
    assertDataFrameEqual(batch, spark.createDataFrame([(1, 5.5)], "id long, price double"))


def test_a_column_that_held_only_nulls_takes_the_type_of_its_first_values(spark, lake):
    store = LakeStore(spark, lake)
    _table(spark, store, "silver.t", [(1, None)], "id long, note string")
    batch = fit_to_target(store, "silver.t", spark.createDataFrame([(1, 7)], "id long, note long"), {})
    assert store.read("silver.t").schema["note"].dataType.simpleString() == "bigint"
    assertDataFrameEqual(batch, spark.createDataFrame([(1, 7)], "id long, note long"))


def test_a_batch_of_nulls_takes_the_type_of_the_column(spark, lake):
    store = LakeStore(spark, lake)
    _table(spark, store, "silver.t", [(1, 7)], "id long, note long")
    batch = fit_to_target(store, "silver.t", spark.createDataFrame([(2, None)], "id long, note string"), {})
    assert store.read("silver.t").schema["note"].dataType.simpleString() == "bigint"
    assertDataFrameEqual(batch, spark.createDataFrame([(2, None)], "id long, note long"))


def test_numbers_and_text_in_one_column_become_text(spark, lake):
    store = LakeStore(spark, lake)
    _table(spark, store, "silver.t", [(1, 7)], "id long, code long")
    batch = fit_to_target(store, "silver.t", spark.createDataFrame([(2, "A-1")], "id long, code string"), {})
    assertDataFrameEqual(store.read("silver.t"), spark.createDataFrame([(1, "7")], "id long, code string"))
    assertDataFrameEqual(batch, spark.createDataFrame([(2, "A-1")], "id long, code string"))


def test_merge_by_key_range_updates_inserts_and_deletes_with_text_keys(spark, lake):
    # Keys with quotes and a range that covers rows the batch does not touch.
    store = LakeStore(spark, lake)
    _table(spark, store, "silver.t", [("a", 1), ("b'c", 2), ("d", 3), ("z", 4)], "k string, v long")
    batch = spark.createDataFrame([("b'c", 20, False), ("c", 30, False), ("d", None, True)],
                                  "k string, v long, __del boolean")
    store.upsert("silver.t", batch, UpsertSpec(("k",), "__del"))
    expected = spark.createDataFrame([("a", 1), ("b'c", 20), ("c", 30), ("z", 4)], "k string, v long")
    assertDataFrameEqual(store.read("silver.t"), expected)
