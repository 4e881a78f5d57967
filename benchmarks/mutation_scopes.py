"""The scopes of `make mutate` (benchmarks/mutation_stage.py), and which of them need a new run.

    python benchmarks/mutation_scopes.py list       # every scope: core, then [tool.ctxlife-mutate.scopes]
    python benchmarks/mutation_scopes.py changed    # the scopes whose mutated files or tests changed since
                                                    # the commit their report names (or with no report)
    python benchmarks/mutation_scopes.py coverage   # by package: the lines of functions some scope mutates

The incremental mode of ``make mutate-changed``: a scope's report (docs/mutation/NAME.md, the core's
docs/mutation/core.md) says which commit it mutated (``Mutated commit: SHA``); a scope
is run again when ``git diff SHA`` touches one of its files (the checkout's paths: the staged
``src/ctxlife_strategies`` is ``strategies/ctxlife_strategies`` here) or test files, or when its
configuration (its table of pyproject.toml with ``[tool.mutmut]``'s defaults) differs from the one at SHA:
an edit of another scope's table, or of a dependency pin, does not make every scope stale. Of the core's
defaults a scope inherits, only what they do to it counts (:func:`effective`): the functions of its files
that ``do_not_mutate_patterns`` leave unmutated, the ``--deselect``s of its own test files.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutation_stage import defined_functions, scope_config  # noqa: E402

PRODUCT = ("src/ctxlife", "strategies/ctxlife_strategies")


def scopes() -> list[str]:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return ["core", *pyproject["tool"].get("ctxlife-mutate", {}).get("scopes", {})]


def report_of(scope: str) -> Path:
    return REPO / "docs" / "mutation" / f"{scope}.md"


def checkout_path(staged: str) -> str:
    """A path of the staged copy as it is in the checkout."""
    return re.sub(r"^src/ctxlife_strategies/", "strategies/ctxlife_strategies/", staged)


def changed(scope: str) -> bool:
    """Whether ``scope`` needs a new run: no report, no commit in it, or its files changed since."""
    report = report_of(scope)
    found = (
        re.search(r"^Mutated commit: ([0-9a-f]{40})", report.read_text(encoding="utf-8"), re.M)
        if report.is_file()
        else None
    )
    if found is None:
        return True
    commit = found.group(1)
    config = scope_config(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8")), scope)
    then = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{commit}:pyproject.toml"], capture_output=True, text=True, check=False
    )
    before = config_at(then.stdout, scope) if then.returncode == 0 else None
    if before is None or effective(before) != effective(config):
        return True
    watched = [checkout_path(p) for p in config["only_mutate"]] + [t.partition("::")[0] for t in config["tests_dir"]]
    diff = subprocess.run(
        ["git", "-C", str(REPO), "diff", "--name-only", commit, "--", *watched],
        capture_output=True,
        text=True,
        check=False,
    )
    if diff.returncode != 0:
        return True
    mutated = set(watched[: len(config["only_mutate"])])
    return any(path not in mutated or not same_code(commit, path) for path in diff.stdout.split())


def same_code(commit: str, path: str) -> bool:
    """Whether ``path`` in the checkout differs from ``commit``'s only in docstrings, comments and layout:
    mutmut mutates neither, and a mutant's name counts the mutants of its function, so a report stays true."""

    then = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{commit}:{path}"], capture_output=True, text=True, check=False
    )
    if then.returncode != 0 or not (REPO / path).is_file():
        return False
    try:
        return _code_of(then.stdout) == _code_of((REPO / path).read_text(encoding="utf-8"))
    except SyntaxError:
        return False


def _code_of(source: str) -> str:
    """The module's syntax tree without docstrings (line numbers and comments are not in a dump)."""
    import ast

    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def config_at(pyproject_text: str, scope: str) -> dict[str, object] | None:
    """``scope``'s configuration in an older pyproject.toml (None where it had no such scope)."""
    try:
        return scope_config(tomllib.loads(pyproject_text), scope)
    except (SystemExit, KeyError):
        return None


def effective(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` as it acts on its scope: ``do_not_mutate_patterns`` replaced by the ``def`` lines they match
    in the scope's files (as the checkout holds them: a file's own changes are the diff's to find), and
    ``pytest_add_cli_args`` without the ``--deselect``s of tests outside its ``tests_dir``. The core's
    patterns and deselects are every scope's defaults: an edit naming only the core's functions or tests
    leaves another scope current."""
    out = dict(config)
    patterns = [re.compile(p) for p in config.get("do_not_mutate_patterns", [])]
    marked: dict[str, list[str]] = {}
    for staged in config["only_mutate"]:
        path = REPO / checkout_path(staged)
        lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
        marked[staged] = [
            line for line in lines if line.lstrip().startswith("def ") and any(p.search(line) for p in patterns)
        ]
    out["do_not_mutate_patterns"] = marked
    tests = [t.partition("::")[0] for t in config["tests_dir"]]

    def theirs(target: str) -> bool:  # a deselected test of the scope's own test files
        file = target.partition("::")[0]
        return any(file == t or file.startswith(t.rstrip("/") + "/") for t in tests)

    args = list(config.get("pytest_add_cli_args", []))
    kept: list[str] = []
    while args:
        arg = args.pop(0)
        if arg == "--deselect" and args:
            target = args.pop(0)
            kept += [arg, target] if theirs(target) else []
        elif not arg.startswith("--deselect=") or theirs(arg.removeprefix("--deselect=")):
            kept.append(arg)
    out["pytest_add_cli_args"] = kept
    return out


def mutated_lines() -> dict[str, tuple[int, int]]:
    """Per product file (checkout path): the lines of its functions and methods, and how many of those lines
    are in functions some scope mutates (its file in the scope's ``only_mutate``, the function in its
    ``only_functions`` when the scope names the file there, its ``def`` matching no ``do_not_mutate_patterns``;
    ``only_lines`` narrowing counts as mutated). Module-level code is not counted."""
    import ast

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    configs = [scope_config(pyproject, scope) for scope in scopes()]
    out: dict[str, tuple[int, int]] = {}
    for root in PRODUCT:
        for path in sorted((REPO / root).rglob("*.py")):
            checkout = str(path.relative_to(REPO))
            staged = re.sub(r"^strategies/ctxlife_strategies/", "src/ctxlife_strategies/", checkout)
            source = path.read_text(encoding="utf-8")
            lines = source.splitlines()
            total = covered = 0
            for node in defined_functions(ast.parse(source)):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                total += size
                for config in configs:
                    kept = config["only_functions"].get(staged)
                    patterns = [re.compile(p) for p in config.get("do_not_mutate_patterns", [])]
                    if (
                        staged in config["only_mutate"]
                        and (kept is None or node.name in kept)
                        and not any(p.search(lines[node.lineno - 1]) for p in patterns)
                    ):
                        covered += size
                        break
            out[checkout] = (total, covered)
    return out


def package_of(checkout: str) -> str:
    """``ctxlife.sessions``, ``ctxlife`` (a top-level module), ``ctxlife_strategies``."""
    parts = Path(checkout).parts
    return "ctxlife_strategies" if parts[0] == "strategies" else ".".join(parts[1:-1])


def coverage_table() -> str:
    """:func:`mutated_lines` by package, then the product's total, as a markdown table."""
    by_package: dict[str, list[int]] = {}
    for checkout, (total, covered) in mutated_lines().items():
        row = by_package.setdefault(package_of(checkout), [0, 0])
        row[0] += total
        row[1] += covered
    rows = ["| package | lines in functions | in a mutation scope | share |", "|---|---:|---:|---:|"]
    for package, (total, covered) in sorted(by_package.items()):
        rows.append(f"| {package} | {total} | {covered} | {covered / total:.0%} |" if total else "")
    total = sum(t for t, _ in by_package.values())
    covered = sum(c for _, c in by_package.values())
    rows.append(f"| **all** | {total} | {covered} | {covered / total:.0%} |")
    return "\n".join(r for r in rows if r)


def main(argv: list[str]) -> int:
    if argv[:1] == ["list"]:
        print("\n".join(scopes()))
    elif argv[:1] == ["coverage"]:
        print(coverage_table())
    elif argv[:1] == ["changed"]:
        print("\n".join(s for s in scopes() if changed(s)))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
