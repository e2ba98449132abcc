"""Benchmark: reconcile a snapshot that differs by 1% from a large replica, against a full reload.

    .venv/bin/python -m bench.snapshot_reconcile [--rows 10000000] [--diff 0.01] [--scd 2]

One run, one Spark session, one machine:

1. *initial load*: snapshot v1 (``--rows`` rows of shop.products) seeds lake A (reconcile, then a
   pipeline update: change stream -> SCD1 replica [+ SCD2 history]).
2. *incremental*: snapshot v2 differs from v1 in exactly ``--diff`` of the keys (40% of them
   updated, 30% deleted, 30% new keys), spread evenly over the key range. ``snapshot reconcile``
   against lake A, then a pipeline update applying the corrections.
3. *check*: the corrections must be exactly the difference (per op), and a dry-run ``snapshot
   diff`` of v2 against the updated replica must find nothing left.
4. *full reload*: v2 loaded into a fresh lake B the same way as step 1 (all rows through the
   change stream into the replicas), which is what reloading downstream means here.
5. *floor*: what any reconciliation must spend here, whatever its code (bench/snapshot_floor.py):
   the comparison alone and a copy-on-write MERGE into each table the apply writes.

``--repeat N`` measures step 2 N times, each on a copy of lake A as step 1 left it (the first
is the headline; the median is reported too: single runs of this step vary by about 10%).
``--workdir DIR`` keeps that copy, and ``--reuse-initial`` starts from it, skipping the data and
step 1 (whose figures come from the kept run): a change to the incremental path is measured in
minutes instead of a quarter of an hour.

Reported: seconds of each step (reconcile and pipeline update separately, and the update per
flow), peak memory so far (driver and JVM), corrective changes per op, the ratio full
reload / incremental, and full reload / floor (the best ratio this machine and storage allow).
Snapshots live outside the landing folders the pipeline's bronze layer reads: bronze keeps a raw
copy of every landed snapshot whichever way it is applied, so that cost is the same on both
sides and left out.
Results go to ``bench/results/snapshot_reconcile_<rows>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SOURCES = [str(REPO / "src" / layer / "**" / "*.py") for layer in ("bronze", "silver")]
TABLE, SOURCE = "shop.products", "shop"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--diff", type=float, default=0.01, help="fraction of keys that differ (default 0.01)")
    parser.add_argument("--scd", type=int, choices=(1, 2), default=2, help="2: SCD1 replica and SCD2 history")
    parser.add_argument("--workdir", default=None, help="scratch folder (default: a temp folder, removed after)")
    parser.add_argument("--out", default=None, help="results JSON (default bench/results/snapshot_reconcile_<rows>.json)")
    parser.add_argument("--driver-memory", default="10g")
    parser.add_argument("--no-reload-v2", action="store_true",
                        help="compare with the initial load of v1 (same size) instead of reloading v2 into lake B")
    parser.add_argument("--repeat", type=int, default=1,
                        help="measure the incremental step this many times, each on the lake as the initial load left it")
    parser.add_argument("--reuse-initial", action="store_true",
                        help="with --workdir: take the snapshots and the initial load a previous run kept there")
    return parser.parse_args()


# -- data -----------------------------------------------------------------------------------
def difference_plan(rows: int, diff: float) -> dict:
    """Every ``step``-th key (``id % step == 7``) differs: by ``(id / step) % 10``, 4 in 10 are
    updated, 3 in 10 deleted, and as many new keys are inserted as are deleted, so the table
    keeps its size and the difference is spread evenly over the key range."""
    return {"step": round(1 / diff)}


def generate(spark, folder: Path, rows: int, plan: dict, version: int) -> dict:
    """Snapshot ``version`` 1 or 2 as JSON Lines part files; returns the exact difference."""
    from pyspark.sql import functions as F

    step = plan["step"]
    base = spark.range(1, rows + 1).withColumnRenamed("id", "product_id")
    picked = (F.col("product_id") % step == 7)
    bucket = (F.col("product_id") / step).cast("long") % 10  # 0-3 update, 4-6 delete, 7-9 keep
    price = (F.abs(F.xxhash64("product_id")) % 100000) / 100.0
    df = base.select(
        "product_id", F.concat(F.lit("SKU-"), F.col("product_id").cast("string")).alias("sku"),
        F.concat(F.lit("product "), F.col("product_id").cast("string")).alias("name"),
        price.alias("price"), (F.col("product_id") % 1000).alias("stock"),
    )
    expected = {"inserts": 0, "updates": 0, "deletes": 0}
    if version == 2:
        is_update, is_delete = picked & (bucket < 4), picked & (bucket >= 4) & (bucket < 7)
        expected["updates"] = base.filter(is_update).count()
        expected["deletes"] = base.filter(is_delete).count()
        expected["inserts"] = expected["deletes"]
        df = df.filter(~is_delete).withColumn("price", F.when(is_update, F.col("price") + 1).otherwise(F.col("price")))
        new = spark.range(rows + 1, rows + 1 + expected["inserts"]).select(
            F.col("id").alias("product_id"), F.lit("SKU-NEW").alias("sku"), F.lit("new product").alias("name"),
            F.lit(9.99).alias("price"), F.lit(1).cast("long").alias("stock"))
        df = df.unionByName(new)
    write_snapshot(df, folder, f"v{version}")
    return expected


def write_snapshot(df, folder: Path, snapshot_id: str) -> None:
    from pyspark.sql import functions as F

    shutil.rmtree(folder, ignore_errors=True)
    tmp = folder.parent / f".{snapshot_id}.spark"
    df.select(F.to_json(F.struct(*df.columns)).alias("value")).write.mode("overwrite").text(str(tmp))
    folder.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(sorted(tmp.glob("part-*"))):
        part.rename(folder / f"part-{i:05d}.jsonl")
    shutil.rmtree(tmp)
    count = sum(1 for p in folder.glob("part-*.jsonl") for _ in open(p, "rb"))
    (folder / "_manifest.json").write_text(json.dumps({
        "snapshot_id": snapshot_id, "table": TABLE, "key": ["product_id"],
        "taken_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "position": None,
        "row_count": count, "complete": True,
    }))


def onboarding_file(work: Path, scd: int) -> Path:
    flows = [f for f in yaml.safe_load((REPO / "conf/onboarding.yml").read_text())
             if f["data_flow_id"] == "102"]  # shop.products, binlog capture
    flows[0]["silver_cdc_apply_changes"]["scd_type"] = str(scd)
    # Types inferred from the values, as in the results so far: the figures stay comparable.
    flows[0]["source_details"].pop("source_schema_path", None)
    path = work / "onboarding.yml"
    path.write_text(yaml.safe_dump(flows))
    return path


# -- steps ----------------------------------------------------------------------------------
def reconcile(spark, store, onboarding, landing: Path, folder: Path):
    from cdc_lakehouse.snapshot.compare import TableSpec
    from cdc_lakehouse.snapshot.ledger import Ledger
    from cdc_lakehouse.snapshot.manifest import SnapshotFolder
    from cdc_lakehouse.snapshot.reconcile import reconcile_snapshot

    flow = onboarding.for_table(SOURCE, TABLE)
    snapshot = SnapshotFolder(SOURCE, TABLE, folder.name, folder)
    return reconcile_snapshot(spark, store, TableSpec.from_flow(flow), flow.capture, snapshot,
                              snapshot.read_manifest(), Ledger(landing, SOURCE), "silver")


def update(spark, landing: Path, lake: Path, onboarding_path: Path):
    from cdc_lakehouse.runtime.runner import run_pipeline

    result = run_pipeline(spark, SOURCES, lake, {
        "cdc_lakehouse.landing_path": str(landing), "cdc_lakehouse.onboarding_file": str(onboarding_path)})
    flows = {e.flow: {"status": e.status, "seconds": e.duration_s, "rows_written": e.rows_written}
             for e in result.events if e.status != "SKIPPED"}
    return flows


def timed(fn, *args):
    started = time.perf_counter()
    value = fn(*args)
    return value, round(time.perf_counter() - started, 2)


def load(spark, onboarding, onboarding_path, landing, lake, folder) -> dict:
    """Reconcile (as a seed when the lake is empty, else as a difference), then update."""
    from cdc_lakehouse.storage import LakeStore

    store = LakeStore(spark, lake)
    outcome, reconcile_s = timed(reconcile, spark, store, onboarding, landing, folder)
    flows, update_s = timed(update, spark, landing, lake, onboarding_path)
    return {"reconcile_s": reconcile_s, "update_s": update_s, "total_s": round(reconcile_s + update_s, 2),
            "counts": outcome.counts, "load_average_1_5_15": os.getloadavg(), "update_flows": flows,
            "memory_peak_so_far": peak_memory(spark)}


def peak_memory(spark) -> dict:
    """Peaks of this process (driver with delta-rs) and of the Spark JVM since they started: the
    steps share one process, so a step's figure includes the steps before it."""
    from bench import measure

    return {"driver_peak_rss_mb": measure.driver_peak_mb(), "jvm_peak_rss_mb": measure.jvm_peak_mb(spark)}


def report(label: str, step: dict) -> None:
    print(label, json.dumps({k: v for k, v in step.items() if k != "update_flows"}), flush=True)


def warm_up(spark, onboarding, onboarding_path: Path, work: Path, plan: dict) -> None:
    """A tiny run of both measured steps first, untimed, so that neither pays for JVM start-up,
    the JIT and Spark's code generation: a seed, then a snapshot that differs from it as the
    measured one does (the same plans: the difference and the batch are broadcast either way)."""
    tiny = work / "snapshots_warm_up" / TABLE
    landing, lake = work / "landing_warm_up", work / "lake_warm_up"
    for folder in (tiny, landing, lake):
        shutil.rmtree(folder, ignore_errors=True)
    for version in (1, 2):
        generate(spark, tiny / f"v{version}", 20 * plan["step"], plan, version)
        load(spark, onboarding, onboarding_path, landing, lake, tiny / f"v{version}")


def keep_initial_load(work: Path, kept: Path, facts: dict) -> None:
    """A copy of lake A and its landing as the initial load left them, for ``--repeat`` and
    ``--reuse-initial``. Restored at the same paths: checkpoints record absolute file paths."""
    shutil.rmtree(kept, ignore_errors=True)
    for name in ("landing_a", "lake_a"):
        shutil.copytree(work / name, kept / name)
    (kept / "initial.json").write_text(json.dumps(facts))


def restore_initial_load(work: Path, kept: Path) -> None:
    for name in ("landing_a", "lake_a"):
        shutil.rmtree(work / name, ignore_errors=True)
        shutil.copytree(kept / name, work / name)


def main() -> None:
    args = parse_args()
    os.environ.setdefault("CDC_LAKEHOUSE_DRIVER_MEMORY", args.driver_memory)
    from cdc_lakehouse.config import load_onboarding
    from cdc_lakehouse.runtime.session import get_spark
    from cdc_lakehouse.snapshot.reconcile import diff_snapshot
    from cdc_lakehouse.storage import LakeStore

    from bench import snapshot_floor

    work = Path(args.workdir or tempfile.mkdtemp(prefix="snapshot-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    spark = get_spark("snapshot-bench")
    onboarding_path = onboarding_file(work, args.scd)
    onboarding = load_onboarding(onboarding_path)
    plan = difference_plan(args.rows, args.diff)
    snapshots = work / "snapshots" / TABLE
    kept = work / "after_initial_load"
    reused = args.reuse_initial and (kept / "initial.json").exists()
    if reused:
        facts = json.loads((kept / "initial.json").read_text())
        expected, initial = facts["expected"], facts["initial"]
        warm_up(spark, onboarding, onboarding_path, work, plan)
    else:
        for name in ("landing_a", "lake_a", "landing_b", "lake_b"):  # a workdir of an earlier run
            shutil.rmtree(work / name, ignore_errors=True)
        _, gen1 = timed(generate, spark, snapshots / "v1", args.rows, plan, 1)
        expected, gen2 = timed(generate, spark, snapshots / "v2", args.rows, plan, 2)
        print(f"generated v1, v2 in {gen1}s, {gen2}s; expected difference {expected}", flush=True)
        warm_up(spark, onboarding, onboarding_path, work, plan)
        initial = load(spark, onboarding, onboarding_path, work / "landing_a", work / "lake_a", snapshots / "v1")
        if args.repeat > 1 or args.workdir:
            keep_initial_load(work, kept, {"expected": expected, "initial": initial})
    report("initial load (v1)", initial)
    repeats = []
    for i in range(args.repeat):
        if i or reused:
            restore_initial_load(work, kept)
        repeats.append(load(spark, onboarding, onboarding_path, work / "landing_a", work / "lake_a", snapshots / "v2"))
        report(f"incremental (v2) {i + 1} of {args.repeat}", repeats[-1])
    incremental = repeats[0]
    check = diff_snapshot(spark, LakeStore(spark, work / "lake_a"), snapshots / "v2", "silver.shop_products", onboarding)
    print("check", json.dumps(check.counts), flush=True)
    full = initial
    if not args.no_reload_v2:
        for name in ("landing_b", "lake_b"):
            shutil.rmtree(work / name, ignore_errors=True)
        full = load(spark, onboarding, onboarding_path, work / "landing_b", work / "lake_b", snapshots / "v2")
        report("full reload (v2)", full)
    # The replica holds v2 now: compared with v1, the floor finds the same difference again.
    floor = snapshot_floor.measure(spark, LakeStore(spark, work / "lake_a"), "silver.shop_products", "product_id",
                                   sorted((snapshots / "v1").glob("part-*.jsonl")), plan["step"], args.scd)
    print("floor", json.dumps(floor), flush=True)

    got = {k: incremental["counts"][k] for k in ("inserts", "updates", "deletes")}
    left = {k: check.counts[k] for k in ("inserts", "updates", "deletes")}
    results = {
        "rows": args.rows, "difference": args.diff, "scd": args.scd,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "driver_memory": os.environ["CDC_LAKEHOUSE_DRIVER_MEMORY"],
                    "load_average_at_end": os.getloadavg()},
        "expected_difference": expected, "corrective_changes": got,
        "corrections_equal_difference": got == expected,
        "left_after_apply": left, "replica_equals_snapshot_after_apply": not any(left.values()),
        "initial_load": initial, "incremental": incremental, "full_reload": full,
        "full_reload_is": "the initial load of v1" if args.no_reload_v2 else "v2 loaded into a fresh lake",
        "initial_load_reused": reused,
        "ratio_full_reload_over_incremental": round(full["total_s"] / incremental["total_s"], 2),
        "incremental_repeats_total_s": [r["total_s"] for r in repeats],
        "ratio_full_reload_over_incremental_median": round(full["total_s"] / statistics.median(r["total_s"] for r in repeats), 2),
        "ratio_full_reload_over_reconcile_only": round(full["total_s"] / incremental["reconcile_s"], 2),
        "floor": floor, "floor_found_the_difference": floor["differing_keys"] == sum(expected.values()),
        "ratio_full_reload_over_floor": round(full["total_s"] / floor["total_s"], 2),
        "measured_at": datetime.now(timezone.utc).isoformat(),
    }
    out = Path(args.out or REPO / "bench" / "results" / f"snapshot_reconcile_{args.rows}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(json.dumps({k: results[k] for k in ("corrections_equal_difference", "replica_equals_snapshot_after_apply",
                                              "ratio_full_reload_over_incremental")}), flush=True)
    print(f"results: {out}")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
