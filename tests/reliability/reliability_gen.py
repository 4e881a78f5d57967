"""Generators and drivers shared by the reliability tests (hypothesis strategies, session drivers).

A conversation is generated as a *script* of intents (a user turn, a chat reply, a ReAct tool step,
a native tool-calling step with several calls) and played by a driver that behaves like an agent
framework: it calls the ``before_llm_call`` pipeline before every model reply, dispatches the tool
nodes around every tool call (so ``tool_cache`` and ``tool_output`` act on what the model will see),
appends the results, and records every message it produced. Strategies therefore see the same
sequence of calls a real agent loop would give them.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import ctxlife
from ctxlife.contexts import TaskContext, ToolCallContext
from ctxlife.messages import SUMMARY_PREFIX, inserted_text, is_summary, is_system, last_user_index, validate

REPO = Path(__file__).resolve().parents[2]


class Probe:
    """A plugin that sees the list right after snapshot_restore's restore: its hook is tryfirst, and it
    is registered after the configured strategies (``plugins=[probe]``), so it runs just after them."""

    name = "probe"

    def __init__(self) -> None:
        self.seen: list[list[dict[str, Any]]] = []

    @ctxlife.hookimpl(tryfirst=True)
    def ctxlife_before_llm_call(self, ctx: Any) -> None:
        self.seen.append(list(ctx.messages))


# CrewAI 1.15's ReAct follow-up prompt (translations/en.json, "post_tool_reasoning").
REACT_PROMPT = (
    "Analyze the tool result. If requirements are met, provide the Final Answer. Otherwise, call the next "
    "tool. Deliver only the answer without meta-commentary."
)
SECRET = "S3CR3T-7f1c9a"  # planted in contents by the security tests

PROFILE = settings(
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
        HealthCheck.large_base_example,
        HealthCheck.filter_too_much,
    ],
    print_blob=True,
)
SCALE = float(os.environ.get("RELIABILITY_EXAMPLES", "1"))


def examples(n: int) -> settings:
    """Hypothesis settings for a property: ``n`` examples (times ``RELIABILITY_EXAMPLES``), no deadline."""
    return settings(PROFILE, max_examples=max(1, int(n * SCALE)))


@contextlib.contextmanager
def captured_events() -> Iterator[list[dict[str, Any]]]:
    """``structlog.testing.capture_logs`` that leaves structlog unconfigured afterwards if it was before
    (capture_logs configures it for good, which would reroute ctxlife's events for later tests)."""
    import structlog
    from structlog.testing import capture_logs

    was_configured = structlog.is_configured()
    try:
        with capture_logs() as captured:
            yield captured
    finally:
        if not was_configured:
            structlog.reset_defaults()


# -- text --------------------------------------------------------------------------------------

_CJK = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
_EMOJI = st.sampled_from(["😀", "🎉", "👍🏽", "👨‍👩‍👧‍👦", "🇨🇳", "❤️", "🧪", "𝔘𝔫𝔦"])
_TRICKY = st.sampled_from(
    ["\u200b", "\u200d", "\u202e", "\ufeff", "\u0301", "\x00", "\n", "\t", "\\", '"', "{", "}", "…"]
)
_ASCII = st.characters(min_codepoint=0x20, max_codepoint=0x7E)
_SURROGATE = st.characters(categories=["Cs"])  # lone surrogates: legal in JSON ("\ud800"), not in UTF-8

_FACTS = st.sampled_from(
    [
        "order ORD-48213",
        "reservation ZFA04Y",
        "user_id mia_li_3668",
        "$1,284.50",
        "2024-05-17 14:30",
        "mia.li@example.com",
        "https://example.com/r/991",
        "/data/invoices/ORD-48213.pdf",
        "42 kg",
        "订单号 HAT136",
    ]
)


def _piece(surrogates: bool) -> st.SearchStrategy[str]:
    alphabet = [_ASCII, _ASCII, _ASCII, _CJK, _TRICKY]
    if surrogates:
        alphabet.append(_SURROGATE)
    word = st.text(st.one_of(*alphabet), min_size=1, max_size=8)
    return st.one_of(word, word, word, _EMOJI, _FACTS)


def texts(*, max_words: int = 16, surrogates: bool = False) -> st.SearchStrategy[str]:
    """Short mixed text: ASCII, CJK, emoji, zero-width and bidi controls, ledger-style facts."""
    return st.lists(_piece(surrogates), max_size=max_words).map(" ".join)


def contents(*, surrogates: bool = False) -> st.SearchStrategy[str]:
    """Message contents: mostly short, sometimes empty, sometimes huge (up to ~40k characters)."""
    short = texts(surrogates=surrogates)
    huge = st.builds(
        lambda unit, n: (unit + " ") * n, texts(max_words=6, surrogates=surrogates).filter(bool), st.integers(100, 800)
    )
    return st.one_of(st.just(""), short, short, short, short, huge)


@st.composite
def json_results(draw: Any) -> str:
    """Tool results that are JSON documents: objects and arrays, nested, long arrays, long strings,
    non-ASCII keys and values (built from a few drawn parts, so generation stays cheap)."""
    leaf = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(10**12), 10**12),
        st.floats(allow_nan=False, allow_infinity=False),
        texts(max_words=4),
    )
    keys = draw(st.lists(texts(max_words=2).filter(bool), min_size=1, max_size=6, unique=True))
    row = {k: draw(leaf) for k in keys}
    if draw(st.booleans()):
        row[keys[0]] = {"nested": draw(leaf), "list": draw(st.lists(leaf, max_size=5))}
    long_text = draw(texts(max_words=4)) * draw(st.integers(1, 300))
    rows = [row] * draw(st.integers(0, 400))
    shape = draw(st.sampled_from(["object", "rows", "array", "string"]))
    value: Any = {
        "object": {**row, "rows": rows, "note": long_text},
        "rows": rows,
        "array": [draw(leaf) for _ in range(draw(st.integers(0, 6)))] * draw(st.integers(1, 200)),
        "string": {"text": long_text},
    }[shape]
    return json.dumps(value, ensure_ascii=draw(st.booleans()))


def tool_results() -> st.SearchStrategy[str]:
    return st.one_of(contents(), json_results())


# -- conversation scripts --------------------------------------------------------------------------

TOOLS = ["lookup", "search", "get_order", "book_flight"]
CALL_IDS = ["call_0", "call_1", "call_2", "toolu_01"]  # a small pool: ids repeat, as in real traces


@dataclass
class User:
    content: str
    cache_breakpoint: bool = False


@dataclass
class Chat:
    content: str | None


@dataclass
class Call:
    tool: str
    args: dict[str, Any]
    call_id: str
    result: str


@dataclass
class Native:
    calls: list[Call]
    content: str | None = None


@dataclass
class React:
    call: Call
    thought: str


_args = st.dictionaries(
    st.sampled_from(["q", "order_id", "城市"]),
    st.one_of(st.integers(0, 1), st.sampled_from(["ORD-1", "東京😀"])),
    max_size=2,
)


def _intents(content: st.SearchStrategy[str], result: st.SearchStrategy[str]) -> tuple[Any, Any]:
    call = st.builds(Call, st.sampled_from(TOOLS), _args, st.sampled_from(CALL_IDS), result)
    native = st.builds(
        Native, st.lists(call, min_size=1, max_size=3), st.one_of(st.none(), st.just(""), texts(max_words=8))
    )
    react = st.builds(React, call, texts(max_words=8))
    chat = st.builds(Chat, st.one_of(content, st.none()))
    user = st.builds(User, content, st.booleans())
    return user, st.one_of(native, native, react, chat)


_ANY = _intents(contents(), tool_results())
_SHORT = _intents(texts(max_words=30), texts(max_words=30))  # no huge contents: targets are reachable


@st.composite
def scripts(draw: Any, *, min_turns: int = 1, max_turns: int = 5, max_steps: int = 4, short: bool = False) -> list[Any]:
    """A conversation script: user turns, each followed by tool steps and replies."""
    user, step = _SHORT if short else _ANY
    script: list[Any] = []
    for _ in range(draw(st.integers(min_turns, max_turns))):
        script.append(draw(user))
        script.extend(draw(st.lists(step, max_size=max_steps)))
        if draw(st.booleans()):
            script.append(Chat(draw(texts(max_words=12))))
    return script


@st.composite
def system_prompts(draw: Any) -> list[dict[str, Any]]:
    """0-2 leading system messages (CrewAI marks some with ``cache_breakpoint``)."""
    out = []
    for i in range(draw(st.integers(0, 2))):
        message: dict[str, Any] = {"role": "system", "content": f"System prompt {i}. " + draw(texts(max_words=12))}
        if draw(st.booleans()):
            message["cache_breakpoint"] = True
        out.append(message)
    return out


# -- the driver ---------------------------------------------------------------------------------------


def canon(value: Any) -> str:
    """Canonical JSON (what "exactly the same" means for message lists)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=True)


@dataclass
class Checks:
    """Counts of invariant checks performed by a driver run (added to the run's statistics)."""

    counts: Counter = field(default_factory=Counter)

    def hit(self, name: str, n: int = 1) -> None:
        self.counts[name] += n


def bootstrap_text_of(host: Any, session_id: str | None) -> str:
    return host.bootstrap_text(session_id=session_id) if host.implements("ctxlife_bootstrap") else ""


def check_call(
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    report: Any,
    host: Any,
    checks: Checks,
    *,
    session_id: str | None,
    restored: bool = False,
) -> None:
    """The invariants of one ``before_llm_call`` dispatch (``before`` is a shallow copy of the input)."""
    assert validate(before) == [], "generator produced an invalid list"
    problems = validate(after)
    assert problems == [], (
        f"provider-invalid output: {problems[:3]} (actions {report.actions}, failures {report.failures})"
    )
    checks.hit("valid_sequence")
    assert report.failures == [], f"a strategy failed on valid input: {report.failures}"
    checks.hit("no_failures")

    # System messages survive (bootstrap may extend the first one; a restore keeps the current ones).
    after_system = [m.get("content") or "" for m in after if is_system(m) and not is_summary(m)]
    for m in before:
        if is_system(m) and not is_summary(m):
            text = m.get("content") or ""
            assert any(text in a for a in after_system), f"system message lost: {text[:60]!r}"
            checks.hit("system_kept")

    # The latest user turn survives, unchanged, as the latest user message.
    i = last_user_index(before)
    if i is not None:
        j = last_user_index(after)
        assert j is not None and after[j] == before[i], "latest user message dropped or changed"
        checks.hit("latest_user_kept")

    # Bootstrap text: exactly once.
    text = bootstrap_text_of(host, session_id)
    if text:
        joined = "\n".join(str(m.get("content") or "") for m in after)
        assert joined.count(text) == 1, f"bootstrap text appears {joined.count(text)} times"
        checks.hit("bootstrap_once")

    # At most one summary message, never nested.
    summaries = [m for m in after if is_summary(m)]
    assert len(summaries) <= 1, f"{len(summaries)} summary messages"
    for m in summaries:
        assert m["content"].count(SUMMARY_PREFIX) == 1, "nested summary"
    checks.hit("summary_not_nested")

    check_claims(before, after, report, host, checks, session_id=session_id, restored=restored)


def _protected_tokens(base: list[dict[str, Any]], counter: Any, keep_units: int) -> int:
    """Tokens llm_summary can never evict: system prompts, the first and the latest user message, the
    question being worked on, the last ``keep_units`` units (see strategies/ctxlife_strategies/llm_summary.py)."""
    from ctxlife.messages import current_turn_index, split_units

    system = [m for m in base if is_system(m) and not is_summary(m)]
    rest = [m for m in base if not is_system(m) and not is_summary(m)]
    users = [k for k, m in enumerate(rest) if m.get("role") == "user"]
    units = split_units(rest)
    tail_start = units[-keep_units].start if len(units) >= keep_units else 0
    turn = current_turn_index(rest)
    keep = (
        set(range(tail_start, len(rest)))
        | ({users[0], users[-1]} if users else set())
        | ({turn} if turn is not None else set())
    )
    return counter.count_messages(system + [rest[k] for k in sorted(keep)])


def check_claims(
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    report: Any,
    host: Any,
    checks: Checks,
    *,
    session_id: str | None,
    restored: bool,
) -> None:
    """ "Under budget whenever a strategy claims it acted", per strategy (docs/reliability.md)."""
    counter = host.counter()
    base = list(before)
    host.apply_bootstrap(base, bootstrap_text_of(host, session_id))
    tokens_base, tokens_after = counter.count_messages(base), counter.count_messages(after)
    window = report.context_window
    acted = {(a.strategy, a.what): a for a in report.actions}
    names = [s.name for s in host.strategies]
    reducers = [a for a in report.actions if a.what in ("truncated", "compacted")]
    if reducers and not restored:
        assert tokens_after < tokens_base, (
            f"{[(a.strategy, a.what) for a in reducers]} claimed to act but tokens {tokens_base} -> {tokens_after}"
        )
        checks.hit("acted_reduces_tokens")
    truncated = acted.get(("truncate_last_n", "truncated"))
    if truncated is not None and names == ["truncate_last_n"]:
        assert len(after) == len(base) - truncated.details["removed_messages"], (
            "truncate_last_n miscounted what it removed"
        )
        assert len(after) < len(base)
        checks.hit("truncate_fewer_messages")
    compacted = acted.get(("llm_summary", "compacted"))
    if compacted is not None and compacted in reducers:
        opts = host.settings.options_for("llm_summary")
        d = compacted.details
        assert d["tokens_after"] < d["tokens_before"], f"compacted but {d['tokens_before']} -> {d['tokens_after']}"
        summary = [m for m in after if is_summary(m)]
        assert len(summary) == 1
        body = inserted_text(summary[0]["content"])[len(SUMMARY_PREFIX) :].strip()  # without ctxlife's mark line
        assert counter.count_text(body) <= opts.max_summary_tokens, "summary over max_summary_tokens"
        checks.hit("summary_reduces_tokens")
        if "llm_summary" in names and all(n in ("llm_summary", "snapshot_restore") for n in names) and not restored:
            target = int(opts.target * window)
            protected = _protected_tokens(base, counter, opts.keep_units)
            if protected + opts.max_summary_tokens + 12 <= target:
                assert tokens_after <= target + 12, (
                    f"compacted to {tokens_after} tokens, target {target} was reachable (protected {protected})"
                )
                checks.hit("summary_reaches_target")


def flatten(system: list[dict[str, Any]], script: list[Any]) -> list[dict[str, Any]]:
    """The message list a recording of ``script`` would hold (no management, tools not dispatched)."""
    out = [dict(m) for m in system]
    for intent in script:
        if isinstance(intent, User):
            out.append({"role": "user", "content": intent.content})
        elif isinstance(intent, Chat):
            out.append({"role": "assistant", "content": intent.content})
        elif isinstance(intent, Native):
            calls = [
                {
                    "id": c.call_id,
                    "type": "function",
                    "function": {"name": c.tool, "arguments": json.dumps(c.args, ensure_ascii=False)},
                }
                for c in intent.calls
            ]
            out.append({"role": "assistant", "content": intent.content, "tool_calls": calls})
            out += [{"role": "tool", "tool_call_id": c.call_id, "content": c.result} for c in intent.calls]
        elif isinstance(intent, React):
            c = intent.call
            out.append(
                {
                    "role": "assistant",
                    "content": f"Thought: {intent.thought}\nAction: {c.tool}\n"
                    f"Action Input: {json.dumps(c.args, ensure_ascii=False)}\nObservation: {c.result}",
                }
            )
            out.append({"role": "user", "content": REACT_PROMPT})
    return out


class Driver:
    """Plays scripts against a host like an agent loop does, and keeps what it produced."""

    def __init__(
        self,
        host: Any,
        checks: Checks,
        *,
        session_id: str | None,
        system: list[dict[str, Any]] | None = None,
        tool_results: dict[str, str] | None = None,
    ) -> None:
        self.host = host
        self.checks = checks
        self.session_id = session_id
        self.live: list[dict[str, Any]] = [dict(m) for m in (system or [])]
        self.produced: list[dict[str, Any]] = list(self.live)  # every message the "framework" appended
        self.recorded_upto = 0  # produced[:recorded_upto] were seen by a model call
        self.capped: dict[str, str] = {}  # ref -> full result (tool_output)
        # cache key -> first raw result (tool_cache's cache is per session: share this across drivers)
        self.tool_results: dict[str, str] = {} if tool_results is None else tool_results
        self.reports: list[Any] = []

    def append(self, message: dict[str, Any]) -> None:
        self.live.append(message)
        self.produced.append(message)

    def model_call(self) -> Any:
        before = list(self.live)
        kept = self.host._table.sessions.get(self.session_id)
        restored_now = (kept is None or kept.calls == 0) and any(
            s.name == "snapshot_restore" for s in self.host.strategies
        )
        report = self.host.manage(self.live)
        self.reports.append(report)
        self.recorded_upto = len(self.produced)
        restored = restored_now and any(a.what == "restored" for a in report.actions)
        check_call(before, self.live, report, self.host, self.checks, session_id=self.session_id, restored=restored)
        return report

    def run_tool(self, call: Call) -> str:
        """Dispatch nodes 3 and 4 around one tool call; return what the model sees."""
        ctx = ToolCallContext(tool_name=call.tool, tool_input=copy.deepcopy(call.args))
        before = self.host.before_tool_call(ctx, session_id=self.session_id)
        assert before.failures == [], before.failures
        skipped = ctx.result
        if skipped is None:
            raw = call.result
            ctx.result, ctx.raw_result = raw, raw
        else:
            raw = None
        after = self.host.after_tool_call(ctx, session_id=self.session_id)
        assert after.failures == [], after.failures
        assert isinstance(ctx.result, str)
        self._check_tool_claims(call, skipped, ctx, before, after)
        return ctx.result

    def _check_tool_claims(
        self, call: Call, skipped: str | None, ctx: ToolCallContext, before: Any, after: Any
    ) -> None:
        counter = self.host.counter()
        for action in before.actions:
            if action.strategy == "tool_cache" and action.what == "hit":
                from ctxlife_strategies.tool_cache import cache_key

                first = self.tool_results[cache_key(call.tool, call.args)]
                assert skipped == f"[cached result from call {action.details['call']}]\n{first}", (
                    "cache hit is not the earlier result"
                )
                self.checks.hit("cache_hit_is_exact")
        if skipped is None and "tool_cache" in [s.name for s in self.host.strategies]:
            from ctxlife_strategies.tool_cache import cache_key

            self.tool_results.setdefault(cache_key(call.tool, call.args), call.result)
        for action in after.actions:
            if action.strategy == "tool_output" and action.what == "capped":
                cap = action.details["cap"]
                assert counter.count_text(ctx.result) <= cap, (
                    f"capped result has {counter.count_text(ctx.result)} tokens, cap {cap}"
                )
                self.capped[action.details["ref"]] = skipped if skipped is not None else call.result
                self.checks.hit("capped_under_cap")

    def play(self, script: list[Any]) -> None:
        for intent in script:
            if isinstance(intent, User):
                message: dict[str, Any] = {"role": "user", "content": intent.content}
                if intent.cache_breakpoint:
                    message["cache_breakpoint"] = True
                self.append(message)
                continue
            self.model_call()  # the model is asked for its next message
            if isinstance(intent, Chat):
                self.append({"role": "assistant", "content": intent.content})
            elif isinstance(intent, Native):
                calls = [
                    {
                        "id": c.call_id,
                        "type": "function",
                        "function": {"name": c.tool, "arguments": json.dumps(c.args, ensure_ascii=False)},
                    }
                    for c in intent.calls
                ]
                self.append({"role": "assistant", "content": intent.content, "tool_calls": calls})
                for c in intent.calls:
                    self.append({"role": "tool", "tool_call_id": c.call_id, "content": self.run_tool(c)})
            elif isinstance(intent, React):
                c = intent.call
                seen = self.run_tool(c)
                text = (
                    f"Thought: {intent.thought}\nAction: {c.tool}\n"
                    f"Action Input: {json.dumps(c.args, ensure_ascii=False)}\nObservation: {seen}"
                )
                self.append({"role": "assistant", "content": text})
                self.append({"role": "user", "content": REACT_PROMPT})
        self.model_call()

    # -- after the session ----------------------------------------------------------------------

    def expected_raw(self) -> list[dict[str, Any]]:
        """What the raw history must hold: every non-system, non-summary message a model call saw."""
        return [m for m in self.produced[: self.recorded_upto] if not is_system(m) and not is_summary(m)]

    def check_raw_history(self, store: Any) -> None:
        raw = [r.message for r in store.read_records(self.session_id)]
        expected = self.expected_raw()
        assert len(raw) == len(expected), f"raw history has {len(raw)} messages, {len(expected)} were produced"
        assert canon(raw) == canon(expected), "raw history differs from what was produced"
        self.checks.hit("raw_exactly_once")
        for ref, full in self.capped.items():
            assert store.get_blob(self.session_id, ref) == full, "offloaded tool result lost"
            self.checks.hit("offloaded_result_kept")


def crewai_task_end(
    host: Any, live: list[dict[str, Any]], output: str, *, session_id: str, task_name: str, task_index: int
) -> Any:
    """Dispatch node 6 the way the CrewAI adapter does (copies of the final list)."""
    ctx = TaskContext(
        task_name=task_name,
        task_index=task_index,
        description=task_name,
        output=output,
        messages=[dict(m) for m in live],
    )
    return host.task_end(ctx, session_id=session_id)


_DIVIDER = "\n\n----------\n\n"


def task_context_texts() -> st.SearchStrategy[str]:
    """The text CrewAI passes into a task from earlier task outputs."""
    return st.lists(contents(), min_size=0, max_size=5).map(_DIVIDER.join)


def first_real_user(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The latest user message that is a real turn (not CrewAI's ReAct follow-up prompt)."""
    for m in reversed(messages):
        if m.get("role") == "user" and m.get("content") != REACT_PROMPT:
            return m
    return None


_VARS = re.compile(r"\{[a-z_]+\}")
