"""What the charts of docs/benchmarks/ share (matplotlib, from the ``plot`` extra): one colour per
method everywhere, the non-interactive backend, saving. Each question draws its own charts through
its ``charts(results, out)`` (:func:`report.write` calls them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: one colour per method, in every chart (prefix match, longest first)
COLORS = {
    "unmanaged": "#888888",
    "truncate_last_n": "#1f77b4",
    "llm_summary": "#0b3d91",
    "recent that fits": "#9467bd",
    "trim_messages": "#d62728",
    "SummarizationMiddleware": "#ff7f0e",
    "CrewAI unmanaged": "#bbbbbb",
    "CrewAI respect_context_window": "#2ca02c",
    "CrewAI defaults": "#98df8a",
    "CrewAI + ctxlife": "#17becf",
}


def color(label: str) -> str | None:
    """The colour of a method, by the longest key it contains."""
    for key in sorted(COLORS, key=len, reverse=True):
        if key in label:
            return COLORS[key]
    return None


def pyplot() -> Any:
    """matplotlib.pyplot on the non-interactive backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: Path) -> Path:
    """Write a figure (PNG, fixed size and DPI) and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    pyplot().close(fig)
    return path
