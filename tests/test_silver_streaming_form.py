"""The silver change stream's streaming form (Databricks) emits what its batch form (local runner)
does, run by Spark Structured Streaming for real.

The demo's bronze rows are delivered one landing file per micro-batch, in two updates: the
first with the first files, the second with the rest, as two pipeline updates would see them.
Each update's static side is the bronze rows landed so far. The batch form is run on the same
two deliveries; both must emit the same change rows, update by update.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from cdc_lakehouse.silver.change_stream import binlog_change_batch, shadow_change_batch
from cdc_lakehouse.storage import DeltaRsStore

FIRST_UPDATE_ENDS = dt.datetime(2026, 1, 1, 0, 0, 2)


class Deliveries:
    """A bronze table's rows, one parquet file per landing file, stamped as if bronze had
    ingested one landing file per micro-batch (``_ingested_at``) in file name order."""

    def __init__(self, spark, schema, folder: Path, files: list[str]):
        self.spark, self.schema, self.folder, self.files = spark, schema, folder, files

    @classmethod
    def write(cls, spark, rows: DataFrame, folder: Path) -> Deliveries:
        files = sorted(r[0] for r in rows.select("_source_file").distinct().collect())
        for i, name in enumerate(files):
            landed = rows.filter(F.col("_source_file") == name).withColumn("_ingested_at", F.lit(_ingested_at(name)))
            landed.coalesce(1).write.parquet(str(folder / f"staged-{i:03}"))
        return cls(spark, rows.schema, folder, files)

    def deliver(self, update: int) -> None:
        """Move the update's files where the stream reads them (the first update: the files up
        to FIRST_UPDATE_ENDS)."""
        live = self.folder / "live"
        live.mkdir(exist_ok=True)
        for i, name in enumerate(self.files):
            if (_ingested_at(name) <= FIRST_UPDATE_ENDS) == (update == 1):
                for part in sorted((self.folder / f"staged-{i:03}").glob("*.parquet")):
                    part.rename(live / f"{i:03}-{part.name}")

    def stream(self) -> DataFrame:
        return (self.spark.readStream.schema(self.schema).option("maxFilesPerTrigger", 4)
                .parquet(str(self.folder / "live")))

    def landed(self) -> DataFrame:
        # By file, as the Delta store reads a table's version: a folder's plan is the same in both
        # updates, so the batch form's cached events of the first would stand for the second.
        files = sorted(str(f) for f in (self.folder / "live").glob("*.parquet"))
        return self.spark.read.schema(self.schema).parquet(*files)

    def landed_in(self, update: int) -> DataFrame:
        first = F.col("_ingested_at") <= F.lit(FIRST_UPDATE_ENDS)
        return self.landed().filter(first if update == 1 else ~first)


def _ingested_at(source_file: str) -> dt.datetime:
    """Landing files of the same number arrive together: -0001 and .000001 first, and so on."""
    number = int("".join(ch for ch in Path(source_file).stem if ch.isdigit())[-3:])
    return dt.datetime(2026, 1, 1) + dt.timedelta(seconds=number)


def streamed(flow, inputs: list[Deliveries], checkpoint: Path, out: Path) -> DataFrame:
    """Runs one update of the streaming form to its end and returns all it has emitted so far."""
    df = flow(*[d.stream() for d in inputs], *[d.landed() for d in inputs])
    query = (df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None
    return df.sparkSession.read.parquet(str(out))


def batched(flow, inputs: list[Deliveries], update: int) -> DataFrame:
    return flow(*[d.landed_in(update) for d in inputs], *[d.landed() for d in inputs])


def both_forms(flow, inputs: list[Deliveries], tmp_path: Path) -> None:
    emitted = None
    for update in (1, 2):
        for d in inputs:
            d.deliver(update)
        # Materialized now, as the update writes it: evaluated later, it would see later files.
        batch = batched(flow, inputs, update).localCheckpoint()
        emitted = batch if emitted is None else emitted.unionByName(batch)
        stream = streamed(flow, inputs, tmp_path / "checkpoint", tmp_path / "out")
        assert batch.count() > 0
        assertDataFrameEqual(stream, emitted, checkRowOrder=False)


@pytest.fixture
def bronze(spark, demo_lake):
    store = DeltaRsStore(spark, demo_lake)
    return lambda name: store.read(f"bronze.{name}")


def test_binlog_change_stream_streamed_emits_what_the_batch_form_does(spark, bronze, tmp_path):
    events = Deliveries.write(spark, bronze("shop_binlog_events"), tmp_path / "events")
    sessions = bronze("shop_sessions")

    def flow(new_events, all_events):
        return binlog_change_batch(new_events, all_events, sessions)

    assert len(events.files) > 2
    both_forms(flow, [events], tmp_path)


def test_shadow_change_stream_streamed_emits_what_the_batch_form_does(spark, bronze, tmp_path):
    changes = Deliveries.write(spark, bronze("shop_pg_shadow_changes"), tmp_path / "changes")
    txns = Deliveries.write(spark, bronze("shop_pg_shadow_transactions"), tmp_path / "txns")

    def flow(new_changes, new_txns, all_changes, all_txns):
        return shadow_change_batch(new_changes, new_txns, all_changes, all_txns)

    both_forms(flow, [changes, txns], tmp_path)
