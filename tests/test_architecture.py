"""The layering docs/architecture.md describes, checked on the source (imports read with ast, nothing run)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
PRODUCT = sorted((SRC / "ctxlife").rglob("*.py"))
STRATEGIES = sorted((REPO / "strategies" / "ctxlife_strategies").glob("*.py"))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(module, names, line) of every import; relative imports resolved. Imports inside functions
    count (a lazy import hides a cycle, it does not remove it), and so do imports under
    ``if TYPE_CHECKING:``, since a cycle of types is a cycle of design."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, list[str], int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, [], node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module_name(path).split(".")
                if path.name != "__init__.py":
                    package = package[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            found.append((base, [alias.name for alias in node.names], node.lineno))
    return sorted(found, key=lambda found_import: found_import[2])


LAZY_MARK = "# lazy:"
LAZY_REASON = re.compile(r"# lazy: \S")


def unexplained_function_level_imports(path: Path) -> list[int]:
    """Lines of imports inside functions that do not say why they are there.

    An import inside a function is for import time only (a heavy or optional dependency, or keeping
    ``import ctxlife`` and the CLI's start fast), and says so: ``# lazy: <reason>`` on the comment
    line right above it or on its own line. Consecutive import lines share the comment above them.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    tree = ast.parse("\n".join(lines))
    inside: list[ast.stmt] = []
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.extend(n for n in ast.walk(function) if isinstance(n, (ast.Import, ast.ImportFrom)))
    runs: list[list[ast.stmt]] = []
    for node in sorted(set(inside), key=lambda n: n.lineno):
        if runs and node.lineno == (runs[-1][-1].end_lineno or 0) + 1:
            runs[-1].append(node)
        else:
            runs.append([node])
    unexplained = []
    for run in runs:
        above = lines[run[0].lineno - 2].strip() if run[0].lineno > 1 else ""
        if LAZY_REASON.match(above):
            continue
        unexplained.extend(
            n.lineno for n in run if not any(LAZY_REASON.search(line) for line in lines[n.lineno - 1 : n.end_lineno])
        )
    return unexplained


#: The most lines a module of the product or of the first-party strategies may have (issue 43): past
#: it, a module does more than one job and is split by job.
MAX_MODULE_LINES = 900


def test_no_module_of_the_product_or_the_strategies_is_over_900_lines():
    over = {
        str(path.relative_to(REPO)): lines
        for path in sorted((SRC / "ctxlife").rglob("*.py")) + sorted((REPO / "strategies").rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert over == {}, f"modules over {MAX_MODULE_LINES} lines (split each by job): {over}"


def test_ctxlife_modules_import_each_other_without_a_cycle():
    graph: dict[str, set[str]] = {}
    names = {module_name(p) for p in PRODUCT}
    for path in PRODUCT:
        edges = set()
        for module, imported, _ in imports(path):
            for candidate in [module, *(f"{module}.{n}" for n in imported)]:
                # importing a.b.c runs the package a.b's __init__ first: an edge to each parent too
                parts = candidate.split(".")
                edges.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        graph[module_name(path)] = {e for e in edges if e in names and e != module_name(path)}
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


def test_every_import_inside_a_function_says_why_it_is_deferred():
    """A function-level import only for import time, with a ``# lazy: <reason>`` comment; never to
    dodge a cycle (the test above sees through those): move the code to the layer it belongs in."""
    offenders = [
        f"{path.relative_to(REPO)}:{line}"
        for path in PRODUCT + STRATEGIES
        for line in unexplained_function_level_imports(path)
    ]
    assert not offenders, f"add a '{LAZY_MARK} <reason>' comment or import at the top of the module:\n" + "\n".join(
        offenders
    )


def test_the_lazy_import_rule_wants_a_reason_above_or_on_the_import(tmp_path):
    source = tmp_path / "example.py"
    source.write_text(
        "import json\n"
        "def plain():\n"
        "    import os\n"  # line 3: no reason
        "def marked():\n"
        "    # lazy: slow to import\n"
        "    import rich\n"
        "    import rich.table\n"  # shares the comment above the run
        "    x = 1\n"
        "    import csv  # lazy: only for exports\n"
        "    import sqlite3  # lazy:\n",  # line 10: a marker without a reason
        encoding="utf-8",
    )
    assert unexplained_function_level_imports(source) == [3, 10]


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
    allowed = {SRC / "ctxlife" / "cli" / "_demo.py"}
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
    layers = ["previous", "formats", "text", "cutting", "inserted", "turns", "validation", "bootstrap"]
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


CLI = SRC / "ctxlife" / "cli"


def test_the_command_line_lives_in_one_package_that_no_library_module_imports():
    """Every command's argparse and printing is under ctxlife/cli/ (the demo application too, as the
    private cli/_demo.py); the library never imports the CLI, so it can change without the library."""
    outside = [p for p in PRODUCT if CLI not in p.parents]
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path in outside + STRATEGIES
        for module, _, line in imports(path)
        if module in ("argparse", "ctxlife.cli") or module.startswith(("ctxlife.cli.", "rich"))
    ]
    assert offenders == []


# -- the layer table of docs/architecture.md, as an import contract ------------------------------


def layer_table() -> list[tuple[str, list[str]]]:
    """(layer, module paths) per row of docs/architecture.md's layer table, top row first."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## The layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| layer")]
    return [(row.split("|")[1].strip(), re.findall(r"`([\w/]+(?:\.py|/))`", row.split("|")[2])) for row in rows]


def layer_of(path: Path, table: list[tuple[str, list[str]]]) -> int | None:
    """The row a source file belongs to: the longest module path of the table that names it."""
    relative = path.relative_to(SRC / "ctxlife" if SRC in path.parents else REPO).as_posix()
    found = [
        (len(entry), k)
        for k, (_, entries) in enumerate(table)
        for entry in entries
        if relative == entry or (entry.endswith("/") and relative.startswith(entry))
    ]
    return max(found)[1] if found else None


def imported_modules(path: Path) -> list[tuple[str, int]]:
    """The ctxlife modules a file imports: ``from ctxlife import Name`` is the module defining Name."""
    init = SRC / "ctxlife" / "__init__.py"
    defined = {name: module for module, names, _ in imports(init) for name in names}
    for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
        if isinstance(node, ast.AnnAssign | ast.Assign) and "_LAZY" in ast.unparse(node).split("=")[0]:
            defined.update(ast.literal_eval(node.value))  # type: ignore[arg-type]
    out = []
    for module, names, line in imports(path):
        if module == "ctxlife" and names:
            out.extend((defined[name], line) for name in names if name in defined)
        elif module == "ctxlife":  # `import ctxlife`: the modules behind the names used (ctxlife.Strategy)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            used = {
                (node.attr, node.lineno)
                for node in ast.walk(tree)
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ctxlife"
            }
            out.extend((defined.get(name, f"ctxlife.{name}"), at) for name, at in sorted(used) if name != "__version__")
        elif module.startswith("ctxlife"):
            out.append((module, line))
    return out


def module_path(module: str) -> Path:
    base = (REPO / "strategies" if module.startswith("ctxlife_strategies") else SRC).joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


#: The imports against the table, named in docs/architecture.md: llm_summary and task_scope build the
#: [model] table's CrewAI-named model with the public ``ctxlife.completion_for_model`` (defined by the
#: CrewAI adapter).
LAYER_EXCEPTIONS = {
    ("strategies/ctxlife_strategies/llm_summary.py", "ctxlife.integrations.crewai"),
    ("strategies/ctxlife_strategies/task_scope.py", "ctxlife.integrations.crewai"),
}


def test_every_module_is_in_one_layer_and_imports_only_its_own_and_those_below():
    table = layer_table()
    assert [name for name, _ in table][0] == "public API" and len(table) >= 10
    unplaced = [str(p.relative_to(REPO)) for p in PRODUCT + STRATEGIES if layer_of(p, table) is None]
    assert unplaced == []
    offenders = []
    for path in PRODUCT + STRATEGIES:
        mine = layer_of(path, table)
        assert mine is not None
        for module, line in imported_modules(path):
            theirs = layer_of(module_path(module), table)
            if (path.relative_to(REPO).as_posix(), module) in LAYER_EXCEPTIONS:
                continue
            if theirs is None or theirs < mine:
                where = "no layer" if theirs is None else f"layer {table[theirs][0]!r}"
                offenders.append(
                    f"{path.relative_to(REPO)}:{line} (layer {table[mine][0]!r}) imports {module} ({where})"
                )
    assert offenders == []


# -- the public surface: docs/api.md ----------------------------------------------------------------


def dunder_all(path: Path) -> list[str] | None:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "__all__":
            return list(ast.literal_eval(node.value))  # type: ignore[arg-type]
    return None


def test_every_public_name_is_documented_and_every_module_is_public_or_internal():
    """docs/api.md declares the public surface: a section per public module listing its ``__all__``,
    then the internal modules. A new public name, a name gone, or a module on neither list fails."""
    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    body, internal = text.split("\n## Internal modules\n", 1)
    sections = {
        heading: set(re.findall(r"`(\w+)`", section.split("\n\n", 2)[-1]))
        for heading, section in re.findall(r"\n## `([\w.]+)`\n(.*?)(?=\n## |\Z)", body, re.S)
    }
    assert "ctxlife" in sections and "ctxlife.messages" in sections
    for module, listed in sections.items():
        exported = dunder_all(module_path(module))
        assert exported is not None, f"{module} is documented as public but declares no __all__"
        assert sorted(set(exported) - listed) == [], f"{module}: public names not in docs/api.md"
        assert sorted(listed - set(exported)) == [], f"{module}: docs/api.md lists names it does not export"
    declared_internal = set(re.findall(r"`(ctxlife[\w.]*)`", internal))
    every = {module_name(p) for p in PRODUCT}
    assert sorted(every - declared_internal - set(sections)) == [], "modules on neither list of docs/api.md"
    assert sorted(declared_internal & set(sections)) == []
    assert sorted(declared_internal - every) == [], "docs/api.md lists modules that no longer exist"
