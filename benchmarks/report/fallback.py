"""Findings (``summary()``) for question modules that do not define their own: one sentence per
finding, every figure formatted exactly as the module's section prints it, so the README can quote
them and ``tests/test_bench_results.py`` finds them in docs/benchmarks.md."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from report.fmt import window

#: the held-out domain and metric the retention headline quotes, and the methods it names
RETENTION_HEADLINE = ("helpdesk", "planted")
RETENTION_METHODS = (
    ("ctxlife llm_summary", "`llm_summary`"),
    ("ctxlife llm_summary+recall", "`llm_summary` + `recall`"),
    ("recent that fit", "the most recent messages that fit"),
    ("trim_messages (tiktoken)", "`trim_messages` as LangChain documents it"),
)
#: the methods the cache-adjusted cost line names
COST_METHODS = (
    ("unmanaged", "unmanaged"),
    ("ctxlife llm_summary", "`llm_summary`"),
    ("ctxlife truncate_last_n", "`truncate_last_n`"),
    ("trim_messages (tiktoken)", "`trim_messages`"),
)


def _share(cell: dict[str, Any]) -> str:
    return f"{cell['share']:.1%}"


def retention(results: dict[str, Any]) -> list[str]:
    rows = {(r["domain"], r["window"], r["method"]): r for r in results["rows"]}
    lines = []
    domain, metric = RETENTION_HEADLINE
    for w in results["windows"]:
        found = [(rows.get((domain, w, m)), label) for m, label in RETENTION_METHODS]
        if any(row is None or metric not in row["retention"] for row, _ in found):
            continue
        lines.append(
            f"Retention at equal budget on data ctxlife was not tuned on (IT service desk sessions from "
            f"`gen_helpdesk.py`, values planted by the generator, {window(w)} window): "
            + ", ".join(f"{label} {_share(row['retention'][metric])}" for row, label in found if row)
            + "."
        )
    w = results["windows"][0]
    costs = [(rows.get((domain, w, m)), label) for m, label in COST_METHODS]
    if all(row is not None and "cost_per_session_90" in row for row, _ in costs):
        lines.append(
            f"Cost per IT service desk session at {window(w)}, in uncached-input-token equivalents with a 90% "
            "prompt-cache discount (raw tokens in brackets): "
            + ", ".join(
                f"{label} {row['cost_per_session_90']:,} ({row['tokens_per_session']:,})" for row, label in costs if row
            )
            + "."
        )
    for memory in ("memorybank-en", "memorybank-cn"):
        w = results["windows"][0]
        found = [(rows.get((memory, w, m)), label) for m, label in RETENTION_METHODS]
        if all(row is not None and "answers" in row["retention"] for row, _ in found):
            language = "English" if memory.endswith("en") else "Chinese"
            lines.append(
                f"MemoryBank {language} chats, held-out people, {window(w)} window, answers to questions about "
                "early sessions still in context at equal budget: "
                + ", ".join(f"{label} {_share(row['retention']['answers'])}" for row, label in found if row)
                + "."
            )
    return lines


def _g(cell: dict[str, Any]) -> str:
    return f"{cell['median']:g}"


def sessions(results: dict[str, Any]) -> list[str]:
    size = str(results["sizes"][-1])
    recording = results["recording"]
    stores = [s for s in ("file", "sqlite", "redis") if size in recording.get(s, {})]
    if not stores:
        return []
    if all("recording_only_ms" in recording[s][size] for s in stores):
        line = (
            f"Session stores, {int(size):,}-message history, stateless caller: recording the session adds "
            + ", ".join(f"{_g(recording[s][size]['recording_only_ms'])} ms ({s})" for s in stores)
            + " to a `manage()` call (median, paired against a host with no store)"
        )
    else:
        base = recording.get("baseline (no strategies)", {}).get(size)
        line = (
            f"Session stores, {int(size):,}-message history, stateless caller: a `manage()` call that records the "
            "session takes "
            + ", ".join(f"{_g(recording[s][size]['per_call_ms'])} ms ({s})" for s in stores)
            + (f" (median; {_g(base['per_call_ms'])} ms without a store)" if base else " (median)")
        )
    restore = results.get("append_restore", {})
    restored = [s for s in stores if "host_restore_ms" in restore.get(s, {})]
    if restored:
        line += f"; a fresh host restores a {results['append_restore_messages']:,}-message session in " + ", ".join(
            f"{_g(restore[s]['host_restore_ms'])} ms ({s})" for s in restored
        )
    return [line + "."]


SUMMARIES: dict[str, Callable[[dict[str, Any]], list[str]]] = {"retention": retention, "sessions": sessions}
