"""End-to-end throughput, bronze to gold, beside the hand-written baseline, in the same run.

Both read the same generated binlog landing files (``bench.workload``) into a fresh lake with the
same storage (``LakeStore``: the engine CDC_LAKEHOUSE_ENGINE names, delta-spark by default), each in its own worker process (fresh JVM, its own
memory peaks), after the same warm-up on a small workload (JIT and Spark's code generation warm
in both). events/s = binlog row changes / wall seconds of the update.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from bench import measure
from bench.workload import BINLOG_SOURCE, WorkloadOptions, generate

REPO = measure.REPO
LAYERS = ("bronze", "silver", "gold")


def pipeline_sources(layers=LAYERS) -> list[str]:
    return [str(REPO / "src" / layer / "**" / "*.py") for layer in layers]


def pipeline_conf(out: Path) -> dict:
    return {"cdc_lakehouse.landing_path": str(Path(out) / "landing"),
            "cdc_lakehouse.onboarding_file": str(Path(out) / "onboarding.yml")}


def make_workload(work: Path, name: str, row_changes: int, seed: int, tables, reuse: bool = True,
                  events_per_file: int = 50_000, open_tail: bool = True) -> tuple[Path, dict, float]:
    """Generate (or reuse, when the same parameters made it before) a binlog-only workload."""
    out = Path(work) / name
    marker = out / "workload.json"
    opts = WorkloadOptions(row_changes=row_changes, seed=seed, forms=("binlog",), tables=tuple(tables),
                           events_per_file=events_per_file, open_tail=open_tail)
    if reuse and marker.exists():
        import json
        summary = json.loads(marker.read_text())
        o = summary["options"]
        if ((o["row_changes"], o["seed"], tuple(o["tables"]), o["events_per_file"], o["open_tail"])
                == (row_changes, seed, tuple(tables), events_per_file, open_tail)):
            return out, summary, summary.get("generate_s", 0.0)
    t0 = time.perf_counter()
    summary = generate(out, opts).as_dict()
    took = round(time.perf_counter() - t0, 2)
    summary["generate_s"] = took
    import json
    marker.write_text(json.dumps(summary, indent=2) + "\n")
    return out, summary, took


# -- workers (run in their own process by ``python -m bench _worker``) ----------------------
def worker_pipeline(params: dict) -> dict:
    from cdc_lakehouse.runtime.runner import run_pipeline
    from cdc_lakehouse.runtime.session import get_spark

    from bench import profiling, verify

    spark = get_spark("bench-pipeline")
    sources = pipeline_sources(params.get("layers", LAYERS))
    result: dict = {"ok": False}
    if params.get("warmup"):
        warm_lake = Path(params["lake"]).with_name(Path(params["lake"]).name + "-warmup")
        shutil.rmtree(warm_lake, ignore_errors=True)
        t0 = time.perf_counter()
        run_pipeline(spark, sources, warm_lake, pipeline_conf(Path(params["warmup"])))
        result["warmup_s"] = round(time.perf_counter() - t0, 2)
        shutil.rmtree(warm_lake, ignore_errors=True)
    lake = Path(params["lake"])
    shutil.rmtree(lake, ignore_errors=True)
    store = profiling.TimingStore(spark, lake)
    cpu = measure.CpuMeter().start()
    t0 = time.perf_counter()
    run = run_pipeline(spark, sources, lake, pipeline_conf(Path(params["out"])), store=store)
    result["wall_s"] = round(time.perf_counter() - t0, 3)
    result["cpu_s"] = cpu.stop()
    store.close()
    result["memory_after_run"] = {"driver_peak_rss_mb": measure.driver_peak_mb(), "jvm_peak_rss_mb": measure.jvm_peak_mb(spark)}
    events = profiling.read_event_log(store, run.update_id)
    prof = profiling.flow_profile(events)
    top_level = sum(f["duration_s"] for f in prof) - sum(f["duration_s"] - f["self_s"] for f in prof)
    result["profile"] = {"flows": prof, "by_layer": profiling.by_layer(prof), "storage": store.summary(),
                         "outside_flows_s": round(result["wall_s"] - top_level, 2)}
    result["tables"] = {t.name: t.row_count for t in store.list_tables()}
    if params.get("verify", True):
        result["verify"] = verify.verify_replicas(spark, store.read, params["out"], BINLOG_SOURCE, params["tables"])
    result["ok"] = True
    return measure.finish_worker(spark, result)


def worker_baseline(params: dict) -> dict:
    from cdc_lakehouse.runtime.session import get_spark
    from cdc_lakehouse.storage import LakeStore

    from bench import baseline, verify

    spark = get_spark("bench-baseline")
    result: dict = {"ok": False}
    if params.get("warmup"):
        warm_lake = Path(params["lake"]).with_name(Path(params["lake"]).name + "-warmup")
        shutil.rmtree(warm_lake, ignore_errors=True)
        t0 = time.perf_counter()
        baseline.run_baseline(spark, LakeStore(spark, warm_lake), Path(params["warmup"]) / "landing", params["tables"])
        result["warmup_s"] = round(time.perf_counter() - t0, 2)
        shutil.rmtree(warm_lake, ignore_errors=True)
    lake = Path(params["lake"])
    shutil.rmtree(lake, ignore_errors=True)
    store = LakeStore(spark, lake)
    cpu = measure.CpuMeter().start()
    t0 = time.perf_counter()
    merged = baseline.run_baseline(spark, store, Path(params["out"]) / "landing", params["tables"])
    result["wall_s"] = round(time.perf_counter() - t0, 3)
    result["cpu_s"] = cpu.stop()
    result["memory_after_run"] = {"driver_peak_rss_mb": measure.driver_peak_mb(), "jvm_peak_rss_mb": measure.jvm_peak_mb(spark)}
    result["merged_rows"] = merged
    if params.get("verify", True):
        result["verify"] = verify.verify_replicas(
            spark, store.read, params["out"], BINLOG_SOURCE, params["tables"], name=lambda s, t: baseline.table_name(t))
    result["ok"] = True
    return measure.finish_worker(spark, result)


# -- orchestration -----------------------------------------------------------------------------
def run(work: Path, row_changes: int, seed: int = 42, tables=None, warmup_changes: int = 2000,
        layers=LAYERS, baseline: bool = True, keep_lakes: bool = False, events_per_file: int = 50_000,
        log=print) -> dict:
    from bench.workload import TABLES

    tables = list(tables or TABLES)
    work = Path(work)
    out, summary, gen_s = make_workload(work, f"workload-{row_changes}-{seed}-{events_per_file}", row_changes, seed, tables,
                                        events_per_file=events_per_file)
    log(f"workload: {summary['row_changes']} row changes, {summary['binlog_lines']} binlog lines, "
        f"{summary['binlog_bytes'] / 1e6:.0f} MB in {summary['binlog_files']} files (generated in {gen_s}s)")
    warm = None
    if warmup_changes:
        warm, _, _ = make_workload(work, f"warmup-{warmup_changes}-{events_per_file}", warmup_changes, seed + 1, tables,
                                   events_per_file=events_per_file)
    params = {"out": str(out), "tables": tables, "warmup": str(warm) if warm else None, "layers": list(layers)}
    result = {"workload": summary, "generate_s": gen_s,
              "generator_row_changes_per_s": round(summary["row_changes"] / gen_s) if gen_s else None}
    if baseline:
        log("baseline: latest change per key + MERGE ...")
        result["baseline"] = measure.run_worker("baseline", {**params, "lake": str(work / "lake-baseline")})
        log(f"  {result['baseline'].get('wall_s')} s" if result["baseline"]["ok"] else f"  FAILED: {result['baseline'].get('error')}")
    log("pipeline: bronze -> silver -> gold ...")
    result["pipeline"] = measure.run_worker("pipeline", {**params, "lake": str(work / "lake-pipeline")})
    log(f"  {result['pipeline'].get('wall_s')} s" if result["pipeline"]["ok"] else f"  FAILED: {result['pipeline'].get('error')}")
    n = summary["row_changes"]
    for side in ("baseline", "pipeline"):
        r = result.get(side)
        if r and r.get("ok"):
            r["events_per_s"] = round(n / r["wall_s"])
            r["binlog_lines_per_s"] = round(summary["binlog_lines"] / r["wall_s"])
            r["events_per_cpu_s"] = round(n / r["cpu_s"]) if r.get("cpu_s") else None
    p, b = result["pipeline"], result.get("baseline")
    if p.get("ok") and b and b.get("ok"):
        result["ratio_vs_baseline"] = round(p["events_per_s"] / b["events_per_s"], 3)
        if p.get("cpu_s") and b.get("cpu_s"):
            result["cpu_ratio_vs_baseline"] = round(b["cpu_s"] / p["cpu_s"], 3)
    result["targets"] = {
        "events_per_s >= 250000": bool(p.get("ok") and p["events_per_s"] >= 250_000),
        "ratio >= 0.5": bool(result.get("ratio_vs_baseline") is not None and result["ratio_vs_baseline"] >= 0.5),
    }
    if not keep_lakes:
        for lake in ("lake-baseline", "lake-pipeline"):
            shutil.rmtree(work / lake, ignore_errors=True)
    return result
