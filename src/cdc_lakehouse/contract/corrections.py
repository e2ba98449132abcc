"""Snapshot corrections in the landing (CONTRACT §5): where they land, their lines' schema and origin.

Imported by ``src/silver/snapshot_corrections.py``, so it imports nothing a serverless
pipeline lacks (no delta-rs, no capture code).
"""

from __future__ import annotations

CORRECTIONS = "corrections"
ORIGIN = "snapshot"  # the change stream's ``origin`` of a correction
CHANGE_STREAM_SCHEMA = (
    "source string, schema string, table string, key string, op string, row string, before string, "
    "changed_columns array<string>, anomalies array<string>, op_count bigint, txn_id string, "
    "commit_ts timestamp, sequence struct<position: bigint, txn: string>, user string, role string, "
    "origin string"
)
# Microseconds: Spark's default JSON timestamp format keeps milliseconds only.
TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"
READ_OPTIONS = {"timestampFormat": TIMESTAMP_FORMAT}
FILE_FILTER = "*.jsonl"


def corrections_uri(landing: str, source: str) -> str:
    """``<landing>/<source>/corrections`` as a string: a landing URI (s3://, abfss://) is no Path."""
    return f"{str(landing).rstrip('/')}/{source}/{CORRECTIONS}"
