"""Render ``benchmarks/results/latest.json`` into ``docs/benchmarks.md`` and the charts in
``docs/benchmarks/`` (PNG). Every number in the page comes from the JSON."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "benchmarks.md"
CHARTS = REPO / "docs" / "benchmarks"

MAIN_METHODS = [
    "unmanaged",
    "ctxlife truncate_last_n",
    "ctxlife llm_summary",
    "trim_messages",
    "trim_messages start_on=human",
    "SummarizationMiddleware",
]
CREW_MODES = ["CrewAI unmanaged", "CrewAI respect_context_window", "CrewAI defaults", "CrewAI + ctxlife llm_summary"]
COLORS = {
    "unmanaged": "#888888",
    "ctxlife truncate_last_n": "#1f77b4",
    "ctxlife llm_summary": "#0b3d91",
    "trim_messages": "#d62728",
    "trim_messages start_on=human": "#ff9896",
    "SummarizationMiddleware": "#ff7f0e",
    "CrewAI unmanaged": "#bbbbbb",
    "CrewAI respect_context_window": "#2ca02c",
    "CrewAI defaults": "#98df8a",
    "CrewAI + ctxlife llm_summary": "#17becf",
}


# -- formatting helpers -------------------------------------------------------------------


def _n(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{value:,}"


def _pct(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{100 * value:.{digits}f}%"


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _x(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 10:
        return f"{value:,.0f}×"
    return f"{value:.2g}×" if value < 1 else f"{value:.1f}×"


def _table(header: list[str], rows: list[list[str]], align: list[str] | None = None) -> str:
    align = align or ["l"] + ["r"] * (len(header) - 1)
    marks = {"l": ":--", "r": "--:", "c": ":-:"}
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# -- derived figures ----------------------------------------------------------------------


def overhead_row(result: dict[str, Any], method: str, messages_near: int) -> dict[str, Any] | None:
    rows = [r for r in result["overhead"]["rows"] if r["method"] == method]
    return min(rows, key=lambda r: abs(r["messages"] - messages_near)) if rows else None


def _med(row: dict[str, Any] | None, key: str) -> float | None:
    if row is None or key not in row:
        return None
    return row[key]["median_ms"]


def headline(result: dict[str, Any]) -> dict[str, Any]:
    h: dict[str, Any] = {}
    at = 1_000
    trunc = overhead_row(result, "ctxlife truncate_last_n", at)
    noact = overhead_row(result, "ctxlife, no action needed", at)
    summ = overhead_row(result, "ctxlife llm_summary", at)
    trim = overhead_row(result, "trim_messages (tiktoken counter)", at)
    memo = overhead_row(result, "trim_messages (memoized counter)", at)
    h["overhead_messages"] = trunc["messages"] if trunc else at
    h["ctxlife_full_ms"] = _med(trunc, "steady full history")
    h["ctxlife_in_place_ms"] = _med(trunc, "steady in place")
    h["ctxlife_no_action_ms"] = _med(noact, "steady in place")
    h["ctxlife_llm_summary_in_place_ms"] = _med(summ, "steady in place")
    h["trim_ms"] = _med(trim, "steady full history")
    h["trim_memo_ms"] = _med(memo, "steady full history")
    if h["ctxlife_full_ms"] and h["trim_ms"]:
        h["ratio_trim_over_ctxlife"] = h["trim_ms"] / h["ctxlife_full_ms"]
    if h["ctxlife_full_ms"] and h["trim_memo_ms"]:
        h["ratio_trim_memo_over_ctxlife"] = h["trim_memo_ms"] / h["ctxlife_full_ms"]
    if h["ctxlife_in_place_ms"] and h["trim_ms"]:
        h["ratio_trim_over_ctxlife_in_place"] = h["trim_ms"] / h["ctxlife_in_place_ms"]
    return h


# -- charts -------------------------------------------------------------------------------


def charts(result: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written = []

    # 1. overhead vs history length
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharey=True)
    rows = result["overhead"]["rows"]
    methods = list(dict.fromkeys(r["method"] for r in rows))
    for ax, title, keys in [
        (axes[0], "first call (fresh manager)", ["first"]),
        (axes[1], "steady state (one new message per call)", ["steady full history", "steady in place"]),
    ]:
        for method in methods:
            for key in keys:
                pts = [(r["messages"], r[key]["median_ms"]) for r in rows if r["method"] == method and key in r]
                if not pts:
                    continue
                style = "--" if key == "steady in place" else "-"
                marker = (
                    "s" if key == "steady in place" else ("^" if "trim" in method or "Middleware" in method else "o")
                )
                label = method if key == "first" else f"{method} ({key.removeprefix('steady ')})"
                ax.plot(*zip(*pts), style, marker=marker, ms=4, label=label, color=_color(method))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("history length (messages)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.25)
    axes[0].set_ylabel("time per call (ms, median, log scale)")
    axes[1].legend(fontsize=7, loc="upper left")
    fig.suptitle("Per-call overhead vs history length (same histories, same tokenizer)")
    fig.tight_layout()
    written.append(_save(fig, out / "overhead.png"))

    # 2. context tokens per call, one long session
    series = result["series"]["tokens_per_call"]
    window = result["series"]["window"]
    fig, ax = plt.subplots(figsize=(12, 5))
    for method in MAIN_METHODS + CREW_MODES:
        if series.get(method):
            ax.plot(
                range(1, len(series[method]) + 1),
                series[method],
                label=method,
                color=_color(method),
                lw=1.6 if "ctxlife" in method else 1.1,
                ls="--" if method.startswith("CrewAI") else "-",
            )
    ax.axhline(window, color="black", lw=0.8, ls=":", label=f"window ({window:,})")
    ax.axhline(0.4 * window, color="black", lw=0.8, ls="-.", label=f"threshold 0.4 ({int(0.4 * window):,})")
    ax.set_yscale("log")
    ax.set_xlabel("model call")
    ax.set_ylabel("context tokens sent (log scale)")
    ax.set_title(f"Context per call, {result['series']['session']}, window {window:,} tokens")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    fig.tight_layout()
    written.append(_save(fig, out / "context_per_call.png"))

    # 3. scaling
    scaling = result["scaling"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    for label, pts in scaling["per_call"]["series"].items():
        xs, ys = zip(*pts)
        fit = scaling["per_call"]["fits"][label]["exponent"]
        dense = len(pts) > 60
        axes[0].plot(
            xs,
            ys,
            "." if dense else "-o",
            ms=2 if dense else 4,
            alpha=0.6 if dense else 1,
            label=f"{label} (slope {fit})",
            color=_color(label),
        )
    axes[0].set_xscale("log")
    axes[0].set_yscale("log")
    axes[0].set_xlabel("call index in the session")
    axes[0].set_ylabel("time of this call (ms, log scale)")
    axes[0].set_title(f"Per-call time as the session grows (window {scaling['per_call']['window']:,})")
    axes[0].grid(True, which="both", alpha=0.25)
    axes[0].legend(fontsize=7)
    for label, curve in scaling["total_tokens"]["curves"].items():
        xs, ys = zip(*curve)
        fit = scaling["total_tokens"]["fits"][label]["exponent"]
        axes[1].plot(xs, ys, "-o", ms=3, label=f"{label} (exponent {fit})", color=_color(label))
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("number of model calls")
    axes[1].set_ylabel("total prompt tokens over the session (log)")
    axes[1].set_title(f"Total cost vs session length (window {scaling['total_tokens']['window']:,})")
    axes[1].grid(True, which="both", alpha=0.25)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    written.append(_save(fig, out / "scaling.png"))

    # 4. tau-bench: tokens, retention, validity per window
    tau = result["token_cost"].get("tau-bench")
    if tau:
        windows = sorted(tau, key=int)
        fig, axes = plt.subplots(1, 4, figsize=(16, 4.6))
        width = 0.8 / len(MAIN_METHODS)
        panels = [
            ("prompt tokens vs unmanaged", lambda t: t["tokens_vs_unmanaged"]),
            ("facts still in context when used again", lambda t: t["fact_retention"] or 0),
            ("share of calls with an invalid sequence", lambda t: t["invalid_calls"] / t["calls"]),
            ("share of calls missing the latest user turn", lambda t: t["latest_user_missing"] / t["calls"]),
        ]
        for i, method in enumerate(MAIN_METHODS):
            xs = [j + (i - len(MAIN_METHODS) / 2 + 0.5) * width for j in range(len(windows))]
            for ax, (_, value) in zip(axes, panels):
                ax.bar(xs, [value(tau[w][method]) for w in windows], width, label=method, color=_color(method))
        for ax, (title, _) in zip(axes, panels):
            ax.set_xticks(range(len(windows)))
            ax.set_xticklabels([f"{int(w) // 1000}k" for w in windows])
            ax.set_xlabel("context window")
            ax.set_title(title, fontsize=10)
            ax.grid(True, axis="y", alpha=0.25)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=len(MAIN_METHODS), fontsize=8)
        fig.suptitle(
            "tau-bench airline, 200 real GPT-4o trajectories, replayed call by call (same window and threshold for every method)"
        )
        fig.tight_layout(rect=(0, 0.08, 1, 1))
        written.append(_save(fig, out / "tau_bench.png"))

    # 5. stores
    stores = {k: v for k, v in result["stores"]["stores"].items() if "skipped" not in v}
    if stores:
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
        names = list(stores)
        ys = range(len(names))
        axes[0].barh(
            [y + 0.2 for y in ys],
            [stores[n]["append_single_msgs_per_s"] for n in names],
            0.4,
            color="#1f77b4",
            label="one message per call",
        )
        axes[0].barh(
            [y - 0.2 for y in ys],
            [stores[n]["append_batch_msgs_per_s"] for n in names],
            0.4,
            color="#aec7e8",
            label=f"batches of {result['stores']['batch_size']}",
        )
        axes[0].set_yticks(list(ys))
        axes[0].set_yticklabels(names)
        axes[0].set_xscale("log")
        axes[0].set_xlabel("append throughput (messages/s, log)")
        axes[0].legend(fontsize=7)
        axes[1].barh(names, [stores[n]["restore_ms"] for n in names], color="#2ca02c")
        axes[1].set_xlabel(f"restore latency, {result['stores']['messages']:,} messages (ms, median)")
        for ax in axes:
            ax.grid(True, axis="x", alpha=0.25)
        fig.suptitle("Session stores")
        fig.tight_layout()
        written.append(_save(fig, out / "stores.png"))
    return written


def _color(label: str) -> str | None:
    if "memoized counter" in label:
        return "#e377c2"
    if "tiktoken counter" in label:
        return "#d62728"
    for key in sorted(COLORS, key=len, reverse=True):
        if label.startswith(key):
            return COLORS[key]
    if label.startswith("ctxlife, no action"):
        return "#9467bd"
    if "tiktoken counter" in label:
        return "#d62728"
    if "memoized" in label:
        return "#e377c2"
    return None


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# -- the page -----------------------------------------------------------------------------


def page(result: dict[str, Any], quick: bool = False) -> str:
    m = result["machine"]
    v = m["versions"]
    inp = result["inputs"]
    h = headline(result)
    tau = result["token_cost"].get("tau-bench", {})
    syn = result["token_cost"].get("synthetic", {})
    crew = result["crewai"]["results"]
    windows = [str(w) for w in inp["windows"]]
    out: list[str] = []
    add = out.append

    add("# Benchmarks: ctxlife side by side with its peers\n")
    add(
        "_Generated by `make bench` (`benchmarks/bench.py`) from `benchmarks/results/latest.json`; "
        f"run of {result['generated']}, {result['duration_seconds']:.0f} s wall time. Do not edit by hand._\n"
    )
    if quick:
        add("> **Quick run** (`--quick`): fewer trajectories and lengths. Not the published figures.\n")
    add(
        "Every figure below comes from one run on the machine described next. Times are medians "
        "of repeated measurements in one process on that machine, and they move with the machine and its load; "
        "the claims are the **ratios** between methods measured side by side in the same run. "
        "Token counts, fact retention and validity do not depend on the machine.\n"
    )

    # headline
    add("## Headline\n")
    lines = []
    if h.get("ratio_trim_over_ctxlife"):
        memo = h.get("ratio_trim_memo_over_ctxlife")
        memo_text = (
            (
                f"{_x(memo)} of ctxlife's time"
                if memo and memo >= 1
                else f"ctxlife takes {_x(1 / memo)} the time of `trim_messages`"
            )
            if memo
            else "–"
        )
        lines.append(
            f"- **Overhead per call at {h['overhead_messages']:,} messages, steady state (one new message per call):** ctxlife `truncate_last_n` "
            f"handed the full history, like `trim_messages`: {_ms(h['ctxlife_full_ms'])} ms; `trim_messages` with a tiktoken counter: "
            f"{_ms(h['trim_ms'])} ms, **{_x(h['ratio_trim_over_ctxlife'])} ctxlife's time**. Against `trim_messages` with a counter memoized per "
            f"message (custom code, {_ms(h['trim_memo_ms'])} ms), {memo_text}. Editing the live list in place, as `manage()` and `wrap()` do, "
            f"ctxlife works on the managed context only: {_ms(h['ctxlife_in_place_ms'])} ms "
            f"({_x(h.get('ratio_trim_over_ctxlife_in_place'))} less than `trim_messages` with a tiktoken counter)."
        )
    for suite_name, suite in (("tau-bench", tau), ("synthetic session", syn)):
        if not suite:
            continue
        parts = []
        for w in windows:
            if w in suite:
                parts.append(
                    f"{int(w) // 1000}k: {_pct(suite[w]['ctxlife llm_summary']['tokens_vs_unmanaged'], 0)} `llm_summary`, "
                    f"{_pct(suite[w]['ctxlife truncate_last_n']['tokens_vs_unmanaged'], 0)} `truncate_last_n` "
                    f"(`trim_messages` {_pct(suite[w]['trim_messages']['tokens_vs_unmanaged'], 0)}, "
                    f"`SummarizationMiddleware` {_pct(suite[w]['SummarizationMiddleware']['tokens_vs_unmanaged'], 0)})"
                )
        lines.append(f"- **Prompt tokens vs unmanaged, {suite_name}:** " + "; ".join(parts) + ".")
    if tau:
        parts = []
        for w in windows:
            if w in tau and tau[w]["ctxlife llm_summary"]["compactions"]:
                parts.append(
                    f"{int(w) // 1000}k: `llm_summary` {_pct(tau[w]['ctxlife llm_summary']['fact_retention'])} vs `trim_messages` "
                    f"{_pct(tau[w]['trim_messages']['fact_retention'])} ({_pct(tau[w]['trim_messages start_on=human']['fact_retention'])} with "
                    f'`start_on="human"`); `SummarizationMiddleware` {_pct(tau[w]["SummarizationMiddleware"]["fact_retention"])}, '
                    f"`truncate_last_n` {_pct(tau[w]['ctxlife truncate_last_n']['fact_retention'])}"
                )
        lines.append(
            "- **Fact retention at equal budget, tau-bench** (facts from user turns and tool results still in the context when the agent uses them again; "
            "windows where compaction happens): " + "; ".join(parts) + "."
        )
    validity = _validity_totals(result)
    lines.append(
        f"- **Provider-invalid sequences sent** (all {sum(1 for _ in _all_rows(result))} suite × window replays): "
        + ", ".join(f"{name} {t['invalid_calls']:,}" for name, t in validity.items())
        + ". **Calls missing the latest user turn:** "
        + ", ".join(f"{name} {t['latest_user_missing']:,}" for name, t in validity.items())
        + " (of "
        + f"{next(iter(validity.values()))['calls']:,} calls each)."
    )
    crew_v = _crew_validity(result)
    if crew_v:
        lines.append(
            "- **Under CrewAI** (real crews, same recordings): "
            + ", ".join(
                f"{name}: {t['invalid_calls']:,} invalid, {t['latest_user_missing']:,} without the task turn, {t['over_window']:,} over the window"
                for name, t in crew_v.items()
            )
            + "."
        )
    sc = result["scaling"]
    tf = sc["total_tokens"]["fits"]
    pf = sc["per_call"]["fits"]
    lines.append(
        f"- **Scaling** (synthetic session, {sc['total_tokens']['calls']:,} calls, window {sc['total_tokens']['window']:,}): total prompt tokens grow as "
        + ", ".join(f"n^{tf[k]['exponent']} ({k})" for k in tf)
        + "; per-call time of ctxlife `llm_summary` in place grows as n^"
        + str(pf.get("ctxlife llm_summary (in place)", {}).get("exponent"))
        + " (flat), `trim_messages` with a tiktoken counter as n^"
        + str(pf.get("trim_messages (tiktoken counter)", {}).get("exponent"))
        + "."
    )
    st = result["stores"]["stores"]
    if all(k in st and "skipped" not in st[k] for k in ("file", "sqlite", "redis")):
        lines.append(
            f"- **Session stores at {result['stores']['messages']:,} messages:** appends one per call "
            + ", ".join(f"{k} {_n(st[k]['append_single_msgs_per_s'])}/s" for k in ("file", "sqlite", "redis"))
            + "; restore "
            + ", ".join(f"{k} {_ms(st[k]['restore_ms'])} ms" for k in ("file", "sqlite", "redis"))
            + " (durable defaults; see section 6)."
        )
    add("\n".join(lines) + "\n")
    add(findings(result))

    # machine
    add("## Machine and versions\n")
    add(
        _table(
            ["", ""],
            [
                ["CPU", m["cpu"]],
                ["cores", f"{m['cores']} ({m['usable_cores']} usable)"],
                ["memory", f"{m['memory_gb']} GB"],
                ["OS", m["os"]],
                ["Python", m["python"]],
                [
                    "load average (1/5/15 min) at start → after the timing sections",
                    f"{m['load_average_at_start']} → {m.get('load_average_after_timing')}",
                ],
            ]
            + [[name, str(ver)] for name, ver in v.items()],
            ["l", "l"],
        )
        + "\n"
    )
    add(
        f"The timing sections (1, 5 and 6) ran first, alone in one process; the replays (2–4) then ran in a pool of worker processes "
        f"({result.get('job_cpu_seconds', 0):.0f} s of worker time in all). Other work on the machine, if any, shows in the load average.\n"
    )

    # method and inputs
    add("## Method and inputs\n")
    tb = inp.get("tau_bench")
    if tb:
        add(
            f"- **tau-bench airline** (`{tb['path']}`, {tb['license']}): {tb['trajectories']} real GPT-4o customer-service trajectories, "
            f"{tb['messages']:,} messages, {tb['calls']:,} model calls; OpenAI-format tool calls and results; the system prompt alone is "
            f"{tb['system_prompt_tokens']:,} tokens, the longest trajectory {tb['max_conversation_tokens']:,} tokens."
        )
    s = inp["synthetic"]
    add(
        f"- **Long synthetic session** (`{s['generator']}`): {s['calls']} model calls, {s['messages']:,} messages, native tool calls with JSON results "
        f"carrying order codes, amounts, dates, emails and paths; {s['final_tokens']:,} tokens at the end."
    )
    add(
        f"- **Tokenizer:** `{inp['tokenizer']}` (tiktoken, offline) for every method and for the meter; OpenAI chat accounting (3 tokens a message, 3 a tool call, 3 of reply priming)."
    )
    add(
        f"- **Replay:** every assistant message of a recording is a model call; each method is handed the messages recorded since its previous call "
        f"and returns the context it would send. Windows {', '.join(f'{int(w):,}' for w in windows)} tokens; the same trigger for everyone: "
        f"{inp['threshold']} × window."
    )
    add("\nThe methods, all at the same window and threshold:\n")
    add(
        _table(
            ["method", "configuration"],
            [
                ["unmanaged", "everything, every call (the cost ceiling)"],
                [
                    "ctxlife truncate_last_n",
                    "`rounds = 2`, `only_above_threshold = true`; a `ctxlife.Host` editing the live list in place (what `manage()` does)",
                ],
                [
                    "ctxlife llm_summary",
                    f'`summarizer = "extractive"` (offline), `target = {inp["target"]}`, `max_summary_tokens = {inp["summary_tokens"]}`, other options default',
                ],
                [
                    "trim_messages",
                    '`langchain_core.messages.trim_messages(history, max_tokens=0.4 × window, strategy="last", include_system=True)`, other options default, on the whole history every call; tiktoken counter with the same encoding and accounting',
                ],
                [
                    "trim_messages start_on=human",
                    'the same with `start_on="human"` (LangChain\'s advice for valid histories)',
                ],
                [
                    "SummarizationMiddleware",
                    (
                        "LangChain v1 `SummarizationMiddleware.before_model`, run offline on the agent state (system prompt outside the state, as "
                        '`create_agent` keeps it; the state rewritten after a summary, as the graph does). `trigger=("tokens", 0.4 × window − system)`, '
                        '`keep=("tokens", 0.25 × window − system − 600)`, model: `GenericFakeChatModel` (scripted, never called); summaries by '
                        "ctxlife's extractive summarizer through its documented `summarizer=` parameter, "
                        f"{inp['summary_tokens']} tokens, so the comparison isolates the policy from the summarizer"
                    ),
                ],
                [
                    "CrewAI …",
                    "a real crew (crewai "
                    + str(v.get("crewai"))
                    + ") on ctxlife's scripted offline LLM replaying the recording in native tool-calling mode (see section 2b)",
                ],
            ],
            ["l", "l"],
        )
        + "\n"
    )
    add(
        "Per call, one meter measures the context each method would send: tokens (`ctxlife.TokenCounter`); "
        "whether it is over the window; whether it is the previous context plus new messages (otherwise the prompt prefix changed and a provider's prompt cache starts over: a *rewrite*); "
        "validity (`ctxlife.messages.validate`: orphaned tool results, tool calls without results, system messages after the conversation started); "
        "whether the latest user turn of the recording is still in it; and fact retention (section 3).\n"
    )
    cc = result.get("cross_check")
    if cc:
        add(
            "Cross-check: on the first 10 trajectories, the ctxlife rows equal what `ctxlife.replay.replay` (the `ctxlife replay` command) computes: "
            + ", ".join(f"{k} {'equal' if c['equal'] else 'DIFFERENT'} ({c['bench']:,} tokens)" for k, c in cc.items())
            + ".\n"
        )

    # 1 overhead
    add("## 1. Overhead per model call vs history length\n")
    add(
        f"Histories: prefixes of one long synthetic session cut right before a model call; window {result['overhead']['window']:,} tokens "
        f"(threshold {int(result['overhead']['threshold'] * result['overhead']['window']):,}), so the two shortest histories need no action and the two longest do. "
        "*First call*: a fresh manager sees the whole history. *Steady state*: one new message per call, with the history kept at its length; "
        "*full history* = the manager gets the whole history every call (how `trim_messages` is documented, and a valid way to call `ctxlife.manage()`: the like-for-like comparison); "
        "*in place* = the loop keeps the list the manager edited (`manage()`/`wrap()`; the middleware rewrites the state). "
        "ctxlife is timed through `Host.manage()`, which is what `ctxlife.manage()` runs once it has found its cached host. "
        "Median milliseconds per call on this machine (repetitions in brackets).\n"
    )
    rows = result["overhead"]["rows"]
    lengths = sorted({r["messages"] for r in rows})
    header = ["method", "mode"] + [f"{n:,} msgs" for n in lengths]
    trs = []
    for method in dict.fromkeys(r["method"] for r in rows):
        by_len = {r["messages"]: r for r in rows if r["method"] == method}
        for key in ["first", "steady full history", "steady in place"]:
            if not any(key in r for r in by_len.values()):
                continue
            cells = []
            for n in lengths:
                r = by_len.get(n)
                if r is None:
                    cells.append("–")
                elif "skipped" in r:
                    cells.append("not run¹")
                elif key in r:
                    cells.append(f"{_ms(r[key]['median_ms'])} ({r[key]['reps']})")
                else:
                    cells.append("–")
            trs.append([method, key.replace("steady ", "steady, "), *cells])
    add(_table(header, trs, ["l", "l"] + ["r"] * len(lengths)) + "\n")
    add(
        "Tokens in those histories: "
        + ", ".join(f"{r['messages']:,} messages = {r['tokens']:,}" for r in rows if r["method"] == rows[0]["method"])
        + ".\n"
    )
    add("Ratios (`trim_messages` steady state ÷ ctxlife steady state, same history length):\n")
    ratio_rows = []
    for n in lengths:
        trim = _med(
            next((r for r in rows if r["method"] == "trim_messages (tiktoken counter)" and r["messages"] == n), None),
            "steady full history",
        )
        memo = _med(
            next((r for r in rows if r["method"] == "trim_messages (memoized counter)" and r["messages"] == n), None),
            "steady full history",
        )
        full = _med(
            next((r for r in rows if r["method"] == "ctxlife truncate_last_n" and r["messages"] == n), None),
            "steady full history",
        )
        place = _med(
            next((r for r in rows if r["method"] == "ctxlife truncate_last_n" and r["messages"] == n), None),
            "steady in place",
        )
        noact = _med(
            next((r for r in rows if r["method"] == "ctxlife, no action needed" and r["messages"] == n), None),
            "steady in place",
        )
        ratio_rows.append(
            [
                f"{n:,}",
                _x(trim / full) if trim and full else "–",
                _x(memo / full) if memo and full else "–",
                _x(trim / place) if trim and place else "–",
                _x(trim / noact) if trim and noact else "–",
            ]
        )
    add(
        _table(
            [
                "messages",
                "trim (tiktoken) ÷ ctxlife truncate, full history",
                "trim (memoized) ÷ ctxlife truncate, full history",
                "trim (tiktoken) ÷ ctxlife truncate, in place",
                "trim (tiktoken) ÷ ctxlife no action",
            ],
            ratio_rows,
        )
        + "\n"
    )
    for r in rows:
        if "skipped" in r:
            add(f"¹ {r['method']} at {r['messages']:,} messages, not run: {r['skipped']}.\n")
            break
    sg = result.get("summarizer_growth", {}).get("rows")
    if sg:
        fit = _fit([(r["messages"], r["ms"]) for r in sg])
        add(
            "Summarizer time vs span (one extractive summary of the first *n* messages, facts included; this is what a first compaction "
            "of a long history costs, and what dominates `llm_summary`'s first call at 1,000 messages): "
            + ", ".join(f"{r['messages']} messages ({r['tokens']:,} tokens) {r['ms']:,.0f} ms" for r in sg)
            + f"; fitted exponent {fit}.\n"
        )
    add("![Per-call overhead vs history length](benchmarks/overhead.png)\n")
    add(
        "Why: ctxlife counts tokens incrementally (a message already seen costs a dict lookup) and its strategies cut by index, so a call over a "
        "history it has seen costs a pass over the list, not a re-tokenization. `trim_messages` re-runs its counter on every call, over the whole "
        "history and again inside its search for the cut. Given a counter memoized per message object (custom code, not what LangChain ships), "
        "`trim_messages` makes about two cheap passes per call and is as fast as ctxlife's full-history mode or faster, which makes several "
        "(see Findings). In place, ctxlife works on the already-managed context, which stays small.\n"
    )

    # 2 token cost
    add("## 2. Token cost\n")
    add(
        "Total prompt tokens over all calls, the largest context sent (peak), calls whose context is over the window (the provider would reject them), "
        "compactions the method itself performed (a summary or a cut written into its state; for `trim_messages`, calls where it dropped messages), "
        "and rewrites (calls whose context is not the previous one plus new messages: the prompt cache starts over).\n"
    )
    for suite_name, suite in (
        ("tau-bench (200 trajectories)", tau),
        (f"synthetic session ({inp['synthetic']['calls']} calls)", syn),
    ):
        if not suite:
            continue
        add(f"### 2a. {suite_name}\n")
        for w in windows:
            if w not in suite:
                continue
            add(f"**Window {int(w):,} tokens** (threshold {int(0.4 * int(w)):,}):\n")
            add(
                _table(
                    [
                        "method",
                        "calls",
                        "prompt tokens",
                        "vs unmanaged",
                        "peak",
                        "over window",
                        "compactions",
                        "rewrites",
                    ],
                    [
                        [
                            name,
                            _n(t["calls"]),
                            _n(t["prompt_tokens"]),
                            _pct(t.get("tokens_vs_unmanaged")),
                            _n(t["peak"]),
                            _n(t["over_window"]),
                            _n(t["compactions"]),
                            _n(t["rewrites"]),
                        ]
                        for name, t in _ordered(suite[w], MAIN_METHODS)
                    ],
                )
                + "\n"
            )
    add("![Context tokens per call](benchmarks/context_per_call.png)\n")

    # 2b crew
    add("### 2b. CrewAI's own handling, through real crews\n")
    add(
        "Each recording runs as one CrewAI task: the system prompt becomes the agent's backstory and the first user turn the task; each recorded tool-calling "
        "assistant message becomes a scripted reply with the same tool calls, answered by replay tools returning the recorded results; an assistant message "
        "answered by a user turn becomes an `ask_user` tool call returning that turn (CrewAI has no mid-task user turns); the last assistant message is the final "
        "answer. So the crew's k-th model call is the recording's k-th call, and ctxlife's scripted LLM records exactly what each call received. CrewAI's "
        "prompt wording differs from the recording, so CrewAI rows compare with **CrewAI unmanaged**, not with the rows above. Modes:\n"
    )
    add(
        "- **CrewAI unmanaged:** `respect_context_window=False`, `use_better_compaction=False`.\n"
        "- **CrewAI respect_context_window:** CrewAI 1.15's summarization: before a call whose estimate (4 characters a token, message text only) passes the usable "
        "window, it replaces every non-system message with one user message holding a summary written by the agent's LLM. `crewai.LLM` uses 0.85 × the model's "
        "window; the scripted LLM gets 0.85 × window. The scripted LLM answers summary requests with ctxlife's extractive summary of the text CrewAI sends, within "
        f"{inp['summary_tokens']} tokens; those summary calls are real model calls in production, counted separately.\n"
        "- **CrewAI defaults:** the above plus `use_better_compaction=True` (CrewAI's default since 1.15: a tool result over 25% of the usable window is stored "
        "as a temporary file and the model gets a pointer with a preview and a reader tool; the scripted agent never calls the reader).\n"
        "- **CrewAI + ctxlife llm_summary:** CrewAI defaults, wrapped with `ctxlife.wrap(crew, …)` (`llm_summary`, extractive, threshold 0.4 of the same window).\n"
    )
    skips = result["crewai"].get("skips", {})
    for suite_key, label in (
        ("tau-bench", "tau-bench (200 trajectories)"),
        ("synthetic", f"synthetic session ({inp['synthetic']['calls']} calls)"),
    ):
        by_window = crew.get(suite_key)
        if not by_window:
            continue
        add(f"**{label}:**\n")
        rows_ = []
        for w in windows:
            for name, t in _ordered(by_window.get(w, {}), CREW_MODES):
                rows_.append(
                    [
                        f"{int(w) // 1000}k",
                        name,
                        _n(t["calls"]),
                        _n(t["prompt_tokens"]),
                        _pct(t.get("tokens_vs_unmanaged")),
                        _n(t["peak"]),
                        _n(t["over_window"]),
                        _n(t["summary_calls"]),
                        _n(t["summary_prompt_tokens"]),
                        _n(t["invalid_calls"]),
                        _n(t["latest_user_missing"]),
                        _pct(t.get("fact_retention")),
                    ]
                )
        add(
            _table(
                [
                    "window",
                    "mode",
                    "calls",
                    "prompt tokens",
                    "vs CrewAI unmanaged",
                    "peak",
                    "over window",
                    "summary calls",
                    "summary prompt tokens",
                    "invalid",
                    "task turn missing",
                    "fact retention",
                ],
                rows_,
                ["l", "l"] + ["r"] * 10,
            )
            + "\n"
        )
        sk = skips.get(suite_key, {})
        if sk.get("skipped"):
            add(
                "Runs where no trigger can fire (checked on the conversation's unmanaged crew run: CrewAI's estimate under the usable window, no tool result over "
                "its deferral threshold, no context over ctxlife's threshold) reuse the unmanaged measurement: "
                + ", ".join(f"{k} {n}" for k, n in sorted(sk["skipped"].items()))
                + ". Two of each were run anyway and matched: "
                + (
                    "yes"
                    if all(sk.get("verified", {}).values())
                    else "NO: " + ", ".join(k for k, ok in sk["verified"].items() if not ok)
                )
                + ".\n"
            )
    add(
        "'Task turn missing' counts calls where the task's user message is no longer in the context (after CrewAI's summary it is folded into the summary); "
        "user turns after the first arrive as `ask_user` results in this encoding.\n"
    )

    # 3 fact retention
    add("## 3. Fact retention\n")
    add(
        "For each recording: the facts (`ctxlife.facts.extract_facts`: ids, codes, amounts, dates, times, emails, paths, numbers with units) that first appear "
        "in a user turn or a tool result (and not in the system prompt), and that the agent uses again later: they appear in a later assistant message or its "
        "tool-call arguments. For every such use, is the fact still in the context the method sent to that call? Equal budget: the same window and trigger for "
        "every method.\n"
    )
    rows_ = []
    for suite_name, suite in (("tau-bench", tau), ("synthetic", syn)):
        for w in windows:
            if w not in suite:
                continue
            rows_.append(
                [suite_name, f"{int(w) // 1000}k", _n(suite[w]["unmanaged"]["fact_uses"])]
                + [_pct(suite[w][mth]["fact_retention"]) for mth in MAIN_METHODS[1:]]
            )
    add(_table(["suite", "window", "fact uses", *MAIN_METHODS[1:]], rows_) + "\n")
    if syn:
        add(
            "The synthetic session re-uses facts within the same turn (an order id right after the user gives it), so every method that keeps the latest turn keeps them; "
            "tau-bench, where agents re-use ids and amounts from much earlier tool results, is the discriminating test.\n"
        )

    # 4 validity
    add("## 4. Validity\n")
    add(
        "Calls that would send a provider-invalid sequence, and calls whose context no longer holds the latest user turn (the request the agent is answering). "
        "Counts over all calls of a suite.\n"
    )
    rows_ = []
    for suite_name, suite in (("tau-bench", tau), ("synthetic", syn)):
        for w in windows:
            if w not in suite:
                continue
            for name, t in _ordered(suite[w], MAIN_METHODS):
                rows_.append(
                    [
                        suite_name,
                        f"{int(w) // 1000}k",
                        name,
                        _n(t["calls"]),
                        _n(t["invalid_calls"]),
                        _n(t["orphan_tool_results"]),
                        _n(t["calls_without_results"]),
                        _n(t["other_problems"]),
                        _n(t["latest_user_missing"]),
                    ]
                )
    add(
        _table(
            [
                "suite",
                "window",
                "method",
                "calls",
                "invalid calls",
                "with orphaned tool results",
                "with tool calls without results",
                "other",
                "latest user turn missing",
            ],
            rows_,
            ["l", "l", "l"] + ["r"] * 6,
        )
        + "\n"
    )
    add("Totals over every suite and window (CrewAI rows: section 2b):\n")
    add(
        _table(
            ["method", "calls", "invalid calls", "latest user turn missing"],
            [
                [name, _n(t["calls"]), _n(t["invalid_calls"]), _n(t["latest_user_missing"])]
                for name, t in validity.items()
            ],
        )
        + "\n"
    )

    # 5 scaling
    add("## 5. Scaling\n")
    pc = sc["per_call"]
    add(
        f"Per-call time at every call of one growing synthetic session ({pc['calls']:,} calls, window {pc['window']:,}, in place for ctxlife); "
        "`trim_messages` keeps no state, so it is timed at sampled call indices over the full history (the memoized counter warmed with everything before the call). "
        "Exponent: least-squares slope of log(time) against log(call index) from call 10 on (medians of log-spaced bins for the dense series).\n"
    )
    marks = [10, 100, 1000]
    add(
        _table(
            ["series", "slope (log-log)", *[f"ms at call ~{c:,}" for c in marks], "max ms (a compaction, if any)"],
            [
                [k, _n(f["exponent"]), *[_ms(_at(pc["series"][k], c)) for c in marks], _ms(f["max_ms"])]
                for k, f in pc["fits"].items()
            ],
        )
        + "\n"
    )
    tt = sc["total_tokens"]
    add(
        f"Total prompt tokens over a session vs its number of calls (one synthetic session of {tt['calls']:,} calls, window {tt['window']:,}; cumulative totals at "
        f"log-spaced call counts, exponent fitted from {tt['fit_from_calls']} calls on):\n"
    )
    add(
        _table(
            ["method", "exponent", f"total at {tt['calls']:,} calls", "vs unmanaged"],
            [
                [
                    k,
                    _n(f["exponent"]),
                    _n(f["total_at_end"]),
                    _pct(f["total_at_end"] / tf["unmanaged"]["total_at_end"]) if "unmanaged" in tf else "–",
                ]
                for k, f in tt["fits"].items()
            ],
        )
        + "\n"
    )
    add("![Scaling](benchmarks/scaling.png)\n")
    if tau:
        add("![tau-bench summary](benchmarks/tau_bench.png)\n")

    # 6 stores
    st = result["stores"]
    add("## 6. Session stores\n")
    add(
        f"`benchmarks/bench_stores.py`'s measurement, run by `make bench`: {st['messages']:,} messages ({st['payload_bytes'] / 1e6:.1f} MB of JSON, {st['source']}); "
        f"the first {st['single_appends']:,} appended one per call (as an agent does after every step), the rest in batches of {st['batch_size']}; restore = "
        f"load a snapshot holding every message + read the whole raw history, median of {st['repeat']}. Redis: a `redis-server` started by the script on "
        "127.0.0.1 (no persistence). `file` and `sqlite` are the durable defaults (fsync / `synchronous=FULL`); `file-nofsync` and `sqlite-normal` relax it.\n"
    )
    rows_ = []
    for name, r in st["stores"].items():
        if "skipped" in r:
            rows_.append([name, r["skipped"], "", "", "", ""])
            continue
        rows_.append(
            [
                name,
                _n(r["append_single_msgs_per_s"]),
                _n(r["append_batch_msgs_per_s"]),
                _ms(r["save_snapshot_ms"]),
                _ms(r["restore_ms"]),
                _ms(r["read_raw_last_50_ms"]),
            ]
        )
    add(
        _table(
            [
                "store",
                "append, 1 per call (msg/s)",
                f"append, ×{st['batch_size']} (msg/s)",
                "save snapshot (ms)",
                "restore (ms)",
                "read last 50 (ms)",
            ],
            rows_,
        )
        + "\n"
    )
    base = st["stores"].get("file")
    if base and "skipped" not in base:
        add(
            "Relative to `file`: "
            + "; ".join(
                f"{name} appends {_x(r['append_single_msgs_per_s'] / base['append_single_msgs_per_s'])} one by one, restores in {_x(r['restore_ms'] / base['restore_ms'])} the time"
                for name, r in st["stores"].items()
                if name != "file" and "skipped" not in r
            )
            + ".\n"
        )
    add("![Session stores](benchmarks/stores.png)\n")

    # notes
    add("## What did not run, and caveats\n")
    sg = result.get("summarizer_growth", {}).get("rows", [])
    for item in result.get("not_run", []):
        extra = ""
        if "10,000-message" in item["what"] and len(sg) >= 2:
            exponent = _fit([(r["messages"], r["ms"]) for r in sg])
            last = sg[-1]
            projected = last["ms"] * (10_000 / last["messages"]) ** exponent / 1000 if exponent else None
            if projected:
                extra = (
                    f" Extrapolating the measured growth (exponent {exponent}, {last['ms']:,.0f} ms at {last['messages']} messages) gives about "
                    f"{projected:,.0f} s for the ~9,800 messages it would evict."
                )
        add(f"- **{item['what']}:** {item['why']}.{extra}")
    add(
        "- **SummarizationMiddleware** does run offline: its `before_model` hook needs no graph and no runtime, `GenericFakeChatModel` stands in for the agent's "
        "model (only its profile is read), and the documented `summarizer=` parameter takes the summary text from a function. It was therefore run with ctxlife's "
        "extractive summarizer; with its default (the chat model and LangChain's summary prompt) the summary text would come from a real model, which this "
        "offline benchmark does not have. Note that by default it summarizes only the last 4,000 tokens of the evicted span (`trim_tokens_to_summarize`).\n"
        "- **LangChain's token counter** is the same encoding and per-message accounting as ctxlife's, but it re-serializes tool-call arguments from the parsed "
        "`AIMessage.tool_calls` (compact JSON), so its counts can differ from the recording's argument strings by a few tokens: `trim_messages` can land a few tokens "
        "over its budget as measured by the common meter.\n"
        "- **CrewAI** is measured on its own prompt (its system prompt and task wording), so compare CrewAI rows with CrewAI unmanaged. Its summary calls are real "
        "model calls in production; here a scripted model answers them.\n"
        "- **Windows:** the tau-bench system prompt alone is "
        + (f"{tb['system_prompt_tokens']:,}" if tb else "large")
        + " tokens, so at 4k the 0.4 threshold leaves little room and every manager works on almost every call; at 32k no tau-bench trajectory reaches the threshold "
        "(every method equals unmanaged there), the synthetic session does.\n"
    )
    return "\n".join(out).rstrip() + "\n"


def _at(series: list[list[float]], call: int) -> float | None:
    """Per-call time near call index ``call``: the median over [0.8, 1.25] x call (dense
    series) or the nearest sample."""
    near = [ms for i, ms in series if 0.8 * call <= i <= 1.25 * call]
    if len(near) >= 3:
        return statistics.median(near)
    if not series:
        return None
    return (
        min(series, key=lambda p: abs(p[0] - call))[1] if any(abs(p[0] - call) <= 0.25 * call for p in series) else None
    )


def _ordered(by_name: dict[str, Any], order: list[str]) -> list[tuple[str, Any]]:
    names = [n for n in order if n in by_name] + [n for n in by_name if n not in order]
    return [(n, by_name[n]) for n in names]


def _all_rows(result: dict[str, Any]):
    for suite in result["token_cost"].values():
        yield from suite.items()


def _crew_validity(result: dict[str, Any]) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = {}
    for suite in result["crewai"]["results"].values():
        for by_mode in suite.values():
            for name, t in by_mode.items():
                acc = totals.setdefault(
                    name, {"calls": 0, "invalid_calls": 0, "latest_user_missing": 0, "over_window": 0}
                )
                for key in acc:
                    acc[key] += t[key]
    return dict(_ordered(totals, CREW_MODES))


def findings(result: dict[str, Any]) -> str:
    """What the figures say, strengths and weaknesses alike (every number from the JSON)."""
    tau = result["token_cost"].get("tau-bench", {})
    syn = result["token_cost"].get("synthetic", {})
    crew = result["crewai"]["results"]
    tb = result["inputs"].get("tau_bench", {})
    out = ["## Findings\n"]
    t4 = tau.get("4000")
    if t4:
        tm, th, mw = t4["trim_messages"], t4["trim_messages start_on=human"], t4["SummarizationMiddleware"]
        ls, tr = t4["ctxlife llm_summary"], t4["ctxlife truncate_last_n"]
        out.append(
            f"- `trim_messages` with default options cuts between a tool call and its result: on tau-bench at 4k, {tm['invalid_calls']:,} of "
            f'{tm["calls"]:,} calls would send orphaned tool results. `start_on="human"` makes every call valid but then keeps only what follows a '
            f"user turn: fact retention falls to {_pct(th['fact_retention'])}, and {th['latest_user_missing']:,} calls lose the latest user turn itself "
            f"(the agent's tool loop after it no longer fits). It stays within its budget (peak {_n(tm['peak'])} tokens for a budget of {int(0.4 * 4000):,}, the excess being the counter difference noted under caveats) because it drops whatever does not fit."
        )
        out.append(
            f"- `SummarizationMiddleware` keeps sequences valid and, given the same extractive summarizer, keeps facts about as well as `llm_summary` "
            f"({_pct(mw['fact_retention'])} vs {_pct(ls['fact_retention'])} at 4k). It summarizes the latest user turn along with the rest "
            f"({mw['latest_user_missing']:,} calls without it at 4k) and, at a small window, summarizes on {mw['compactions']:,} of {mw['calls']:,} calls "
            f"(`llm_summary`: {ls['compactions']:,}); with its default summarizer each is an extra model call."
        )
        out.append(
            f"- ctxlife keeps the last units and the latest user turn verbatim, so on tau-bench at 4k (system prompt "
            f"{tb.get('system_prompt_tokens', 0):,} tokens, tool results up to {tb.get('max_tool_result_tokens', 0):,}) "
            f"{ls['over_window']:,} `llm_summary` calls and {tr['over_window']:,} `truncate_last_n` calls are still over the window "
            f"(unmanaged: {t4['unmanaged']['over_window']:,}): a large recent tool result is kept whole. Capping tool output (the `tool_output` "
            f"strategy) is the remedy ctxlife offers; it is not part of this comparison. "
            f"It also spends more tokens than `trim_messages` at 4k ({_pct(ls['tokens_vs_unmanaged'])} vs {_pct(tm['tokens_vs_unmanaged'])} of unmanaged), "
            f"which is what keeping the facts and the latest turn costs."
        )
    t8 = tau.get("8000")
    if t8:
        out.append(
            f"- At 8k on tau-bench, `llm_summary` sends {_pct(t8['ctxlife llm_summary']['tokens_vs_unmanaged'])} of unmanaged tokens "
            f"(`trim_messages` {_pct(t8['trim_messages']['tokens_vs_unmanaged'])}, `SummarizationMiddleware` {_pct(t8['SummarizationMiddleware']['tokens_vs_unmanaged'])}) "
            f"with no call over the window, and rewrites the prompt prefix on {t8['ctxlife llm_summary']['rewrites']:,} calls against "
            f"{t8['trim_messages']['rewrites']:,} for `trim_messages`: the gap between threshold and target keeps the prompt cache warm between compactions."
        )
    c32 = syn.get("32000")
    if c32:
        out.append(
            f"- On the long synthetic session at 32k, ctxlife sends {_pct(c32['ctxlife truncate_last_n']['tokens_vs_unmanaged'])} (`truncate_last_n`) and "
            f"{_pct(c32['ctxlife llm_summary']['tokens_vs_unmanaged'])} (`llm_summary`) of unmanaged tokens; `trim_messages` "
            f"{_pct(c32['trim_messages']['tokens_vs_unmanaged'])}, because it fills the budget on every call while ctxlife compacts down to its target."
        )
    cs = crew.get("synthetic", {})
    if cs.get("32000") and "CrewAI respect_context_window" in cs["32000"]:
        r32 = cs["32000"]["CrewAI respect_context_window"]
        w32 = cs["32000"].get("CrewAI + ctxlife llm_summary", {})
        out.append(
            f"- CrewAI's `respect_context_window` does not keep calls under the window: it estimates 4 characters a token over message text only (tool-call "
            f"arguments excluded), so on the synthetic session at 32k its context peaks at {r32['peak']:,} tokens and {r32['over_window']:,} calls are over the "
            f"window; it also folds the task into its summary ({r32['latest_user_missing']:,} calls without the task message) and spends "
            f"{r32['summary_calls']:,} extra model calls ({r32['summary_prompt_tokens']:,} prompt tokens) on summaries. The same crew wrapped with ctxlife: peak "
            f"{w32.get('peak', 0):,}, {w32.get('over_window', 0):,} calls over the window, {w32.get('summary_calls', 0):,} CrewAI summaries (ctxlife compacts first), "
            f"{_pct(w32.get('tokens_vs_unmanaged'))} of CrewAI's unmanaged tokens vs {_pct(r32.get('tokens_vs_unmanaged'))}."
        )
    ov = result["overhead"]["rows"]
    sg = result.get("summarizer_growth", {}).get("rows", [])
    first_summary = next(
        (r for r in ov if r["method"] == "ctxlife llm_summary" and r["messages"] >= 900 and "first" in r), None
    )
    if first_summary and sg:
        out.append(
            f"- Slow path: `llm_summary`'s first compaction of a long history is expensive: {_ms(first_summary['first']['median_ms'])} ms at "
            f"{first_summary['messages']:,} messages, because the extractive summarizer reads the whole evicted span and its time grows faster than "
            f"the span (exponent {_fit([(r['messages'], r['ms']) for r in sg])} over {sg[0]['messages']}–{sg[-1]['messages']} messages). In a running "
            f"agent a compaction evicts only (threshold − target) × window, and the per-call median stays flat (section 5), but its spikes show in the max. "
            f"`SummarizationMiddleware` bounds its summarizer's input (last 4,000 tokens by default)."
        )
    full = next((r for r in ov if r["method"] == "ctxlife truncate_last_n" and r["messages"] >= 9000), None)
    memo = next((r for r in ov if r["method"] == "trim_messages (memoized counter)" and r["messages"] >= 9000), None)
    if full and memo and "steady full history" in full and "steady full history" in memo:
        out.append(
            f"- Handed the whole history on every call, ctxlife makes several passes over it (shape check, token count before and after, the strategy, and a "
            f"validity check of the list before and after an edit): {_ms(full['steady full history']['median_ms'])} ms at {full['messages']:,} messages, "
            f"where `trim_messages` with a per-message memoized counter takes {_ms(memo['steady full history']['median_ms'])} ms. In place (its intended use), "
            f"{_ms(full['steady in place']['median_ms'])} ms."
        )
    return "\n".join(out) + "\n"


def _validity_totals(result: dict[str, Any]) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = {}
    for suite in result["token_cost"].values():
        for by_method in suite.values():
            for name, t in by_method.items():
                acc = totals.setdefault(name, {"calls": 0, "invalid_calls": 0, "latest_user_missing": 0})
                for key in acc:
                    acc[key] += t[key]
    return dict(_ordered(totals, MAIN_METHODS))


def _fit(points: list[tuple[float, float]]) -> float | None:
    import math

    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx = statistics.mean(p[0] for p in pts)
    my = statistics.mean(p[1] for p in pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return round(sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx, 2) if sxx else None


def write(result: dict[str, Any], quick: bool = False, docs: Path | None = None) -> list[Path]:
    """Write the page and its charts (into ``docs``, default the repository's docs/)."""
    doc = (docs / "benchmarks.md") if docs else DOC
    written = charts(result, doc.parent / "benchmarks")
    doc.write_text(page(result, quick=quick))
    return [doc, *written]
