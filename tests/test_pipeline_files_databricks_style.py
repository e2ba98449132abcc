"""The pipeline source files run on Databricks unchanged.

* Pipeline files declare with ``from pyspark import pipelines as dp`` (Databricks' documented
  module) and read datasets with ``spark.read.table``/``spark.readStream.table``, not with the
  legacy ``dlt`` names.
* Imports at module level (what runs when Databricks loads a file) are only ``pyspark``, the
  standard library and ``cdc_lakehouse`` — and the ``cdc_lakehouse`` modules
  they pull in, transitively, import only what a serverless pipeline has: pyspark, the
  pipeline's ``environment.dependencies`` (resources/cdc_lakehouse.pipeline.yml) and the
  libraries every Databricks runtime ships. Local-only code (``cdc_lakehouse.runtime``,
  ``cdc_lakehouse.storage`` -> delta-rs, the CLI, capture, ...) may be imported inside functions
  only. No relative imports (files are loaded as top-level modules) and no ``__file__`` (paths
  come from the pipeline configuration, not from where a file happens to sit).
* Every file imports under our local runtime with Databricks-style configuration: the library
  globs and the ``configuration`` keys exactly as resources/cdc_lakehouse.pipeline.yml declares
  them, ``${var.*}`` resolved to local paths. Each key is really read: without it, loading fails
  with an error naming it.
"""

from __future__ import annotations

import ast
import glob
import importlib.metadata
import re
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PIPELINE_YML = REPO / "resources" / "cdc_lakehouse.pipeline.yml"
PIPELINE = yaml.safe_load(PIPELINE_YML.read_text(encoding="utf-8"))["resources"]["pipelines"]["cdc_lakehouse"]
LOCAL_VALUES = {  # what ${var.X} means for a local run
    "onboarding_file": str(REPO / "conf" / "onboarding.yml"),
    "onboarding_env": "dev",
}
# The bundle's landing volume (resources/cdc_lakehouse.catalog.yml) is fixtures/landing locally.
LOCAL_LANDING = str(REPO / "fixtures" / "landing")
LAYERS = ("bronze", "silver", "gold")
# Each layer's schema is a bundle resource; a production deploy with the default variables names
# them as the local lake does. The keys have defaults, so they are checked by where tables go.
SCHEMA_KEYS = {f"cdc_lakehouse.{layer}_schema": layer for layer in LAYERS}
SCHEMA_RESOURCE = re.compile(r"\$\{resources\.schemas\.(\w+)\.name\}")
# Configuration keys read with a default (settings.py): the onboarding environment is `dev`.
DEFAULTED = {"cdc_lakehouse.env": "no-such-env"}  # no env name: refused even by a file without env keys

ALLOWED_IN_PIPELINE_FILES = {"pyspark", "cdc_lakehouse"}
# Local-only parts of the package: never imported at module level by code a pipeline loads.
LOCAL_ONLY_PACKAGE_PARTS = {"runtime", "storage", "cli", "demo", "capture", "remote"}
# Preinstalled on every Databricks runtime and serverless environment.
DATABRICKS_PROVIDED = {"pyspark", "dlt", "pandas", "numpy", "pyarrow"}


def library_files() -> list[Path]:
    """The files the pipeline's `glob` libraries select, as Databricks resolves them."""
    files: list[Path] = []
    for library in PIPELINE["libraries"]:
        include = (PIPELINE_YML.parent / library["glob"]["include"]).resolve()
        files += [Path(p) for p in sorted(glob.glob(str(include), recursive=True)) if Path(p).is_file()]
    return files


def loader_sources() -> list[str]:
    """The library globs as the local runtime's loader takes them (``<folder>/**/*.py``)."""
    return [str((PIPELINE_YML.parent / lib["glob"]["include"]).resolve() / "*.py") for lib in PIPELINE["libraries"]]


def databricks_configuration(drop: str | None = None) -> dict[str, str]:
    configuration = {}
    for key, value in PIPELINE["configuration"].items():
        if key == "cdc_lakehouse.landing_path":
            value = LOCAL_LANDING

        def resolve(match: re.Match) -> str:
            name = match.group(1)
            assert name in LOCAL_VALUES, f"configuration[{key!r}] uses ${{var.{name}}}: give it a local value"
            return LOCAL_VALUES[name]

        resolved = re.sub(r"\$\{var\.([A-Za-z0-9_-]+)\}", resolve, SCHEMA_RESOURCE.sub(r"\1", str(value)))
        assert "${" not in resolved, f"configuration[{key!r}] = {value!r} cannot be resolved locally"
        if key != drop:
            configuration[key] = resolved
    return configuration


def module_level_imports(tree: ast.Module) -> list[tuple[int, str, int]]:
    """(line, module, relative level) of every import not inside a function or class."""
    found = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Import):
                found.extend((child.lineno, alias.name, 0) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                found.append((child.lineno, child.module or "", child.level))
                found.extend((child.lineno, f"{child.module}.{alias.name}", child.level)
                             for alias in child.names if child.module and child.level == 0)
            visit(child)

    visit(tree)
    return found


def root(module: str) -> str:
    return module.split(".")[0]


def is_stdlib(module: str) -> bool:
    return root(module) in sys.stdlib_module_names or root(module) == "__future__"


@cache
def environment_imports() -> set[str]:
    """Import names of the pipeline's environment.dependencies (pyyaml -> yaml, ...)."""
    wanted = {re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0].lower().replace("_", "-")
              for dep in PIPELINE["environment"]["dependencies"]}
    names = {name for name, dists in importlib.metadata.packages_distributions().items()
             if any(d.lower().replace("_", "-") in wanted for d in dists)}
    assert names, f"cannot map {sorted(wanted)} to import names: are they installed?"
    return names


def package_module_file(module: str) -> Path | None:
    """The source file of a cdc_lakehouse module, found without importing it (None when
    ``module`` names an attribute, e.g. ``cdc_lakehouse.settings.PipelineSettings``)."""
    base = REPO / "src" / Path(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def import_problems(module: str, chain: tuple[str, ...], seen: set[str]) -> list[str]:
    """What importing ``module`` (a cdc_lakehouse module) pulls in that Databricks lacks."""
    problems: list[str] = []
    parts = module.split(".")
    # Importing a.b.c runs a/__init__, a/b/__init__, then a/b/c.
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        if name in seen:
            continue
        seen.add(name)
        if depth == 2 and parts[1] in LOCAL_ONLY_PACKAGE_PARTS:
            return [" -> ".join((*chain, name)) + "  (local-only part of the package)"]
        path = package_module_file(name)
        if path is None:
            continue
        for _, imported, level in module_level_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if level:
                base = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
                base = ".".join(base.split(".")[: len(base.split(".")) - level + 1])
                imported = f"{base}.{imported}" if imported else base
            if root(imported) == "cdc_lakehouse":
                problems += import_problems(imported, (*chain, name), seen)
            elif not (is_stdlib(imported) or root(imported) in DATABRICKS_PROVIDED | environment_imports()):
                problems.append(" -> ".join((*chain, name, imported)) + "  (not on Databricks)")
    return problems


FILES = library_files()


def test_the_library_globs_select_python_pipeline_files() -> None:
    assert FILES, "the pipeline's library globs select no file"
    for layer in LAYERS:
        assert any(f.is_relative_to(REPO / "src" / layer) for f in FILES), f"no pipeline file in src/{layer}"
    others = [str(f.relative_to(REPO)) for f in FILES if f.suffix != ".py" and f.name != "README.md"]
    assert not others, f"the local runtime runs Python pipeline files only: {others}"


@pytest.mark.parametrize("path", [f for f in FILES if f.suffix == ".py"], ids=lambda p: str(p.relative_to(REPO)))
def test_module_level_imports_exist_on_databricks(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    problems = []
    for line, module, level in module_level_imports(tree):
        where = f"{path.relative_to(REPO)}:{line}"
        if level:
            problems.append(f"{where}: relative import (pipeline files load as top-level modules)")
        elif not (is_stdlib(module) or root(module) in ALLOWED_IN_PIPELINE_FILES):
            problems.append(f"{where}: imports {module} (allowed: pyspark, stdlib, cdc_lakehouse)")
        elif root(module) == "cdc_lakehouse":
            problems += [f"{where}: {p}" for p in import_problems(module, (path.name,), set())]
    uses_file = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "__file__"]
    problems += [f"{path.relative_to(REPO)}:{line}: uses __file__ (read paths from the pipeline configuration)"
                 for line in uses_file]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", [f for f in FILES if f.suffix == ".py"], ids=lambda p: str(p.relative_to(REPO)))
def test_pipeline_files_use_the_pyspark_pipelines_module(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    assert "pyspark.pipelines" in {m for _, m, _ in module_level_imports(tree)}, (
        f"{path.relative_to(REPO)}: declare with `from pyspark import pipelines as dp`")
    legacy = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "dlt"]
    assert not legacy, f"{path.relative_to(REPO)}:{legacy}: legacy dlt names (use dp, spark.read.table)"


def test_import_check_finds_local_only_imports(tmp_path: Path) -> None:
    """The check itself: what it must reject."""
    assert import_problems("cdc_lakehouse.storage", ("x.py",), set()) == [
        "x.py -> cdc_lakehouse.storage  (local-only part of the package)"]
    assert import_problems("cdc_lakehouse.cdc.apply", ("x.py",), set()) == [
        "x.py -> cdc_lakehouse.cdc.apply -> cdc_lakehouse.storage  (local-only part of the package)"]
    tree = ast.parse("import dlt\nfrom . import x\nimport deltalake\ndef f():\n    import rich\n")
    assert [(m, lvl) for _, m, lvl in module_level_imports(tree)] == [("dlt", 0), ("", 1), ("deltalake", 0)]


def test_pipeline_files_load_with_databricks_configuration(spark) -> None:
    from cdc_lakehouse.runtime.loader import load_pipeline
    from cdc_lakehouse.runtime.runner import pipeline_configuration

    with pipeline_configuration(spark, databricks_configuration()):
        graph = load_pipeline(spark, loader_sources())
    graph.validate()
    for layer in LAYERS:
        assert any(name.startswith(f"{layer}.") for name in graph.datasets), f"no {layer} dataset declared"
    declared_in = {Path(d.source_file).resolve() for d in graph.datasets.values() if d.source_file}
    assert declared_in <= {f.resolve() for f in FILES}


def test_each_layers_tables_are_in_the_schema_the_configuration_names(spark) -> None:
    """A dev deployment's schemas are dev_<user>_<layer>: every table follows them."""
    from cdc_lakehouse.runtime.loader import load_pipeline
    from cdc_lakehouse.runtime.runner import pipeline_configuration

    renamed = {key: f"dev_alice_{layer}" for key, layer in SCHEMA_KEYS.items()}
    assert set(renamed) <= set(PIPELINE["configuration"]), "the bundle passes every layer's schema"
    with pipeline_configuration(spark, {**databricks_configuration(), **renamed}):
        graph = load_pipeline(spark, loader_sources())
    schemas = {name.split(".")[0] for name in graph.datasets if "." in name}
    assert schemas == set(renamed.values())


@pytest.mark.parametrize("key", sorted(set(PIPELINE["configuration"]) - set(SCHEMA_KEYS)))
def test_each_configuration_key_is_read_from_the_pipeline_configuration(spark, key: str) -> None:
    from cdc_lakehouse.runtime.loader import load_pipeline
    from cdc_lakehouse.runtime.runner import pipeline_configuration

    assert spark.conf.get(key, None) is None
    if key in DEFAULTED:  # absent, it has a default: a value the loader refuses must fail
        configuration, named = {**databricks_configuration(), key: DEFAULTED[key]}, DEFAULTED[key]
    else:
        configuration, named = databricks_configuration(drop=key), key
    with pipeline_configuration(spark, configuration):
        with pytest.raises(Exception, match=re.escape(named)):
            load_pipeline(spark, loader_sources())
