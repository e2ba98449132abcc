"""OPTIMIZE (file compaction) and VACUUM of the lake's Delta tables, through the store.

VACUUM removes files no table version within the retention still needs; a retention below
Delta's default file retention (7 days, 168 h) is refused unless explicitly allowed, as Delta's
``retentionDurationCheck`` does, because a reader or time travel still inside it would break.

OPTIMIZE rewrites small files into larger ones. Delta readers on Databricks skip such
``dataChange = false`` commits, but the local runtime's streaming read treats any removed file
as a rewritten source, so tables that a local flow reads as a stream (bronze tables, the change
streams) are left out of OPTIMIZE here and reported; on Databricks the pipeline's own
maintenance optimizes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for the annotations only: the store's module loads Spark and Delta
    from cdc_lakehouse.storage import TableStore

DELTA_DEFAULT_RETENTION_HOURS = 168


class RetentionTooShort(ValueError):
    """VACUUM retention below Delta's safety limit without ``allow_short_retention``."""


def check_retention(hours: float, allow_short: bool) -> None:
    if hours < DELTA_DEFAULT_RETENTION_HOURS and not allow_short:
        raise RetentionTooShort(
            f"retention {hours} h is below Delta's {DELTA_DEFAULT_RETENTION_HOURS} h: readers and time travel "
            "inside it could lose files (pass --allow-short-retention if you are sure)"
        )


def optimize_and_vacuum(store: TableStore, retention_hours: float, allow_short: bool, streamed: dict[str, list[str]]) -> list[dict]:
    check_retention(retention_hours, allow_short)
    results = []
    for info in store.list_tables():
        result: dict = {"table": info.name}
        if info.name in streamed:
            result["optimize"] = f"skipped: read as a stream by {', '.join(sorted(streamed[info.name]))}"
        else:
            result["optimize"] = store.optimize(info.name)
        result["vacuumed_files"] = store.vacuum(info.name, retention_hours, enforce_retention=not allow_short)
        results.append(result)
    return results
