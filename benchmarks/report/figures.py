"""Charts for questions whose module draws none (``charts()`` missing): the overhead and retention
pictures. The page links them after the question's section (:data:`LINKS`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from report.charts import color, pyplot, save

OVERHEAD_SERIES = (
    ("ctxlife", "ctxlife llm_summary"),
    ("ctxlife_reads_all", "ctxlife llm_summary, reads the whole span"),
    ("trim_tiktoken", "trim_messages (tiktoken)"),
    ("trim_approximate", "trim_messages (approximate)"),
)
STEADY_SERIES = (
    ("ctxlife_in_place", "ctxlife, live list in place"),
    ("ctxlife_whole_list", "ctxlife, whole list each call"),
    ("trim_tiktoken", "trim_messages (tiktoken)"),
    ("trim_approximate", "trim_messages (approximate)"),
)
SHADES = {"reads the whole span": "#6b8fd6", "whole list": "#6b8fd6", "approximate": "#f2a0a0"}
MARKER_NAMES = {"o": "circle", "s": "square", "D": "diamond", "^": "triangle", "v": "down triangle"}


def _shade(label: str) -> str | None:
    for key, value in SHADES.items():
        if key in label:
            return value
    return color(label)


def overhead(results: dict[str, Any], out: Path) -> list[Path]:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
    rows = results["first_compaction"]
    labels = [f"{r['history']}\n{r['messages']:,} messages" for r in rows]
    width = 0.8 / len(OVERHEAD_SERIES)
    for i, (key, label) in enumerate(OVERHEAD_SERIES):
        xs = [j + (i - len(OVERHEAD_SERIES) / 2 + 0.5) * width for j in range(len(rows))]
        ys = [r["ms"].get(key) or 0 for r in rows]
        axes[0].bar(xs, ys, width, label=label, color=_shade(label))
    axes[0].set_xticks(range(len(rows)))
    axes[0].set_xticklabels(labels, fontsize=8)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("ms (median, log scale)")
    axes[0].set_title("First compaction of a whole history (one call)", fontsize=10)
    axes[0].legend(fontsize=7)
    steady = results["steady_state"]
    for key, label in STEADY_SERIES:
        pts = [(r["messages"], r["ms_per_call"][key]) for r in steady if key in r["ms_per_call"]]
        if pts:
            axes[1].plot(*zip(*pts, strict=True), "-o", ms=4, label=label, color=_shade(label))
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("history length (messages)")
    axes[1].set_ylabel("ms per call (median, log scale)")
    axes[1].set_title("Steady state: one new message per call", fontsize=10)
    axes[1].legend(fontsize=7)
    for ax in axes:
        ax.grid(True, which="both", alpha=0.25)
    fig.tight_layout()
    return [save(fig, out / "overhead.png")]


def retention(results: dict[str, Any], out: Path) -> list[Path]:
    """Retention against tokens sent, one panel per (domain, independent metric); marker = window."""
    plt = pyplot()
    rows = results["rows"]
    diagnostic = results.get("diagnostic_metric")
    methods = list(dict.fromkeys(r["method"] for r in rows))
    palette = plt.get_cmap("tab20").colors
    colors = {m: palette[i % len(palette)] for i, m in enumerate(methods)}
    panels = list(
        dict.fromkeys((r["domain"], m) for r in rows for m in r["retention"] if m != diagnostic and r["retention"][m])
    )
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.6), squeeze=False)
    markers = dict(zip(results["windows"], "osD^v", strict=False))
    for ax, (domain, metric) in zip(axes[0], panels, strict=True):
        for r in rows:
            cell = r["retention"].get(metric)
            if r["domain"] != domain or not cell or not cell.get("needs"):
                continue
            first = r["window"] == results["windows"][0]
            ax.scatter(
                r["tokens_per_call"],
                cell["share"],
                marker=markers.get(r["window"], "o"),
                color=colors[r["method"]],
                label=r["method"] if first else None,
                s=30,
            )
        ax.set_title(f"{domain}: {metric}", fontsize=10)
        ax.set_xlabel("mean tokens per call")
        ax.set_ylim(-0.03, 1.03)
        ax.grid(True, alpha=0.25)
    axes[0][0].set_ylabel("share kept")
    handles, labels = axes[0][0].get_legend_handles_labels()
    windows = ", ".join(f"{MARKER_NAMES[m]} = {w // 1000}k window" for w, m in markers.items())
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, title=f"marker: {windows}")
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    return [save(fig, out / "retention.png")]


def sessions(results: dict[str, Any], out: Path) -> list[Path]:
    """Recording cost per call at each history size, and restore time, per store."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    recording = {k: v for k, v in results["recording"].items() if "skipped" not in v}
    sizes = [str(n) for n in results["sizes"]]
    width = 0.8 / max(1, len(recording))
    for i, (store, by_size) in enumerate(recording.items()):
        xs = [j + (i - len(recording) / 2 + 0.5) * width for j in range(len(sizes))]
        ys = [by_size[n]["per_call_ms"]["median"] if n in by_size else 0 for n in sizes]
        axes[0].bar(xs, ys, width, label=store)
    axes[0].set_xticks(range(len(sizes)))
    axes[0].set_xticklabels([f"{int(n):,} messages" for n in sizes])
    axes[0].set_yscale("log")
    axes[0].set_ylabel("ms per manage() call (median, log)")
    axes[0].set_title("Recording the session, stateless caller", fontsize=10)
    axes[0].legend(fontsize=7)
    restore = {k: v for k, v in results["append_restore"].items() if "host_restore_ms" in v}
    axes[1].barh(list(restore), [v["host_restore_ms"]["median"] for v in restore.values()], color="#2ca02c")
    axes[1].set_xlabel(f"ms (median): a fresh host restores {results['append_restore_messages']:,} messages")
    axes[1].set_title("Restore", fontsize=10)
    for ax in axes:
        ax.grid(True, axis="both", alpha=0.25)
    fig.tight_layout()
    return [save(fig, out / "sessions.png")]


#: question -> (draw, [(file, alt text)]) for the page to link
FIGURES: dict[str, tuple[Callable[[dict[str, Any], Path], list[Path]], list[tuple[str, str]]]] = {
    "overhead": (overhead, [("overhead.png", "First compaction and steady-state time per call")]),
    "retention": (retention, [("retention.png", "Retention against tokens sent, per domain and metric")]),
    "sessions": (sessions, [("sessions.png", "Recording cost per call and restore time per store")]),
}
