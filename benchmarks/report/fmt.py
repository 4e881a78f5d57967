"""Number formatting and markdown tables for the benchmark pages (every section uses these, so
figures look the same everywhere and the README can quote them verbatim)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

DASH = "–"


def n(value: Any) -> str:
    """A count or a measurement: thousands separators, 3 significant digits below 1,000."""
    if value is None:
        return DASH
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{value:,}"


def pct(value: float | None, digits: int = 1) -> str:
    """A share (0..1) as a percentage."""
    return DASH if value is None else f"{100 * value:.{digits}f}%"


def ms(value: float | None) -> str:
    """Milliseconds, with precision that suits the size."""
    if value is None:
        return DASH
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def x(value: float | None) -> str:
    """A ratio: ``12×``, ``3.4×``, ``0.52×``."""
    if value is None:
        return DASH
    if value >= 10:
        return f"{value:,.0f}×"
    return f"{value:.2g}×" if value < 1 else f"{value:.1f}×"


def window(tokens: int | str) -> str:
    """A context window: ``4k``."""
    return f"{int(tokens) // 1000}k"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str | None = None) -> str:
    """A markdown table; ``align`` is one letter per column (l, r, c), default: first left, rest right."""
    align = align or "l" + "r" * (len(header) - 1)
    marks = {"l": ":--", "r": "--:", "c": ":-:"}
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
