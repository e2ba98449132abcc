"""Where a pipeline update spends its time.

Two sources, both cheap enough to leave on while measuring:

* the pipeline's own event log (``pipeline.event_log``): one row per flow with its start and
  duration. Flows run nested (a flow that reads a dataset first brings that dataset up to date),
  so a flow's *self* time is its duration minus the durations of the flows that ran inside it;
* ``FlowCounters``, per flow: the Spark jobs it ran (the runner names each job's group after
  its flow) and their seconds, its py4j calls and its Delta commits. A flow's ``planning_s`` is
  its self time outside its Spark jobs: building, analysing and planning queries, py4j and
  Python;
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
from collections import Counter, defaultdict

from py4j.java_gateway import GatewayClient

from cdc_lakehouse.runtime import declarations
from cdc_lakehouse.storage import LakeStore

OUTSIDE = "(outside flows)"  # loading the pipeline, the quiet check, the event log

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


def current_flow() -> str:
    batch = declarations.running_flow.get(None)
    return batch.flow.name if batch is not None else OUTSIDE


# Where the driver waits on the JVM, by how long one py4j call takes: a bare round trip (building
# a column, a reflection lookup, releasing an object), JVM work such as analysing a DataFrame, or
# a call that runs Spark jobs (an action, a write). The rest of an update is Python.
PY4J_KINDS = (("round_trip", 0.001), ("jvm_work", 0.1), ("jobs", float("inf")))


class FlowCounters:
    """py4j calls and Delta commits per flow while installed (a ``with`` block), the update's
    seconds inside py4j calls by their length (``PY4J_KINDS``), and each flow's Spark jobs
    since then from Spark's status store."""

    def __init__(self, spark, first_job: int):
        self.spark = spark
        self.first_job = first_job
        self.py4j: Counter[str] = Counter()
        self.py4j_s: Counter[str] = Counter()
        self.commits: Counter[str] = Counter()
        self._send = GatewayClient.send_command

    def __enter__(self) -> FlowCounters:
        send, py4j, seconds = self._send, self.py4j, self.py4j_s

        def counted(client, *args, **kwargs):
            py4j[current_flow()] += 1
            t0 = time.perf_counter()
            try:
                return send(client, *args, **kwargs)
            finally:
                took = time.perf_counter() - t0
                seconds[next(kind for kind, below in PY4J_KINDS if took < below)] += took

        GatewayClient.send_command = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc) -> None:
        GatewayClient.send_command = self._send  # type: ignore[method-assign]

    def commit(self) -> None:
        self.commits[current_flow()] += 1

    def jobs(self, flow: str) -> tuple[int, float]:
        """The flow's Spark jobs in this update, and the seconds they ran (overlaps once)."""
        sc = self.spark.sparkContext
        ids = [j for j in sc.statusTracker().getJobIdsForGroup(flow) if j > self.first_job]
        store = sc._jsc.sc().statusStore()  # noqa: SLF001 - job times have no Python API
        spans = []
        for job in ids:
            data = store.job(job)
            start, end = data.submissionTime(), data.completionTime()
            if start.isDefined() and end.isDefined():
                spans.append((start.get().getTime() / 1000, end.get().getTime() / 1000))
        return len(ids), _covered(spans)


def _covered(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of ``spans``."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return round(total, 3)


class TimingStore:
    """The lake's store, recording per table: calls, rows and seconds of its writes."""

    def __init__(self, spark, lake, counters: FlowCounters | None = None, **kwargs):
        self.store = LakeStore(spark, lake, **kwargs)
        self.counters = counters
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
        if self.counters is not None:
            self.counters.commit()
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
            "message": r.get("message"),  # e.g. how a materialized view was refreshed
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
