"""Spark's result handed to delta-rs as Arrow: collected when small, staged in files when large.

``DataFrame.toArrow`` brings every task's result through the JVM driver; one batch of a large
initial load (a gigabyte of row images) exhausts the driver heap, and the job then hangs
instead of failing. A batch is therefore written by the tasks themselves to Arrow IPC files
when its input files are large, or when collecting it hits Spark's result-size limit, and
delta-rs reads those files back as a stream. Small batches, nearly all of them, keep the
cheaper collect.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
from pyspark.errors import PySparkException
from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame

import cdc_lakehouse.storage.spark_plans as spark_plans

# Input bytes above which a batch is staged without trying to collect it first: far above any
# test batch, well below what the driver heap holds.
STAGE_INPUT_BYTES = 64 * 1024 * 1024
STAGE_PREFIX = "cdc-lakehouse-stage-"  # then the pid of the process that stages


@dataclass
class ArrowBatch:
    """Arrow data of a batch: a table (collected) or a stream over staged files."""

    data: pa.Table | pa.RecordBatchReader
    num_rows: int

    def table(self) -> pa.Table:
        return self.data if isinstance(self.data, pa.Table) else self.data.read_all()


@contextmanager
def arrow_batch(df: DataFrame, stage_above_bytes: int = STAGE_INPUT_BYTES) -> Iterator[ArrowBatch]:
    """The batch's rows as nullable Arrow (a Delta table created with NOT NULL columns would
    reject later nulls). Staged files are removed when the block ends."""
    data = _collected(df) if _input_bytes(df) <= stage_above_bytes else None
    if data is not None:
        yield ArrowBatch(data, data.num_rows)
        return
    remove_orphaned_stages()
    with tempfile.TemporaryDirectory(prefix=f"{STAGE_PREFIX}{os.getpid()}-") as directory:
        files, rows = stage(df, directory)
        if not files:
            yield ArrowBatch(_nullable(collect(df.limit(0))), 0)
            return
        dataset = pads.dataset(files, format="ipc")
        schema = _nullable_schema(dataset.schema)
        batches = (b.cast(schema) for b in dataset.to_batches())
        yield ArrowBatch(pa.RecordBatchReader.from_batches(schema, batches), rows)


def remove_orphaned_stages() -> None:
    """Staging folders of processes that are gone: a killed run cannot remove its own."""
    for folder in Path(tempfile.gettempdir()).glob(f"{STAGE_PREFIX}*"):
        pid = folder.name.removeprefix(STAGE_PREFIX).split("-")[0]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def collect(df: DataFrame) -> pa.Table:
    return df.toArrow()


def _collected(df: DataFrame) -> pa.Table | None:
    """The collected batch, or None when it is larger than Spark lets a driver collect."""
    try:
        return _nullable(collect(df))
    except (Py4JJavaError, PySparkException) as e:
        if "maxResultSize" not in str(e):
            raise
        return None


def stage(df: DataFrame, directory: str) -> tuple[list[str], int]:
    """Each task writes its partition to an Arrow IPC file; only the file names and row counts
    reach the driver."""

    def write(batches):
        path, rows, writer = os.path.join(directory, f"{uuid.uuid4().hex}.arrow"), 0, None
        for batch in batches:
            writer = writer or pa.ipc.new_file(path, batch.schema)
            writer.write_batch(batch)
            rows += batch.num_rows
        if writer is not None:
            writer.close()
            yield pa.RecordBatch.from_pydict({"path": [path], "rows": [rows]})

    staged = df.mapInArrow(write, "path string, rows long").collect()
    return [r.path for r in staged], sum(r.rows for r in staged)


def _input_bytes(df: DataFrame) -> int:
    """Bytes of the files the batch reads (0 for inputs that are not files).

    Taken from the analyzed plan: in the optimized one (``DataFrame.inputFiles``) a cached
    frame, such as a landing view kept for its second reader, hides its files, and a batch of
    a gigabyte was then collected until Spark refused it, and computed again to be staged."""
    files = set()
    for leaf in spark_plans.leaves(df._jdf.queryExecution().analyzed()):
        if spark_plans.kind(leaf) != "LogicalRelation":
            continue
        relation = leaf.relation()
        if relation.getClass().getSimpleName() == "HadoopFsRelation":
            files.update(relation.inputFiles())
    paths = (uri.removeprefix("file:") for uri in files)
    return sum(os.path.getsize(p) for p in paths if os.path.isfile(p))


def _nullable(data: pa.Table) -> pa.Table:
    return data.cast(_nullable_schema(data.schema))


def _nullable_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([_nullable_field(f) for f in schema])


def _nullable_field(f: pa.Field) -> pa.Field:
    t = f.type
    if pa.types.is_struct(t):
        t = pa.struct([_nullable_field(c) for c in t])
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        t = pa.list_(_nullable_field(t.value_field))
    elif pa.types.is_map(t):
        t = pa.map_(t.key_type, _nullable_field(t.item_field))
    return f.with_type(t).with_nullable(True)
