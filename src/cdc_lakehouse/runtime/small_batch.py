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
``SMALL_BATCH_PLAN``; one whose tables are all under ``TINY_BYTES`` also evaluates its
expressions without generating code (``TINY_BATCH_PLAN``). Its new rows are known once its
query is built, and building it already runs Spark jobs (checks of what landed, held state):
the flow plans as small when its last batch read only small tables whole and its target is
small, and writes as small when the rows it read say so too. A batch found large then writes with the session's own settings. The store's MERGE
into a small table decides the same way (storage/delta_spark.py). What a query means does not
depend on it: the suite runs with adaptive execution off throughout (tests/tiny_data.py).
"""

from __future__ import annotations

from cdc_lakehouse.runtime.flow_batch import WHOLE

ADAPTIVE = "spark.sql.adaptive.enabled"
SMALL_ROWS = 100_000
SMALL_BYTES = 64 * 1024 * 1024
SMALL_BATCH_PLAN = {ADAPTIVE: "false"}
# Under this, compiling a query's code costs more than running it interpreted (the settings
# tests/tiny_data.py gives the suite): a 100-change update of a 2,000-change history took
# 86-93 s with it against 101-113 s with the small-batch plan alone (2 rounds each, bench/RESULTS.md).
TINY_BYTES = 8 * 1024 * 1024
TINY_BATCH_PLAN = {**SMALL_BATCH_PLAN, "spark.sql.codegen.wholeStage": "false",
                   "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def batch_plan(store, rows_read: int, read_whole: set[str], target: str, session: dict[str, str],
               tiny_bytes: int = TINY_BYTES, small_bytes: int = SMALL_BYTES) -> dict[str, str]:
    """The settings of a batch of ``rows_read`` new rows that reads the tables ``read_whole``
    whole and writes ``target``: ``TINY_BATCH_PLAN``, ``SMALL_BATCH_PLAN`` (with the session's
    other settings), or ``session``'s own."""
    if rows_read > SMALL_ROWS:
        return session
    largest = max(_size(store, name) for name in sorted(read_whole | {target}))
    if largest < tiny_bytes:
        return {**session, **TINY_BATCH_PLAN}
    if largest < small_bytes:
        return {**session, **SMALL_BATCH_PLAN}
    return session


def _size(store, name: str) -> float:
    """A table not made yet is empty; one whose size its log does not tell counts as large."""
    if not store.exists(name):
        return 0
    size = store.size_bytes(name)
    return float("inf") if size is None else size


def session_settings(spark) -> dict[str, str]:
    """The session's own values of what the plans set, taken before an update."""
    return {key: str(spark.conf.get(key)) for key in TINY_BATCH_PLAN}


def planning_settings(batch, target: str, session: dict[str, str]) -> dict[str, str]:
    """While the batch's query is built: by the tables its last batch read whole. Explicit
    either way: a flow runs the flows of what it reads while it builds its query."""
    return batch_plan(batch.store, 0, _read_whole(batch.previous), target, session)


def writing_settings(batch, target: str, session: dict[str, str]) -> dict[str, str]:
    """While its output is written: by what the built query reads."""
    return batch_plan(batch.store, batch.rows_read, _read_whole(batch.offsets), target, session)


def _read_whole(offsets: dict) -> set[str]:
    return {key.removeprefix(WHOLE) for key in offsets if key.startswith(WHOLE)}
