"""State a flow keeps from one batch to the next, so that a batch reads what landed plus that
state instead of the whole history of its sources (held transactions, for instance).

The seam between the shared DataFrame logic, which asks for the state, and the runtime that
keeps it: the local runtime sets ``current`` while a flow's batch runs (runtime/flow_state.py
keeps it in a Delta table committed after the batch's output). Where no runtime provides one
(Databricks: the flows there are streaming queries), ``current()`` is None and the logic reads
its sources as it did before.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol

from pyspark.sql import DataFrame


class FlowState(Protocol):
    def previous(self) -> DataFrame | None:
        """The rows the flow's last batch kept; None when it is not known (the flow's first
        batch with state, or state lost): then the flow must rebuild it from its history."""

    def keep(self, rows: DataFrame) -> None:
        """What the next batch reads; committed after this batch's output, never before."""


_current: ContextVar[FlowState | None] = ContextVar("flow_state", default=None)


def current() -> FlowState | None:
    return _current.get()


def set_current(state: FlowState | None):
    """For the runtime: the state of the batch about to run; returns the token to reset."""
    return _current.set(state)


def reset_current(token) -> None:
    _current.reset(token)


def planned_per_batch() -> bool:
    """Whether the running flow's query is planned for this one batch (the local runtime), so a
    decision taken from what its sources hold now (say, "no quarantined line to hold anything")
    holds for all it reads. A streaming query (Databricks) is planned once for every batch to
    come: it must keep the general plan."""
    return current() is not None
