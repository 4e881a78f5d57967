"""Canonical forms of fact values, so one fact written two ways is recognised as the same.

``"1,234.50"`` -> ``"1234.5"``, ``(2024, 5, 15)`` -> ``"2024-05-15"``, ``2:30 PM`` -> ``"14:30"``,
``"bags"`` -> ``"bag"``. Pure functions, no state.
"""

from __future__ import annotations

import re

from ctxlife.facts.vocabulary import CODE_STOPWORDS, SINGULAR_UNITS, UNIT_SUFFIXES

_PLAIN_NUMBER_RE = re.compile(r"(-?)(\d*)(?:\.(\d*))?")
_DIGIT_RE = re.compile(r"\d")
_UPPER_RE = re.compile(r"[A-Z]")
_DIGITS_THEN_LETTERS_RE = re.compile(r"(\d+)([A-Z]+)")
_CLOSING_BRACKETS = {")": "(", "]": "[", "}": "{", ">": "<"}


def canonical_number(raw: str) -> str | None:
    """``"1,234.50"`` -> ``"1234.5"``; ``"250.0"`` -> ``"250"``; any length of digits; ``None`` if not a number."""
    m = _PLAIN_NUMBER_RE.fullmatch(raw.replace(",", "").strip())
    if m is None or not (m.group(2) or m.group(3)):
        return None
    whole = m.group(2).lstrip("0") or "0"
    frac = (m.group(3) or "").rstrip("0")
    out = whole + ("." + frac if frac else "")
    return ("-" + out) if m.group(1) and out != "0" else out


def is_valid_day(month: int, day: int) -> bool:
    return 1 <= month <= 12 and 1 <= day <= 31


def canonical_date(year: int | None, month: int, day: int | None) -> str:
    """``2024-05-15``; ``2024-05`` without a day; ``--05-15`` without a year."""
    if day is None:
        return f"{year:04d}-{month:02d}"
    if year is None:
        return f"--{month:02d}-{day:02d}"
    return f"{year:04d}-{month:02d}-{day:02d}"


def four_digit_year(year: str) -> int:
    """``"24"`` -> 2024, ``"85"`` -> 1985, ``"2024"`` -> 2024."""
    n = int(year)
    if len(year) == 2:
        n += 2000 if n < 70 else 1900
    return n


def canonical_time(hour: int, minute: int, am_pm: str | None) -> str | None:
    """``(2, 30, "p")`` -> ``"14:30"``; ``None`` for an impossible time."""
    if am_pm:
        if not 1 <= hour <= 12:
            return None
        if am_pm.lower() == "p" and hour != 12:
            hour += 12
        elif am_pm.lower() == "a" and hour == 12:
            hour = 0
    if not (0 <= hour <= 24 and 0 <= minute <= 59):
        return None
    return f"{hour:02d}:{minute:02d}"


def singular_unit(unit: str) -> str:
    """``"bags"`` -> ``"bag"``, ``"people"`` -> ``"person"``, ``"kg"`` -> ``"kg"``."""
    unit = re.sub(r"\s+", "", unit)
    if unit in SINGULAR_UNITS:
        return SINGULAR_UNITS[unit]
    if len(unit) > 3 and unit.endswith("s") and not unit.endswith("ss"):
        return unit[:-1]
    return unit


def strip_trailing_punctuation(text: str) -> str:
    """Drop sentence punctuation after a URL or path; keep a closing bracket that has its opener inside."""
    while text:
        last = text[-1]
        if last in ".,;:!?'\"`*_":
            text = text[:-1]
            continue
        if last in _CLOSING_BRACKETS and text.count(_CLOSING_BRACKETS[last]) < text.count(last):
            text = text[:-1]
            continue
        break
    return text


def looks_like_code(token: str) -> bool:
    """An upper-case alnum token with a digit that is not a technical word (``UTF8``) or a quantity (``20KG``)."""
    if token in CODE_STOPWORDS:
        return False
    if not _DIGIT_RE.search(token) or not _UPPER_RE.search(token):
        return False
    m = _DIGITS_THEN_LETTERS_RE.fullmatch(token)
    return not (m and (m.group(2) in UNIT_SUFFIXES or len(m.group(2)) <= 1))
