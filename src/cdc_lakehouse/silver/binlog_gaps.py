"""Quarantined binlog lines as gaps in the log: a transaction with one is held, never applied in part.

A binlog line that bronze quarantines (a NaN value, a bad type, a line cut short) was an event of
some transaction, which silver would otherwise assemble without it and apply in part, against
CONTRACT §6. Where the line still tells where it was in the log (``server_id``, ``file``, ``pos``
and ``epoch``: silver/quarantined_lines.py), it enters transaction
assembly as a *gap* event at that position, its note (which line, why) in ``query``:

* the transaction around a gap is held as ``incomplete`` and names the line (``held_because``),
  in silver and gold, until an accepted event at the same position lands (the corrected line),
  which replaces the gap (``binlog_transactions.distinct_events``);
* a gap whose type is a begin, a ddl, or unreadable starts a transaction (``GAP_START``): when the
  quarantined line was a BEGIN, the row events and commit after it are held with it instead of
  vanishing as events of no transaction.

A line that does not tell its position cannot be placed in the log: it stays in quarantine,
counted in ``gold.data_quality``, and holds nothing.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from cdc_lakehouse import flow_state
from cdc_lakehouse.bronze import binlog_position
from cdc_lakehouse.bronze.landing import PROVENANCE
from cdc_lakehouse.silver import quarantined_lines as ql

GAP, GAP_START = "gap", "gap_start"
GAP_TYPES = (GAP, GAP_START)
# The event types of a transaction's inside and end: a gap of one of them starts nothing.
INSIDE_TYPES = ("insert", "update", "delete", "commit", "rollback", "statement")

_PATTERNS: ql.Patterns = {  # a member as capture writes it
    **{name: ql.number_member(name) for name in ("server_id", "pos", "epoch", "ts")},
    "file": ql.string_member("file"),
    "type": ql.string_member("type"),
}


def with_gaps(events: DataFrame, quarantined: DataFrame) -> DataFrame:
    """``events`` (bronze binlog events, a stream or not) and, in their shape, a gap event for
    each line of ``quarantined`` (the bronze quarantine of the same source) that tells its place."""
    return events.unionByName(gaps(quarantined, events.schema))


def gaps(quarantined: DataFrame, schema: StructType) -> DataFrame:
    """The placeable quarantined lines as events of ``schema``: type ``gap``/``gap_start``."""
    read = ql.members(_PATTERNS)
    # The quarantine table's columns are all _-prefixed: the members read keep their own names.
    placed = quarantined.select("*", *[column.alias(name) for name, column in read.items()]).filter(
        F.col("server_id").isNotNull() & F.col("file").isNotNull() & F.col("pos").isNotNull()
        & (F.regexp_extract("file", binlog_position.FILE_NUMBER, 1) != "") & F.expr(binlog_position.IN_RANGE)
    )
    values = {
        "type": F.when(F.col("type").isin(*INSIDE_TYPES), F.lit(GAP)).otherwise(F.lit(GAP_START)),
        "query": ql.note(),
        **{name: F.col(name) for name in ("server_id", "file", "pos", "epoch", "ts")},
        # A quarantine table nothing was added to since provenance grew lacks the new columns.
        **{name: F.col(name) for name in PROVENANCE if name in quarantined.columns},
    }
    return placed.select(*[values.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in schema.fields])


def is_gap() -> Column:
    return F.col("type").isin(*GAP_TYPES)


def held_by_gaps(txns: DataFrame, events: DataFrame) -> DataFrame:
    """``txns`` with ``held_because``: the notes of the gaps inside each (from its begin to its
    end, or on with no end yet); such a transaction that has not rolled back is ``incomplete``.
    A gap that starts a transaction of gaps only was no begin of anything that landed: no
    transaction (quarantined lines between transactions hold nothing)."""
    found = events.filter(is_gap()).select("server_id", F.col("lsn").alias("gap_lsn"), "type", F.col("query").alias("note"))
    # Gaps are rare: one small job that finds none saves the joins below, which cost more than
    # the rest of assembly on a small batch.
    if flow_state.planned_per_batch() and found.isEmpty():
        return txns.withColumn("held_because", F.lit(None).cast("string"))
    txns = txns.join(F.broadcast(_empty_gap_starts(txns, events, found)), ["server_id", "begin_lsn"], "left_anti")
    inside = txns.select("server_id", "begin_lsn", "end_lsn").join(F.broadcast(found), "server_id").filter(
        (F.col("gap_lsn") >= F.col("begin_lsn"))
        & (F.col("end_lsn").isNull() | (F.col("gap_lsn") <= F.col("end_lsn")))
    )
    notes = inside.groupBy("server_id", "begin_lsn").agg(
        ql.joined_notes().alias("__notes")
    )
    held = F.col("__notes").isNotNull() & (F.col("status") != "rolled_back")
    return (
        txns.join(F.broadcast(notes), ["server_id", "begin_lsn"], "left")
        .withColumn("status", F.when(held, F.lit("incomplete")).otherwise(F.col("status")))
        .withColumn("held_because", F.when(held, F.col("__notes")))
        .drop("__notes")
    )


def _empty_gap_starts(txns: DataFrame, events: DataFrame, found: DataFrame) -> DataFrame:
    """(server_id, begin_lsn) of the transactions a gap starts that hold no accepted event: not
    ended by a commit or rollback, and no row event between their begin and their end."""
    starts = found.filter(F.col("type") == GAP_START).select("server_id", F.col("gap_lsn").alias("begin_lsn"))
    spans = txns.join(F.broadcast(starts), ["server_id", "begin_lsn"]).filter(
        ~F.col("status").isin("committed", "rolled_back")
    ).select("server_id", "begin_lsn", "end_lsn")
    rows = events.filter(F.col("type").isin("insert", "update", "delete")).select("server_id", "lsn")
    filled = rows.join(F.broadcast(spans), "server_id").filter(
        (F.col("lsn") > F.col("begin_lsn")) & (F.col("end_lsn").isNull() | (F.col("lsn") < F.col("end_lsn")))
    ).select("server_id", "begin_lsn")
    return spans.select("server_id", "begin_lsn").join(filled, ["server_id", "begin_lsn"], "left_anti")
