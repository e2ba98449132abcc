"""Landing folders that no flow reads: a source the onboarding does not name, or a folder its
capture does not land in (CONTRACT §2.0 layout). Bronze reads only the folders of onboarded
sources, so without this list whatever lands elsewhere would be ignored without a word.

The landing is listed with the file system API, not Spark: two levels of folder names cost
nothing, and a Unity Catalog volume (``/Volumes/...``) is a file path on Databricks too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cdc_lakehouse.bronze.kinds import landing_kinds
from cdc_lakehouse.config import Onboarding
from cdc_lakehouse.paths import local_path


@dataclass(frozen=True)
class UnreadFolder:
    source: str | None  # None: an entry of the landing root that is not a source folder
    folder: str  # relative to the landing root
    files: int
    reason: str

    @property
    def warning(self) -> str:
        return f"landing {self.folder} ({self.files} file{'' if self.files == 1 else 's'}): {self.reason}"


def unread_folders(landing_path: str, onboarding: Onboarding) -> list[UnreadFolder]:
    """Every entry of the landing that no flow reads, with its file count and why."""
    root = _file_path(landing_path)
    if root is None:
        return [UnreadFolder(None, landing_path, 0, "the landing is not a file path: folders no flow reads "
                                                    "are not listed")]
    if not root.is_dir():
        return []
    read = _read_folders(onboarding)
    unread = []
    for entry in _entries(root):
        if not entry.is_dir():
            unread.append(UnreadFolder(None, entry.name, 1, "a file outside every <source>/ folder"))
        elif entry.name not in read:
            unread += [UnreadFolder(entry.name, f"{entry.name}/{folder.name}", _files(folder),
                                    f"source {entry.name} is not onboarded: no enabled flow names it")
                       for folder in _entries(entry)]
        else:
            unread += [UnreadFolder(entry.name, f"{entry.name}/{folder.name}", _files(folder),
                                    f"source {entry.name} lands in {', '.join(sorted(read[entry.name]))} only "
                                    "(its capture); this folder is not read")
                       for folder in _entries(entry) if folder.name not in read[entry.name]]
    return unread


def _read_folders(onboarding: Onboarding) -> dict[str, set[str]]:
    """Source -> the top folders under ``<landing>/<source>/`` its bronze tables read."""
    read: dict[str, set[str]] = {}
    for source, kind in landing_kinds(onboarding):
        read.setdefault(source, set()).add(kind.folder.split("/")[0])
    return read


def _file_path(landing_path: str) -> Path | None:
    """The landing as a local path (``dbfs:/Volumes/...`` is ``/Volumes/...``); None for a
    URI of another scheme."""
    path = local_path(landing_path.removeprefix("dbfs:"))
    return None if "://" in path else Path(path)


def _entries(folder: Path) -> list[Path]:
    # Hidden entries (.DS_Store, a writer's .tmp files) are not landed data, as Spark skips them.
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


def _files(folder: Path) -> int:
    if not folder.is_dir():
        return 1
    return sum(1 for _, _, names in os.walk(folder) for name in names if not name.startswith("."))
