"""Apply cost versus table size: the same number of changes (default 10k) into replicas of
different sizes (default 100k and 10M rows); the ratio of the times says whether the cost
follows the changes (ratio near 1) or the table (ratio near the size ratio).

What is measured is the project's AUTO CDC step, ``cdc_lakehouse.cdc.apply.apply_changes``: the
exact function a pipeline's ``silver.<table>__auto_cdc`` flow runs (``runtime.sinks.write_cdc``),
with the replica and its ``__apply_changes_storage_`` state table (latest sequence per key,
tombstones) as the pipeline leaves them. Seeding 10M rows through the whole pipeline would take
hours here, so the seed tables are written directly with delta-rs, in the pipeline's schema
(``orders``-like rows of 12 columns, the binlog sequence ``struct<position, txn>``), laid out as
a first pipeline write lays them out (one append in key order, in files of the size the store
gives keyed tables).
Beside it, on an identical copy, the bare delta-rs MERGE of the same changes
(``DeltaRsStore.upsert``) shows how much of the cost is the storage MERGE itself.

Each (size, method) is measured in its own worker process: its own JVM and memory peaks.
Building the seed tables happens in a separate worker, so it does not count in those peaks.

Changes: 70% updates of existing keys, 15% inserts of new keys, 15% deletes; existing keys
drawn ``uniform`` over the table (worst case: every file is touched) or ``recent`` (the newest
1% of keys, as CDC on orders mostly is: clustering by key lets a MERGE skip old files).
"""

from __future__ import annotations

import array
import os
import random
import shutil
import time
from pathlib import Path

from bench import measure

TARGET = "silver.scale_orders"
HISTORY = "silver.scale_orders_history"
DATA_COLUMNS = ("order_id", "account_id", "status", "total", "currency", "channel", "created_at", "updated_at",
                "items", "discount", "tax", "note")
INTERNAL = ["__op", "__sequence", "__commit_ts", "__txn_id"]
STATUSES = ["new", "paid", "shipped", "delivered", "cancelled"]
CHANNELS = ["web", "app", "store", "phone"]
CHUNK = 1_000_000
METHODS = ("auto_cdc", "merge")  # the project's AUTO CDC step; the bare delta-rs MERGE
DISTS = ("uniform", "recent")  # how existing keys are drawn (see the module docstring)
SCD_TYPES = (1, 2)


def _arrow():
    import pyarrow as pa
    import pyarrow.compute as pc
    return pa, pc


def _range(pa, start: int, stop: int):
    data = array.array("q", range(start, stop))
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])


def _seq_type(pa):
    return pa.struct([("position", pa.int64()), ("txn", pa.string())])


def _data_batch(pa, pc, ids, scd2: bool):
    n = len(ids)
    h = pc.bit_wise_and(pc.multiply(ids, pa.scalar(2654435761, pa.int64())), pa.scalar(0x7FFFFFFF, pa.int64()))
    ids_text = pc.cast(ids, pa.string())
    cols = {
        "order_id": ids,
        "account_id": pc.add(pc.divide(h, pa.scalar(1000, pa.int64())), pa.scalar(1, pa.int64())),
        "status": pc.take(pa.array(STATUSES), pc.remainder(h, pa.scalar(len(STATUSES), pa.int64()))),
        "total": pc.divide(pc.cast(pc.remainder(h, pa.scalar(100_000, pa.int64())), pa.float64()), pa.scalar(100.0)),
        "currency": pa.array(["EUR"] * n),
        "channel": pc.take(pa.array(CHANNELS), pc.remainder(h, pa.scalar(len(CHANNELS), pa.int64()))),
        "created_at": pa.array(["2026-03-02T09:00:00Z"] * n),
        "updated_at": pa.array(["2026-03-02T10:00:00Z"] * n),
        "items": pc.add(pc.remainder(h, pa.scalar(6, pa.int64())), pa.scalar(1, pa.int64())),
        "discount": pa.array([0.0] * n),
        "tax": pc.divide(pc.cast(pc.remainder(h, pa.scalar(19_000, pa.int64())), pa.float64()), pa.scalar(100.0)),
        "note": pc.binary_join_element_wise(pa.array(["order "] * n), ids_text, ""),
    }
    if scd2:
        seq = pa.StructArray.from_arrays([ids, pc.binary_join_element_wise(pa.array(["xid:"] * n), ids_text, "")],
                                         fields=list(_seq_type(pa)))
        cols["__START_AT"] = seq
        cols["__END_AT"] = pa.nulls(n, _seq_type(pa))
    return pa.record_batch(list(cols.values()), names=list(cols))


def _state_batch(pa, pc, ids):
    n = len(ids)
    seq = pa.StructArray.from_arrays([ids, pc.binary_join_element_wise(pa.array(["xid:"] * n), pc.cast(ids, pa.string()), "")],
                                     fields=list(_seq_type(pa)))
    return pa.record_batch([ids, seq, pa.array([False] * n), pa.array([None] * n, pa.timestamp("us", tz="UTC"))],
                           names=["order_id", "__seq", "__deleted", "__updated_at"])


def build(lake: Path, size: int, scd2: bool, file_rows: int | None = None) -> dict:
    """Write the replica (or history) and its state table with ``size`` rows: in one append in
    key order, with the file size the store gives keyed tables (as the pipeline's first write
    lays a table out), or, with ``file_rows``, in files of that many rows in key order."""
    from deltalake import write_deltalake

    from cdc_lakehouse.cdc.apply import state_table_name
    from cdc_lakehouse.storage.delta_rs import KEYED_TARGET_FILE_SIZE

    pa, pc = _arrow()
    target = HISTORY if scd2 else TARGET
    t0 = time.perf_counter()
    paths = {}
    for name, make in ((target, lambda ids: _data_batch(pa, pc, ids, scd2)), (state_table_name(target), lambda ids: _state_batch(pa, pc, ids))):
        path = paths[name] = Path(lake).resolve() / Path(*name.split("."))
        shutil.rmtree(path, ignore_errors=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        first = make(_range(pa, 1, 2))
        if file_rows:
            for s in range(1, size + 1, file_rows):
                write_deltalake(str(path), make(_range(pa, s, min(size, s + file_rows - 1) + 1)), mode="append")
        else:
            batches = (make(_range(pa, s, min(size, s + CHUNK - 1) + 1)) for s in range(1, size + 1, CHUNK))
            write_deltalake(str(path), pa.RecordBatchReader.from_batches(first.schema, batches), mode="append",
                            configuration={"delta.targetFileSize": str(KEYED_TARGET_FILE_SIZE)})
    took = round(time.perf_counter() - t0, 1)
    files = {name: sum(1 for f in os.listdir(p) if f.endswith(".parquet")) for name, p in paths.items()}
    return {"build_s": took, "files": files}


def copy_lake(src: Path, dst: Path) -> None:
    """A copy that shares the (immutable) data files: hard links, and a real copy of the logs."""
    shutil.rmtree(dst, ignore_errors=True)
    for root, dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for f in files:
            s, d = Path(root) / f, dst / rel / f
            if "_delta_log" in s.parts:
                shutil.copy2(s, d)
            else:
                try:
                    os.link(s, d)
                except OSError:
                    shutil.copy2(s, d)


def changes(spark, size: int, n: int, dist: str, seed: int):
    """``n`` changes: 70% updates, 15% inserts of new keys, 15% deletes, one per key."""
    from pyspark.sql import Row  # noqa: F401

    rng = random.Random(seed)
    n_ins = n * 15 // 100
    n_del = n * 15 // 100
    n_upd = n - n_ins - n_del
    if dist == "recent":
        lo = max(1, size - max(n_upd + n_del, size // 100) + 1)
        existing = rng.sample(range(lo, size + 1), n_upd + n_del)
    else:
        existing = rng.sample(range(1, size + 1), n_upd + n_del)
    rows = []
    base = 10**12
    for i, k in enumerate(existing):
        op = "UPDATE" if i < n_upd else "DELETE"
        rows.append((k, k // 1000 + 1, STATUSES[(k + 1) % 5], round((k % 100_000) / 100 + 1, 2), "EUR", CHANNELS[k % 4],
                     "2026-03-02T09:00:00Z", "2026-03-03T10:00:00Z", k % 6 + 1, 0.0, 1.0, f"order {k}",
                     op, (base + i, f"xid:{base + i}"), None, f"xid:{base + i}"))
    for j in range(n_ins):
        k = size + 1 + j
        i = n_upd + n_del + j
        rows.append((k, 7, "new", 10.0, "EUR", "web", "2026-03-03T10:00:00Z", "2026-03-03T10:00:00Z", 1, 0.0, 1.9,
                     None, "INSERT", (base + i, f"xid:{base + i}"), None, f"xid:{base + i}"))
    schema = ("order_id long, account_id long, status string, total double, currency string, channel string, "
              "created_at string, updated_at string, items long, discount double, tax double, note string, "
              "__op string, __sequence struct<position:long,txn:string>, __commit_ts timestamp, __txn_id string")
    return spark.createDataFrame(rows, schema)


class _Batch:
    """The runtime's FlowBatch as apply_changes sees it: one fresh batch, nothing committed."""

    id = 1
    app_id = "cdc-lakehouse/bench-apply"

    def already_committed(self, table: str) -> bool:
        return False

    def commit(self):
        from cdc_lakehouse.storage import Commit
        return Commit(self.app_id, self.id)


# -- workers ----------------------------------------------------------------------------------
def worker_build(params: dict) -> dict:
    result = {"ok": False}
    result.update(build(Path(params["lake"]), params["size"], params["scd2"], params.get("file_rows")))
    result["memory"] = {"driver_peak_rss_mb": measure.driver_peak_mb()}
    result["ok"] = True
    return result


def worker_apply(params: dict) -> dict:
    from pyspark.sql import functions as F

    from bench.profiling import TimingStore
    from cdc_lakehouse.cdc import apply as cdc_apply
    from cdc_lakehouse.runtime.session import get_spark
    from cdc_lakehouse.storage import UpsertSpec


    spark = get_spark("bench-apply")
    result = {"ok": False}
    lake = Path(params["lake"])
    scd2 = params["scd2"]
    df = changes(spark, params["size"], params["changes"], params["dist"], params["seed"]).persist()
    df.count()
    # warm up this JVM on a throw-away table: same code paths, tiny data
    warm = lake.with_name(lake.name + "-warm")
    shutil.rmtree(warm, ignore_errors=True)
    build(warm, 2000, scd2)
    warm_store = TimingStore(spark, warm)
    spec = cdc_apply.CdcSpec(keys=["order_id"], sequence_by="__sequence", scd_type=2 if scd2 else 1,
                             apply_as_deletes="__op = 'DELETE'", except_column_list=INTERNAL)
    small = changes(spark, 2000, 100, params["dist"], params["seed"])
    target = HISTORY if scd2 else TARGET
    if params["method"] == "auto_cdc":
        cdc_apply.apply_changes(warm_store, target, small, spec, _Batch(), {})
    else:
        warm_store.upsert(target, small.select(*DATA_COLUMNS, (F.col("__op") == "DELETE").alias("_is_delete")),
                          UpsertSpec(("order_id",), "_is_delete"))
    warm_store.close()
    shutil.rmtree(warm, ignore_errors=True)

    store = TimingStore(spark, lake)
    cpu = measure.CpuMeter().start()
    t0 = time.perf_counter()
    if params["method"] == "auto_cdc":
        cdc_apply.apply_changes(store, target, df, spec, _Batch(), {})
    else:  # the bare MERGE of the same changes (SCD1 shape)
        store.upsert(TARGET, df.select(*DATA_COLUMNS, (F.col("__op") == "DELETE").alias("_is_delete")),
                     UpsertSpec(("order_id",), "_is_delete"))
    result["apply_s"] = round(time.perf_counter() - t0, 3)
    result["cpu_s"] = cpu.stop()
    store.close()
    result["storage"] = store.summary()
    result["memory_after_apply"] = {"driver_peak_rss_mb": measure.driver_peak_mb(), "jvm_peak_rss_mb": measure.jvm_peak_mb(spark)}
    result["rows_after"] = {t.name: t.row_count for t in store.list_tables()}
    result["ok"] = True
    return measure.finish_worker(spark, result)


# -- orchestration -----------------------------------------------------------------------------
def run(work: Path, sizes=(100_000, 10_000_000), n_changes: int = 10_000, scd_types=(1,), dists=("uniform",),
        methods=METHODS, seed: int = 7, file_rows: int | None = None, log=print) -> dict:
    work = Path(work)
    out: dict = {"changes": n_changes, "file_rows": file_rows, "runs": []}
    for scd in scd_types:
        scd2 = scd == 2
        for size in sizes:
            seed_lake = work / f"apply-seed-{size}-scd{scd}"
            log(f"seed: {size:,} rows (SCD{scd}) ...")
            built = measure.run_worker("apply_build", {"lake": str(seed_lake), "size": size, "scd2": scd2, "file_rows": file_rows})
            if not built.get("ok"):
                out["runs"].append({"size": size, "scd": scd, "ok": False, "error": built.get("error"), "log_tail": built.get("log_tail")})
                log(f"  build FAILED: {built.get('error')}")
                continue
            log(f"  built in {built['build_s']} s, files {built['files']}")
            for dist in dists:
                for method in methods:
                    if method == "merge" and scd2:
                        continue  # the bare MERGE has no history: compare it on SCD1 only
                    lake = work / f"apply-{size}-scd{scd}-{dist}-{method}"
                    copy_lake(seed_lake, lake)
                    log(f"  apply {n_changes:,} changes ({method}, {dist}) ...")
                    r = measure.run_worker("apply", {"lake": str(lake), "size": size, "scd2": scd2, "changes": n_changes,
                                                     "dist": dist, "method": method, "seed": seed})
                    r.update(size=size, scd=scd, dist=dist, method=method, build=built)
                    out["runs"].append(r)
                    log(f"    {r.get('apply_s')} s" if r.get("ok") else f"    FAILED: {r.get('error')}")
                    shutil.rmtree(lake, ignore_errors=True)
            shutil.rmtree(seed_lake, ignore_errors=True)
    out["ratios"] = ratios(out["runs"], sizes)
    return out


def ratios(runs: list[dict], sizes) -> list[dict]:
    if len(sizes) < 2:
        return []
    small, large = min(sizes), max(sizes)
    res = []
    groups = {(r["scd"], r["dist"], r["method"]) for r in runs if r.get("ok")}
    for scd, dist, method in sorted(groups):
        t = {r["size"]: r["apply_s"] for r in runs if r.get("ok") and (r["scd"], r["dist"], r["method"]) == (scd, dist, method)}
        if small in t and large in t:
            res.append({"scd": scd, "dist": dist, "method": method, "small": small, "large": large,
                        "small_s": t[small], "large_s": t[large], "ratio": round(t[large] / t[small], 2),
                        "target <= 1.5": t[large] / t[small] <= 1.5})
    return res
