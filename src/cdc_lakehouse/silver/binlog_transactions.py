"""Binlog events -> committed transactions (CONTRACT §2.1, §2.2).

A transaction is the events from ``begin`` to its ``commit``/``rollback`` on one server, in log
order ``(file, pos)``; a ``ddl`` outside BEGIN/COMMIT is a transaction of its own. Only the
boundary events (two per transaction) are windowed per server, so a transaction of any size
never has to sit in one task's memory; its row events find it by an equi-join.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from cdc_lakehouse.bronze import binlog_position
from cdc_lakehouse.silver import binlog_epochs, binlog_gaps, statements

# A gap that may have been a BEGIN starts a transaction (silver/binlog_gaps.py).
START_TYPES = ("begin", "ddl", binlog_gaps.GAP_START)
BOUNDARY_TYPES = ("commit", "rollback", *START_TYPES)
ROW_TYPES = ("insert", "update", "delete")
# Statuses of a transaction that is not applied yet and holds gold's commit point: no end yet
# (open), another transaction's boundary first (unterminated), a line of it in quarantine (incomplete).
HELD = ("open", "unterminated", "incomplete")


def log_position():
    """One long orders the whole log of a server, across epochs (bronze/binlog_position.py)."""
    return binlog_position.lsn_column()


def with_lsn(events: DataFrame) -> DataFrame:
    """The events with ``lsn``; events of a bronze table written before epochs are of epoch 0."""
    if "epoch" not in events.columns:
        events = events.withColumn("epoch", F.lit(None).cast("long"))
    return events.withColumn("lsn", log_position())


def distinct_events(events: DataFrame, seed: binlog_epochs.Seed | None = None) -> DataFrame:
    """A re-delivered file repeats positions; one event per (server, epoch, file, pos) is kept,
    an accepted one rather than a gap (a quarantined line whose corrected line has landed), and
    the line that starts an inferred epoch rather than its re-delivery. A position reused with
    other content, or a server's that follows another's, is no re-delivery: it is of an epoch
    inferred from the landing order (silver/binlog_epochs.py, from ``seed`` for a batch
    assembled from held state), so it has an identity, and a place in the log, of its own."""
    lsn = with_lsn(binlog_epochs.with_inferred_epochs(events, seed))
    kept_first = F.struct(binlog_gaps.is_gap(), ~F.col(binlog_epochs.RESET))
    first = F.min_by(F.struct(*lsn.columns), kept_first).alias("__event")
    return inside_transactions(lsn.groupBy("server_id", "lsn").agg(first).select("__event.*"))


def inside_transactions(events: DataFrame) -> DataFrame:
    """``events`` (with ``lsn``) with each DML statement logged as a ``ddl`` inside BEGIN ..
    COMMIT retyped ``statement`` (silver/statements.py): part of that transaction, not a
    boundary that would cut it (and hold its begin as unterminated for ever)."""
    dml = (F.col("type") == "ddl") & statements.is_dml(F.col("query"))
    boundary = F.when(F.col("type").isin(*BOUNDARY_TYPES) & ~dml, F.col("type"))
    before = Window.partitionBy("server_id").orderBy("lsn").rowsBetween(Window.unboundedPreceding, -1)
    inside = dml & F.last(boundary, ignorenulls=True).over(before).isin("begin", binlog_gaps.GAP_START)
    return events.withColumn("type", F.when(inside, F.lit(statements.INSIDE)).otherwise(F.col("type")))


def transactions(events: DataFrame, sessions: DataFrame | None) -> DataFrame:
    """Every transaction the boundary events show, with its status: ``committed``,
    ``rolled_back``, or one of ``HELD`` (not applied yet), and ``held_because`` for an incomplete one
    and for one whose server's next boundary is of a later epoch."""
    bounds = events.filter(F.col("type").isin(*BOUNDARY_TYPES))
    in_log_order = Window.partitionBy("server_id").orderBy("lsn")
    nxt = lambda c: F.lead(c).over(in_log_order)  # noqa: E731 - reads better than 4 copies
    starts = bounds.select(
        "*", nxt("type").alias("end_type"), nxt("lsn").alias("end_lsn"), nxt("ts").alias("end_ts"),
        nxt("xid").alias("end_xid"), nxt("file").alias("end_file"), nxt("pos").alias("end_pos"),
        nxt("gtid").alias("end_gtid"),
    ).filter(F.col("type").isin(*START_TYPES))
    # Landing files arrive in any order: the next boundary in the log seen so far may be the end
    # of another transaction whose events in between have not landed yet. Its GTID says so.
    other_txn = F.col("gtid").isNotNull() & F.col("end_gtid").isNotNull() & (F.col("gtid") != F.col("end_gtid"))
    # A transaction never spans epochs: positions started again, or another server's lines
    # landed before its end, and nothing can end it.
    cut = binlog_position.epoch_of(F.col("lsn")) != binlog_position.epoch_of(F.col("end_lsn"))
    other_txn = other_txn | cut
    txns = starts.select(
        "_source", "server_id", "gtid", "thread_id",
        F.when((F.col("type") != "ddl") & cut, _cut_note()).alias("__cut"),
        F.col("lsn").alias("begin_lsn"),
        F.col("ts").alias("begin_ts"),
        F.when(F.col("type") == "ddl", F.col("lsn")).otherwise(F.col("end_lsn")).alias("end_lsn"),
        F.when(F.col("type") == "ddl", "committed")
        .when(other_txn, "unterminated")
        .when(F.col("end_type") == "commit", "committed")
        .when(F.col("end_type") == "rollback", "rolled_back")
        .when(F.col("end_type").isNull(), "open")
        .otherwise("unterminated").alias("status"),
        F.when(F.col("type") == "ddl", F.col("ts")).otherwise(F.col("end_ts")).alias("commit_ts_s"),
        F.when(F.col("type") == "ddl", F.col("file")).otherwise(F.col("end_file")).alias("commit_file"),
        F.when(F.col("type") == "ddl", F.col("pos")).otherwise(F.col("end_pos")).alias("commit_pos"),
        F.col("end_xid").alias("xid"),
        F.when(F.col("type") == "ddl", F.col("query")).alias("ddl"),
        # A DML statement changes no table's definition (silver/statements.py).
        F.when((F.col("type") == "ddl") & F.col("table").isNotNull() & ~statements.is_dml(F.col("query")),
               F.concat_ws(".", "schema", "table")).alias("ddl_table"),
    )
    txns = txns.withColumn("txn_id", transaction_id()).withColumn(
        "commit_ts", F.timestamp_seconds(F.col("commit_ts_s"))
    )
    held = binlog_gaps.held_by_gaps(txns, events)  # a quarantined line inside says more: it comes first
    held = held.withColumn("held_because", F.coalesce("held_because", F.when(F.col("status") == "unterminated", F.col("__cut"))))
    return with_session_user(held.drop("__cut"), sessions)


def _cut_note() -> Column:
    """Why a transaction whose server's next boundary is of a later epoch is held (docs/binlog-epochs.md)."""
    epoch = lambda c: binlog_position.epoch_of(F.col(c)).cast("string")  # noqa: E731
    return F.concat(
        F.lit("no order can be inferred: its begin is of epoch "), epoch("lsn"), F.lit(" and the next boundary of server "),
        F.col("server_id").cast("string"), F.lit(" ("), F.col("end_type"), F.lit(" at "),
        F.concat_ws(":", "end_file", F.col("end_pos").cast("string")), F.lit(") of epoch "), epoch("end_lsn"),
        F.lit(": lines of another server (a failover, or two servers' lines interleaved) or positions that started "
              "again landed between them (docs/binlog-epochs.md)"),
    )


def transaction_id():
    """xid, else GTID, else an id derived from the commit position: the same on every re-run.
    xids, GTIDs and positions start again in a new epoch, so there the id names it (``@epoch2``);
    ids of epoch 0 are those of landing lines without epochs."""
    epoch = binlog_position.epoch_of(F.col("begin_lsn"))
    return F.concat(
        F.coalesce(
            F.concat(F.lit("xid:"), F.col("xid").cast("string")),
            F.concat(F.lit("gtid:"), F.col("gtid")),
            F.concat_ws(":", F.lit("pos"), F.col("server_id").cast("string"), F.col("commit_file"),
                        F.col("commit_pos").cast("string")),
        ),
        F.when(epoch > 0, F.concat(F.lit("@epoch"), epoch.cast("string"))).otherwise(F.lit("")),
    )


def with_session_user(txns: DataFrame, sessions: DataFrame | None) -> DataFrame:
    """The user and role of the session with the transaction's thread id that connected most
    recently before the transaction began; ``unknown`` when there is none (CONTRACT §2.2). A
    session without a role keeps its NULL role: "no role" is an answer, "unknown" is not."""
    if sessions is None:
        return txns.withColumn("user", F.lit("unknown")).withColumn("role", F.lit("unknown"))
    return who(latest_session(txns, distinct_sessions(sessions)))


# The columns latest_session adds: the session's, NULL when the transaction has none.
SESSION_COLUMNS = ("connected_at", "user", "role", "landed_at")


def distinct_sessions(sessions: DataFrame) -> DataFrame:
    """One row per session, a re-delivered line being the same session, with ``landed_at``:
    when bronze first read it (NULL for rows without provenance)."""
    landed = F.col("_ingested_at") if "_ingested_at" in sessions.columns else F.lit(None).cast("timestamp")
    return sessions.groupBy("server_id", "thread_id", "connected_at", "user", "role").agg(F.min(landed).alias("landed_at"))


def latest_session(txns: DataFrame, sessions: DataFrame) -> DataFrame:
    """``txns`` (``server_id``, ``thread_id``, ``begin_lsn``, ``begin_ts`` in seconds) with the
    ``SESSION_COLUMNS`` of their session, prefixed ``s_``. ``sessions``: ``distinct_sessions``."""
    return first_sessions(session_candidates(txns, sessions))


def session_candidates(txns: DataFrame, sessions: DataFrame) -> DataFrame:
    """Each of ``txns`` with each session of its thread that connected before it began (its
    ``s_`` columns; one row of NULLs when none did)."""
    # Joined by names of its own: ``txns`` may derive from the same sessions (an enrichment).
    s = sessions.select(F.col("server_id").alias("s_server_id"), F.col("thread_id").alias("s_thread_id"),
                        *[F.col(c).alias(f"s_{c}") for c in SESSION_COLUMNS])
    # The begin's time is whole seconds: the transaction began before the end of that second,
    # and a thread id is not reused while the server runs, so a session of that thread that
    # connected within the second connected before the begin.
    return txns.join(
        s,
        (F.col("server_id") == F.col("s_server_id")) & (F.col("thread_id") == F.col("s_thread_id"))
        & (F.col("s_connected_at") < F.timestamp_seconds(F.col("begin_ts") + 1)),
        "left",
    ).drop("s_server_id", "s_thread_id")


def latest_first() -> WindowSpec:
    """A transaction's candidate sessions, the latest connected first. Two sessions of one thread
    that connected at the same instant (a source defect) are ordered by user and role, so that
    which one landed first never decides between them (CONTRACT §4)."""
    return Window.partitionBy("server_id", "begin_lsn").orderBy(
        F.col("s_connected_at").desc_nulls_last(), F.col("s_user").asc_nulls_last(), F.col("s_role").asc_nulls_last())


def first_sessions(candidates: DataFrame) -> DataFrame:
    """The first of each transaction's ``session_candidates`` (``latest_first``)."""
    return candidates.withColumn("__r", F.row_number().over(latest_first())).filter("__r = 1").drop("__r")


def who(txns: DataFrame) -> DataFrame:
    """``latest_session``'s rows with ``user`` and ``role`` in place of the session's columns."""
    return (
        txns.withColumn("user", F.coalesce("s_user", F.lit("unknown")))
        .withColumn("role", F.when(F.col("s_user").isNull(), F.lit("unknown")).otherwise(F.col("s_role")))
        .drop(*[f"s_{c}" for c in SESSION_COLUMNS])
    )


def with_begin(events: DataFrame, starts: tuple[str, ...] = START_TYPES) -> DataFrame:
    """Each event with ``begin_lsn``, the log position of the latest event of a type in
    ``starts`` at or before it on its server: the start of the transaction it belongs to."""
    start = F.when(F.col("type").isin(*starts), F.col("lsn"))
    in_log_order = Window.partitionBy("server_id").orderBy("lsn").rowsBetween(Window.unboundedPreceding, 0)
    return events.withColumn("begin_lsn", F.max(start).over(in_log_order))


def row_events_in(events: DataFrame, txns: DataFrame) -> DataFrame:
    """Row events of the given transactions, each tagged with its transaction.

    Each row event belongs to the latest ``begin`` before it; that begin is found with a running
    maximum over the server's events, and the transaction then joins on (server, begin_lsn).
    """
    rows = with_begin(events, ("begin",)).filter(F.col("type").isin(*ROW_TYPES))
    t = txns.select("server_id", "begin_lsn", "end_lsn", "txn_id", "commit_ts", "commit_file", "commit_pos", "user", "role")
    joined = rows.join(t, ["server_id", "begin_lsn"])
    return joined.filter(F.col("lsn") < F.col("end_lsn"))
