"""Find the facts in one string by running the pattern table over it.

Patterns run in priority order (:data:`ctxlife.facts.patterns.PATTERNS`); a span one pattern
accepts hides its text from the patterns after it, so every character belongs to one fact at most.
"""

from __future__ import annotations

import bisect
import re
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


# Full-width letters, digits and the symbols facts are made of, read as their ASCII forms (one
# character for one, so positions stay); sentence punctuation (，；：！？（）) stays: it ends facts.
_FULLWIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F) if chr(c) not in "，；：！？（）［］｛｝"}
_FULLWIDTH.update({0xFFE5: ord("¥"), 0xFFE1: ord("£"), 0xFFE0: ord("¢"), 0xFFE6: ord("₩"), 0x3000: ord(" ")})
_WIDE_COLON_RE = re.compile(r"(?<=\d)：(?=\d)")  # 10：30


_WIDE_RE = re.compile("[\uff01-\uff5e\uffe0-\uffe6\u3000]")


def _narrow(text: str) -> str:
    if text.isascii() or not _WIDE_RE.search(text):
        return text
    narrowed = text.translate(_FULLWIDTH)
    if "：" in narrowed:
        narrowed = _WIDE_COLON_RE.sub(":", narrowed)
    return narrowed


#: Results of recent scans by text: a span's short values ("economy", "2031-03-14", an id) recur in
#: many messages, and a text read as a JSON value is read again as text. Facts are immutable; each
#: caller gets its own list. Cleared whole when full, so memory stays bounded.
_SCANNED: dict[str, tuple[FoundFact, ...]] = {}
_SCANNED_MAX = 8_192
_SCANNED_MAX_CHARS = 512  # long texts (whole tool results) rarely recur: not kept


def scan_text(text: str) -> list[FoundFact]:
    """Every fact in ``text``, ordered by position; full-width forms (``ＯＲＤ－１``, ``￥``) are read as
    their ASCII forms, and the fact keeps the text as written."""
    if not text or not text.strip():
        return []
    cached = _SCANNED.get(text)
    if cached is not None:
        return list(cached)
    found = _scan(text)
    if len(text) <= _SCANNED_MAX_CHARS:
        if len(_SCANNED) >= _SCANNED_MAX:
            _SCANNED.clear()
        _SCANNED[text] = tuple(found)
    return found


def _scan(text: str) -> list[FoundFact]:
    original, text = text, _narrow(text)
    passed = [check(text) for check in _CHECKS]
    spans = _AcceptedSpans()
    found: list[FoundFact] = []
    for pattern, check in _ROWS:
        if check is not None and not passed[check]:
            continue
        kind = pattern.kind
        for match in pattern.regex.finditer(text):
            for start, end, surface, normalized in pattern.normalise(match):
                if text is not original and text.startswith(surface, start):
                    surface = original[start : start + len(surface)]  # as written (full-width)
                if surface and end > start and spans.take(start, end):
                    found.append(FoundFact(start, end, Fact(kind, surface, normalized)))
    found.sort(key=lambda f: f.start)
    return found
