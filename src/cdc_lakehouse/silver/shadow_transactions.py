"""The rows of a shadow source's ``silver.<source>_transactions`` that an update changes.

The table is kept by AUTO CDC, keyed by ``txn_id`` (``TXN_KEY``), sequenced by ``PROGRESS``: an
ended (recorded) transaction after an open one, then a later recording, then a later
computation, so a row computed from more of bronze replaces the one before it. A batch computes
the rows of the transactions its new rows belong to: new transaction rows, new change rows, and
the changes the change stream emitted for them in this update.

Where the runtime keeps flow state, the flow keeps the open transactions (change rows without a
transaction row) with the time of their first operation, so a normal batch reads from bronze
only the transaction rows of its transactions (a semi join on the narrow transactions table).
A batch is normal when none of its transactions had a transaction row before it (so all of a
transaction's change rows are new or held, and all its changes were emitted now). Otherwise
(recorded again, a late or re-delivered change row, changes re-emitted) it computes its rows
from the whole history of its transactions, as the full table does (``shadow_transactions_table``).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse import flow_state
from cdc_lakehouse.silver import arrivals
from cdc_lakehouse.silver import transactions_table as tt
from cdc_lakehouse.silver.binlog_transactions import HELD

TXN_KEY = ["txn_id"]
PROGRESS = tt.PROGRESS


def progress():
    """Ended after open; then the later commit (recording); then the later computation."""
    return F.struct((~F.col("status").isin(*HELD)).alias("ended"), F.col("sequence_position").alias("at"),
                    F.current_timestamp().alias("computed"))


def shadow_transaction_batch(source: str, new_txns: DataFrame, all_txns: DataFrame, new_changes: DataFrame,
                             all_changes: DataFrame, new_silver: DataFrame, all_silver: DataFrame) -> DataFrame:
    """The rows (with ``PROGRESS``) of the transactions this batch's rows belong to."""
    if new_changes.isStreaming:
        return _streamed(source, new_txns, all_txns, new_changes, all_changes, all_silver)
    state = flow_state.current()
    rows, kept = batch_rows(source, new_txns, all_txns, new_changes, all_changes, new_silver, all_silver,
                            state.previous() if state is not None else None)
    if state is not None:
        state.keep(kept)
    return rows.withColumn(PROGRESS, progress())


def batch_rows(source: str, new_txns: DataFrame, all_txns: DataFrame, new_changes: DataFrame, all_changes: DataFrame,
               new_silver: DataFrame, all_silver: DataFrame, previous: DataFrame | None) -> tuple[DataFrame, DataFrame]:
    """The batch's rows and the state to keep, given the ``previous`` state (None: unknown)."""
    ids = _touched(new_txns, new_changes, new_silver)
    if previous is None or not _normal(ids, new_txns, all_txns, new_changes, new_silver):
        rows = _from_history(source, ids, all_txns, all_changes, all_silver)
    else:
        begins = _open_with(previous, new_changes).join(ids, "txn_id", "left_semi")
        recorded = tt.recorded_transactions(all_txns.join(ids, "txn_id", "left_semi"))
        rows = tt.shadow_rows(source, recorded, begins, tt.change_counts(new_silver))
    return rows, _still_open(previous, new_changes, all_changes, all_txns)


def _landed(new_txns: DataFrame, new_changes: DataFrame) -> DataFrame:
    return new_txns.select("txn_id").unionByName(new_changes.select("txn_id"))


def _emitted(new_silver: DataFrame) -> DataFrame:
    """The transactions of the changes emitted now; snapshot corrections are none of the source's."""
    return tt.source_changes(new_silver).select("txn_id")


def _touched(new_txns: DataFrame, new_changes: DataFrame, new_silver: DataFrame) -> DataFrame:
    return _landed(new_txns, new_changes).unionByName(_emitted(new_silver)).distinct()


def _normal(ids: DataFrame, new_txns: DataFrame, all_txns: DataFrame, new_changes: DataFrame,
            new_silver: DataFrame) -> bool:
    """Whether no transaction of the batch had a transaction row before it, and every change
    emitted now belongs to a new row's transaction. One small job."""
    earlier = all_txns.join(new_txns.select(*arrivals.ARRIVAL), arrivals.ARRIVAL, "left_anti").select("txn_id")
    emitted_only = _emitted(new_silver).join(_landed(new_txns, new_changes), "txn_id", "left_anti")
    return ids.join(earlier, "txn_id", "left_semi").unionByName(emitted_only).isEmpty()


def _open_with(previous: DataFrame, new_changes: DataFrame) -> DataFrame:
    """(txn_id, begin_ts, last_ddl) of the held transactions and of those of the new change rows."""
    both = tt.with_last_ddl(previous).select("txn_id", "begin_ts", tt.LAST_DDL).unionByName(tt.first_operations(new_changes))
    return both.groupBy("txn_id").agg(F.min("begin_ts").alias("begin_ts"), F.max(tt.LAST_DDL).alias(tt.LAST_DDL))


def _still_open(previous: DataFrame | None, new_changes: DataFrame, all_changes: DataFrame,
                all_txns: DataFrame) -> DataFrame:
    """The state to keep: transactions with change rows and still no transaction row. Without a
    previous state, from every change row once."""
    candidates = tt.first_operations(all_changes) if previous is None else _open_with(previous, new_changes)
    return candidates.join(all_txns.select("txn_id"), "txn_id", "left_anti")


def _from_history(source: str, ids: DataFrame, all_txns: DataFrame, all_changes: DataFrame,
                  all_silver: DataFrame) -> DataFrame:
    def mine(df: DataFrame) -> DataFrame:
        return df.join(ids, "txn_id", "left_semi")

    return tt.shadow_rows(source, tt.recorded_transactions(mine(all_txns)), tt.first_operations(mine(all_changes)),
                          tt.change_counts(mine(all_silver)))


def _streamed(source: str, new_txns: DataFrame, all_txns: DataFrame, new_changes: DataFrame,
              all_changes: DataFrame, all_silver: DataFrame) -> DataFrame:
    """The streaming form (Databricks): each transaction's row from all of bronze, emitted in
    the micro-batch that brings its last-landed line (arrivals.py)."""
    lines = new_txns.select("txn_id", *arrivals.ARRIVAL).unionByName(new_changes.select("txn_id", *arrivals.ARRIVAL))
    every = all_txns.select("txn_id", *arrivals.ARRIVAL).unionByName(all_changes.select("txn_id", *arrivals.ARRIVAL))
    ids = arrivals.completed(lines, arrivals.last_arrivals(every, TXN_KEY), TXN_KEY)
    table = tt.shadow_transactions_table(source, all_txns, all_changes, all_silver)
    return table.join(ids, "txn_id").withColumn(PROGRESS, progress())
