"""Spans as readable text: a transcript, compact JSON, and cutting text to a token budget."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ctxlife.messages import (
    content_text,
    json_payload,
    own_text,
    pair_tool_calls,
    raw_calls,
    safe_cut,
    starts_with_summary_marker,
    strip_summary_marker,
    tool_call_arguments,
    tool_call_name,
    tool_results_by_call,
)

_SIMPLE_VALUE_RE = re.compile(r"^[\w@.:/+#$%-]+$")
_WHITESPACE_RE = re.compile(r"\s+")
_ROLE_LABELS = {"system": "System", "user": "User", "assistant": "Assistant"}


def compact_json(value: Any, depth: int = 0) -> str:
    """A quote-free compact rendering of JSON data: ``{a: 1, b: [x, y]}``."""
    if depth > 30:
        return "…"
    if type(value) is str:  # the usual leaf, decided before the slower ABC checks below
        return value if value and _SIMPLE_VALUE_RE.match(value) else json.dumps(value, ensure_ascii=False)
    if type(value) is dict or isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {compact_json(v, depth + 1)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(compact_json(v, depth + 1) for v in value) + "]"
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


def values_only(value: Any, depth: int = 0) -> str:
    """Values only, for nested data in a tight spot: ``{item_code: BX4471,
    date: 2031-03-14}`` -> ``BX4471 2031-03-14``."""
    if depth > 20:
        return "…"
    if isinstance(value, Mapping):
        return " ".join(values_only(v, depth + 1) for v in value.values() if v not in (None, "", [], {}))
    if isinstance(value, list):
        return "[" + ", ".join(values_only(v, depth + 1) for v in value) + "]"
    return compact_json(value)


def render_arguments(arguments: Any, max_value_chars: int | None = None) -> str:
    """``{"user_id": "ana_ruiz_2041"}`` -> ``user_id=ana_ruiz_2041``."""
    data = arguments
    if isinstance(arguments, str):
        parsed = json_payload(arguments)
        if parsed is None:
            s = arguments.strip()
            if max_value_chars and len(s) > max_value_chars:
                s = s[:max_value_chars] + "…"
            return s
        data = parsed
    if isinstance(data, Mapping):
        parts = []
        for k, v in data.items():
            r = compact_json(v)
            if max_value_chars and len(r) > max_value_chars:
                r = r[:max_value_chars] + "…"
            parts.append(f"{k}={r}")
        return ", ".join(parts)
    if data is None:
        return ""
    return compact_json(data)


def render_result(content: Any) -> str:
    """A tool result on one line: JSON compacted, other text with its whitespace collapsed."""
    text = content_text(content)
    data = json_payload(text)
    if data is not None:
        return compact_json(data)
    return _WHITESPACE_RE.sub(" ", text).strip()


def _indent(text: str) -> str:
    return text.replace("\n", "\n  ")


def render_messages(messages: Sequence[Mapping[str, Any]]) -> str:
    """Render a span as readable transcript lines, one entry per message/tool call::

        User: Sure, my user ID is ana_ruiz_2041.
        Assistant called get_customer(user_id=ana_ruiz_2041) -> {name: {first_name: Ana, ...}, ...}
        Assistant: Here are the options ...

    Tool calls are paired with their results by id within one turn, by position where
    real traces reuse or omit ids (OpenAI, legacy and Anthropic calls alike); a call without a
    result shows ``-> (no result yet, call id ...)``; a result that answers no
    call is shown as ``Tool NAME returned: ...``. A ``History summary:`` message
    in the span is shown as ``Earlier summary: ...`` with its marker removed.
    """
    msgs = [m for m in messages if isinstance(m, Mapping)]
    pairs, _orphans = pair_tool_calls(msgs)
    results = tool_results_by_call(msgs)
    answered = set(pairs.values())
    lines: list[str] = []
    for i, msg in enumerate(msgs):
        role = str(msg.get("role") or "unknown")
        text = own_text(msg).strip()
        if role in ("tool", "function"):
            if i in answered:
                continue
            name = msg.get("name") or "tool"
            lines.append(f"Tool {name} returned: {render_result(msg.get('content'))}")
            continue
        if text:
            if starts_with_summary_marker(msg):
                lines.append("Earlier summary: " + _indent(strip_summary_marker(text)))
            else:
                lines.append(f"{_ROLE_LABELS.get(role, role.capitalize())}: {_indent(text)}")
        for ci, call in enumerate(raw_calls(msg)):
            head = f"Assistant called {tool_call_name(call)}({render_arguments(tool_call_arguments(call))})"
            if (i, ci) not in results:
                cid = call.get("id")
                lines.append(head + (f" -> (no result yet, call id {cid})" if cid else " -> (no result yet)"))
            else:
                lines.append(head + " -> " + render_result(results[(i, ci)]))
    return "\n".join(lines)


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
    lo = safe_cut(text, lo, reach=24) if lo < len(text) else lo  # never inside a word, an id or an emoji
    return (text[:lo].rstrip() + "…") if lo > 0 else ""


def fit_to_tokens(text: str, budget: int, count: Callable[[str], int]) -> str:
    """Make sure ``count(text) <= budget``: drop whole lines from the end, then cut characters."""
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
