"""One pipeline update at a time on a lake (issue 41 case 2).

Two local runs on one lake both read every new landing file and both append it: bronze held every
line twice, and so did the change stream. On Databricks the service runs one update of a pipeline
at a time; locally ``run_pipeline`` takes this lock first.

The lock is an advisory ``flock`` on a hidden file in the lake, which the operating system
releases when its holder exits in any way, crash and kill -9 included: a lock never outlives its
run, so there is no stale lock to break by hand. The file names the holder (host, pid, start),
so the error a second run gets says who to wait for. ``flock`` holds across processes of one
machine; a lake shared over a network file system by several machines is not covered.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

LOCK_FILE = ".cdc-lakehouse.lock"  # hidden: table listings skip it


class LakeLocked(RuntimeError):
    """Another update is running on the lake."""

    def __init__(self, lake: Path, holder: str):
        super().__init__(f"another pipeline update is running on {lake} ({holder or 'holder unknown'}): "
                         "wait for it to end; the lock goes with its process, even when that is killed")


@contextmanager
def lake_lock(lake: Path) -> Iterator[None]:
    """Hold the lake's lock while the block runs, or raise LakeLocked at once."""
    lake.mkdir(parents=True, exist_ok=True)
    with open(lake / LOCK_FILE, "a+", encoding="utf-8") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            raise LakeLocked(lake, f.read().strip()) from None
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                            "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}))
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
