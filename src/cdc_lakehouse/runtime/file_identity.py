"""What a landing file was when a flow read it, and what it is now.

The local file source identifies a file by its path, size, modification time and content hash
(Auto Loader by its path alone). A file read before is, when listed again:

* unchanged: same size and time, or same content;
* grown: what was read is still its beginning (a writer appended lines): it is read again from
  the start of the line that was last when it was read (that line may have been cut), and bronze
  keeps only the lines from there on (``_metadata.file_block_start``, bronze/lines.py);
* changed: other content under the same name (rewritten, truncated, or compressed again): it is
  not read again; bronze records each file's size and time (``_file_size``,
  ``_file_modified_at``), so ``gold.landing_summary`` reports it (bronze/summary.py).
"""

from __future__ import annotations

import hashlib
import os

Identity = list  # [size, mtime_ns, sha256 hex] as a checkpoint records it (JSON)


def identity(path: str) -> Identity:
    stat = os.stat(path)
    with open(path, "rb") as f:
        return [stat.st_size, stat.st_mtime_ns, hashlib.sha256(f.read()).hexdigest()]


def looks_unchanged(path: str, was: Identity | None) -> bool:
    """Without reading it: same size and modification time (or nothing recorded: files read
    before identities were recorded count as unchanged)."""
    if was is None:
        return True
    stat = os.stat(path)
    return [stat.st_size, stat.st_mtime_ns] == was[:2]


UNCHANGED, GROWN, CHANGED = "unchanged", "grown", "changed"


def compare(path: str, was: Identity | None) -> tuple[str, int]:
    """``(UNCHANGED | GROWN | CHANGED, offset)``; for a grown file, the byte offset (a line
    start) to read it again from."""
    if was is None or looks_unchanged(path, was):
        return UNCHANGED, 0
    with open(path, "rb") as f:
        data = f.read()
    size = was[0]
    if hashlib.sha256(data[:size]).hexdigest() != was[2]:
        return CHANGED, 0
    if len(data) == size:
        return UNCHANGED, 0  # touched, not changed
    if path.endswith(".gz"):
        return CHANGED, 0  # a compressed file grows only by being compressed again as a whole
    return GROWN, data.rfind(b"\n", 0, size) + 1
