"""What shadow transaction assembly still needs after a batch: its held state.

Shadow updates carry only the changed columns (CONTRACT §2.4), so a row's full image is the fold
of its whole history (silver/shadow_changes.py). The state keeps that fold's result instead, so
that a batch folds what landed onto it rather than the history. One DataFrame, its ``kind``
telling the rows apart (the other columns are NULL where they do not apply):

* ``pending``: distinct change rows (bronze columns) whose transaction row has not arrived yet;
* ``image``: per row (``schema``, ``table``, ``key``: the canonical key, silver/keys.py) its full
  image (``image``) after the last committed operation folded so far, with that operation's
  ``ord``. A deleted row keeps a tombstone (NULL image, its ord): a late operation on it must
  still be told from a new one.

A batch commits the pending and new change rows that now have a transaction row. Transaction
rows come from bronze (a semi join on the bronze transactions table: a narrow table, the only
part of bronze a batch reads). Each committed operation follows the stored image of its row,
standing for the row's earlier history, and the fold emits the new operations only.

That holds when everything is simply new. Otherwise the whole batch is assembled as before
state existed (``shadow_changes.net_changes``, from all of bronze) and the images of the rows
it folded are replaced: a transaction row whose txn_id had one before this batch (recorded
again with a later end_ts, or a re-delivered transactions file), or an operation at or before
its row's stored image in commit order (a late transaction, or a re-delivered change row of
an applied one). With no state (the first batch, or state lost), the batch is assembled from
all of bronze and the state is built from the whole history.

One difference from assembling from all of bronze: change rows of an already emitted
transaction that arrive later (another table's file) emit only their own net changes, where
the history would emit the whole transaction again (at the same sequence, which AUTO CDC
applies once).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from cdc_lakehouse import flow_state
from cdc_lakehouse.silver import arrivals
from cdc_lakehouse.silver import shadow_changes as sc

PENDING, IMAGE = "pending", "image"
# (new in this batch, all): the snapshot corrections of the source, change-stream rows.
Corrections = tuple[DataFrame, DataFrame] | None
ROW = ["schema", "table", "key"]
# An operation's place in commit order without its landing line: a re-delivered row has the
# same place as the row it repeats.
PLACE = ["position", "txn", "op_seq", "op_ts"]


def net_changes(new_changes: DataFrame, new_txns: DataFrame, all_changes: DataFrame, all_txns: DataFrame,
                corrections: Corrections = None) -> DataFrame:
    """``shadow_changes.net_changes``, from the held state where the runtime keeps flow state.
    ``corrections``: the snapshot corrections new in this batch and all of them."""
    state = flow_state.current()
    if state is None:
        return sc.net_changes(new_changes, new_txns, all_changes, all_txns, _all(corrections))
    net, kept = assemble(new_changes, new_txns, all_changes, all_txns, state.previous(), corrections)
    state.keep(kept)
    return net


def assemble(new_changes: DataFrame, new_txns: DataFrame, all_changes: DataFrame, all_txns: DataFrame,
             previous: DataFrame | None, corrections: Corrections = None) -> tuple[DataFrame, DataFrame]:
    """The batch's net changes and the state to keep, given the ``previous`` state. With state,
    of bronze only the transaction rows are read (a semi join on the narrow transactions table
    for the batch's transactions, an anti join for transactions recorded again); all of
    ``all_changes`` only where the batch falls back to the history. New snapshot corrections
    replace the images of their rows (at their place in commit order)."""
    if previous is None:
        return _from_history(new_changes, new_txns, all_changes, all_txns, _all(corrections))
    held = new_changes.unionByName(_pending(previous), allowMissingColumns=True).select(*new_changes.columns)
    if _recorded_again(new_txns, all_txns):
        return _fallback(new_changes, new_txns, all_changes, all_txns, previous, held, _all(corrections))
    txn_ids = held.select("txn_id").unionByName(new_txns.select("txn_id")).distinct()
    txns = sc.latest_transactions(all_txns.join(txn_ids, "txn_id", "left_semi"))
    ops = sc.operations(sc.distinct_changes(held), txns).localCheckpoint()  # read by each step below
    seeded = sc.with_corrections(ops, corrections and corrections[0])
    images = _images(previous).join(seeded.select(*ROW).distinct(), ROW, "left_semi")
    if _late(ops, images):  # a correction older than its row's image is folded in order, not late
        return _fallback(new_changes, new_txns, all_changes, all_txns, previous, held, _all(corrections))
    folded = sc.full_rows(seeded.unionByName(_as_operations(images, ops)))
    return sc.emitted(folded), _state(_waiting(held, txns), _replaced(_images(previous), folded))


def _all(corrections: Corrections) -> DataFrame | None:
    return corrections and corrections[1]


def _from_history(new_changes: DataFrame, new_txns: DataFrame, all_changes: DataFrame,
                  all_txns: DataFrame, corrections: DataFrame | None) -> tuple[DataFrame, DataFrame]:
    """No state: the whole history folded once gives the batch's net changes (of the
    transactions a new row belongs to) and every row's image."""
    txns = sc.latest_transactions(all_txns)
    folded = sc.full_rows(sc.with_corrections(sc.operations(sc.distinct_changes(all_changes), txns), corrections))
    net = sc.emitted(folded, sc.touched_transactions(new_changes, new_txns, txns))
    return net, _state(_waiting(all_changes, txns), _last_images(folded))


def _fallback(new_changes: DataFrame, new_txns: DataFrame, all_changes: DataFrame, all_txns: DataFrame,
              previous: DataFrame, held: DataFrame, corrections: DataFrame | None) -> tuple[DataFrame, DataFrame]:
    """Something is not simply new: the batch as from all of bronze, and the images of the rows
    it folded replaced by the ones that fold gives."""
    folded, touched = sc.history_fold(new_changes, new_txns, all_changes, all_txns, corrections)
    waiting = _waiting(held, all_txns.select("txn_id").distinct())
    return sc.emitted(folded, touched), _state(waiting, _replaced(_images(previous), folded))


def _recorded_again(new_txns: DataFrame, all_txns: DataFrame) -> bool:
    """Whether a new transaction row's txn_id had a transaction row before this batch (bronze
    provenance tells the batch's rows from earlier ones). One small job on a narrow table."""
    earlier = all_txns.join(new_txns.select(*arrivals.ARRIVAL), arrivals.ARRIVAL, "left_anti")
    return not new_txns.select("txn_id").join(earlier.select("txn_id"), "txn_id", "left_semi").isEmpty()


def _place(ord_column: str):
    return F.struct(*[F.col(f"{ord_column}.{f}").alias(f) for f in PLACE])


def _late(ops: DataFrame, images: DataFrame) -> bool:
    """Whether an operation is at or before its row's stored image in commit order: late, out of
    order, or a repeat of an applied one (its landing line aside)."""
    stored = images.select(*ROW, _place("ord").alias("__stored"))
    return not ops.join(stored, ROW).filter(_place("ord") <= F.col("__stored")).isEmpty()


def _as_operations(images: DataFrame, ops: DataFrame) -> DataFrame:
    """Each stored image as an operation (of ``ops``' columns) that the fold starts the row
    from: an insert of the image, or a delete for a tombstone; never emitted."""
    values = {
        "_source": F.col("_source"), "schema": F.col("schema"), "table": F.col("table"), "key": F.col("key"),
        "op": F.when(F.col("image").isNull(), F.lit("D")).otherwise(F.lit("I")), "ord": F.col("ord"),
        "vals": F.col("image"), "rename_in": F.lit(False), "emit": F.lit(False),
    }
    return images.select(*[values.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in ops.schema.fields])


def _last_images(folded: DataFrame) -> DataFrame:
    """Per folded row its image after its last operation (a key change's delete included)."""
    last = Window.partitionBy(*ROW).orderBy(F.col("ord").desc())
    return (
        folded.withColumn("__r", F.row_number().over(last)).filter("__r = 1")
        .select("_source", *ROW, F.col("after_map").alias("image"), "ord")
    )


def _replaced(images: DataFrame, folded: DataFrame) -> DataFrame:
    """The stored images with those of the folded rows replaced."""
    latest = _last_images(folded)
    return images.join(latest.select(*ROW), ROW, "left_anti").unionByName(latest)


def _waiting(changes: DataFrame, txns: DataFrame) -> DataFrame:
    """The distinct change rows (bronze columns) whose transaction has no row in ``txns``."""
    waiting = changes.join(txns.select("txn_id"), "txn_id", "left_anti")
    firsts = sc.distinct_changes(waiting).select("_source_file", "_line")
    return waiting.join(firsts, ["_source_file", "_line"], "left_semi").select(*changes.columns)


def _state(pending: DataFrame, images: DataFrame) -> DataFrame:
    return pending.withColumn("kind", F.lit(PENDING)).unionByName(
        images.withColumn("kind", F.lit(IMAGE)), allowMissingColumns=True
    )


def _pending(state: DataFrame) -> DataFrame:
    return state.filter(F.col("kind") == PENDING).drop("kind", "image", "ord")


def _images(state: DataFrame) -> DataFrame:
    return state.filter(F.col("kind") == IMAGE).select("_source", *ROW, "image", "ord")
