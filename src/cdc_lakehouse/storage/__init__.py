"""The storage seam: every read and write of a Delta table goes through a ``TableStore``.

Locally tables are committed by delta-rs (``DeltaRsStore``). On Databricks the pipeline's
tables are Databricks' own and never pass through here; the job steps that read them
(``snapshot reconcile``, ``housekeeping``) still need a Unity Catalog store (docs/databricks.md).
Nothing else in the project touches table files.
"""

from cdc_lakehouse.storage.base import (
    Commit, ConcurrentCommit, StreamingSourceChanged, TableInfo, TableStore, UpsertSpec,
)
from cdc_lakehouse.storage.delta_rs import DeltaRsStore

__all__ = ["Commit", "ConcurrentCommit", "TableInfo", "TableStore", "UpsertSpec", "DeltaRsStore", "StreamingSourceChanged"]
