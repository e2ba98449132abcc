"""Batches reach delta-rs either collected or staged in Arrow files by Spark's tasks; both
routes give the same rows, types and (nullable) schema, and the staged files are removed. A
batch Spark refuses to collect (result-size limit) is staged instead, and staging folders a
killed process left behind are removed by the next staging."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.storage import DeltaRsStore
from cdc_lakehouse.storage.arrow_handoff import STAGE_PREFIX, arrow_batch
from cdc_lakehouse.storage.base import UpsertSpec

ALWAYS_STAGE = -1


def _varied(spark):
    return spark.sql(
        """SELECT id, CAST(id AS STRING) AS s, TIMESTAMP'2026-03-02 08:50:00' + make_interval(0, 0, 0, 0, 0, 0, id) AS t,
                  array(id, id + 1) AS a, map('k', CAST(id AS STRING)) AS m, named_struct('x', id) AS st,
                  CAST(id / 3 AS DECIMAL(10, 2)) AS d, IF(id % 2 = 0, NULL, 'odd') AS n
           FROM range(0, 25000, 1, 3)"""
    )


def _stages_left() -> set[str]:
    """This process's staging folders: another process on the machine stages and cleans its own."""
    return {p.name for p in Path(tempfile.gettempdir()).glob(f"{STAGE_PREFIX}{os.getpid()}-*")}


def test_staged_and_collected_batches_are_the_same_arrow(spark):
    df = _varied(spark)
    before = _stages_left()
    with arrow_batch(df) as collected, arrow_batch(df, ALWAYS_STAGE) as staged:
        assert isinstance(staged.data, pa.RecordBatchReader)
        assert staged.num_rows == collected.num_rows == 25000
        staged_table = staged.table()
        assert staged_table.schema == collected.table().schema
        assert all(f.nullable for f in staged_table.schema)
        assert staged_table.sort_by("id").equals(collected.table().sort_by("id"))
    assert _stages_left() == before


def test_an_empty_staged_batch_keeps_its_schema(spark):
    df = _varied(spark).limit(0)
    with arrow_batch(df, ALWAYS_STAGE) as staged:
        assert staged.num_rows == 0
        assert staged.table().schema.names == df.columns


def _landed(spark, path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return spark.read.schema("id long, name string, qty long").json(str(path))


def test_a_store_writes_and_merges_staged_batches(spark, tmp_path):
    """A store that stages every batch read from files: append, overwrite and MERGE give the
    tables the collected route gives."""
    staged = DeltaRsStore(spark, tmp_path / "staged", stage_above_bytes=0)
    collected = DeltaRsStore(spark, tmp_path / "collected")
    first = _landed(spark, tmp_path / "first.jsonl", [{"id": i, "name": f"n{i}", "qty": i} for i in range(100)])
    second = _landed(spark, tmp_path / "second.jsonl", [{"id": i, "name": None, "qty": 0} for i in range(90, 120)])
    spec = UpsertSpec(keys=("id",))
    for store in (staged, collected):
        assert store.append("s.log", first) == 100
        store.overwrite("s.latest", first)
        store.upsert("s.replica", first, spec)
        assert store.upsert("s.replica", second, spec) == 30
    for table in ("s.log", "s.latest", "s.replica"):
        assertDataFrameEqual(staged.read(table), collected.read(table))
    assert staged.read("s.replica").count() == 120


@contextmanager
def result_limit(spark, limit: str):
    """Spark's result-size limit lowered for the block: it is read from the live SparkConf when
    a job starts, so the shared session keeps working with its own limit afterwards."""
    conf = spark.sparkContext._jsc.sc().conf()
    previous = conf.get("spark.driver.maxResultSize")
    conf.set("spark.driver.maxResultSize", limit)
    try:
        yield
    finally:
        conf.set("spark.driver.maxResultSize", previous)


def test_a_batch_larger_than_the_result_limit_is_staged_instead_of_failing(spark):
    df = spark.range(0, 300_000, 1, 2).selectExpr("id", "repeat(CAST(id AS STRING), 8) AS s")
    with result_limit(spark, "1m"):
        with arrow_batch(df) as batch:
            assert isinstance(batch.data, pa.RecordBatchReader)  # the collect was refused: staged
            table = batch.table()
    assert table.num_rows == batch.num_rows == 300_000
    assert table.sort_by("id").equals(arrow_batch_collected(df).sort_by("id"))


def arrow_batch_collected(df) -> pa.Table:
    with arrow_batch(df) as batch:
        assert isinstance(batch.data, pa.Table)
        return batch.data


def test_a_cached_batch_is_sized_by_the_files_it_read(spark, tmp_path):
    """A landing view kept for its second reader is a cached frame; its input files still
    decide that it is staged, so a large one is not first collected until Spark refuses it."""
    df = _landed(spark, tmp_path / "lines.jsonl", [{"id": i, "name": f"n{i}", "qty": i} for i in range(1000)]).persist()
    try:
        with arrow_batch(df, stage_above_bytes=1000) as batch:
            assert isinstance(batch.data, pa.RecordBatchReader)
            assert batch.num_rows == 1000
        with arrow_batch(df.join(spark.range(5), "id")) as small:
            assert isinstance(small.data, pa.Table)  # under the default threshold: collected
    finally:
        df.unpersist()


def test_staging_removes_what_a_killed_process_left(spark):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    left = Path(tempfile.mkdtemp(prefix=f"{STAGE_PREFIX}{gone.pid}-"))
    (left / "part.arrow").write_bytes(b"x")
    with arrow_batch(spark.range(3), ALWAYS_STAGE) as staged:
        assert staged.num_rows == 3
    assert not left.exists()
