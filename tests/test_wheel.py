"""The wheel the bundle builds runs the pipeline without the checkout.

``make install`` is an editable install: the package and the pipeline folders are read from
src/. A wheel installed elsewhere (a Databricks job task, a capture host, a fresh venv) has only
what the wheel carries, so this builds it as the bundle does (``pip wheel --no-deps``), installs
it into a new venv and runs ``cdc-lakehouse run`` on the fixtures from a folder outside the repo.

The new venv borrows the third-party packages of the test's own venv (Spark, delta-rs, ...)
through a .pth file instead of downloading them again, and the delta-spark jars ``make install``
put in the test's venv (``CDC_LAKEHOUSE_DELTA_JARS``, as a host without make names its own). That file names the outer site-packages
folder as a plain path: the .pth files in it, among them the editable install's finder that maps
``cdc_lakehouse`` to src/, are not run, so the only cdc_lakehouse the new venv can import is the
wheel's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from silver_support import onboarding_for
from tiny_data import TINY_DATA

from cdc_lakehouse.runtime.session import DELTA_JARS

REPO = Path(__file__).resolve().parents[1]
# What the build reads. A copy, not the checkout: setuptools builds in the source tree and keeps
# its build/ folder, where a file deleted from src/ would live on into the next wheel.
BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md", "src")
# What the new venv's cdc_lakehouse reads: its package, the pipeline files run takes, the dashboard.
SHOW_INSTALLED = """
import glob, json, cdc_lakehouse
from cdc_lakehouse.project_files import dashboard_file, pipeline_sources
files = [f for pattern in pipeline_sources() for f in glob.glob(pattern, recursive=True)]
print(json.dumps({"package": cdc_lakehouse.__file__, "pipeline": files, "dashboard": str(dashboard_file())}))
"""
GOLD_TABLES = {"landing_summary", "replication_health", "audit_log"}  # one of each gold pipeline file's kind
# Every pipeline file runs whatever the onboarding names: one source's one table proves the wheel
# carries them (the whole demo onboarding made this the suite's slowest test).
ONE_TABLE = ({"shop"}, {"customers"})


def _run(cmd: list[str], cwd: Path, timeout: int, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")} | (env or {})
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def _site_packages(python: Path) -> Path:
    out = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], python.parent, 60)
    return Path(out.stdout.strip())


def test_the_wheel_runs_the_pipeline_on_the_fixtures_outside_the_repo(tmp_path: Path) -> None:
    source, dist, venv, work = tmp_path / "source", tmp_path / "dist", tmp_path / "venv", tmp_path / "work"
    work.mkdir()
    source.mkdir()
    for name in BUILD_INPUTS:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(REPO / name, source / name)
    # The bundle's build command (databricks.yml), run in the copy.
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(dist), "."], source, 300)
    (wheel,) = dist.glob("cdc_lakehouse-*.whl")

    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], work, 120)
    python = venv / "bin" / "python"
    # pip of this venv installs into the new one: no pip to bootstrap there, nothing downloaded.
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
         work, 300)
    outer = Path(sysconfig.get_paths()["purelib"])
    (_site_packages(python) / "outer_venv_packages.pth").write_text(f"{outer}\n", encoding="utf-8")

    shown = json.loads(_run([str(python), "-c", SHOW_INSTALLED], work, 60).stdout)
    packaged = Path(shown["package"]).parent / "_src"
    assert packaged.is_relative_to(venv), shown  # the wheel's package, not the checkout's
    repo_files = {p.relative_to(REPO / "src") for layer in ("bronze", "silver", "gold")
                  for p in (REPO / "src" / layer).rglob("*.py")}
    assert {Path(f).relative_to(packaged) for f in shown["pipeline"]} == repo_files
    assert Path(shown["dashboard"]) == packaged / "dashboards" / "cdc_lakehouse.lvdash.json"
    assert Path(shown["dashboard"]).is_file()

    lake, onboarding = tmp_path / "lake", onboarding_for(tmp_path, *ONE_TABLE)
    # The suite's settings for tiny inputs, through spark-submit: the run is most of this test's time.
    tiny = " ".join(f"--conf {key}={value}" for key, value in TINY_DATA.items())
    _run([str(venv / "bin" / "cdc-lakehouse"), "run", "--lake", str(lake),
          "--landing", str(REPO / "fixtures" / "landing"), "--config", str(onboarding)],
         work, 900, env={"PYSPARK_SUBMIT_ARGS": f"{tiny} pyspark-shell", "CDC_LAKEHOUSE_DELTA_JARS": str(DELTA_JARS)})
    gold = {p.parent.name for p in (lake / "gold").glob("*/_delta_log")}
    assert GOLD_TABLES | {"shop_customers"} <= gold, gold
    assert not list(work.iterdir()), "the run wrote into its working directory"
