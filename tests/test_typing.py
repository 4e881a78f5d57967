"""Types a user can rely on: ``mypy --strict`` and pyright on the public API, the docs' example
plugin and every Python snippet of the README and docs/.

Each snippet becomes a module of its own (a block preceded by ``<!-- typecheck: continues -->``
is appended to the one before it: a class shown in two parts). Both checkers run once over all
of them, the public modules of ctxlife and ``tests/typing/public_api_usage.py`` (which pins the
types with ``assert_type``: ``wrap()`` returns its argument's type, ...). The sources are made
visible to the checkers the way docs/getting-started.md tells users (``mypy_path`` /
``extraPaths``), since an editable install's import hook is invisible to them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# One worker under xdist, and the expensive fixture is session-scoped: the worker may run other
# modules' tests between these, and a module-scoped fixture would then be set up again.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_typing")]

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CONTINUES = "<!-- typecheck: continues -->"

PUBLIC_MODULES = [
    "src/ctxlife/__init__.py",
    "src/ctxlife/api.py",
    "src/ctxlife/config.py",
    "src/ctxlife/contexts.py",
    "src/ctxlife/errors.py",
    "src/ctxlife/hookspecs.py",
    "src/ctxlife/host.py",
    "src/ctxlife/strategy.py",
    "src/ctxlife/tokens.py",
    "src/ctxlife/integrations/__init__.py",
    "src/ctxlife/integrations/crewai.py",
    "src/ctxlife/integrations/langchain.py",
    "src/ctxlife/integrations/openai_agents.py",
]
EXAMPLE_PLUGIN = "docs/examples/ctxlife-redact/src/ctxlife_redact/__init__.py"
EXTRA_FILES = [EXAMPLE_PLUGIN, "docs/examples/langgraph_loop.py", "tests/typing/public_api_usage.py"]


def doc_pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def snippets(page: Path) -> list[str]:
    """The page's Python blocks, continuation blocks joined to the block before them."""
    text = page.read_text(encoding="utf-8")
    found: list[str] = []
    for match in re.finditer(r"(?m)^```python\n(.*?)^```", text, re.S):
        before = text[: match.start()].rstrip().splitlines()
        if before and before[-1].strip() == CONTINUES and found:
            found[-1] += "\n" + match.group(1)
        else:
            found.append(match.group(1))
    return found


def _slug(path: Path) -> str:
    return re.sub(r"\W", "_", str(path.relative_to(REPO)).removesuffix(".md"))


@pytest.fixture(scope="session")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[str]]]:
    """{checker: {source label: [error lines]}} for every snippet, example and public module."""
    work = tmp_path_factory.mktemp("typecheck")
    labels: dict[str, str] = {}  # file checked -> label
    unparsable: dict[str, list[str]] = {}
    for page in doc_pages():
        for number, code in enumerate(snippets(page), 1):
            label = f"{page.relative_to(REPO)}#{number}"
            try:
                compile(code, label, "exec")
            except SyntaxError as exc:  # one broken snippet must not hide the others' results
                unparsable[label] = [f"{label}:{exc.lineno}: syntax error: {exc.msg}"]
                continue
            file = work / f"snippet_{_slug(page)}_{number}.py"
            file.write_text(code, encoding="utf-8")
            labels[str(file)] = label
    for rel in EXTRA_FILES:
        file = work / f"extra_{_slug(REPO / rel.replace('.py', '.md'))}.py"
        file.write_text((REPO / rel).read_text(encoding="utf-8"), encoding="utf-8")
        labels[str(file)] = rel
    for rel in PUBLIC_MODULES:
        labels[str(REPO / rel)] = rel
    files = list(labels)

    env = {**os.environ, "MYPYPATH": f"{REPO / 'src'}{os.pathsep}{REPO / 'strategies'}"}
    cache = work / ".mypy_cache"
    if (REPO / ".mypy_cache").is_dir():
        # Start from `make lint`'s cache (read, never written: this copy is the one mypy updates), so
        # CrewAI, LangChain and pydantic are not analysed again: ~5 s instead of ~80 s. Its options must
        # match ours (strict, imports followed normally) or mypy ignores it; errors outside the checked
        # files are dropped below either way.
        shutil.copytree(REPO / ".mypy_cache", cache)
    mypy = subprocess.run(
        [
            str(BIN / "mypy"),
            "--strict",
            "--follow-imports=normal",
            "--no-error-summary",
            "--show-absolute-path",
            "--cache-dir",
            str(cache),
            "--python-executable",
            sys.executable,
            *files,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=900,
    )
    config = work / "pyrightconfig.json"
    config.write_text(
        json.dumps({"extraPaths": [str(REPO / "src"), str(REPO / "strategies")], "pythonVersion": "3.11"})
    )
    pyright = subprocess.run(
        [str(BIN / "pyright"), "--outputjson", "--pythonpath", sys.executable, "-p", str(config), *files],
        capture_output=True,
        text=True,
        cwd=work,
        timeout=900,
    )
    results: dict[str, dict[str, list[str]]] = {"mypy": {}, "pyright": {}}
    for line in mypy.stdout.splitlines():
        path = line.split(":", 1)[0]
        if path in labels and ": error:" in line:
            results["mypy"].setdefault(labels[path], []).append(line.replace(path, labels[path]))
    assert mypy.returncode in (0, 1), mypy.stderr or mypy.stdout
    report = json.loads(pyright.stdout)
    for diagnostic in report["generalDiagnostics"]:
        if diagnostic["severity"] == "error" and diagnostic["file"] in labels:
            label = labels[diagnostic["file"]]
            results["pyright"].setdefault(label, []).append(
                f"{label}:{diagnostic['range']['start']['line'] + 1}: {diagnostic['message']}"
            )
    for label, errors in unparsable.items():
        results["mypy"][label] = results["pyright"][label] = errors
    results["labels"] = {label: [] for label in [*labels.values(), *unparsable]}
    return results


def _sources() -> list[str]:
    labels = [f"{page.relative_to(REPO)}#{n}" for page in doc_pages() for n in range(1, len(snippets(page)) + 1)]
    return labels + EXTRA_FILES + PUBLIC_MODULES


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
@pytest.mark.parametrize("label", _sources())
def test_type_checks(checked: dict[str, dict[str, list[str]]], checker: str, label: str) -> None:
    assert label in checked["labels"], f"{label} was not checked"
    errors = checked[checker].get(label, [])
    assert not errors, "\n".join(errors)


def test_every_python_snippet_of_the_docs_is_checked() -> None:
    total = sum(len(snippets(page)) for page in doc_pages())
    assert total >= 15  # README, getting-started, integrations, hooks, writing-a-strategy, strategies/
    for page in doc_pages():
        text = page.read_text(encoding="utf-8")
        assert text.count("```python") == len(re.findall(r"(?m)^```python\n", text)), f"{page}: indented python fence"
