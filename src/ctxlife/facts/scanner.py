"""Find the facts in one string by running the pattern table over it.

Patterns run in priority order (:data:`ctxlife.facts.patterns.PATTERNS`); a span one pattern
accepts hides its text from the patterns after it, so every character belongs to one fact at most.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import NamedTuple

from ctxlife.facts.fact import Fact
from ctxlife.facts.patterns import PATTERNS, FactPattern


class FoundFact(NamedTuple):
    """A fact and the span ``[start, end)`` of the scanned text it was read from."""

    start: int
    end: int
    fact: Fact


class _AcceptedSpans:
    """Spans accepted so far: sorted, never overlapping."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def take(self, start: int, end: int) -> bool:
        """Accept ``[start, end)`` unless it overlaps an accepted span."""
        i = bisect.bisect_right(self.starts, start)
        if i > 0 and self.ends[i - 1] > start:
            return False
        if i < len(self.starts) and self.starts[i] < end:
            return False
        self.starts.insert(i, start)
        self.ends.insert(i, end)
        return True


# Each distinct ``applies`` check of the table, and for each row the index of its check (or None).
_CHECKS: tuple[Callable[[str], bool], ...] = tuple(dict.fromkeys(p.applies for p in PATTERNS if p.applies))
_ROWS: tuple[tuple[FactPattern, int | None], ...] = tuple(
    (p, _CHECKS.index(p.applies) if p.applies else None) for p in PATTERNS
)


def scan_text(text: str) -> list[FoundFact]:
    """Every fact in ``text``, ordered by position."""
    if not text or not text.strip():
        return []
    passed = [check(text) for check in _CHECKS]
    spans = _AcceptedSpans()
    found: list[FoundFact] = []
    for pattern, check in _ROWS:
        if check is not None and not passed[check]:
            continue
        kind = pattern.kind
        for match in pattern.regex.finditer(text):
            for start, end, surface, normalized in pattern.normalise(match):
                if surface and end > start and spans.take(start, end):
                    found.append(FoundFact(start, end, Fact(kind, surface, normalized)))
    found.sort(key=lambda f: f.start)
    return found
