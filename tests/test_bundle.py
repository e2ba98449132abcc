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
* Every target merged as ``databricks bundle validate -t <target>`` would see it (includes and
  target overrides merged, variables substituted with the target's values) passes the schema and
  the models again; ``${resources.*}`` references resolve; resource keys are unique across kinds.
* The scheduled job (resources/cdc_lakehouse.job.yml): its task DAG, the pipeline task on the
  bundle's pipeline, wheel tasks that match pyproject.toml (package, console script, Python of
  the serverless environment) and parse with the CLI once the commands exist, the schedule
  (paused in dev), the dashboard task on the bundle's dashboard, and a valid Lakeview file.
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
    "cdc_lakehouse.onboarding_file": "${var.onboarding_file}",
    "cdc_lakehouse.env": "${var.onboarding_env}",
    # the target's schemas and landing volume: resources/cdc_lakehouse.catalog.yml
    "cdc_lakehouse.bronze_schema": "${resources.schemas.bronze.name}",
    "cdc_lakehouse.silver_schema": "${resources.schemas.silver.name}",
    "cdc_lakehouse.gold_schema": "${resources.schemas.gold.name}",
    "cdc_lakehouse.landing_path": "/Volumes/${var.catalog}/${resources.schemas.bronze.name}/"
                                  "${resources.volumes.landing_volume.name}",
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
    assert {"catalog", "bronze_schema", "silver_schema", "gold_schema", "onboarding_file"} <= set(variables)
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
    assert pipeline["schema"] == "${resources.schemas.gold.name}"
    assert "target" not in pipeline, "use `schema`, `target` is deprecated"
    assert pipeline.get("continuous") is False, "the silver change stream's streaming form needs triggered updates"
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
    for key, value in CONFIG_KEYS.items():
        assert conf.get(key) == value, f"configuration[{key!r}] must pass {value}"


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


# ============================================================== targets, job, dashboard
#
# `databricks bundle validate -t <target>` merges the target's overrides into the root config
# and resolves variables. The same is done here, offline, for every target: the merged config
# (variables substituted with each target's values) must pass the schema and the models too.

JOB_KEY = "cdc_lakehouse_job"
DASHBOARD_KEY = "cdc_lakehouse_dashboard"
PYPROJECT = REPO / "pyproject.toml"
JOB_TASKS = {"snapshot_reconcile", "pipeline_update", "housekeeping", "dashboard_refresh"}
# Serverless environment version -> its Python (release notes: serverless environment versions).
SERVERLESS_PYTHON = {"1": "3.10", "2": "3.11", "3": "3.12", "4": "3.12"}
RESOURCE_REF = re.compile(r"\$\{resources\.([a-z_]+)\.([A-Za-z0-9_-]+)\.([a-z_]+)\}")
VAR_FULL = re.compile(r"\$\{var\.([A-Za-z_][A-Za-z0-9_-]*)\}")
TARGET_NAMES = sorted((_load(BUNDLE_FILE).get("targets") or {}))


def _deep_merge(base: Any, override: Any) -> Any:
    """Target overrides as the CLI applies them: maps merge key by key, job tasks merge by
    task_key, any other value (and list) replaces."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = _deep_merge(base[key], value) if key in base else value
        return merged
    if (isinstance(base, list) and isinstance(override, list)
            and all(isinstance(t, dict) and "task_key" in t for t in base + override)):
        by_key = {t["task_key"]: t for t in base}
        for task in override:
            by_key[task["task_key"]] = _deep_merge(by_key.get(task["task_key"], {}), task)
        return list(by_key.values())
    return override


def _substitute(value: Any, variables: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        return {k: _substitute(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, variables) for v in value]
    if isinstance(value, str):
        whole = VAR_FULL.fullmatch(value)
        if whole:  # a whole-value reference keeps the variable's type
            return variables[whole.group(1)]
        return VAR_FULL.sub(lambda m: str(variables[m.group(1)]), value)
    return value


def target_variables(target: str) -> dict[str, Any]:
    root = _load(BUNDLE_FILE)
    values: dict[str, Any] = {}
    for name, spec in (root.get("variables") or {}).items():
        # A lookup resolves to an id at deploy time; any id-like string stands in for it here.
        values[name] = spec["default"] if "default" in spec else f"lookup-{name}-0123456789"
    for name, value in ((root.get("targets") or {}).get(target) or {}).get("variables", {}).items():
        if isinstance(value, dict) and "lookup" in value:
            value = {"default": f"lookup-{name}-0123456789"}
        values[name] = value["default"] if isinstance(value, dict) and "default" in value else value
    for _ in range(5):  # defaults may refer to other variables
        values = {k: _substitute(v, values) for k, v in values.items()}
    return values


def bundle_for_target(target: str) -> dict[str, Any]:
    """The root config as `bundle validate -t target` sees it: includes and overrides merged,
    variables substituted."""
    root = _load(BUNDLE_FILE)
    merged = {k: v for k, v in root.items() if k not in {"include", "targets"}}
    for path in _resource_files():
        data = _load(path)
        merged["resources"] = _deep_merge(merged.get("resources") or {}, data.get("resources") or {})
        for name, spec in (data.get("targets") or {}).items():
            root.setdefault("targets", {}).setdefault(name, {})
            root["targets"][name] = _deep_merge(root["targets"][name] or {}, spec or {})
    target_spec = (root.get("targets") or {}).get(target) or {}
    for key in ("resources", "artifacts", "workspace", "presets", "permissions", "run_as", "sync"):
        if key in target_spec:
            merged[key] = _deep_merge(merged.get(key), target_spec[key]) if key in merged else target_spec[key]
    variables = target_variables(target)
    merged = _substitute(merged, variables)
    merged["variables"] = {name: {"default": value} for name, value in variables.items()}
    return merged


def resource_refs(data: Any) -> set[tuple[str, str, str]]:
    return set(RESOURCE_REF.findall(json.dumps(data)))


@pytest.fixture(scope="module")
def resources_all() -> dict[str, dict[str, Any]]:
    return bundle_for_target(TARGET_NAMES[0])["resources"]


@pytest.fixture(scope="module")
def job_file() -> Path:
    for path in _resource_files():
        if JOB_KEY in ((_load(path).get("resources") or {}).get("jobs") or {}):
            return path
    pytest.fail(f"no resources/*.yml defines resources.jobs.{JOB_KEY}")


@pytest.fixture(scope="module")
def job(job_file: Path) -> dict[str, Any]:
    return _load(job_file)["resources"]["jobs"][JOB_KEY]


@pytest.fixture(scope="module")
def tasks(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["task_key"]: t for t in job["tasks"]}


@pytest.fixture(scope="module")
def pyproject() -> dict[str, Any]:
    import tomllib

    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))


# ------------------------------------------------------------------------ every target


@pytest.mark.parametrize("target", TARGET_NAMES)
def test_target_validates_offline(target: str, tmp_path: Path) -> None:
    merged = tmp_path / f"bundle.{target}.yml"
    merged.write_text(yaml.safe_dump(bundle_for_target(target), sort_keys=False), encoding="utf-8")
    errors = schema_errors(merged) + top_level_key_errors(merged) + model_errors(merged)
    assert not errors, f"target {target}:\n" + "\n".join(errors)
    assert not VAR_FULL.search(merged.read_text(encoding="utf-8")), "unresolved ${var.*}"


@pytest.mark.parametrize("target", TARGET_NAMES)
def test_every_resource_reference_resolves(target: str) -> None:
    merged = bundle_for_target(target)
    resources = merged["resources"]
    dangling = sorted(f"${{resources.{kind}.{key}.{field}}}" for kind, key, field in resource_refs(merged)
                      if key not in (resources.get(kind) or {}))
    assert not dangling, f"target {target}: references to undefined resources: {dangling}"


@pytest.mark.parametrize("target", TARGET_NAMES)
def test_resource_keys_are_unique_across_kinds(target: str) -> None:
    """`bundle validate` rejects one key under two kinds (`bundle run <key>` would be ambiguous)."""
    owners: dict[str, list[str]] = {}
    for kind, entries in bundle_for_target(target)["resources"].items():
        for key in entries or {}:
            owners.setdefault(key, []).append(kind)
    shared = {key: kinds for key, kinds in owners.items() if len(kinds) > 1}
    assert not shared, f"target {target}: keys used by several resource kinds: {shared}"


def test_target_variable_overrides_are_declared(bundle: dict[str, Any]) -> None:
    declared = set(bundle["variables"])
    for name, target in bundle["targets"].items():
        unknown = set((target or {}).get("variables") or {}) - declared
        assert not unknown, f"targets.{name}.variables: undeclared {sorted(unknown)}"


def test_artifact_builds_the_project_wheel(bundle: dict[str, Any]) -> None:
    (artifact,) = bundle["artifacts"].values()
    assert artifact["type"] == "whl"
    assert (REPO / artifact["path"]).resolve() == REPO
    assert "wheel" in artifact["build"] and "dist" in artifact["build"]
    assert [f["source"] for f in artifact["files"]] == ["dist/cdc_lakehouse-*.whl"]
    assert artifact["dynamic_version"] is True  # each deploy's wheel is installed, not a cached 0.1.0


# -------------------------------------------------------------------------------- job


def test_job_tasks_form_the_expected_dag(tasks: dict[str, dict[str, Any]]) -> None:
    assert set(tasks) == JOB_TASKS
    deps = {key: {d["task_key"] for d in task.get("depends_on") or []} for key, task in tasks.items()}
    assert all(d <= set(tasks) for d in deps.values()), deps
    assert deps == {
        "snapshot_reconcile": set(),
        "pipeline_update": {"snapshot_reconcile"},
        "housekeeping": {"pipeline_update"},
        "dashboard_refresh": {"pipeline_update"},
    }


def test_job_pipeline_task_runs_the_bundle_pipeline(tasks: dict[str, dict[str, Any]],
                                                     resources_all: dict[str, Any]) -> None:
    task = tasks["pipeline_update"]["pipeline_task"]
    assert task["pipeline_id"] == f"${{resources.pipelines.{PIPELINE_KEY}.id}}"
    assert PIPELINE_KEY in resources_all["pipelines"]
    assert task.get("full_refresh") is False  # a scheduled run never resets tables


def test_job_wheel_tasks_match_the_package(tasks: dict[str, dict[str, Any]], job: dict[str, Any],
                                           pyproject: dict[str, Any]) -> None:
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name

    project = pyproject["project"]
    environments = {e["environment_key"]: e["spec"] for e in job["environments"]}
    commands = {}
    for key, task in tasks.items():
        wheel = task.get("python_wheel_task")
        if wheel is None:
            continue
        assert canonicalize_name(wheel["package_name"]) == canonicalize_name(project["name"])
        assert wheel["entry_point"] in project["scripts"], "entry_point must be a console script"
        spec = environments[task["environment_key"]]
        assert "../dist/*.whl" in spec["dependencies"]
        python = SERVERLESS_PYTHON[str(spec["environment_version"])]
        assert f"{python}.0" in SpecifierSet(project["requires-python"]), (
            f"serverless environment {spec['environment_version']} runs Python {python}, "
            f"outside requires-python {project['requires-python']}")
        params = wheel["parameters"]
        words = [p for p in params if not p.startswith("--")]
        flags = [p for p in params if p.startswith("--")]
        assert all(params[params.index(f) + 1:params.index(f) + 2] for f in flags), f"{key}: flag without value"
        commands[key] = words[: len(words) - len(flags)]
        assert "${var.catalog}" in params
    assert commands == {"snapshot_reconcile": ["snapshot", "reconcile"], "housekeeping": ["housekeeping"]}


def test_job_wheel_parameters_parse_with_the_cli(tasks: dict[str, dict[str, Any]]) -> None:
    """The job's python_wheel_task parameters parse with the real `cdc-lakehouse` CLI."""
    from cdc_lakehouse.cli import build_parser

    parser = build_parser()
    values = target_variables(TARGET_NAMES[0])
    for key, task in tasks.items():
        if "python_wheel_task" in task:
            argv = _substitute(task["python_wheel_task"]["parameters"], values)
            try:
                parser.parse_args([str(a) for a in argv])
            except SystemExit as exc:
                pytest.fail(f"{key}: `cdc-lakehouse {' '.join(map(str, argv))}` does not parse ({exc})")


def test_job_schedule(job: dict[str, Any], bundle: dict[str, Any]) -> None:
    schedule = job["schedule"]
    cron = target_variables(TARGET_NAMES[0])["job_schedule"]
    assert schedule["quartz_cron_expression"] == "${var.job_schedule}"
    assert len(str(cron).split()) in (6, 7), f"not a quartz expression: {cron!r}"
    # The CLI applies development mode's PAUSED only to a schedule without a pause_status: one
    # set here would have every dev copy run hourly.
    assert "pause_status" not in schedule
    dev, prod = bundle["targets"]["dev"], bundle["targets"]["prod"]
    # Paused in dev (development mode pauses schedules; the preset says so explicitly) ...
    assert dev["mode"] == "development" and dev["presets"]["trigger_pause_status"] == "PAUSED"
    assert "pause_status" not in bundle_for_target("dev")["resources"]["jobs"][JOB_KEY]["schedule"]
    # ... running in prod.
    assert prod["presets"]["trigger_pause_status"] == "UNPAUSED"
    assert job["max_concurrent_runs"] == 1


def test_dev_and_prod_differ_where_intended() -> None:
    dev, prod = bundle_for_target("dev"), bundle_for_target("prod")
    dev_job, prod_job = dev["resources"]["jobs"][JOB_KEY], prod["resources"]["jobs"][JOB_KEY]
    assert prod_job["email_notifications"]["on_failure"] and "email_notifications" not in dev_job
    assert int(prod["variables"]["retention_hours"]["default"]) >= 168
    assert int(dev["variables"]["retention_hours"]["default"]) >= 168  # Delta's VACUUM safety limit
    # Each target reads its own `_<env>` keys of the onboarding file.
    assert (dev["variables"]["onboarding_env"]["default"], prod["variables"]["onboarding_env"]["default"]) == ("dev", "prod")
    # The same tasks everywhere: targets tune, they do not redefine the job.
    assert [t["task_key"] for t in dev_job["tasks"]] == [t["task_key"] for t in prod_job["tasks"]]


def test_job_dashboard_task_refreshes_the_bundle_dashboard(tasks: dict[str, dict[str, Any]],
                                                           resources_all: dict[str, Any]) -> None:
    task = tasks["dashboard_refresh"]["dashboard_task"]
    assert task["dashboard_id"] == f"${{resources.dashboards.{DASHBOARD_KEY}.id}}"
    assert DASHBOARD_KEY in resources_all["dashboards"]
    assert task["warehouse_id"] == "${var.warehouse_id}"


# -------------------------------------------------------------------------- dashboard


def test_dashboard_file_is_a_valid_lakeview_dashboard() -> None:
    for path in _resource_files():
        for key, dashboard in ((_load(path).get("resources") or {}).get("dashboards") or {}).items():
            file = (path.parent / dashboard["file_path"]).resolve()
            assert file.is_file() and file.name.endswith(".lvdash.json"), f"{key}: {file}"
            assert dashboard["warehouse_id"] == "${var.warehouse_id}"
            assert dashboard.get("dataset_catalog") == "${var.catalog}"
            assert dashboard.get("dataset_schema") == "${resources.schemas.gold.name}"
            content = json.loads(file.read_text(encoding="utf-8"))
            datasets = {d["name"]: d for d in content["datasets"]}
            assert datasets and content["pages"], f"{key}: needs datasets and at least one page"
            for dataset in datasets.values():
                sql = dataset.get("query") or "".join(dataset.get("queryLines") or [])
                assert sql.strip(), f"{key}: dataset {dataset['name']} has no query"
                # Tables are named alone: dataset_catalog and dataset_schema are the target's.
                assert not re.search(r"\b(main|bronze|silver|gold)\.", sql), f"hard-coded schema in {dataset['name']}"
            for page in content["pages"]:
                assert page["name"] and page["layout"]
                for item in page["layout"]:
                    widget, position = item["widget"], item["position"]
                    assert {"x", "y", "width", "height"} <= set(position)
                    for query in widget.get("queries") or []:
                        assert query["query"]["datasetName"] in datasets, f"{widget['name']}: unknown dataset"
                        fields = {f["name"] for f in query["query"]["fields"]}
                        spec = widget["spec"]
                        used = [e["fieldName"] for e in spec["encodings"].get("columns", [])]
                        used += [e["fieldName"] for k, e in spec["encodings"].items()
                                 if isinstance(e, dict) and "fieldName" in e]
                        assert set(used) <= fields, f"{widget['name']}: encodes fields it does not query"


# ----------------------------------------------------------------------- negative (job)


def test_broken_job_is_rejected(tmp_path: Path, job_file: Path) -> None:
    data = _load(job_file)
    job = data["resources"]["jobs"][JOB_KEY]
    job["tasks"][1]["pipeline_task"]["full_refresh"] = "sometimes"
    job["tasks"][0]["python_wheel_task"]["entrypoint"] = "typo"
    broken = tmp_path / "broken.job.yml"
    broken.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    errors = "\n".join(schema_errors(broken))
    assert "full_refresh: 'sometimes' is not of type 'boolean'" in errors
    assert "'entrypoint' was unexpected" in errors
    assert "entrypoint" in "\n".join(model_errors(broken))


def test_dangling_resource_reference_is_found() -> None:
    data = {"resources": {"jobs": {"j": {"tasks": [{"task_key": "t", "dashboard_task": {
        "dashboard_id": "${resources.dashboards.nope.id}"}}]}}}}
    assert resource_refs(data) == {("dashboards", "nope", "id")}


# ------------------------------------------------------------------- names per deployment

WORKSPACE_REF = re.compile(r"\$\{workspace\.current_user\.(short_name|userName)\}")
RESOURCE_NAME_REF = re.compile(r"\$\{resources\.(schemas|volumes)\.([A-Za-z0-9_]+)\.name\}")


def dev_schema_prefix(short_name: str) -> str:
    """What development mode puts before a schema's name: the CLI's name prefix
    ``[dev <short_name>] `` normalized for Unity Catalog (``normalizePrefix`` in
    bundle/config/mutator/resourcemutator/apply_presets.go of databricks/cli)."""
    return "dev_" + re.sub(r"[^\w]", "_", short_name) + "_"


def deployed(target: str, short_name: str) -> dict[str, Any]:
    """The bundle as ``databricks bundle deploy -t target`` by ``short_name`` deploys it: the
    development-mode prefix on schema names, then every schema, volume and user reference
    resolved."""
    merged = bundle_for_target(target)
    user = {"short_name": short_name, "userName": f"{short_name}@example.com"}
    merged = json.loads(WORKSPACE_REF.sub(lambda m: user[m.group(1)], json.dumps(merged)))
    mode = _load(BUNDLE_FILE)["targets"][target].get("mode")
    prefix = dev_schema_prefix(short_name) if mode == "development" else ""
    names = {"schemas": {k: prefix + v["name"] for k, v in merged["resources"]["schemas"].items()},
             "volumes": {k: v["name"] for k, v in merged["resources"]["volumes"].items()}}
    resolved = RESOURCE_NAME_REF.sub(lambda m: names[m.group(1)][m.group(2)], json.dumps(merged))
    merged = json.loads(resolved)
    for key, name in names["schemas"].items():
        merged["resources"]["schemas"][key]["name"] = name
    return merged


def published_tables(bundle: dict[str, Any]) -> set[str]:
    """<catalog>.<schema>.<table> of a few tables of each layer, as the pipeline's settings name them."""
    pipeline = bundle["resources"]["pipelines"][PIPELINE_KEY]
    conf = pipeline["configuration"]
    tables = {"bronze": "shop_binlog_events", "silver": "shop_orders", "gold": "audit_log"}
    return {f"{pipeline['catalog']}.{conf[f'cdc_lakehouse.{layer}_schema']}.{table}" for layer, table in tables.items()}


def test_prod_and_each_developers_dev_publish_disjoint_tables() -> None:
    deployments = {("prod", "ops"), ("dev", "alice"), ("dev", "bob")}
    tables = {(target, user): published_tables(deployed(target, user)) for target, user in deployments}
    assert tables[("prod", "ops")] == {"main.bronze.shop_binlog_events", "main.silver.shop_orders", "main.gold.audit_log"}
    assert tables[("dev", "alice")] == {"main.dev_alice_bronze.shop_binlog_events", "main.dev_alice_silver.shop_orders",
                                        "main.dev_alice_gold.audit_log"}
    for one in deployments:
        for other in deployments - {one}:
            assert not tables[one] & tables[other], f"{one} and {other} publish the same tables"


@pytest.mark.parametrize("target,user", [("prod", "ops"), ("dev", "alice")])
def test_job_dashboard_and_landing_follow_the_deployments_schemas(target: str, user: str) -> None:
    bundle = deployed(target, user)
    resources = bundle["resources"]
    schemas = {key: spec["name"] for key, spec in resources["schemas"].items()}
    conf = resources["pipelines"][PIPELINE_KEY]["configuration"]
    assert {layer: conf[f"cdc_lakehouse.{layer}_schema"] for layer in LAYERS} == schemas
    landing = f"/Volumes/main/{schemas['bronze']}/landing"
    assert conf["cdc_lakehouse.landing_path"] == landing
    assert resources["volumes"]["landing_volume"]["schema_name"] == schemas["bronze"]
    for task in resources["jobs"][JOB_KEY]["tasks"]:
        params = (task.get("python_wheel_task") or {}).get("parameters")
        if params:
            flags = dict(zip(params[::1], params[1:]))
            assert (flags["--landing"], flags["--bronze-schema"], flags["--silver-schema"]) == (
                landing, schemas["bronze"], schemas["silver"]), task["task_key"]
    dashboard = resources["dashboards"][DASHBOARD_KEY]
    assert (dashboard["dataset_catalog"], dashboard["dataset_schema"]) == ("main", schemas["gold"])
    event_log = resources["pipelines"][PIPELINE_KEY]["event_log"]
    assert (event_log["catalog"], event_log["schema"]) == ("main", schemas["gold"])


def test_unity_catalog_objects_are_bundle_resources_with_grants() -> None:
    """A first deploy creates the schemas and the landing volume: no SQL by hand."""
    prod = deployed("prod", "ops")["resources"]
    assert set(prod["schemas"]) == set(LAYERS)
    grants = {key: {(g["principal"], p) for g in spec["grants"] for p in g["privileges"]}
              for key, spec in {**prod["schemas"], **prod["volumes"]}.items()}
    assert grants["gold"] >= {("data-engineers", "ALL_PRIVILEGES"), ("users", "SELECT"), ("users", "USE_SCHEMA")}
    assert grants["landing_volume"] == {("data-engineers", "READ_VOLUME"), ("data-engineers", "WRITE_VOLUME")}
    dev = deployed("dev", "alice")["resources"]
    principals = {g["principal"] for spec in {**dev["schemas"], **dev["volumes"]}.values() for g in spec["grants"]}
    assert principals == {"alice@example.com"}, "a dev copy is its developer's alone"


def test_production_runs_as_a_service_principal_and_reports_failures() -> None:
    prod, dev = bundle_for_target("prod"), bundle_for_target("dev")
    assert prod["run_as"] == {"service_principal_name": "lookup-service_principal-0123456789"}
    assert "run_as" not in dev
    spec = _load(BUNDLE_FILE)["targets"]["prod"]["variables"]["service_principal"]
    assert spec == {"lookup": {"service_principal": "cdc-lakehouse-prod"}}
    notifications = prod["resources"]["pipelines"][PIPELINE_KEY]["notifications"]
    assert {"on-update-failure", "on-flow-failure"} <= {a for n in notifications for a in n["alerts"]}
