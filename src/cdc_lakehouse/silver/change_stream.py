"""The silver change stream: one row per net change of one row in one committed transaction.

Both capture kinds produce this shape; replicas, audit and health read only it.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.silver import arrivals, binlog_epochs, binlog_held
from cdc_lakehouse.silver import binlog_transactions as bt
from cdc_lakehouse.silver import schema_changes, shadow_changes, shadow_held, statements, truncates
from cdc_lakehouse.silver.binlog_changes import TXN_COLUMNS, net_changes
from cdc_lakehouse.silver.net_change import changed_columns


def to_change_stream(net: DataFrame, origin: str, sequence) -> DataFrame:
    return net.select(
        F.col("_source").alias("source"),
        F.col("schema"),
        F.col("table"),
        F.when(~F.col("op").isin(truncates.TRUNCATE, schema_changes.ALTER), F.col("key")).alias("key"),  # no row
        F.col("op"),
        F.col("row"),
        F.col("before"),
        F.when(F.col("op") == "UPDATE", changed_columns(F.col("before"), F.col("row")))
        .when(F.col("op") == "INSERT", changed_columns(F.lit(None).cast("string"), F.col("row")))
        .when(F.col("op") == "DELETE", changed_columns(F.col("row"), F.lit(None).cast("string")))
        .alias("changed_columns"),
        F.col("anomalies"),
        F.col("op_count"),
        F.col("txn_id"),
        F.col("commit_ts"),
        sequence.alias("sequence"),
        F.col("user"),
        F.col("role"),
        F.lit(origin).alias("origin"),
    )


def binlog_sequence():
    return F.struct(F.col("end_lsn").alias("position"), F.col("txn_id").alias("txn"))


def binlog_change_batch(new_events: DataFrame, all_events: DataFrame, sessions: DataFrame | None) -> DataFrame:
    """Net changes of every committed transaction that any new event belongs to.

    A transaction is emitted once all of it is there (begin .. commit), in whichever run that
    happens; an open one is held. Re-emitting an already applied transaction is harmless: its
    changes carry the same sequence, which AUTO CDC does not apply twice. Where the runtime
    keeps flow state, the transactions are assembled from the new events and the held ones
    (binlog_held.py), not from all of ``all_events``.
    """
    if new_events.isStreaming:
        return _streamed_binlog_changes(new_events, all_events, sessions)
    events, txns = binlog_held.assemble(new_events, all_events, sessions)
    committed = txns.filter(F.col("status") == "committed")
    emitted = committed.join(binlog_held.touched(new_events, events), ["server_id", "begin_lsn"], "left_semi")
    net = binlog_net_changes(events, emitted).unionByName(binlog_epochs.reset_rows(events, new_events))
    return to_change_stream(net, "binlog", binlog_sequence())


def binlog_net_changes(events: DataFrame, txns: DataFrame) -> DataFrame:
    """The net changes of the committed ``txns``: of their row events, their TRUNCATEs, their
    ALTERs of columns and their DML statements (which only carry an anomaly)."""
    net = net_changes(bt.row_events_in(events, txns))
    dml = statements.binlog_statements(bt.with_begin(events), txns, TXN_COLUMNS)
    return net.unionByName(schema_changes.binlog_table_ddl(events, txns, TXN_COLUMNS)).unionByName(dml)


def shadow_change_batch(new_changes: DataFrame, new_txns: DataFrame, all_changes: DataFrame, all_txns: DataFrame,
                        corrections: shadow_held.Corrections = None) -> DataFrame:
    """Net changes of every committed transaction a new change row or transaction row belongs to.
    A change whose transaction row has not arrived is held; a transaction recorded again with a
    later ``end_ts`` is emitted again at its new commit time (the latest recording wins). Where
    the runtime keeps flow state, the batch folds onto the held state (silver/shadow_held.py)
    instead of reading all of ``all_changes``. ``corrections`` (new, all): the source's snapshot
    corrections, whose images partial updates continue (shadow_changes.correction_operations)."""
    if new_changes.isStreaming or new_txns.isStreaming:
        net = shadow_changes.streamed_net_changes(new_changes, new_txns, all_changes, all_txns,
                                                  corrections and corrections[1])
    else:
        net = shadow_held.net_changes(new_changes, new_txns, all_changes, all_txns, corrections)
    return to_change_stream(net, "shadow", shadow_sequence())


def shadow_sequence():
    """The commit time, then the transaction id (a truncate just before its transaction's other
    changes: silver/truncates.py)."""
    position = truncates.shadow_position(F.col("op"), F.col("commit_ts"))
    return F.struct(position.alias("position"), F.col("txn_id").alias("txn"))


def _streamed_binlog_changes(new_events: DataFrame, all_events: DataFrame, sessions: DataFrame | None) -> DataFrame:
    """The streaming form (silver/arrivals.py): every committed transaction's net changes, joined
    to the new events that complete them. Nothing is persisted: the static side must be read
    again for each micro-batch."""
    events = bt.distinct_events(all_events)
    committed = bt.transactions(events, sessions).filter(F.col("status") == "committed")
    landed = bt.with_lsn(binlog_epochs.with_inferred_epochs(all_events))  # as distinct_events placed them
    last = arrivals.last_arrivals(bt.with_begin(landed), ["server_id", "begin_lsn"])
    last = last.join(committed.select("server_id", "begin_lsn", "end_lsn"), ["server_id", "begin_lsn"])
    done = arrivals.completed(new_events, last, ["server_id", "end_lsn"])
    net = binlog_net_changes(events, committed).join(done, ["server_id", "end_lsn"])
    return to_change_stream(net.unionByName(binlog_epochs.reset_rows(events, new_events)), "binlog", binlog_sequence())

