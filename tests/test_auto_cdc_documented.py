"""AUTO CDC under the local runtime reproduces Databricks' documented worked examples."""

from __future__ import annotations

from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.runtime.runner import run_pipeline
from cdc_lakehouse.storage import LakeStore
from lake_helpers import REPO, write_jsonl

PIPELINE = str(REPO / "tests/pipelines/cdc_example/*.py")

DOC_CHANGES = [
    (124, "Raul", "Oaxaca", "INSERT", 1),
    (123, "Isabel", "Monterrey", "INSERT", 1),
    (125, "Mercedes", "Tijuana", "INSERT", 2),
    (126, "Lily", "Cancun", "INSERT", 2),
    (123, None, None, "DELETE", 6),
    (125, "Mercedes", "Guadalajara", "UPDATE", 6),
    (125, "Mercedes", "Mexicali", "UPDATE", 5),
    (123, "Isabel", "Chihuahua", "UPDATE", 5),
]
COLUMNS = ["userId", "name", "city", "operation", "sequenceNum"]


def _rows(changes):
    return [dict(zip(COLUMNS, c)) for c in changes]


def _run(spark, landing, lake):
    return run_pipeline(spark, [PIPELINE], lake, {"test.landing": str(landing)})


def test_documented_example_scd1_and_scd2(spark, landing, lake):
    write_jsonl(landing / "batch-1.jsonl", _rows(DOC_CHANGES))
    _run(spark, landing, lake)
    store = LakeStore(spark, lake)

    expected_scd1 = spark.createDataFrame(
        [(124, "Raul", "Oaxaca"), (125, "Mercedes", "Guadalajara"), (126, "Lily", "Cancun")],
        "userId int, name string, city string",
    )
    assertDataFrameEqual(store.read("default.target_scd1"), expected_scd1)

    expected_scd2 = spark.createDataFrame(
        [
            (123, "Isabel", "Monterrey", 1, 5),
            (123, "Isabel", "Chihuahua", 5, 6),
            (124, "Raul", "Oaxaca", 1, None),
            (125, "Mercedes", "Tijuana", 2, 5),
            (125, "Mercedes", "Mexicali", 5, 6),
            (125, "Mercedes", "Guadalajara", 6, None),
            (126, "Lily", "Cancun", 2, None),
        ],
        "userId int, name string, city string, __START_AT int, __END_AT int",
    )
    assertDataFrameEqual(store.read("default.target_scd2"), expected_scd2)

    expected_partial = spark.createDataFrame(
        [
            (123, "Isabel", "Chihuahua", 1, 6),
            (124, "Raul", "Oaxaca", 1, None),
            (125, "Mercedes", "Guadalajara", 2, None),
            (126, "Lily", "Cancun", 2, None),
        ],
        "userId int, name string, city string, __START_AT int, __END_AT int",
    )
    assertDataFrameEqual(store.read("default.target_scd2_partial"), expected_partial)


def test_documented_truncate_example(spark, landing, lake):
    """Second batch of the documented SCD1 example: a TRUNCATE at 3 empties the table, later
    changes apply on top."""
    write_jsonl(landing / "batch-1.jsonl", _rows(DOC_CHANGES))
    _run(spark, landing, lake)
    write_jsonl(
        landing / "batch-2.jsonl",
        _rows([(None, None, None, "TRUNCATE", 7), (126, "Lily", "Guanajuato", "UPDATE", 8), (127, "Kai", "Queretaro", "INSERT", 8)]),
    )
    _run(spark, landing, lake)
    store = LakeStore(spark, lake)
    assertDataFrameEqual(
        store.read("default.target_scd1"),
        spark.createDataFrame([(126, "Lily", "Guanajuato"), (127, "Kai", "Queretaro")], "userId int, name string, city string"),
    )


def test_out_of_order_batches_give_the_same_tables(spark, tmp_path):
    """The same changes delivered in two runs, newest first, end where one in-order run ends."""
    in_order_lake, reversed_lake = tmp_path / "a", tmp_path / "b"
    land_a, land_b = tmp_path / "la", tmp_path / "lb"
    write_jsonl(land_a / "all.jsonl", _rows(DOC_CHANGES))
    _run(spark, land_a, in_order_lake)
    late_first = sorted(DOC_CHANGES, key=lambda c: -c[4])
    write_jsonl(land_b / "1.jsonl", _rows(late_first[:4]))
    _run(spark, land_b, reversed_lake)
    write_jsonl(land_b / "2.jsonl", _rows(late_first[4:]))
    _run(spark, land_b, reversed_lake)
    a, b = LakeStore(spark, in_order_lake), LakeStore(spark, reversed_lake)
    for table in ("default.target_scd1", "default.target_scd2", "default.target_scd2_partial"):
        assertDataFrameEqual(b.read(table), a.read(table))


def test_a_late_change_to_an_untracked_column_does_not_undo_a_newer_one(spark, tmp_path):
    """The partial history leaves city untracked: city changes in place at 3, then the change at
    2 arrives. The current version keeps the city of 3, as the SCD1 target does."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.jsonl", _rows([(1, "Ana", "X", "INSERT", 1), (1, "Ana", "Z", "UPDATE", 3)]))
    _run(spark, landing, lake)
    write_jsonl(landing / "2.jsonl", _rows([(1, "Ana", "Y", "UPDATE", 2)]))
    _run(spark, landing, lake)
    store = LakeStore(spark, lake)
    expected = spark.createDataFrame([(1, "Ana", "Z", 1, None)], "userId int, name string, city string, __START_AT int, __END_AT int")
    assertDataFrameEqual(store.read("default.target_scd2_partial"), expected)
    assertDataFrameEqual(store.read("default.target_scd1"), expected.select("userId", "name", "city"))
