"""Measuring: the machine, wall time, peak memory of the driver (Python) and of the JVM, and
running each measured phase in a fresh worker process so its peaks are its own.

Peak memory, per phase (each phase is one worker process with its own Spark JVM):

* ``driver_peak_rss_mb``: ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of the worker's Python
  process: the PySpark driver, including Arrow batches collected from Spark and everything
  delta-rs (Rust, in-process) allocates for writes and MERGEs;
* ``jvm_peak_rss_mb``: ``VmHWM`` (peak resident set) from ``/proc/<pid>/status`` of the Spark JVM
  (the py4j gateway, a child of the worker), read just before Spark stops. Python workers the JVM
  may fork are not included (the pipeline runs no Python UDFs);
* ``children_peak_rss_mb``: ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` after Spark has stopped:
  the largest reaped child, normally the JVM: a cross-check of the previous value (0 when the JVM
  was not reaped yet).

``tracemalloc`` is not used: it slows the driver down a lot and does not see Arrow's or
delta-rs' native allocations, which are most of the driver's memory here.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def machine() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = (0.0, 0.0, 0.0)
    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "memory_gb": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "loadavg_at_start": [round(x, 2) for x in load],
        "date_utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def versions() -> dict:
    out = {}
    for mod in ("pyspark", "deltalake", "pyarrow"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # pragma: no cover - reported, not fatal
            out[mod] = None
    return out


class Stopwatch:
    def __init__(self):
        self.laps: dict[str, float] = {}

    @contextmanager
    def lap(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.laps[name] = round(self.laps.get(name, 0.0) + time.perf_counter() - t0, 3)


def git_state() -> dict:
    """The commit measured, and the files that differ from it (uncommitted edits run too)."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return ""
    return {"commit": git("rev-parse", "HEAD").strip() or None,
            "uncommitted": [line[3:] for line in git("status", "--porcelain").splitlines()]}


# -- memory ---------------------------------------------------------------------------------
def _kb_to_mb(kb: int) -> float:
    return round(kb / 1024, 1)  # Linux reports ru_maxrss in KiB


def driver_peak_mb() -> float:
    return _kb_to_mb(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def children_peak_mb() -> float:
    return _kb_to_mb(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


def _status(pid: int) -> dict:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            out[key] = value.strip()
    except OSError:
        pass
    return out


def jvm_pid(spark) -> int | None:
    """The Spark JVM: the py4j gateway process, or a java process among our descendants."""
    try:
        proc = spark.sparkContext._gateway.proc  # noqa: SLF001 - the documented way in
        if proc is not None and _status(proc.pid).get("Name", "").startswith("java"):
            return proc.pid
    except Exception:
        pass
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            status = _status(int(entry.name))
            if status.get("Name", "").startswith("java") and int(status.get("PPid", -1)) == me:
                return int(entry.name)
    return None


def jvm_peak_mb(spark) -> float | None:
    pid = jvm_pid(spark)
    if pid is None:
        return None
    hwm = _status(pid).get("VmHWM")
    return _kb_to_mb(int(hwm.split()[0])) if hwm else None


# -- CPU time -----------------------------------------------------------------------------------
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, list[str]] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text[text.rindex(")") + 2:].split()  # fields after "pid (comm)"
    return int(rest[1]), rest  # ppid, fields (state is rest[0])


def cpu_seconds_tree(root: int | None = None) -> float:
    """CPU seconds (user + system) used so far by ``root`` (default: this process) and every
    live descendant (the Spark JVM, its Python workers), including their reaped children.

    On a machine shared with other jobs, wall time depends on the load; the CPU time a phase
    consumes much less so. ``events per CPU-second`` is reported beside events/s for that reason.
    """
    root = os.getpid() if root is None else root
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st:
                stats[int(entry.name)] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            f = stats[pid][1]
            total += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])  # utime stime cutime cstime
        todo += children.get(pid, [])
    return round(total / _TICK, 2)


class CpuMeter:
    """CPU seconds of this process tree between ``start()`` and ``stop()``."""

    def start(self) -> "CpuMeter":
        self.t0 = cpu_seconds_tree()
        return self

    def stop(self) -> float:
        return round(cpu_seconds_tree() - self.t0, 2)


# -- workers --------------------------------------------------------------------------------
def run_worker(phase: str, params: dict, timeout: float | None = None) -> dict:
    """Run ``python -m bench _worker <phase>`` in a fresh process; return its JSON result."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        out = f.name
    cmd = [sys.executable, "-m", "bench", "_worker", phase, "--params", json.dumps(params), "--result", out]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, timeout=timeout, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        result = json.loads(Path(out).read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        result = {}
    finally:
        Path(out).unlink(missing_ok=True)
    result.setdefault("worker_wall_s", round(time.perf_counter() - started, 1))
    if proc.returncode != 0 or not result.get("ok"):
        tail = "\n".join(proc.stdout.splitlines()[-40:])
        result.update(ok=False, error=result.get("error") or f"worker exited {proc.returncode}", log_tail=tail)
    return result


def finish_worker(spark, result: dict) -> dict:
    """Record peaks and stop Spark; called by every worker at its end."""
    result["memory"] = {"driver_peak_rss_mb": driver_peak_mb(), "jvm_peak_rss_mb": jvm_peak_mb(spark)}
    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    spark.stop()
    if proc is not None:  # the JVM exits when its stdin closes; reap it for RUSAGE_CHILDREN
        try:
            proc.stdin.close()
            proc.wait(timeout=60)
        except Exception:
            pass
    result["memory"]["children_peak_rss_mb"] = children_peak_mb()
    return result
