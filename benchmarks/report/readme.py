"""The README's benchmark paragraph: generated from the results, between two markers, quoting only
sentences that docs/benchmarks.md also carries (each question's headline, i.e. the first line of its
``summary()``)."""

from __future__ import annotations

import re
from typing import Any

from report import questions

START = "<!-- bench:start -->"
END = "<!-- bench:end -->"
NUMBER = re.compile(r"\d(?:[\d,.]*\d)?")


def block(latest: dict[str, Any]) -> str:
    """The paragraph, markers included."""
    lines = [
        START,
        "Benchmarks against LangChain and CrewAI, each comparison measured side by side in one run "
        f"([docs/benchmarks.md](docs/benchmarks.md), `make bench`, commit `{latest['commit'][:12]}`):",
    ]
    for question in questions.QUESTIONS:
        found = questions.findings(question, latest["questions"].get(question.name))
        if found:
            lines.append(f"- {found[0]}")
    lines.append(END)
    return "\n".join(lines)


def splice(readme: str, new_block: str) -> str:
    """``readme`` with the text between the markers replaced (markers must be there once each)."""
    if readme.count(START) != 1 or readme.count(END) != 1:
        raise ValueError(f"README.md must hold {START} and {END} once each, around the benchmark paragraph")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return head + new_block + tail


def current(readme: str) -> str:
    """The README's block as committed, markers included ('' when the markers are missing)."""
    if START not in readme or END not in readme:
        return ""
    return START + readme.split(START, 1)[1].split(END, 1)[0] + END


def numbers(text: str) -> list[str]:
    """The figures a text quotes (``1,000``, ``97.3``, ``4``), for checking the README against the docs."""
    return NUMBER.findall(text)
