"""Durable atomic publication of landing files and of the records kept beside them.

A file appears under its final name only when complete and on disk: it is written to a hidden
temporary name in the same folder, fsynced, renamed, and the folder is fsynced. Readers therefore
never see a partial file, and a crash leaves at most a temporary file that the next run removes
(``remove_orphans``). Capture, snapshot reconcile and housekeeping all publish this way.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TextIO

TMP_PREFIX = ".cdc-tmp-"


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_temp(folder: Path) -> tuple[Path, TextIO]:
    """A new hidden temporary file in ``folder``, open for writing text."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"{TMP_PREFIX}{uuid.uuid4().hex}.part"  # no .jsonl: never listed as input
    return tmp, open(tmp, "w", encoding="utf-8", newline="\n")


def close_durably(f: TextIO) -> None:
    """Close a file once its content is on disk (before it may be renamed into place)."""
    f.flush()
    os.fsync(f.fileno())
    f.close()


def write_temp(folder: Path, lines: Iterable[str]) -> Path:
    """Write ``lines`` (JSON texts) to a durable hidden temporary file in ``folder``."""
    tmp, f = open_temp(folder)
    try:
        for line in lines:
            f.write(line)
            f.write("\n")
    except BaseException:
        f.close()
        raise
    close_durably(f)
    return tmp


def publish(tmp: Path, final: Path) -> None:
    """Rename a durable temporary file to its final name and make the rename durable."""
    os.replace(tmp, final)
    fsync_dir(final.parent)


def write_file(final: Path, lines: Iterable[str]) -> Path:
    publish(write_temp(final.parent, lines), final)
    return final


def remove_orphans(folder: Path, keep: AbstractSet[str] = frozenset()) -> int:
    """Delete temporary files a crashed run left behind (except those named in ``keep``)."""
    if not folder.is_dir():
        return 0
    n = 0
    for p in folder.glob(f"{TMP_PREFIX}*"):
        if str(p) not in keep:
            p.unlink(missing_ok=True)
            n += 1
    return n


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` (a small record, e.g. a status or an acknowledgement) whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    publish(write_temp(path.parent, [text]), path)


def publish_new(tmp: Path, final: Path) -> None:
    """Rename a durable file into place (same folder), never over an existing one."""
    if final.exists():
        raise FileExistsError(f"{final} exists: it is published once and never rewritten")
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    publish(tmp, final)
