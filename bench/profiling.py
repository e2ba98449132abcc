"""Where a pipeline update spends its time.

Two sources, both cheap enough to leave on while measuring:

* the pipeline's own event log (``pipeline.event_log``): one row per flow with its start and
  duration. Flows run nested (a flow that reads a dataset first brings that dataset up to date),
  so a flow's *self* time is its duration minus the durations of the flows that ran inside it;
* ``TimingStore``, the lake's store (``LakeStore``: delta-spark, or delta-rs with
  ``CDC_LAKEHOUSE_ENGINE=delta-rs``) timing, per table, the writes of the update. With
  delta-spark a write is one Spark job that computes and commits (``write_s``); with delta-rs
  the Spark work that produces it (executing the query and collecting its Arrow batches into
  the driver, or staging them: ``storage/arrow_handoff.py``) is timed apart from the delta-rs
  commit or MERGE (``spark_collect_s`` and the rest).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from cdc_lakehouse.storage import LakeStore

_local = threading.local()
_SPARK_STEPS = ("collect", "stage")  # where arrow_handoff runs the Spark job of a write


def _timing(step):
    def run(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return step(*args, **kwargs)
        finally:
            _local.spark_s = getattr(_local, "spark_s", 0.0) + time.perf_counter() - t0

    return run


class TimingStore:
    """The lake's store, recording per table: calls, rows and seconds of its writes."""

    def __init__(self, spark, lake, **kwargs):
        self.store = LakeStore(spark, lake, **kwargs)
        self.stats: dict[str, dict] = defaultdict(lambda: defaultdict(float))
        self._originals: dict = {}
        if type(self.store).__name__ == "DeltaRsStore":  # its Spark work is apart from its commit
            from cdc_lakehouse.storage import arrow_handoff

            self._originals = {name: getattr(arrow_handoff, name) for name in _SPARK_STEPS}
            for name, step in self._originals.items():
                setattr(arrow_handoff, name, _timing(step))

    def __getattr__(self, name: str):
        return getattr(self.store, name)

    def close(self) -> None:
        from cdc_lakehouse.storage import arrow_handoff

        for name, step in self._originals.items():
            setattr(arrow_handoff, name, step)

    def _timed(self, kind: str, name: str, call):
        _local.spark_s = 0.0
        t0 = time.perf_counter()
        rows = call()
        total = time.perf_counter() - t0
        s = self.stats[name]
        s[f"{kind}_calls"] += 1
        s[f"{kind}_rows"] += rows or 0
        s["write_s"] += total
        if self._originals:
            s["spark_collect_s"] += _local.spark_s
            s["delta_write_s"] += total - _local.spark_s
        return rows

    def append(self, name, df, commit=None, **opts):
        return self._timed("append", name, lambda: self.store.append(name, df, commit, **opts))

    def overwrite(self, name, df, commit=None, **opts):
        return self._timed("overwrite", name, lambda: self.store.overwrite(name, df, commit, **opts))

    def upsert(self, name, df, spec, commit=None, **opts):
        return self._timed("upsert", name, lambda: self.store.upsert(name, df, spec, commit, **opts))

    def replace_where(self, name, df, where, commit=None):
        return self._timed("replace", name, lambda: self.store.replace_where(name, df, where, commit))

    def summary(self) -> dict:
        return {t: {k: round(v, 3) if isinstance(v, float) else v for k, v in s.items()} for t, s in sorted(self.stats.items())}


def flow_profile(events: list[dict]) -> list[dict]:
    """Self time per flow from event-log rows (``flow``, ``timestamp``, ``duration_s``, ...).

    An event whose interval lies inside another's ran nested in it (upstream brought up to
    date on demand); the enclosing flow's self time excludes it.
    """
    rows = []
    for e in events:
        start = e["timestamp"].timestamp() if hasattr(e["timestamp"], "timestamp") else float(e["timestamp"])
        rows.append({**e, "_start": start, "_end": start + float(e["duration_s"] or 0.0), "nested_s": 0.0})
    rows.sort(key=lambda r: (r["_start"], -r["_end"]))
    stack: list[dict] = []
    for r in rows:
        while stack and r["_start"] >= stack[-1]["_end"] - 1e-3:
            stack.pop()
        if stack:
            stack[-1]["nested_s"] += float(r["duration_s"] or 0.0)
        stack.append(r)
    out = []
    for r in rows:
        self_s = max(0.0, float(r["duration_s"] or 0.0) - r["nested_s"])
        out.append({
            "flow": r["flow"], "target": r["target"], "flow_type": r["flow_type"], "status": r["status"],
            "rows_read": r["rows_read"], "rows_written": r["rows_written"],
            "duration_s": round(float(r["duration_s"] or 0.0), 3), "self_s": round(self_s, 3),
        })
    out.sort(key=lambda r: -r["self_s"])
    return out


def layer_of(flow: dict) -> str:
    target = flow["target"] or ""
    for layer in ("bronze", "silver", "gold", "pipeline"):
        if target.startswith(layer + "."):
            return layer
    return "view"


def by_layer(profile: list[dict]) -> dict:
    totals: dict[str, float] = defaultdict(float)
    for f in profile:
        totals[layer_of(f)] += f["self_s"]
    return {k: round(v, 2) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


def read_event_log(store, update_id: str | None = None) -> list[dict]:
    log = store.read("pipeline.event_log")
    if update_id:
        log = log.filter(log.update_id == update_id)
    return [r.asDict() for r in log.collect()]  # one row per flow: small
