"""The suite cannot hang: a test whose Spark job never ends fails, with the stacks of where it
hung, and the tests after it run in the same Spark session (pytest-timeout in pyproject.toml,
made to stop Spark jobs by tests/spark_timeout.py)."""

from __future__ import annotations

STUCK = '''
import time

from pyspark.sql import SparkSession


def test_stuck():
    spark = SparkSession.getActiveSession()
    spark.sparkContext.parallelize([1], 1).map(lambda x: time.sleep(600) or x).count()


def test_after():
    assert SparkSession.getActiveSession().range(3).count() == 3
'''


def test_a_stuck_spark_job_fails_its_test_and_the_run_goes_on(spark, pytester):
    pytester.makepyfile(test_stuck=STUCK)
    result = pytester.runpytest_inprocess("-p", "spark_timeout", "--timeout=5", "-p", "no:cacheprovider")

    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*Timeout (>5.0s)*Spark jobs*", "*Stack of MainThread*",
                                 '*test_stuck.py", line 8, in test_stuck*',
                                 "FAILED test_stuck.py::test_stuck - Timeout (>5.0s)*"])
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []
