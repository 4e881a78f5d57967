"""The layering docs/architecture.md describes, checked on the source (imports read with ast, nothing run)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
PRODUCT = sorted((SRC / "ctxlife").rglob("*.py"))
STRATEGIES = sorted((REPO / "strategies" / "ctxlife_strategies").glob("*.py"))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, *, top_level_only: bool = False) -> list[tuple[str, list[str], int]]:
    """(module, names, line) of every import; relative imports resolved. ``top_level_only`` skips
    imports inside functions (deferred on purpose, to keep ``import ctxlife`` fast); imports under
    ``if TYPE_CHECKING:`` count, since a cycle of types is a cycle of design."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, list[str], int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if top_level_only and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, [], child.lineno) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    package = module_name(path).split(".")
                    if path.name != "__init__.py":
                        package = package[:-1]
                    package = package[: len(package) - child.level + 1]
                    base = ".".join([*package, base] if base else package)
                found.append((base, [alias.name for alias in child.names], child.lineno))
            visit(child)

    visit(tree)
    return found


def test_ctxlife_modules_import_each_other_without_a_cycle():
    graph: dict[str, set[str]] = {}
    names = {module_name(p) for p in PRODUCT}
    for path in PRODUCT:
        edges = set()
        for module, imported, _ in imports(path, top_level_only=True):
            for candidate in [module, *(f"{module}.{n}" for n in imported)]:
                if candidate in names and candidate != module_name(path):
                    edges.add(candidate)
        graph[module_name(path)] = edges
    # a package's __init__ importing its own submodules is how packages work, not a cycle
    for name, edges in graph.items():
        graph[name] = {e for e in edges if not name.startswith(e + ".")}

    visiting: list[str] = []
    done: set[str] = set()

    def walk(node: str) -> None:
        if node in done:
            return
        if node in visiting:
            cycle = visiting[visiting.index(node) :] + [node]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        visiting.append(node)
        for nxt in sorted(graph.get(node, ())):
            walk(nxt)
        visiting.pop()
        done.add(node)

    for node in sorted(graph):
        walk(node)


def test_no_module_imports_a_private_name_of_another():
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {module}.{name}"
        for path in PRODUCT + STRATEGIES
        for module, imported, line in imports(path)
        if module.startswith("ctxlife")
        for name in imported
        if name.startswith("_") and not name.startswith("__")
    ]
    assert offenders == []


def test_only_the_framework_adapters_and_the_demo_app_import_crewai():
    # The demo is an application built on CrewAI (it uses ctxlife as a user would); the library
    # outside ctxlife/integrations/ must stay framework neutral.
    allowed = {SRC / "ctxlife" / "demo.py"}
    offenders = [
        f"{path.relative_to(REPO)}:{line}"
        for path in PRODUCT + STRATEGIES
        if "integrations" not in path.parts and path not in allowed
        for module, _, line in imports(path)
        if module.split(".")[0] == "crewai"
    ]
    assert offenders == []


def test_the_product_never_imports_the_test_kit():
    kit = {SRC / "ctxlife" / "testing.py", SRC / "ctxlife" / "pytest_plugin.py"}
    offenders = [
        f"{path.relative_to(REPO)}:{line}"
        for path in PRODUCT + STRATEGIES
        if path not in kit
        for module, imported, line in imports(path)
        if module == "ctxlife.testing" or (module == "ctxlife" and "testing" in imported)
    ]
    assert offenders == []


def test_strategies_use_only_the_public_api():
    """First-party strategies are written as a third party would: no host, config or plugin internals."""
    internal = ("ctxlife.host", "ctxlife.config", "ctxlife.plugins", "ctxlife.registry", "ctxlife.integrations")
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path in STRATEGIES
        for module, _, line in imports(path)
        if module.startswith(internal)
    ]
    assert offenders == []


def test_the_message_model_modules_import_only_the_ones_below_them():
    """ctxlife.messages is layered (docs in its __init__): each module imports only those before it
    in this order, and none imports the package itself (that import would run before the package is
    complete)."""
    layers = ["formats", "text", "cutting", "inserted", "turns", "validation", "bootstrap"]
    package = SRC / "ctxlife" / "messages"
    assert sorted(p.stem for p in package.glob("*.py") if p.name != "__init__.py") == sorted(layers)
    offenders = [
        f"{layer}.py:{line}: {module}"
        for k, layer in enumerate(layers)
        for module, _, line in imports(package / f"{layer}.py")
        if module == "ctxlife.messages"
        or (module.startswith("ctxlife.messages.") and module.rpartition(".")[2] not in layers[:k])
    ]
    assert offenders == []
