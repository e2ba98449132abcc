"""Which transactions a streamed micro-batch of bronze rows emits: the change stream's form for
Databricks, where a flow's new input is a streaming DataFrame.

The batch form (local runner) first picks the transactions that any new row belongs to, then
combines only those. A streaming DataFrame allows neither that aggregation nor an action, so the
streaming form turns it around, as a stream-static join: the net changes of every committed
transaction are computed from the bronze tables' current contents (the static side, read at its
latest version for each micro-batch), each tagged with the landing line of the transaction that
arrived last; the new rows select the transactions whose last line they bring.

What makes this exact: when a transaction's last-landed line streams, every line of it is on
the static side. In a triggered update silver runs after bronze (flows run in dependency order),
so its static side holds every bronze row of the update, and a line landed in a later update has
a later ``_ingested_at`` (bronze stamps it once per micro-batch). The transaction is then emitted
once, in the micro-batch that brings its last line, with all its rows; a line that arrives later
(a late event, a re-delivered file, a new recording of a shadow transaction) becomes the last line
and emits it again, as the batch form does. A continuous pipeline breaks this for shadow sources:
their change and transaction rows are written by two bronze flows, whose micro-batches may commit
in another order than they were stamped (the bundle's pipeline is triggered: ``continuous: false``).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

# Bronze provenance that names one landing line and the micro-batch that ingested it.
ARRIVAL = ["_ingested_at", "_source_file", "_line"]


def last_arrivals(rows: DataFrame, transaction: list[str]) -> DataFrame:
    """Per transaction (its columns ``transaction``), the arrival of its last-landed line."""
    last = F.max(F.struct(*ARRIVAL)).alias("__last")
    return rows.groupBy(*transaction).agg(last).select(*transaction, *[F.col(f"__last.{c}").alias(c) for c in ARRIVAL])


def completed(new_rows: DataFrame, last: DataFrame, transaction: list[str]) -> DataFrame:
    """The transactions (columns ``transaction``) whose last-landed line is among the new rows:
    each at most once, since a landing line is ingested once per micro-batch."""
    return new_rows.select(*ARRIVAL).join(last, ARRIVAL).select(*transaction)
