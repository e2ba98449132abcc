"""Epochs inferred from the landing, for lines that do not say theirs (docs/binlog-epochs.md).

After ``RESET MASTER``, a restore or a failover, binlog positions start again. This project's
capture counts that in each line's ``epoch``; another exporter (CONTRACT §2.1, where ``epoch`` is
optional) does not. Its new events may reuse the identities ``(server_id, epoch, file, pos)`` of
events already landed, which deduplication alone would drop; and after a failover the new
server's positions, starting again, would sort before the old server's last ones.

So the epoch of a line is inferred from the order in which the lines landed. The unit of that
order is a *segment*: a run of a landing file's lines of one server, one declared epoch and
forward positions, so a file that straddles a reset or a failover is cut there. Segments are
ordered by when bronze read them, then when their file was written, then file name, then place
in the file. Per declared epoch, for the whole source, in that order, a segment begins the next
epoch when

- it holds an identity first landed, with other content, in a segment of the current epoch
  (positions started again), or
- its lines carry neither ``epoch`` nor a GTID and the last such segment landed before it was of
  another server (a failover, or a fail-back: the source's order must stay monotonic);

it and every segment after it are of that epoch. A line whose content was landed before (a
re-delivery, whole or part of a file) keeps the epoch of its first landing. Every inferred epoch
is added to the declared one (``INFERRED``), so lines that say their epoch keep their meaning, and
its first line is marked (``RESET``, with ``SWITCHED_FROM`` for a change of server): the change
stream records it as an anomaly (``reset_rows``).

The fold runs over the few segments that begin an epoch or may (``epoch_starts``, an
``aggregate`` per declared epoch, so a streaming plan holds it too): none in a log of one server
that never started again, so where a batch is planned on its own the common case costs one small
job and no more. A batch assembled from held state (silver/binlog_held.py) continues the fold
from a ``Seed``: the epochs inferred so far and the last server; its held lines keep theirs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from cdc_lakehouse import flow_state
from cdc_lakehouse.bronze import binlog_position
from cdc_lakehouse.silver import binlog_gaps, statements

INFERRED = "__inferred_epochs"  # epochs inferred before the line, added to its declared epoch
RESET = "__epoch_reset"  # the line where an inferred epoch starts
SWITCHED_FROM = "__switched_from"  # on a RESET line of an epoch a change of server began: the server before
LAST_SERVER = "__last_server"  # the server of the last segment landed that may switch (the held state keeps it)
OUTPUT = (INFERRED, RESET, SWITCHED_FROM, LAST_SERVER)
EPOCH_INFERRED = "epoch_inferred"  # the anomaly kind, and its marker in a change's ``anomalies``
# What a line says: two lines at one identity with the same content are one event landed twice.
# Not its epoch, which the identity holds: a line without one is of epoch 0, as one that says 0.
CONTENT = ("server_id", "file", "pos", "ts", "gtid", "type", "xid", "thread_id", "schema", "table",
           "primary_key", "rows", "query")
_DECLARED, _UNIT, _HASH, _FIRST, _LINE = "__declared", "__unit", "__content", "__first_unit", "__at_line"
_FIXED, _FIRST_FIXED, _STARTS = "__fixed", "__first_fixed", "__epoch_starts"
# A segment's place in the landing order (``_UNIT``): when bronze read it, when its file was
# written, the file, and which run of forward positions in the file.
UNIT_TYPE = "struct<read:timestamp,written:timestamp,path:string,segment:bigint>"
# A segment the fold looks at: where it reuses an identity first landed ``earlier`` (whose epochs
# are ``earlier_fixed`` when that line is held from an earlier batch), or the server it switched from.
_MARK_TYPE = f"struct<unit:{UNIT_TYPE},earlier:{UNIT_TYPE},earlier_fixed:int,switched_from:bigint>"
_START_TYPE = f"struct<unit:{UNIT_TYPE},switched_from:bigint>"
_IDENTITY = ["server_id", _DECLARED, "file", "pos"]
_ZERO_TIME = datetime(1970, 1, 1)


@dataclass(frozen=True)
class Seed:
    """What the landing order told before a batch (silver/binlog_held.py keeps it): per declared
    epoch, how many epochs were inferred in it; and the server of the last segment that may
    switch (lines without ``epoch`` or GTIDs)."""

    epochs: Mapping[int, int] = field(default_factory=dict)
    last_server: int | None = None


def with_inferred_epochs(events: DataFrame, seed: Seed | None = None) -> DataFrame:
    """``events`` (bronze binlog events and gaps) with ``epoch`` raised by the epochs inferred
    before each line, and the columns ``OUTPUT``. Lines with ``INFERRED`` set are held from an
    earlier batch (``seed``): they keep their epoch, raised already."""
    seed = seed or Seed()
    events = events.drop(RESET, SWITCHED_FROM, LAST_SERVER)
    if "epoch" not in events.columns:  # a bronze table written before epochs: all of epoch 0
        events = events.withColumn("epoch", F.lit(None).cast("long"))
    columns = [c for c in events.columns if c != INFERRED]
    if "_source_file" not in events.columns:  # no landing order to infer from (a frame made by hand)
        return _unmarked(events).withColumn(LAST_SERVER, F.lit(None).cast("long")).select(*columns, *OUTPUT)
    lines = _lines(events)
    firsts = _first_landings(lines)
    participants = _participants(lines, firsts)
    marks = _conflicts(firsts).unionByName(_switches(participants, seed.last_server))
    last = participants.agg(F.max_by("server_id", _UNIT).alias("__last")).select(
        F.coalesce("__last", F.lit(seed.last_server).cast("long")).alias(LAST_SERVER))
    # Where a batch is planned on its own (the local runtime), one small job spares the common
    # case (one server whose positions never started again without saying so) the rest; a
    # streaming plan (Databricks) must hold for every batch to come.
    if flow_state.planned_per_batch() and not any(seed.epochs.values()) and marks.isEmpty():
        return _unmarked(events).crossJoin(F.broadcast(last)).select(*columns, *OUTPUT)
    marked = _marked(_placed(lines, firsts), epoch_starts(marks, seed.epochs), seed.epochs)
    return marked.crossJoin(F.broadcast(last)).select(*columns, *OUTPUT)


def _marked(placed: DataFrame, starts: DataFrame, epochs: Mapping[int, int]) -> DataFrame:
    """The lines placed at their first landing, given the segments that start epochs (``starts``)
    and the epochs inferred before (``epochs``): ``epoch`` raised, ``INFERRED``, ``RESET`` and
    ``SWITCHED_FROM``."""
    placed = placed.join(F.broadcast(starts), _DECLARED, "left").withColumn(
        _STARTS, F.coalesce(_STARTS, F.array().cast(f"array<{_START_TYPE}>")))
    before = F.filter(_STARTS, lambda s: s["unit"] <= F.col(_FIRST))
    inferred = F.coalesce(F.col(_FIRST_FIXED), seeded_epochs(F.col(_DECLARED), epochs) + F.size(before))
    here = F.filter(_STARTS, lambda s: s["unit"] == F.col(_UNIT))
    starts_here = (F.size(here) > 0) & (F.col(_FIRST) == F.col(_UNIT)) & ~binlog_gaps.is_gap() & F.col(_FIXED).isNull()
    first_line = F.min(F.when(starts_here, F.col(_LINE))).over(Window.partitionBy(_UNIT))
    marked = placed.withColumn(INFERRED, inferred).withColumn(
        RESET, F.coalesce(starts_here & (F.col(_LINE) == first_line), F.lit(False))).withColumn(
        SWITCHED_FROM, F.when(F.col(RESET), F.get(here, 0)["switched_from"]))
    shifted = F.when(F.col(INFERRED) > 0, F.col(_DECLARED) + F.col(INFERRED)).otherwise(F.col("epoch"))
    return marked.withColumn("epoch", shifted.cast("long"))


def _unmarked(events: DataFrame) -> DataFrame:
    """``events`` where no epoch starts: each keeps the epochs inferred for it before (held lines), else none."""
    held = F.col(INFERRED) if INFERRED in events.columns else F.lit(None)
    return events.withColumn(INFERRED, F.coalesce(held.cast("int"), F.lit(0))).withColumn(RESET, F.lit(False)).withColumn(
        SWITCHED_FROM, F.lit(None).cast("long"))


def seeded_epochs(declared: Column, epochs: Mapping[int, int]) -> Column:
    """The epochs inferred before this batch (``epochs``: a ``Seed``'s) in the declared epoch ``declared``."""
    return F.coalesce(*[F.when(declared == d, F.lit(n)) for d, n in epochs.items()], F.lit(0))


def _column(events: DataFrame, name: str, default: Column) -> Column:
    """A provenance column, or ``default`` where ``events`` lacks it (frames made by hand, old tables)."""
    return F.coalesce(F.col(name), default) if name in events.columns else default


def _lines(events: DataFrame) -> DataFrame:
    """The events with their declared epoch, content hash, landing segment (``_UNIT``) and, for
    a line held from an earlier batch, the epochs inferred for it then (``_FIXED``)."""
    read = _column(events, "_ingested_at", F.lit(_ZERO_TIME).cast("timestamp"))
    written = _column(events, "_file_modified_at", F.lit(_ZERO_TIME).cast("timestamp"))
    path = _column(events, "_source_file", F.lit(""))
    line = _column(events, "_line", F.lit(0).cast("long"))
    fixed = (F.col(INFERRED) if INFERRED in events.columns else F.lit(None)).cast("int")
    # Held lines are kept as assembly left them: epoch raised, a statement retyped (binlog_transactions).
    as_landed = {"type": F.when(F.col("type") == statements.INSIDE, F.lit("ddl")).otherwise(F.col("type"))}
    content = [as_landed.get(c, F.col(c)).alias(c) for c in CONTENT if c in events.columns]
    with_file = events.select(
        "*", read.alias("__read"), written.alias("__written"), path.alias("__path"), line.alias(_LINE),
        fixed.alias(_FIXED), (F.coalesce(F.col("epoch"), F.lit(0)) - F.coalesce(fixed, F.lit(0))).cast("long").alias(_DECLARED),
        F.xxhash64(F.to_json(F.struct(*content))).alias(_HASH),
        binlog_position.lsn_column(epoch_col=None).alias("__position"),
    )
    in_file = Window.partitionBy("__read", "__path").orderBy(_LINE)
    before = lambda c: F.lag(c).over(in_file)  # noqa: E731
    cut = (F.col("__position") <= before("__position")) | (F.col("server_id") != before("server_id")) \
        | ~F.col("epoch").eqNullSafe(before("epoch"))
    cut = before(_LINE).isNotNull() & F.coalesce(cut, F.lit(False))
    segment = F.sum(cut.cast("int")).over(in_file.rowsBetween(Window.unboundedPreceding, 0))
    unit = F.struct(F.col("__read").alias("read"), F.col("__written").alias("written"),
                    F.col("__path").alias("path"), segment.cast("long").alias("segment"))
    return with_file.withColumn(_UNIT, unit).drop("__read", "__written", "__path", "__position")


def _first_landings(lines: DataFrame) -> DataFrame:
    """Per identity and content, the segment that landed it first (``_FIRST``) and the epochs
    inferred for it when that line is held from an earlier batch (gaps have no content)."""
    content = lines.filter(~binlog_gaps.is_gap())
    return content.groupBy(*_IDENTITY, _HASH).agg(F.min(_UNIT).alias(_FIRST), F.min_by(_FIXED, _UNIT).alias(_FIRST_FIXED))


def _placed(lines: DataFrame, firsts: DataFrame) -> DataFrame:
    """Each line with its first landing: a re-delivery's is the earlier one; a gap's its own."""
    gap = binlog_gaps.is_gap()
    placed = lines.join(firsts, [*_IDENTITY, _HASH], "left")
    return placed.withColumn(_FIRST, F.when(gap, F.col(_UNIT)).otherwise(F.coalesce(_FIRST, _UNIT))).withColumn(
        _FIRST_FIXED, F.when(gap, F.col(_FIXED)).otherwise(F.col(_FIRST_FIXED)))


def _conflicts(firsts: DataFrame) -> DataFrame:
    """Marks (``_MARK_TYPE`` fields, and ``_DECLARED``): a new segment that first landed other
    content at an identity an earlier segment first landed."""
    reused = firsts.groupBy(*_IDENTITY).count().filter(F.col("count") > 1).drop("count")
    candidates = firsts.join(reused, _IDENTITY, "left_semi")
    a, b = candidates.alias("a"), candidates.alias("b")
    pairs = a.join(b, _IDENTITY).filter((F.col(f"a.{_FIRST}") < F.col(f"b.{_FIRST}")) & F.col(f"b.{_FIRST_FIXED}").isNull())
    return pairs.select(_DECLARED, F.col(f"b.{_FIRST}").alias("unit"), F.col(f"a.{_FIRST}").alias("earlier"),
                        F.col(f"a.{_FIRST_FIXED}").alias("earlier_fixed"),
                        F.lit(None).cast("long").alias("switched_from")).distinct()


def _participants(lines: DataFrame, firsts: DataFrame) -> DataFrame:
    """(``_UNIT``, server_id) of the new segments that may switch: a line of theirs landed there
    first, and none carries ``epoch`` or a GTID (a GTID is its transaction's: some exporters write
    it on the begin only, so one line with one says it for the segment)."""
    says = F.col("epoch").isNotNull() | (F.col("gtid").isNotNull() if "gtid" in lines.columns else F.lit(False))
    segments = lines.filter(~binlog_gaps.is_gap() & F.col(_FIXED).isNull()).groupBy(_UNIT).agg(
        F.max("server_id").alias("server_id"), F.max(says).alias("__says"))
    landed_first = firsts.filter(F.col(_FIRST_FIXED).isNull()).select(F.col(_FIRST).alias(_UNIT))
    return segments.filter(~F.col("__says")).join(landed_first, _UNIT, "left_semi")


def _switches(participants: DataFrame, last_server: int | None) -> DataFrame:
    """Marks of the segments whose server is not that of the segment before them (the first
    one's: ``last_server``, the last of an earlier batch). They are all of declared epoch 0."""
    in_order = Window.partitionBy(F.lit(0)).orderBy(_UNIT)  # one row per segment
    before = F.coalesce(F.lag("server_id").over(in_order), F.lit(last_server).cast("long"))
    switched = participants.select(_UNIT, "server_id", before.alias("switched_from")).filter(
        F.col("switched_from") != F.col("server_id"))
    return switched.select(F.lit(0).cast("long").alias(_DECLARED), F.col(_UNIT).alias("unit"),
                           F.lit(None).cast(UNIT_TYPE).alias("earlier"), F.lit(None).cast("int").alias("earlier_fixed"),
                           "switched_from")


def epoch_starts(marks: DataFrame, epochs: Mapping[int, int] | None = None) -> DataFrame:
    """Per declared epoch, ``_STARTS``: the segments that start an inferred epoch, in landing
    order, each with the server it switched from (none for a reuse). A fold over the marked
    segments in that order, from the epochs inferred before (``epochs``): a segment starts an
    epoch when it switched server, or reuses an identity first landed in a segment of the current
    epoch."""
    fields = F.struct("unit", "earlier", "earlier_fixed", "switched_from").cast(_MARK_TYPE)
    grouped = marks.groupBy(_DECLARED).agg(F.collect_list(fields).alias("__marks"))
    found = F.col("__marks")
    tracked = F.filter(found, lambda m: m["earlier"].isNotNull() & m["earlier_fixed"].isNull())
    units = F.array_sort(F.array_distinct(F.concat(F.transform(found, lambda m: m["unit"]),
                                                   F.transform(tracked, lambda m: m["earlier"]))))
    zero = F.struct(seeded_epochs(F.col(_DECLARED), epochs or {}).alias("current"),
                    F.array().cast(f"array<struct<unit:{UNIT_TYPE},epoch:int>>").alias("epochs"),
                    F.array().cast(f"array<{_START_TYPE}>").alias("starts"))

    def step(acc: Column, unit: Column) -> Column:
        def of_current(m: Column) -> Column:  # a held line's epochs are known; the fold tracks the others'
            tracked_here = F.exists(acc["epochs"], lambda x: (x["unit"] == m["earlier"]) & (x["epoch"] == acc["current"]))
            return F.coalesce(m["earlier_fixed"] == acc["current"], tracked_here)

        here = F.filter(found, lambda m: m["unit"] == unit)
        switched = F.filter(here, lambda m: m["switched_from"].isNotNull())
        starts = (F.size(switched) > 0) | F.exists(here, lambda m: m["earlier"].isNotNull() & of_current(m))
        current = acc["current"] + F.when(starts, F.lit(1)).otherwise(F.lit(0))
        start = F.struct(unit.alias("unit"), F.get(switched, 0)["switched_from"].alias("switched_from"))
        return F.struct(current.alias("current"),
                        F.concat(acc["epochs"], F.array(F.struct(unit.alias("unit"), current.alias("epoch")))).alias("epochs"),
                        F.when(starts, F.concat(acc["starts"], F.array(start))).otherwise(acc["starts"]).alias("starts"))

    return grouped.select(_DECLARED, F.aggregate(units, zero, step)["starts"].alias(_STARTS))


# -- the record of an inference ---------------------------------------------------------------
def reset_rows(events: DataFrame, new_events: DataFrame) -> DataFrame:
    """One row (``binlog_changes.net_changes`` shape, op ``NONE``, no table) per inferred epoch
    whose first line is among ``new_events``: the anomaly that says positions started again, or
    which server the source switched from. It counts no operation (``op_count`` 0): it changes no row."""
    if RESET not in events.columns:
        return events.sparkSession.createDataFrame([], _RESET_SCHEMA)
    # The new events on the left: ``new_events`` may be a stream (Databricks), joined to the static
    # events (a stream cannot be the right side of a semi join); deduplicated, as binlog_held.touched.
    starts = new_events.select("server_id", "file", "pos").join(
        events.filter(F.col(RESET)), ["server_id", "file", "pos"]).dropDuplicates(["server_id", "lsn"])
    epoch = binlog_position.epoch_of(F.col("lsn"))
    name = F.concat(F.lit("epoch "), epoch.cast("string"), F.lit(" of server "), F.col("server_id").cast("string"))
    return starts.select(
        "_source", "server_id", name.alias("txn_id"), F.timestamp_seconds("ts").alias("commit_ts"),
        F.col("lsn").alias("end_lsn"), F.lit("unknown").alias("user"), F.lit("unknown").alias("role"),
        F.lit(None).cast("string").alias("schema"), F.lit(None).cast("string").alias("table"),
        F.to_json(F.struct(F.col("server_id").cast("string").alias("server_id"),
                           epoch.cast("string").alias("inferred_epoch"))).alias("key"),
        F.lit("NONE").alias("op"),
        F.to_json(F.struct("file", "pos", epoch.alias("epoch"), F.col(INFERRED).alias("inferred"),
                           F.col(SWITCHED_FROM).alias("switched_from"), F.col("_source_file").alias("landed_in"),
                           "_line")).alias("row"),
        F.lit(None).cast("string").alias("before"),
        F.array(F.lit(EPOCH_INFERRED)).alias("anomalies"),
        F.lit(0).cast("long").alias("op_count"),
        F.col("lsn").alias("sequence"),
    )


_RESET_SCHEMA = ("_source string, server_id long, txn_id string, commit_ts timestamp, end_lsn long, user string, "
                 "role string, schema string, table string, key string, op string, row string, before string, "
                 "anomalies array<string>, op_count long, sequence long")
