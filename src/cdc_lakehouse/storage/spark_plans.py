"""The leaves of a DataFrame's plan in the JVM: what the Arrow handoff and the runtime ask of
them (which files or Delta tables a batch reads, whether it computes anything new)."""

from __future__ import annotations

from collections.abc import Iterator


def leaves(plan) -> Iterator:
    """The leaf nodes of a JVM logical plan (``queryExecution().analyzed()`` and the like)."""
    nodes = plan.collectLeaves().iterator()
    while nodes.hasNext():
        yield nodes.next()


def kind(node) -> str:
    """A plan node's class name: ``LogicalRelation``, ``InMemoryRelation``, ``LocalRelation``..."""
    return node.getClass().getSimpleName()
