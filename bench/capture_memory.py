"""Peak memory of binlog capture against the size of one transaction (issue 38, case 6).

A private MariaDB (tests/live/servers.py, from the Debian package) gets one transaction per
size, inserting that many rows at once; ``cdc-lakehouse capture binlog`` reads it in a child
process of its own, whose peak resident set (``wait4``'s ``ru_maxrss``) is the measure. The
floor is the same capture of a one-row transaction, in the same run. With the event buffer
bounded, peak memory must not grow with the transaction: the ratio of the largest size to the
smallest is the number to watch (1.0 is flat).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the throw-away servers of the live tests

from live.servers import MariaDBServer  # noqa: E402

SERVER_ID = 31


def run(work: Path, sizes: tuple[int, ...], buffer_mb: int) -> dict:
    server = MariaDBServer.start(server_id=SERVER_ID)
    try:
        runs = [_one(server, work, n, buffer_mb) for n in (1, *sizes)]
    finally:
        server.cleanup()
    floor, measured = runs[0], runs[1:]
    return {
        "buffer_mb": buffer_mb, "floor": floor, "runs": measured,
        "rss_ratio_largest_to_smallest": round(measured[-1]["peak_rss_mb"] / measured[0]["peak_rss_mb"], 3),
        "rss_over_floor_largest": round(measured[-1]["peak_rss_mb"] / floor["peak_rss_mb"], 3),
    }


def _one(server: MariaDBServer, work: Path, rows: int, buffer_mb: int) -> dict:
    landing = work / f"capture-{rows}"
    conn = server.connect()
    try:
        cur = conn.cursor()
        cur.execute("RESET MASTER")  # the binlog holds this size's transaction only
        schema = f"big_{rows}"
        cur.execute(f"CREATE DATABASE {schema}")
        cur.execute(f"CREATE TABLE {schema}.t (id bigint PRIMARY KEY, v varchar(40), n decimal(12,2))")
        cur.execute("BEGIN")
        cur.execute(f"INSERT INTO {schema}.t SELECT seq, concat('row-', seq), seq / 100 FROM {schema}.seq_1_to_{rows}")
        cur.execute("COMMIT")
    finally:
        conn.close()
    t0 = time.perf_counter()
    peak_kb = _capture(server, landing, buffer_mb)
    landed = sum(f.stat().st_size for f in (landing / "bench" / "binlog").glob("*.jsonl"))
    return {"rows": rows, "peak_rss_mb": round(peak_kb / 1024, 1), "capture_s": round(time.perf_counter() - t0, 1),
            "landed_mb": round(landed / 2**20, 1)}


def _capture(server: MariaDBServer, landing: Path, buffer_mb: int) -> int:
    """Run one capture in a child process; its peak resident set in KB."""
    command = [sys.executable, "-m", "cdc_lakehouse.cli", "capture", "binlog", "--host", "127.0.0.1",
               "--port", str(server.port), "--landing", str(landing), "--source", "bench",
               "--buffer-mb", str(buffer_mb)]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"capture failed: {child.stderr.read().decode()[-2000:]}")
    return usage.ru_maxrss
