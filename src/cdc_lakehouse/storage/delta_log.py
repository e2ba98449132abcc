"""Reads of a Delta table's log files by the driver: its newest version, what a commit did,
which app transactions a version holds and how large the table is, without a Spark job.

Delta writes, after each of its commits, a checksum file (``<version>.crc``) that lists the
table's app transactions (``setTransactions``) among its totals. Asking a ``Snapshot`` for them
rebuilds the table's state from its log with Spark jobs when the snapshot was not the writer's
own; reading the file is one small JSON read. A version without a checksum file (a crash
between the commit and its checksum, or a writer that writes none) answers None here, and the
caller asks Delta.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

_COMMIT = re.compile(r"^(\d{20})\.json$")


def latest_version(log: Path) -> int | None:
    """The table's newest version: its newest commit file (Delta never removes the newest one;
    a writer creates it whole, as Delta's own listing finds it), or None without any. A listing
    of one folder, where asking Delta for a fresh snapshot costs the same listing and a dozen
    py4j round trips."""
    try:
        names = os.listdir(log)
    except FileNotFoundError:
        return None
    versions = [int(m.group(1)) for m in map(_COMMIT.match, names) if m]
    return max(versions) if versions else None


def commit_actions(log: Path, version: int) -> list[dict]:
    """The actions of commit ``version`` (``add``, ``remove``, ``txn``, ``commitInfo``, ...)."""
    with open(log / f"{version:020d}.json", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def checksum(log: Path, version: int) -> dict | None:
    """The checksum file of ``version`` (its totals: ``tableSizeBytes``, ``numFiles``, ...), or
    None when there is none."""
    try:
        return json.loads((log / f"{version:020d}.crc").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def checksum_transactions(log: Path, version: int) -> dict[str, int] | None:
    """Every app transaction of the table as of ``version`` (app id -> its version), from the
    version's checksum file; None when there is no such file or it does not list them."""
    transactions = (checksum(log, version) or {}).get("setTransactions")
    if transactions is None:
        return None
    return {t["appId"]: int(t["version"]) for t in transactions}


def listed_files(log: Path, version: int) -> tuple[list[str], str] | None:
    """The data files of ``version`` and its schema (Delta's JSON form), from the version's
    checksum file, when reading those files as Parquet reads the table: Delta lists every file
    there for a table of few files, and a file's rows are all live unless it has a deletion
    vector. None (ask Delta) without a checksum or its file list, for a partitioned table (its
    partition values are in the log, not the files), with a deletion vector, or with column
    mapping by id."""
    found = checksum(log, version)
    if found is None or "allFiles" not in found or "metadata" not in found:
        return None
    metadata = found["metadata"]
    if metadata.get("partitionColumns") or metadata.get("configuration", {}).get("delta.columnMapping.mode") == "id":
        return None
    files = found["allFiles"]
    if any(f.get("deletionVector") for f in files):
        return None
    return [f["path"] for f in files], metadata["schemaString"]
