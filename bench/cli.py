"""``python -m bench <command>``: generate workloads, measure, print tables, write JSON.

Commands: ``generate``, ``throughput``, ``apply-scaling``, ``snapshot`` (reconciliation versus
reload, bench/snapshot_reconcile.py), ``all`` (the three, one JSON), ``incremental`` (a no-op and
a small update versus the history in the lake, bench/incremental.py; not part of ``all``),
``store-ops`` (seconds, Spark jobs and Delta commits of one store operation, each engine beside
plain delta-spark: bench/store_ops.py),
``report`` (Markdown from a JSON result).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench import measure
from bench.apply_scaling import DISTS, METHODS, SCD_TYPES
from bench.store_ops import STORES
from bench.throughput import LAYERS
from bench.workload import FORMS, TABLES

DEFAULT_WORK = Path("/tmp/cdc-lakehouse-bench")
RESULTS = Path(__file__).resolve().parent / "results"


# The argparse types below reject bad values before any work starts (exit 2, one line naming
# the value), rather than after a benchmark that ran for an hour, or silently measuring a default.
def _words(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _sizes(text: str) -> tuple[int, ...]:
    """A non-empty comma list of positive integers (``1e6`` allowed)."""
    try:
        sizes = tuple(int(float(x)) for x in _words(text))
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"not a comma list of integers: {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"need a non-empty comma list of positive integers, got {text!r}")
    return sizes


def _positive(text: str) -> int:
    """A positive integer (``1e3`` allowed)."""
    try:
        value = int(float(text))
    except (ValueError, OverflowError):
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"need a positive integer, got {text!r}")
    return value


def _list_of(known, convert=str):
    """The type of a non-empty comma list of ``known`` values."""
    names = [str(k) for k in known]

    def parse(text: str) -> tuple:
        words = _words(text)
        bad = [w for w in words if w not in names]
        if bad or not words:
            what = f"unknown {', '.join(bad)}" if bad else "empty list"
            raise argparse.ArgumentTypeError(f"{what} in {text!r}; known: {', '.join(names)}")
        return tuple(convert(w) for w in words)
    return parse


def _input_file(text: str) -> Path:
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    return Path(text)


def _output_file(text: str) -> Path:
    """A file to write: not a folder, and its folder exists or can be created under a writable one."""
    path = Path(text)
    folder = next(p for p in path.absolute().parents if p.exists())
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text}: {folder} is not a writable folder")
    return path


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    print(f"wrote {path}")


def _write_json(path: Path, data: dict) -> None:
    _write(path, json.dumps(data, indent=2, default=str))


# phase -> whether it succeeded (the baseline is a comparison, not a failure of ours)
PHASE_OK = {"throughput": lambda r: r["pipeline"].get("ok"),
            "apply_scaling": lambda r: all(run.get("ok") for run in r["runs"]),
            "snapshot": lambda r: r.get("ok"),
            "incremental": lambda r: r.get("ok")}


def exit_code(result: dict) -> int:
    """1 when any phase present in ``result`` failed, so scripts and CI see the failure."""
    return 0 if all(ok(result[phase]) for phase, ok in PHASE_OK.items() if phase in result) else 1


def _header(command: str, args) -> dict:
    return {"command": " ".join(["python -m bench", *sys.argv[1:]]) if command else None,
            "machine": measure.machine(), "versions": measure.versions(),
            "args": {k: v for k, v in vars(args).items() if k != "func"}}


def cmd_generate(args) -> int:
    from bench.workload import WorkloadOptions, generate

    t0 = time.perf_counter()
    s = generate(args.out, WorkloadOptions(row_changes=args.row_changes, seed=args.seed, forms=args.forms,
                                            tables=args.tables or WorkloadOptions().tables,
                                            events_per_file=args.events_per_file))
    took = time.perf_counter() - t0
    d = s.as_dict()
    print(json.dumps({k: v for k, v in d.items() if k != "options"}, indent=2))
    print(f"generated {d['row_changes']:,} row changes in {took:.1f} s ({d['row_changes'] / took:,.0f}/s) under {args.out}")
    return 0


def cmd_throughput(args) -> int:
    from bench import report, throughput

    result = _header("throughput", args)
    result["throughput"] = throughput.run(args.work, args.row_changes, args.seed, args.tables or None, args.warmup_changes,
                                          args.layers, baseline=not args.no_baseline, keep_lakes=args.keep_lakes,
                                          events_per_file=args.events_per_file)
    report.print_throughput(result["throughput"])
    _write_json(args.json or RESULTS / "throughput.json", result)
    return exit_code(result)


def cmd_apply_scaling(args) -> int:
    from bench import apply_scaling, report

    result = _header("apply-scaling", args)
    result["apply_scaling"] = apply_scaling.run(args.work, args.sizes, args.changes, args.scd, args.dist, args.methods, args.seed,
                                                     args.file_rows)
    report.print_apply(result["apply_scaling"])
    _write_json(args.json or RESULTS / "apply_scaling.json", result)
    return exit_code(result)


def snapshot_run(rows: int, diff: float, work: Path) -> dict:
    """The snapshot benchmark in a fresh process: it sizes the driver's memory before Spark starts."""
    out = work / f"snapshot_reconcile_{rows}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    # The reload is the initial load of v1: the same rows through the same steps as loading v2
    # into a fresh lake, which would double the run's longest part for the same number.
    command = [sys.executable, "-m", "bench.snapshot_reconcile", "--rows", str(rows), "--diff", str(diff),
               "--out", str(out), "--no-reload-v2"]
    if subprocess.run(command, cwd=Path(__file__).resolve().parents[1]).returncode:
        return {"ok": False, "error": f"{' '.join(command)} failed"}
    return {"ok": True, **json.loads(out.read_text())}


def cmd_snapshot(args) -> int:
    from bench import report

    result = _header("snapshot", args)
    result["snapshot"] = snapshot_run(args.snapshot_rows, args.snapshot_diff, args.work)
    report.print_snapshot(result["snapshot"])
    _write_json(args.json or RESULTS / "snapshot.json", result)
    return exit_code(result)


def cmd_incremental(args) -> int:
    """In this process: one Spark session runs every update, warm after the history loads."""
    from bench import incremental, report
    from cdc_lakehouse.runtime.session import get_spark

    result = {**_header("incremental", args), "git": measure.git_state()}
    spark = get_spark("bench-incremental")
    res = incremental.run(spark, args.work, args.history, args.changes, args.rounds, args.seed, args.tables or None,
                          args.events_per_file, check=not args.no_verify, keep_lakes=args.keep_lakes)
    result["incremental"] = measure.finish_worker(spark, res)
    result.update({name: res.get(name) for name in incremental.RATIOS})
    report.print_incremental(res)
    _write_json(args.json or RESULTS / "incremental.json", result)
    return exit_code(result)


def cmd_store_ops(args) -> int:
    """In this process: one Spark session measures every store, warm after the first."""
    from bench import report, store_ops
    from cdc_lakehouse.runtime.session import get_spark

    result = {**_header("store-ops", args), "git": measure.git_state()}
    spark = get_spark("bench-store-ops")
    result["store_ops"] = store_ops.run(spark, args.work, args.repeat, args.stores)
    report.print_store_ops(result["store_ops"])
    spark.stop()
    _write_json(args.json or RESULTS / "store_ops.json", result)
    return 0


def cmd_capture_memory(args) -> int:
    from bench import capture_memory, report

    result = {**_header("capture-memory", args), "git": measure.git_state()}
    result["capture_memory"] = capture_memory.run(args.work, args.rows, args.buffer_mb)
    report.print_capture_memory(result["capture_memory"])
    _write_json(args.json or RESULTS / "capture_memory.json", result)
    return 0


def cmd_all(args) -> int:
    from bench import apply_scaling, report, throughput

    result = _header("all", args)
    t0 = time.perf_counter()
    result["throughput"] = throughput.run(args.work, args.row_changes, args.seed, args.tables or None, args.warmup_changes,
                                          args.layers, baseline=not args.no_baseline, keep_lakes=args.keep_lakes,
                                          events_per_file=args.events_per_file)
    report.print_throughput(result["throughput"])
    result["apply_scaling"] = apply_scaling.run(args.work, args.sizes, args.changes, args.scd, args.dist, args.methods, args.seed,
                                                     args.file_rows)
    report.print_apply(result["apply_scaling"])
    result["snapshot"] = snapshot_run(args.snapshot_rows, args.snapshot_diff, args.work)
    report.print_snapshot(result["snapshot"])
    result["total_s"] = round(time.perf_counter() - t0, 1)
    result["machine"]["loadavg_at_end"] = list(measure.machine()["loadavg_at_start"])
    _write_json(args.json or RESULTS / "all.json", result)
    if args.markdown:
        _write(args.markdown, report.markdown(result))
    return exit_code(result)


def cmd_report(args) -> int:
    from bench import report

    try:
        result = json.loads(args.json.read_text())
    except ValueError as exc:
        raise SystemExit(f"error: {args.json} is not a results file: {exc}") from None
    text = report.markdown(result)
    if args.markdown:
        _write(args.markdown, text)
    else:
        print(text)
    return 0


def cmd_worker(args) -> int:
    """Internal: run one measured phase in this (fresh) process, write its result as JSON."""
    from bench import apply_scaling, throughput

    phases = {"pipeline": throughput.worker_pipeline, "baseline": throughput.worker_baseline,
              "apply_build": apply_scaling.worker_build, "apply": apply_scaling.worker_apply}
    params = json.loads(args.params)
    try:
        result = phases[args.phase](params)
    except Exception as exc:  # reported to the orchestrator, which prints the log tail
        import traceback
        traceback.print_exc()
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    Path(args.result).write_text(json.dumps(result, default=str))
    return 0 if result.get("ok") else 1


def _workload_args(p, default_n: int) -> None:
    p.add_argument("--row-changes", type=lambda x: int(float(x)), default=default_n,
                   help=f"binlog row changes (row images) to generate (default {default_n:,}; 1e6 works)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--tables", type=_list_of(TABLES), default=(), help="comma list of tables (default: all four)")


def _measure_args(p) -> None:
    p.add_argument("--work", type=Path, default=DEFAULT_WORK, help=f"scratch directory (default {DEFAULT_WORK})")
    p.add_argument("--json", type=_output_file, help="where to write the JSON result (default bench/results/<command>.json)")


def _throughput_args(p) -> None:
    p.add_argument("--warmup-changes", type=int, default=2000, help="size of the warm-up workload run first in each worker (0: none)")
    p.add_argument("--layers", type=_list_of(LAYERS), default=LAYERS)
    p.add_argument("--no-baseline", action="store_true")
    p.add_argument("--keep-lakes", action="store_true", help="keep the lakes under --work for inspection")
    p.add_argument("--events-per-file", type=int, default=50_000, help="binlog lines per landing file (default 50000)")


def _apply_args(p) -> None:
    p.add_argument("--sizes", type=_sizes, default=(100_000, 10_000_000), help="replica sizes (default 100000,10000000)")
    p.add_argument("--changes", type=lambda x: int(float(x)), default=10_000)
    p.add_argument("--scd", type=_list_of(SCD_TYPES, int), default=(1,), help="SCD types to measure: 1, 2 or 1,2")
    p.add_argument("--dist", type=_list_of(DISTS), default=("uniform",), help="key choice: uniform, recent or both")
    p.add_argument("--methods", type=_list_of(METHODS), default=METHODS)
    p.add_argument("--file-rows", type=lambda x: int(float(x)), default=None,
                   help="seed tables in files of this many rows, in key order (default: one append, delta-rs file size)")


def _snapshot_args(p) -> None:
    p.add_argument("--snapshot-rows", type=lambda x: int(float(x)), default=10_000_000,
                   help="rows of the reconciled table (default 10M)")
    p.add_argument("--snapshot-diff", type=float, default=0.01, help="fraction of keys that differ (default 0.01)")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True, metavar="command")

    p = sub.add_parser("generate", help="write a workload (landing files, expected state, onboarding)")
    p.add_argument("--out", type=Path, required=True)
    _workload_args(p, 1_000_000)
    p.add_argument("--forms", type=_list_of(FORMS), default=FORMS)
    p.add_argument("--events-per-file", type=int, default=50_000)
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("throughput", help="bronze->gold events/s beside the hand-written baseline")
    _workload_args(p, 1_000_000)
    _measure_args(p)
    _throughput_args(p)
    p.set_defaults(func=cmd_throughput)

    p = sub.add_parser("apply-scaling", help="apply cost of N changes versus replica size")
    _measure_args(p)
    _apply_args(p)
    p.add_argument("--seed", type=int, default=7)
    p.set_defaults(func=cmd_apply_scaling)

    p = sub.add_parser("snapshot", help="snapshot reconciliation + apply versus a full reload")
    _measure_args(p)
    _snapshot_args(p)
    p.set_defaults(func=cmd_snapshot)

    p = sub.add_parser("all", help="throughput, apply-scaling and snapshot, one JSON (and Markdown)")
    _workload_args(p, 1_000_000)
    _measure_args(p)
    _throughput_args(p)
    _apply_args(p)
    _snapshot_args(p)
    p.add_argument("--markdown", type=_output_file, help="also write the results as Markdown")
    p.set_defaults(func=cmd_all)

    p = sub.add_parser("incremental", help="a no-op and a small update versus the history in the lake")
    _measure_args(p)
    p.add_argument("--history", type=_sizes, default=(20_000, 200_000),
                   help="row changes of each lake's history (default 20000,200000)")
    p.add_argument("--changes", type=_positive, default=100, help="binlog row changes landed before each small update")
    p.add_argument("--rounds", type=_positive, default=2, help="turns of every lake (default 2; the minimum is reported)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--tables", type=_list_of(TABLES), default=(), help="comma list of tables (default: all four)")
    p.add_argument("--events-per-file", type=int, default=50_000, help="binlog lines per landing file (default 50000)")
    p.add_argument("--no-verify", action="store_true", help="skip comparing the replicas with the source state at the end")
    p.add_argument("--keep-lakes", action="store_true", help="keep the lakes under --work for inspection")
    p.set_defaults(func=cmd_incremental)

    p = sub.add_parser("store-ops", help="seconds, Spark jobs and Delta commits of one store operation, per engine")
    _measure_args(p)
    p.add_argument("--repeat", type=_positive, default=12, help="calls of each operation (default 12)")
    p.add_argument("--stores", type=_list_of(STORES), default=STORES, help="comma list (default: all three)")
    p.set_defaults(func=cmd_store_ops)

    p = sub.add_parser("capture-memory", help="peak memory of binlog capture versus the size of one transaction")
    _measure_args(p)
    p.add_argument("--rows", type=_sizes, default=(100_000, 1_000_000),
                   help="rows of the one transaction, per run (default 100000,1000000)")
    p.add_argument("--buffer-mb", type=_positive, default=64, help="capture's event buffer (default 64)")
    p.set_defaults(func=cmd_capture_memory)

    p = sub.add_parser("report", help="Markdown tables from a JSON result")
    p.add_argument("--json", type=_input_file, required=True)
    p.add_argument("--markdown", type=_output_file)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("_worker")  # internal: one measured phase in a fresh process
    p.add_argument("phase")
    p.add_argument("--params", required=True)
    p.add_argument("--result", required=True)
    p.set_defaults(func=cmd_worker)

    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    return args.func(args)
