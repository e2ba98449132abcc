"""The event buffer of an open binlog transaction: in memory up to its bound, then on disk."""

from __future__ import annotations

import pytest

from cdc_lakehouse.capture.event_buffer import EventBuffer


def test_lines_come_back_in_order_from_memory_then_disk(tmp_path):
    buffer = EventBuffer(tmp_path, limit=100)
    lines = [f'{{"pos":{i},"text":"{"x" * 20}"}}' for i in range(50)]
    for line in lines[:2]:
        buffer.append(line)
    assert not buffer.spilled and buffer.held_bytes > 0
    for line in lines[2:]:
        buffer.append(line)
    assert buffer.spilled and buffer.held_bytes == 0 and len(buffer) == 50
    assert list(buffer.lines()) == lines
    [spill] = list(tmp_path.iterdir())
    assert spill.name.startswith(".")  # hidden: landing readers skip it
    buffer.discard()
    assert list(tmp_path.iterdir()) == []


def test_an_unbounded_buffer_never_touches_the_disk(tmp_path):
    buffer = EventBuffer()
    for i in range(1000):
        buffer.append(f'{{"pos":{i}}}')
    assert not buffer.spilled and len(list(buffer.lines())) == 1000


def test_a_bound_needs_a_folder():
    with pytest.raises(ValueError, match="needs a folder"):
        EventBuffer(limit=10)
