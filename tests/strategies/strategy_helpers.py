"""Texts and helpers shared by the strategies' tests (framework-neutral and CrewAI, test_*_crewai.py)."""

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


# The model client's keys live in the [model] table (issue 43); llm_summary's test helpers take them
# with the strategy's options and split them here.
_MODEL_KEYS = {
    "model": "name",
    "base_url": "base_url",
    "timeout_seconds": "timeout_seconds",
    "summarizer_context_window": "context_window",
    "model_options": "options",
}


def split_model_keys(options: dict) -> tuple[dict, dict]:
    """``options`` as (llm_summary's options, the [model] table)."""
    model = {_MODEL_KEYS[k]: v for k, v in options.items() if k in _MODEL_KEYS}
    return {k: v for k, v in options.items() if k not in _MODEL_KEYS}, model
