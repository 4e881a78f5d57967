"""What an extractive summary can be made of: lines (a message, a tool call) and the snippets on them.

:class:`Candidates` reads a span into :class:`SummaryLine` s and :class:`Snippet` s, each worth a
value (requests, decisions, errors and state-changing calls most; the ledger facts it carries on
top) and a cost in tokens. :mod:`ctxlife.summarizers.extractive` then picks within the budget.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxlife.facts import Fact, FactMatcher, TextIndex, extract_facts
from ctxlife.messages import (
    CJK,
    CJK_PUNCTUATION,
    content_text,
    json_payload,
    own_text,
    pair_tool_calls,
    quote,
    raw_calls,
    safe_cut,
    tool_call_arguments,
    tool_call_name,
    tool_results_by_call,
)
from ctxlife.summarizers.rendering import compact_json, render_arguments, truncate_to_tokens, values_only

FactKey = tuple[str, str]

DECISION_RE = re.compile(
    r"\b(?:I will|I'll|I've|I have|we will|we'll|let me|going to|decided|decide|decision|confirm(?:ed|s|ation)?|"
    r"book(?:ed|ing)?|cancel(?:l?ed|l?ing|lation)?|updated?|changed?|modif(?:y|ied)|upgrad(?:e|ed)|"
    r"refund(?:ed)?|charged?|paid|pay|transferr?(?:ed|ing)?|approved?|denied|deny|agreed?|select(?:ed)?|"
    r"chose|choose|completed?|successful(?:ly)?|proceed(?:ed|ing)?|done|issued|sent|created?|deleted?|"
    r"removed?|added|saved|wrote|written|final answer|conclusion|conclude|result|total|not eligible|"
    r"eligible|policy|must|cannot|can't|unable)\b",
    re.IGNORECASE,
)
REQUEST_RE = re.compile(
    r"\b(?:I want|I'd like|I would like|I need|I'm looking|I am looking|please|can you|could you|"
    r"would you|help me|I wish|my [\w-]+ (?:id|number|code|account)|I prefer|I'd prefer|instead|"
    r"yes|no,|go ahead|don't|do not)\b",
    re.IGNORECASE,
)
#: A decision, commitment, constraint or preference the user or assistant states ("we decided to...",
#: "let's go with...", "never...", "the deadline is...", "please remember...", "就用..."): kept first.
STATED_RE = re.compile(
    r"(?:\b(?:(?:we|I)(?:'ve| have)? (?:decided|agreed|chose|settled)|decided to|decision is|"
    r"let's (?:go with|use|stick|keep|stay|do|book|choose|pick|take)|let us go with|go with|stick (?:with|to)|"
    r"(?:I'll|I will|we'll|we will) (?:use|go with|take|keep|stick|pick|choose)|"
    r"(?:^|please |, )(?:don't|do not)|never|always|must(?:n't| not)?|make sure|be sure to|"
    r"deadline|due (?:by|on|date)|no later than|I prefer|I'd prefer|I would prefer|I'd rather|preference|"
    r"remember|keep in mind|don't forget|do not forget|agreed|only use|avoid)\b)|"
    r"决定|就用|就选|就按|不要|别再|别用|别忘|一定要|必须|务必|记住|记得|截止|最晚|我更喜欢|偏好|同意|总是|永远|千万|以后都",
    re.IGNORECASE,
)
ERROR_RE = re.compile(
    r"\b(?:error|errors|failed|failure|fail|exception|traceback|not found|invalid|denied|refused|"
    r"timed? ?out|unavailable|not available|does not|doesn't|cannot|can't|unable)\b",
    re.IGNORECASE,
)
#: Tool names that change state (book, cancel, send, ...): their calls are kept first.
WRITE_TOOL_RE = re.compile(
    r"book|cancel|update|create|delete|remove|send|transfer|modify|write|pay|refund|submit|post|put|"
    r"set|insert|upgrade|change|save|issue|approve",
    re.IGNORECASE,
)
_SENTENCE_BREAK_RE = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9*#])|(?<=[。！？；])\s*(?=\S)")
_CJK_CHAR_RE = re.compile("[" + CJK + CJK_PUNCTUATION + "]")
_MARKDOWN_RE = re.compile(r"\*\*|__|`{1,3}|^#+\s*", re.MULTILINE)
_REACT_RE = re.compile(
    r"(?:Thought:\s*(?P<thought>.*?)\s*)?Action:\s*(?P<action>[^\n]*?)\s*\n\s*Action Input:\s*(?P<input>.*?)"
    r"(?:\n\s*Observation:\s*(?P<obs>.*))?\s*$",
    re.DOTALL,
)
_FINAL_ANSWER_RE = re.compile(r"Final Answer:\s*(?P<final>.*)$", re.DOTALL)
_TRIVIAL_RE = re.compile(
    r"^(?:(?:hi|hello|hey|thanks|thank you|ok|okay|sure|great|perfect|got it|you're welcome|yes|no|yep|nope|"
    r"no problem|please hold on|one moment)[\s,!.]*+(?:there|so much|very much|again)?[\s!.]*+)++$",
    re.IGNORECASE,
)
_LIST_MARK_RE = re.compile(r"^(?:[-*•]+|\d{1,2}[.)]|[a-zA-Z][.)])\s+")
_LIST_NUMBER_RE = re.compile(r"(?:\d{1,3}|[A-Za-z]{1,3})[.)]?")
_PARAGRAPH_BREAK_RE = re.compile(r"\n\s*\n")
_WHITESPACE_RE = re.compile(r"\s+")

#: Value of keeping a fact, by kind. Facts that were said by the user or the
#: assistant, passed as tool arguments or kept by the previous summary count in
#: full; facts only seen in tool output count ``UNSPOKEN_FACT_SHARE`` of it (a search
#: result lists many options; the one the user picked is what matters).
KIND_WEIGHT = {
    "id": 2.0,
    "code": 2.0,
    "email": 1.5,
    "url": 1.5,
    "path": 1.5,
    "name": 3.0,  # a person the conversation names: few per span, never re-derivable
    "amount": 1.0,
    "date": 1.0,
    "time": 0.6,
    "number": 0.7,
}
UNSPOKEN_FACT_SHARE = 0.35


def sentences(text: str, max_chars: int = 240) -> list[str]:
    """Split prose into sentence-sized units. List numbering is dropped and the
    lines of one paragraph are joined with ``; ``, so a markdown list item stays
    next to its heading (``Option BX4470; Departure: 06:00 AM; ...``)."""
    text = _MARKDOWN_RE.sub("", text)
    out: list[str] = []
    for para in _PARAGRAPH_BREAK_RE.split(text):
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
        # Lines of a paragraph are joined into one text; in CJK text a line break ends a sentence.
        joined_lines: list[str] = []
        joined = ""
        for ln in lines:
            if not joined:
                joined = ln
            elif _CJK_CHAR_RE.search(joined[-1]) or _CJK_CHAR_RE.match(ln):
                joined_lines.append(joined)
                joined = ln
            elif joined.endswith((":", ",", ".", "!", "?", ";")):
                joined += " " + ln
            else:
                joined += "; " + ln
        joined_lines.append(joined)
        pieces: list[str] = []
        for sent in (s for block in joined_lines for s in _SENTENCE_BREAK_RE.split(block)):
            sent = _WHITESPACE_RE.sub(" ", sent).strip()
            if pieces and _LIST_NUMBER_RE.fullmatch(pieces[-1]):
                pieces[-1] = pieces[-1] + " " + sent  # "5." "Would you ..." -> one sentence
            elif sent:
                pieces.append(sent)
        for sent in pieces:
            while len(sent) > max_chars:
                cut = sent.rfind(" ", max_chars // 2, max_chars)
                if cut <= 0:  # no space (CJK text, a long token): never inside a word, an id or an emoji
                    cut = safe_cut(sent, max_chars, reach=max_chars // 2)
                    cut = cut if cut > 0 else max_chars
                out.append(sent[:cut].strip())
                sent = sent[cut:].strip()
            if sent:
                out.append(sent)
    return out


def _dedupe_key(text: str) -> str:
    return _WHITESPACE_RE.sub(" ", text).strip().lower()


@dataclass
class SummaryLine:
    """A line the summary may show: a message's sentences, or a tool call with its result."""

    order: int
    kind: str  # "prev" | "user" | "assistant" | "call"
    head: str  # "User:" / "called name(args) -> short result" / ""
    head_tokens: int = 0
    head_value: float = 0.0  # worth of the line itself (tool calls)
    head_facts: frozenset[FactKey] = frozenset()
    opened: bool = False  # the line is in the summary
    has_result: bool = False
    write: bool = False  # a tool call that changes state (book, cancel, send, ...)
    call: str = ""  # "called name(args)" as shown
    call_full: str = ""  # ... with all arguments (when ``call`` is a diff to the previous call)
    suffix: str = ""  # " -> short result" / " -> (no result yet, ...)"


@dataclass
class Snippet:
    """A sentence or a tool-result fragment that may go on its line."""

    line: SummaryLine
    order: int
    text: str
    tokens: int
    base: float
    facts: frozenset[FactKey] = field(default_factory=frozenset)
    selected: bool = False
    #: what someone stated, kept first: 2 a decision, constraint or preference; 1 a person's name
    #: (a name alone also survives in the Key facts block); 0 neither
    stated: int = 0


class Candidates:
    """The lines and snippets of one span, the ledger of its facts and what each fact is worth."""

    def __init__(self, count: Callable[[str], int], *, max_call_tokens: int, fragment_tokens: int) -> None:
        self.count = count
        self.max_call_tokens = max_call_tokens
        self.fragment_tokens = fragment_tokens
        self.lines: list[SummaryLine] = []
        self.snippets: list[Snippet] = []
        self.ledger: list[Fact] = []
        self.weights: dict[FactKey, float] = {}
        self._matcher = FactMatcher([])
        self._seen_text: set[str] = set()
        self._last_args: dict[str, Any] = {}
        self._is_identity: dict[str, bool] = {}

    # ---- ledger -----------------------------------------------------------------------

    def build_ledger(
        self,
        previous_text: str,
        previous_facts: list[Fact],
        span: list[Mapping[str, Any]],
        span_facts: list[Fact] | None,
    ) -> None:
        """The facts of the previous summary and the span, each weighted by kind and by whether
        it was said in conversation, passed as an argument or kept by the previous summary."""
        span_facts = span_facts if span_facts is not None else extract_facts(span)
        ledger: list[Fact] = []
        seen: set[FactKey] = set()
        for f in list(previous_facts) + span_facts:
            if f.key not in seen:
                seen.add(f.key)
                ledger.append(f)
        self.ledger = ledger
        self._matcher = FactMatcher(ledger)
        spoken: list[str] = [previous_text]
        for m in span:
            if m.get("role") in ("user", "assistant"):
                spoken.append(content_text(m.get("content")))
            for call in m.get("tool_calls") or []:
                if isinstance(call, Mapping):
                    a = tool_call_arguments(call)
                    spoken.append(a if isinstance(a, str) else json.dumps(a, default=str))
        spoken_index = TextIndex("\n".join(spoken))
        previous_keys = {f.key for f in previous_facts}
        for f in ledger:
            w = KIND_WEIGHT.get(f.kind, 1.0)
            if not (f.key in previous_keys or spoken_index.contains(f)):
                w *= UNSPOKEN_FACT_SHARE
            self.weights[f.key] = w

    def facts_in(self, text: str) -> frozenset[FactKey]:
        if not self.ledger or not text:
            return frozenset()
        return frozenset(f.key for f in self._matcher.present(text))

    # ---- lines and snippets -----------------------------------------------------------

    def _new_line(self, kind: str, head: str) -> SummaryLine:
        line = SummaryLine(order=len(self.lines), kind=kind, head=head)
        line.head_tokens = self.count(head + " ") if head else 0
        self.lines.append(line)
        return line

    def _add_snippet(self, line: SummaryLine, text: str, base: float, *, dedupe: bool = True, stated: int = 0) -> None:
        text = text.strip()
        if not text:
            return
        key = _dedupe_key(text)
        if dedupe:
            if key in self._seen_text:
                return
            self._seen_text.add(key)
        tokens = self.count(text) + 1  # + separator
        facts = self.facts_in(text)
        if not stated and line.kind != "call":
            stated = 1 if any(kind == "name" for kind, _ in facts) else 0
        self.snippets.append(
            Snippet(
                line=line, order=len(self.snippets), text=text, tokens=tokens, base=base, facts=facts, stated=stated
            )
        )

    def add_prose(self, kind: str, text: str, position: float, bonus: float = 0.0) -> None:
        """Sentences of a message (``kind`` user/assistant) or a line of the previous summary (``prev``)."""
        label = {"user": "User:", "assistant": "Assistant:", "prev": ""}[kind]
        line = self._new_line(kind, label)
        if kind == "prev" and self.count(text) <= 60:
            units = [_WHITESPACE_RE.sub(" ", text).strip()]  # a line of our own earlier summary: keep it whole
        else:
            units = sentences(text)
        for sent in units:
            base = 0.6
            key = False  # a request, decision, question or error: the units a bonus applies to
            stated = 2 if STATED_RE.search(sent) else 0
            if kind == "prev":
                base, key = 2.0, True
            elif kind == "user":
                base = 0.8
                if REQUEST_RE.search(sent):
                    base, key = 3.0, True
                if sent.rstrip().endswith("?"):
                    base, key = max(base, 2.5), True
            elif kind == "assistant":
                if DECISION_RE.search(sent):
                    base, key = 2.0, True
                if sent.rstrip().endswith("?"):
                    base, key = max(base, 1.0), True  # open questions: the last message gets a bonus
                if ERROR_RE.search(sent):
                    base, key = max(base, 2.0), True
            base += 0.8 * position + (bonus if key else 0.0)  # recent units matter a bit more
            if stated and kind != "prev":
                base, key = max(base, 3.5 if kind == "user" else 2.5), True
            if _TRIVIAL_RE.match(sent):
                base, stated = 0.05, 0
            self._add_snippet(line, sent, base, stated=stated)

    def set_call_head(self, line: SummaryLine, call: str, suffix: str | None = None) -> None:
        line.call = call
        if suffix is not None:
            line.suffix = suffix
        line.head = line.call + line.suffix
        line.head_tokens = self.count(line.head + (" -> " if line.has_result and not line.suffix else " "))
        line.head_facts = self.facts_in(line.head)

    def add_call(
        self, name: str, args: Any, result: Any | None, has_result: bool, call_id: str | None, position: float
    ) -> None:
        """A tool call's line, with a short result riding along or the fragments of a long one."""
        parsed = json_payload(args) if isinstance(args, str) else args
        shown: Any = parsed if parsed is not None else args
        if isinstance(parsed, Mapping):
            # long free-text arguments (a "thought", a "summary", a message body) read as prose
            shown = dict(parsed)
            for k, v in parsed.items():
                if isinstance(v, str) and len(v) > 80 and " " in v:
                    self.add_prose("assistant", v, position)
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
        line = self._new_line("call", "")
        line.has_result = has_result
        line.write = bool(WRITE_TOOL_RE.search(name))
        line.call_full = full
        line.head_value = 3.0 + (1.5 if line.write else 0.0) + 0.8 * position
        if not has_result:
            line.head_value += 1.0
            note = f" -> (no result yet, call id {call_id})" if call_id else " -> (no result yet)"
            self.set_call_head(line, call, note)
            return
        text = content_text(result) if not isinstance(result, (dict, list)) else ""
        data = result if isinstance(result, (dict, list)) else json_payload(text)
        rendered = compact_json(data) if data is not None else _WHITESPACE_RE.sub(" ", text).strip()
        if not rendered:
            rendered = "(no output)"
        is_error = bool(ERROR_RE.search(rendered[:200]))
        if self.count(rendered) <= 14:
            # a short result rides along with the call itself
            line.head_value += 3.0 if is_error else 0.3
            if (
                data is None
                and not text.strip()
                and isinstance(shown, Mapping)
                and all(v == "…" for v in shown.values())
            ):
                line.head_value = 0.3  # e.g. think(thought=…) -> (no output): the thought is kept as prose
            shown_result = rendered if rendered == "(no output)" else quote(rendered)  # third-party text
            self.set_call_head(line, call, f" -> {shown_result}")
            return
        self.set_call_head(line, call, "")
        if data is not None:
            seen_fragments: set[str] = set()
            for fragment in self._fragments(data, ""):
                if fragment in seen_fragments:
                    continue
                seen_fragments.add(fragment)
                self._add_snippet(line, fragment, 0.15 + (2.5 if ERROR_RE.search(fragment) else 0.0), dedupe=False)
        else:
            for sent in sentences(text):
                self._add_snippet(line, sent, 0.3 + (2.5 if ERROR_RE.search(sent) else 0.0), dedupe=False)

    def _call_head(self, name: str, args: Any) -> str:
        """``called NAME(args)`` within ``max_call_tokens`` (x1.5 for tools that change
        state): long values are cut, then nested data is written values-only
        (``items=[BX4471 2031-03-14, BX4102 2031-03-14]``), then arguments that
        carry no fact and are not short are left out, then the tail is cut."""
        limit = int(self.max_call_tokens * (1.5 if WRITE_TOOL_RE.search(name) else 1.0))
        head = f"called {name}({render_arguments(args)})"
        if self.count(head) <= limit:
            return head
        if not isinstance(args, Mapping):
            return truncate_to_tokens(f"called {name}({render_arguments(args, 40)}", limit - 1, self.count) + ")"
        terse = [(k, values_only(v)) for k, v in args.items()]
        head = f"called {name}(" + ", ".join(f"{k}={v}" for k, v in terse) + ")"
        if self.count(head) <= limit:
            return head
        kept = [(k, v[:60] + ("…" if len(v) > 60 else "")) for k, v in terse if len(v) <= 12 or extract_facts(v)]
        parts: list[str] = []
        for k, v in kept:
            trial = f"called {name}(" + ", ".join([*parts, f"{k}={v}"]) + ", …)"
            if self.count(trial) > limit:
                break
            parts.append(f"{k}={v}")
        if len(parts) == len(terse):
            return f"called {name}(" + ", ".join(parts) + ")"
        return f"called {name}(" + ", ".join([*parts, "…"]) + ")"

    def _fragments(self, value: Any, label: str, depth: int = 0) -> list[str]:
        """Split JSON data into fragments of about ``fragment_tokens``: scalar fields
        of a dict are packed together, nested containers are split recursively, and
        every fragment of a list element is labelled with the element's id/code."""
        text = (label + compact_json(value)) if label else compact_json(value)
        if not isinstance(value, (dict, list)) or depth > 6 or self.count(text) <= self.fragment_tokens:
            return [text]
        cap = self.fragment_tokens
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
                if isinstance(v, (dict, list)) and self.count(f"{k}: {compact_json(v)}") > cap // 2:
                    flush()
                    out.extend(self._fragments(v, f"{head}{k}: ", depth + 1))
                    continue
                piece = f"{k}: {compact_json(v)}"
                if chunk and self.count(head + ", ".join([*chunk, piece])) > cap:
                    flush()
                chunk.append(piece)
            flush()
            if ident is not None and not out:
                out.append(label + ident)
        else:
            for v in value:
                if isinstance(v, Mapping):
                    sub_text = label + compact_json(v)
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
                ok = self._is_identity.get(v)
                if ok is None:
                    facts = extract_facts(v)
                    ok = bool(facts) and facts[0].text == v and facts[0].kind in ("id", "code")
                    self._is_identity[v] = ok
                if ok:
                    return v
        return None

    # ---- reading a span ---------------------------------------------------------------

    def add_span(self, msgs: list[Mapping[str, Any]]) -> None:
        """Lines and snippets of every message of the span, tool calls paired with their results."""
        pairs, _ = pair_tool_calls(msgs)
        results = tool_results_by_call(msgs)
        answered = set(pairs.values())
        n = max(len(msgs), 1)
        skip: set[int] = set()
        first_user = next((i for i, m in enumerate(msgs) if m.get("role") == "user"), None)
        last_user = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].get("role") == "user"), None)
        last_assistant = next(
            (
                i
                for i in range(len(msgs) - 1, -1, -1)
                if msgs[i].get("role") == "assistant" and content_text(msgs[i].get("content")).strip()
            ),
            None,
        )
        for i, msg in enumerate(msgs):
            if i in skip:
                continue
            pos = i / n
            role = msg.get("role")
            text = own_text(msg).strip()
            if role in ("tool", "function"):
                if i in answered:
                    continue
                self.add_call(str(msg.get("name") or "tool"), None, msg.get("content"), True, None, pos)
                continue
            if role == "assistant" and text:
                react = _REACT_RE.search(text)
                final = _FINAL_ANSWER_RE.search(text)
                if react and not final:
                    prefix = text[: react.start()].strip()
                    thought = (prefix + " " + (react.group("thought") or "")).strip()
                    if thought:
                        self.add_prose("assistant", thought, pos)
                    obs = react.group("obs")
                    has = obs is not None
                    if not has and i + 1 < len(msgs) and msgs[i + 1].get("role") == "user":
                        nxt = content_text(msgs[i + 1].get("content")).strip()
                        if nxt.startswith("Observation:"):
                            obs, has = nxt[len("Observation:") :].strip(), True
                            skip.add(i + 1)
                    self.add_call(
                        react.group("action").strip() or "tool", react.group("input").strip(), obs, has, None, pos
                    )
                elif final:
                    before = text[: final.start()].strip()
                    if before:
                        self.add_prose("assistant", re.sub(r"^Thought:\s*", "", before), pos)
                    self.add_prose("assistant", final.group("final"), min(1.0, pos + 0.5))
                else:
                    self.add_prose("assistant", text, pos, 1.5 if i == last_assistant else 0.0)
            elif role in ("user", "system", "developer") and text:
                if text.startswith("Observation:"):
                    self.add_prose("assistant", text, pos)
                else:
                    bonus = 2.5 if i == first_user else 1.5 if i == last_user else 0.0
                    self.add_prose("user" if role == "user" else "assistant", text, pos, bonus)
            for ci, call in enumerate(raw_calls(msg)):
                self.add_call(
                    tool_call_name(call),
                    tool_call_arguments(call),
                    results.get((i, ci)),
                    (i, ci) in results,
                    call.get("id"),
                    pos,
                )
