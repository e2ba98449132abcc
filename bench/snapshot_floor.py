"""The floor under the snapshot benchmark's incremental step on this machine and storage: what
any reconciliation must spend, however it is written. It bounds the ratio full reload /
incremental that the benchmark can show here.

* ``compare_s``: Spark reads a snapshot's lines with the replica's column types, digests each
  row's values (one 64-bit hash) and full-outer-joins keys and digests with the replica's: the
  least work that finds a difference at all (``differing_keys``). The faster of two runs.
* ``merge_s``: per table an SCD2 replica keeps (the replica, its history and the AUTO CDC state
  of each), a delta-spark MERGE of as many rows as the difference has keys, spread over the key
  range like the difference, each row as it is. Without deletion vectors a MERGE rewrites every
  file that holds a matched key, and keys spread over the range touch them all: the least an
  apply of the difference pays per table.

Full reload / (compare + merges) is what a pipeline that did nothing else (no change stream,
no ordering, no history fold, no anomalies) would reach here (``ratio_full_reload_over_floor``
in the benchmark's results).
"""

from __future__ import annotations

import time
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import functions as F

from cdc_lakehouse.cdc.apply import START_AT, state_table_name

PICK = 3  # key % step == PICK: keys the benchmark's difference leaves alone, so every table holds them


def tables(replica: str, key: str, scd: int) -> dict[str, list[str]]:
    """The tables an apply of the difference MERGEs into, each with its MERGE key."""
    keyed = {replica: [key], state_table_name(replica): [key]}
    if scd == 2:
        history = f"{replica}_history"
        keyed |= {history: [key, START_AT], state_table_name(history): [key]}
    return keyed


def compare(spark, store, replica: str, key: str, parts: list[Path]) -> tuple[float, int]:
    """(seconds, keys that differ): the faster of two runs."""
    table = store.read(replica)
    snapshot = spark.read.schema(table.schema).json([str(p) for p in parts])
    values = [c for c in table.columns if c != key]

    def digested(df):
        return df.select(key, F.xxhash64(*values).alias("d"))

    seconds = []
    for _ in range(2):
        started = time.perf_counter()
        s, r = digested(snapshot).alias("s"), digested(table).alias("r")
        joined = s.join(r, F.col(f"s.{key}") == F.col(f"r.{key}"), "full_outer")
        differing = joined.filter(~F.col("s.d").eqNullSafe(F.col("r.d"))).count()
        seconds.append(time.perf_counter() - started)
    return round(min(seconds), 2), differing


def merge_s(store, name: str, keys: list[str], step: int) -> float:
    """A MERGE of the rows whose first key is ``PICK`` modulo ``step``, as they are."""
    # Read and cached first, as the apply's own input is: the floor times the MERGE alone.
    rows = store.read(name).filter(F.col(keys[0]) % step == PICK).localCheckpoint()
    on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in keys)
    started = time.perf_counter()
    merge = DeltaTable.forPath(store.spark, str(store.path(name))).alias("t").merge(rows.alias("s"), on)
    merge.whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    return round(time.perf_counter() - started, 2)


def measure(spark, store, replica: str, key: str, parts: list[Path], step: int, scd: int) -> dict:
    """The floor, on a lake whose replica holds the snapshot (it adds a version to each table
    with the same rows: run it last)."""
    merges = {name: merge_s(store, name, keys, step) for name, keys in tables(replica, key, scd).items()}
    compare_s, differing = compare(spark, store, replica, key, parts)
    return {"compare_s": compare_s, "differing_keys": differing, "merge_s": merges,
            "total_s": round(compare_s + sum(merges.values()), 2)}
