"""One update at a time on a lake: a second run, in another process, stops at once with the
holder named, and a killed holder leaves no lock behind; two updates that race past the lock
ingest each landing line once (issue 41 case 2)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

import held_steps
from cdc_lakehouse.cli import main
from cdc_lakehouse.runtime.lake_lock import LakeLocked, lake_lock
from cdc_lakehouse.runtime.loader import load_pipeline
from cdc_lakehouse.runtime.runner import PipelineRunner, pipeline_configuration, run_pipeline
from cdc_lakehouse.storage import ConcurrentCommit, DeltaRsStore
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


def test_two_updates_racing_past_the_lock_ingest_each_line_once(spark, tmp_path):
    """The lock does not cover a lake shared by two machines. There, an update that starts while
    another is between planning and committing a bronze batch re-runs that planned batch; the
    one that commits second is refused by Delta and stops, and bronze has every line once."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "shop" / "binlog" / "1.jsonl", held_steps.transaction(100, [(1, "ann"), (2, "bob")]))
    config = {"cdc_lakehouse.landing_path": str(landing),
              "cdc_lakehouse.onboarding_file": str(onboarding_for(tmp_path, {"shop"}))}
    bronze = [str(REPO / "src" / "bronze" / "**" / "*.py")]
    with pipeline_configuration(spark, config):
        other = load_pipeline(spark, bronze)
    raced = []

    def other_update_runs(stage: str, table: str) -> None:  # just before the first update commits
        if stage == "before" and table == EVENTS and not raced:
            raced.append(PipelineRunner(spark, DeltaRsStore(spark, lake), other, lake, config).run())

    with pytest.raises(ConcurrentCommit, match=f"committed to {EVENTS} while this update wrote batch 0"):
        run_pipeline(spark, bronze, lake, config, store=DeltaRsStore(spark, lake, commit_hook=other_update_runs))
    assert raced and DeltaRsStore(spark, lake).read(EVENTS).count() == 4
    run_pipeline(spark, bronze, lake, config)  # the next update: nothing left to ingest
    assert DeltaRsStore(spark, lake).read(EVENTS).count() == 4
