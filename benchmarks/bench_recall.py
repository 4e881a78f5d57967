"""bench_recall: is the answer still in the context when the user asks about something said long ago?

Two kinds of conversation are replayed call by call through each method, at windows of 4,000 and
8,000 tokens:

* **MemoryBank** long chats (``tests/data/memorybank``, MIT): 15 people x 10 days, English and
  Chinese. Each user message is one model call (the assistant's reply is appended after it). When
  the ten days are replayed, each probing question is asked as a new user turn (one at a time, each
  against the state the replay left). Grading: the hand-written answer keys
  (``answer_keys_{en,cn}.json``): a question is answered *in context* when every answer group has
  one of its strings in the messages sent at that call, by ``grading.present`` (case and
  whitespace ignored, not part of a longer word or number; no ctxlife code grades).
  People at even positions are the **dev** half (everything was tuned on them), odd positions the
  **held-out** half (quote these).
* **Synthetic agent** sessions (``synthetic_agent.py``): a clinic assistant fetches records with
  tools; 10+ turns later the user asks about a value from one of them. Seeds 1-3 are dev, 101-103
  held out. Answer strings are planted by the generator.
* **MultiWOZ** (English) and **CrossWOZ** (Chinese) task dialogues strung into multi-day sessions
  (``woz.py``; tuned on the dev sessions only): questions written from the dialogue acts about values the
  assistant gave on earlier days, each asked as a question, a request and a statement; ctxlife with
  ``recall`` against pair-doc only (``bench_woz``). Sessions cut from the sources' validation split are
  dev, from their test split held out. Skipped when the cut is not on the machine (it is not committed).

Methods, each as its docs tell users to run it:

* ``unmanaged``: everything, every call;
* ``truncate_last_n``: default options (above the 40% line, keep the last 2 rounds);
* ``llm_summary``: default options, extractive summarizer (offline);
* ``llm_summary+recall``: the same, plus ``recall`` (default options) over the raw history that
  ``snapshot_restore`` records in a file store;
* ``trim_messages``: LangChain's ``trim_messages(strategy="last", start_on="human",
  include_system=True)`` on the whole history, at the same token budget as ``llm_summary+recall``
  at the same call (each call's budget = the tokens that method sent), counted with the same
  tiktoken encoding and per-message accounting;
* ``recent+bm25``: the obvious alternative (issue 21), about thirty lines with no ctxlife code: at the
  same budget, the most recent messages in half of it and BM25 over each earlier user message with
  its reply in the other half (``run_recent_bm25``);
* ``pair-doc``: the stronger baseline of issue 40, as short and as independent: the recent messages in half
  the budget, BM25 over every earlier message together with the next one (both directions), stopwords
  removed, in the other half (``run_pair_doc``).

Reported per method, window, language and half: the share of questions whose answer is in the
context sent, the mean context tokens at those calls, and the mean wall time of a call (question
calls, and all replay calls). A separate section measures what ``recall`` adds to a call at 1,000
and 10,000 messages of history (CPU time, median and 95th percentile; calls with and without
``recall`` interleaved in one process, three runs: their median and spread).

The replay runs on a simulated clock: messages of day D are recorded "on" day D, so recalled
passages carry the date they were said, as they would in a real deployment.

Run: ``.venv/bin/python benchmarks/bench_recall.py [--quick] [--out results.json]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import woz
from ctxlife.integrations.scripted import offline_environment
from ctxlife_methods import clock_at, ctxlife_settings
from grading import answered
from memorybank import (
    LANGUAGES,
    SYSTEM_PROMPT,
    WORDINGS,
    Conversation,
    Question,
    chat_pool,
    conversations,
    load_answer_keys,
    load_bank,
    question_texts,
    reword,
    reworded,
)
from peers import langchain_counter
from provenance import stamp

REPO = Path(__file__).resolve().parent.parent
WINDOWS = (4_000, 8_000)
METHODS = (
    "unmanaged",
    "truncate_last_n",
    "llm_summary",
    "llm_summary+recall",
    "trim_messages",
    "recent+bm25",
    "pair-doc",
)
BASELINES = ("trim_messages", "recent+bm25", "pair-doc")  # run at llm_summary+recall's budget of each question
SYNTHETIC_SEEDS = {"dev": (1, 2, 3), "heldout": (101, 102, 103)}
RECALL_HEADER = "Recalled from earlier in this conversation"  # docs/strategies/recall.md: the block's first line
WOZ_SOURCES = tuple(woz.SOURCE.values())  # multiwoz (English), crosswoz (Chinese)
AGENT_PROMPT = "You are the front-desk assistant of a veterinary clinic. Use the tools to look things up."


# -- conversations ---------------------------------------------------------------------------------


def synthetic(seeds: dict[str, Sequence[int]]) -> list[Conversation]:
    from synthetic_agent import generate

    out = []
    for split, split_seeds in seeds.items():
        for seed in split_seeds:
            session = generate(seed)
            calls = []
            interleaved: dict[int, Question] = {}
            day0 = datetime(2024, 3, 1, 9, 0).timestamp()
            for turn in session.turns:
                day = datetime.fromtimestamp(day0 + turn.index * 600).strftime("%Y-%m-%dT%H:%M")
                user, steps = turn.messages[0], turn.messages[1:]
                if turn.probe is not None:
                    interleaved[len(calls)] = Question(
                        turn.probe.question, turn.probe.answers, f"seed{seed}-turn{turn.index}-{turn.probe.kind}"
                    )
                    calls.append((day, [user], [{"role": "assistant", "content": "Let me check that for you."}]))
                    continue
                if steps and steps[0].get("tool_calls"):
                    calls.append((day, [user], steps[:2]))  # the call that decides on the tool
                    calls.append((day, [], steps[2:]))  # the call that reads the result
                else:
                    calls.append((day, [user], steps))
            out.append(Conversation(f"agent-seed{seed}", "en", split, AGENT_PROMPT, calls, interleaved=interleaved))
    return out


# -- methods ---------------------------------------------------------------------------------------


@dataclass
class Outcome:
    label: str
    answered: bool
    tokens: int
    seconds: float


@dataclass
class Run:
    outcomes: list[Outcome] = field(default_factory=list)
    replay_seconds: list[float] = field(default_factory=list)
    budgets: dict[str, int] = field(default_factory=dict)  # question label -> tokens sent (for trim)
    replay_blocks: list[int] = field(default_factory=list)  # tokens of the recall block at each replay call (0: none)


def run_ctxlife(conv: Conversation, method: str, window: int, workdir: Path) -> Run:
    from ctxlife.api import clear_hosts, manage
    from ctxlife.tokens import TokenCounter

    counter = TokenCounter(None)
    settings = None if method == "unmanaged" else ctxlife_settings(method, workdir)
    session = re.sub(r"[^A-Za-z0-9_-]", "_", conv.name)[:60] + f"-{window}"
    run = Run()
    messages: list[dict[str, Any]] = [{"role": "system", "content": conv.system}]

    def call(listing: list[dict[str, Any]]) -> float:
        started = time.perf_counter()
        if settings is not None:
            manage(listing, config=settings, context_window=window, session_id=session)
        return time.perf_counter() - started

    def ask(question: Question, listing: list[dict[str, Any]]) -> None:
        seconds = call(listing)
        run.outcomes.append(
            Outcome(question.label, answered(question.answers, listing), counter.count_messages(listing), seconds)
        )
        run.budgets[question.label] = counter.count_messages(listing)

    for i, (day, before, after) in enumerate(conv.calls):
        with clock_at(day):
            messages.extend(before)
            if i in conv.interleaved:
                ask(conv.interleaved[i], messages)
            else:
                run.replay_seconds.append(call(messages))
                run.replay_blocks.append(block_tokens(messages, counter))
            messages.extend(after)
    for n, question in enumerate(conv.questions):
        with clock_at(conv.question_day):
            if method == "llm_summary+recall":
                # Each question in its own copy of the session (as if each were asked in a new
                # process right after the replay), so earlier questions are not in its history.
                fork = fork_session(settings, session, f"{session[:50]}-q{n}")
                listing = [{"role": "system", "content": conv.system}]
                manage(listing, config=settings, context_window=window, session_id=fork)  # restores the session
                listing.append({"role": "user", "content": question.text})
                seconds = time.perf_counter()
                manage(listing, config=settings, context_window=window, session_id=fork)
                seconds = time.perf_counter() - seconds
                tokens = counter.count_messages(listing)
                run.outcomes.append(Outcome(question.label, answered(question.answers, listing), tokens, seconds))
                run.budgets[question.label] = tokens
            else:
                ask(question, [*messages, {"role": "user", "content": question.text}])
    clear_hosts()
    return run


def block_tokens(messages: list[dict[str, Any]], counter: Any) -> int:
    """Tokens of the recall block in a context sent (0 when there is none), found by its documented header."""
    blocks = [m for m in messages if RECALL_HEADER in str(m.get("content") or "")]
    return sum(counter.count_each(blocks))


def fork_session(settings: Any, session: str, fork: str) -> str:
    """Copy a session's raw history (with its timestamps and views) and snapshot to a new session id.

    Through the public store API: records are appended with the clock set to when they were first
    recorded, so the copy says when things were said, as the original does; the records of one view said
    within a second of each other in one append (one write and fsync, not one per message: a replay's
    calls take milliseconds, and recall shows the day said, not the second).
    """
    import dataclasses

    from ctxlife.sessions import open_store

    with open_store(settings.store_url()) as store:
        batch: list[Any] = []
        for record in [*store.read_records(session), None]:
            if batch and (
                record is None
                or record.view != batch[0].view
                or (record.recorded_at or 0.0) - (batch[0].recorded_at or 0.0) >= 1.0
            ):
                with clock_at(batch[0].recorded_at):
                    store.append(fork, [r.message for r in batch], view=batch[0].view)
                batch = []
            if record is not None:
                batch.append(record)
        snapshot = store.load_snapshot(session)
        if snapshot is not None:
            store.save_snapshot(
                dataclasses.replace(snapshot, session_id=fork)
                if dataclasses.is_dataclass(snapshot)
                else snapshot.model_copy(update={"session_id": fork})
            )
    return fork


def ask_each(conv: Conversation, ask: Callable[[Question, list[dict[str, Any]]], None]) -> None:
    """Replay ``conv`` without managing it: ``ask`` each interleaved question on the history so far, then
    each final question as a new user turn after the whole history."""
    history: list[dict[str, Any]] = [{"role": "system", "content": conv.system}]
    for i, (_, before, after) in enumerate(conv.calls):
        history.extend(before)
        if i in conv.interleaved:
            ask(conv.interleaved[i], history)
        history.extend(after)
    for question in conv.questions:
        ask(question, [*history, {"role": "user", "content": question.text}])


def run_trim(conv: Conversation, budgets: dict[str, int]) -> Run:
    """LangChain ``trim_messages`` over the whole history, at each question's budget."""
    from langchain_core.messages import convert_to_messages, trim_messages

    from ctxlife.tokens import TokenCounter

    counter = TokenCounter(None)
    count = langchain_counter()  # the budget's tokens, counted on LangChain messages
    run = Run()

    def ask(question: Question, listing: list[dict[str, Any]]) -> None:
        lc = convert_to_messages(listing)
        started = time.perf_counter()
        kept = trim_messages(
            lc,
            max_tokens=budgets[question.label],
            token_counter=count,
            strategy="last",
            start_on="human",
            include_system=True,
        )
        seconds = time.perf_counter() - started
        originals = {id(m): listing[i] for i, m in enumerate(lc)}
        sent = [originals[id(m)] for m in kept]
        run.outcomes.append(
            Outcome(question.label, answered(question.answers, sent), counter.count_messages(sent), seconds)
        )

    ask_each(conv, ask)
    return run


def run_recent_bm25(conv: Conversation, budgets: dict[str, int]) -> Run:
    """The obvious alternative (issue 21), at each question's budget: the recent messages in half of it, and
    BM25 over each earlier user message *with its reply* in the other half (best first, shown in order).

    About thirty lines, no ctxlife code: words lower-cased, Chinese/Japanese as character bigrams.
    """
    from ctxlife.tokens import TokenCounter

    counter = TokenCounter(None)
    run = Run()

    def terms(text: str) -> list[str]:
        out = re.findall(r"[^\W\d_]+|\d+", re.sub(r"[\u3040-\u30ff\u3400-\u9fff]", " ", text.lower()))
        for run_ in re.findall(r"[\u3040-\u30ff\u3400-\u9fff]+", text):
            out += [run_[i : i + 2] for i in range(max(len(run_) - 1, 1))]
        return out

    def ask(question: Question, listing: list[dict[str, Any]]) -> None:
        started = time.perf_counter()
        system, rest, last = listing[0], listing[1:-1], listing[-1]
        room = budgets[question.label] - counter.count_messages([system, last])
        recent: list[dict[str, Any]] = []
        while (
            rest[: len(rest) - len(recent)] and counter.count_messages([rest[-len(recent) - 1], *recent]) <= room // 2
        ):
            recent.insert(0, rest[-len(recent) - 1])
        older = rest[: len(rest) - len(recent)]
        docs = [
            (
                i,
                older[i : i + 2]
                if i + 1 < len(older) and older[i + 1].get("role") == "assistant"
                else older[i : i + 1],
            )
            for i, m in enumerate(older)
            if m.get("role") == "user"
        ]
        bags = [Counter(terms(" ".join(str(m.get("content") or "") for m in pair))) for _, pair in docs]
        average = statistics.fmean(sum(b.values()) for b in bags) if bags else 1.0
        scores = [0.0] * len(docs)
        for term in set(terms(str(last.get("content") or ""))):
            df = sum(1 for b in bags if term in b)
            idf = math.log(1 + (len(bags) - df + 0.5) / (df + 0.5))
            for k, bag in enumerate(bags):
                if term in bag:
                    scores[k] += idf * bag[term] * 2.2 / (bag[term] + 1.2 * (0.25 + 0.75 * sum(bag.values()) / average))
        chosen, left = [], room - counter.count_messages(recent)
        for k in sorted(range(len(docs)), key=lambda k: -scores[k]):
            cost = counter.count_messages(docs[k][1])
            if scores[k] > 0 and cost <= left:
                chosen.append(docs[k])
                left -= cost
        sent = [system, *[m for _, pair in sorted(chosen, key=lambda d: d[0]) for m in pair], *recent, last]
        seconds = time.perf_counter() - started
        run.outcomes.append(
            Outcome(question.label, answered(question.answers, sent), counter.count_messages(sent), seconds)
        )

    ask_each(conv, ask)
    return run


# Stopwords of the pair-doc baseline, written for it (not ctxlife's list): English function words, and
# Chinese function words (as the bigrams a question is cut into).
PAIR_DOC_STOPWORDS = frozenset(
    """a an the and or but if of to in on at by for with from as is am are was were be been being do does did
    have has had i me my mine you your yours he him his she her it its we us our they them their this that these
    those what which who whom whose when where why how can could would should will shall may might must not no
    so than then too very just about into over again there here any some all each more most other such only own
    same s t don did didn ll ve re d m o y let tell give please know remember recall
    什么 我们 你们 他们 一个 一下 这个 那个 可以 没有 就是 还是 是不 不是 的是 了吗 是什 么时 时候""".split()
)


def run_pair_doc(conv: Conversation, budgets: dict[str, int]) -> Run:
    """ "pair-doc" (issue 40), at each question's budget: the recent messages in half of it, and BM25 over every
    earlier message *together with the next one* (either role starts a pair), stopwords removed, in the other
    half (best first, shown in order, a message sent once). Written without ctxlife code: words lower-cased,
    Chinese/Japanese as character bigrams; BM25 k1=1.5, b=0.75 (the Okapi defaults of rank-bm25)."""
    from ctxlife.tokens import TokenCounter

    counter = TokenCounter(None)
    run = Run()

    def terms(text: str) -> list[str]:
        text = text.lower()
        out = re.findall(r"[^\W\d_]+|\d+", re.sub(r"[\u3040-\u30ff\u3400-\u9fff]", " ", text))
        for cjk in re.findall(r"[\u3040-\u30ff\u3400-\u9fff]+", text):
            out += [cjk[i : i + 2] for i in range(max(len(cjk) - 1, 1))]
        return [t for t in out if t not in PAIR_DOC_STOPWORDS]

    def ask(question: Question, listing: list[dict[str, Any]]) -> None:
        started = time.perf_counter()
        system, rest, last = listing[0], listing[1:-1], listing[-1]
        room = budgets[question.label] - counter.count_messages([system, last])
        cut = len(rest)
        while cut and counter.count_messages(rest[cut - 1 :]) <= room // 2:
            cut -= 1
        older, recent = rest[:cut], rest[cut:]
        bags = [Counter(terms(" ".join(str(m.get("content") or "") for m in older[i : i + 2]))) for i in range(cut)]
        average = statistics.fmean(sum(b.values()) for b in bags) if bags else 1.0
        scores = [0.0] * len(bags)
        for term in set(terms(str(last.get("content") or ""))):
            df = sum(1 for b in bags if term in b)
            idf = math.log((len(bags) - df + 0.5) / (df + 0.5) + 1)
            for k, bag in enumerate(bags):
                if term in bag:
                    tf = bag[term]
                    scores[k] += idf * tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * sum(bag.values()) / average))
        chosen: set[int] = set()
        left = room - counter.count_messages(recent)
        for k in sorted(range(len(bags)), key=lambda k: -scores[k]):
            new = [i for i in (k, k + 1) if i < cut and i not in chosen]
            cost = sum(counter.count_each([older[i] for i in new]))
            if scores[k] > 0 and cost <= left:
                chosen.update(new)
                left -= cost
        sent = [system, *[older[i] for i in sorted(chosen)], *recent, last]
        seconds = time.perf_counter() - started
        run.outcomes.append(
            Outcome(question.label, answered(question.answers, sent), counter.count_messages(sent), seconds)
        )

    ask_each(conv, ask)
    return run


# -- the table -------------------------------------------------------------------------------------


def summarize(runs: list[tuple[Conversation, Run]], window: int) -> dict[str, Any]:
    outcomes = [o for _, run in runs for o in run.outcomes]
    replay = [s for _, run in runs for s in run.replay_seconds]
    if not outcomes:
        return {}
    return {
        "questions": len(outcomes),
        "answered": sum(o.answered for o in outcomes),
        "answer_in_context": round(sum(o.answered for o in outcomes) / len(outcomes), 3),
        "mean_tokens": round(statistics.fmean(o.tokens for o in outcomes)),
        "mean_share_of_window": round(statistics.fmean(o.tokens for o in outcomes) / window, 3),
        "max_tokens": max(o.tokens for o in outcomes),
        "ms_per_question_call": round(statistics.fmean(o.seconds for o in outcomes) * 1000, 2),
        "ms_per_replay_call": round(statistics.fmean(replay) * 1000, 2) if replay else None,
        "missed": [o.label for o in outcomes if not o.answered],
        **(
            {
                # Ordinary chat turns (the replay, no question asked): how many got a recall block.
                "replay_calls": len(blocks),
                "replay_share_with_block": round(sum(1 for b in blocks if b) / len(blocks), 3),
                "replay_mean_block_tokens": round(statistics.fmean([b for b in blocks if b] or [0])),
            }
            if (blocks := [b for _, run in runs for b in run.replay_blocks])
            else {}
        ),
    }


def bench_answers(
    conversations: list[Conversation],
    windows: Sequence[int],
    methods: Sequence[str],
    progress: Callable[[str], None],
    wording: str = "question",
) -> list[dict[str, Any]]:
    rows = []
    for window in windows:
        per_method: dict[str, list[tuple[Conversation, Run]]] = {m: [] for m in methods}
        for conv in conversations:
            with tempfile.TemporaryDirectory(prefix="ctxlife-bench-recall-") as tmp:
                recall_run = None
                for method in methods:
                    if method in BASELINES:
                        continue
                    run = run_ctxlife(conv, method, window, Path(tmp))
                    per_method[method].append((conv, run))
                    if method == "llm_summary+recall":
                        recall_run = run
                if "trim_messages" in methods and recall_run is not None:
                    per_method["trim_messages"].append((conv, run_trim(conv, recall_run.budgets)))
                if "recent+bm25" in methods and recall_run is not None:
                    per_method["recent+bm25"].append((conv, run_recent_bm25(conv, recall_run.budgets)))
                if "pair-doc" in methods and recall_run is not None:
                    per_method["pair-doc"].append((conv, run_pair_doc(conv, recall_run.budgets)))
            progress(f"{conv.name} @ {window}")
        for method, runs in per_method.items():
            groups: dict[tuple[str, str, str], list[tuple[Conversation, Run]]] = {}
            for conv, run in runs:
                data = data_of(conv)
                groups.setdefault((data, conv.language, conv.split), []).append((conv, run))
            for (data, language, split), group in sorted(groups.items()):
                rows.append(answers_row(data, language, split, method, window, wording, group))
    return rows


def answers_row(
    data: str,
    language: str,
    split: str,
    method: str,
    window: int,
    wording: str,
    group: list[tuple[Conversation, Run]],
) -> dict[str, Any]:
    """One row of the answers table: which runs it sums up, then :func:`summarize` of them."""
    return {
        "data": data,
        "language": language,
        "split": split,
        "method": method,
        "window": window,
        "wording": wording,
        **summarize(group, window),
    }


def data_of(conv: Conversation) -> str:
    """The source a conversation comes from (its name starts with it), for the table's ``data`` column."""
    return next((d for d in ("memorybank", *WOZ_SOURCES) if conv.name.startswith(d)), "synthetic_agent")


def bench_woz(windows: Sequence[int], progress: Callable[[str], None], quick: bool = False) -> list[dict[str, Any]]:
    """MultiWOZ (English) and CrossWOZ (Chinese) sessions (``woz.py``; held-out ones never tuned on):
    ``llm_summary+recall`` against pair-doc at its tokens, per window, half and wording. Each session is replayed
    once per window and every question asked in all three wordings (each in its own fork of the session, as in
    ``run_ctxlife``), so the wordings see the same replay. No rows (and a note why) when the cut is not there
    (``woz.data_dir``).

    Cost: 83 s CPU for both windows (5 dev + 4 held-out sessions per language, 8 questions each; 153 s wall at
    load 4 on 2 shared cores, measured with ``time.process_time`` around this function, 2026-12-07), the forks
    (one per question and wording) batched by second (``fork_session``); one append per record, they were two
    thirds of it."""
    try:
        convs = [c for language in LANGUAGES for c in woz.conversations(language)]
    except woz.DataMissing as exc:
        progress(f"skipped the MultiWOZ / CrossWOZ rows: {exc}")
        return []
    if quick:
        convs = [c for i, c in enumerate(convs) if i % 4 == 0]
    rows = []
    for window in windows:
        runs: dict[tuple[str, str], list[tuple[Conversation, Run]]] = defaultdict(list)
        for conv in convs:
            asked = dataclasses.replace(
                conv,
                questions=[
                    Question(reword(q.text, conv.language, w), q.answers, f"{q.label}@{w}")
                    for q in conv.questions
                    for w in WORDINGS
                ],
            )
            with tempfile.TemporaryDirectory(prefix="ctxlife-bench-recall-") as tmp:
                ours = run_ctxlife(asked, "llm_summary+recall", window, Path(tmp))
            theirs = run_pair_doc(asked, ours.budgets)
            for method, run in (("llm_summary+recall", ours), ("pair-doc", theirs)):
                for w in WORDINGS:
                    part = [o for o in run.outcomes if o.label.endswith(f"@{w}")]
                    runs[(method, w)].append((conv, Run(part, run.replay_seconds, {}, run.replay_blocks)))
            progress(f"{conv.name} @ {window}")
        for (method, wording), pairs in runs.items():
            for split in ("dev", "heldout"):
                for language in LANGUAGES:
                    group = [(c, r) for c, r in pairs if c.split == split and c.language == language]
                    if group:
                        rows.append(answers_row(data_of(group[0][0]), language, split, method, window, wording, group))
    return rows


# -- recall's own cost at 1k, 10k and 100k messages ------------------------------------------------


def bench_overhead(sizes: Sequence[int], calls: int = 40, runs: int = 3) -> list[dict[str, Any]]:
    """CPU time ``recall`` adds to a ``manage()`` call when the session's history holds N messages.

    The history is written straight to two file stores (a long MemoryBank chat, repeated), one managed
    with ``recall`` and one without; the first call of each (the index built: its one-time cost is
    reported apart) and then ``calls`` more exchanges are made **interleaved** (one call without,
    one with, the order alternating), ``runs`` times; what recall adds is the difference of the
    per-call CPU medians of a run, reported as the median of the runs and their spread (min-max).
    """
    from ctxlife.api import clear_hosts, manage
    from ctxlife.config import settings_from_dict
    from ctxlife.sessions import open_store

    pool = chat_pool("en")
    questions = question_texts("en")
    rows = []
    for size in (100, *sizes):  # the first size warms up imports and caches; it is not reported
        result: dict[str, Any] = {"history_messages": size, "runs": runs, "calls": calls}
        with tempfile.TemporaryDirectory(prefix="ctxlife-bench-recall-") as tmp:
            history = [dict(pool[i % len(pool)]) for i in range(size)]
            settings = {}
            for key in ("without_recall", "with_recall"):
                url = f"file://{tmp}/{key}"
                store = open_store(url)
                store.append("long", history)
                store.close()
                strategies = ["snapshot_restore", "llm_summary"] + (["recall"] if key == "with_recall" else [])
                settings[key] = settings_from_dict(
                    {
                        "strategies": strategies,
                        "store": url,
                        "snapshot_restore": {"restore": False},
                        "llm_summary": {"summarizer": "extractive"},
                    }
                )
            lives = {key: [{"role": "system", "content": SYSTEM_PROMPT["en"]}, *history[-6:]] for key in settings}
            for key, config in settings.items():
                started = time.process_time()
                manage(
                    lives[key] + [{"role": "user", "content": questions[0]}],
                    config=config,
                    context_window=8000,
                    session_id="long",
                )
                result[key] = {"first_call_ms": round((time.process_time() - started) * 1000, 2)}
            adds, medians = [], {key: [] for key in settings}
            p95s: dict[str, list[float]] = {key: [] for key in settings}
            turn = 0
            for _ in range(runs):
                cpu: dict[str, list[float]] = {key: [] for key in settings}
                for i in range(calls):
                    turn += 1
                    order = list(settings) if i % 2 else list(settings)[::-1]
                    for key in order:
                        live = lives[key] = lives[key][-6:]
                        live.append({"role": "user", "content": questions[turn % len(questions)]})
                        started = time.process_time()
                        manage(live, config=settings[key], context_window=8000, session_id="long")
                        cpu[key].append(time.process_time() - started)
                        live.append({"role": "assistant", "content": pool[turn % len(pool)]["content"]})
                for key, times in cpu.items():
                    medians[key].append(statistics.median(times) * 1000)
                    p95s[key].append(sorted(times)[int(0.95 * (len(times) - 1))] * 1000)
                adds.append(medians["with_recall"][-1] - medians["without_recall"][-1])
            clear_hosts()
        for key in settings:
            result[key]["median_ms"] = round(statistics.median(medians[key]), 3)
            result[key]["p95_ms"] = round(statistics.median(p95s[key]), 3)
        result["recall_adds_median_ms"] = round(statistics.median(adds), 3)
        result["recall_adds_spread_ms"] = [round(min(adds), 3), round(max(adds), 3)]
        result["recall_adds_p95_ms"] = round(result["with_recall"]["p95_ms"] - result["without_recall"]["p95_ms"], 3)
        result["recall_first_call_ms"] = round(
            result["with_recall"]["first_call_ms"] - result["without_recall"]["first_call_ms"], 2
        )
        rows.append(result)
    return rows[1:]


# -- index candidates (how the index was chosen) ----------------------------------------------------


def _memorybank_records(language: str, user: str) -> list[Any]:
    from ctxlife.sessions import RawRecord

    out = []
    for day, exchanges in load_bank(language)[user]["history"].items():
        start = datetime.fromisoformat(day + "T12:00").timestamp()
        for i, e in enumerate(exchanges):
            out.append(RawRecord(len(out) + 1, {"role": "user", "content": e["query"]}, recorded_at=start + 2 * i))
            out.append(
                RawRecord(len(out) + 1, {"role": "assistant", "content": e["response"]}, recorded_at=start + 2 * i + 1)
            )
    return out


def bench_candidates() -> list[dict[str, Any]]:
    """Each index candidate: recall@k on the dev half (a hit with one message either side holds the
    answer), time to add messages, and query time at 1,000 and 10,000 messages (CPU time)."""
    from ctxlife.recall import HistoryIndex, index_text, query_terms
    from ctxlife.recall.text import _TERM, NO_SPACE_RUN, STOPWORDS
    from ctxlife.sessions import RawRecord

    try:
        import Stemmer  # PyStemmer, for the candidates that need a stemmer of their own

        stem = Stemmer.Stemmer("english").stemWord
    except ImportError:
        stem = None

    def tokens(text: str) -> list[str]:
        out = _TERM.findall(index_text(text).casefold())
        return [stem(t) if stem and t.isascii() else t for t in out]

    def q_tokens(text: str) -> list[str]:
        return [stem(t) if stem and t.isascii() else t for t in query_terms(text)]

    class Fts5:
        name = "sqlite fts5, porter + CJK bigrams (chosen)"

        def __init__(self) -> None:
            self.index = HistoryIndex()

        def add(self, records: list[Any]) -> None:
            self.index.add(records)

        def search(self, query: str, k: int) -> list[int]:
            return [h.seq for h in self.index.search(query, limit=k, use_dates=False)]

    class Trigram:
        name = "sqlite fts5, trigram tokenizer"

        def __init__(self) -> None:
            self.db = sqlite3.connect(":memory:")
            self.db.execute("CREATE VIRTUAL TABLE f USING fts5(b, tokenize='trigram')")

        def add(self, records: list[Any]) -> None:
            with self.db:
                self.db.executemany(
                    "INSERT INTO f(rowid, b) VALUES (?, ?)", [(r.seq, r.message["content"]) for r in records]
                )

        def search(self, query: str, k: int) -> list[int]:
            terms: list[str] = []
            for t in re.findall(r"[^\W_]+", query.casefold()):
                if NO_SPACE_RUN.fullmatch(t):
                    terms += [t[i : i + 3] for i in range(len(t) - 2)]
                elif len(t) >= 3 and t not in STOPWORDS:
                    terms.append(t)
            if not terms:
                return []
            match = " OR ".join(f'"{t}"' for t in dict.fromkeys(terms))
            return [
                r[0]
                for r in self.db.execute("SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT ?", (match, k))
            ]

    class Bm25s:
        name = "bm25s (re-indexed on every add)"

        def __init__(self) -> None:
            import bm25s

            self.bm25s, self.docs, self.model = bm25s, [], None

        def add(self, records: list[Any]) -> None:
            self.docs += [tokens(r.message["content"]) for r in records]
            self.model = self.bm25s.BM25()
            self.model.index(self.docs, show_progress=False)

        def search(self, query: str, k: int) -> list[int]:
            terms = q_tokens(query)
            if not terms:
                return []
            ids, scores = self.model.retrieve([terms], k=min(k, len(self.docs)), show_progress=False, n_threads=1)
            return [int(i) + 1 for i, s in zip(ids[0], scores[0], strict=True) if s > 0]

    class Tantivy:
        name = "tantivy, en_stem + CJK bigrams"

        def __init__(self) -> None:
            import tantivy

            builder = tantivy.SchemaBuilder()
            builder.add_integer_field("seq", stored=True, indexed=True)
            builder.add_text_field("body", stored=False, tokenizer_name="en_stem")
            self.tantivy = tantivy
            self.index = tantivy.Index(builder.build())
            self.writer = self.index.writer(heap_size=15_000_000, num_threads=1)

        def add(self, records: list[Any]) -> None:
            for r in records:
                self.writer.add_document(self.tantivy.Document(seq=r.seq, body=index_text(r.message["content"])))
            self.writer.commit()
            self.index.reload()

        def search(self, query: str, k: int) -> list[int]:
            terms = query_terms(query)
            if not terms:
                return []
            searcher = self.index.searcher()
            parsed = self.index.parse_query(" OR ".join(terms), ["body"])
            return [searcher.doc(address)["seq"][0] for _, address in searcher.search(parsed, k).hits]

    class PurePython:
        name = "pure-Python BM25 (memory only)"

        def __init__(self) -> None:
            self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
            self.lengths: dict[int, int] = {}
            self.total = 0

        def add(self, records: list[Any]) -> None:
            for r in records:
                words = tokens(r.message["content"])
                for word, tf in Counter(words).items():
                    self.postings[word].append((r.seq, tf))
                self.lengths[r.seq] = len(words)
                self.total += len(words)

        def search(self, query: str, k: int, k1: float = 1.2, b: float = 0.75) -> list[int]:
            n = len(self.lengths)
            average = self.total / max(n, 1)
            scores: dict[int, float] = defaultdict(float)
            for word in dict.fromkeys(q_tokens(query)):
                posting = self.postings.get(word, [])
                idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
                for seq, tf in posting:
                    scores[seq] += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * self.lengths[seq] / average))
            return [seq for seq, _ in sorted(scores.items(), key=lambda x: -x[1])[:k]]

    def quality(cls: Any, language: str) -> dict[int, float]:
        keys = load_answer_keys(language)
        found, total = {1: 0, 3: 0, 5: 0}, 0
        for user in keys["split"]["dev"]:
            records = _memorybank_records(language, user)
            index = cls()
            index.add(records)
            by_seq = {r.seq: r.message["content"] for r in records}
            for key in (q for q in keys["questions"] if q["user"] == user):
                total += 1
                seqs = index.search(key["question"], 5)
                for k in found:
                    shown = {s for hit in seqs[:k] for s in (hit - 1, hit, hit + 1)}
                    text = [{"role": "user", "content": by_seq[s]} for s in sorted(shown) if s in by_seq]
                    found[k] += answered(key["answers"], text)
        return {k: round(v / total, 3) for k, v in found.items()}

    pool: list[dict[str, Any]] = []
    for language in LANGUAGES:
        for user in load_bank(language):
            pool += [r.message for r in _memorybank_records(language, user)]
    questions = [text for language in LANGUAGES for text in question_texts(language)]
    rows = []
    for cls in (Fts5, Trigram, Bm25s, Tantivy, PurePython):
        try:
            cls()
        except ImportError as exc:
            rows.append({"candidate": cls.name, "skipped": f"not installed: {exc.name}"})
            continue
        if cls in (Bm25s, PurePython) and stem is None:
            rows.append({"candidate": cls.name, "skipped": "not installed: Stemmer (PyStemmer)"})
            continue
        row: dict[str, Any] = {
            "candidate": cls.name,
            "recall_at_k_dev": {lang: quality(cls, lang) for lang in LANGUAGES},
        }
        for size in (1_000, 10_000):
            records = [RawRecord(i + 1, pool[i % len(pool)]) for i in range(size)]
            index = cls()
            started = time.process_time()
            index.add(records[:-200])
            bulk = (time.process_time() - started) / (size - 200)
            started = time.process_time()
            for i in range(size - 200, size, 2):  # then one exchange at a time, as a session grows
                index.add(records[i : i + 2])
            one_by_one = (time.process_time() - started) / 200
            cpu = []
            for question in questions:
                started = time.process_time()
                index.search(question, 5)
                cpu.append(time.process_time() - started)
            row[f"at_{size}"] = {
                "bulk_ms_per_message": round(bulk * 1000, 4),
                "incremental_ms_per_message": round(one_by_one * 1000, 4),
                "query_ms_median": round(statistics.median(cpu) * 1000, 3),
                "query_ms_p95": round(sorted(cpu)[int(0.95 * (len(cpu) - 1))] * 1000, 3),
            }
        rows.append(row)
    return rows


# -- main ------------------------------------------------------------------------------------------


def run(quick: bool = False, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Everything this benchmark measures, as one JSON-able dict."""
    offline_environment()  # before anything imports crewai
    replayed = [c for language in LANGUAGES for c in conversations(language)] + synthetic(SYNTHETIC_SEEDS)
    if quick:
        replayed = [c for i, c in enumerate(replayed) if i % 5 == 0]
    started = time.perf_counter()
    answers = bench_answers(replayed, WINDOWS, METHODS, progress)
    # The MemoryBank questions asked again as requests and as statements (recall must not hinge on the
    # wording): ctxlife with recall and the pair-doc baseline only.
    for wording in WORDINGS[1:]:
        again = [reworded(c, wording) for c in replayed if c.name.startswith("memorybank")]
        answers += bench_answers(again, WINDOWS, ("llm_summary+recall", "pair-doc"), progress, wording=wording)
    answers += bench_woz(WINDOWS, progress, quick)
    lead_over_pair_doc(answers)
    # 100k too (issue 41's 5 ms target): writing and indexing it takes ~20 s of CPU (~45 s at load 7), which
    # make bench's 10 minutes have (6.5 min without it on a quiet machine); --quick keeps to 1k and 10k.
    overhead = bench_overhead((1_000, 10_000) if quick else (1_000, 10_000, 100_000), calls=20 if quick else 40)
    return stamp(
        {
            "what": "answers in context after compaction (recall), and what recall adds per call",
            "date": datetime.now().isoformat(timespec="seconds"),
            "python": sys.version.split()[0],
            "sqlite": sqlite3.sqlite_version,
            "cpus": os.cpu_count(),
            "windows": list(WINDOWS),
            "methods": list(METHODS),
            "splits": {
                "memorybank": "users at even positions dev, odd held out",
                "synthetic_agent": {k: list(v) for k, v in SYNTHETIC_SEEDS.items()},
                "multiwoz, crosswoz": "sessions cut from the source's validation split dev, test split held out",
            },
            "answers": answers,
            "recall_overhead": overhead,
            "seconds": round(time.perf_counter() - started, 1),
        }
    )


def lead_over_pair_doc(rows: list[dict[str, Any]]) -> None:
    """Set ``lead_vs_pair_doc`` (points) on each ``llm_summary+recall`` row: its share answered minus pair-doc's,
    for the same data, language, half, window and wording (pair-doc runs at that row's tokens per question)."""
    key = ("data", "language", "split", "window", "wording")
    pair_doc = {tuple(r[k] for k in key): r for r in rows if r["method"] == "pair-doc" and "answer_in_context" in r}
    for row in rows:
        other = pair_doc.get(tuple(row.get(k) for k in key))
        if row["method"] == "llm_summary+recall" and other is not None and "answer_in_context" in row:
            row["lead_vs_pair_doc"] = round(
                100 * (row["answered"] / row["questions"] - other["answered"] / other["questions"]), 1
            )


def print_table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Answers in the context sent (bench_recall)")
    for column in (
        "data",
        "lang",
        "half",
        "window",
        "wording",
        "method",
        "answered",
        "mean tokens",
        "share",
        "ms/question",
        "ms/replay call",
        "chat turns with a block",
        "lead vs pair-doc",
    ):
        table.add_column(column)
    for row in result["answers"]:
        table.add_row(
            row["data"],
            row["language"],
            row["split"],
            str(row["window"]),
            row.get("wording", "question"),
            row["method"],
            f"{row['answer_in_context']:.0%} ({row['answered']}/{row['questions']})",
            str(row["mean_tokens"]),
            f"{row['mean_share_of_window']:.0%}",
            f"{row['ms_per_question_call']:.1f}",
            "-" if row["ms_per_replay_call"] is None else f"{row['ms_per_replay_call']:.1f}",
            f"{row['replay_share_with_block']:.0%}" if "replay_share_with_block" in row else "-",
            f"{row['lead_vs_pair_doc']:+.1f}" if "lead_vs_pair_doc" in row else "-",
        )
    console = Console()
    console.print(table)
    for row in result["recall_overhead"]:
        console.print(
            f"recall at {row['history_messages']:,} messages: "
            f"{row['recall_adds_median_ms']:+,.1f} ms CPU per call (median of {row['runs']} interleaved runs, "
            f"spread {row['recall_adds_spread_ms'][0]:,.1f} to {row['recall_adds_spread_ms'][1]:,.1f}), "
            f"{row['recall_adds_p95_ms']:+,.1f} ms (p95); "
            f"first call {row['recall_first_call_ms']:+,.1f} ms (the index built; one sample)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a fifth of the conversations, fewer timing calls")
    parser.add_argument("--out", type=Path, help="write the results JSON here")
    parser.add_argument(
        "--candidates", action="store_true", help="only compare the index candidates (needs bm25s, tantivy, PyStemmer)"
    )
    args = parser.parse_args(argv)
    if args.candidates:
        rows = bench_candidates()
        print(json.dumps(rows, indent=1, ensure_ascii=False))
        if args.out:
            args.out.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        return 0
    result = run(args.quick, progress=lambda text: print(f"  {text}", file=sys.stderr, flush=True))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print_table(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
