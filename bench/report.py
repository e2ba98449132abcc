"""Results as rich tables on the terminal and as Markdown for bench/RESULTS.md."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

console = Console(width=max(160, Console().width))


def _mb(mem: dict | None, key: str) -> str:
    v = (mem or {}).get(key)
    return "-" if v is None else f"{v:,.0f}"


def _peak(r: dict) -> dict:
    """The phase's peaks: taken right after the measured work (before verification)."""
    return r.get("memory_after_run") or r.get("memory_after_apply") or r.get("memory") or {}


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.2f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def throughput_rows(res: dict) -> list[list[str]]:
    rows = []
    for side, label in (("baseline", "baseline: latest per key + MERGE"), ("pipeline", "pipeline: bronze -> silver -> gold")):
        r = res.get(side)
        if not r:
            continue
        if not r.get("ok"):
            rows.append([label, "FAILED", "-", "-", "-", "-", "-", str(r.get("error"))[:60]])
            continue
        v = r.get("verify", {})
        bad = {t: (x.get("missing", 0), x.get("unexpected", 0)) for t, x in v.items() if isinstance(x, dict) and not x.get("equal")}
        correct = "yes" if v.get("all_equal") else ("no: " + ", ".join(f"{t} -{m}/+{u}" for t, (m, u) in bad.items()) if v else "-")
        mem = _peak(r)
        rows.append([label, _fmt(r["wall_s"]), _fmt(r["events_per_s"]), _fmt(r.get("cpu_s")), _fmt(r.get("events_per_cpu_s")),
                     _mb(mem, "driver_peak_rss_mb"), _mb(mem, "jvm_peak_rss_mb"), correct])
    return rows


THROUGHPUT_HEADER = ["run", "wall s", "row changes/s", "CPU s", "row changes/CPU-s", "driver peak MB", "JVM peak MB",
                     "replicas = source state"]
APPLY_HEADER = ["SCD", "keys", "method", "table rows", "files", "apply s", "CPU s", "spark+collect s", "delta-rs s",
                "driver peak MB", "JVM peak MB"]


def apply_rows(res: dict) -> list[list[str]]:
    rows = []
    for r in res.get("runs", []):
        if not r.get("ok"):
            rows.append([str(r.get("scd")), r.get("dist", "-"), r.get("method", "-"), _fmt(r.get("size")), "-", "FAILED", "-", "-", "-", "-", "-"])
            continue
        storage = r.get("storage", {})
        collect = sum(s.get("spark_collect_s", 0) for s in storage.values())
        delta = sum(s.get("delta_write_s", 0) for s in storage.values())
        files = ", ".join(str(v) for v in (r.get("build") or {}).get("files", {}).values())
        mem = _peak(r)
        rows.append([str(r["scd"]), r["dist"], r["method"], _fmt(r["size"]), files, _fmt(r["apply_s"]), _fmt(r.get("cpu_s")),
                     _fmt(round(collect, 2)), _fmt(round(delta, 2)), _mb(mem, "driver_peak_rss_mb"), _mb(mem, "jvm_peak_rss_mb")])
    return rows


def ratio_rows(res: dict) -> list[list[str]]:
    return [[str(x["scd"]), x["dist"], x["method"], f"{x['small']:,} -> {x['large']:,}", _fmt(x["small_s"]), _fmt(x["large_s"]),
             _fmt(x["ratio"]), "met" if x["target <= 1.5"] else "NOT met"] for x in res.get("ratios", [])]


RATIO_HEADER = ["SCD", "keys", "method", "rows", "small s", "large s", "ratio", "target <= 1.5"]


def profile_rows(res: dict, top: int = 12) -> list[list[str]]:
    prof = (res.get("pipeline") or {}).get("profile") or {}
    wall = (res.get("pipeline") or {}).get("wall_s") or 1
    return [[f["flow"], f["flow_type"], _fmt(f["rows_read"]), _fmt(f["rows_written"]), _fmt(f["self_s"]),
             f"{100 * f['self_s'] / wall:.0f}%"] for f in prof.get("flows", [])[:top]]


PROFILE_HEADER = ["flow", "type", "rows read", "rows written", "self s", "% of wall"]


def storage_rows(res: dict, top: int = 10) -> list[list[str]]:
    storage = ((res.get("pipeline") or {}).get("profile") or {}).get("storage") or {}
    items = sorted(storage.items(), key=lambda kv: -kv[1].get("write_s", 0))
    return [[t, _fmt(s.get("write_s")), _fmt(s.get("spark_collect_s")), _fmt(s.get("delta_write_s")),
             _fmt(int(sum(v for k, v in s.items() if k.endswith("_rows"))))] for t, s in items[:top]]


STORAGE_HEADER = ["table", "write s", "delta-rs: Spark + collect s", "delta-rs: commit s", "rows written"]


def _table(title: str, header: list[str], rows: list[list[str]]) -> Table:
    t = Table(title=title)
    for h in header:
        t.add_column(h)
    for r in rows:
        t.add_row(*r)
    return t


def print_throughput(res: dict) -> None:
    w = res["workload"]
    console.print(_table(f"Throughput: {w['row_changes']:,} binlog row changes ({w['binlog_lines']:,} lines)",
                         THROUGHPUT_HEADER, throughput_rows(res)))
    console.print(f"ratio pipeline/baseline (events/s): {res.get('ratio_vs_baseline')}; by CPU time: "
                  f"{res.get('cpu_ratio_vs_baseline')}; targets: {res.get('targets')}")
    if profile_rows(res):
        console.print(_table("Where the pipeline's time goes (self time per flow, event log)", PROFILE_HEADER, profile_rows(res)))
        console.print(_table("Storage calls (TimingStore)", STORAGE_HEADER, storage_rows(res)))
        prof = res["pipeline"]["profile"]
        console.print(f"self time by layer: {prof['by_layer']}; outside flows: {prof['outside_flows_s']} s")


def print_apply(res: dict) -> None:
    layout = f", seed files of {res['file_rows']:,} rows" if res.get("file_rows") else ""
    console.print(_table(f"Apply {res['changes']:,} changes versus table size{layout}", APPLY_HEADER, apply_rows(res)))
    if res.get("ratios"):
        console.print(_table("Large / small", RATIO_HEADER, ratio_rows(res)))


SNAPSHOT_HEADER = ["step", "reconcile s", "pipeline update s", "total s", "inserts", "updates", "deletes", "unchanged",
                   "driver peak MB so far", "JVM peak MB so far"]


def snapshot_rows(res: dict) -> list[list[str]]:
    steps = (("initial load (seed)", "initial_load"), ("incremental (1 snapshot vs replica)", "incremental"))
    if res.get("full_reload") != res.get("initial_load"):
        steps += (("full reload (fresh lake)", "full_reload"),)
    rows = []
    for label, name in steps:
        step, counts = res[name], res[name]["counts"]
        memory = step.get("memory_peak_so_far") or {}  # not recorded by runs before 2026-11-23 05:00
        rows.append([label, *[_fmt(step[k]) for k in ("reconcile_s", "update_s", "total_s")],
                     *[_fmt(counts[k]) for k in ("inserts", "updates", "deletes", "unchanged")],
                     *[_fmt(memory.get(k)) for k in ("driver_peak_rss_mb", "jvm_peak_rss_mb")]])
    return rows


def snapshot_summary(res: dict) -> str:
    summary = (f"corrections equal the difference: {res['corrections_equal_difference']}; replica equals the snapshot "
               f"after apply: {res['replica_equals_snapshot_after_apply']}; full reload / incremental: "
               f"**{res['ratio_full_reload_over_incremental']}** (target >= 20); full reload / reconcile only: "
               f"{res['ratio_full_reload_over_reconcile_only']}")
    floor = res.get("floor")  # not measured by runs before 2026-11-25
    if floor:
        summary += (f"; floor (any code, this machine and storage): compare {floor['compare_s']} s + copy-on-write "
                    f"MERGEs {round(sum(floor['merge_s'].values()), 2)} s = {floor['total_s']} s, so full reload / "
                    f"floor: {res['ratio_full_reload_over_floor']}")
    return summary


def print_snapshot(res: dict) -> None:
    if not res.get("ok"):
        console.print(f"snapshot benchmark FAILED: {res.get('error')}")
        return
    console.print(_table(f"Snapshot of {res['rows']:,} rows, {res['difference']:.0%} different", SNAPSHOT_HEADER,
                         snapshot_rows(res)))
    console.print(snapshot_summary(res))


UPDATE_COUNTS = ("s", "jobs", "commits", "py4j_calls", "planning_s")
INCREMENTAL_HEADER = ["history row changes", "binlog lines", "load s",
                      *[f"{phase} {k.replace('_', ' ')}" for phase in ("noop", "small") for k in UPDATE_COUNTS],
                      "small rows written", "floor s", "small / floor", "replicas = source state"]


def incremental_rows(res: dict) -> list[list[str]]:
    rows = []
    for h, r in sorted(res.get("by_history", {}).items(), key=lambda kv: int(kv[0])):
        v = r.get("verify") or {}
        correct = "-" if not v else ("yes" if v.get("all_equal") else "no")
        rows.append([_fmt(int(h)), _fmt(r["workload"]["binlog_lines"]), _fmt(r.get("history_load_s")),
                     *[_fmt(r.get(f"{phase}_{k}")) for phase in ("noop", "small") for k in UPDATE_COUNTS],
                     _fmt(r.get("small_rows_written")),
                     _fmt(r.get("floor_s")), _fmt(r.get("small_over_floor")), correct])
    return rows


def incremental_summary(res: dict) -> str:
    return (f"{res.get('statistic')} of {res.get('rounds')} rounds; {res.get('changes'):,} row changes per small update; "
            f"largest / smallest history: small update **{res.get('small_ratio')}** (CPU {res.get('small_cpu_ratio')}), "
            f"no-op update **{res.get('noop_ratio')}** (CPU {res.get('noop_cpu_ratio')})")


def incremental_flow_rows(res: dict, top: int = 15) -> list[list[str]]:
    """The ``top`` longest flows of the last small update at the largest history."""
    histories = sorted(res.get("by_history", {}), key=int)
    prof = (res["by_history"][histories[-1]].get("small_profile") or {}) if histories else {}
    flows = sorted(prof.get("flows", []), key=lambda f: -f["self_s"])[:top]
    return [[f["flow"], f["flow_type"], _fmt(f["rows_read"]), _fmt(f["rows_written"]), _fmt(f["self_s"]),
             *[_fmt(f.get(k)) for k in ("jobs", "job_s", "planning_s", "py4j", "commits")]] for f in flows]


INCREMENTAL_FLOW_HEADER = ["flow", "type", "rows read", "rows written", "self s", "jobs", "job s", "planning s",
                           "py4j calls", "commits"]


def print_incremental(res: dict) -> None:
    if res.get("error"):
        console.print(f"incremental benchmark FAILED: {res['error']}")
    console.print(_table("Incremental updates versus history", INCREMENTAL_HEADER, incremental_rows(res)))
    console.print(incremental_summary(res))
    if incremental_flow_rows(res):
        console.print(_table("The last small update at the largest history: flows by self time", INCREMENTAL_FLOW_HEADER,
                             incremental_flow_rows(res)))


CAPTURE_MEMORY_HEADER = ["rows in the transaction", "peak RSS MB", "capture s", "landed MB"]


def print_capture_memory(res: dict) -> None:
    rows = [[str(r["rows"]), str(r["peak_rss_mb"]), str(r["capture_s"]), str(r["landed_mb"])]
            for r in [res["floor"], *res["runs"]]]
    console.print(_table(f"Binlog capture memory (buffer {res['buffer_mb']} MB)", CAPTURE_MEMORY_HEADER, rows))
    console.print(f"peak RSS largest / smallest transaction: {res['rss_ratio_largest_to_smallest']}; "
                  f"largest / one-row floor: {res['rss_over_floor_largest']}")


STORE_OPS_HEADER = ["operation", "store", "median s", "mean s", "max s", "median jobs", "mean jobs", "max jobs",
                    "commits", "median / plain"]


def store_ops_rows(res: dict) -> list[list[str]]:
    rows = []
    for operation in sorted({op for numbers in res["stores"].values() for op in numbers}):
        for store, numbers in res["stores"].items():
            n = numbers.get(operation)
            if n is not None:
                rows.append([operation, store, *[_fmt(n[k]) for k in ("median_s", "mean_s", "max_s", "median_jobs",
                                                                      "mean_jobs", "max_jobs", "commits")],
                             _fmt(res["ratios"].get(f"{store}/{operation}"))])
    return rows


def print_store_ops(res: dict) -> None:
    console.print(_table(f"One store operation on {res['rows']} rows ({res['repeat']} calls each; MERGE into "
                         f"{res['large_rows']:,} rows)", STORE_OPS_HEADER, store_ops_rows(res)))


# -- Markdown ---------------------------------------------------------------------------------
def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in rows]
    return "\n".join(lines)


def markdown(result: dict) -> str:
    parts = []
    if "throughput" in result:
        tp = result["throughput"]
        w = tp["workload"]
        parts.append(f"### Throughput ({w['row_changes']:,} row changes, {w['binlog_lines']:,} binlog lines, "
                     f"{w['binlog_bytes'] / 1e6:.0f} MB, {w['transactions']:,} transactions)\n")
        parts.append(md_table(THROUGHPUT_HEADER, throughput_rows(tp)))
        parts.append(f"\nratio pipeline / baseline (events/s, wall): **{tp.get('ratio_vs_baseline')}**; "
                     f"by CPU time: **{tp.get('cpu_ratio_vs_baseline')}**; targets: {tp.get('targets')}\n")
        if profile_rows(tp):
            parts.append(md_table(PROFILE_HEADER, profile_rows(tp, 15)))
            parts.append("")
            parts.append(md_table(STORAGE_HEADER, storage_rows(tp)))
            prof = tp["pipeline"]["profile"]
            parts.append(f"\nself time by layer (s): {prof['by_layer']}; outside flows (graph load, event log): "
                         f"{prof['outside_flows_s']} s\n")
    if "apply_scaling" in result:
        ap = result["apply_scaling"]
        layout = f"seed: files of {ap['file_rows']:,} rows in key order" if ap.get("file_rows") else (
            "seed: one append in key order, in the 16 MB files of keyed tables")
        parts.append(f"### Apply {ap['changes']:,} changes versus table size ({layout})\n")
        parts.append(md_table(APPLY_HEADER, apply_rows(ap)))
        if ap.get("ratios"):
            parts.append("")
            parts.append(md_table(RATIO_HEADER, ratio_rows(ap)))
        parts.append("")
    if result.get("snapshot", {}).get("ok"):
        sn = result["snapshot"]
        parts.append(f"### Snapshot reconciliation: {sn['rows']:,} rows, {sn['difference']:.0%} different "
                     f"(SCD{sn['scd']})\n")
        parts.append(md_table(SNAPSHOT_HEADER, snapshot_rows(sn)))
        parts.append(f"\n{snapshot_summary(sn)}\n")
    if "store_ops" in result:
        so = result["store_ops"]
        parts.append(f"### One store operation on {so['rows']} rows ({so['repeat']} calls each)\n")
        parts.append(md_table(STORE_OPS_HEADER, store_ops_rows(so)))
        parts.append("")
    if "incremental" in result:
        inc = result["incremental"]
        parts.append(f"### Incremental updates versus history ({inc['changes']:,} row changes per small update)\n")
        parts.append(md_table(INCREMENTAL_HEADER, incremental_rows(inc)))
        parts.append(f"\n{incremental_summary(inc)}\n")
        if incremental_flow_rows(inc):
            parts.append(md_table(INCREMENTAL_FLOW_HEADER, incremental_flow_rows(inc)))
            parts.append("")
    return "\n".join(parts)
