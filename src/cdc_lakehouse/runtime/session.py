"""The Spark session the local runtime, CLI and tests share."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

LOG_CONFIG = Path(__file__).with_name("log4j2.properties")


def get_spark(app_name: str = "cdc-lakehouse") -> SparkSession:
    """A small local session: two cores, few shuffle partitions, UTC, no UI."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(os.environ.get("CDC_LAKEHOUSE_SPARK_MASTER", "local[2]"))
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
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
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
