"""A view's result, kept for the next flow that reads the same view with the same input.

On Databricks every flow that reads a view evaluates it. Locally that doubles the costliest
work of an update: each landing view (every line parsed and checked) is read by the bronze
table and by its quarantine table, and each replica's typed changes by its SCD1 and SCD2
flows. The result is the same for both readers when the view read the same input: the same
new files, the same range of table versions (its *key*, recorded by the flow batch). The
first reader caches it and the second gets the cached result.

The runner drops a flow's caches when the flow ends, except after a flow that cached a view:
those stay until the next flow ends, which is when the second reader has run, if any.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame

ReadKey = tuple  # the (source, offset) pairs a view's evaluation read, in order


@dataclass
class SharedView:
    key: ReadKey
    df: DataFrame
    expectations: list  # ExpectationResult of the view's own expectations, reported per reader


class SharedViews:
    def __init__(self):
        self._views: dict[str, SharedView] = {}
        self.cached_in_flow = False  # the running flow cached a view: keep caches one more flow

    def lookup(self, name: str, key: ReadKey) -> SharedView | None:
        shared = self._views.get(name)
        return shared if shared is not None and shared.key == key else None

    def keep(self, name: str, key: ReadKey, df: DataFrame, expectations: list) -> DataFrame:
        if not key:  # a view that read no recorded input may differ at every evaluation
            return df
        cached = df.persist()
        self._views[name] = SharedView(key, cached, expectations)
        self.cached_in_flow = True
        return cached

    def flow_ended(self, spark) -> None:
        """Called after every flow: drop the caches, unless this flow cached a view."""
        if self.cached_in_flow:
            self.cached_in_flow = False
            return
        self._views.clear()
        spark.catalog.clearCache()
