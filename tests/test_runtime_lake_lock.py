"""One update at a time on a lake: a second run, in another process, stops at once with the
holder named, and a killed holder leaves no lock behind; two updates that race past the lock
ingest each landing line once (issue 41 case 2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import held_steps
from cdc_lakehouse.cli import main
from cdc_lakehouse.runtime.lake_lock import LakeLocked, lake_lock
from cdc_lakehouse.runtime.runner import run_pipeline
from cdc_lakehouse.storage import LakeStore
from lake_helpers import REPO, write_jsonl
from silver_support import onboarding_for

EVENTS = "bronze.shop_binlog_events"

HOLD = """
import sys
from pathlib import Path
from cdc_lakehouse.runtime.lake_lock import lake_lock
with lake_lock(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()  # until the test closes it, or kills this process
"""


def _holder(lake: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(lake)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env={"PYTHONPATH": str(REPO / "src")})
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_run_on_a_locked_lake_stops_and_names_the_holder(tmp_path, capsys):
    lake = tmp_path / "lake"
    (tmp_path / "landing").mkdir()
    holder = _holder(lake)
    try:
        code = main(["run", "--lake", str(lake), "--landing", str(tmp_path / "landing"),
                     "--config", str(REPO / "conf/onboarding.yml")])
        out = " ".join(capsys.readouterr().err.split())  # the console may wrap the line
        assert code == 2 and "another pipeline update is running on" in out and f'"pid": {holder.pid}' in out
        assert not list(lake.glob("*/*")), "the second run wrote nothing"
    finally:
        holder.kill()
        holder.wait()


def test_a_killed_holder_leaves_no_lock_behind(tmp_path):
    lake = tmp_path / "lake"
    holder = _holder(lake)
    with pytest.raises(LakeLocked):
        with lake_lock(lake):
            pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with lake_lock(lake):  # taken at once: no stale lock to break by hand
        pass


RACER = """
import json, sys
from pathlib import Path
from cdc_lakehouse.runtime.loader import load_pipeline
from cdc_lakehouse.runtime.runner import PipelineRunner, pipeline_configuration
from cdc_lakehouse.runtime.session import get_spark
from cdc_lakehouse.storage import ConcurrentCommit, LakeStore

lake, config, sources, table = Path(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]

def pause(stage, name):  # just before its first commit to the table, until the test says go on
    if stage == "before" and name == table:
        print("committing", flush=True)
        sys.stdin.readline()

spark = get_spark("racer")
with pipeline_configuration(spark, config):  # without the lake's lock: as on another machine
    graph = load_pipeline(spark, sources)
    try:
        PipelineRunner(spark, LakeStore(spark, lake, commit_hook=pause), graph, lake, config).run()
    except ConcurrentCommit as refused:
        print(refused, flush=True)
        sys.exit(3)
"""


def test_two_updates_racing_past_the_lock_ingest_each_line_once(spark, tmp_path):
    """The lock does not cover a lake shared by two machines. There, an update that starts while
    another process is between planning and committing a bronze batch re-runs that planned batch;
    the process that commits second is refused by Delta and stops, and bronze has every line once."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "shop" / "binlog" / "1.jsonl", held_steps.transaction(100, [(1, "ann"), (2, "bob")]))
    config = {"cdc_lakehouse.landing_path": str(landing),
              "cdc_lakehouse.onboarding_file": str(onboarding_for(tmp_path, {"shop"}))}
    bronze = [str(REPO / "src" / "bronze" / "**" / "*.py")]
    racer = subprocess.Popen([sys.executable, "-c", RACER, str(lake), json.dumps(config), json.dumps(bronze), EVENTS],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    try:
        assert racer.stdout.readline().strip() == "committing"
        run_pipeline(spark, bronze, lake, config)  # commits the batch the racer planned
        out, _ = racer.communicate("go on\n", timeout=300)
    finally:
        racer.kill()
    assert racer.returncode == 3 and f"committed to {EVENTS} while this update wrote batch 0" in out
    store = LakeStore(spark, lake)
    assert store.read(EVENTS).count() == 4 and store.read(f"{EVENTS}_quarantine").count() == 0  # 4 lines landed
    run_pipeline(spark, bronze, lake, config)  # the next update: nothing left to ingest
    assert LakeStore(spark, lake).read(EVENTS).count() == 4
