"""The changes a gold flow takes in an update: those of its source's change stream that are new
to it and at or before the source's commit point (gold.replication_watermark), and those it
held back in earlier updates that the point has now passed.

Gold's replicas and audit log are AUTO CDC targets fed by these changes: each update applies
only the changes between the old commit point and the new one, and a change re-emitted by
silver (same sequence) or recorded again (a later sequence) is applied as AUTO CDC applies any
change, so its latest recording wins, as at_point() has it for a point given by hand.

The changes that landed beyond the point are the flow's held state (cdc_lakehouse/flow_state.py),
read again by its next batch. Where no runtime keeps flow state (Databricks), every new change
is taken at once: gold then follows the change stream, and may show a transaction committed
after the begin of a held one before that one completes (docs/gold.md).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse import flow_state
from cdc_lakehouse.gold import inputs, schemas
from cdc_lakehouse.gold.commit_point import after

POINT = "__point"


def due_changes(new_changes: DataFrame, history: Callable[[], DataFrame], points: DataFrame,
                source: str) -> DataFrame:
    """The changes of ``source`` to apply now; ``history()`` reads the whole change stream,
    for a flow whose held state is unknown (its first batch, or state lost: AUTO CDC applies a
    change it already has as nothing)."""
    state = flow_state.current()
    if state is None:
        return new_changes
    held = state.previous()
    candidates = history() if held is None else held.unionByName(new_changes, allowMissingColumns=True)
    point = points.filter(F.col("source") == source).select(F.col("sequence").alias(POINT))
    tagged = candidates.join(point, how="left").persist()
    due = F.col(POINT).isNotNull() & (F.col("sequence") <= F.col(POINT))
    state.keep(tagged.filter(~due).drop(POINT))
    return tagged.filter(due).drop(POINT)


def source_changes_due(read_stream, read, settings, source: str) -> DataFrame:
    """``due_changes`` of ``source``, read as a gold flow reads them (``read_stream`` and
    ``read``: ``spark.readStream.table`` and ``spark.read.table`` in the pipeline)."""
    changes = inputs.changes_table(settings, source)
    # The source's silver tables first (transactions, then replicas): a stop or a failed flow in
    # them leaves every gold table of this source at its commit point, and no other source's
    # (the gate is per source, the commit point one view of all sources). Streamed (Databricks),
    # gold has no commit point.
    silver = [inputs.transactions_table(settings, source), *inputs.silver_replicas(settings, source)]
    gates = [df for _, df in inputs.existing(read, silver)]
    points = read(inputs.gold_name(settings, schemas.REPLICATION_WATERMARK.name))
    due = due_changes(read_stream(changes), lambda: read(changes), points, source)
    return due if due.isStreaming else after(due, gates)
