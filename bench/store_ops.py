"""The cost of one store operation (issue 66): seconds, Spark jobs and Delta commits of each
``TableStore`` operation on 100 rows, on each engine, beside the plain delta-spark call that
writes the same rows (``df.write``, ``DeltaTable.merge``) as its floor, all in one Spark session.

Operations, each repeated ``--repeat`` times on one table (a checkpoint, every 100th commit of a
table the session creates, falls inside the runs when ``--repeat`` passes it; the median hides
it, the mean and the largest show it):

- ``append``: 100 rows with a ``Commit`` (a new batch version each time);
- ``append_redelivered``: the same batch again: the store must see it is in and write nothing;
- ``merge``: 100 rows (half matched, half new) MERGEd by key into a 200k-row table (which the
  store, since the table is under 8 MB, writes again instead: ``storage/small_rewrite.py``);
- ``merge_by_delta``: the same by Delta's MERGE (a store that never writes the table again, as
  for a table over 8 MB);
- ``overwrite``: the table replaced by 100 rows;
- ``replace_where``: one of ten partitions' rows replaced by 100 rows (a partitioned table: by
  Delta's writer; an unpartitioned one under 8 MB is written again instead);
- ``read_appended``: the rows one append added, read as the streaming source reads them (counted).

The floor runs the same Delta operation without the store: no app transaction lookup, no
commit hook, no metrics read back.
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.incremental import last_job_id
from cdc_lakehouse.storage import Commit, DeltaSparkStore, UpsertSpec

ROWS = 100
LARGE = 200_000
PARTS = 10
OPERATIONS = ("append", "append_redelivered", "merge", "merge_by_delta", "overwrite", "replace_where", "read_appended")
STORES = ("delta-spark", "delta-rs", "plain")


def rows(spark: SparkSession, start: int, count: int = ROWS, part: int | None = None) -> DataFrame:
    """``count`` rows with keys from ``start``: a key, a partition, a text and a number."""
    part_col = F.col("id") % PARTS if part is None else F.lit(part)
    return spark.range(start, start + count).select(
        F.col("id").alias("k"), part_col.cast("int").alias("part"),
        F.concat(F.lit("v"), F.col("id").cast("string")).alias("text"), (F.col("id") * 1.5).alias("amount"))


class Meter:
    """Seconds, Spark jobs and Delta commits of each call, per operation."""

    def __init__(self, spark: SparkSession, version: Callable[[str], int | None]):
        self.spark, self.version = spark, version
        self.samples: dict[str, list[tuple[float, int, int]]] = {}

    def measure(self, operation: str, table: str, call: Callable[[], object]) -> None:
        before_version, before_job = _version(self.version(table)), last_job_id(self.spark)
        t0 = time.perf_counter()
        call()
        took = time.perf_counter() - t0
        jobs = last_job_id(self.spark) - before_job  # before asking the version: plain's history() is a job
        commits = _version(self.version(table)) - before_version
        self.samples.setdefault(operation, []).append((took, jobs, commits))

    def summary(self) -> dict[str, dict]:
        out = {}
        for operation, samples in self.samples.items():
            seconds = [s for s, _, _ in samples]
            jobs = [j for _, j, _ in samples]
            out[operation] = {"median_s": round(statistics.median(seconds), 3), "mean_s": round(statistics.mean(seconds), 3),
                              "max_s": round(max(seconds), 3), "median_jobs": statistics.median(jobs),
                              "mean_jobs": round(statistics.mean(jobs), 2), "max_jobs": max(jobs),
                              "commits": round(statistics.mean(c for _, _, c in samples), 2), "calls": len(samples)}
        return out


def _version(version: int | None) -> int:
    return -1 if version is None else version


def store_of(spark: SparkSession, engine: str, lake: Path):
    if engine == "delta-rs":
        from cdc_lakehouse.storage import DeltaRsStore

        return DeltaRsStore(spark, lake)
    return DeltaSparkStore(spark, lake)


def run_store(spark: SparkSession, engine: str, lake: Path, repeat: int, large: int = LARGE) -> dict:
    """Every operation through the engine's ``TableStore``."""
    store = store_of(spark, engine, lake)
    by_delta = DeltaSparkStore(spark, lake, rewrite_bytes=0) if engine == "delta-spark" else store
    meter = Meter(spark, store.version)
    store.upsert("bench.large", rows(spark, 0, large), UpsertSpec(keys=("k",)))
    store.upsert("bench.large_by_delta", rows(spark, 0, large), UpsertSpec(keys=("k",)))
    store.append("bench.parts", rows(spark, 0, large // 20), partition_by=["part"])
    versions = []
    for i in range(repeat):
        batch, commit = rows(spark, i * ROWS), Commit("bench-append", i)
        meter.measure("append", "bench.appended", lambda: store.append("bench.appended", batch, commit))
        versions.append(store.version("bench.appended"))
        meter.measure("append_redelivered", "bench.appended", lambda: store.append("bench.appended", batch, commit))
        changes = rows(spark, large - ROWS // 2 + i * ROWS)
        meter.measure("merge", "bench.large",
                      lambda: store.upsert("bench.large", changes, UpsertSpec(keys=("k",)), Commit("bench-merge", i)))
        meter.measure("merge_by_delta", "bench.large_by_delta", lambda: by_delta.upsert(
            "bench.large_by_delta", changes, UpsertSpec(keys=("k",)), Commit("bench-merge", i)))
        meter.measure("overwrite", "bench.overwritten",
                      lambda: store.overwrite("bench.overwritten", batch, Commit("bench-overwrite", i)))
        part = rows(spark, large + i * ROWS, part=i % PARTS)
        meter.measure("replace_where", "bench.parts",
                      lambda: store.replace_where("bench.parts", part, {"part": [i % PARTS]}, Commit("bench-replace", i)))
    for after, up_to in zip([None, *versions], versions):
        meter.measure("read_appended", "bench.appended", lambda: store.read_appended("bench.appended", after, up_to)[0].count())
    return meter.summary()


def run_plain(spark: SparkSession, lake: Path, repeat: int, large: int = LARGE) -> dict:
    """The same Delta operations as plain delta-spark calls: the floor of each."""
    from delta.tables import DeltaTable

    def path(name: str) -> str:
        return str(lake / name)

    def version(name: str) -> int | None:
        if not (lake / name / "_delta_log").is_dir():
            return None
        return DeltaTable.forPath(spark, path(name)).history(1).collect()[0].version

    meter = Meter(spark, version)
    for table in ("large", "large_by_delta"):
        rows(spark, 0, large).write.format("delta").save(path(table))
    rows(spark, 0, large // 20).write.format("delta").partitionBy("part").save(path("parts"))
    for i in range(repeat):
        batch = rows(spark, i * ROWS)
        meter.measure("append", "appended", lambda: batch.write.format("delta").mode("append").save(path("appended")))
        changes = rows(spark, large - ROWS // 2 + i * ROWS)
        for operation, table in (("merge", "large"), ("merge_by_delta", "large_by_delta")):  # one floor for both
            merge = (DeltaTable.forPath(spark, path(table)).alias("t").merge(changes.alias("s"), "t.k = s.k")
                     .whenMatchedUpdateAll().whenNotMatchedInsertAll())
            meter.measure(operation, table, merge.execute)
        meter.measure("overwrite", "overwritten", lambda: batch.write.format("delta").mode("overwrite").save(path("overwritten")))
        part = rows(spark, large + i * ROWS, part=i % PARTS)
        meter.measure("replace_where", "parts", lambda: part.write.format("delta").mode("overwrite")
                      .option("replaceWhere", f"part = {i % PARTS}").save(path("parts")))
    for _ in range(repeat):  # the first append's 100 rows: the table as of its version 0
        meter.measure("read_appended", "appended",
                      lambda: spark.read.format("delta").option("versionAsOf", 0).load(path("appended")).count())
    return meter.summary()


def run(spark: SparkSession, work: Path, repeat: int, stores: tuple[str, ...] = STORES, large: int = LARGE) -> dict:
    result: dict = {"rows": ROWS, "large_rows": large, "repeat": repeat, "stores": {}}
    for name in stores:
        lake = work / "store-ops" / name
        shutil.rmtree(lake, ignore_errors=True)
        lake.mkdir(parents=True)
        t0 = time.perf_counter()
        result["stores"][name] = (run_plain(spark, lake, repeat, large) if name == "plain"
                                  else run_store(spark, name, lake, repeat, large))
        print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)
    result["ratios"] = ratios(result["stores"])
    result["ok"] = True
    return result


def ratios(stores: dict[str, dict]) -> dict[str, float]:
    """Each engine's median seconds per operation over the plain call's (the targets' measure)."""
    plain = stores.get("plain", {})
    out = {}
    for engine in ("delta-spark", "delta-rs"):
        for operation, numbers in stores.get(engine, {}).items():
            floor = plain.get(operation, {}).get("median_s")
            if floor:
                out[f"{engine}/{operation}"] = round(numbers["median_s"] / floor, 2)
    return out
