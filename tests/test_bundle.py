"""Offline checks of the Databricks asset bundle (databricks.yml + resources/*.yml).

No Spark, no network, no Databricks CLI:

* JSON-schema validation against the vendored bundle schema
  (vendor/databricks-bundle-schema/jsonschema.json, what `databricks bundle schema`
  prints). The schema's interpolation patterns use ECMAScript ``\\p{L}``/``\\p{N}``,
  which Python's ``re`` (and hence plain ``jsonschema``) cannot compile, so the
  check runs the ``check-jsonschema`` CLI in a subprocess with
  ``--regex-variant default`` (ECMAScript in unicode mode, via ``regress``).
  ``--regex-variant python`` fails to compile the schema and ``nonunicode``
  treats ``\\p{L}`` literally, so every ``${var.x}`` in a typed field would fail.
  Resource files are fragments of the same root config, so the root schema
  applies to them as-is.
* The root schema allows unknown top-level keys (``additionalProperties: {}``),
  so top-level keys are checked here against the schema's own property list.
* Every resource is loaded with the databricks-bundles models
  (``Pipeline.from_dict``, ``Job.from_dict``, ...), which reject unknown fields
  and wrong types.
* Project-specific assertions: targets, pipeline globs, configuration keys,
  declared variables.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
BUNDLE_FILE = REPO / "databricks.yml"
RESOURCES_DIR = REPO / "resources"
SCHEMA_FILE = REPO / "vendor" / "databricks-bundle-schema" / "jsonschema.json"

PIPELINE_KEY = "cdc_lakehouse"
LAYERS = ("bronze", "silver", "gold")
CONFIG_KEYS = {
    "cdc_lakehouse.landing_path": "landing_path",
    "cdc_lakehouse.onboarding_file": "onboarding_file",
}

# Resource kind (key under `resources:`) -> model class exported by the public
# module databricks.bundles.<kind> (databricks-bundles==1.22.1).
MODEL_CLASSES: dict[str, str] = {
    "alerts": "Alert",
    "apps": "App",
    "catalogs": "Catalog",
    "cluster_policies": "ClusterPolicy",
    "clusters": "Cluster",
    "dashboards": "Dashboard",
    "database_catalogs": "DatabaseCatalog",
    "database_instances": "DatabaseInstance",
    "experiments": "MlflowExperiment",
    "external_locations": "ExternalLocation",
    "genie_spaces": "GenieSpace",
    "instance_pools": "InstancePool",
    "job_runs": "JobRun",
    "jobs": "Job",
    "model_serving_endpoints": "ModelServingEndpoint",
    "models": "MlflowModel",
    "pipelines": "Pipeline",
    "quality_monitors": "QualityMonitor",
    "registered_models": "RegisteredModel",
    "schemas": "Schema",
    "secret_scopes": "SecretScope",
    "secrets": "Secret",
    "sql_warehouses": "SqlWarehouse",
    "synced_database_tables": "SyncedDatabaseTable",
    "vector_search_endpoints": "VectorSearchEndpoint",
    "vector_search_indexes": "VectorSearchIndex",
    "volumes": "Volume",
}
# Kinds the schema knows but databricks-bundles 1.22.1 has no model for: only the
# JSON schema checks these.
KINDS_WITHOUT_MODEL = frozenset(
    {
        "postgres_branches",
        "postgres_catalogs",
        "postgres_databases",
        "postgres_endpoints",
        "postgres_projects",
        "postgres_roles",
        "postgres_synced_tables",
    }
)

VAR_REF = re.compile(r"\$\{var\.([A-Za-z_][A-Za-z0-9_-]*)")
# "'x' does not match '\\$\\{(var(...' ": the interpolation-string alternative failing.
INTERPOLATION_MISMATCH = re.compile(r"does not match '[\\]*\$[\\]*\{")


# --------------------------------------------------------------------------- helpers


def _resource_files() -> list[Path]:
    return sorted(RESOURCES_DIR.glob("*.yml"))


def _bundle_files() -> list[Path]:
    return [BUNDLE_FILE, *_resource_files()]


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path.name}: top level must be a mapping"
    return data


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def schema_errors(*paths: Path) -> list[str]:
    """Validate files against the vendored bundle schema; return readable errors.

    An empty list means every file is valid.
    """
    cmd = [
        sys.executable,
        "-m",
        "check_jsonschema",
        "--schemafile",
        str(SCHEMA_FILE),
        "--regex-variant",
        "default",
        "--force-filetype",
        "yaml",
        "--output-format",
        "json",
        "--verbose",  # all sub-errors, not only the best match
        *map(str, paths),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        report = None
    if report is None or (proc.returncode not in (0, 1)):
        # Schema failed to load, bad option, crash: never report that as "valid".
        return [f"check-jsonschema exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}".strip()]
    if report.get("status") == "ok" and proc.returncode == 0:
        return []
    errors: list[str] = []
    for err in report.get("parse_errors", []):
        errors.append(f"{_rel(Path(err.get('filename', '?')))}: parse error: {err.get('message', err)}")
    for err in report.get("errors", []):
        name = _rel(Path(err["filename"]))
        leaves = _leaf_errors(err.get("sub_errors") or [])
        if not leaves:
            best = err.get("best_deep_match") or err.get("best_match") or err
            leaves = [(best["path"], best["message"])]
        errors.extend(f"{name}: {path}: {message}" for path, message in leaves)
    if not errors:
        errors.append(f"check-jsonschema failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return errors


def _leaf_errors(sub_errors: list[dict[str, str]]) -> list[tuple[str, str]]:
    """The errors that name the actual mistakes, without oneOf noise.

    Almost every schema node is `oneOf: [<real type>, <"${...}" interpolation string>]`,
    so each mistake also yields "... is not valid under any of the given schemas",
    "... does not match '\\$\\{...'" and "... is not of type 'string'" on every
    enclosing node. Drop those; keep "is not of type 'string'" only where nothing
    else failed at or below that path (a real string field given a non-string).
    """
    candidates: list[tuple[str, str]] = []
    for e in sub_errors:
        path, message = e["path"], e["message"]
        if message.endswith("is not valid under any of the given schemas"):
            continue
        if INTERPOLATION_MISMATCH.search(message):
            continue
        if (path, message) not in candidates:
            candidates.append((path, message))

    def covered(path: str, other: str) -> bool:
        return other == path or other.startswith(path + ".") or other.startswith(path + "[")

    return [
        (path, message)
        for path, message in candidates
        if not (
            message.endswith("is not of type 'string'")
            and any(covered(path, p) for p, m in candidates if (p, m) != (path, message))
        )
    ]


def _schema_top_level_keys() -> set[str]:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return {k for k, v in schema["properties"].items() if not v.get("deprecated")}


def top_level_key_errors(path: Path) -> list[str]:
    unknown = sorted(set(_load(path)) - _schema_top_level_keys())
    return [f"{_rel(path)}: unknown top-level key {k!r}" for k in unknown]


def _resource_sections(data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where, resources-mapping) for the top level and each target's overrides."""
    sections = []
    if data.get("resources"):
        sections.append(("resources", data["resources"]))
    for name, target in (data.get("targets") or {}).items():
        if target and target.get("resources"):
            sections.append((f"targets.{name}.resources", target["resources"]))
    return sections


def model_errors(path: Path) -> list[str]:
    """Load every resource in a file with its databricks-bundles model."""
    errors = []
    for where, resources in _resource_sections(_load(path)):
        for kind, entries in resources.items():
            if kind in KINDS_WITHOUT_MODEL:
                continue
            if kind not in MODEL_CLASSES:
                errors.append(
                    f"{_rel(path)}: {where}.{kind}: no model mapping; add it to "
                    "MODEL_CLASSES or KINDS_WITHOUT_MODEL in tests/test_bundle.py"
                )
                continue
            model = getattr(importlib.import_module(f"databricks.bundles.{kind}"), MODEL_CLASSES[kind])
            for key, value in (entries or {}).items():
                try:
                    model.from_dict(value)
                except Exception as exc:  # noqa: BLE001 - any failure is a finding
                    errors.append(f"{_rel(path)}: {where}.{kind}.{key}: {type(exc).__name__}: {exc}")
    return errors


@pytest.fixture(scope="module")
def bundle() -> dict[str, Any]:
    return _load(BUNDLE_FILE)


@pytest.fixture(scope="module")
def pipeline_file() -> Path:
    for path in _resource_files():
        if PIPELINE_KEY in ((_load(path).get("resources") or {}).get("pipelines") or {}):
            return path
    pytest.fail(f"no resources/*.yml defines resources.pipelines.{PIPELINE_KEY}")


@pytest.fixture(scope="module")
def pipeline(pipeline_file: Path) -> dict[str, Any]:
    return _load(pipeline_file)["resources"]["pipelines"][PIPELINE_KEY]


# --------------------------------------------------------------------- validation


def test_schema_is_vendored_with_licence() -> None:
    assert SCHEMA_FILE.is_file()
    assert (SCHEMA_FILE.parent / "LICENSE").is_file()
    assert (SCHEMA_FILE.parent / "README.md").is_file()


def test_include_globs_match_resource_files(bundle: dict[str, Any]) -> None:
    assert "resources/*.yml" in bundle["include"]
    matched = {p for pattern in bundle["include"] for p in REPO.glob(pattern)}
    assert matched, "include matches no resource files"
    assert set(_resource_files()) <= matched


@pytest.mark.parametrize("path", _bundle_files(), ids=_rel)
def test_matches_bundle_schema(path: Path) -> None:
    errors = schema_errors(path)
    assert not errors, "bundle schema validation failed:\n" + "\n".join(errors)


@pytest.mark.parametrize("path", _bundle_files(), ids=_rel)
def test_top_level_keys_known(path: Path) -> None:
    errors = top_level_key_errors(path)
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("path", _bundle_files(), ids=_rel)
def test_resources_load_with_bundle_models(path: Path) -> None:
    errors = model_errors(path)
    assert not errors, "databricks-bundles model load failed:\n" + "\n".join(errors)


def test_resource_files_hold_only_resources() -> None:
    for path in _resource_files():
        data = _load(path)
        assert set(data) <= {"resources", "targets", "variables", "permissions"}, (
            f"{_rel(path)}: unexpected top-level keys {sorted(data)}"
        )


# ---------------------------------------------------------------- bundle content


def test_bundle_name(bundle: dict[str, Any]) -> None:
    assert bundle["bundle"]["name"] == "cdc-lakehouse"


def test_targets(bundle: dict[str, Any]) -> None:
    targets = bundle["targets"]
    assert {"dev", "prod"} <= set(targets)
    assert targets["dev"]["mode"] == "development"
    assert targets["dev"].get("default") is True
    assert [n for n, t in targets.items() if (t or {}).get("default")] == ["dev"]
    prod = targets["prod"]
    assert prod["mode"] == "production"
    # Production needs an explicit root path (a single deployed copy) and permissions.
    assert prod["workspace"]["root_path"]
    levels = {p.get("group_name") or p.get("user_name"): p["level"] for p in prod["permissions"]}
    assert "CAN_MANAGE" in levels.values()


def test_variables_have_defaults(bundle: dict[str, Any]) -> None:
    variables = bundle["variables"]
    assert {"catalog", "schema", "landing_path", "onboarding_file"} <= set(variables)
    for name, spec in variables.items():
        assert "default" in spec or "lookup" in spec, f"variable {name!r} has no default"
    assert variables["onboarding_file"]["default"].endswith("/conf/onboarding.yml")


def test_every_var_reference_is_declared(bundle: dict[str, Any]) -> None:
    declared = set(bundle.get("variables") or {})
    for path in _resource_files():
        declared |= set(_load(path).get("variables") or {})
    undeclared = {
        f"{_rel(path)}: ${{var.{name}}}"
        for path in _bundle_files()
        for name in VAR_REF.findall(path.read_text(encoding="utf-8"))
        if name not in declared
    }
    assert not undeclared, "undeclared variables: " + ", ".join(sorted(undeclared))


def test_pipeline_settings(pipeline: dict[str, Any]) -> None:
    assert pipeline["serverless"] is True
    assert pipeline["catalog"] == "${var.catalog}"
    assert pipeline["schema"] == "${var.schema}"
    assert "target" not in pipeline, "use `schema`, `target` is deprecated"
    assert pipeline.get("continuous") is False
    assert "${bundle.target}" in pipeline["name"]


def test_pipeline_globs_cover_layers(pipeline_file: Path, pipeline: dict[str, Any]) -> None:
    includes = [lib["glob"]["include"] for lib in pipeline["libraries"] if "glob" in lib]
    resolved = {(pipeline_file.parent / inc).resolve() for inc in includes}
    for layer in LAYERS:
        folder = REPO / "src" / layer
        assert folder.is_dir(), f"src/{layer} is missing"
        assert folder.resolve() / "**" in resolved, f"no `glob: include: ../src/{layer}/**` library"
    root = (pipeline_file.parent / pipeline["root_path"]).resolve()
    assert root == (REPO / "src").resolve()


def test_pipeline_configuration(pipeline: dict[str, Any]) -> None:
    conf = pipeline["configuration"]
    for key, var in CONFIG_KEYS.items():
        assert conf.get(key) == f"${{var.{var}}}", f"configuration[{key!r}] must pass ${{var.{var}}}"


def test_pipeline_environment_pins(pipeline: dict[str, Any]) -> None:
    deps = pipeline["environment"]["dependencies"]
    assert "pyyaml==6.0.3" in deps
    assert "pydantic==2.14.3" in deps


# ----------------------------------------------------------------------- negative


def test_broken_pipeline_is_rejected(tmp_path: Path, pipeline_file: Path) -> None:
    data = _load(pipeline_file)
    data["resources"]["pipelines"][PIPELINE_KEY]["serverless"] = "yes-please"
    broken = tmp_path / "broken.pipeline.yml"
    broken.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")

    # One readable line naming the file, the field and the problem.
    assert schema_errors(broken) == [
        f"{broken}: $.resources.pipelines.{PIPELINE_KEY}.serverless: 'yes-please' is not of type 'boolean'"
    ]

    models = "\n".join(model_errors(broken))
    assert f"pipelines.{PIPELINE_KEY}" in models and "yes-please" in models


def test_unknown_keys_are_rejected(tmp_path: Path, pipeline_file: Path) -> None:
    data = _load(pipeline_file)
    data["resources"]["pipelines"][PIPELINE_KEY]["serverles"] = True  # typo
    data["resoruces"] = {}  # typo at top level: the root schema alone allows it
    broken = tmp_path / "typo.pipeline.yml"
    broken.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")

    message = "\n".join(schema_errors(broken))
    assert "Additional properties are not allowed ('serverles' was unexpected)" in message
    assert "Unexpected field 'serverles'" in "\n".join(model_errors(broken))
    assert top_level_key_errors(broken) == [f"{broken}: unknown top-level key 'resoruces'"]


def test_interpolation_patterns_compile(tmp_path: Path) -> None:
    """`${var.x}` in a boolean field passes only if the \\p{L} patterns really work."""
    ok = tmp_path / "ok.yml"
    ok.write_text(
        "bundle: {name: x}\nresources: {pipelines: {p: {serverless: '${var.serverless}'}}}\n",
        encoding="utf-8",
    )
    assert schema_errors(ok) == []
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "bundle: {name: x}\nresources: {pipelines: {p: {serverless: '${nope.x}'}}}\n",
        encoding="utf-8",
    )
    assert schema_errors(bad)
