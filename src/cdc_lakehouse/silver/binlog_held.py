"""The binlog events transaction assembly still needs after a batch: its held state.

Per server, the log is closed below a *floor*: every transaction there ended (committed and
emitted, or rolled back). The state keeps the events at or above the floor (the open
transactions and whatever was logged after them)
plus one marker row per server that records the floor. A batch assembles its new events with
that state instead of with all of bronze, so its cost follows what landed and what is held.

The floor of a server is the begin of its first transaction without an end (``open``, or
``unterminated``: the next boundary seen is another transaction's); with none, the end of its
log. Every transaction below the floor is complete in bronze, so a new event above it never
needs one below. A new event *below* it (a late file, a re-delivered one) does: the batch is
then assembled from all of bronze, as before state existed (epochs are inferred for the whole
source, so not one server's events alone); this costs the history once, and gives the same result (a re-emission at the same sequence,
which AUTO CDC applies once). Row events whose begin has not landed are not held either: their
begin lies below them, so when it lands it is late and finds them in bronze; holding them
would only keep the state growing for as long as that begin is missing.

Epochs inferred from the landing (silver/binlog_epochs.py) go on from the state's ``LANDED``
markers: per declared epoch, the epochs inferred in it for the whole source; and the server of
the last segment that may switch. A held event keeps the epochs inferred for it (``INFERRED``).
A new line without ``epoch`` continues the current epoch, or begins the next one where its
server follows another's. Where epochs were inferred, a new line at a position that landed
before makes the batch late: only the whole landing order tells a re-delivery of an older epoch
from a new reuse.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse import flow_state
from cdc_lakehouse.silver import binlog_transactions as bt
from cdc_lakehouse.silver.binlog_epochs import INFERRED, LAST_SERVER, RESET, SWITCHED_FROM, Seed, seeded_epochs

FLOOR = "__floor"  # the type of a server's marker row; its `pos` holds the floor (an lsn)
# The type of the landing order's marker rows, one per declared epoch (`epoch`): the epochs
# inferred in it (`pos`) and, on epoch 0's, the server of the last segment that may switch.
LANDED = "__landed"
MARKERS = (FLOOR, LANDED)
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
    seed = _seed(state)
    if state is None or seed is None:  # no state yet, or one kept before source-wide epochs: the whole history, once
        return bt.distinct_events(all_events)
    if _late(new_events, _floors(state), seed) or _relanded(new_events, all_events, seed):
        return bt.distinct_events(all_events)
    held = _events(state).unionByName(new_events, allowMissingColumns=True)
    return bt.distinct_events(held.select(*all_events.columns, INFERRED), seed)


def _seed(state: DataFrame | None) -> Seed | None:
    """What the landing order told before this batch (one small job); None for a state kept
    before held events kept their inferred epochs."""
    if state is None or INFERRED not in state.columns:
        return None
    rows = state.filter(F.col("type") == LANDED).select("epoch", "pos", "server_id").collect()
    return Seed({r.epoch: r.pos for r in rows if r.pos}, next((r.server_id for r in rows if r.epoch == 0), None))


def _presumed(events: DataFrame, seed: Seed) -> DataFrame:
    """New lines placed in the current epoch of their declared one, as a line that starts no
    epoch is (silver/binlog_epochs.py)."""
    declared = _declared_epoch(events)
    return events.withColumn("epoch", (declared + seeded_epochs(declared, seed.epochs)).cast("long"))


def _relanded(new_events: DataFrame, all_events: DataFrame, seed: Seed) -> bool:
    """Whether a new line of a declared epoch with inferred epochs lies at a position that
    landed before. Its epoch is only known from the whole order of landing: it may repeat a line
    of an earlier epoch (a re-delivery) as well as start another. Bronze is searched at the new
    lines' positions only."""
    epochs = [d for d, n in seed.epochs.items() if n]
    if not epochs:
        return False

    def placed(events: DataFrame, name: str) -> DataFrame:
        landed = F.struct(*[F.col(c) if c in events.columns else F.lit(None) for c in ("_ingested_at", "_source_file", "_line")])
        declared = _declared_epoch(events)
        return events.filter(declared.isin(epochs)).select(
            "server_id", declared.alias("__declared"), "file", "pos", landed.alias(name))

    new, old = placed(new_events, "__new"), placed(all_events, "__old")
    again = old.join(new, ["server_id", "__declared", "file", "pos"]).filter(~F.col("__old").eqNullSafe(F.col("__new")))
    return not again.isEmpty()


def _declared_epoch(events: DataFrame) -> Column:
    """The epoch a line says (absent: 0); bronze tables written before epochs have no column."""
    return F.coalesce(F.col("epoch"), F.lit(0)) if "epoch" in events.columns else F.lit(0)


def held_state(events: DataFrame, txns: DataFrame, previous: DataFrame | None = None) -> DataFrame:
    """What the next batch needs of ``events`` (with ``lsn``), given their ``txns``: the
    events at or above each server's floor, with the epochs inferred for them, the servers'
    floor markers and the landing order's (``LANDED``; those of ``previous``, the state read,
    carried on)."""
    # One row per server: broadcast (a sort-merge join of two results of the same cached
    # events can be planned with unequal partition counts when adaptive execution is off).
    floors = F.broadcast(floors_of(events, txns))
    kept = events.join(floors, "server_id").filter(F.col("lsn") >= F.col("floor")).drop(
        "floor", "lsn", RESET, SWITCHED_FROM, LAST_SERVER)
    return kept.unionByName(_markers(_floor_rows(floors), kept.schema)).unionByName(
        _markers(_landed_rows(events, previous), kept.schema))


def floors_of(events: DataFrame, txns: DataFrame) -> DataFrame:
    """Per server (``server_id``, ``floor``): where its held part of the log starts."""
    waiting = txns.filter(F.col("status").isin(*HELD)).groupBy("server_id").agg(F.min("begin_lsn").alias("from"))
    ends = events.groupBy("server_id").agg((F.max("lsn") + 1).alias("end"))
    return ends.join(F.broadcast(waiting), "server_id", "left").select(
        "server_id", F.coalesce("from", "end").alias("floor")
    )


def _floor_rows(floors: DataFrame) -> DataFrame:
    return floors.select("server_id", F.lit(FLOOR).alias("type"), F.col("floor").alias("pos"))


def _landed_rows(events: DataFrame, previous: DataFrame | None) -> DataFrame:
    """The ``LANDED`` markers after ``events``: per declared epoch, the most epochs inferred in
    it (kept from ``previous`` while no event of it is assembled); on epoch 0's, the last server."""
    declared = F.coalesce(F.col("epoch"), F.lit(0)) - F.col(INFERRED)
    counts = events.select(declared.cast("long").alias("epoch"), F.col(INFERRED).cast("long").alias("pos"))
    # Every assembled event carries the batch's last server (the seed's when no segment of the
    # batch may switch); the state's goes on when the batch assembled nothing.
    last = events.select(F.col(LAST_SERVER).alias("server_id"), F.lit(0).alias("__after"))
    if previous is not None and INFERRED in previous.columns:
        before = previous.filter(F.col("type") == LANDED)
        counts = counts.unionByName(before.select("epoch", "pos"))
        last = last.unionByName(before.filter(F.col("epoch") == 0).select("server_id", F.lit(1).alias("__after")))
    last_server = last.filter(F.col("server_id").isNotNull()).agg(F.min_by("server_id", "__after").alias("server_id"))
    zero = events.sparkSession.range(1).select(F.lit(0).cast("long").alias("epoch"), F.lit(0).cast("long").alias("pos"))
    per_epoch = counts.unionByName(zero).groupBy("epoch").agg(F.max("pos").alias("pos")).crossJoin(F.broadcast(last_server))
    rows = per_epoch.select("epoch", "pos", F.when(F.col("epoch") == 0, F.col("server_id")).alias("server_id"))
    return rows.filter((F.col("pos") > 0) | F.col("server_id").isNotNull()).select(
        "server_id", F.lit(LANDED).alias("type"), "pos", "epoch")


def _markers(rows: DataFrame, schema) -> DataFrame:
    """Marker rows in the shape of the held events: the columns ``rows`` has, NULL in the others."""
    return rows.select(*[
        (F.col(f.name) if f.name in rows.columns else F.lit(None)).cast(f.dataType).alias(f.name) for f in schema.fields
    ])


def _events(state: DataFrame) -> DataFrame:
    return state.filter(~F.col("type").isin(*MARKERS))


def _floors(state: DataFrame) -> DataFrame:
    return state.filter(F.col("type") == FLOOR).select("server_id", F.col("pos").alias("floor"))


def _late(new_events: DataFrame, floors: DataFrame, seed: Seed) -> bool:
    """Whether a new event lies below its server's floor (one small job: a row per server)."""
    firsts = bt.with_lsn(_presumed(new_events, seed)).groupBy("server_id").agg(F.min("lsn").alias("first"))
    late = firsts.join(F.broadcast(floors), "server_id").filter(F.col("first") < F.col("floor"))
    return not late.isEmpty()
