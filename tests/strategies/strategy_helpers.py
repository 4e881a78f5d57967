"""Texts shared by a strategy's framework-neutral tests and its CrewAI tests (test_*_crewai.py)."""

from __future__ import annotations

import random
import re

MARK_RE = re.compile(r'"ref": "(to_[0-9a-f]{16})", "start": "(\d+)"')

FILLER = (
    "The team reviewed the options in detail and discussed several considerations at length. "
    "Various stakeholders shared general impressions about the overall direction of the work. "
)


def big_text(lines: int = 3500, seed: int = 3) -> str:
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "epsilon"]
    return "\n".join(f"row {i:05d}: " + " ".join(rng.choice(words) for _ in range(10)) for i in range(lines))


def research_output(n: int = 12) -> str:
    lines = []
    for i in range(n):
        lines.append(f"Finding {i}: flight HAT{100 + i} from JFK to SEA on 2024-05-{10 + i} costs ${120 + i}.")
        lines.append(FILLER * 3)
    return "\n".join(lines)
