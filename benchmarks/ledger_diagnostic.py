"""ctxlife's own "ledger facts kept": a **diagnostic only**, never a retention figure.

The facts (ids, codes, amounts, dates, ...) are found by ctxlife's own extractor, the same code
``llm_summary`` uses for its "Key facts" list, so the metric is circular: ctxlife grading ctxlife.
``bench_retention.py`` shows it on tau-bench in a column labelled as a diagnostic, next to the
independent metrics of ``grading.py``.

A fact is taken from the user turn or tool result where it first appears (unless the system prompt
already carries it: it is never at risk) and is *used* at a call when the assistant message written
there carries it; it is kept when it is still in the context sent at that call.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ctxlife.facts import Fact, extract_facts, facts_missing_from
from ctxlife.messages import role
from ctxlife.replay import call_points, context_text

Message = dict[str, Any]


@dataclass
class FactUse:
    """A fact from a user turn or tool result used again at call point ``call``."""

    fact: Fact
    call: int


def fact_uses(messages: list[Message]) -> list[FactUse]:
    """Every (fact, later call that uses it) of a recording.

    Used: the assistant message written at the call (its text and its tool-call arguments) yields
    the same fact (same kind and normalized value) or contains its exact text, confirmed with
    :func:`ctxlife.facts.facts_missing_from`.
    """
    first: dict[tuple[str, str], tuple[Fact, int]] = {}
    for index, message in enumerate(messages):
        if role(message) not in {"user", "tool"}:
            continue
        for fact in extract_facts([message]):
            if fact.key not in first:
                first[fact.key] = (fact, index)
    candidates = sorted(first.values(), key=lambda pair: pair[1])
    system_text = context_text([m for m in messages if role(m) == "system"])
    if system_text and candidates:
        missing = {f.key for f in facts_missing_from([f for f, _ in candidates], system_text)}
        candidates = [(f, i) for f, i in candidates if f.key in missing]
    origins = [i for _, i in candidates]
    uses: list[FactUse] = []
    for k in call_points(messages):
        if role(messages[k]) != "assistant":
            continue
        earlier = candidates[: bisect.bisect_left(origins, k)]
        if not earlier:
            continue
        text = context_text([messages[k]])
        keys = {f.key for f in extract_facts(text)}
        pool = [(f, i) for f, i in earlier if f.key in keys or f.text in text]
        if not pool:
            continue
        missing = {f.key for f in facts_missing_from([f for f, _ in pool], text)}
        uses.extend(FactUse(f, k) for f, _ in pool if f.key not in missing)
    return uses


def ledger_grader(messages: list[Message]) -> Callable[[int, Sequence[Message]], tuple[int, int]]:
    """``grade(call, context) -> (facts used at that call, how many of them the context still holds)``."""
    uses: dict[int, list[FactUse]] = {}
    for use in fact_uses(messages):
        uses.setdefault(use.call, []).append(use)

    def grade(k: int, context: Sequence[Message]) -> tuple[int, int]:
        here = uses.get(k)
        if not here:
            return 0, 0
        missing = {f.key for f in facts_missing_from([u.fact for u in here], context_text(list(context)))}
        return len(here), sum(1 for u in here if u.fact.key not in missing)

    return grade
