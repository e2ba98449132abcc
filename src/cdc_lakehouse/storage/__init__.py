"""The storage seam: every read and write of a Delta table goes through a ``TableStore``.

A local lake is opened by ``LakeStore``: ``DeltaSparkStore``, the engine Databricks runs, every
write a Spark job of the tasks. It is the only engine of the runtime, the CLI, ``make demo`` and
the suite. ``DeltaRsStore`` (delta-rs, writes handed over as Arrow through the driver) stays as
``bench``'s comparison engine only: ``CDC_LAKEHOUSE_ENGINE=delta-rs`` selects it there
(docs/storage.md, docs/benchmarks.md). On Databricks the pipeline's tables are Databricks' own and never pass through here; the job steps
that read them (``snapshot reconcile``, ``housekeeping``) read and write them through
``CatalogStore`` (Unity Catalog, docs/databricks.md). Nothing else in the project touches table
files.
"""

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from cdc_lakehouse.storage.base import (
    Commit, ConcurrentCommit, StreamingSourceChanged, TableInfo, TableStore, UpsertSpec,
)
from cdc_lakehouse.storage.catalog import CatalogStore
from cdc_lakehouse.storage.delta_spark import DeltaSparkStore

if TYPE_CHECKING:
    from cdc_lakehouse.storage.delta_rs import DeltaRsStore

__all__ = ["CatalogStore", "Commit", "ConcurrentCommit", "TableInfo", "TableStore", "UpsertSpec", "DeltaRsStore",
           "DeltaSparkStore", "LakeStore", "ENGINES", "StreamingSourceChanged"]

ENGINES = ("delta-spark", "delta-rs")
DEFAULT_ENGINE = "delta-spark"


def LakeStore(spark: SparkSession, lake: str | Path, commit_hook=None) -> Any:
    """The store of a local lake: delta-spark, unless a benchmark compares delta-rs
    (``CDC_LAKEHOUSE_ENGINE``)."""
    engine = os.environ.get("CDC_LAKEHOUSE_ENGINE", DEFAULT_ENGINE)
    if engine == "delta-rs":
        from cdc_lakehouse.storage.delta_rs import DeltaRsStore

        return DeltaRsStore(spark, lake, commit_hook=commit_hook)
    if engine != "delta-spark":
        raise ValueError(f"CDC_LAKEHOUSE_ENGINE={engine!r}: the engines are {', '.join(ENGINES)}")
    return DeltaSparkStore(spark, lake, commit_hook=commit_hook)


def __getattr__(name: str) -> Any:
    # Loaded when first asked for: Databricks job compute, which uses CatalogStore, has no deltalake.
    if name == "DeltaRsStore":
        from cdc_lakehouse.storage.delta_rs import DeltaRsStore

        return DeltaRsStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
