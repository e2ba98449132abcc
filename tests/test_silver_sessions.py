"""The user and role of a binlog transaction come from the latest session of its thread that
connected before the transaction began (CONTRACT §2.2). The begin's time is whole seconds, so a
session that connected within the begin's second is the transaction's."""

from __future__ import annotations

from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.silver.binlog_transactions import with_session_user

BEGIN = 1772442000  # 2026-03-02T09:00:00Z


def _sessions(spark, rows):
    return spark.createDataFrame([(1, 42, ts, u, r) for ts, u, r in rows], "server_id long, thread_id long, connected_at string, user string, role string") \
        .selectExpr("server_id", "thread_id", "to_timestamp(connected_at) AS connected_at", "user", "role")


def _users(spark, sessions):
    txns = spark.createDataFrame([(1, 42, BEGIN, 7)], "server_id long, thread_id long, begin_ts long, begin_lsn long")
    return with_session_user(txns, sessions).select("begin_lsn", "user", "role")


def test_a_session_that_connected_within_the_begins_second_is_the_transactions(spark):
    sessions = _sessions(spark, [
        ("2026-03-01 09:00:00", "old", "r0"),
        ("2026-03-02 09:00:00.4", "alice", "writer"),
        ("2026-03-02 09:00:01", "later", "r2"),
    ])
    assertDataFrameEqual(_users(spark, sessions), spark.createDataFrame([(7, "alice", "writer")], "begin_lsn long, user string, role string"))


def test_a_session_that_connected_after_the_begins_second_is_not(spark):
    sessions = _sessions(spark, [("2026-03-02 09:00:01", "later", "r2")])
    assertDataFrameEqual(_users(spark, sessions), spark.createDataFrame([(7, "unknown", "unknown")], "begin_lsn long, user string, role string"))
