"""Message units, rounds and validity checks for OpenAI-format message lists.

A message is a dict: ``{"role": "system"|"user"|"assistant"|"tool", "content": ...}``.
An assistant message may carry ``tool_calls``; the ``tool`` messages that answer it
follow it directly. Such an assistant message together with its answers is ONE
*unit*: strategies cut between units, never inside one.

Results are paired with their calls by ``tool_call_id``, in any order inside the run
of ``tool`` messages directly after the calling assistant message (parallel tool calls
complete in any order, and providers accept that). Real traces reuse ids across turns
and sometimes inside one message, or leave them out: a result whose id is missing, or
names a call that is already answered, goes to the first unanswered call (by position),
so ids are only trusted within one turn. See :func:`pair_tool_results`.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxlife.errors import InvalidMessagesError

Message = dict[str, Any]

SUMMARY_PREFIX = "History summary:"
"""How a summary message written by ctxlife starts, so strategies recognise it later.

A content prefix rather than an extra key: providers reject unknown message keys.
"""

RECALL_PREFIX = "Recalled from earlier in this conversation"
"""How the ``recall`` strategy's block of passages from the raw history starts.

Inserted by ctxlife before each model call and replaced on the next: never recorded into the raw
history, never summarized, never recalled again.
"""


@dataclass(frozen=True, slots=True)
class Unit:
    """A half-open slice ``[start, end)`` of a message list that must stay whole."""

    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason a message list would be rejected by a provider."""

    index: int
    code: str
    detail: str

    def __str__(self) -> str:
        return f"message {self.index}: {self.code}: {self.detail}"


def role(message: Message) -> str | None:
    return message.get("role") if isinstance(message, dict) else None


def tool_calls(message: Message) -> list[dict[str, Any]]:
    """The tool calls of an assistant message (empty for any other message)."""
    if role(message) != "assistant":
        return []
    calls = message.get("tool_calls")
    return calls if isinstance(calls, list) else []


@dataclass(frozen=True, slots=True)
class ToolPairing:
    """How the run of ``tool`` messages after one assistant message answers its calls.

    ``results[j]`` is the call position (index into the assistant message's calls) that
    the ``j``-th message of the run answers, or None when it answers nothing (more results
    than calls). ``mismatched`` holds the run positions whose ``tool_call_id`` names no
    unanswered call while the call they were given by position has a different id (a
    provider rejects those). ``unanswered`` holds the call positions without a result.
    """

    call_index: int
    end: int
    results: tuple[int | None, ...]
    mismatched: tuple[int, ...]
    unanswered: tuple[int, ...]


def _call_id(call: Any) -> Any:
    return call.get("id") if isinstance(call, dict) else None


def pair_tool_results(messages: Sequence[Message], index: int) -> ToolPairing:
    """Pair the tool calls of ``messages[index]`` with the ``tool`` messages right after it.

    A result goes to the first unanswered call with its ``tool_call_id``; a result without
    an id, or whose id names no unanswered call, goes to the first unanswered call by
    position (real traces reuse ids and omit them), and is marked mismatched when both ids
    are known and differ.
    """
    calls = tool_calls(messages[index])
    ids = [_call_id(c) for c in calls]
    open_calls = list(range(len(calls)))
    results: list[int | None] = []
    mismatched: list[int] = []
    n = len(messages)
    j = index + 1
    while j < n and role(messages[j]) == "tool":
        answer = messages[j].get("tool_call_id")
        target = None
        if answer is not None:
            target = next((k for k in open_calls if ids[k] == answer), None)
        if target is None and open_calls:
            target = open_calls[0]
            if answer is not None and ids[target] is not None:
                mismatched.append(j - index - 1)
        if target is not None:
            open_calls.remove(target)
        results.append(target)
        j += 1
    return ToolPairing(index, j, tuple(results), tuple(mismatched), tuple(open_calls))


def split_units(messages: Sequence[Message]) -> list[Unit]:
    """Split a message list into units.

    Every message is its own unit, except an assistant message with tool calls,
    which forms one unit with the run of ``tool`` messages directly after it.
    """
    units: list[Unit] = []
    i, n = 0, len(messages)
    while i < n:
        end = i + 1
        if tool_calls(messages[i]):
            while end < n and role(messages[end]) == "tool":
                end += 1
        units.append(Unit(i, end))
        i = end
    return units


def round_starts(messages: Sequence[Message]) -> list[int]:
    """Indices of the user messages; each one starts a round.

    A round is a user message and everything after it up to the next user
    message. Cutting at a round start never splits a unit, because ``tool``
    messages only follow assistant messages.
    """
    return [i for i, m in enumerate(messages) if role(m) == "user"]


def last_user_index(messages: Sequence[Message]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if role(messages[i]) == "user":
            return i
    return None


def current_turn_index(messages: Sequence[Message]) -> int | None:
    """Index of the user message being worked on: the last one that is not a repeated prompt.

    Frameworks add boilerplate user messages inside a turn (CrewAI's ReAct mode appends
    "Analyze the tool result..." after every tool step). A user message whose exact text
    occurs more than once is such a prompt; the question is the last user message that does
    not repeat (the last user message if every one repeats).
    """
    users = [(i, m.get("content")) for i, m in enumerate(messages) if role(m) == "user"]
    if not users:
        return None
    counts: dict[Any, int] = {}
    for _, content in users:
        key = content if isinstance(content, str) else id(content)
        counts[key] = counts.get(key, 0) + 1
    for i, content in reversed(users):
        if counts[content if isinstance(content, str) else id(content)] == 1:
            return i
    return users[-1][0]


def is_system(message: Message) -> bool:
    return role(message) == "system"


def is_summary(message: Message) -> bool:
    """Whether a message is a ctxlife history summary (content starts with :data:`SUMMARY_PREFIX`)."""
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, str) and content.startswith(SUMMARY_PREFIX)


def is_recall_block(message: Message) -> bool:
    """Whether a message is a ``recall`` block (content starts with :data:`RECALL_PREFIX`)."""
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, str) and content.startswith(RECALL_PREFIX)


def check_shape(messages: Any, where: str = "messages") -> None:
    """Raise :class:`InvalidMessagesError` unless ``messages`` is a list of role dicts."""
    if not isinstance(messages, list):
        raise InvalidMessagesError(
            f"{where} must be a list of message dicts, got {type(messages).__name__}; "
            "pass OpenAI-format messages such as [{'role': 'user', 'content': 'hi'}]"
        )
    if all(type(m) is dict and type(m.get("role")) is str for m in messages):
        return  # the common case, checked cheaply on every call
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise InvalidMessagesError(
                f"{where}[{i}] is not a message dict with a 'role' "
                f"(got {type(message).__name__}: {str(message)[:80]!r}); "
                "every message needs at least a 'role' key"
            )


def validate(messages: Sequence[Message]) -> list[Problem]:
    """Return the reasons a provider would reject this sequence (empty if valid).

    Checks: system messages come before any other message; every
    ``tool`` message is in the run directly after the assistant message whose
    ``tool_calls`` name it (in any order; see :func:`pair_tool_results`); every tool
    call has its result (a list about to
    be sent to a model never ends with unanswered calls).
    """
    problems: list[Problem] = []
    seen_non_system = False
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        r = role(message)
        if r == "system":
            if seen_non_system:
                problems.append(Problem(i, "system_after_conversation", "system message after the conversation started"))
            i += 1
            continue
        seen_non_system = True
        if r == "tool":
            problems.append(Problem(i, "orphan_tool_result", "tool result without a preceding assistant tool call"))
            i += 1
            continue
        calls = tool_calls(message)
        if not calls:
            i += 1
            continue
        pairing = pair_tool_results(messages, i)
        for offset, answered in enumerate(pairing.results):
            j = i + 1 + offset
            if answered is None:
                problems.append(Problem(j, "orphan_tool_result", f"more tool results than the {len(calls)} call(s) at message {i}"))
            elif offset in pairing.mismatched:
                answer_id = messages[j].get("tool_call_id")
                open_ids = [_call_id(calls[k]) for k in sorted({answered, *pairing.unanswered})]
                problems.append(
                    Problem(j, "tool_result_id_mismatch", f"answers {answer_id!r} but no unanswered call of message {i} has that id (unanswered: {open_ids!r})")
                )
        if pairing.unanswered:
            missing = [_call_id(calls[k]) for k in pairing.unanswered]
            problems.append(
                Problem(i, "tool_call_without_result", f"{len(missing)} of {len(calls)} tool call(s) have no result (ids {missing!r})")
            )
        i = pairing.end
    return problems


def same_messages(a: Sequence[Message], b: Sequence[Message]) -> bool:
    """Whether two lists hold the very same message objects in the same order (a fast C-level check)."""
    return len(a) == len(b) and all(map(operator.is_, a, b))


# ==================================================================================================
# Message-structure helpers shared by ctxlife.facts and ctxlife.summarizers (moved here from their
# private functions, behaviour unchanged). Issue 13's one message model folds these in: pairing by
# id within a turn, the tolerant summary detector and the marker handling live here, nowhere else.
# ==================================================================================================

_SUMMARY_WORDS = re.escape(SUMMARY_PREFIX.removesuffix(":"))
# The marker as a model may echo it back: any case, after a markdown heading or bold, space before ":".
_SUMMARY_MARKER_AT_START_RE = re.compile(r"\s*(?:#+\s*)?\**\s*" + _SUMMARY_WORDS + r"\s*:\**\s*", re.IGNORECASE)
_SUMMARY_MARKER_ANYWHERE_RE = re.compile(_SUMMARY_WORDS + r"\s*:", re.IGNORECASE)


def content_text(content: Any) -> str:
    """Text of a message ``content``: a string, ``None`` or a list of parts (``{"text": ...}`` or strings)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif isinstance(part.get("content"), str):
                    parts.append(part["content"])
        return "\n".join(parts)
    return str(content)


def json_payload(text: str) -> Any:
    """The JSON object or array that ``text`` holds (tool-call arguments, a tool result), else ``None``."""
    s = text.strip()
    if not s or s[0] not in "[{" or s[-1] not in "]}":
        return None
    try:
        return json.loads(s)
    except (ValueError, RecursionError):
        return None


def tool_call_name(call: Mapping[str, Any]) -> str:
    """The function name of an OpenAI-format tool call (``"tool"`` when it has none)."""
    fn = call.get("function") if isinstance(call, Mapping) else None
    name = fn.get("name") if isinstance(fn, Mapping) else None
    return str(name) if name else "tool"


def tool_call_arguments(call: Mapping[str, Any]) -> Any:
    """The ``arguments`` of an OpenAI-format tool call as stored (a JSON string, usually), or ``None``."""
    fn = call.get("function") if isinstance(call, Mapping) else None
    return fn.get("arguments") if isinstance(fn, Mapping) else None


def pair_tool_calls(messages: Sequence[Mapping[str, Any]]) -> tuple[dict[tuple[int, int], int], set[int]]:
    """Pair each tool call with its result: by id within one turn, else by position.

    Returns ``(pairs, orphans)``: ``pairs[(assistant_index, call_index)] = tool_index``
    for answered calls, and the indices of ``tool`` messages that answer nothing.
    Results are looked for in the run of ``tool`` messages directly after the
    assistant message; inside that run a result goes to the first unanswered
    call with its ``tool_call_id``, else to the first unanswered call (real
    traces reuse ids across turns, so ids are only trusted within one turn).
    """
    pairs: dict[tuple[int, int], int] = {}
    orphans: set[int] = set()
    n = len(messages)
    i = 0
    while i < n:
        msg = messages[i]
        msg_role = msg.get("role") if isinstance(msg, Mapping) else None
        calls = msg.get("tool_calls") if isinstance(msg, Mapping) else None
        if msg_role == "assistant" and calls:
            ids = [(c.get("id") if isinstance(c, Mapping) else None) for c in calls]
            open_calls = list(range(len(calls)))
            j = i + 1
            while j < n and isinstance(messages[j], Mapping) and messages[j].get("role") == "tool":
                tid = messages[j].get("tool_call_id")
                target = next((k for k in open_calls if tid is not None and ids[k] == tid), None)
                if target is None and open_calls:
                    target = open_calls[0]
                if target is None:
                    orphans.add(j)
                else:
                    open_calls.remove(target)
                    pairs[(i, target)] = j
                j += 1
            i = j
            continue
        if msg_role == "tool":
            orphans.add(i)
        i += 1
    return pairs, orphans


def starts_with_summary_marker(message: Mapping[str, Any]) -> bool:
    """A system/user/assistant message whose text starts with the ``History summary:`` marker.

    More tolerant than :func:`is_summary` (which recognises the messages ctxlife writes): any
    case, leading whitespace, markdown heading or bold, and content given as parts. Summarizers
    use it to fold a summary found inside a span instead of summarizing it again.
    """
    if message.get("role") not in ("system", "user", "assistant"):
        return False
    return _SUMMARY_MARKER_AT_START_RE.match(content_text(message.get("content"))) is not None


def strip_summary_marker(text: str | None) -> str:
    """Remove every ``History summary:`` marker (leading or nested) from ``text``,
    so that folding a previous summary never nests one summary inside another."""
    if not text:
        return ""
    s = text
    while (m := _SUMMARY_MARKER_AT_START_RE.match(s)) is not None:
        s = s[m.end() :]
    s = _SUMMARY_MARKER_ANYWHERE_RE.sub("", s)
    return s.strip()
