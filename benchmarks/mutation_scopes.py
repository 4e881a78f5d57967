"""The scopes of `make mutate` (benchmarks/mutation_stage.py), and which of them need a new run.

    python benchmarks/mutation_scopes.py list       # every scope: core, then [tool.ctxlife-mutate.scopes]
    python benchmarks/mutation_scopes.py changed    # the scopes whose mutated files or tests changed since
                                                    # the commit their report names (or with no report)

The incremental mode of ``make mutate-changed``: a scope's report (docs/mutation/NAME.md, the core's
docs/mutation/core.md) says which commit it mutated (``Mutated commit: SHA``); a scope
is run again when ``git diff SHA`` touches one of its files (the checkout's paths: the staged
``src/ctxlife_strategies`` is ``strategies/ctxlife_strategies`` here) or test files, or when its
configuration (its table of pyproject.toml with ``[tool.mutmut]``'s defaults) differs from the one at SHA:
an edit of another scope's table, or of a dependency pin, does not make every scope stale.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutation_stage import scope_config  # noqa: E402


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
    if then.returncode != 0 or config_at(then.stdout, scope) != config:
        return True
    watched = [checkout_path(p) for p in config["only_mutate"]] + [t.partition("::")[0] for t in config["tests_dir"]]
    diff = subprocess.run(
        ["git", "-C", str(REPO), "diff", "--name-only", commit, "--", *watched],
        capture_output=True,
        text=True,
        check=False,
    )
    return diff.returncode != 0 or bool(diff.stdout.strip())


def config_at(pyproject_text: str, scope: str) -> dict[str, object] | None:
    """``scope``'s configuration in an older pyproject.toml (None where it had no such scope)."""
    try:
        return scope_config(tomllib.loads(pyproject_text), scope)
    except (SystemExit, KeyError):
        return None


def main(argv: list[str]) -> int:
    if argv[:1] == ["list"]:
        print("\n".join(scopes()))
    elif argv[:1] == ["changed"]:
        print("\n".join(s for s in scopes() if changed(s)))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
