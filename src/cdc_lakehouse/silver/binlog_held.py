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

Epochs inferred from the landing (silver/binlog_epochs.py) are counted in the server's marker
(its ``epoch``), kept while the server has no events in a batch. A new line without ``epoch``
continues the current one; a new line at a position that landed before makes its server late,
since only the whole landing order tells a re-delivery of an older epoch from a new reuse.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse import flow_state
from cdc_lakehouse.silver import binlog_transactions as bt
from cdc_lakehouse.silver.binlog_epochs import INFERRED, RESET

FLOOR = "__floor"  # the type of a server's marker row; its `pos` holds the floor (an lsn)
HELD = bt.HELD


def assemble(new_events: DataFrame, all_events: DataFrame, sessions: DataFrame | None) -> tuple[DataFrame, DataFrame]:
    """The events this batch assembles (persisted: several steps read them) and their
    transactions; where the runtime keeps flow state, from the new and the held events, and
    what the next batch needs is kept."""
    state = flow_state.current()
    previous = state.previous() if state is not None else None
    events = assembly_events(new_events, all_events, previous).persist()
    txns = bt.transactions(events, sessions)
    if state is not None:
        state.keep(held_state(events, txns, previous))
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
    inferred = {row.server_id: row.epochs for row in floors.filter(F.col("epochs") > 0).collect()}
    # Looked up as the lines landed, before they are placed in the current epoch.
    relanded = _relanded_servers(new_events, all_events, list(inferred))
    new_events = _in_current_epoch(new_events, floors, bool(inferred))
    late = _late_servers(new_events, floors) + relanded
    held = events.filter(~F.col("server_id").isin(late)).unionByName(
        new_events.filter(~F.col("server_id").isin(late)), allowMissingColumns=True
    )
    if late:
        held = held.unionByName(all_events.filter(F.col("server_id").isin(late)), allowMissingColumns=True)
    assembled = bt.distinct_events(held.select(*all_events.columns))
    # Epochs inferred in this batch count on from the server's (silver/binlog_epochs.py); a late
    # server's were inferred again from its whole history.
    before = F.coalesce(*[F.when(F.col("server_id") == s, F.lit(n)) for s, n in inferred.items() if s not in late],
                        F.lit(0))
    return assembled.withColumn(INFERRED, F.col(INFERRED) + before)


def _in_current_epoch(new_events: DataFrame, floors: DataFrame, any_inferred: bool) -> DataFrame:
    """The new events of a server whose positions started again (inferred epochs) in its current
    epoch: a line without an epoch continues the log where it is now."""
    if not any_inferred:
        return new_events
    epochs = F.broadcast(floors.select("server_id", F.col("epochs").alias("__epochs")))
    shifted = F.when(F.col("__epochs") > 0, _declared_epoch(new_events) + F.col("__epochs"))
    joined = new_events.join(epochs, "server_id", "left")
    declared = F.col("epoch") if "epoch" in new_events.columns else F.lit(None)
    return joined.withColumn("epoch", F.coalesce(shifted, declared).cast("long")).select(
        *new_events.columns, *([] if "epoch" in new_events.columns else ["epoch"]))


def _declared_epoch(events: DataFrame) -> Column:
    """The epoch a line says (absent: 0); bronze tables written before epochs have no column."""
    return F.coalesce(F.col("epoch"), F.lit(0)) if "epoch" in events.columns else F.lit(0)


def _relanded_servers(new_events: DataFrame, all_events: DataFrame, servers: list) -> list:
    """Of the servers whose positions started again, those with a new line at a position that
    landed before. Its epoch is only known from the whole order of landing: it may repeat a line
    of an earlier epoch (a re-delivery) as well as start another. Bronze is searched at the new
    lines' positions only, and only for these servers."""
    if not servers:
        return []

    def placed(events: DataFrame, name: str) -> DataFrame:
        landed = F.struct(*[F.col(c) if c in events.columns else F.lit(None) for c in ("_ingested_at", "_source_file", "_line")])
        return events.filter(F.col("server_id").isin(servers)).select(
            "server_id", _declared_epoch(events).alias("__declared"), "file", "pos", landed.alias(name))

    new, old = placed(new_events, "__new"), placed(all_events, "__old")
    again = old.join(new, ["server_id", "__declared", "file", "pos"]).filter(~F.col("__old").eqNullSafe(F.col("__new")))
    return [row.server_id for row in again.select("server_id").distinct().collect()]


def held_state(events: DataFrame, txns: DataFrame, previous: DataFrame | None = None) -> DataFrame:
    """What the next batch needs of ``events`` (with ``lsn``), given their ``txns``: the
    events at or above each server's floor, and the servers' floor markers (those of
    ``previous``, the state read, carried on for servers without events in this batch)."""
    # One row per server: broadcast (a sort-merge join of two results of the same cached
    # events can be planned with unequal partition counts when adaptive execution is off).
    floors = F.broadcast(floors_of(events, txns).join(_inferred(events), "server_id", "left"))
    kept = events.join(floors, "server_id").filter(F.col("lsn") >= F.col("floor")).drop(
        "floor", "lsn", "epochs", INFERRED, RESET)
    if previous is not None:  # a server's inferred epochs outlive the batches without its events
        carried = _floors(previous).filter(F.col("epochs") > 0).join(floors, "server_id", "left_anti")
        floors = floors.unionByName(carried)
    return kept.unionByName(_markers(floors, kept.schema))


def floors_of(events: DataFrame, txns: DataFrame) -> DataFrame:
    """Per server (``server_id``, ``floor``): where its held part of the log starts."""
    waiting = txns.filter(F.col("status").isin(*HELD)).groupBy("server_id").agg(F.min("begin_lsn").alias("from"))
    ends = events.groupBy("server_id").agg((F.max("lsn") + 1).alias("end"))
    return ends.join(F.broadcast(waiting), "server_id", "left").select(
        "server_id", F.coalesce("from", "end").alias("floor")
    )


def _inferred(events: DataFrame) -> DataFrame:
    """Per server (``server_id``, ``epochs``): the epochs inferred on it so far (binlog_epochs.py)."""
    return events.groupBy("server_id").agg(F.max(F.col(INFERRED)).alias("epochs"))


def _markers(floors: DataFrame, schema) -> DataFrame:
    # The marker's `epoch`: how many epochs were inferred on the server (silver/binlog_epochs.py).
    values = {"server_id": F.col("server_id"), "type": F.lit(FLOOR), "pos": F.col("floor"), "epoch": F.col("epochs")}
    return floors.select(*[
        values.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in schema.fields
    ])


def _events(state: DataFrame) -> DataFrame:
    return state.filter(F.col("type") != FLOOR)


def _floors(state: DataFrame) -> DataFrame:
    return state.filter(F.col("type") == FLOOR).select(
        "server_id", F.col("pos").alias("floor"), _declared_epoch(state).alias("epochs"))


def _late_servers(new_events: DataFrame, floors: DataFrame) -> list:
    """The servers with a new event below their floor (one small job: a row per server)."""
    firsts = bt.with_lsn(new_events).groupBy("server_id").agg(F.min("lsn").alias("first"))
    late = firsts.join(F.broadcast(floors), "server_id").filter(F.col("first") < F.col("floor")).select("server_id")
    return [row.server_id for row in late.collect()]
