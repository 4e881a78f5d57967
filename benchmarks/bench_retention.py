"""bench_retention: what each method keeps of what the agent needs later, at equal budget, with tokens and cache cost.

Recordings are replayed call by call (a *call* is every assistant message of a recording: the model
was called with everything before it). At each call every method returns the context it would
send; one meter (tiktoken ``cl100k_base`` offline, OpenAI chat accounting: ``peers.Meter``) counts
it, and three metrics that **no ctxlife code computes** grade it:

* ``answers``: MemoryBank (``tests/data/memorybank``) long chats, English and Chinese, **held-out
  people only** (odd positions; even positions were used to tune ``recall``). After the ten days,
  the probing questions are asked one after the other as new user turns (each followed by a short
  neutral reply that holds no answer); a question is kept when every answer group of the
  hand-written key (``answer_keys_{en,cn}.json``) has one of its strings in the context sent.
* ``reused args``: for each call that writes tool calls, every argument value (a string or number
  of 4+ characters) that already appeared in an earlier non-system message of the recording and
  is not in the system prompt; kept when the value is in the context sent at that call. On
  tau-bench (a fixed subset of the recorded airline trajectories) and on the fresh domain.
* ``planted``: the fresh synthetic domain (``gen_helpdesk.py``, an IT service desk; ctxlife was never
  tuned on it): the generator knows each value asked about or passed to a tool later and the call
  that needs it.

"In the context" (``grading.present``): the text a model reads (message content, tool-call names and
arguments) with case and runs of whitespace ignored; a value that starts or ends with an ASCII
letter or digit must not continue a longer ASCII word or number there. Written in ``grading.py``, on
purpose without :mod:`ctxlife.retention` or :mod:`ctxlife.facts`. ctxlife's own "ledger facts kept"
(its fact extractor's facts, the issue-15 circular metric: ``ledger_diagnostic.py``) is shown on
tau-bench only as a labelled **diagnostic**.

**Equal budget.** The ctxlife rows run as users run them (``ctxlife.manage()``, default options,
extractive summarizer, at a context window of 4k or 8k tokens). At each call, the budget is the
largest context any ctxlife row sent at that call; every peer and baseline gets exactly that
budget (``peers.py``), so no ctxlife row ever has more tokens than a peer. "recent that fit" is also
run at exactly ``llm_summary``'s and ``truncate_last_n``'s own tokens at each call (rows named
"(= X's tokens)"), the exact match for those rows. Each call of a budgeted
method is checked against the budget with the meter: calls over it are counted and flagged in the
table (``strict=True`` raises :class:`OverBudget`). ``unmanaged`` (everything) is the reference.

**Validity**: a context with a tool result whose call is not right before it, or a tool call
without its results, is an invalid call (``grading.invalid_codes``).

**Prompt-cache view**: at each call, the cached prefix is the run of leading messages identical to
the previous call's leading messages (message level; a provider caches at token level, so this
slightly under-counts), counted when it is at least 1,024 tokens (the minimum OpenAI and Anthropic
cache). Cost per session, in uncached-input-token equivalents: uncached tokens + (1 - discount) x
cached tokens, for discounts of 50% and 90%, next to raw tokens.

Run: ``.venv/bin/python benchmarks/bench_retention.py [--quick]`` (writes
``benchmarks/results/retention.json``). From code: ``run(quick) -> dict`` and ``section(dict) -> str``.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ctxlife.api import clear_hosts, manage
from ctxlife.integrations.scripted import offline_environment
from ctxlife.replay import load_conversations  # a file loader only; it grades nothing
from ctxlife_methods import clock_at, ctxlife_settings
from gen_helpdesk import generate
from grading import Need, TextCache, invalid_codes, kept, reused_argument_needs
from ledger_diagnostic import ledger_grader
from memorybank import conversations
from peers import PEER_NAMES, Meter, RecentFit, make_peers
from provenance import stamp

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results" / "retention.json"
TAU = REPO / "tests" / "data" / "tau-bench-airline-gpt4o.json.gz"

Message = dict[str, Any]

WINDOWS = (4_000, 8_000)
CTXLIFE_METHODS = ("ctxlife llm_summary", "ctxlife llm_summary+recall", "ctxlife truncate_last_n")
METHODS = ("unmanaged", *CTXLIFE_METHODS)  # + peers.PEER_NAMES
METRICS = ("answers", "reused args", "planted")
#: ctxlife rows whose own per-call token counts are also given to "recent that fit" (a second, exact match)
MATCHED = {
    "ctxlife llm_summary": "recent that fit (= llm_summary's tokens)",
    "ctxlife truncate_last_n": "recent that fit (= truncate_last_n's tokens)",
}
DIAGNOSTIC = "ledger facts (ctxlife's extractor; diagnostic)"
CACHE_MIN_TOKENS = 1_024
DISCOUNTS = (0.5, 0.9)
TAU_STEP = {False: 5, True: 40}  # every 5th trajectory (40 of 200); quick: every 40th (5)
HELPDESK_SEEDS = {False: range(1, 21), True: range(1, 4)}
MEMORYBANK_QUICK_PEOPLE = 2  # held-out people per language in --quick


class OverBudget(Exception):
    """A budgeted method sent more tokens than its budget at a call (raised with ``strict=True``)."""


# -- episodes (a recording and what it needs) ---------------------------------------------------


@dataclass
class Episode:
    domain: str
    name: str
    messages: list[Message]
    needs: list[Need] = field(default_factory=list)
    when: list[str | None] | None = None  # per message: when it was said (MemoryBank's days)

    def calls(self) -> list[int]:
        return [i for i, m in enumerate(self.messages) if m.get("role") == "assistant" and i > 0]


QUESTION_REPLY = {"en": "Let me think back to what you told me.", "cn": "让我回想一下你告诉过我的事。"}


def memorybank_episodes(language: str, people: int | None = None) -> list[Episode]:
    """Held-out MemoryBank people: ten days of chat, then each probing question as a new user turn."""
    out = []
    for conv in [c for c in conversations(language) if c.split == "heldout"][:people]:
        messages: list[Message] = [{"role": "system", "content": conv.system}]
        when: list[str | None] = [None]
        for day, before, after in conv.calls:
            for m in [*before, *after]:
                messages.append(dict(m))
                when.append(day)
        needs = []
        for question in conv.questions:
            messages.append({"role": "user", "content": question.text})
            messages.append({"role": "assistant", "content": QUESTION_REPLY[language]})
            when += [conv.question_day, conv.question_day]
            groups = tuple(tuple(group) for group in question.answers)
            needs.append(Need(len(messages) - 1, groups, "answers", question.label))
        out.append(Episode(f"memorybank-{language}", conv.name, messages, needs, when))
    return out


def tau_episodes(step: int) -> list[Episode]:
    """A fixed subset of the recorded tau-bench airline trajectories: every ``step``-th one."""
    out = []
    for conv in load_conversations(TAU)[::step]:
        messages = [dict(m) for m in conv.messages]
        out.append(Episode("tau-bench", conv.name, messages, reused_argument_needs(messages)))
    return out


def helpdesk_episodes(seeds: Sequence[int]) -> list[Episode]:
    out = []
    for seed in seeds:
        session = generate(seed)
        planted = [Need(n.call, tuple(tuple(g) for g in n.answers), "planted", n.kind) for n in session.needs]
        out.append(
            Episode(
                "helpdesk", f"helpdesk-seed{seed}", session.messages, planted + reused_argument_needs(session.messages)
            )
        )
    return out


# -- methods ------------------------------------------------------------------------------------


class CtxlifeMethod:
    """``ctxlife.manage()`` on the live list, default options (``llm_summary``: extractive summarizer)."""

    def __init__(self, name: str, window: int, workdir: Path, session: str) -> None:
        self.name = name
        self.window = window
        self.session = session
        method = name.removeprefix("ctxlife ")
        self.settings = ctxlife_settings(method, workdir, source=f"bench_retention ({name})")
        self.live: list[Message] = []
        self.fed = 0

    def call(self, history: Sequence[Message], budget: int | None, when: str | None) -> list[Message]:
        # Copies: ctxlife edits its live list (and may edit messages) in place; the recording is shared.
        self.live.extend(copy.deepcopy(list(history[self.fed :])))
        self.fed = len(history)
        with clock_at(when):
            manage(self.live, config=self.settings, context_window=self.window, session_id=self.session)
        return self.live


class Unmanaged:
    name = "unmanaged"

    def call(self, history: Sequence[Message], budget: int | None, when: str | None) -> list[Message]:
        return list(history)


class Budgeted:
    """A peer from ``peers.py`` behind the common signature."""

    def __init__(self, peer: Any, name: str | None = None) -> None:
        self.peer = peer
        self.name: str = name or peer.name

    def call(self, history: Sequence[Message], budget: int | None, when: str | None) -> list[Message]:
        assert budget is not None
        return list(self.peer.call(history, budget))


# -- measuring ----------------------------------------------------------------------------------


def cached_prefix(context: Sequence[Message], previous: Sequence[Message]) -> int:
    """How many leading messages of ``context`` equal (as sent) the previous call's leading messages.

    ``previous`` holds shallow copies taken when the previous call was measured, so a message edited
    in place since then does not count as unchanged.
    """
    n = 0
    for message, snapshot in zip(context, previous, strict=False):
        if message != snapshot:
            break
        n += 1
    return n


def _snapshot(context: Sequence[Message]) -> list[Message]:
    return [dict(m) for m in context]


@dataclass
class Tally:
    """One method's figures, added up over calls and sessions."""

    sessions: int = 0
    calls: int = 0
    tokens: int = 0
    budget_tokens: int = 0
    over_budget_calls: int = 0
    over_budget_max: int = 0
    invalid_calls: int = 0
    cached_tokens: int = 0
    needs: dict[str, list[int]] = field(default_factory=dict)  # metric -> [needs, kept, tokens at those calls]
    misses: dict[str, list[str]] = field(default_factory=dict)

    def add(self, other: Tally) -> None:
        for name in (
            "sessions",
            "calls",
            "tokens",
            "budget_tokens",
            "over_budget_calls",
            "invalid_calls",
            "cached_tokens",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.over_budget_max = max(self.over_budget_max, other.over_budget_max)
        for metric, (n, k, t) in other.needs.items():
            mine = self.needs.setdefault(metric, [0, 0, 0])
            mine[0] += n
            mine[1] += k
            mine[2] += t
        for metric, labels in other.misses.items():
            self.misses.setdefault(metric, []).extend(labels)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sessions": self.sessions,
            "calls": self.calls,
            "tokens": self.tokens,
            "tokens_per_call": round(self.tokens / self.calls, 1) if self.calls else None,
            "tokens_per_session": round(self.tokens / self.sessions) if self.sessions else None,
            "budget_per_call": round(self.budget_tokens / self.calls, 1) if self.calls and self.budget_tokens else None,
            "over_budget_calls": self.over_budget_calls,
            "over_budget_max_tokens": self.over_budget_max,
            "invalid_calls": self.invalid_calls,
            "cached_share": round(self.cached_tokens / self.tokens, 4) if self.tokens else None,
            "retention": {},
        }
        for discount in DISCOUNTS:
            cost = self.tokens - discount * self.cached_tokens
            out[f"cost_per_session_{int(discount * 100)}"] = round(cost / self.sessions) if self.sessions else None
        for metric, (n, k, t) in sorted(self.needs.items()):
            low, high = wilson(k, n)
            out["retention"][metric] = {
                "needs": n,
                "kept": k,
                "share": round(k / n, 4) if n else None,
                "ci95": [round(low, 4), round(high, 4)],
                "tokens_at_need_calls": round(t / n, 1) if n else None,
            }
        return out


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a share k/n."""
    if n == 0:
        return (0.0, 0.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def replay(
    episode: Episode,
    method: Any,
    meter: Any,
    texts: TextCache,
    budgets: dict[int, int] | None,
    *,
    strict: bool = False,
    ledger: Callable[[int, Sequence[Message]], tuple[int, int]] | None = None,
) -> tuple[Tally, dict[int, int]]:
    """Replay one episode through one method; return its tally and the tokens it sent at each call."""
    tally = Tally(sessions=1)
    sent: dict[int, int] = {}
    needs_at: dict[int, list[Need]] = {}
    for need in episode.needs:
        needs_at.setdefault(need.call, []).append(need)
    previous: list[Message] = []
    for k in episode.calls():
        budget = budgets.get(k) if budgets is not None else None
        when = episode.when[k] if episode.when else None
        context = method.call(episode.messages[:k], budget, when)
        tokens = meter.messages(context)
        sent[k] = tokens
        tally.calls += 1
        tally.tokens += tokens
        if budget is not None:
            tally.budget_tokens += budget
            if tokens > budget:
                if strict:
                    raise OverBudget(
                        f"{method.name} sent {tokens} tokens at call {k} of {episode.name}; budget {budget}"
                    )
                tally.over_budget_calls += 1
                tally.over_budget_max = max(tally.over_budget_max, tokens - budget)
        if invalid_codes(context):
            tally.invalid_calls += 1
        cached = sum(meter.message(m) for m in context[: cached_prefix(context, previous)])
        if cached >= CACHE_MIN_TOKENS:
            tally.cached_tokens += cached
        previous = _snapshot(context)
        here = needs_at.get(k)
        if here:
            text = texts.context(context)
            for need in here:
                entry = tally.needs.setdefault(need.metric, [0, 0, 0])
                entry[0] += 1
                entry[2] += tokens
                if kept(need, text):
                    entry[1] += 1
                else:
                    tally.misses.setdefault(need.metric, []).append(f"{episode.name}:{need.label}")
        if ledger is not None:
            n, k_ = ledger(k, context)
            if n:
                entry = tally.needs.setdefault(DIAGNOSTIC, [0, 0, 0])
                entry[0] += n
                entry[1] += k_
                entry[2] += tokens * n
    return tally, sent


def run_episode(
    episode: Episode, window: int, meter: Any, *, strict: bool = False, diagnostic: bool = False
) -> dict[str, Tally]:
    """Every method on one episode at one window: ctxlife rows first, then peers at their per-call maximum."""
    texts = TextCache()
    ledger = ledger_grader(episode.messages) if diagnostic else None
    out: dict[str, Tally] = {}
    sent_by: dict[str, dict[int, int]] = {}
    session = re.sub(r"[^A-Za-z0-9_-]", "_", episode.name)[:50] + f"-{window}"
    # The recall row's session store: on tmpfs when there is one (snapshots are always fsynced; what is
    # measured here is what is kept, not disk latency).
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="ctxlife-bench-retention-", dir=shm) as tmp:
        methods: list[Any] = [Unmanaged()] + [CtxlifeMethod(n, window, Path(tmp), session) for n in CTXLIFE_METHODS]
        for method in methods:
            out[method.name], sent_by[method.name] = replay(episode, method, meter, texts, None, ledger=ledger)
        clear_hosts()
    budgets = {k: max(sent_by[n][k] for n in CTXLIFE_METHODS) for k in episode.calls()}
    for name in CTXLIFE_METHODS:  # the ctxlife rows are budgeted too: by construction they are never over
        out[name].budget_tokens = sum(budgets.values())
    for peer in make_peers(meter):
        method = Budgeted(peer)
        out[method.name], _ = replay(episode, method, meter, texts, budgets, strict=strict, ledger=ledger)
    for name, label in MATCHED.items():  # the naive baseline at exactly one ctxlife row's tokens, call by call
        method = Budgeted(RecentFit(meter), label)
        out[label], _ = replay(episode, method, meter, texts, sent_by[name], strict=strict, ledger=ledger)
    return out


# -- the whole benchmark ------------------------------------------------------------------------


def episodes(quick: bool) -> list[Episode]:
    people = MEMORYBANK_QUICK_PEOPLE if quick else None
    return (
        tau_episodes(TAU_STEP[quick])
        + memorybank_episodes("en", people)
        + memorybank_episodes("cn", people)
        + helpdesk_episodes(HELPDESK_SEEDS[quick])
    )


def run(quick: bool = False, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Everything this benchmark measures, as one JSON-able dict (see the module docstring)."""
    offline_environment()  # before anything imports crewai
    started = time.perf_counter()
    meter = Meter()
    all_episodes = episodes(quick)
    tallies: dict[tuple[str, int, str], Tally] = {}
    for window in WINDOWS:
        for episode in all_episodes:
            diagnostic = episode.domain == "tau-bench" and not quick  # ctxlife's extractor is slow-ish
            for name, tally in run_episode(episode, window, meter, diagnostic=diagnostic).items():
                tallies.setdefault((episode.domain, window, name), Tally()).add(tally)
            progress(f"{episode.name} @ {window}")
    domains = sorted(
        {e.domain for e in all_episodes}, key=["tau-bench", "memorybank-en", "memorybank-cn", "helpdesk"].index
    )
    methods = [*METHODS, *PEER_NAMES, *MATCHED.values()]
    rows = []
    for domain in domains:
        for window in WINDOWS:
            for name in methods:
                tally = tallies[(domain, window, name)]
                rows.append({"domain": domain, "window": window, "method": name, **tally.as_dict()})
    counts = {d: sum(1 for e in all_episodes if e.domain == d) for d in domains}
    return stamp(
        {
            "what": "retention at equal budget on metrics ctxlife does not compute; tokens, validity, cache cost",
            "date": datetime.now().isoformat(timespec="seconds"),
            "quick": quick,
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "windows": list(WINDOWS),
            "methods": methods,
            "metrics": list(METRICS),
            "diagnostic_metric": DIAGNOSTIC,
            "sessions": counts,
            "data": {
                "tau-bench": f"tests/data/{TAU.name}: every {TAU_STEP[quick]}th trajectory",
                "memorybank": "held-out people (odd positions), questions of answer_keys_{en,cn}.json",
                "helpdesk": f"gen_helpdesk.generate(seed) for seeds {list(HELPDESK_SEEDS[quick])}",
            },
            "budget_rule": (
                "each call's budget = the largest context any ctxlife row sent at that call; the rows named "
                "'(= <row>'s tokens)' get exactly that ctxlife row's tokens at each call"
            ),
            "cache_rule": f"message-level exact prefix of the previous call, counted when >= {CACHE_MIN_TOKENS} tokens",
            "rows": rows,
            "seconds": round(time.perf_counter() - started, 1),
        }
    )


# -- the report section ---------------------------------------------------------------------------

DOMAIN_TITLES = {
    "tau-bench": "tau-bench airline (recorded GPT-4o trajectories)",
    "memorybank-en": "MemoryBank English, held-out people",
    "memorybank-cn": "MemoryBank Chinese, held-out people",
    "helpdesk": "IT service desk (fresh synthetic domain, gen_helpdesk.py)",
}


def _pct(cell: dict[str, Any] | None) -> str:
    if not cell or not cell["needs"]:
        return "–"
    low, high = cell["ci95"]
    return f"{cell['share']:.1%} ({cell['kept']}/{cell['needs']}; {low:.0%}–{high:.0%})"


GLANCE = (
    ("tau-bench", "reused args", "tau-bench reused args"),
    ("memorybank-en", "answers", "MemoryBank EN answers"),
    ("memorybank-cn", "answers", "MemoryBank CN answers"),
    ("helpdesk", "planted", "helpdesk planted"),
    ("helpdesk", "reused args", "helpdesk reused args"),
)


def glance(results: dict[str, Any]) -> list[str]:
    """One row per method: each independent metric and domain at each window (share kept), then tokens."""
    rows = results["rows"]
    index = {(r["domain"], r["window"], r["method"]): r for r in rows}
    windows = results.get("windows", WINDOWS)
    columns = [(d, m, f"{title} @{w // 1000}k", w) for d, m, title in GLANCE for w in windows]
    columns = [c for c in columns if any((c[0], c[3], name) in index for name in results["methods"])]
    header = ["method", *(c[2] for c in columns), "tokens vs unmanaged (all rows)"]
    lines = ["### At a glance (share of needs kept, equal per-call budget)", ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name in results["methods"]:
        cells = [name]
        for domain, metric, _, window in columns:
            row = index.get((domain, window, name))
            cell = row["retention"].get(metric) if row else None
            flag = " ⚠" if row and row["over_budget_calls"] else ""
            cells.append(f"{cell['share']:.0%}{flag}" if cell and cell["needs"] else "–")
        mine = sum(r["tokens"] for r in rows if r["method"] == name)
        base = sum(r["tokens"] for r in rows if r["method"] == "unmanaged")
        cells.append(f"{mine / base:.0%}" if base else "–")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "⚠: over the per-call budget at some calls (see *over budget* below); not an equal-budget figure."]
    return lines


def section(results: dict[str, Any]) -> str:
    """The retention and cache tables, as markdown."""
    rows = results["rows"]
    domains = list(dict.fromkeys(r["domain"] for r in rows))
    out = [
        "## Retention at equal budget (independent metrics)",
        "",
        f"Commit `{results.get('commit')}`, code hash `{results.get('code_hash')}`"
        + (" (quick run)" if results.get("quick") else "")
        + f"; {results.get('seconds')} s on {results.get('cpus')} CPUs"
        + (f" (load average {results['load_average'][0]:.1f})" if results.get("load_average") else "")
        + ".",
        "",
        "Each recording is replayed call by call. At every call, each budgeted method may send at most the largest "
        "context any ctxlife row sent at that call (so no ctxlife row ever has more tokens than a peer); the rows "
        "*recent that fit (= X's tokens)* get exactly ctxlife row X's tokens at each call instead; one meter "
        "(tiktoken cl100k, OpenAI chat accounting) counts every row. Retention metrics are computed by the benchmark, "
        "never by ctxlife: **answers** (MemoryBank hand-written answer keys, held-out people), **reused args** "
        "(tool-call argument values the recorded agent re-used after they appeared earlier), **planted** (values the "
        "fresh domain's generator asks about or passes to a tool later). A value is kept when it is in the text of the "
        "context sent at the call that needs it. Shares with their counts and 95% Wilson intervals; tokens are the "
        "mean context per call. "
        f"*{DIAGNOSTIC}* is ctxlife's own circular metric, shown only as a diagnostic.",
        "",
    ]
    out += glance(results) + [""]
    for domain in domains:
        here = [r for r in rows if r["domain"] == domain]
        metrics = [m for m in (*METRICS, DIAGNOSTIC) if any(m in r["retention"] for r in here)]
        sessions = results.get("sessions", {}).get(domain)
        out += [f"### {DOMAIN_TITLES.get(domain, domain)}" + (f" ({sessions} sessions)" if sessions else ""), ""]
        header = ["window", "method", *metrics, "tokens/call", "budget/call", "over budget", "invalid calls"]
        out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for r in here:
            over = (
                "–"
                if r["method"] == "unmanaged"
                else (
                    f"⚠ {r['over_budget_calls']} (max +{r['over_budget_max_tokens']})"
                    if r["over_budget_calls"]
                    else "0"
                )
            )
            cells = [f"{r['window'] // 1000}k", r["method"], *(_pct(r["retention"].get(m)) for m in metrics)]
            budget = f"{r['budget_per_call']:,.0f}" if r.get("budget_per_call") else "–"
            cells += [f"{r['tokens_per_call']:,.0f}", budget, over, str(r["invalid_calls"])]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    out += [
        "## Prompt-cache view",
        "",
        "Cached prefix at a call: the leading messages identical to the previous call's (message level), counted when "
        f"at least {CACHE_MIN_TOKENS:,} tokens. Cost per session in uncached-input-token equivalents: uncached + "
        "(1 − discount) × cached.",
        "",
    ]
    header = ["domain", "window", "method", "tokens/session", "cached share", "cost @50% off", "cost @90% off"]
    out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        cells = [
            r["domain"],
            f"{r['window'] // 1000}k",
            r["method"],
            f"{r['tokens_per_session']:,}",
            f"{r['cached_share']:.0%}",
            f"{r['cost_per_session_50']:,}",
            f"{r['cost_per_session_90']:,}",
        ]
        out.append("| " + " | ".join(cells) + " |")
    out += [
        "",
        "LangChain `SummarizationMiddleware` is not in these tables: its summary is written by a chat model, and "
        "offline the only stand-ins are a scripted fake model (a fixed placeholder summary, which would measure the "
        "fake, not the middleware) or ctxlife's own summarizer (no longer the middleware as it is, and ctxlife grading "
        "ctxlife). It also triggers on its own token thresholds, so it cannot be held to the per-call budget. "
        "`trim_messages (approximate)` uses LangChain's `count_tokens_approximately` (characters / 4): its calls over "
        "the budget are counted in *over budget*, as the meter sees them.",
        "",
    ]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small fixed subset of every domain (< 40 s)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"write the results JSON here (default {RESULTS})")
    args = parser.parse_args(argv)
    result = run(args.quick, progress=lambda text: print(f"  {text}", file=sys.stderr, flush=True))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(section(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
