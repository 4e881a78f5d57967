"""The questions ``make bench`` answers, and the file that answers each.

Every question module (``benchmarks/<module>.py``) can be read and run on its own and exposes:

* ``run(quick: bool) -> dict``: measure; a JSON-able dict (``bench.py`` stamps it with
  :func:`provenance.stamp` and writes ``benchmarks/results/<name>.json``);
* ``section(results: dict) -> str``: its part of ``docs/benchmarks.md`` (markdown, every figure
  from ``results``, nothing else: the tests regenerate the page and compare);
* optionally ``summary(results: dict) -> list[str]``: one-sentence findings for the page's
  summary and the README's paragraph (the first is the headline);
* optionally ``charts(results: dict, out: Path) -> list[Path]``: PNG charts its section links
  as ``benchmarks/<file>.png``.

Modules without ``summary`` (or, for ``bench_recall.py``, ``section``) get theirs from this package
(:mod:`report.fallback`, :mod:`report.recall`).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from report import fallback, figures, recall

HERE = Path(__file__).resolve().parent.parent  # benchmarks/


@dataclass(frozen=True)
class Question:
    name: str  # key in latest.json; results/<name>.json
    module: str  # benchmarks/<module>.py
    title: str  # its heading in docs/benchmarks.md
    alone: bool = False  # timing-sensitive: runs with nothing else running

    @property
    def path(self) -> Path:
        return HERE / f"{self.module}.py"


QUESTIONS: tuple[Question, ...] = (
    Question("overhead", "bench_overhead", "Overhead per model call, and the first compaction", alone=True),
    Question("sessions", "bench_sessions", "Session stores: throughput, restore, crash safety", alone=True),
    Question("retention", "bench_retention", "Retention at equal budget, on data ctxlife was not tuned on"),
    Question("recall", "bench_recall", "Recall: answers to questions about long-ago turns"),
    Question("crewai", "bench_crewai_peer", "CrewAI's own context handling, through real crews"),
    Question("tool_output", "bench_tool_output", "Capping tool output (`tool_output`)"),
    Question(
        "scale", "bench_scale", "Sessions at scale: 1k / 10k / 100k messages, next to the Agents SDK and LangGraph"
    ),
    Question(
        "loop",
        "bench_loop",
        # Not alone: the three systems are interleaved by turn, so load falls on all alike (the ratios hold).
        "The 1,000-turn agent loop: ctxlife next to LangChain's SummarizationMiddleware and the Agents SDK",
    ),
    Question(
        "recording",
        "ab_recording",
        # Not alone: the two recorders alternate call by call in one process, so load falls on both alike.
        "Recording per call at 10k messages: this tree beside e03a850's recorder (issue 41's A/B)",
    ),
    Question(
        "fleet",
        "bench_pg_store",
        "Fleet stores: PostgreSQL beside SQLite and Redis (append, read, recall, a new worker's first call)",
    ),
)
BY_NAME = {q.name: q for q in QUESTIONS}


def module(question: Question) -> ModuleType | None:
    """The question's module, or None when its file does not exist (yet)."""
    if not question.path.exists():
        return None
    return importlib.import_module(question.module)


def _fallback(question: Question, what: str) -> Callable[..., Any] | None:
    if question.name == "recall":
        return getattr(recall, what, None)
    if what == "summary":
        return fallback.SUMMARIES.get(question.name)
    if what == "charts" and question.name in figures.FIGURES:
        return figures.FIGURES[question.name][0]
    return None


def findings(question: Question, results: dict[str, Any] | None) -> list[str]:
    """The question's ``summary()`` lines; none when it has no results or its summary cannot read them
    (a results layout newer than the summary: the section still shows every figure)."""
    summarize = function(question, "summary")
    if not results or "not_run" in results or summarize is None:
        return []
    try:
        return list(summarize(results))
    except (KeyError, IndexError, TypeError, ValueError):
        return []


def fallback_links(question: Question) -> list[tuple[str, str]]:
    """The charts this package draws for a question whose module draws none: (file, alt text)."""
    mod = module(question)
    if mod is not None and hasattr(mod, "charts"):
        return []
    return figures.FIGURES.get(question.name, (None, []))[1]


def function(question: Question, what: str) -> Callable[..., Any] | None:
    """``run``/``section``/``summary``/``charts`` of a question: its module's, else this package's."""
    mod = module(question)
    found = getattr(mod, what, None) if mod is not None else None
    return found if found is not None else _fallback(question, what)
