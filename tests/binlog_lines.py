"""Binlog landing lines as bronze holds them, for unit tests of silver's binlog functions: the
lines of one landing file, read by an update at a given second, with their provenance."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.contract.landing import to_json
from cdc_lakehouse.contract.writer import LandingFile

EVENTS = ("server_id long, file string, pos long, ts long, gtid string, type string, xid long, thread_id long, "
          "schema string, table string, query string, epoch long, _source string, _source_file string, _line long, "
          "_ingested_at timestamp, _file_modified_at timestamp")
NAMES = [c.split()[0] for c in EVENTS.split(", ")]
READ_AT = 1772442000  # the first update's time (epoch seconds)


def landed_file(spark, events: list[dict], source_file: str, read_at: int | None = None,
                written_at: int | None = None, source: str = "bench") -> DataFrame:
    """The lines of one landing file as bronze read them (no row images: transaction assembly
    needs none); ``read_at``/``written_at``: seconds since the epoch, None when not known."""
    extra = {"_source": source, "_source_file": source_file}
    rows = [tuple({**e, **extra, "_line": i + 1}.get(c) for c in NAMES) for i, e in enumerate(events)]
    at = lambda s: F.lit(None).cast("timestamp") if s is None else F.timestamp_seconds(F.lit(s))  # noqa: E731
    return spark.createDataFrame(rows, EVENTS).withColumn("_ingested_at", at(read_at)).withColumn(
        "_file_modified_at", at(written_at))


def landed(spark, *files: tuple[str, list[dict]]) -> DataFrame:
    """The lines of ``files`` landed one after the other, each read a second after the one before."""
    frames = [landed_file(spark, events, name, READ_AT + i) for i, (name, events) in enumerate(files)]
    return union(frames)


def union(frames: list[DataFrame]) -> DataFrame:
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def land(landing: Path, source: str, folder: str, name: str, lines: list[dict]) -> None:
    """One landing file of ``source`` in ``folder`` (binlog, sessions), written as capture writes it."""
    path = landing / source / folder
    path.mkdir(parents=True, exist_ok=True)
    out = LandingFile(path / name)
    for line in lines:
        out.write(to_json(line))
    out.close()
