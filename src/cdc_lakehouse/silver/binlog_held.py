"""The binlog events transaction assembly still needs after a batch: its held state.

Per server, the log is closed below a *floor*: every transaction there ended (committed and
emitted, or rolled back). The state keeps the events at or above the floor (the open
transactions and whatever was logged after them)
plus one marker row per server that records the floor. A batch assembles its new events with
that state instead of with all of bronze, so its cost follows what landed and what is held.

The floor of a server is the begin of its first transaction without an end (``open``, or
``unterminated``: the next boundary seen is another transaction's); with none, the end of its
log. Every transaction below the floor is complete in bronze, so a new event above it never
needs one below. A new event *below* it (a late file, a re-delivered one) does: such a server
is assembled from all of its bronze events in that batch, as before state existed; this costs
that server's history once, and gives the same result (a re-emission at the same sequence,
which AUTO CDC applies once). Row events whose begin has not landed are not held either: their
begin lies below them, so when it lands it is late and finds them in bronze; holding them
would only keep the state growing for as long as that begin is missing.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse import flow_state
from cdc_lakehouse.silver import binlog_transactions as bt

FLOOR = "__floor"  # the type of a server's marker row; its `pos` holds the floor (an lsn)
HELD = bt.HELD


def assemble(new_events: DataFrame, all_events: DataFrame, sessions: DataFrame | None) -> tuple[DataFrame, DataFrame]:
    """The events this batch assembles (persisted: several steps read them) and their
    transactions; where the runtime keeps flow state, from the new and the held events, and
    what the next batch needs is kept."""
    state = flow_state.current()
    events = assembly_events(new_events, all_events, state and state.previous()).persist()
    txns = bt.transactions(events, sessions)
    if state is not None:
        state.keep(held_state(events, txns))
    return events, txns


def touched(new_events: DataFrame, events: DataFrame) -> DataFrame:
    """(server_id, begin_lsn) of each transaction a new event belongs to. ``new_events`` may
    be a stream (Databricks): it is deduplicated, never aggregated, which append mode allows."""
    tagged = bt.with_begin(events).select("server_id", "file", "pos", "begin_lsn")
    return (
        new_events.select("server_id", "file", "pos")
        .join(tagged, ["server_id", "file", "pos"])
        .select("server_id", "begin_lsn").dropDuplicates()
    )


def assembly_events(new_events: DataFrame, all_events: DataFrame, state: DataFrame | None) -> DataFrame:
    """The distinct events, with ``lsn``, that this batch assembles transactions from."""
    if state is None:  # no state yet: the whole history, once
        return bt.distinct_events(all_events)
    events, floors = _events(state), _floors(state)
    late = _late_servers(new_events, floors)
    held = events.filter(~F.col("server_id").isin(late)).unionByName(
        new_events.filter(~F.col("server_id").isin(late)), allowMissingColumns=True
    )
    if late:
        held = held.unionByName(all_events.filter(F.col("server_id").isin(late)), allowMissingColumns=True)
    return bt.distinct_events(held.select(*all_events.columns))


def held_state(events: DataFrame, txns: DataFrame) -> DataFrame:
    """What the next batch needs of ``events`` (with ``lsn``), given their ``txns``: the
    events at or above each server's floor, and the servers' floor markers."""
    # One row per server: broadcast (a sort-merge join of two results of the same cached
    # events can be planned with unequal partition counts when adaptive execution is off).
    floors = F.broadcast(floors_of(events, txns))
    kept = events.join(floors, "server_id").filter(F.col("lsn") >= F.col("floor")).drop("floor", "lsn")
    return kept.unionByName(_markers(floors, kept.schema))


def floors_of(events: DataFrame, txns: DataFrame) -> DataFrame:
    """Per server (``server_id``, ``floor``): where its held part of the log starts."""
    waiting = txns.filter(F.col("status").isin(*HELD)).groupBy("server_id").agg(F.min("begin_lsn").alias("from"))
    ends = events.groupBy("server_id").agg((F.max("lsn") + 1).alias("end"))
    return ends.join(F.broadcast(waiting), "server_id", "left").select(
        "server_id", F.coalesce("from", "end").alias("floor")
    )


def _markers(floors: DataFrame, schema) -> DataFrame:
    values = {"server_id": F.col("server_id"), "type": F.lit(FLOOR), "pos": F.col("floor")}
    return floors.select(*[
        values.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in schema.fields
    ])


def _events(state: DataFrame) -> DataFrame:
    return state.filter(F.col("type") != FLOOR)


def _floors(state: DataFrame) -> DataFrame:
    return state.filter(F.col("type") == FLOOR).select("server_id", F.col("pos").alias("floor"))


def _late_servers(new_events: DataFrame, floors: DataFrame) -> list:
    """The servers with a new event below their floor (one small job: a row per server)."""
    firsts = bt.with_lsn(new_events).groupBy("server_id").agg(F.min("lsn").alias("first"))
    late = firsts.join(F.broadcast(floors), "server_id").filter(F.col("first") < F.col("floor")).select("server_id")
    return [row.server_id for row in late.collect()]
