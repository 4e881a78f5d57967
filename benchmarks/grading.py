"""What the benchmarks grade with, written without any ctxlife code (so ctxlife never grades itself).

* "in the context" (:func:`present`): the text a model reads (message content, tool-call names and
  arguments, :func:`message_text`) with case and runs of whitespace ignored; a value that starts or
  ends with an ASCII letter or digit must not continue a longer ASCII word or number there;
* a :class:`Need` (values wanted at a call) is :func:`kept` when every group has one value present
  (:func:`answered`: the same for answer groups over the messages sent);
* :func:`reused_argument_needs`: the tool-call argument values a recording re-uses after they
  appeared earlier;
* :func:`invalid_codes`: a context with a tool result whose call is not right before it, or a tool
  call without its results.

Used by ``bench_retention.py``, ``bench_recall.py`` and ``bench_crewai_peer.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

Message = dict[str, Any]
MIN_VALUE_CHARS = 4


def normalize(text: str) -> str:
    return " ".join(text.casefold().split())


def _ascii_alnum(char: str) -> bool:
    return char.isascii() and char.isalnum()


def present(value: str, text: str) -> bool:
    """``value`` occurs in normalized ``text``, not as part of a longer ASCII word or number."""
    needle = normalize(value)
    if not needle:
        return False
    start = 0
    while True:
        at = text.find(needle, start)
        if at < 0:
            return False
        end = at + len(needle)
        before_ok = not (_ascii_alnum(needle[0]) and at > 0 and _ascii_alnum(text[at - 1]))
        after_ok = not (_ascii_alnum(needle[-1]) and end < len(text) and _ascii_alnum(text[end]))
        if before_ok and after_ok:
            return True
        start = at + 1


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def _arguments(call: dict[str, Any]) -> Any:
    raw = (call.get("function") or {}).get("arguments")
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def message_text(message: Message) -> str:
    """What a model reads in a message (content, tool-call names and arguments), normalized."""
    parts: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        parts += [b if isinstance(b, str) else str(b.get("text", "")) for b in content if isinstance(b, str | dict)]
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        parts.append(str(function.get("name") or ""))
        raw = function.get("arguments")
        if isinstance(raw, str):
            parts.append(raw)
        args = _arguments(call)
        if not isinstance(args, str):
            parts += [str(v) for v in _leaves(args) if v is not None and not isinstance(v, bool)]
    return normalize("\n".join(parts))


class TextCache:
    """Normalized text per message object (messages are shared by all methods of a replay)."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[Message, Any, str]] = {}

    def __call__(self, message: Message) -> str:
        entry = self._cache.get(id(message))
        content = message.get("content")
        if entry is not None and entry[0] is message and entry[1] is content:
            return entry[2]
        text = message_text(message)
        self._cache[id(message)] = (message, content, text)
        return text

    def context(self, messages: Sequence[Message]) -> str:
        return "\n".join(self(m) for m in messages)


# -- needs --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Need:
    """At call ``call`` (index of the assistant message written there), every group needs one of its values."""

    call: int
    groups: tuple[tuple[str, ...], ...]
    metric: str
    label: str = ""


def kept(need: Need, context_text: str) -> bool:
    """Every group of ``need`` has one of its values in ``context_text`` (normalized, as :func:`message_text`)."""
    return all(any(present(v, context_text) for v in group) for group in need.groups)


def answered(groups: Sequence[Sequence[str]], messages: Sequence[Message]) -> bool:
    """Every answer group has one of its strings in the messages sent."""
    text = "\n".join(message_text(m) for m in messages)
    return all(any(present(value, text) for value in group) for group in groups)


def reused_argument_needs(messages: Sequence[Message]) -> list[Need]:
    """Argument values of each tool call that already appeared in an earlier non-system message.

    Values in the system prompt are excluded (every method keeps it); values shorter than
    ``MIN_VALUE_CHARS`` and booleans are not counted; each value once per call.
    """
    texts = [message_text(m) for m in messages]
    system = "\n".join(t for m, t in zip(messages, texts, strict=True) if m.get("role") == "system")
    needs = []
    for k, message in enumerate(messages):
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        earlier = "\n".join(t for m, t in zip(messages[:k], texts[:k], strict=True) if m.get("role") != "system")
        seen: set[str] = set()
        for call in message["tool_calls"]:
            args = _arguments(call)
            if isinstance(args, str):
                continue
            for value in _leaves(args):
                if value is None or isinstance(value, bool) or not isinstance(value, str | int | float):
                    continue
                text = str(value)
                key = normalize(text)
                if len(key) < MIN_VALUE_CHARS or key in seen:
                    continue
                if present(text, earlier) and not present(text, system):
                    seen.add(key)
                    needs.append(Need(k, ((text,),), "reused args", f"{k}:{text}"))
    return needs


# -- validity ---------------------------------------------------------------------------------------


def invalid_codes(context: Sequence[Message]) -> list[str]:
    """Tool results without their call right before them; tool calls without all their results."""
    problems: list[str] = []
    open_ids: set[str] = set()
    for message in context:
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if call_id in open_ids:
                open_ids.discard(call_id)
            else:
                problems.append("tool result without its call")
            continue
        if open_ids:
            problems.append("tool call without its result")
        open_ids = (
            {c.get("id") for c in message.get("tool_calls") or ()} if message.get("role") == "assistant" else set()
        )
    if open_ids:
        problems.append("tool call without its result")
    return problems
