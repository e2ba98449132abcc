"""What a flow's output depends on besides the data it reads: its code and its configuration.

While this fingerprint and the input stay as they were, the runner keeps work instead of
redoing it: a streaming flow whose sources have nothing new does not plan its query, a
materialized view whose inputs are unchanged is not recomputed (unchanged_views.py), and a
view refreshed by partition keeps its untouched partitions (partition_refresh.py).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from cdc_lakehouse.runtime import declarations

DEFINITION = "definition"  # checkpoint entry holding the fingerprint


def pipeline_fingerprint(graph, configuration: dict | None = None) -> str:
    """Changes with any code of this package, any pipeline file (a flow may read a view of
    another file), and the pipeline configuration with the content of the files it names (the
    onboarding file, say)."""
    digest = hashlib.sha256(_package_fingerprint().encode())
    files = {d.source_file for d in graph.datasets.values()} | {f.source_file for f in graph.flows.values()}
    for path in sorted(f for f in files if f):
        _add_file(digest, path)
    for key, value in sorted((configuration or {}).items()):
        digest.update(f"{key}={value}".encode())
        _add_file(digest, str(value))
    return digest.hexdigest()


def definition_fingerprint(pipeline: str, target, flow) -> str:
    """The pipeline's fingerprint and the declarations of ``flow`` and its ``target``."""
    cdc = sorted((k, getattr(v, "__qualname__", v)) for k, v in flow.cdc.items())  # a snapshot function
    declared = (
        target.name, target.schema, sorted(target.table_properties.items()), target.partition_cols,
        target.expectations, declarations.expectations_of(flow.func), flow.name, flow.kind, flow.once, cdc,
    )
    return hashlib.sha256(f"{pipeline}{declared!r}".encode()).hexdigest()


def _add_file(digest, path: str) -> None:
    try:
        if Path(path).is_file():
            digest.update(Path(path).read_bytes())
    except (OSError, ValueError):  # a configuration value that only looks like a path
        pass


@functools.lru_cache(maxsize=1)
def _package_fingerprint() -> str:
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()
