"""The package's layers import downward only, and no modules import each other in a cycle.

A change flows through the layers in this order, and each may import only those before it:
contract (the landing format), storage, config, bronze, silver, cdc, snapshot, gold, runtime (the
local runtime), tools (CLIs, capture, dashboard, demo, remote, housekeeping). Every import counts, also one
inside a function: a lazy import still ties the lower layer to the higher one.

``KNOWN_UPWARD`` and ``KNOWN_CYCLES`` list what is still wrong today (issue 40). The test fails on
any other upward import or cycle, and on an entry that no longer exists, so the lists only shrink.
Read from the source text with ``ast``: nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "cdc_lakehouse"

LAYERS = ("contract", "storage", "config", "bronze", "silver", "cdc", "snapshot", "gold", "runtime", "tools")
# The first part of a module's name under cdc_lakehouse -> its layer (a part not named is a tool).
LAYER_OF = {
    "contract": "contract", "paths": "contract",
    "storage": "storage",
    "config": "config", "settings": "config", "flow_state": "config",
    "bronze": "bronze", "silver": "silver", "cdc": "cdc", "snapshot": "snapshot", "gold": "gold",
    # dlt-meta's notebook entry point and the specs it hands the user's functions: pipeline code
    "dataflow_spec": "bronze", "dataflow_pipeline": "silver",
    "runtime": "runtime",
}

# (importer, imported) pairs still pointing upward; remove an entry when its import is gone.
KNOWN_UPWARD: set[tuple[str, str]] = set()
KNOWN_CYCLES: set[frozenset[str]] = set()


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """The cdc_lakehouse modules (names under the package) a file imports, anywhere in it; a
    ``from X import y`` names X even where X does not exist (``missing`` finds those)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.removeprefix("cdc_lakehouse.") for a in node.names if a.name.startswith("cdc_lakehouse.")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[: max(len(package.split(".")) - node.level + 1, 0)])
                module = ".".join(p for p in (base, node.module or "") if p)
            elif (node.module or "").startswith("cdc_lakehouse."):
                module = node.module.removeprefix("cdc_lakehouse.")
            elif node.module == "cdc_lakehouse":
                module = ""
            else:
                continue
            # `from a import b` imports the submodule a.b where there is one
            for alias in node.names:
                sub = ".".join(p for p in (module, alias.name) if p)
                found.add(sub if _exists(sub) else module)
            found.add(module)
    return {m for m in found if m} - {name}


def _exists(module: str) -> bool:
    base = PACKAGE.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def import_graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> int:
    return LAYERS.index(LAYER_OF.get(module.split(".")[0], "tools"))


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(m, i) for m, imported in graph.items() for i in imported if layer(i) > layer(m)}


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_every_imported_module_exists() -> None:
    """A lazy import of a moved module fails only when its function runs: found here first."""
    missing = sorted(f"{m} imports {i}" for m, imported in import_graph().items() for i in imported if not _exists(i))
    assert not missing, "\n".join(missing)


def test_layers_import_downward_only() -> None:
    upward = upward_imports(import_graph())
    new = sorted(upward - KNOWN_UPWARD)
    assert not new, "imports from a lower layer to a higher one:\n" + "\n".join(f"{m} -> {i}" for m, i in new)
    fixed = sorted(KNOWN_UPWARD - upward)
    assert not fixed, f"no longer imported upward, remove from KNOWN_UPWARD: {fixed}"


def test_no_import_cycles() -> None:
    found = cycles(import_graph())
    assert found - KNOWN_CYCLES == set(), f"import cycles: {[sorted(c) for c in found - KNOWN_CYCLES]}"
    assert KNOWN_CYCLES - found == set(), f"gone, remove from KNOWN_CYCLES: {[sorted(c) for c in KNOWN_CYCLES - found]}"


def test_the_check_finds_an_upward_import_and_a_cycle() -> None:
    graph = {"silver.x": {"gold.y", "bronze.z"}, "gold.y": {"silver.x"}, "bronze.z": set()}
    assert upward_imports(graph) == {("silver.x", "gold.y")}
    assert cycles(graph) == {frozenset({"silver.x", "gold.y"})}
    assert layer("capture.binlog") == layer("cli") == LAYERS.index("tools")


def third_party_imports(path: Path) -> set[str]:
    """The top-level names of the modules a file imports, anywhere in it (lazy imports too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_only_the_storage_seam_imports_delta_rs() -> None:
    """Every read and write of a Delta table goes through a store (storage/): the package's
    other modules and the pipeline files never reach ``deltalake`` themselves."""
    storage = PACKAGE / "storage"
    leaks = sorted(str(p.relative_to(PACKAGE.parent)) for p in PACKAGE.parent.rglob("*.py")
                   if storage not in p.parents and "deltalake" in third_party_imports(p))
    assert not leaks, f"import deltalake outside cdc_lakehouse/storage: {leaks}"


def test_the_check_finds_a_lazy_deltalake_import(tmp_path: Path) -> None:
    source = tmp_path / "leak.py"
    source.write_text("def f():\n    from deltalake import DeltaTable\n    import pyarrow.compute\n", encoding="utf-8")
    assert third_party_imports(source) == {"deltalake", "pyarrow"}
