"""Render the benchmark results into docs/benchmarks.md, docs/benchmarks/*.png and the README's
benchmark paragraph. Small modules, one job each:

* :mod:`report.questions`: the questions, and the file that answers each (the section contract);
* :mod:`report.page`: the markdown page (header, summary, sections, machine);
* :mod:`report.readme`: the README paragraph between its markers;
* :mod:`report.charts`: shared chart helpers; each question draws its own charts (:func:`write_charts`);
* :mod:`report.fmt`: number formats and markdown tables;
* :mod:`report.recall`: the section of ``bench_recall.py``'s results.

Nothing here measures; everything reads ``benchmarks/results/latest.json`` only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from report import questions, readme
from report.page import page

__all__ = ["page", "write", "write_charts"]


def write_charts(latest: dict[str, Any], out: Path) -> list[Path]:
    """Every question's charts, into ``out`` (docs/benchmarks/)."""
    written: list[Path] = []
    for question in questions.QUESTIONS:
        results = latest["questions"].get(question.name)
        draw = questions.function(question, "charts")
        if results and "not_run" not in results and draw is not None:
            written += draw(results, out)
    return written


def write(latest: dict[str, Any], docs: Path, readme_path: Path | None) -> list[Path]:
    """Write ``docs/benchmarks.md`` and its charts (removing charts nobody draws any more), and splice the
    README's paragraph."""
    doc = docs / "benchmarks.md"
    docs.mkdir(parents=True, exist_ok=True)
    written = write_charts(latest, docs / "benchmarks")
    for stale in set((docs / "benchmarks").glob("*.png")) - set(written):
        stale.unlink()  # a chart no question draws any more must not stay in the docs
    doc.write_text(page(latest), encoding="utf-8")
    written.insert(0, doc)
    if readme_path is not None:
        text = readme_path.read_text(encoding="utf-8")
        readme_path.write_text(readme.splice(text, readme.block(latest)), encoding="utf-8")
        written.append(readme_path)
    return written
