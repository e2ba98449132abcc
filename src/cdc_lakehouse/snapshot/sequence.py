"""Where corrective changes sit in the change stream's order.

``sequence`` is ``struct<position: long, txn: string>`` and AUTO CDC orders by it. A snapshot
taken at a position already contains the transaction committed *at* that position, and none
committed later, so its corrections must sort after the one and before the others:

* ``position`` is the sequence position of the change committed at the snapshot's position:
  binlog ``{file, pos}`` -> the LSN ``file number * 2^32 + pos`` (silver's ``log_position``);
  shadow ``{txn_end_ts}`` -> unix microseconds (silver's shadow sequence);
  ``null`` ("as of now") -> one past the highest position in ``silver.<source>_changes``, i.e.
  after everything silver has, including earlier snapshot corrections.
* ``txn`` is U+10FFFF followed by ``snapshot:<snapshot_id>``. Spark compares strings by their
  UTF-8 bytes and U+10FFFF (F4 8F BF BF) is the largest code point, so at an equal position
  the correction sorts after every real transaction id (``xid:..``, ``gtid:..``, shadow ids),
  while any transaction committed later has a larger position and still wins.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_lakehouse.snapshot.manifest import InvalidSnapshot, Manifest

SORTS_LAST = "\U0010FFFF"


def txn_id(snapshot_id: str) -> str:
    return f"snapshot:{snapshot_id}"


@dataclass(frozen=True)
class Sequence:
    position: int
    txn: str

    @classmethod
    def of_snapshot(cls, position: int, snapshot_id: str) -> "Sequence":
        return cls(position, SORTS_LAST + txn_id(snapshot_id))

    def column(self) -> Column:
        return F.struct(F.lit(self.position).cast("long").alias("position"), F.lit(self.txn).alias("txn"))

    def as_dict(self) -> dict:
        return {"position": self.position, "txn": self.txn.replace(SORTS_LAST, "\\U0010FFFF")}


def snapshot_sequence(manifest: Manifest, capture: str | None, store, changes_table: str) -> Sequence:
    """The sequence of a snapshot's corrections; a position of the other capture kind is invalid
    (a binlog source's commit times are seconds that tie and step back, CONTRACT §2.1, so a
    time cannot name a point in its log; a shadow source has no log positions)."""
    kind = manifest.position.kind
    if capture is not None and kind != "now" and kind != capture:
        raise InvalidSnapshot(
            f"position {kind} does not fit a {capture} source (binlog sources take {{file, pos}}, "
            "shadow sources {txn_end_ts}, either may give null)"
        )
    position = manifest.position.sequence_position()
    if position is None:
        position = highest_position(store, changes_table) + 1
    return Sequence.of_snapshot(position, manifest.snapshot_id)


def highest_position(store, changes_table: str) -> int:
    """The highest ``sequence.position`` silver has for the source; 0 before the first change."""
    if not store.exists(changes_table):
        return 0
    top = store.column_max(changes_table, "sequence.position")
    return 0 if top is None else int(top)
