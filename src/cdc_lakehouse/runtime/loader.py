"""Imports pipeline source files with ``pyspark.pipelines`` (as Databricks has it), the legacy
``dlt`` API and ``spark`` injected."""

from __future__ import annotations

import contextlib
import glob
import sys
import types
from pathlib import Path

from pyspark.sql import SparkSession

from cdc_lakehouse.runtime import dlt_api
from cdc_lakehouse.runtime.declarations import loading_file, loading_graph
from cdc_lakehouse.runtime.dp_api import databricks_pipelines_api
from cdc_lakehouse.runtime.graph import PipelineDefinitionError, PipelineGraph
from cdc_lakehouse.runtime.spark_proxy import SparkProxy


def expand_sources(patterns: list[str]) -> list[Path]:
    files: list[Path] = []
    for pattern in patterns:
        matched = sorted(glob.glob(pattern, recursive=True))
        if not matched:
            raise PipelineDefinitionError(f"no pipeline source file matches {pattern!r}")
        files.extend(Path(m) for m in matched if m.endswith(".py") and Path(m).is_file())
    return list(dict.fromkeys(f.resolve() for f in files))


@contextlib.contextmanager
def _dlt_module_injected():
    """``import dlt`` resolves to our API only while the files load."""
    saved = sys.modules.get("dlt")
    sys.modules["dlt"] = dlt_api
    try:
        yield
    finally:
        if saved is None:
            sys.modules.pop("dlt", None)
        else:
            sys.modules["dlt"] = saved


def load_pipeline(spark: SparkSession, sources: list[str]) -> PipelineGraph:
    graph = PipelineGraph()
    token = loading_graph.set(graph)
    try:
        with _dlt_module_injected(), databricks_pipelines_api():
            for path in expand_sources(sources):
                _exec_file(path, spark)
    finally:
        loading_graph.reset(token)
    return graph


def _exec_file(path: Path, spark: SparkSession) -> None:
    module = types.ModuleType(f"pipeline_{path.stem}")
    module.__file__ = str(path)
    module.__dict__["spark"] = SparkProxy(spark)  # the global a notebook has
    file_token = loading_file.set(str(path))
    try:
        exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    finally:
        loading_file.reset(file_token)
