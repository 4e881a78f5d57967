"""Summarizers: turn an evicted span of messages into a short running summary.

Shared by the ``llm_summary`` compaction strategy and by task-boundary
strategies. Framework neutral, pure Python, no import-time side effects.

* :class:`SummaryRequest` -- what to summarize: the evicted ``messages``, the
  ``previous_summary`` (a *running* summary: it is folded together with the new
  messages; old messages are never re-read, summaries are never nested), the
  token budget and the ledger ``facts`` the summary should keep.
* :class:`Summarizer` -- the protocol: ``summarize(request) -> str``.
* :class:`ExtractiveSummarizer` (``"extractive"``) -- offline, no model.
* :class:`LLMSummarizer` (``"llm"``) -- builds a prompt and calls a
  ``complete(messages, max_tokens) -> str`` function supplied by the caller.
* A registry: :func:`register_summarizer`, :func:`get_summarizer`,
  :func:`available_summarizers`; third-party packages can also publish a factory
  under the entry-point group ``ctxlife.summarizers`` (looked up lazily, only
  when an unknown name is asked for)::

      # pyproject.toml of a third-party package
      [project.entry-points."ctxlife.summarizers"]
      bullet = "my_pkg.summaries:BulletSummarizer"

* :func:`render_messages` -- a readable transcript of a span, tool calls paired
  with their results by position.

Summarizers return the summary *body* only; the caller adds the
``History summary:`` marker (:data:`SUMMARY_PREFIX`) when it builds the message.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ctxlife.errors import ConfigError, CtxlifeError, InvalidMessagesError, PluginConflictError, PluginError
from ctxlife.facts import (
    FACT_LIST_HEADER,
    Fact,
    _content_text,
    _Matcher,
    _pair_tool_calls,
    _parse_json,
    _TextIndex,
    extract_facts,
    facts_missing_from,
    format_fact_list,
)

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "ENTRY_POINT_GROUP",
    "SUMMARY_PREFIX",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "Summarizer",
    "SummarizerError",
    "SummaryRequest",
    "available_summarizers",
    "get_summarizer",
    "register_summarizer",
    "render_messages",
    "strip_summary_marker",
    "unregister_summarizer",
]

#: The marker ctxlife puts in front of a summary message ("History summary: ...").
SUMMARY_PREFIX = "History summary:"

#: Entry-point group where third-party packages publish summarizer factories.
ENTRY_POINT_GROUP = "ctxlife.summarizers"


class SummarizerError(CtxlifeError):
    """A summarizer was given a bad request or produced an unusable result."""


# --------------------------------------------------------------------------------------
# request / protocol
# --------------------------------------------------------------------------------------


@dataclass
class SummaryRequest:
    """What a summarizer is asked to do.

    ``messages``
        the evicted span (OpenAI-format message dicts), oldest first.
    ``previous_summary``
        the running summary so far (with or without the ``History summary:``
        marker), or ``None``. It is folded in; the messages it summarized are
        not part of ``messages``.
    ``max_tokens``
        the budget for the returned text, measured with ``count_tokens``.
    ``count_tokens``
        ``str -> int``, the caller's token counter.
    ``facts``
        the ledger facts of the span (from :func:`ctxlife.facts.extract_facts`);
        ``None`` lets the summarizer extract them itself.
    """

    messages: Sequence[Mapping[str, Any]]
    previous_summary: str | None
    max_tokens: int
    count_tokens: Callable[[str], int]
    facts: Sequence[Fact] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.messages, (str, bytes)) or not isinstance(self.messages, Sequence):
            raise InvalidMessagesError(
                f"SummaryRequest.messages must be a list of message dicts, got {type(self.messages).__name__}"
            )
        for i, m in enumerate(self.messages):
            if not isinstance(m, Mapping):
                raise InvalidMessagesError(
                    f"SummaryRequest.messages[{i}] must be a message dict, got {type(m).__name__}"
                )
        if self.previous_summary is not None and not isinstance(self.previous_summary, str):
            raise SummarizerError("SummaryRequest.previous_summary must be a string or None")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 0:
            raise SummarizerError(f"SummaryRequest.max_tokens must be an int >= 0, got {self.max_tokens!r}")
        if not callable(self.count_tokens):
            raise SummarizerError("SummaryRequest.count_tokens must be a callable str -> int")


@runtime_checkable
class Summarizer(Protocol):
    """Anything with ``summarize(request) -> str``.

    The result is the summary body (no ``History summary:`` marker). Callers
    must treat an empty result, an exception or a result over
    ``request.max_tokens`` as a failed summary.
    """

    def summarize(self, request: SummaryRequest) -> str: ...


# --------------------------------------------------------------------------------------
# markers, rendering
# --------------------------------------------------------------------------------------

_MARKER_RE = re.compile(r"\s*(?:#+\s*)?\**\s*History summary\s*:\**\s*", re.IGNORECASE)
_ANY_MARKER_RE = re.compile(r"History summary\s*:", re.IGNORECASE)


def strip_summary_marker(text: str | None) -> str:
    """Remove every ``History summary:`` marker (leading or nested) from ``text``,
    so that folding a previous summary never nests one summary inside another."""
    if not text:
        return ""
    s = text
    while (m := _MARKER_RE.match(s)) is not None:
        s = s[m.end() :]
    s = _ANY_MARKER_RE.sub("", s)
    return s.strip()


def _is_summary_message(msg: Mapping[str, Any]) -> bool:
    """A message that starts with the ``History summary:`` marker."""
    if msg.get("role") not in ("system", "user", "assistant"):
        return False
    return _MARKER_RE.match(_content_text(msg.get("content"))) is not None


_SIMPLE_VALUE_RE = re.compile(r"^[\w@.:/+#$%-]+$")


def _compact(value: Any, depth: int = 0) -> str:
    """A quote-free compact rendering of JSON data: ``{a: 1, b: [x, y]}``."""
    if depth > 30:
        return "…"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_compact(v, depth + 1)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_compact(v, depth + 1) for v in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    s = str(value)
    if s and _SIMPLE_VALUE_RE.match(s):
        return s
    return json.dumps(s, ensure_ascii=False)


def _terse(value: Any, depth: int = 0) -> str:
    """Values only, for nested data in a tight spot: ``{flight_number: HAT136,
    date: 2024-05-20}`` -> ``HAT136 2024-05-20``."""
    if depth > 20:
        return "…"
    if isinstance(value, Mapping):
        return " ".join(_terse(v, depth + 1) for v in value.values() if v not in (None, "", [], {}))
    if isinstance(value, list):
        return "[" + ", ".join(_terse(v, depth + 1) for v in value) + "]"
    return _compact(value)


def _render_args(arguments: Any, max_value_chars: int | None = None) -> str:
    """``{"user_id": "mia_li_3668"}`` -> ``user_id=mia_li_3668``."""
    data = arguments
    if isinstance(arguments, str):
        parsed = _parse_json(arguments)
        if parsed is None:
            s = arguments.strip()
            if max_value_chars and len(s) > max_value_chars:
                s = s[:max_value_chars] + "…"
            return s
        data = parsed
    if isinstance(data, Mapping):
        parts = []
        for k, v in data.items():
            r = _compact(v)
            if max_value_chars and len(r) > max_value_chars:
                r = r[:max_value_chars] + "…"
            parts.append(f"{k}={r}")
        return ", ".join(parts)
    if data is None:
        return ""
    return _compact(data)


def _result_text(content: Any) -> str:
    text = _content_text(content)
    data = _parse_json(text)
    if data is not None:
        return _compact(data)
    return re.sub(r"\s+", " ", text).strip()


def _indent(text: str) -> str:
    return text.replace("\n", "\n  ")


def _tool_name(call: Mapping[str, Any]) -> str:
    fn = call.get("function") if isinstance(call, Mapping) else None
    name = fn.get("name") if isinstance(fn, Mapping) else None
    return str(name) if name else "tool"


def _tool_args(call: Mapping[str, Any]) -> Any:
    fn = call.get("function") if isinstance(call, Mapping) else None
    return fn.get("arguments") if isinstance(fn, Mapping) else None


def render_messages(messages: Sequence[Mapping[str, Any]]) -> str:
    """Render a span as readable transcript lines, one entry per message/tool call::

        User: Sure, my user ID is mia_li_3668.
        Assistant called get_user_details(user_id=mia_li_3668) -> {name: {first_name: Mia, ...}, ...}
        Assistant: Here are the available flights ...

    Tool calls are paired with their results by position (ids are only trusted
    inside one assistant turn, since real traces reuse them); a call without a
    result shows ``-> (no result yet, call id ...)``; a result that answers no
    call is shown as ``Tool NAME returned: ...``. A ``History summary:`` message
    in the span is shown as ``Earlier summary: ...`` with its marker removed.
    """
    msgs = [m for m in messages if isinstance(m, Mapping)]
    pairs, _orphans = _pair_tool_calls(msgs)
    answered = set(pairs.values())
    lines: list[str] = []
    for i, msg in enumerate(msgs):
        role = str(msg.get("role") or "unknown")
        text = _content_text(msg.get("content")).strip()
        if role == "tool":
            if i in answered:
                continue
            name = msg.get("name") or "tool"
            lines.append(f"Tool {name} returned: {_result_text(msg.get('content'))}")
            continue
        if text:
            if _is_summary_message(msg):
                lines.append("Earlier summary: " + _indent(strip_summary_marker(text)))
            else:
                label = {"system": "System", "user": "User", "assistant": "Assistant"}.get(role, role.capitalize())
                lines.append(f"{label}: {_indent(text)}")
        for ci, call in enumerate(msg.get("tool_calls") or []):
            if not isinstance(call, Mapping):
                continue
            head = f"Assistant called {_tool_name(call)}({_render_args(_tool_args(call))})"
            j = pairs.get((i, ci))
            if j is None:
                cid = call.get("id")
                lines.append(head + (f" -> (no result yet, call id {cid})" if cid else " -> (no result yet)"))
            else:
                lines.append(head + " -> " + _result_text(msgs[j].get("content")))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# the extractive summarizer
# --------------------------------------------------------------------------------------

_DECISION_RE = re.compile(
    r"\b(?:I will|I'll|I've|I have|we will|we'll|let me|going to|decided|decide|decision|confirm(?:ed|s|ation)?|"
    r"book(?:ed|ing)?|cancel(?:l?ed|l?ing|lation)?|updated?|changed?|modif(?:y|ied)|upgrad(?:e|ed)|"
    r"refund(?:ed)?|charged?|paid|pay|transferr?(?:ed|ing)?|approved?|denied|deny|agreed?|select(?:ed)?|"
    r"chose|choose|completed?|successful(?:ly)?|proceed(?:ed|ing)?|done|issued|sent|created?|deleted?|"
    r"removed?|added|saved|wrote|written|final answer|conclusion|conclude|result|total|not eligible|"
    r"eligible|policy|must|cannot|can't|unable)\b",
    re.IGNORECASE,
)
_REQUEST_RE = re.compile(
    r"\b(?:I want|I'd like|I would like|I need|I'm looking|I am looking|please|can you|could you|"
    r"would you|help me|I wish|my (?:user|reservation|order|booking)|I prefer|I'd prefer|instead|"
    r"yes|no,|go ahead|don't|do not)\b",
    re.IGNORECASE,
)
_ERROR_RE = re.compile(
    r"\b(?:error|errors|failed|failure|fail|exception|traceback|not found|invalid|denied|refused|"
    r"timed? ?out|unavailable|not available|does not|doesn't|cannot|can't|unable)\b",
    re.IGNORECASE,
)
_WRITE_TOOL_RE = re.compile(
    r"book|cancel|update|create|delete|remove|send|transfer|modify|write|pay|refund|submit|post|put|"
    r"set|insert|upgrade|change|save|issue|approve",
    re.IGNORECASE,
)
_SENT_SPLIT_RE = re.compile(r"(?<=[.!?。！？])\s+(?=[\"'(\[A-Z0-9*#])")
_MD_RE = re.compile(r"\*\*|__|`{1,3}|^#+\s*", re.MULTILINE)
_REACT_RE = re.compile(
    r"(?:Thought:\s*(?P<thought>.*?)\s*)?Action:\s*(?P<action>[^\n]*?)\s*\n\s*Action Input:\s*(?P<input>.*?)"
    r"(?:\n\s*Observation:\s*(?P<obs>.*))?\s*$",
    re.DOTALL,
)
_FINAL_RE = re.compile(r"Final Answer:\s*(?P<final>.*)$", re.DOTALL)

#: Value of keeping a fact, by kind. Facts that were said by the user or the
#: assistant, passed as tool arguments or kept by the previous summary count in
#: full; facts only seen in tool output count ``_UNSPOKEN`` of it (a search
#: result lists many flights; the one the user picked is what matters).
_KIND_WEIGHT = {
    "id": 2.0,
    "code": 2.0,
    "email": 1.5,
    "url": 1.5,
    "path": 1.5,
    "amount": 1.0,
    "date": 1.0,
    "time": 0.6,
    "number": 0.7,
}
_UNSPOKEN = 0.35
_MIN_COST = 10  # short units are not free: "Is that OK?" says little on its own
_MIN_RATIO = 0.2  # value per token under which a low-value fragment is not worth its tokens


def _norm_key(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


_TRIVIAL_RE = re.compile(
    r"^(?:(?:hi|hello|hey|thanks|thank you|ok|okay|sure|great|perfect|got it|you're welcome|yes|no|yep|nope|"
    r"no problem|please hold on|one moment)[\s,!.]*(?:there|so much|very much|again)?[\s!.]*)+$",
    re.IGNORECASE,
)
_LIST_MARK_RE = re.compile(r"^(?:[-*•]+|\d{1,2}[.)]|[a-zA-Z][.)])\s+")


def _sentences(text: str, max_chars: int = 240) -> list[str]:
    """Split prose into sentence-sized units. List numbering is dropped and the
    lines of one paragraph are joined with ``; ``, so a markdown list item stays
    next to its heading (``Flight HAT069; Departure: 06:00 AM EST; ...``)."""
    text = _MD_RE.sub("", text)
    out: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        lines = []
        for ln in para.splitlines():
            ln = ln.strip()
            while True:
                m = _LIST_MARK_RE.match(ln)
                if not m:
                    break
                ln = ln[m.end() :]
            if ln:
                lines.append(ln)
        if not lines:
            continue
        joined = ""
        for ln in lines:
            if not joined:
                joined = ln
            elif joined.endswith((":", ",", ".", "!", "?", ";")):
                joined += " " + ln
            else:
                joined += "; " + ln
        pieces: list[str] = []
        for sent in _SENT_SPLIT_RE.split(joined):
            sent = re.sub(r"\s+", " ", sent).strip()
            if pieces and re.fullmatch(r"(?:\d{1,3}|[A-Za-z]{1,3})[.)]?", pieces[-1]):
                pieces[-1] = pieces[-1] + " " + sent  # "5." "Would you ..." -> one sentence
            elif sent:
                pieces.append(sent)
        for sent in pieces:
            while len(sent) > max_chars:
                cut = sent.rfind(" ", max_chars // 2, max_chars)
                cut = cut if cut > 0 else max_chars
                out.append(sent[:cut].strip())
                sent = sent[cut:].strip()
            if sent:
                out.append(sent)
    return out


@dataclass
class _Group:
    """A rendered line of the summary: a message or a tool call."""

    order: int
    kind: str  # "prev" | "user" | "assistant" | "call"
    head: str  # "User:" / "called name(args) -> short result" / ""
    head_tokens: int = 0
    head_value: float = 0.0  # worth of the line itself (tool calls)
    head_facts: frozenset = frozenset()
    opened: bool = False  # the line is in the summary
    has_result: bool = False
    write: bool = False  # a tool call that changes state (book, cancel, send, ...)
    call: str = ""  # "called name(args)" as shown
    call_full: str = ""  # ... with all arguments (when ``call`` is a diff to the previous call)
    suffix: str = ""  # " -> short result" / " -> (no result yet, ...)"


@dataclass
class _Item:
    group: _Group
    order: int
    text: str
    tokens: int
    base: float
    facts: frozenset = field(default_factory=frozenset)
    selected: bool = False


class ExtractiveSummarizer:
    """Offline summarizer: keeps what carries the ledger's facts, the user's requests,
    decisions, open questions and errors, and fits the budget exactly.

    How it works:

    1. The span is cut into candidate units: sentences of user and assistant
       messages (a markdown list stays one unit with its heading), one line per
       tool call, ``called NAME(args)``, with a short result riding along
       (``-> Error: ...``) or fragments of a long one (JSON results are split along
       their structure; fragments of a list element are labelled with its
       id/code). Long free-text arguments (a ``think`` tool's thought) become
       prose; a repeated call shows only the arguments that changed; a call
       without a result shows ``-> (no result yet, call id ...)``. CrewAI ReAct
       text (``Action:``/``Action Input:``/``Observation:``) is read as tool calls.
    2. Each unit is worth a base value (requests and the first request most,
       errors, decisions, questions of the last message, state-changing calls)
       plus the weight of the ledger facts it adds: ids and codes weigh most, and
       facts said in the conversation, passed as arguments or kept by the previous
       summary weigh about three times more than facts only seen in tool output.
    3. Up to ``fact_share`` of the budget is reserved for a ``Key facts:`` block
       (only as much as the whole ledger needs). State-changing tool calls are
       put in first, newest first; then units are picked greedily by value per
       token; duplicates are skipped. The ledger facts the chosen units do not
       carry go in the ``Key facts:`` block (most valuable first, see
       :func:`ctxlife.facts.format_fact_list`), and budget still left is spent on
       more units.
    4. The previous summary is folded first: its lines compete in the same
       selection and its facts (its own ``Key facts:`` block is parsed back) join
       the ledger at full weight, so folding compresses it only when the budget
       forces it and never nests one summary or fact block inside another.

    Lines are rendered in chronological order (previous summary first). The
    result is checked with ``count_tokens`` and never exceeds ``max_tokens``.

    Options: ``fact_list`` (append the ``Key facts:`` block, default on),
    ``fact_share`` (its budget share, default 0.5), ``max_call_tokens`` (budget of
    one ``called ...`` line, x1.5 for state-changing tools), ``fragment_tokens``
    (size of tool-result fragments).
    """

    name = "extractive"

    def __init__(
        self,
        *,
        fact_list: bool = True,
        fact_share: float = 0.5,
        max_call_tokens: int = 60,
        fragment_tokens: int = 40,
    ) -> None:
        if not 0.0 <= fact_share <= 1.0:
            raise ConfigError(f"ExtractiveSummarizer: fact_share must be within [0, 1], got {fact_share!r}")
        if max_call_tokens < 8 or fragment_tokens < 8:
            raise ConfigError("ExtractiveSummarizer: max_call_tokens and fragment_tokens must be >= 8")
        self.fact_list = fact_list
        self.fact_share = fact_share
        self.max_call_tokens = max_call_tokens
        self.fragment_tokens = fragment_tokens

    def __repr__(self) -> str:  # pragma: no cover - trivial
        return f"ExtractiveSummarizer(fact_list={self.fact_list}, fact_share={self.fact_share})"

    # ---- public -----------------------------------------------------------------------

    def summarize(self, request: SummaryRequest) -> str:
        budget = request.max_tokens
        if budget <= 0:
            return ""
        cache: dict[str, int] = {}
        raw_count = request.count_tokens

        def count(s: str) -> int:
            n = cache.get(s)
            if n is None:
                n = int(raw_count(s))
                cache[s] = n
            return n

        run = _Run(self, request, count)
        return run.build()


class _Run:
    """One summarize() call of :class:`ExtractiveSummarizer`."""

    def __init__(self, cfg: ExtractiveSummarizer, request: SummaryRequest, count: Callable[[str], int]) -> None:
        self.cfg = cfg
        self.req = request
        self.count = count
        self.budget = request.max_tokens
        self.groups: list[_Group] = []
        self.items: list[_Item] = []
        self._seen_text: set[str] = set()
        self.weights: dict[tuple[str, str], float] = {}
        self.ledger: list[Fact] = []
        self._last_args: dict[str, Any] = {}
        self._ident_cache: dict[str, bool] = {}

    # ---- ledger -----------------------------------------------------------------------

    def _build_ledger(self, prev_text: str, prev_facts: list[Fact]) -> None:
        msgs = [m for m in self.req.messages if not _is_summary_message(m)]
        span_facts = list(self.req.facts) if self.req.facts is not None else extract_facts(msgs)
        ledger: list[Fact] = []
        seen: set[tuple[str, str]] = set()
        for f in list(prev_facts) + span_facts:
            if f.key not in seen:
                seen.add(f.key)
                ledger.append(f)
        self.ledger = ledger
        self._matcher = _Matcher(ledger)
        # salience: said in conversation / passed as arguments / kept by the previous summary
        spoken: list[str] = [prev_text]
        for m in msgs:
            if m.get("role") in ("user", "assistant"):
                spoken.append(_content_text(m.get("content")))
            for call in m.get("tool_calls") or []:
                if isinstance(call, Mapping):
                    a = _tool_args(call)
                    spoken.append(a if isinstance(a, str) else json.dumps(a, default=str))
        spoken_index = _TextIndex("\n".join(spoken))
        prev_keys = {f.key for f in prev_facts}
        for f in ledger:
            w = _KIND_WEIGHT.get(f.kind, 1.0)
            if not (f.key in prev_keys or spoken_index.contains(f)):
                w *= _UNSPOKEN
            self.weights[f.key] = w

    def _facts_in(self, text: str) -> frozenset:
        if not self.ledger or not text:
            return frozenset()
        return frozenset(f.key for f in self._matcher.present(text))

    # ---- candidates -------------------------------------------------------------------

    def _group(self, kind: str, head: str) -> _Group:
        g = _Group(order=len(self.groups), kind=kind, head=head)
        g.head_tokens = self.count(head + " ") if head else 0
        self.groups.append(g)
        return g

    def _add(self, group: _Group, text: str, base: float, *, dedupe: bool = True) -> None:
        text = text.strip()
        if not text:
            return
        key = _norm_key(text)
        if dedupe:
            if key in self._seen_text:
                return
            self._seen_text.add(key)
        tokens = self.count(text) + 1  # + separator
        self.items.append(
            _Item(group=group, order=len(self.items), text=text, tokens=tokens, base=base, facts=self._facts_in(text))
        )

    def _add_prose(self, kind: str, text: str, position: float, bonus: float = 0.0) -> None:
        label = {"user": "User:", "assistant": "Assistant:", "prev": ""}[kind]
        g = self._group(kind, label)
        if kind == "prev" and self.count(text) <= 60:
            units = [re.sub(r"\s+", " ", text).strip()]  # a line of our own earlier summary: keep it whole
        else:
            units = _sentences(text)
        for sent in units:
            base = 0.6
            key = False  # a request, decision, question or error: the units a bonus applies to
            if kind == "prev":
                base, key = 2.0, True
            elif kind == "user":
                base = 0.8
                if _REQUEST_RE.search(sent):
                    base, key = 3.0, True
                if sent.rstrip().endswith("?"):
                    base, key = max(base, 2.5), True
            elif kind == "assistant":
                if _DECISION_RE.search(sent):
                    base, key = 2.0, True
                if sent.rstrip().endswith("?"):
                    base, key = max(base, 1.0), True  # open questions: the last message gets a bonus
                if _ERROR_RE.search(sent):
                    base, key = max(base, 2.0), True
            base += 0.8 * position + (bonus if key else 0.0)  # recent units matter a bit more
            if _TRIVIAL_RE.match(sent):
                base = 0.05
            self._add(g, sent, base)

    def _set_head(self, g: _Group, call: str, suffix: str | None = None) -> None:
        g.call = call
        if suffix is not None:
            g.suffix = suffix
        g.head = g.call + g.suffix
        g.head_tokens = self.count(g.head + (" -> " if g.has_result and not g.suffix else " "))
        g.head_facts = self._facts_in(g.head)

    def _add_call(
        self, name: str, args: Any, result: Any | None, has_result: bool, call_id: str | None, position: float
    ) -> None:
        parsed = _parse_json(args) if isinstance(args, str) else args
        shown: Any = parsed if parsed is not None else args
        if isinstance(parsed, Mapping):
            # long free-text arguments (a "thought", a "summary", a message body) read as prose
            shown = dict(parsed)
            for k, v in parsed.items():
                if isinstance(v, str) and len(v) > 80 and " " in v:
                    self._add_prose("assistant", v, position)
                    shown[k] = "…"
        full = self._call_head(name, shown)
        call = full
        prev_args = self._last_args.get(name)
        if isinstance(shown, Mapping) and isinstance(prev_args, Mapping):
            changed = {k: v for k, v in shown.items() if prev_args.get(k) != v}
            if not changed and set(shown) == set(prev_args):
                call = f"called {name} again with the same arguments"
            elif changed and len(changed) < len(shown):
                diff = self._call_head(name, changed)
                diff = diff[:-1] + ", other arguments as before)"
                if self.count(diff) < self.count(full):
                    call = diff
        self._last_args[name] = shown
        g = self._group("call", "")
        g.has_result = has_result
        g.write = bool(_WRITE_TOOL_RE.search(name))
        g.call_full = full
        g.head_value = 3.0 + (1.5 if g.write else 0.0) + 0.8 * position
        if not has_result:
            g.head_value += 1.0
            note = f" -> (no result yet, call id {call_id})" if call_id else " -> (no result yet)"
            self._set_head(g, call, note)
            return
        text = _content_text(result) if not isinstance(result, (dict, list)) else ""
        data = result if isinstance(result, (dict, list)) else _parse_json(text)
        rendered = _compact(data) if data is not None else re.sub(r"\s+", " ", text).strip()
        if not rendered:
            rendered = "(no output)"
        is_error = bool(_ERROR_RE.search(rendered[:200]))
        if self.count(rendered) <= 14:
            # a short result rides along with the call itself
            g.head_value += 3.0 if is_error else 0.3
            if (
                data is None
                and not text.strip()
                and isinstance(shown, Mapping)
                and all(v == "…" for v in shown.values())
            ):
                g.head_value = 0.3  # e.g. think(thought=…) -> (no output): the thought is kept as prose
            self._set_head(g, call, f" -> {rendered}")
            return
        self._set_head(g, call, "")
        if data is not None:
            seen_frags: set[str] = set()
            for frag in self._fragments(data, ""):
                if frag in seen_frags:
                    continue
                seen_frags.add(frag)
                self._add(g, frag, 0.15 + (2.5 if _ERROR_RE.search(frag) else 0.0), dedupe=False)
        else:
            for sent in _sentences(text):
                self._add(g, sent, 0.3 + (2.5 if _ERROR_RE.search(sent) else 0.0), dedupe=False)

    def _call_head(self, name: str, args: Any) -> str:
        """``called NAME(args)`` within ``max_call_tokens`` (x1.5 for tools that change
        state): long values are cut, then nested data is written values-only
        (``flights=[HAT136 2024-05-20, HAT039 2024-05-20]``), then arguments that
        carry no fact and are not short are left out, then the tail is cut."""
        limit = int(self.cfg.max_call_tokens * (1.5 if _WRITE_TOOL_RE.search(name) else 1.0))
        head = f"called {name}({_render_args(args)})"
        if self.count(head) <= limit:
            return head
        if not isinstance(args, Mapping):
            return truncate_to_tokens(f"called {name}({_render_args(args, 40)}", limit - 1, self.count) + ")"
        terse = [(k, _terse(v)) for k, v in args.items()]
        head = f"called {name}(" + ", ".join(f"{k}={v}" for k, v in terse) + ")"
        if self.count(head) <= limit:
            return head
        kept = [(k, v[:60] + ("…" if len(v) > 60 else "")) for k, v in terse if len(v) <= 12 or extract_facts(v)]
        parts: list[str] = []
        for k, v in kept:
            trial = f"called {name}(" + ", ".join(parts + [f"{k}={v}"]) + ", …)"
            if self.count(trial) > limit:
                break
            parts.append(f"{k}={v}")
        if len(parts) == len(terse):
            return f"called {name}(" + ", ".join(parts) + ")"
        return f"called {name}(" + ", ".join(parts + ["…"]) + ")"

    def _fragments(self, value: Any, label: str, depth: int = 0) -> list[str]:
        """Split JSON data into fragments of about ``fragment_tokens``: scalar fields
        of a dict are packed together, nested containers are split recursively, and
        every fragment of a list element is labelled with the element's id/code."""
        text = (label + _compact(value)) if label else _compact(value)
        if not isinstance(value, (dict, list)) or depth > 6 or self.count(text) <= self.cfg.fragment_tokens:
            return [text]
        cap = self.cfg.fragment_tokens
        out: list[str] = []
        if isinstance(value, Mapping):
            ident = self._identity(value)
            head = label
            if ident and not label.endswith(ident + " "):
                head = f"{label}{ident} "
            chunk: list[str] = []

            def flush() -> None:
                if chunk:
                    out.append(head + ", ".join(chunk))
                    chunk.clear()

            for k, v in value.items():
                if ident is not None and isinstance(v, (str, int)) and str(v) == ident:
                    continue
                if isinstance(v, (dict, list)) and self.count(f"{k}: {_compact(v)}") > cap // 2:
                    flush()
                    out.extend(self._fragments(v, f"{head}{k}: ", depth + 1))
                    continue
                piece = f"{k}: {_compact(v)}"
                if chunk and self.count(head + ", ".join(chunk + [piece])) > cap:
                    flush()
                chunk.append(piece)
            flush()
            if ident is not None and not out:
                out.append(label + ident)
        else:
            for v in value:
                if isinstance(v, Mapping):
                    sub_text = label + _compact(v)
                    if self.count(sub_text) <= cap:
                        out.append(sub_text)
                    else:
                        out.extend(self._fragments(v, label, depth + 1))
                else:
                    out.extend(self._fragments(v, label, depth + 1))
        return out

    def _identity(self, value: Mapping[str, Any]) -> str | None:
        """The first scalar of a dict that is an id/code fact (used as a label)."""
        for v in value.values():
            if isinstance(v, str) and 3 <= len(v) <= 40:
                ok = self._ident_cache.get(v)
                if ok is None:
                    facts = extract_facts(v)
                    ok = bool(facts) and facts[0].text == v and facts[0].kind in ("id", "code")
                    self._ident_cache[v] = ok
                if ok:
                    return v
        return None

    def _collect(self, msgs: list[Mapping[str, Any]]) -> None:
        pairs, _ = _pair_tool_calls(msgs)
        answered = set(pairs.values())
        n = max(len(msgs), 1)
        skip: set[int] = set()
        first_user = next((i for i, m in enumerate(msgs) if m.get("role") == "user"), None)
        last_user = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].get("role") == "user"), None)
        last_asst = next(
            (
                i
                for i in range(len(msgs) - 1, -1, -1)
                if msgs[i].get("role") == "assistant" and _content_text(msgs[i].get("content")).strip()
            ),
            None,
        )
        for i, msg in enumerate(msgs):
            if i in skip:
                continue
            pos = i / n
            role = msg.get("role")
            text = _content_text(msg.get("content")).strip()
            if role == "tool":
                if i in answered:
                    continue
                self._add_call(str(msg.get("name") or "tool"), None, msg.get("content"), True, None, pos)
                continue
            if role == "assistant" and text:
                react = _REACT_RE.search(text)
                final = _FINAL_RE.search(text)
                if react and not final:
                    prefix = text[: react.start()].strip()
                    thought = (prefix + " " + (react.group("thought") or "")).strip()
                    if thought:
                        self._add_prose("assistant", thought, pos)
                    obs = react.group("obs")
                    has = obs is not None
                    if not has and i + 1 < len(msgs) and msgs[i + 1].get("role") == "user":
                        nxt = _content_text(msgs[i + 1].get("content")).strip()
                        if nxt.startswith("Observation:"):
                            obs, has = nxt[len("Observation:") :].strip(), True
                            skip.add(i + 1)
                    self._add_call(
                        react.group("action").strip() or "tool", react.group("input").strip(), obs, has, None, pos
                    )
                elif final:
                    before = text[: final.start()].strip()
                    if before:
                        self._add_prose("assistant", re.sub(r"^Thought:\s*", "", before), pos)
                    self._add_prose("assistant", final.group("final"), min(1.0, pos + 0.5))
                else:
                    self._add_prose("assistant", text, pos, 1.5 if i == last_asst else 0.0)
            elif role in ("user", "system") and text:
                if text.startswith("Observation:"):
                    self._add_prose("assistant", text, pos)
                else:
                    bonus = 2.5 if i == first_user else 1.5 if i == last_user else 0.0
                    self._add_prose("user" if role == "user" else "assistant", text, pos, bonus)
            for ci, call in enumerate(msg.get("tool_calls") or []):
                if not isinstance(call, Mapping):
                    continue
                j = pairs.get((i, ci))
                self._add_call(
                    _tool_name(call),
                    _tool_args(call),
                    msgs[j].get("content") if j is not None else None,
                    j is not None,
                    call.get("id"),
                    pos,
                )

    # ---- selection --------------------------------------------------------------------

    def _select(self, budget: int, covered: set, min_ratio: float = 0.0) -> None:
        """Greedy: add the unit (sentence, result fragment or tool-call line) with the
        best value per token that still fits ``budget`` more tokens, until none does.
        Low-value units (fragments, filler) worth less than ``min_ratio`` per token
        are left out: their facts are cheaper in the ``Key facts:`` block."""
        weights = self.weights
        used = 0
        items = [it for it in self.items if not it.selected]
        heads = [g for g in self.groups if g.kind == "call"]
        while True:
            best: Any = None
            best_ratio = 0.0
            for it in items:
                if it.selected:
                    continue
                g = it.group
                cost = it.tokens + (0 if g.opened else g.head_tokens)
                if used + cost > budget:
                    continue
                gain = it.base + sum(weights.get(k, 0.0) for k in it.facts if k not in covered)
                if not g.opened:
                    gain += g.head_value * 0.5 + sum(
                        weights.get(k, 0.0) for k in g.head_facts if k not in covered and k not in it.facts
                    )
                ratio = gain / max(cost, _MIN_COST)
                if it.base < 1.0 and ratio < min_ratio:
                    continue  # a low-value fragment: its facts are cheaper in the Key facts block
                if ratio > best_ratio:
                    best, best_ratio = it, ratio
            for g in heads:
                if g.opened or used + g.head_tokens > budget:
                    continue
                gain = g.head_value + sum(weights.get(k, 0.0) for k in g.head_facts if k not in covered)
                ratio = gain / max(g.head_tokens, _MIN_COST)
                if ratio > best_ratio:
                    best, best_ratio = g, ratio
            if best is None:
                return
            if isinstance(best, _Group):
                best.opened = True
                used += best.head_tokens
                covered.update(best.head_facts)
                continue
            g = best.group
            if not g.opened:
                g.opened = True
                used += g.head_tokens
                covered.update(g.head_facts)
            best.selected = True
            used += best.tokens
            covered.update(best.facts)

    def _render_body(self) -> str:
        by_group: dict[int, list[_Item]] = {}
        for it in self.items:
            if it.selected:
                by_group.setdefault(it.group.order, []).append(it)
        lines: list[str] = []
        for g in self.groups:
            if not g.opened:
                continue
            parts = [it.text for it in sorted(by_group.get(g.order, []), key=lambda x: x.order)]
            if g.kind == "call":
                if parts:
                    lines.append(f"{g.head} -> " + "; ".join(parts))
                else:
                    lines.append(g.head)
            elif parts:
                lines.append((g.head + " " if g.head else "") + " ".join(parts))
        return "\n".join(lines)

    def _unselect_worst(self) -> bool:
        """Drop the selected unit (or tool call line) worth the least per token."""
        sel = [it for it in self.items if it.selected]
        worst = None
        worst_ratio = float("inf")
        for it in sel:
            ratio = (it.base + sum(self.weights.get(k, 0.0) for k in it.facts)) / max(it.tokens, 1)
            if ratio < worst_ratio:
                worst, worst_ratio = it, ratio
        for g in self.groups:
            if g.opened and not any(it.selected and it.group is g for it in sel):
                ratio = (g.head_value + sum(self.weights.get(k, 0.0) for k in g.head_facts)) / max(g.head_tokens, 1)
                if ratio < worst_ratio:
                    worst, worst_ratio = g, ratio
        if worst is None:
            return False
        if isinstance(worst, _Item):
            worst.selected = False
            if not any(it.selected and it.group is worst.group for it in self.items) and worst.group.kind != "call":
                worst.group.opened = False
        else:
            worst.opened = False
        return True

    # ---- main -------------------------------------------------------------------------

    def build(self) -> str:
        req = self.req
        prev = strip_summary_marker(req.previous_summary)
        msgs: list[Mapping[str, Any]] = []
        for m in req.messages:
            if _is_summary_message(m):
                # a summary message inside the span: fold it like a previous summary, never nest it
                extra = strip_summary_marker(_content_text(m.get("content")))
                prev = (prev + "\n" + extra).strip() if prev else extra
            else:
                msgs.append(m)
        prev_lines, prev_facts = _split_previous(prev)
        self._build_ledger("\n".join(prev_lines), prev_facts)

        first_request = next((i for i, ln in enumerate(prev_lines) if ln.startswith("User:")), None)
        for i, line in enumerate(prev_lines):
            self._add_prose("prev", line, 0.0, 1.5 if i == first_request else 0.0)
        self._collect(msgs)

        budget = self.budget
        covered: set = set()
        # 1) the narrative, leaving room for a Key facts block (at most fact_share of the budget)
        reserve = 0
        if self.cfg.fact_list and self.ledger and self.cfg.fact_share > 0:
            full_list = format_fact_list(self.ledger, 10**9, self.count)
            reserve = min(int(budget * self.cfg.fact_share), self.count(full_list))
        narrative = max(budget - reserve, 0)
        # tool calls that changed something (book, cancel, update, send, ...) go in first,
        # newest first, within 3/5 of the narrative budget
        pinned = 0
        writes = sorted((g for g in self.groups if g.kind == "call" and g.write), key=lambda g: -g.order)
        if writes and writes[0].call != writes[0].call_full:
            # the newest write is shown with all its arguments if that fits
            newest = writes[0]
            short = newest.call
            self._set_head(newest, newest.call_full)
            if newest.head_tokens > narrative // 2:
                self._set_head(newest, short)
        for g in writes:
            if pinned + g.head_tokens <= narrative * 3 // 5:
                g.opened = True
                pinned += g.head_tokens
                covered.update(g.head_facts)
        self._select(narrative - pinned, covered, _MIN_RATIO)
        text = self._compose(budget)
        # 2) spend what the Key facts block did not need on more narrative
        for _ in range(3):
            left = budget - self.count(text)
            if left <= 2:
                break
            before = sum(it.selected for it in self.items) + sum(g.opened for g in self.groups)
            self._select(left - 1, covered)
            if sum(it.selected for it in self.items) + sum(g.opened for g in self.groups) == before:
                break
            text = self._compose(budget)
        return _fit(text, budget, self.count)

    def _compose(self, budget: int) -> str:
        """Body + the missing facts, guaranteed within ``budget``."""
        while True:
            body = self._render_body()
            body_tokens = self.count(body) if body else 0
            if body_tokens <= budget:
                break
            if not self._unselect_worst():
                body, body_tokens = "", 0
                break
        if not self.cfg.fact_list or not self.ledger:
            return body
        missing = facts_missing_from(self.ledger, body) if body else list(self.ledger)
        if not missing:
            return body
        # the most valuable missing facts first (said in the conversation, passed as arguments)
        missing.sort(key=lambda f: -self.weights.get(f.key, 0.0))
        sep = "\n" if body else ""
        room = budget - (self.count(body + sep) if body else 0)
        while room > 0:
            block = _fact_block(missing, room, self.count)
            if not block:
                break
            out = body + sep + block
            if self.count(out) <= budget:
                return out
            room -= max(1, self.count(out) - budget)
        return body


def _fact_block(facts: list[Fact], room: int, count: Callable[[str], int]) -> str:
    """The ``Key facts:`` block of the longest prefix of ``facts`` that fits ``room``."""
    unlimited = 10**9
    full = format_fact_list(facts, unlimited, count)
    if not full or count(full) <= room:
        return full if full and count(full) <= room else ""
    lo, hi = 0, len(facts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(format_fact_list(facts[:mid], unlimited, count)) <= room:
            lo = mid
        else:
            hi = mid - 1
    return format_fact_list(facts[:lo], room, count) if lo else ""


def _split_previous(prev: str) -> tuple[list[str], list[Fact]]:
    """Lines of a previous summary, and the facts it carries (its ``Key facts:``
    block is parsed back into facts by :func:`extract_facts`, not kept as prose)."""
    if not prev:
        return [], []
    lines: list[str] = []
    for raw in prev.splitlines():
        line = raw.strip()
        idx = line.find(FACT_LIST_HEADER)
        if idx >= 0:
            line = line[:idx].strip()
        if line:
            lines.append(line)
    return lines, extract_facts(prev)


def _fit(text: str, budget: int, count: Callable[[str], int]) -> str:
    """Last guard: make sure ``count(text) <= budget`` (cut at a line, then chars)."""
    if budget <= 0 or not text:
        return ""
    if count(text) <= budget:
        return text
    lines = text.split("\n")
    while len(lines) > 1 and count("\n".join(lines)) > budget:
        lines.pop()
    text = "\n".join(lines)
    if count(text) <= budget:
        return text
    return truncate_to_tokens(text, budget, count)


def truncate_to_tokens(text: str, budget: int, count: Callable[[str], int]) -> str:
    """The longest prefix of ``text`` (plus ``…``) that fits ``budget`` tokens; ``""`` if not even that."""
    if count(text) <= budget:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid] + "…") <= budget:
            lo = mid
        else:
            hi = mid - 1
    while lo > 0 and count(text[:lo] + "…") > budget:
        lo -= 1
    return (text[:lo].rstrip() + "…") if lo > 0 else ""


# --------------------------------------------------------------------------------------
# the LLM summarizer
# --------------------------------------------------------------------------------------

DEFAULT_SYSTEM_PROMPT = (
    "You summarize an AI agent's conversation for the agent's own later use. Your summary replaces "
    "the messages you are shown in the agent's context, so write what the agent needs to carry on:\n"
    "- the user's requests, goals and preferences;\n"
    "- what was decided and done, and each tool call as what was called, with which arguments, "
    "and what came back;\n"
    "- open tasks, pending tool calls and unanswered questions.\n"
    "Keep every identifier, code, number, amount, date, time, email address, URL and file path "
    "exactly as written. If a previous summary is given, fold it and the new messages into one "
    "updated summary and keep its facts. Be concise and factual; do not invent anything. "
    "Reply with the summary text only: no preamble, no title, no code fences."
)


class LLMSummarizer:
    """Summarize with a language model.

    ``complete(messages, max_tokens) -> str`` sends OpenAI-format ``messages`` to
    a model and returns its reply; the caller wires it to a real LLM (the
    strategy uses the agent's own LLM or a configured model). The prompt is a
    system message (:data:`DEFAULT_SYSTEM_PROMPT`, replaceable) and a user
    message with the previous summary, the new messages rendered by
    :func:`render_messages`, and the ledger facts that must survive.

    ``max_input_tokens`` (optional, needs ``count_tokens`` of the request): if the
    rendered span is larger, it is first condensed with
    :class:`ExtractiveSummarizer` to that size.

    The reply is stripped of code fences and of any ``History summary:`` marker;
    it is *not* truncated: the caller decides what to do with an empty or
    oversized reply (the strategy falls back to truncation).
    """

    name = "llm"

    def __init__(
        self,
        complete: Callable[[list[dict], int], str],
        *,
        system_prompt: str | None = None,
        max_input_tokens: int | None = None,
    ) -> None:
        if not callable(complete):
            raise ConfigError("LLMSummarizer: 'complete' must be a callable (messages, max_tokens) -> str")
        if max_input_tokens is not None and (not isinstance(max_input_tokens, int) or max_input_tokens < 1):
            raise ConfigError(f"LLMSummarizer: max_input_tokens must be a positive int, got {max_input_tokens!r}")
        self.complete = complete
        self.system_prompt = system_prompt or DEFAULT_SYSTEM_PROMPT
        self.max_input_tokens = max_input_tokens

    def __repr__(self) -> str:  # pragma: no cover - trivial
        return f"LLMSummarizer(complete={self.complete!r})"

    def build_messages(self, request: SummaryRequest) -> list[dict]:
        """The prompt sent to ``complete`` (exposed for tests and debugging)."""
        msgs = [m for m in request.messages if not _is_summary_message(m)]
        prev = strip_summary_marker(request.previous_summary)
        for m in request.messages:
            if _is_summary_message(m):
                extra = strip_summary_marker(_content_text(m.get("content")))
                prev = (prev + "\n" + extra).strip() if prev else extra
        transcript = render_messages(msgs)
        if self.max_input_tokens is not None and request.count_tokens(transcript) > self.max_input_tokens:
            transcript = ExtractiveSummarizer(fact_list=False).summarize(
                SummaryRequest(msgs, None, self.max_input_tokens, request.count_tokens, request.facts)
            )
        facts = list(request.facts) if request.facts is not None else extract_facts(msgs)
        parts = []
        if prev:
            parts.append("Previous summary:\n" + prev)
        parts.append("New messages:\n" + (transcript or "(none)"))
        if facts:
            fact_block = format_fact_list(facts, 10**9, len)
            parts.append("Facts to keep exactly as written:\n" + fact_block[len(FACT_LIST_HEADER) :].strip())
        parts.append(f"Write the updated summary in at most {request.max_tokens} tokens. Reply with the summary only.")
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": "\n\n".join(parts)},
        ]

    def summarize(self, request: SummaryRequest) -> str:
        if request.max_tokens <= 0:
            return ""
        reply = self.complete(self.build_messages(request), request.max_tokens)
        if not isinstance(reply, str):
            raise SummarizerError(f"LLMSummarizer: complete() must return a str, got {type(reply).__name__}")
        return _clean_reply(reply)


def _clean_reply(reply: str) -> str:
    s = reply.strip()
    fence = re.fullmatch(r"```[\w-]*\s*\n?(.*?)\n?```", s, re.DOTALL)
    if fence:
        s = fence.group(1).strip()
    s = re.sub(r"^(?:summary|updated summary)\s*:\s*", "", s, flags=re.IGNORECASE)
    return strip_summary_marker(s)


# --------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_BUILTINS: dict[str, Callable[..., Summarizer]] = {
    "extractive": ExtractiveSummarizer,
    "llm": LLMSummarizer,
}
_registry: dict[str, Callable[..., Summarizer]] = {}
_lock = threading.RLock()


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ConfigError(f"invalid summarizer name {name!r}: use letters, digits, '_', '-' or '.' (e.g. 'extractive')")
    return name


def register_summarizer(name: str, factory: Callable[..., Summarizer], *, replace: bool = False) -> None:
    """Make ``factory(**options)`` available as summarizer ``name``.

    ``factory`` is usually a class with a ``summarize(request)`` method. A name
    that is already taken (builtin or registered) raises
    :class:`ctxlife.errors.PluginConflictError` unless ``replace=True``.
    """
    _check_name(name)
    if not callable(factory):
        raise ConfigError(f"summarizer {name!r}: factory must be callable, got {type(factory).__name__}")
    with _lock:
        if not replace and (name in _registry or name in _BUILTINS):
            raise PluginConflictError(
                f"a summarizer named {name!r} is already registered; pass replace=True to override it"
            )
        _registry[name] = factory


def unregister_summarizer(name: str) -> None:
    """Remove a summarizer added with :func:`register_summarizer` (no error if absent)."""
    with _lock:
        _registry.pop(name, None)


def _entry_points() -> list[Any]:
    from importlib.metadata import entry_points

    try:
        return list(entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # noqa: BLE001  # pragma: no cover - broken metadata must not break lookups
        return []


def available_summarizers() -> list[str]:
    """Names of every summarizer: builtin, registered, and published by installed
    packages under the ``ctxlife.summarizers`` entry-point group (not loaded)."""
    with _lock:
        names = set(_BUILTINS) | set(_registry)
    names |= {ep.name for ep in _entry_points()}
    return sorted(names)


def get_summarizer(name: str, **options: Any) -> Summarizer:
    """Build the summarizer called ``name`` with ``options`` as keyword arguments.

    Looks in the registered summarizers, then the builtins (``extractive``,
    ``llm``), then -- only for a name still unknown -- the ``ctxlife.summarizers``
    entry points (the matching one is loaded and registered). An unknown name
    raises :class:`ctxlife.errors.ConfigError` listing the available names; a
    factory that rejects the options raises ``ConfigError`` naming them; a broken
    plugin raises :class:`ctxlife.errors.PluginError`.
    """
    _check_name(name)
    with _lock:
        factory = _registry.get(name) or _BUILTINS.get(name)
    if factory is None:
        for ep in _entry_points():
            if ep.name != name:
                continue
            try:
                factory = ep.load()
            except Exception as exc:
                raise PluginError(
                    f"summarizer {name!r} from entry point {ep.value!r} ({ENTRY_POINT_GROUP}) failed to load: {exc}"
                ) from exc
            if not callable(factory):
                raise PluginError(f"summarizer {name!r} from entry point {ep.value!r} is not callable")
            with _lock:
                _registry.setdefault(name, factory)
            break
    if factory is None:
        raise ConfigError(f"unknown summarizer {name!r}; available: {', '.join(available_summarizers())}")
    try:
        summarizer = factory(**options)
    except TypeError as exc:
        raise ConfigError(f"summarizer {name!r} does not accept options {sorted(options)}: {exc}") from exc
    if not callable(getattr(summarizer, "summarize", None)):
        raise PluginError(f"summarizer {name!r}: {summarizer!r} has no summarize(request) method")
    return summarizer
