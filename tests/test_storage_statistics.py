"""Answers the store gives from Delta file statistics must equal Spark's pass over the rows."""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse

from pyspark.sql import functions as F



SEQUENCE = "sequence struct<position: bigint, txn: string>"


def test_column_max_from_file_statistics_equals_spark(make_store, spark, tmp_path):
    store = make_store(tmp_path / "lake")
    store.append("silver.changes", spark.createDataFrame([((7, "a"),), ((3, "b"),)], SEQUENCE))
    store.append("silver.changes", spark.createDataFrame([((5, "c"),), (None,)], SEQUENCE))
    expected = store.read("silver.changes").agg(F.max("sequence.position")).first()[0]
    assert store.column_max("silver.changes", "sequence.position") == expected == 7


def test_column_max_of_a_column_without_statistics_or_values(make_store, spark, tmp_path):
    store = make_store(tmp_path / "lake")
    store.append("silver.changes", spark.createDataFrame([(None,)], SEQUENCE))
    assert store.column_max("silver.changes", "sequence.position") is None
    store.append("silver.changes", spark.createDataFrame([((4, "x"),)], SEQUENCE))
    assert store.column_max("silver.changes", "sequence.position") == 4  # one file has no max: Spark decides


def test_size_bytes_is_the_size_of_the_files_a_read_scans(make_store, spark, tmp_path):
    store = make_store(tmp_path / "lake")
    assert store.size_bytes("silver.changes") is None  # no such table
    store.append("silver.changes", spark.createDataFrame([((7, "a"),), ((3, "b"),)], SEQUENCE))
    store.append("silver.changes", spark.createDataFrame([((5, "c"),)], SEQUENCE))
    files = [unquote(urlparse(uri).path) for uri in store.read("silver.changes").inputFiles()]
    assert store.size_bytes("silver.changes") == sum(os.path.getsize(f) for f in files)
