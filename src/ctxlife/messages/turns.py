"""The structure of a conversation: tool calls and their results, units, rounds and turns.

An assistant message with tool calls together with the messages that answer it is ONE *unit*
(:func:`split_units`): strategies cut between units, never inside one. A *round* starts at each
user turn (:func:`round_starts`: a user message that carries no tool results and that ctxlife did
not insert). Real traces reuse ids across turns and sometimes inside one message, or leave them
out: a result whose id is missing, or names no unanswered call, goes to the first unanswered call
(by position), so ids are only trusted within one turn (:func:`pair_tool_results`). Also the
helpers that read tool calls as written (:func:`raw_calls`, :func:`tool_call_name`, ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ctxlife.messages.formats import Message, role
from ctxlife.messages.inserted import is_inserted, plain_role
from ctxlife.messages.text import arguments_text, content_blocks, content_text, has_block, tool_calls


@dataclass(frozen=True, slots=True)
class Unit:
    """A half-open slice ``[start, end)`` of a message list that must stay whole."""

    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call in any format: its id (None for a legacy ``function_call``), name and arguments text."""

    id: Any
    name: str
    arguments: str


def is_tool_result(message: Message) -> bool:
    """Whether a message answers tool calls: an OpenAI ``tool``/``function`` message, or an Anthropic user
    message carrying ``tool_result`` blocks."""
    r = role(message)
    return r in ("tool", "function") or (r == "user" and has_block(message, "tool_result"))


def is_user_turn(message: Message) -> bool:
    """Whether a message is a user turn: a user message that carries no tool results and that
    ctxlife did not insert (a summary is a user message in Anthropic lists, but no turn)."""
    return role(message) == "user" and not has_block(message, "tool_result") and not is_inserted(message)


def calls_of(message: Message) -> list[ToolCall]:
    """The tool calls of an assistant message in any format (OpenAI ``tool_calls``, a legacy
    ``function_call``, Anthropic ``tool_use`` blocks); empty for any other message."""
    if role(message) != "assistant":
        return []
    out: list[ToolCall] = []
    for call in tool_calls(message):
        function = call.get("function") if isinstance(call, dict) else None
        function = function if isinstance(function, dict) else {}
        out.append(
            ToolCall(
                call.get("id") if isinstance(call, dict) else None,
                str(function.get("name") or ""),
                arguments_text(function.get("arguments")),
            )
        )
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        out.append(ToolCall(None, str(legacy.get("name") or ""), arguments_text(legacy.get("arguments"))))
    for block in content_blocks(message):
        if block.get("type") == "tool_use":
            out.append(ToolCall(block.get("id"), str(block.get("name") or ""), arguments_text(block.get("input"))))
    return out


def has_calls(message: Message) -> bool:
    """Whether a message makes tool calls that other messages must answer."""
    if role(message) != "assistant":
        return False
    return bool(tool_calls(message)) or isinstance(message.get("function_call"), dict) or has_block(message, "tool_use")


@dataclass(frozen=True, slots=True)
class ToolPairing:
    """How the messages after one call-making assistant message answer its calls.

    ``results[j]`` is the call position (index into :func:`calls_of`) that the ``j``-th result
    answers, or None when it answers nothing (more results than calls); ``result_at[j]`` is where
    that result is: ``(message index, block index)`` (block index None for a whole ``tool`` or
    ``function`` message). ``mismatched`` holds the result positions whose id names no unanswered
    call while the call they were given by position has a different id (a provider rejects those).
    ``unanswered`` holds the call positions without a result. ``end`` is the end of the unit.
    """

    call_index: int
    end: int
    results: tuple[int | None, ...]
    mismatched: tuple[int, ...]
    unanswered: tuple[int, ...]
    result_at: tuple[tuple[int, int | None], ...] = ()


def _answers(messages: Sequence[Message], index: int) -> tuple[list[tuple[Any, int, int | None]], int]:
    """The results that may answer ``messages[index]``'s calls, as (id, message index, block index),
    and the unit's end."""
    n = len(messages)
    message = messages[index]
    found: list[tuple[Any, int, int | None]]
    if has_block(message, "tool_use"):  # Anthropic: tool_result blocks of the very next message
        if index + 1 < n and role(messages[index + 1]) == "user" and has_block(messages[index + 1], "tool_result"):
            nxt = messages[index + 1]
            found = [
                (b.get("tool_use_id"), index + 1, k)
                for k, b in enumerate(nxt["content"])
                if isinstance(b, dict) and b.get("type") == "tool_result"
            ]
            return found, index + 2
        return [], index + 1
    found = []
    j = index + 1
    while j < n and role(messages[j]) in ("tool", "function"):
        found.append((messages[j].get("tool_call_id") if role(messages[j]) == "tool" else None, j, None))
        j += 1
    return found, j


def pair_tool_results(messages: Sequence[Message], index: int) -> ToolPairing:
    """Pair the tool calls of ``messages[index]`` with the results that follow it.

    A result goes to the first unanswered call with its id; a result without an id, or whose id
    names no unanswered call, goes to the first unanswered call by position (real traces reuse ids
    and omit them), and is marked mismatched when both ids are known and differ.
    """
    ids = [c.id for c in calls_of(messages[index])]
    open_calls = list(range(len(ids)))
    answers, end = _answers(messages, index)
    results: list[int | None] = []
    mismatched: list[int] = []
    for position, (answer, _, _) in enumerate(answers):
        target = None
        if answer is not None:
            target = next((k for k in open_calls if ids[k] == answer), None)
        if target is None and open_calls:
            target = open_calls[0]
            if answer is not None and ids[target] is not None:
                mismatched.append(position)
        if target is not None:
            open_calls.remove(target)
        results.append(target)
    return ToolPairing(
        index, end, tuple(results), tuple(mismatched), tuple(open_calls), tuple((j, k) for _, j, k in answers)
    )


def split_units(messages: Sequence[Message]) -> list[Unit]:
    """Split a message list into units.

    Every message is its own unit, except a message making tool calls, which forms one unit with
    the messages that answer it (OpenAI: the run of ``tool``/``function`` messages right after it;
    Anthropic: the next user message when it carries ``tool_result`` blocks).
    """
    starts = unit_starts(messages)
    ends = [*starts[1:], len(messages)] if starts else []
    return [Unit(start, end) for start, end in zip(starts, ends, strict=True)]


def unit_starts(messages: Sequence[Message]) -> list[int]:
    """Where each unit of :func:`split_units` starts (a unit ends where the next starts), as plain
    ints: one pass, no :class:`Unit` per message (a cold 100k-message history has ~85k units)."""
    starts: list[int] = []
    i, n = 0, len(messages)
    while i < n:
        starts.append(i)
        message = messages[i]
        plain = plain_role(message)
        if plain is None:
            calls = has_calls(message)
        else:  # has_calls() without its block look-up (the content is no list)
            calls = plain == "assistant" and (
                bool(tool_calls(message)) or isinstance(message.get("function_call"), dict)
            )
        i = _answers(messages, i)[1] if calls else i + 1
    return starts


def round_starts(messages: Sequence[Message]) -> list[int]:
    """Indices of the user turns; each one starts a round.

    A round is a user turn and everything after it up to the next one. Cutting at a round start
    never splits a unit: tool results are ``tool`` messages or user messages that carry
    ``tool_result`` blocks, neither of which is a user turn.
    """
    out: list[int] = []
    for i, message in enumerate(messages):
        plain = plain_role(message)
        # (a user message with text content that is no mark line is a turn: is_user_turn() without its look-ups)
        if plain == "user" if plain is not None else is_user_turn(message):
            out.append(i)
    return out


def last_user_index(messages: Sequence[Message]) -> int | None:
    """Index of the latest user turn (None if there is none)."""
    for i in range(len(messages) - 1, -1, -1):
        if is_user_turn(messages[i]):
            return i
    return None


def _turn_key(message: Message) -> Any:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return content_text(message)
    return ("media", id(content))


def current_turn_index(messages: Sequence[Message], starts: Sequence[int] | None = None) -> int | None:
    """Index of the user turn being worked on: the last one that is not a repeated prompt.

    Frameworks add boilerplate user messages inside a turn (CrewAI's ReAct mode appends
    "Analyze the tool result..." after every tool step). A user message whose exact text
    occurs more than once is such a prompt; the question is the last user message that does
    not repeat (the last user message if every one repeats). ``starts``: the list's
    :func:`round_starts`, when the caller has them already.
    """
    indices = round_starts(messages) if starts is None else starts
    if not indices:
        return None
    keys = [_turn_key(messages[i]) for i in indices]
    counts: dict[Any, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    for index, key in zip(reversed(indices), reversed(keys), strict=True):
        if counts[key] == 1:
            return index
    return indices[-1]


def tool_call_name(call: Mapping[str, Any]) -> str:
    """The function name of an OpenAI-format tool call, or of an Anthropic ``tool_use`` block
    (``"tool"`` when it has none)."""
    if isinstance(call, Mapping) and call.get("type") == "tool_use":
        return str(call.get("name") or "tool")
    fn = call.get("function") if isinstance(call, Mapping) else None
    name = fn.get("name") if isinstance(fn, Mapping) else None
    return str(name) if name else "tool"


def tool_call_arguments(call: Mapping[str, Any]) -> Any:
    """The arguments of a tool call as stored (OpenAI: a JSON string, usually; Anthropic: the
    ``input`` object), or ``None``."""
    if isinstance(call, Mapping) and call.get("type") == "tool_use":
        return call.get("input")
    fn = call.get("function") if isinstance(call, Mapping) else None
    return fn.get("arguments") if isinstance(fn, Mapping) else None


def pair_tool_calls(messages: Sequence[Mapping[str, Any]]) -> tuple[dict[tuple[int, int], int], set[int]]:
    """Pair each tool call with the message holding its result (by id within one turn, else by position).

    Returns ``(pairs, orphans)``: ``pairs[(assistant_index, call_index)] = result message index``
    for answered calls (``call_index`` into :func:`calls_of`; for Anthropic lists several calls
    share the user message holding their ``tool_result`` blocks), and the indices of result
    messages that answer nothing. See :func:`pair_tool_results`.
    """
    pairs: dict[tuple[int, int], int] = {}
    orphans: set[int] = set()
    answered: set[int] = set()
    n = len(messages)
    i = 0
    while i < n:
        message = messages[i]
        if isinstance(message, dict) and has_calls(message):
            pairing = pair_tool_results(cast(Sequence[Message], messages), i)
            for position, call in enumerate(pairing.results):
                j = pairing.result_at[position][0]
                if call is None:
                    orphans.add(j)
                else:
                    pairs[(i, call)] = j
                answered.add(j)
            i = max(pairing.end, i + 1)
            continue
        if isinstance(message, dict) and is_tool_result(message) and i not in answered:
            orphans.add(i)
        i += 1
    return pairs, orphans


def raw_calls(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The tool calls of an assistant message as written, in :func:`calls_of`'s order: OpenAI
    ``tool_calls`` entries, a legacy ``function_call`` (as ``{"function": ...}``), Anthropic
    ``tool_use`` blocks. :func:`tool_call_name` and :func:`tool_call_arguments` read each."""
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return []
    calls = message.get("tool_calls")
    out: list[Mapping[str, Any]] = (
        [c if isinstance(c, Mapping) else {} for c in calls] if isinstance(calls, list) else []
    )
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping):
        out.append({"id": None, "type": "function", "function": legacy})
    content = message.get("content")
    if isinstance(content, list):
        out.extend(b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_use")
    return out


def tool_results_by_call(messages: Sequence[Mapping[str, Any]]) -> dict[tuple[int, int], Any]:
    """``(assistant index, call index) -> the result`` (a ``tool`` message's content, or an Anthropic
    ``tool_result`` block's; text when it is a list of parts) for every answered call (see
    :func:`pair_tool_results`)."""
    out: dict[tuple[int, int], Any] = {}
    for i, message in enumerate(messages):
        if not (isinstance(message, dict) and has_calls(message)):
            continue
        pairing = pair_tool_results(cast(Sequence[Message], messages), i)
        for position, call in enumerate(pairing.results):
            if call is None:
                continue
            j, k = pairing.result_at[position]
            content = messages[j].get("content") if k is None else messages[j]["content"][k].get("content")
            out[(i, call)] = content_text(content) if isinstance(content, list) else content
    return out
