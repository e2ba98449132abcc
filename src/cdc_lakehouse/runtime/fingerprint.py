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

DEFINITION = "definition"  # checkpoint entry holding the fingerprint


def definition_fingerprint(target, flow=None, configuration: dict | None = None) -> str:
    """Changes with the pipeline files of the target and flow, their declarations, any code of
    this package, and the pipeline configuration (with the content of files it names, such as
    the onboarding file)."""
    digest = hashlib.sha256(_package_fingerprint().encode())
    files = {target.source_file, getattr(flow, "source_file", None)}
    for path in sorted(f for f in files if f):
        _add_file(digest, path)
    digest.update(repr((target.name, target.schema, sorted(target.table_properties.items()))).encode())
    if flow is not None:
        cdc = sorted((k, getattr(v, "__qualname__", v)) for k, v in flow.cdc.items())  # a snapshot function
        digest.update(repr((flow.name, flow.kind, flow.once, cdc)).encode())
    for key, value in sorted((configuration or {}).items()):
        digest.update(f"{key}={value}".encode())
        _add_file(digest, str(value))
    return digest.hexdigest()


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
