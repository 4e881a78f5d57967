"""Build the ledger of a message span: the facts of its texts, tool-call arguments and tool results."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ctxlife.facts.fact import Fact
from ctxlife.facts.formatting import FACT_LIST_HEADER, KIND_LABELS
from ctxlife.facts.normalise import canonical_number
from ctxlife.facts.scanner import scan_text
from ctxlife.facts.vocabulary import AMOUNT_KEY_RE, COUNT_KEY_RE, ID_KEY_RE
from ctxlife.messages import (
    content_text,
    json_payload,
    pair_tool_calls,
    raw_calls,
    strip_inserted_marks,
    tool_call_arguments,
)

_FACT_BLOCK_RE = re.compile(re.escape(FACT_LIST_HEADER) + r"([^\n]*)")
_KIND_OF_LABEL = {label: kind for kind, label in KIND_LABELS.items()}
_SPACE_RE = re.compile(r"\s")
_ALNUM_RE = re.compile(r"[A-Za-z0-9]")
_UPPER_RE = re.compile(r"[A-Z]")
_CODE_VALUE_RE = re.compile(r"#?[A-Z0-9][A-Z0-9_-]*")
_PLAIN_WORD_RE = re.compile(r"[A-Za-z][a-z]+")
_YEAR_RE = re.compile(r"\d{4}")
_MAX_JSON_DEPTH = 50
#: ctxlife's own notes in a text (``[ctxlife: JSON shortened from 2500 tokens ...]``,
#: ``[ctxlife_recall: ...]``): what they say is ctxlife's bookkeeping, never a fact of the conversation.
_OWN_NOTE_RE = re.compile(r"\[ctxlife(?:_\w+)?:[^\]\n]*\]")
#: ctxlife's own references (tool_output's ``to_`` + 16 hex digits, blob refs).
_OWN_REF_RE = re.compile(
    r"(?:\bto_[0-9a-f]{16}\b|\bblob[-:_](?:sha256:)?[0-9a-f]{6,}\b|\bsha256:[0-9a-f]{12,}\b)", re.IGNORECASE
)
#: A counter of ctxlife's units ("2500 tokens", "12 messages"): a size, not a fact.
_COUNTER_RE = re.compile(r"[\d.,]+\s*(?:tokens?|characters?|chars|messages?)", re.IGNORECASE)


def extract_facts(messages_or_text: str | Sequence[Mapping[str, Any]] | None) -> list[Fact]:
    """Extract the key facts of a message span (or of a string).

    From messages it reads every ``content`` (strings or lists of text parts),
    the arguments of each tool call (JSON is parsed and walked, so values under
    id-like keys such as ``"order_id"`` and money-like keys such as
    ``"price"`` are recognised), and tool results (JSON results are walked the
    same way). Tool calls whose result is not among ``messages`` (pending work)
    contribute their call id as an ``id`` fact.

    Returns facts de-duplicated by :attr:`Fact.key` and by surface text, in order
    of first appearance.
    """
    ledger = _Ledger()
    if messages_or_text is None:
        return []
    if isinstance(messages_or_text, str):
        ledger.read_text(messages_or_text)
        return ledger.facts
    if isinstance(messages_or_text, Mapping):
        messages_or_text = [messages_or_text]
    msgs = list(_only_mappings(messages_or_text))
    pairs, _ = pair_tool_calls(msgs)
    for i, msg in enumerate(msgs):
        ledger.read_text(content_text(msg.get("content")))
        for ci, call in enumerate(raw_calls(msg)):
            args = tool_call_arguments(call)
            if isinstance(args, (dict, list)):
                ledger.read_json(args, None, None)
            elif isinstance(args, str):
                ledger.read_text(args)
            if msg.get("role") == "assistant" and (i, ci) not in pairs:
                call_id = call.get("id")
                if isinstance(call_id, str) and call_id:
                    ledger.add(Fact("id", call_id, call_id))
    return ledger.facts


def parse_fact_block(block: str) -> list[Fact]:
    """Facts of a rendered block ``ids: a, b; codes: C1; amounts: 250`` (the text after the header),
    read back with the kinds the block names."""
    out: list[Fact] = []
    for group in block.split("; "):
        label, sep, items = group.partition(":")
        kind = _KIND_OF_LABEL.get(label.strip().lower())
        if not sep or kind is None:
            out.extend(extract_facts(group))
            continue
        merged: list[str] = []
        for p in (p.strip() for p in items.split(", ")):
            if merged and kind == "date" and _YEAR_RE.fullmatch(p):
                merged[-1] += ", " + p  # "May 15, 2024" was split at its comma
            elif p:
                merged.append(p)
        for p in merged:
            found = extract_facts(p)
            if len(found) == 1 and found[0].text == p and found[0].kind == kind:
                out.append(found[0])
            elif kind == "amount":
                # "-250.5", "₹ 1,00,000": the currency symbol dropped, the sign kept (a refund is no charge)
                body = p.lstrip("-$€£¥₹ ")
                sign = "-" if "-" in p[: len(p) - len(body)] else ""
                out.append(Fact(kind, p, canonical_number(sign + body) or p))
            else:
                out.append(Fact(kind, p, found[0].normalized if len(found) == 1 and found[0].text == p else p))
    return out


def _only_mappings(messages: Iterable[Any]) -> Iterator[Mapping[str, Any]]:
    for m in messages:
        if isinstance(m, Mapping):
            yield m


class _Ledger:
    """Facts in order of first appearance, de-duplicated by key and by surface text."""

    def __init__(self) -> None:
        self.facts: list[Fact] = []
        self._keys: set[tuple[str, str]] = set()
        self._texts: set[str] = set()

    def add(self, fact: Fact) -> None:
        if fact.key in self._keys or fact.text in self._texts:
            return
        if _OWN_REF_RE.fullmatch(fact.text) or (fact.kind == "number" and _COUNTER_RE.fullmatch(fact.text)):
            return
        self._keys.add(fact.key)
        self._texts.add(fact.text)
        self.facts.append(fact)

    def read_text(self, s: str) -> None:
        if not s:
            return
        if "[ctxlife" in s:
            s = _OWN_NOTE_RE.sub(" ", s)
        s = strip_inserted_marks(s)  # an inserted message's mark line: its check is no id
        if "to_" in s or "blob" in s or "sha256:" in s:
            s = _OWN_REF_RE.sub(" ", s)
        data = json_payload(s) if s.lstrip()[:1] in ("{", "[") else None
        if data is not None and isinstance(data, (dict, list)):
            self.read_json(data, None, None)
            return
        if FACT_LIST_HEADER in s:
            # a "Key facts:" block written by format_fact_list: read it back with its kinds
            pos = 0
            for m in _FACT_BLOCK_RE.finditer(s):
                self._scan(s[pos : m.start()])
                for fact in parse_fact_block(m.group(1)):
                    self.add(fact)
                pos = m.end()
            self._scan(s[pos:])
            return
        self._scan(s)

    def _scan(self, s: str) -> None:
        if s:
            for found in scan_text(s):
                self.add(found.fact)

    def read_json(self, value: Any, key: str | None, parent: str | None, depth: int = 0) -> None:
        if depth > _MAX_JSON_DEPTH:
            return
        if isinstance(value, Mapping):
            for k, v in value.items():
                ks = str(k)
                # keys can be ids themselves ({"store_credit_5519023": {...}})
                for found in scan_text(ks):
                    self.add(found.fact)
                self.read_json(v, ks, key, depth + 1)
        elif isinstance(value, list):
            for v in value:
                self.read_json(v, key, parent, depth + 1)
        elif isinstance(value, bool) or value is None:
            return
        elif isinstance(value, (int, float)):
            self._json_number(value, key, parent)
        elif isinstance(value, str):
            self._json_string(value, key)

    def _json_string(self, value: str, key: str | None) -> None:
        v = value.strip()
        if (
            key
            and ID_KEY_RE.search(key)
            and 3 <= len(v) <= 64
            and not _SPACE_RE.search(v)
            and _ALNUM_RE.search(v)
            and not _PLAIN_WORD_RE.fullmatch(v)  # "available", "Business" are words, not ids
        ):
            if _CODE_VALUE_RE.fullmatch(v) and _UPPER_RE.search(v):
                self.add(Fact("code", v, v.lstrip("#").upper()))
            else:
                scanned = scan_text(v)
                if len(scanned) == 1 and scanned[0].start == 0 and scanned[0].end == len(v):
                    self.add(scanned[0].fact)
                elif not scanned:
                    self.add(Fact("id", v, v))
        self.read_text(value)

    def _json_number(self, value: float, key: str | None, parent: str | None) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            return
        text = json.dumps(value)
        norm = canonical_number(text) or text
        keys = [k for k in (key, parent) if k]
        if any(AMOUNT_KEY_RE.search(k) for k in keys) and not (key and COUNT_KEY_RE.search(key)):
            self.add(Fact("amount", text, norm))
        elif key and ID_KEY_RE.search(key) and isinstance(value, int) and abs(value) >= 100:
            self.add(Fact("id", text, norm))
        elif isinstance(value, int) and abs(value) >= 10000:
            self.add(Fact("number", text, norm))
