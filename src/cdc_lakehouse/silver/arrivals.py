"""Which transactions a streamed micro-batch of bronze rows emits: the change stream's form for
Databricks, where a flow's new input is a streaming DataFrame.

The batch form (local runner) first picks the transactions that any new row belongs to, then
combines only those. A streaming DataFrame allows neither that aggregation nor an action, so the
streaming form turns it around, as a stream-static join: the net changes of every committed
transaction are computed from the bronze tables' current contents (the static side, read at its
latest version for each micro-batch), each tagged with the landing line of the transaction that
arrived last; the new rows select the transactions whose last line they bring.

Bronze stamps ``_ingested_at`` once per micro-batch, so a transaction's last line is in the
micro-batch that completed it, and the transaction is emitted there once with all of its rows.
A line that arrives later (a late event, a re-delivered file, a new recording of a shadow
transaction) becomes the last line and emits it again, as the batch form does.
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
