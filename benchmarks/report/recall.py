"""The recall question's section and summary (``benchmarks/bench_recall.py`` predates the
``section``/``summary`` contract; its results are rendered here)."""

from __future__ import annotations

from typing import Any

from report.fmt import ms, n, pct, table, window

METHOD_LABELS = {
    "unmanaged": "unmanaged",
    "truncate_last_n": "`truncate_last_n`",
    "llm_summary": "`llm_summary`",
    "llm_summary+recall": "`llm_summary` + `recall`",
    "trim_messages": "`trim_messages` (same budget)",
    "recent+bm25": "recent half + BM25 over message-with-reply (same budget)",
    "pair-doc": "pair-doc: recent half + BM25 over each message with the next, stopwords removed (same budget)",
}
DATA_LABELS = {
    ("memorybank", "en"): "MemoryBank, English",
    ("memorybank", "cn"): "MemoryBank, Chinese",
    ("synthetic_agent", "en"): "synthetic agent",
}


def _rows(results: dict[str, Any], split: str) -> dict[tuple[str, str, int, str], dict[str, Any]]:
    return {
        (r["data"], r["language"], r["window"], r["method"]): r
        for r in results["answers"]
        if r["split"] == split and r.get("wording", "question") == "question"
    }


def _worded(results: dict[str, Any]) -> list[list[str]]:
    """Held-out MemoryBank rows of ctxlife with recall and pair-doc, by wording (question / request / statement)."""
    rows = []
    by = {
        (r["language"], r["window"], r.get("wording", "question"), r["method"]): r
        for r in results["answers"]
        if r["split"] == "heldout" and r["data"] == "memorybank"
    }
    for language in ("en", "cn"):
        for w in results["windows"]:
            for wording in ("question", "request", "statement"):
                ours, base = (
                    by.get((language, w, wording, "llm_summary+recall")),
                    by.get((language, w, wording, "pair-doc")),
                )
                if ours is None or base is None:
                    continue
                chat = ours.get("replay_share_with_block")
                rows.append(
                    [
                        DATA_LABELS[("memorybank", language)],
                        window(w),
                        wording,
                        _cell(ours),
                        _cell(base),
                        f"{(ours['answer_in_context'] - base['answer_in_context']) * 100:+.1f}",
                        "–" if chat is None else pct(chat, 0),
                    ]
                )
    return rows


def _cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "–"
    return f"{pct(row['answer_in_context'], 0)} ({n(row['mean_tokens'])})"


def section(results: dict[str, Any]) -> str:
    methods = [m for m in METHOD_LABELS if m in results["methods"]]
    held = _rows(results, "heldout")
    dev = _rows(results, "dev")
    out = [
        "`benchmarks/bench_recall.py` replays long conversations call by call through each method, then asks "
        "questions about early turns as new user turns. A question counts as answered *in context* when its "
        "answer key, written with the data (`tests/data/memorybank/answer_keys_*.json`, or planted by "
        "`benchmarks/synthetic_agent.py`), is in the messages sent at that call (matched by `grading.present`, "
        "the retention question's definition; no ctxlife code grades). `trim_messages` runs as LangChain documents it "
        '(`strategy="last"`, `start_on="human"`, `include_system=True`) at the token budget `llm_summary` + '
        "`recall` used at the same call. Everything was tuned on the **dev** half; the table is the **held-out** "
        "half.\n",
        "Held-out half: answers in context (mean context tokens sent at those calls):\n",
    ]
    rows = []
    for (data, language), label in DATA_LABELS.items():
        for w in results["windows"]:
            first = held.get((data, language, w, methods[0]))
            if first is None:
                continue
            rows.append(
                [f"{label} ({first['questions']} questions)", window(w)]
                + [_cell(held.get((data, language, w, m))) for m in methods]
            )
    out.append(table(["data", "window", *[METHOD_LABELS[m] for m in methods]], rows, "ll" + "r" * len(methods)))
    worded = _worded(results)
    if worded:
        out.append(
            'Held-out MemoryBank questions asked three ways (as written, as a request "Tell me ...", as a '
            'statement "I\'m trying to think of this: ..."), `llm_summary` + `recall` against pair-doc at the same '
            "tokens per question, and the share of ordinary chat turns (the replay) that got a recall block:\n"
        )
        out.append(
            table(
                [
                    "data",
                    "window",
                    "wording",
                    "`llm_summary` + `recall`",
                    "pair-doc",
                    "lead (points)",
                    "chat turns with a block",
                ],
                worded,
                "lllrrrr",
            )
        )
    best = "llm_summary+recall"
    if best in methods:
        out.append(
            "Dev half, `llm_summary` + `recall`: "
            + "; ".join(
                f"{label} "
                + " / ".join(
                    f"{pct(dev[(data, language, w, best)]['answer_in_context'], 0)} at {window(w)}"
                    for w in results["windows"]
                    if (data, language, w, best) in dev
                )
                for (data, language), label in DATA_LABELS.items()
            )
            + ".\n"
        )
    over = results.get("recall_overhead") or []
    if over:
        out.append(
            "What `recall` adds to a `manage()` call (CPU time, `snapshot_restore` on a file store, `llm_summary`, "
            "one new question per call; calls with and without `recall` interleaved in one process, the median "
            "of three runs and their spread): "
            + "; ".join(
                f"+{ms(r['recall_adds_median_ms'])} ms median"
                + (
                    f" ({ms(r['recall_adds_spread_ms'][0])}-{ms(r['recall_adds_spread_ms'][1])})"
                    if "recall_adds_spread_ms" in r
                    else ""
                )
                + f" (+{ms(r['recall_adds_p95_ms'])} ms p95) at "
                f"{n(r['history_messages'])} messages of history, first call +{ms(r['recall_first_call_ms'])} ms"
                for r in over
            )
            + ".\n"
        )
    return "\n".join(out)


def summary(results: dict[str, Any]) -> list[str]:
    held = _rows(results, "heldout")
    lines = []
    for w in results["windows"]:
        key = ("memorybank", "en", w)
        if (*key, "llm_summary+recall") in held and (*key, "trim_messages") in held:
            recall_row = held[(*key, "llm_summary+recall")]
            lines.append(
                f"Recall (held-out MemoryBank English chats, {window(w)} window): answers to questions about early "
                f"sessions still in context {pct(recall_row['answer_in_context'], 0)} with `llm_summary` + `recall`, "
                f"{pct(held[(*key, 'llm_summary')]['answer_in_context'], 0)} with `llm_summary` alone, "
                f"{pct(held[(*key, 'trim_messages')]['answer_in_context'], 0)} with `trim_messages` at the same budget."
            )
            break
    return lines
