"""The storage seam: every read and write of a Delta table goes through a ``TableStore``.

Locally tables are committed by delta-rs (``DeltaRsStore``). On Databricks the pipeline's
tables are Databricks' own and never pass through here; the job steps that read them
(``snapshot reconcile``, ``housekeeping``) read and write them through ``CatalogStore`` (Unity Catalog, docs/databricks.md).
Nothing else in the project touches table files.
"""

from typing import TYPE_CHECKING, Any

from cdc_lakehouse.storage.base import (
    Commit, ConcurrentCommit, StreamingSourceChanged, TableInfo, TableStore, UpsertSpec,
)
from cdc_lakehouse.storage.catalog import CatalogStore

if TYPE_CHECKING:
    from cdc_lakehouse.storage.delta_rs import DeltaRsStore

__all__ = ["CatalogStore", "Commit", "ConcurrentCommit", "TableInfo", "TableStore", "UpsertSpec", "DeltaRsStore",
           "StreamingSourceChanged"]


def __getattr__(name: str) -> Any:
    # Loaded when first asked for: Databricks job compute, which uses CatalogStore, has no deltalake.
    if name == "DeltaRsStore":
        from cdc_lakehouse.storage.delta_rs import DeltaRsStore

        return DeltaRsStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
