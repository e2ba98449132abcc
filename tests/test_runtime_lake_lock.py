"""One update at a time on a lake: a second run, in another process, stops at once with the
holder named, and a killed holder leaves no lock behind (issue 41 case 2)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cdc_lakehouse.cli import main
from cdc_lakehouse.runtime.lake_lock import LakeLocked, lake_lock
from lake_helpers import REPO

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
