"""The small-batch plans (runtime/small_batch.py) against the session's settings throughout, on one
lake in one process: after the history load and a warm-up update, each round lands
``--changes`` row changes before an update with the plan and one without (in alternating
order), so the machine's drift falls on both alike. Reports every update (wall and CPU seconds,
Spark jobs, Delta commits, py4j calls) and the medians; the replicas are checked against the
source state at the end.

    CDC_LAKEHOUSE_ENGINE=delta-spark python -m bench.small_batch_ab --history 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from bench import incremental
from bench.workload import TABLES

KEPT = ("wall_s", "cpu_s", "jobs", "commits", "py4j_calls")


def run(spark, work: Path, history: int, changes: int, rounds: int) -> dict:
    from cdc_lakehouse.runtime import small_batch

    plans = {"SMALL_BATCH_PLAN": small_batch.SMALL_BATCH_PLAN, "TINY_BATCH_PLAN": small_batch.TINY_BATCH_PLAN}
    lake = incremental.build_lake(work, history, 42, tuple(TABLES), 50_000)
    lake.load = incremental.timed_update(spark, lake)
    lake.feed.land(changes)
    incremental.timed_update(spark, lake)  # warm-up
    updates: dict[str, list[dict]] = {"small_batch_plan": [], "adaptive_throughout": []}
    try:
        for r in range(rounds):
            modes = list(updates) if r % 2 == 0 else list(reversed(updates))
            for mode in modes:
                for name, plan in plans.items():
                    setattr(small_batch, name, plan if mode == "small_batch_plan" else {})
                lake.feed.land(changes)
                update = incremental.timed_update(spark, lake)
                updates[mode].append({k: update[k] for k in KEPT})
                print(mode, updates[mode][-1], flush=True)
    finally:
        for name, plan in plans.items():
            setattr(small_batch, name, plan)
    medians = {mode: {k: statistics.median(u[k] for u in rows) for k in KEPT} for mode, rows in updates.items()}
    verified = incremental.verify_lake(spark, lake, tuple(TABLES))["all_equal"]
    return {"history": history, "changes": changes, "rounds": rounds, "load": {k: lake.load[k] for k in KEPT},
            "updates": updates, "medians": medians, "replicas_equal_source": verified,
            "finished_utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=2000)
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=Path("bench/results/small-batch-ab.json"))
    args = parser.parse_args()
    from cdc_lakehouse.runtime.session import get_spark

    with tempfile.TemporaryDirectory() as work:
        result = run(get_spark("bench-small-batch"), Path(work), args.history, args.changes, args.rounds)
    args.json.write_text(json.dumps(result, indent=1))
    print(json.dumps(result["medians"], indent=1))


if __name__ == "__main__":
    main()
