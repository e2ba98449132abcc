"""The runtime on a Spark standalone cluster (scripts/cluster_demo.sh): a master and a worker on
loopback, the pipeline's tasks on the worker's executor, every table written by delta-spark
from there. One table's update, in a process of its own (the suite's session is local)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from silver_support import onboarding_for
from tiny_data import TINY_DATA

REPO = Path(__file__).resolve().parents[1]
GOLD = ("audit_log", "replication_health", "shop_customers")


def test_the_pipeline_runs_its_tasks_on_a_standalone_worker(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    tiny = " ".join(f"--conf {key}={value}" for key, value in TINY_DATA.items())
    env = {**os.environ, "PYSPARK_SUBMIT_ARGS": f"{tiny} pyspark-shell", "CLUSTER_PORT": "7178"}
    done = subprocess.run(
        ["bash", "scripts/cluster_demo.sh", "run", "--lake", str(lake), "--landing", str(REPO / "fixtures" / "landing"),
         "--config", str(onboarding_for(tmp_path, {"shop"}, {"customers"}))],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "tasks ran on the standalone worker" in done.stdout
    assert all((lake / "gold" / name / "_delta_log").is_dir() for name in GOLD)
