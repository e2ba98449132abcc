"""What an incremental update costs, versus how much history the lake already holds.

For each history size, a lake is loaded with one full pipeline update (the project's files under
``src/bronze``, ``src/silver``, ``src/gold``) of a binlog-only workload of that many row changes
(``bench.workload``, no open transaction at its end). Then, in this one process and Spark session
(warm: the loads ran first), the lakes take turns, ``rounds`` times:

* **noop**: an update with nothing new landed;
* **small**: ``changes`` new binlog row changes land first (new files continuing the history's
  log: ``bench/continuation.py``), then an update.

* **floor**: the bare job a small update cannot beat: the landed files alone, their latest change
  per key MERGEd into tables of only those changes (``bench/baseline.py`` on a landing of just
  the new files, its own lake). It skips everything the pipeline must do besides (transactions,
  held state, history, audit, gold, health), so ``small_s / floor_s`` is the gap to any code.

Reported per size: the wall seconds of each update (the minimum over the rounds, the median and
every round beside it), CPU seconds of the process tree (driver, JVM: ``measure.CpuMeter``) and of
the driver alone (``time.process_time``), the Spark jobs each update ran, the rows the update's
flows wrote, and where the last update of each kind spent its time (every flow of its
``RunResult``, longest first, with its self time; self time per layer; storage calls). ``small_ratio`` and ``noop_ratio``: largest history / smallest; an
update whose cost follows what is new, not what is there, has ratios near 1. Last, each lake's
replicas are compared with the source state the continuation led to (``bench/verify.py``).
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from bench import baseline, measure, profiling, verify
from bench.continuation import Continuation
from bench.throughput import make_workload, pipeline_conf, pipeline_sources
from bench.workload import BINLOG_SOURCE, TABLES

STATISTIC = "min"  # of the rounds, for noop_s / small_s and their CPU seconds
FEED_SEED_OFFSET = 1000  # the continuation's seed: the history's + this
RATIOS = {"small_ratio": "small_s", "noop_ratio": "noop_s", "small_cpu_ratio": "small_cpu_s", "noop_cpu_ratio": "noop_cpu_s"}


@dataclass
class Lake:
    history: int  # row changes of the history
    root: Path  # landing/, onboarding.yml, lake/, state/
    feed: Continuation
    workload: dict
    generate_s: float
    load: dict = field(default_factory=dict)  # the update that loaded the history
    noop: list[dict] = field(default_factory=list)
    small: list[dict] = field(default_factory=list)
    floor: list[dict] = field(default_factory=list)
    verify: dict | None = None  # replicas versus the source state, after the last round

    @property
    def lake(self) -> Path:
        return self.root / "lake"

    @property
    def conf(self) -> dict:
        return pipeline_conf(self.root)


# -- one update ---------------------------------------------------------------------------------
def last_job_id(spark) -> int:
    """The newest Spark job's id (-1 before any); job ids count up by one per job."""
    sc = spark.sparkContext
    try:  # the status store is fed by the listener bus, asynchronously: let it catch up
        sc._jsc.sc().listenerBus().waitUntilEmpty()  # noqa: SLF001 - no public way
    except Exception:
        pass
    return max(sc.statusTracker().getJobIdsForGroup(None), default=-1)


def profile(run, wall_s: float, store: profiling.TimingStore, counters: profiling.FlowCounters) -> dict:
    """Where an update's time went: its flows (longest first) with their Spark jobs, py4j calls,
    Delta commits and planning seconds; self time by layer; storage calls."""
    flows = profiling.flow_profile([asdict(e) for e in run.events])
    for f in flows:
        jobs, job_s = counters.jobs(f["flow"])
        f |= {"jobs": jobs, "job_s": job_s, "py4j": counters.py4j[f["flow"]], "commits": counters.commits[f["flow"]],
              "planning_s": round(max(0.0, f["self_s"] - job_s), 3)}
    outside = round(wall_s - sum(f["self_s"] for f in flows), 2)
    return {"flows": sorted(flows, key=lambda f: -f["duration_s"]),
            "by_layer": profiling.by_layer(flows), "storage": store.summary(), "outside_flows_s": outside,
            "outside_flows": {"py4j": counters.py4j[profiling.OUTSIDE], "commits": counters.commits[profiling.OUTSIDE]}}


def timed_update(spark, lake: Lake) -> dict:
    """One pipeline update of ``lake``: wall and CPU seconds, Spark jobs, py4j calls, Delta
    commits, planning seconds, rows written, profile."""
    from cdc_lakehouse.runtime.runner import run_pipeline

    first_job = last_job_id(spark)
    counters = profiling.FlowCounters(spark, first_job)
    store = profiling.TimingStore(spark, lake.lake, counters)
    cpu, driver_cpu, t0 = measure.CpuMeter().start(), time.process_time(), time.perf_counter()
    try:
        with counters:
            run = run_pipeline(spark, pipeline_sources(), lake.lake, lake.conf, store=store)
        wall_s = time.perf_counter() - t0
    finally:
        store.close()
    jobs = last_job_id(spark) - first_job
    shape = profile(run, wall_s, store, counters)
    return {"wall_s": round(wall_s, 3), "cpu_s": cpu.stop(), "driver_cpu_s": round(time.process_time() - driver_cpu, 2),
            "jobs": jobs, "py4j_calls": sum(counters.py4j.values()), "commits": sum(counters.commits.values()),
            "py4j_s": {kind: round(counters.py4j_s[kind], 2) for kind, _ in profiling.PY4J_KINDS},
            "planning_s": round(sum(f["planning_s"] for f in shape["flows"]) + shape["outside_flows_s"], 2),
            "flows": len(run.events),
            "rows_written": sum(e.rows_written or 0 for e in run.events if e.status == "COMPLETED"),
            "profile": shape}


def timed_floor(spark, lake: Lake, files: list[str]) -> dict:
    """The baseline MERGE of the files just landed (copied to a landing of their own)."""
    from cdc_lakehouse.storage import LakeStore

    own = lake.root / "floor" / "landing" / BINLOG_SOURCE / "binlog"
    shutil.rmtree(own, ignore_errors=True)
    own.mkdir(parents=True)
    for name in files:
        shutil.copy(lake.root / "landing" / BINLOG_SOURCE / "binlog" / name, own / name)
    t0 = time.perf_counter()
    merged = baseline.run_baseline(spark, LakeStore(spark, lake.root / "floor" / "lake"), own.parent.parent, lake.feed.tables)
    return {"wall_s": round(time.perf_counter() - t0, 3), "rows_merged": sum(merged.values())}


# -- lakes --------------------------------------------------------------------------------------
def _link_tree(src: Path, dest: Path) -> None:
    """A copy of ``src`` whose files are hard links (the history's files are only read)."""
    try:
        shutil.copytree(src, dest, copy_function=os.link)
    except OSError:  # another file system
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(src, dest)


def build_lake(work: Path, history: int, seed: int, tables: tuple[str, ...], events_per_file: int) -> Lake:
    """The history's workload (generated, or reused from an earlier run) and a fresh lake folder
    with its own landing folder, which the continuation adds files to."""
    out, summary, gen_s = make_workload(work, f"incremental-history-{history}-{seed}-{events_per_file}", history, seed,
                                        tables, events_per_file=events_per_file, open_tail=False)
    root = Path(work) / f"incremental-lake-{history}"
    shutil.rmtree(root, ignore_errors=True)
    _link_tree(out / "landing", root / "landing")
    shutil.copy(out / "onboarding.yml", root / "onboarding.yml")
    feed = Continuation(out, root / "landing", tables, seed + FEED_SEED_OFFSET, events_per_file)
    keep = ("row_changes", "committed_row_changes", "transactions", "binlog_lines", "binlog_files", "binlog_bytes", "final_rows")
    return Lake(history, root, feed, {k: summary[k] for k in keep}, gen_s)


def verify_lake(spark, lake: Lake, tables: tuple[str, ...]) -> dict:
    """The lake's silver and gold replicas against the source state after the last changes
    landed (no transaction is held, so the coherent gold replicas hold every change too)."""
    from cdc_lakehouse.storage import LakeStore

    state = lake.feed.write_expected(lake.root / "state")
    read = LakeStore(spark, lake.lake).read
    checks = {layer: verify.verify_replicas(spark, read, state, BINLOG_SOURCE, tables, name=lambda s, t, layer=layer: f"{layer}.{s}_{t}")
              for layer in ("silver", "gold")}
    return {**checks, "all_equal": all(c["all_equal"] for c in checks.values())}


# -- results ------------------------------------------------------------------------------------
def _pick(values: list[float]) -> float | None:
    return min(values) if values else None


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def _phase(name: str, updates: list[dict]) -> dict:
    """``<name>_s`` (the minimum over the rounds), its median, CPU, jobs and every round."""
    walls = [u["wall_s"] for u in updates]
    last = updates[-1] if updates else {}
    return {f"{name}_s": _pick(walls), f"{name}_median_s": _median(walls),
            f"{name}_cpu_s": _pick([u["cpu_s"] for u in updates]),
            f"{name}_driver_cpu_s": _pick([u["driver_cpu_s"] for u in updates]),
            f"{name}_jobs": last.get("jobs"), f"{name}_rows_written": last.get("rows_written"),
            **{f"{name}_{k}": last.get(k) for k in ("py4j_calls", "py4j_s", "commits", "planning_s")},
            f"{name}_rounds": [{k: v for k, v in u.items() if k != "profile"} for u in updates],
            f"{name}_profile": last.get("profile")}


def summarise(lake: Lake) -> dict:
    load = {k: v for k, v in lake.load.items() if k != "profile"}
    return {"history": lake.history, "workload": lake.workload, "generate_s": lake.generate_s,
            "history_load_s": load.get("wall_s"), "history_load": load,
            **_phase("noop", lake.noop), **_phase("small", lake.small),
            "floor_s": _pick([f["wall_s"] for f in lake.floor]), "floor_rounds": lake.floor,
            "small_over_floor": _over(_pick([u["wall_s"] for u in lake.small]), _pick([f["wall_s"] for f in lake.floor])),
            "verify": lake.verify}


def _over(value: float | None, floor: float | None) -> float | None:
    return round(value / floor, 2) if value and floor else None


def ratio(by_history: dict, key: str) -> float | None:
    sizes = sorted(by_history, key=int)
    small, large = by_history[sizes[0]].get(key), by_history[sizes[-1]].get(key)
    return round(large / small, 3) if small and large and len(sizes) > 1 else None


# -- the benchmark ------------------------------------------------------------------------------
def run(spark, work: Path, histories, changes: int, rounds: int = 2, seed: int = 42, tables=None,
        events_per_file: int = 50_000, check: bool = True, keep_lakes: bool = False, log=print) -> dict:
    tables = tuple(tables or TABLES)
    result: dict = {"ok": False, "changes": changes, "rounds": rounds, "statistic": STATISTIC, "tables": list(tables)}
    lakes: list[Lake] = []
    try:
        for history in sorted(histories):
            lake = build_lake(Path(work), history, seed, tables, events_per_file)
            lakes.append(lake)
            lake.load = timed_update(spark, lake)
            log(f"history {history:,}: {lake.workload['binlog_lines']:,} binlog lines, loaded in {lake.load['wall_s']} s")
        for r in range(1, rounds + 1):
            for lake in lakes:
                lake.noop.append(timed_update(spark, lake))
                landed = lake.feed.land(changes)
                lake.small.append({**timed_update(spark, lake), "landed": landed})
                lake.floor.append(timed_floor(spark, lake, landed["files"]))
                log(f"round {r}, history {lake.history:,}: noop {lake.noop[-1]['wall_s']} s, "
                    f"small ({landed['row_changes']} row changes) {lake.small[-1]['wall_s']} s, "
                    f"floor {lake.floor[-1]['wall_s']} s")
        if check:
            for lake in lakes:
                lake.verify = verify_lake(spark, lake, tables)
                log(f"history {lake.history:,}: replicas equal the source state: {lake.verify['all_equal']}")
        result["ok"] = not check or all(lake.verify["all_equal"] for lake in lakes)
        if not result["ok"]:
            result["error"] = "a replica differs from the source state after the small updates"
    except Exception as exc:  # reported in the result: the command exits 1
        import traceback
        traceback.print_exc()
        result["error"] = f"{type(exc).__name__}: {exc}"
    result["by_history"] = {str(lake.history): summarise(lake) for lake in lakes}
    for name, key in RATIOS.items():
        result[name] = ratio(result["by_history"], key) if result["by_history"] else None
    result["finished_utc"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if not keep_lakes:
        for lake in lakes:
            shutil.rmtree(lake.root, ignore_errors=True)
    return result
