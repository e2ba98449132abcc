"""Streaming landing files: written line by line, published whole (``contract.publication``).

The workload generators write landing files far bigger than they want to hold in memory, and
rotate them by their own rules (lines per file, transaction boundaries); these classes keep the
file handling (temporary name, fsync, rename) out of those rules.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .publication import close_durably, open_temp, publish


class LandingFile:
    """One landing file: appears under its final name, whole, only when closed."""

    def __init__(self, final: Path):
        self.final = final
        self.lines = 0
        self._tmp, self._f = open_temp(final.parent)

    def write(self, line: str) -> None:
        """Append one line (a JSON text without its newline)."""
        self._f.write(line)
        self._f.write("\n")
        self.lines += 1

    def close(self) -> Path:
        close_durably(self._f)
        publish(self._tmp, self.final)
        return self.final


class FileSeries:
    """Numbered landing files in one folder, one open at a time; the caller decides when to
    start the next one (``rotate``). ``name`` maps a file number to the file's name."""

    def __init__(self, folder: Path, name: Callable[[int], str], first: int = 1):
        self.folder, self.name = folder, name
        self.number = first - 1
        self.file: LandingFile | None = None
        self.rotate()

    @property
    def lines(self) -> int:
        """Lines in the open file."""
        return self.file.lines if self.file else 0

    def rotate(self) -> None:
        """Publish the open file and open the next number."""
        self.close()
        self.number += 1
        self.file = LandingFile(self.folder / self.name(self.number))

    def write(self, line: str) -> None:
        assert self.file is not None, "written after close"
        self.file.write(line)

    def close(self) -> None:
        if self.file:
            self.file.close()
            self.file = None
