"""The storage seam: every read and write of a Delta table goes through a ``TableStore``.

Locally tables are committed by delta-rs (``DeltaRsStore``); on Databricks the native Delta
path is used (``SparkDeltaStore``). Nothing else in the project touches table files.
"""

from cdc_lakehouse.storage.base import Commit, TableInfo, TableStore, UpsertSpec
from cdc_lakehouse.storage.delta_rs import DeltaRsStore

__all__ = ["Commit", "TableInfo", "TableStore", "UpsertSpec", "DeltaRsStore"]
