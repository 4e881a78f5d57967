"""The published benchmark figures are never stale.

* every results file says which commit and which product code it measured;
* that code is the code in ``src/`` and ``strategies/`` now (results older than the last change to
  product code fail here: the fix is to re-run the benchmarks);
* ``docs/benchmarks.md`` is exactly what the report code makes of the committed results;
* the README's benchmark paragraph is generated from them too, and quotes only figures that
  ``docs/benchmarks.md`` carries.

Each check is its own test, so a branch that changed product code (where the hash check is
expected to fail until ``make bench`` runs) still checks the others.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
RESULTS = BENCH / "results"
LATEST = RESULTS / "latest.json"
DOC = REPO / "docs" / "benchmarks.md"
README = REPO / "README.md"
FIX = "run `make bench` and commit benchmarks/results, docs/benchmarks.md, docs/benchmarks/ and README.md"
#: results kept for the record that `make bench` does not produce: a one-off comparison of index
#: libraries for `recall` (docs/strategies/recall.md), and bench_real_model.py's waits with a real
#: local model (it needs what `make test-model` builds; docs/strategies/llm_summary.md)
NOT_FROM_MAKE_BENCH = {"recall_index_candidates.json", "real_model.json"}

sys.path.insert(0, str(BENCH))
import provenance  # noqa: E402 - benchmarks/ is not a package
import report  # noqa: E402
from report import readme  # noqa: E402


@pytest.fixture(scope="module")
def latest() -> dict[str, Any]:
    assert LATEST.exists(), f"{LATEST.relative_to(REPO)} is missing: {FIX}"
    data: dict[str, Any] = json.loads(LATEST.read_text(encoding="utf-8"))
    return data


def _results_files() -> list[Path]:
    return sorted(p for p in RESULTS.glob("*.json") if p.name not in NOT_FROM_MAKE_BENCH)


def test_results_say_what_they_measured(latest: dict[str, Any]) -> None:
    for path in _results_files():
        data = json.loads(path.read_text(encoding="utf-8"))
        missing = [key for key in ("commit", "code_hash") if not isinstance(data, dict) or key not in data]
        assert not missing, f"{path.relative_to(REPO)} has no {' / '.join(missing)}: {FIX}"
    for name, results in latest["questions"].items():
        if "not_run" in results:
            continue
        assert "code_hash" in results, f"latest.json's {name!r} results carry no code_hash: {FIX}"
        own = RESULTS / f"{name}.json"
        assert own.exists(), f"latest.json has {name!r} results but {own.relative_to(REPO)} is missing: {FIX}"
        assert json.loads(own.read_text(encoding="utf-8")) == results, (
            f"{own.relative_to(REPO)} differs from latest.json's {name!r} results (a question run on its own, or a "
            f"merge): `python benchmarks/bench.py --report-only` collects it into latest.json and the docs, or {FIX}"
        )
    assert not latest.get("quick"), f"the committed results come from a --quick run: {FIX}"


def test_results_measure_the_current_code(latest: dict[str, Any]) -> None:
    now = provenance.code_hash()
    stale = {
        path.name: data.get("code_hash")
        for path in _results_files()
        if (data := json.loads(path.read_text(encoding="utf-8"))).get("code_hash") != now
    }
    assert not stale, (
        f"benchmark results older than the last change to src/ or strategies/ (code hash now {now}; "
        f"recorded: {stale}): {FIX}"
    )


def test_docs_are_the_report_of_the_committed_results(latest: dict[str, Any]) -> None:
    assert DOC.read_text(encoding="utf-8") == report.page(latest), (
        f"docs/benchmarks.md is not what benchmarks/report makes of benchmarks/results/latest.json "
        f"(edited by hand, or results changed without the docs): `python benchmarks/bench.py --report-only`, or {FIX}"
    )


def test_readme_paragraph_is_generated_from_the_results(latest: dict[str, Any]) -> None:
    committed = readme.current(README.read_text(encoding="utf-8"))
    assert committed, f"README.md has no {readme.START} ... {readme.END} benchmark paragraph"
    assert committed == readme.block(latest), (
        f"README.md's benchmark paragraph is not generated from benchmarks/results/latest.json: "
        f"`python benchmarks/bench.py --report-only`, or {FIX}"
    )


def test_readme_quotes_only_figures_from_the_docs() -> None:
    committed = readme.current(README.read_text(encoding="utf-8"))
    docs_figures = set(readme.numbers(DOC.read_text(encoding="utf-8")))
    foreign = [figure for figure in readme.numbers(committed) if figure not in docs_figures]
    assert not foreign, f"README.md's benchmark paragraph quotes {foreign}, which docs/benchmarks.md does not: {FIX}"


def test_every_question_file_says_what_it_answers_and_how_to_run_it() -> None:
    import ast

    from report import questions

    for question in questions.QUESTIONS:
        assert question.path.exists(), f"benchmarks/{question.module}.py (the {question.name!r} question) is missing"
        tree = ast.parse(question.path.read_text(encoding="utf-8"))
        doc = ast.get_docstring(tree) or ""
        assert f"benchmarks/{question.module}.py" in doc, (
            f"benchmarks/{question.module}.py: its docstring must say what it measures and how to run it "
            f"(`.venv/bin/python benchmarks/{question.module}.py ...`)"
        )
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        for needed in ("run", "section"):
            assert needed in defined or questions.function(question, needed) is not None, (
                f"benchmarks/{question.module}.py has no {needed}() (the contract in benchmarks/report/questions.py)"
            )
