"""Epochs inferred from the landing, for lines that do not say theirs (docs/binlog-epochs.md).

After ``RESET MASTER``, a restore or a failover, binlog positions start again. This project's
capture counts that in each line's ``epoch``; another exporter (CONTRACT §2.1, where ``epoch`` is
optional) does not, and its new events reuse the identities ``(server_id, epoch, file, pos)`` of
events already landed. Deduplication alone would take them for re-deliveries and drop them.

So an identity that was already landed with *other content* is not a re-delivery: the line
starts a new epoch, inferred from the order in which the lines landed. The unit of that order is
a *segment*: a run of a landing file's lines whose log positions go forward, so a file that
straddles the reset is cut where its positions step back. Segments are ordered by when bronze
read them, then when their file was written, then file name, then place in the file. Per server
(and declared epoch), in that order: a segment that holds an identity first landed, with other
content, in a segment of the current epoch begins the next epoch, and it and every segment after
it are of that epoch. A line whose content was landed before (a re-delivery, whole or part of a
file) keeps the epoch of its first landing. Every inferred epoch is added to the declared one
(``INFERRED``), so lines that say their epoch keep their meaning, and its first line is marked
(``RESET``): the change stream records it as an anomaly (``reset_rows``).

The fold over segments runs over the pairs of segments that hold one identity with two contents
(``epoch_starts``, an ``aggregate`` per server, so a streaming plan holds it too): none in a log
that never started again, so where a batch is planned on its own the common case costs one
small job and no more.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from cdc_lakehouse import flow_state
from cdc_lakehouse.bronze import binlog_position
from cdc_lakehouse.silver import binlog_gaps

INFERRED = "__inferred_epochs"  # epochs inferred before the line, added to its declared epoch
RESET = "__epoch_reset"  # the line where an inferred epoch starts
EPOCH_INFERRED = "epoch_inferred"  # the anomaly kind, and its marker in a change's ``anomalies``
# What a line says: two lines at one identity with the same content are one event landed twice.
CONTENT = ("server_id", "epoch", "file", "pos", "ts", "gtid", "type", "xid", "thread_id", "schema", "table",
           "primary_key", "rows", "query")
_DECLARED, _UNIT, _HASH, _FIRST, _LINE = "__declared", "__unit", "__content", "__first_unit", "__at_line"
_STARTS = "__epoch_starts"
# A segment's place in the landing order (``_UNIT``): when bronze read it, when its file was
# written, the file, and which run of forward positions in the file.
UNIT_TYPE = "struct<read:timestamp,written:timestamp,path:string,segment:bigint>"
_IDENTITY = ["server_id", _DECLARED, "file", "pos"]
_ZERO_TIME = datetime(1970, 1, 1)


def with_inferred_epochs(events: DataFrame) -> DataFrame:
    """``events`` (bronze binlog events and gaps) with ``epoch`` raised by the epochs inferred
    before each line, and the columns ``INFERRED`` and ``RESET``."""
    events = events.drop(INFERRED, RESET)
    if "epoch" not in events.columns:  # a bronze table written before epochs: all of epoch 0
        events = events.withColumn("epoch", F.lit(None).cast("long"))
    unchanged = events.withColumn(INFERRED, F.lit(0)).withColumn(RESET, F.lit(False))
    if "_source_file" not in events.columns:  # no landing order to infer from (a frame made by hand)
        return unchanged
    lines = _lines(events)
    conflicts = _conflicts(lines)
    # Where a batch is planned on its own (the local runtime), one small job spares the common
    # case (positions never started again without saying so) the rest; a streaming plan
    # (Databricks) must hold for every batch to come.
    if flow_state.planned_per_batch() and conflicts.isEmpty():
        return unchanged
    firsts = _first_landings(lines).select(*_IDENTITY, _HASH, F.col(_UNIT).alias(_FIRST))
    placed = lines.join(firsts, [*_IDENTITY, _HASH], "left").withColumn(
        _FIRST, F.when(binlog_gaps.is_gap(), F.col(_UNIT)).otherwise(F.coalesce(_FIRST, _UNIT)))
    with_starts = placed.join(F.broadcast(epoch_starts(conflicts)), ["server_id", _DECLARED], "left").withColumn(
        _STARTS, F.coalesce(_STARTS, F.array().cast(f"array<{UNIT_TYPE}>")))
    inferred = with_starts.withColumn(INFERRED, F.size(F.filter(_STARTS, lambda s: s <= F.col(_FIRST))))
    starts_here = F.array_contains(_STARTS, F.col(_UNIT)) & (F.col(_FIRST) == F.col(_UNIT)) & ~binlog_gaps.is_gap()
    first_line = F.min(F.when(starts_here, F.col(_LINE))).over(Window.partitionBy("server_id", _UNIT))
    marked = inferred.withColumn(RESET, F.coalesce(starts_here & (F.col(_LINE) == first_line), F.lit(False)))
    shifted = F.when(F.col(INFERRED) > 0, F.col(_DECLARED) + F.col(INFERRED)).otherwise(F.col("epoch"))
    return marked.withColumn("epoch", shifted.cast("long")).select(*events.columns, INFERRED, RESET)


def _column(events: DataFrame, name: str, default: Column) -> Column:
    """A provenance column, or ``default`` where ``events`` lacks it (frames made by hand, old tables)."""
    return F.coalesce(F.col(name), default) if name in events.columns else default


def _lines(events: DataFrame) -> DataFrame:
    """The events with their declared epoch, content hash and landing segment (``_UNIT``)."""
    read = _column(events, "_ingested_at", F.lit(_ZERO_TIME).cast("timestamp"))
    written = _column(events, "_file_modified_at", F.lit(_ZERO_TIME).cast("timestamp"))
    path = _column(events, "_source_file", F.lit(""))
    line = _column(events, "_line", F.lit(0).cast("long"))
    content = [F.col(c) for c in CONTENT if c in events.columns]
    with_file = events.select(
        "*", read.alias("__read"), written.alias("__written"), path.alias("__path"), line.alias(_LINE),
        F.coalesce(F.col("epoch"), F.lit(0)).cast("long").alias(_DECLARED),
        F.xxhash64(F.to_json(F.struct(*content))).alias(_HASH),
        binlog_position.lsn_column(epoch_col=None).alias("__position"),
    )
    in_file = Window.partitionBy("__read", "__path").orderBy(_LINE)
    back = F.coalesce(F.col("__position") <= F.lag("__position").over(in_file), F.lit(False))
    segment = F.sum(back.cast("int")).over(in_file.rowsBetween(Window.unboundedPreceding, 0))
    unit = F.struct(F.col("__read").alias("read"), F.col("__written").alias("written"),
                    F.col("__path").alias("path"), segment.cast("long").alias("segment"))
    return with_file.withColumn(_UNIT, unit).drop("__read", "__written", "__path", "__position")


def _first_landings(lines: DataFrame) -> DataFrame:
    """Per identity and content, the segment that landed it first (gaps have no content)."""
    content = lines.filter(~binlog_gaps.is_gap())
    return content.groupBy(*_IDENTITY, _HASH).agg(F.min(_UNIT).alias(_UNIT))


def _conflicts(lines: DataFrame) -> DataFrame:
    """(server_id, declared epoch, earlier, later): two segments that first landed other contents at one identity."""
    firsts = _first_landings(lines)
    reused = firsts.groupBy(*_IDENTITY).count().filter(F.col("count") > 1).drop("count")
    candidates = firsts.join(reused, _IDENTITY, "left_semi")
    a, b = candidates.alias("a"), candidates.alias("b")
    pairs = a.join(b, _IDENTITY).filter(F.col(f"a.{_UNIT}") < F.col(f"b.{_UNIT}"))
    return pairs.select("server_id", _DECLARED, F.col(f"a.{_UNIT}").alias("earlier"),
                        F.col(f"b.{_UNIT}").alias("later")).distinct()


def epoch_starts(conflicts: DataFrame) -> DataFrame:
    """Per (server_id, declared epoch), ``_STARTS``: the segments that start an inferred epoch, in
    landing order. A fold over the segments in conflict, in that order: a segment starts an
    epoch when it conflicts with a segment of the current epoch."""
    grouped = conflicts.groupBy("server_id", _DECLARED).agg(F.collect_list(F.struct("earlier", "later")).alias("__edges"))
    edges = F.col("__edges")
    units = F.array_sort(F.array_distinct(F.concat(F.transform(edges, lambda e: e["earlier"]),
                                                   F.transform(edges, lambda e: e["later"]))))
    zero = F.struct(F.lit(0).alias("current"),
                    F.array().cast(f"array<struct<unit:{UNIT_TYPE},epoch:int>>").alias("epochs"),
                    F.array().cast(f"array<{UNIT_TYPE}>").alias("starts"))

    def step(acc: Column, unit: Column) -> Column:
        of_current = lambda g: F.exists(acc["epochs"], lambda x: (x["unit"] == g) & (x["epoch"] == acc["current"]))  # noqa: E731
        starts = F.exists(edges, lambda e: (e["later"] == unit) & of_current(e["earlier"]))
        current = acc["current"] + F.when(starts, F.lit(1)).otherwise(F.lit(0))
        return F.struct(current.alias("current"),
                        F.concat(acc["epochs"], F.array(F.struct(unit.alias("unit"), current.alias("epoch")))).alias("epochs"),
                        F.when(starts, F.concat(acc["starts"], F.array(unit))).otherwise(acc["starts"]).alias("starts"))

    return grouped.select("server_id", _DECLARED, F.aggregate(units, zero, step)["starts"].alias(_STARTS))


# -- the record of an inference ---------------------------------------------------------------
def reset_rows(events: DataFrame, new_events: DataFrame) -> DataFrame:
    """One row (``binlog_changes.net_changes`` shape, op ``NONE``, no table) per inferred epoch
    whose first line is among ``new_events``: the anomaly that says positions started again. It
    counts no operation (``op_count`` 0): it changes no row."""
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
                           F.col("_source_file").alias("landed_in"), "_line")).alias("row"),
        F.lit(None).cast("string").alias("before"),
        F.array(F.lit(EPOCH_INFERRED)).alias("anomalies"),
        F.lit(0).cast("long").alias("op_count"),
        F.col("lsn").alias("sequence"),
    )


_RESET_SCHEMA = ("_source string, server_id long, txn_id string, commit_ts timestamp, end_lsn long, user string, "
                 "role string, schema string, table string, key string, op string, row string, before string, "
                 "anomalies array<string>, op_count long, sequence long")
