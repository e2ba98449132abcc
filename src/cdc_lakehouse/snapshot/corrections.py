"""Corrective changes in the silver change-stream shape, as JSON Lines landing files.

One file per reconciled snapshot, ``<landing>/<source>/corrections/<schema>.<table>/<id>.jsonl``,
one change per line with exactly the columns of ``silver.<source>_changes``; the pipeline's
``<source>_snapshot_corrections`` append flow reads them with Auto Loader and this schema.
``row`` and ``before`` are JSON *text* (strings), so the source's own characters (``0.00``, long
decimals) reach silver unchanged, as they do from binlog and shadow capture.
"""

from __future__ import annotations

import shutil
import uuid
from datetime import datetime
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_lakehouse.contract.publication import publish_new
from cdc_lakehouse.snapshot.sequence import Sequence, txn_id
from cdc_lakehouse.contract.corrections import CHANGE_STREAM_SCHEMA, ORIGIN, READ_OPTIONS, TIMESTAMP_FORMAT

USER = ROLE = "snapshot"


def change_stream(diff: DataFrame, source: str, table: str, snapshot_id: str, sequence: Sequence,
                  commit_ts: datetime) -> DataFrame:
    """``diff`` (key, op, row, before, changed_columns) as change-stream rows of one snapshot."""
    schema, name = table.split(".", 1)
    return diff.select(
        F.lit(source).alias("source"), F.lit(schema).alias("schema"), F.lit(name).alias("table"),
        "key", "op", "row", "before",
        F.col("changed_columns").cast("array<string>").alias("changed_columns"),
        F.array().cast("array<string>").alias("anomalies"),
        F.lit(1).cast("long").alias("op_count"),
        F.lit(txn_id(snapshot_id)).alias("txn_id"),
        F.lit(commit_ts).cast("timestamp").alias("commit_ts"),
        sequence.column().alias("sequence"),
        F.lit(USER).alias("user"), F.lit(ROLE).alias("role"), F.lit(ORIGIN).alias("origin"),
    )


def write_jsonl(changes: DataFrame, final: Path) -> int:
    """Write ``changes`` as one JSON Lines file, published atomically; returns its line count.

    Spark writes its parts in parallel into a hidden folder next to the target; they are joined
    into one hidden file, fsynced and renamed, so a reader sees no file or the whole file.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    work = final.parent / f".{final.stem}.{uuid.uuid4().hex}.parts"
    options = {"timestampFormat": TIMESTAMP_FORMAT, "ignoreNullFields": "false"}
    try:
        changes.select(F.to_json(F.struct(*changes.columns), options).alias("value")).write.text(str(work))
        tmp = final.parent / f".{final.stem}.{uuid.uuid4().hex}.tmp"
        lines = _concatenate(sorted(work.glob("part-*")), tmp)
        publish_new(tmp, final)
        return lines
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for leftover in final.parent.glob(f".{final.stem}.*.tmp"):
            leftover.unlink(missing_ok=True)


def _concatenate(parts: list[Path], target: Path) -> int:
    lines = 0
    with open(target, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                while chunk := f.read(1 << 22):
                    lines += chunk.count(b"\n")
                    out.write(chunk)
    return lines


def read_corrections(spark, path: str | Path) -> DataFrame:
    """A corrections file or folder, read as the pipeline reads it (batch; for checks and tests)."""
    return spark.read.schema(CHANGE_STREAM_SCHEMA).options(**READ_OPTIONS).json(str(path))
