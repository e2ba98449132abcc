"""The events of one open binlog transaction, in memory up to a bound and on disk past it.

A transaction is published whole, at its end (binlog.py), so its events must be kept until
then. Kept as a list, a transaction of millions of rows would take the capture's memory with
it; past ``limit`` bytes the buffer moves its lines to a hidden file next to the landing files
and appends there, and publishing copies that file line by line. The file's name starts with the
landing's temporary prefix: readers skip it, and a crashed capture's leftovers are removed at the
next start (``landing.remove_orphans``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

from cdc_lakehouse.contract.publication import TMP_PREFIX

UNBOUNDED = -1
DEFAULT_BUFFER_BYTES = 64 * 2**20  # what binlog capture holds in memory


class EventBuffer:
    def __init__(self, folder: Path | None = None, limit: int = UNBOUNDED):
        """``folder``: where to spill (required with a ``limit``); ``limit``: characters of JSON
        text (bytes, for ASCII) held in memory before spilling (``UNBOUNDED``: never)."""
        if limit != UNBOUNDED and folder is None:
            raise ValueError("an event buffer with a limit needs a folder to spill to")
        self.folder, self.limit = folder, limit
        self._lines: list[str] = []
        self._held = 0  # characters of _lines, newlines included
        self._count = 0
        self._spill: Path | None = None
        self._file = None

    def __len__(self) -> int:
        return self._count

    @property
    def held_bytes(self) -> int:
        """Characters of JSON text held in memory (not spilled): the bound's measure."""
        return self._held

    @property
    def spilled(self) -> bool:
        return self._spill is not None

    def append(self, line: str) -> None:
        """One event as JSON text (no newline)."""
        self._count += 1
        if self._file is not None:
            self._file.write(line + "\n")
            return
        self._lines.append(line)
        self._held += len(line) + 1
        if self.limit != UNBOUNDED and self._held > self.limit:
            self._spill_to_disk()

    def lines(self) -> Iterator[str]:
        """Every line, in the order appended; reads a spill file back one line at a time."""
        if self._file is not None:
            self._file.flush()
            with open(self._spill, encoding="utf-8", newline="\n") as f:
                for line in f:
                    yield line.rstrip("\n")
        yield from self._lines

    def discard(self) -> None:
        """Drop what is held and remove the spill file (after publishing, or when the
        transaction is dropped)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._spill is not None:
            self._spill.unlink(missing_ok=True)
            self._spill = None
        self._lines, self._held = [], 0

    def _spill_to_disk(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._spill = self.folder / f"{TMP_PREFIX}{uuid.uuid4().hex}.spill"
        self._file = open(self._spill, "w", encoding="utf-8", newline="\n")
        for line in self._lines:
            self._file.write(line + "\n")
        self._lines, self._held = [], 0
