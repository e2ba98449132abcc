"""A flow's state between batches (cdc_lakehouse/flow_state.py), kept in a Delta table beside its
target: ``<schema>.__flow_state_<flow>``, as AUTO CDC keeps its own next to its target.

Crash safety. The state a batch keeps is written after the batch's output, with the same
idempotent-writer version (``Commit``) as the output. The table is one of the flow's sinks from
the first batch that keeps state on (its checkpoint says so before any write), so a run stopped
between the two writes leaves the state one batch behind the output:
the next update re-runs that batch from its planned input and the state the batch read, skips
the output (already committed) and writes the state. A state table that is missing although the
flow committed batches before (a lake from before flow state, a run stopped before the first
state write, a deleted table) reads as unknown (None): the flow rebuilds its state from history.

Empty state that stays empty is not written again: the batch is recorded as committed in its
checkpoint instead (runtime/checkpoint.py), so a batch that holds nothing back costs no commit.
"""

from __future__ import annotations

from pyspark.sql import DataFrame


def state_table_name(target: str, flow: str) -> str:
    schema, _, _ = target.rpartition(".")
    return f"{schema + '.' if schema else ''}__flow_state_{flow}"


class DeltaFlowState:
    def __init__(self, batch, target: str):
        self.batch = batch
        self.name = state_table_name(target, batch.flow.name)
        self._kept: DataFrame | None = None
        self._previous_rows: int | None = None  # rows of the state the batch read, once it has

    def previous(self) -> DataFrame | None:
        """Held rows are input: a batch with no new rows may have held ones to take now."""
        store = self.batch.store
        if not store.exists(self.name):
            return None
        self._previous_rows = store.row_count(self.name)
        self.batch.new_input = self.batch.new_input or self._previous_rows > 0
        return store.read(self.name)

    def keep(self, rows: DataFrame) -> None:
        self.batch.checkpoint.mark_keeps_state()  # before the output: see the module's docstring
        self._kept = rows

    def commit(self) -> None:
        """Write what the batch kept, once its output is committed."""
        if self._kept is None or self.batch.already_committed(self.name) or self._stays_empty():
            return
        self.batch.store.overwrite(self.name, self._kept, self.batch.commit())

    def _stays_empty(self) -> bool:
        """The batch read empty state and keeps none: the table already says so."""
        return self._previous_rows == 0 and self._kept is not None and self._kept.isEmpty()
