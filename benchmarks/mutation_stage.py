"""Stage the copy `make mutate` runs mutmut in (build/mutate): src/ctxlife and the strategies side by side.

mutmut 3 names a mutant after its file's path and puts only ``mutants/src`` on ``sys.path``, so the
strategies package (``strategies/ctxlife_strategies`` in the checkout) is copied to
``src/ctxlife_strategies`` beside ``src/ctxlife``. In the copy (the checkout's sources are not
touched):

- every function whose ``def`` line matches one of ``[tool.mutmut] do_not_mutate_patterns``, and
  in a file listed under ``[tool.ctxlife-mutate] only_functions`` every top-level function and
  method not named there, gets ``# pragma: no mutate block``: mutmut applies its patterns to single
  lines only, and the scope of the run is whole functions;
- in a function listed under ``[tool.ctxlife-mutate] only_lines`` (a long function doing several
  jobs), only the statements from the first line holding its ``from`` text up to the one before the
  first later line holding its ``to`` text (an empty ``to``: to the end) are mutated: the lines
  before get ``# pragma: no mutate start``/``end``, the ones from ``to`` on ``# pragma: no mutate
  block`` (``from`` must start a statement of the function's own body, ``to`` any statement);
- a method decorated with ``@ctxlife.hookimpl`` gets its decorator applied after its body instead
  (``name = ctxlife.hookimpl(name)``): mutmut 3 leaves decorated functions unmutated, and a
  strategy's hook is where it acts; a scope's ``undecorate`` names more such decorators (the postgres
  store's ``@contextlib.contextmanager`` methods: its connection, write transaction and session lock).

A *scope* (``--scope NAME``) picks what one run mutates: ``core`` is ``[tool.mutmut]`` as written;
any other is a table ``[tool.ctxlife-mutate.scopes.NAME]`` whose ``only_mutate``, ``tests_dir``,
``only_functions``, ``only_lines``, ``undecorate``, ``timeout_constant`` and ``process_isolation`` replace the core's
and whose ``pytest_add_cli_args`` are added to the core's (the
staged pyproject.toml gets them, so ``mutmut run`` in the stage reads them); ``--files`` narrows a
scope to some of its files (a quick run on one module).
Each scope is sized to run within 30 minutes on 2 cores; ``benchmarks/mutation_scopes.py`` lists
them and the ones whose files changed since their last report (``make mutate-changed``).

    python benchmarks/mutation_stage.py build/mutate [--scope NAME] [--files PATH ...]
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

REPO = Path(__file__).resolve().parents[1]
COPIED = ["tests", "configs", "docs", "benchmarks", "pyproject.toml"]


def scope_config(pyproject: dict[str, Any], scope: str, files: list[str] | None = None) -> dict[str, Any]:
    """``[tool.mutmut]`` for ``scope`` (only_mutate, tests_dir) with its ``only_functions`` and
    ``only_lines`` under those keys."""
    config = dict(pyproject["tool"]["mutmut"])
    ours = pyproject["tool"].get("ctxlife-mutate", {})
    if scope == "core":
        config["only_functions"] = ours.get("only_functions", {})
        config["only_lines"] = ours.get("only_lines", {})
    else:
        scopes = ours.get("scopes", {})
        if scope not in scopes:
            raise SystemExit(f"no mutation scope {scope!r}: the scopes are core, {', '.join(sorted(scopes))}")
        table = scopes[scope]
        config["only_mutate"] = list(table["only_mutate"])
        config["tests_dir"] = list(table["tests_dir"])
        config["only_functions"] = table.get("only_functions", {})
        config["only_lines"] = table.get("only_lines", {})
        config["undecorate"] = list(table.get("undecorate", []))
        # e.g. ["-k", "not redis and not postgres"]: store-agnostic code need not run once per store
        config["pytest_add_cli_args"] = [*config.get("pytest_add_cli_args", []), *table.get("pytest_add_cli_args", [])]
        # a scope whose tests need it: more time per mutant, or workers forked from a clean server
        # (process_isolation = "forkserver": tests that leave threads behind, which a fork deadlocks on)
        for key in ("timeout_constant", "process_isolation"):
            if key in table:
                config[key] = table[key]
    if files:
        unknown = sorted(set(files) - set(config["only_mutate"]))
        if unknown:
            raise SystemExit(f"not in scope {scope!r}: {', '.join(unknown)} (its files: {config['only_mutate']})")
        config["only_mutate"] = [f for f in config["only_mutate"] if f in files]
    return config


def main(stage: Path, scope: str = "core", files: list[str] | None = None) -> None:
    if stage.exists():
        shutil.rmtree(stage)
    (stage / "src").mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(REPO / "src" / "ctxlife", stage / "src" / "ctxlife", ignore=ignore, symlinks=True)
    shutil.copytree(REPO / "strategies" / "ctxlife_strategies", stage / "src" / "ctxlife_strategies", ignore=ignore)
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, stage / name, ignore=ignore, symlinks=True)
        else:
            shutil.copy2(source, stage / name)
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    config = scope_config(pyproject, scope, files)
    only_functions = config.pop("only_functions")
    only_lines = config.pop("only_lines")
    decorators = ("ctxlife.hookimpl", *config.pop("undecorate", []))
    if scope != "core" or files:  # the staged pyproject.toml names the scope's files and tests
        staged = dict(pyproject)
        staged["tool"] = {**pyproject["tool"], "mutmut": config}
        (stage / "pyproject.toml").write_text(tomli_w.dumps(staged), encoding="utf-8")
    patterns = [re.compile(p) for p in config.get("do_not_mutate_patterns", [])]
    marked = moved = 0
    for pattern_path in config.get("only_mutate", []):
        path = stage / pattern_path
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        lines, count = undecorate_hooks(lines, decorators)
        moved += count
        for function, (start, stop) in only_lines.get(pattern_path, {}).items():
            lines = mutate_only_between(lines, function, start, stop, where=pattern_path)
        kept = only_functions.get(pattern_path)
        outside = set() if kept is None else outside_functions(lines, set(kept))
        for i, line in enumerate(lines):
            if line.lstrip().startswith("def ") and (i in outside or any(p.search(line) for p in patterns)):
                # the pragma goes on the line that ends the signature (the one ending with ':')
                j = i
                while not lines[j].rstrip().endswith(":"):
                    j += 1
                lines[j] = lines[j].rstrip("\n") + "  # pragma: no mutate block\n"
                marked += 1
        path.write_text("".join(lines), encoding="utf-8")
    print(
        f"staged {stage} (scope {scope}: {len(config['only_mutate'])} files): {marked} functions outside the "
        f"mutation scope, {moved} decorated functions made mutable"
    )


def defined_functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Top-level functions and the methods of top-level classes (nested classes included)."""
    found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    bodies = [tree.body]
    while bodies:
        for node in bodies.pop():
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append(node)
            elif isinstance(node, ast.ClassDef):
                bodies.append(node.body)
    return found


def outside_functions(lines: list[str], kept: set[str]) -> set[int]:
    """Indices of the ``def`` lines of the functions not named in ``kept``."""
    tree = ast.parse("".join(lines))
    return {node.lineno - 1 for node in defined_functions(tree) if node.name not in kept}


def mutate_only_between(lines: list[str], function: str, start: str, stop: str, *, where: str) -> list[str]:
    """``lines`` with every statement of ``function`` outside [the line holding ``start``, the first
    later line holding ``stop`` or the function's end when ``stop`` is empty) marked with mutmut's
    pragmas (comment lines only: nothing moves)."""
    found = [node for node in defined_functions(ast.parse("".join(lines))) if node.name == function]
    if len(found) != 1:
        raise SystemExit(f"{where}: only_lines names {function!r}, found {len(found)} functions of that name")
    node = found[0]
    assert node.end_lineno is not None
    first, end = node.body[0].lineno - 1, node.end_lineno
    begin = next((i for i in range(first, end) if start in lines[i]), None)
    finish = next((i for i in range(begin + 1, end) if stop in lines[i]), None) if begin is not None and stop else end
    if begin is None or finish is None:
        raise SystemExit(f"{where}: {function} has no line holding {start!r} followed by one holding {stop!r}")
    if begin > first and all(statement.lineno != begin + 1 for statement in node.body):
        # mutmut reads a function's own pragmas before those of its inner blocks: a "start" there
        # and an "end" inside would leave the range open across the inner blocks' marks
        raise SystemExit(f"{where}: {function}: {start!r} must start a statement of the function's own body")

    def comment(at: int, text: str) -> str:
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        return f"{indent}# pragma: no mutate {text}\n"

    # from the end backwards, so the indices found stay valid
    for at in sorted(_rest_from(node, finish + 1) if finish < end else [], reverse=True):
        lines.insert(at, comment(at, "block"))
    if begin > first:
        lines.insert(begin, comment(begin, "end"))
        lines.insert(first, comment(first, "start"))
    return lines


def _rest_from(function: ast.FunctionDef | ast.AsyncFunctionDef, lineno: int) -> list[int]:
    """Indices of the lines that get ``# pragma: no mutate block`` so that the statement starting on
    ``lineno`` and everything of ``function`` after it is left unmutated: mutmut's block covers a
    statement and its later siblings, so one more goes before the next statement of each enclosing
    block, and before the first statement of each ``except``/``else``/``finally`` after it."""
    marks: list[int] = []

    def walk(body: list[ast.stmt]) -> bool:
        for i, statement in enumerate(body):
            if statement.lineno == lineno:
                marks.append(statement.lineno - 1)
                return True
            nested = [getattr(statement, field, []) for field in ("body", "orelse", "finalbody")]
            handlers = [h.body for h in getattr(statement, "handlers", [])]
            blocks = [b for b in (*nested[:1], *handlers, *nested[1:]) if b]
            for k, block in enumerate(blocks):
                if walk(block):
                    marks.extend(later[0].lineno - 1 for later in blocks[k + 1 :])
                    if i + 1 < len(body):
                        marks.append(body[i + 1].lineno - 1)
                    return True
        return False

    if not walk(function.body):
        raise SystemExit(f"{function.name}: no statement starts on line {lineno}")
    return marks


def undecorate_hooks(lines: list[str], decorators: tuple[str, ...] = ("ctxlife.hookimpl",)) -> tuple[list[str], int]:
    """A decorator of ``decorators`` (alone on a function or method) moved after its body as a call."""
    tree = ast.parse("".join(lines))
    hooks = [
        node
        for node in defined_functions(tree)
        if len(node.decorator_list) == 1 and ast.unparse(node.decorator_list[0]).startswith(decorators)
    ]
    for node in sorted(hooks, key=lambda n: n.lineno, reverse=True):
        decorator = node.decorator_list[0]
        indent = lines[node.lineno - 1][: len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip())]
        applied = f"{indent}{node.name} = {ast.unparse(decorator)}({node.name})\n"
        assert node.end_lineno is not None
        lines.insert(node.end_lineno, applied)
        del lines[decorator.lineno - 1 : decorator.end_lineno]
    return lines, len(hooks)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", type=Path)
    parser.add_argument("--scope", default="core")
    parser.add_argument("--files", nargs="*", default=None, help="only these files of the scope")
    args = parser.parse_args()
    main(args.stage, args.scope, args.files)
