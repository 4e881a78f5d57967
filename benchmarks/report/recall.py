"""The recall question's section and summary (``benchmarks/bench_recall.py`` predates the
``section``/``summary`` contract; its results are rendered here)."""

from __future__ import annotations

from typing import Any

from report.fmt import n, pct, table, window

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
WOZ_LABELS = {  # benchmarks/woz.py: sources nothing was tuned on
    ("multiwoz", "en"): "MultiWOZ days, English",
    ("crosswoz", "cn"): "CrossWOZ days, Chinese",
}


def _rows(results: dict[str, Any], split: str) -> dict[tuple[str, str, int, str], dict[str, Any]]:
    return {
        (r["data"], r["language"], r["window"], r["method"]): r
        for r in results["answers"]
        if r["split"] == split and r.get("wording", "question") == "question"
    }


def _worded(results: dict[str, Any], sources: dict[tuple[str, str], str] | None = None) -> list[list[str]]:
    """Held-out rows of ctxlife with recall and pair-doc, by wording (question / request / statement), of
    ``sources`` (data, language) -> label: MemoryBank unless given."""
    rows = []
    by = {
        (r["data"], r["language"], r["window"], r.get("wording", "question"), r["method"]): r
        for r in results["answers"]
        if r["split"] == "heldout"
    }
    memorybank = {k: v for k, v in DATA_LABELS.items() if k[0] == "memorybank"}
    for (data, language), label in (sources or memorybank).items():
        for w in results["windows"]:
            for wording in ("question", "request", "statement"):
                ours, base = (
                    by.get((data, language, w, wording, "llm_summary+recall")),
                    by.get((data, language, w, wording, "pair-doc")),
                )
                if ours is None or base is None:
                    continue
                chat = ours.get("replay_share_with_block")
                rows.append(
                    [
                        label if sources is None else f"{label} ({ours['questions']} questions)",
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
        out.append(_wording_table(worded, "chat turns with a block"))
    out += _woz_section(results)
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
                f"{signed_ms(r['recall_adds_median_ms'])} ms median"
                + (
                    f" ({r['recall_adds_spread_ms'][0]:,.1f} to {r['recall_adds_spread_ms'][1]:,.1f})"
                    if "recall_adds_spread_ms" in r
                    else ""
                )
                + f" ({signed_ms(r['recall_adds_p95_ms'])} ms p95) at "
                f"{n(r['history_messages'])} messages of history, first call {signed_ms(r['recall_first_call_ms'])} ms "
                "(the index built; one sample)"
                for r in over
            )
            + ".\n"
        )
    return "\n".join(out)


def signed_ms(value: float) -> str:
    """A difference of two timings, with its sign, in one format whatever its size: "+3.1", "-95.5", "+2,540.0"
    (a first call can cost less with recall than without: the two runs' noise is larger than the index's build)."""
    return f"{value:+,.1f}"


def _woz_section(results: dict[str, Any]) -> list[str]:
    """The rows of the second sources (``benchmarks/woz.py``; held-out sessions never tuned on), when the run had
    their data."""
    worded = _worded(results, WOZ_LABELS)
    if not worded:
        return []
    dev = {
        (r["data"], r["window"]): r
        for r in results["answers"]
        if r["split"] == "dev" and r["method"] == "llm_summary+recall" and r.get("wording") == "question"
    }
    return [
        "Two sources whose held-out sessions nothing was tuned on (`benchmarks/woz.py`): task dialogues strung "
        "into multi-day sessions, one "
        "traveller each: MultiWOZ 2.1 (English, MIT; 36 dialogues, 3 a day) and CrossWOZ (Chinese, Apache-2.0; 20 "
        "dialogues, 2 a day), about 11,500 tokens of history per session. The questions are written mechanically "
        "from the sources' dialogue acts: a value the assistant gave on an earlier day that identifies one thing "
        "(a phone number, address, postcode, booking reference, taxi; 电话, 地址, 营业时间), found in that turn "
        "and in no other dialogue of the session. Dev sessions are cut from the sources' validation split, "
        "held-out ones from their test split (the cut is not committed: `benchmarks/README.md` says how to make "
        "it). Held out, `llm_summary` + `recall` against pair-doc at the same "
        "tokens per question, each question asked three ways, and the share of the replay's user turns that got "
        "a recall block:\n",
        _wording_table(worded, "turns with a block"),
        "Dev sessions, `llm_summary` + `recall` as written: "
        + "; ".join(
            f"{label} "
            + " / ".join(
                f"{pct(dev[(d, w)]['answer_in_context'], 0)} at {window(w)}"
                for w in results["windows"]
                if (d, w) in dev
            )
            for (d, _), label in WOZ_LABELS.items()
        )
        + ".\n",
    ]


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


def _wording_table(worded: list[list[str]], blocks: str) -> str:
    """ctxlife against pair-doc per wording (rows of :func:`_worded`), ``blocks`` naming the last column."""
    header = ["data", "window", "wording", "`llm_summary` + `recall`", "pair-doc", "lead (points)", blocks]
    return table(header, worded, "lllrrrr")
