"""The silver change stream's streaming form (Databricks) emits what its batch form (local runner)
does, run by Spark Structured Streaming for real.

The demo's bronze rows are delivered in two pipeline updates, landing file by landing file: the
first update gets the files numbered 1 and 2, the second the files numbered 3 and a second
delivery of one file of the first update (a re-delivered file re-emits its transactions). Within
an update the stream reads ``files_per_batch`` files per micro-batch; the static side is the
bronze rows landed so far, as in a triggered update, where silver runs after bronze. The batch
form is run on the same two deliveries; both must emit the same change rows, update by update.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.silver.change_stream import binlog_change_batch, shadow_change_batch
from cdc_lakehouse.storage import LakeStore

UPDATE_OF_NUMBER = {1: 1, 2: 1, 3: 2}
AGAIN = ".again"


class Deliveries:
    """A bronze table's rows, one parquet file per landing file, stamped as bronze would stamp
    them had it ingested each landing file in a micro-batch of its own (``_ingested_at``)."""

    def __init__(self, spark, schema, folder: Path, updates: list[int], files_per_batch: int):
        self.spark, self.schema, self.folder, self.updates = spark, schema, folder, updates
        self.files_per_batch = files_per_batch

    @classmethod
    def write(cls, spark, rows: DataFrame, folder: Path, again: str, files_per_batch: int) -> Deliveries:
        """``again``: the landing file (name ending) the second update delivers once more."""
        names = sorted(r[0] for r in rows.select("_source_file").distinct().collect())
        files = [(UPDATE_OF_NUMBER[_number(name)], name, name) for name in names]
        files += [(2, name + AGAIN, name) for name in names if name.endswith(again)]
        assert len(files) == len(names) + 1, again
        files.sort()
        for i, (update, landed_as, name) in enumerate(files):
            landed = rows.filter(F.col("_source_file") == name).withColumns(
                {"_source_file": F.lit(landed_as), "_ingested_at": F.lit(_stamp(update, i))})
            landed.coalesce(1).write.parquet(str(folder / f"staged-{i:03}"))
        return cls(spark, rows.schema, folder, [update for update, _, _ in files], files_per_batch)

    def deliver(self, update: int) -> None:
        """Moves the update's files where the stream reads them, in the order they landed."""
        live = self.folder / "live"
        live.mkdir(exist_ok=True)
        for i, of_update in enumerate(self.updates):
            if of_update == update:
                for part in sorted((self.folder / f"staged-{i:03}").glob("*.parquet")):
                    part.rename(live / f"{i:03}-{part.name}")

    def stream(self) -> DataFrame:
        return (self.spark.readStream.schema(self.schema).option("maxFilesPerTrigger", self.files_per_batch)
                .parquet(str(self.folder / "live")))

    def landed(self) -> DataFrame:
        # By file, as the Delta store reads a table's version: a folder's plan is the same in both
        # updates, so the batch form's cached events of the first would stand for the second.
        files = sorted(str(f) for f in (self.folder / "live").glob("*.parquet"))
        return self.spark.read.schema(self.schema).parquet(*files)

    def landed_in(self, update: int) -> DataFrame:
        return self.landed().filter(F.col("_ingested_at").between(_stamp(update, 0), _stamp(update, 999)))


def _number(source_file: str) -> int:
    """Landing files of the same number arrive in the same update: -0001 and .000001 first."""
    return int("".join(ch for ch in Path(source_file).stem if ch.isdigit())[-3:])


def _stamp(update: int, file: int) -> dt.datetime:
    """Bronze's ``_ingested_at`` for a file: every file of a later update lands later."""
    return dt.datetime(2026, 1, 1) + dt.timedelta(seconds=1000 * update + file)


def streamed(flow, inputs: list[Deliveries], checkpoint: Path, out: Path) -> tuple[DataFrame, int]:
    """Runs one update of the streaming form to its end: all it has emitted so far, and in how
    many micro-batches this update read input."""
    df = flow(*[d.stream() for d in inputs], *[d.landed() for d in inputs])
    query = (df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None
    batches = sum(1 for p in query.recentProgress if p["numInputRows"] > 0)
    return df.sparkSession.read.parquet(str(out)), batches


def batched(flow, inputs: list[Deliveries], update: int) -> DataFrame:
    return flow(*[d.landed_in(update) for d in inputs], *[d.landed() for d in inputs])


def both_forms(flow, inputs: list[Deliveries], tmp_path: Path) -> None:
    emitted, batches = None, []
    for update in (1, 2):
        for d in inputs:
            d.deliver(update)
        # Materialized now, as the update writes it: evaluated later, it would see later files.
        batch = batched(flow, inputs, update).localCheckpoint()
        emitted = batch if emitted is None else emitted.unionByName(batch)
        stream, micro_batches = streamed(flow, inputs, tmp_path / "checkpoint", tmp_path / "out")
        assert batch.count() > 0
        assertDataFrameEqual(stream, emitted, checkRowOrder=False)
        batches.append(micro_batches)
    assert max(batches) > 1, batches


@pytest.fixture
def bronze(spark, demo_lake):
    store = LakeStore(spark, demo_lake)
    return lambda name: store.read(f"bronze.{name}")


def test_binlog_change_stream_streamed_emits_what_the_batch_form_does(spark, bronze, tmp_path):
    events = Deliveries.write(spark, bronze("shop_binlog_events"), tmp_path / "events", "000001.jsonl", 1)
    sessions = bronze("shop_sessions")

    def flow(new_events, all_events):
        return binlog_change_batch(new_events, all_events, sessions)

    both_forms(flow, [events], tmp_path)


def test_shadow_change_stream_streamed_emits_what_the_batch_form_does(spark, bronze, tmp_path):
    changes = Deliveries.write(spark, bronze("shop_pg_shadow_changes"), tmp_path / "changes", "orders/changes-0002.jsonl", 6)
    txns = Deliveries.write(spark, bronze("shop_pg_shadow_transactions"), tmp_path / "txns", "txns-0001.jsonl", 6)

    def flow(new_changes, new_txns, all_changes, all_txns):
        return shadow_change_batch(new_changes, new_txns, all_changes, all_txns)

    both_forms(flow, [changes, txns], tmp_path)
