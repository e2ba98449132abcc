"""The Spark session the local runtime, CLI and tests share."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
# Where `make install` puts delta-spark's jars (jars/pom.xml): inside the venv, so a venv made
# again has its own, and nothing is downloaded when a session starts.
DELTA_JARS = Path(sys.prefix) / "share" / "cdc-lakehouse" / "delta-jars"


def delta_jars(folder: Path | None = None) -> list[Path]:
    """The jars of delta-spark and its own dependencies; a clear error when not installed."""
    folder = Path(os.environ.get("CDC_LAKEHOUSE_DELTA_JARS", folder or DELTA_JARS))
    jars = sorted(folder.glob("*.jar"))
    if not any(j.name.startswith("delta-spark_") for j in jars):
        raise RuntimeError(f"delta-spark's jars are not installed in {folder}: run `make install` "
                           "(it fetches them from Maven Central with mvn, once)")
    return jars


def with_delta(builder: SparkSession.Builder, jars: list[Path]) -> SparkSession.Builder:
    """What ``configure_spark_with_delta_pip`` sets, from installed jars instead of
    ``spark.jars.packages`` (which resolves and downloads them when the session starts)."""
    return (
        builder.config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        # Pipeline files carry Databricks' table properties (delta.targetFileSize, ...), which
        # open-source Delta does not know: kept on the table, as Databricks keeps them.
        .config("spark.databricks.delta.allowArbitraryProperties.enabled", "true")
        # A table's state is rebuilt from its log by a Spark job with 50 partitions by default,
        # sized for large tables on a cluster; a local table's log is a few files.
        .config("spark.databricks.delta.snapshotPartitions", "2")
        # A checkpoint every 100 commits of a table this session creates, not every 10: writing
        # one costs 6 Spark jobs (1-2 s), and rebuilding a table's state, which delta-spark does
        # at every write with an app transaction, reads 98 small commit files as fast as a
        # checkpoint and 8 (0.45-0.5 s either way: docs/storage.md, "The cost of a commit").
        .config("spark.databricks.delta.properties.defaults.checkpointInterval", "100")
        # VACUUM lists a table's files in as many tasks as this (default 10,000 tasks, minutes
        # on two cores); Spark's own partition discovery of many paths uses it too.
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "4")
    )


@functools.cache
def _warehouse() -> str:
    """A folder of this process for Spark's session catalog, removed at exit. Its default,
    ``./spark-warehouse``, would be made in whatever folder the CLI runs in when Delta first
    touches the catalog; the lake's tables are external (runtime/catalog.py), so nothing but
    empty schema folders lands here."""
    folder = tempfile.mkdtemp(prefix="cdc-lakehouse-warehouse-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def get_spark(app_name: str = "cdc-lakehouse") -> SparkSession:
    """A small local session: two cores, few shuffle partitions, UTC, no UI."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(os.environ.get("CDC_LAKEHOUSE_SPARK_MASTER", "local[2]"))
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", _warehouse())
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.driver.memory", os.environ.get("CDC_LAKEHOUSE_DRIVER_MEMORY", "4g"))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # Each pipeline update runs the same few hundred query shapes; with Spark's default of 100
        # cached generated classes, a process that runs several updates (tests, benchmarks, a
        # long-lived runner) compiled about 300 again per update, each then JIT-compiled from
        # scratch (the 10M snapshot benchmark's repeated step: 37.0 s against 40.5 s).
        .config("spark.sql.codegen.cache.maxEntries", "2000")
        # Past this a batch is staged in files instead of collected (storage/arrow_handoff.py):
        # a larger collect can exhaust the driver heap and hang rather than fail.
        .config("spark.driver.maxResultSize", "512m")
        # PySpark otherwise walks the Python stack and makes three JVM calls on every column
        # function (F.col, F.when, ...) to name the line in error messages: a pipeline update
        # builds tens of thousands of them (a 100-change update: 53 s with it, 38 s without).
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        # Passed to the driver JVM at launch (PySpark hands the builder's settings to spark-submit).
        # The throughput collector: batch jobs on two cores gain from it what G1 spends on short
        # pauses (the 10M snapshot benchmark's incremental step: 53.5 s against 58.9 s, mean of 4).
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()} -XX:+UseParallelGC")
    )
    spark = with_delta(builder, delta_jars()).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
