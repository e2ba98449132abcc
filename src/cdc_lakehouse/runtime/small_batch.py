"""How a flow's batch is executed, by the size of what it reads (docs/incremental.md, "How a
small batch runs").

Spark's adaptive execution re-plans a query between its stages, and to do so submits each
shuffle and broadcast stage as a Spark job of its own. On the few hundred rows an incremental
update brings, that is most of an update's jobs and little of its gain: a 100-change update of a
2,000-change history on delta-spark ran 454 Spark jobs without it against 731 with it, in
112.9 s against 119.2 s (median of 3, bench/RESULTS.md). On large inputs its re-planning pays (a
broadcast join once it sees how small one side is), and large loads keep it.

So a flow's batch is *small* when its new rows (streaming reads and landing files) are at most
``SMALL_ROWS`` and each table it reads whole, and its target, is under ``SMALL_BYTES`` (from the
tables' logs, no Spark job: ``TableStore.size_bytes``); a small batch runs with
``SMALL_BATCH_PLAN``. Its new rows are known once its query is built, and building it already
runs Spark jobs (checks of what landed, held state): the flow plans as small when its last batch
read only small tables whole and its target is small, and writes as small when the rows it read
say so too. A batch found large then writes with the session's own settings. The store's MERGE
into a small table decides the same way (storage/delta_spark.py). What a query means does not
depend on it: the suite runs with adaptive execution off throughout (tests/tiny_data.py).
"""

from __future__ import annotations

from cdc_lakehouse.runtime.flow_batch import WHOLE

ADAPTIVE = "spark.sql.adaptive.enabled"
SMALL_ROWS = 100_000
SMALL_BYTES = 64 * 1024 * 1024
SMALL_BATCH_PLAN = {ADAPTIVE: "false"}


def is_small(store, rows_read: int, read_whole: set[str], target: str, limit_bytes: int = SMALL_BYTES) -> bool:
    """Whether a batch of ``rows_read`` new rows that reads the tables ``read_whole`` whole and
    writes ``target`` is a small one."""
    if rows_read > SMALL_ROWS:
        return False
    return all(_small_table(store, name, limit_bytes) for name in sorted(read_whole | {target}))


def _small_table(store, name: str, limit_bytes: int) -> bool:
    """A table not made yet is empty; one whose size its log does not tell counts as large."""
    if not store.exists(name):
        return True
    size = store.size_bytes(name)
    return size is not None and size < limit_bytes


def session_settings(spark) -> dict[str, str]:
    """The session's own values of what ``SMALL_BATCH_PLAN`` sets, taken before an update."""
    return {key: str(spark.conf.get(key)) for key in SMALL_BATCH_PLAN}


def planning_settings(batch, target: str, session: dict[str, str]) -> dict[str, str]:
    """While the batch's query is built: by the tables its last batch read whole. Explicit
    either way: a flow runs the flows of what it reads while it builds its query."""
    return SMALL_BATCH_PLAN if is_small(batch.store, 0, _read_whole(batch.previous), target) else session


def writing_settings(batch, target: str, session: dict[str, str]) -> dict[str, str]:
    """While its output is written: by what the built query reads; ``session`` for a large batch."""
    return SMALL_BATCH_PLAN if is_small(batch.store, batch.rows_read, _read_whole(batch.offsets), target) else session


def _read_whole(offsets: dict) -> set[str]:
    return {key.removeprefix(WHOLE) for key in offsets if key.startswith(WHOLE)}
