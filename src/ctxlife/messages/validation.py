"""Whether a provider would accept a message list (:func:`validate`), and whether a list changed."""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxlife.errors import InvalidMessagesError
from ctxlife.messages.formats import ANTHROPIC, SYSTEM_ROLES, Message, detect_format, role
from ctxlife.messages.text import has_block
from ctxlife.messages.turns import calls_of, has_calls, is_tool_result, pair_tool_results


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason a message list would be rejected by a provider."""

    index: int
    code: str
    detail: str

    def __str__(self) -> str:
        return f"message {self.index}: {self.code}: {self.detail}"


def validate(messages: Sequence[Message], fmt: str | None = None) -> list[Problem]:
    """Return the reasons a provider would reject this sequence (empty if valid).

    Checks, in the list's format: system prompts come before any other message; every result
    answers a call of the message it follows (OpenAI: in the run of ``tool`` messages right
    after the call, in any order; Anthropic: in the next user message), and every call has its
    result; Anthropic ``tool_use`` blocks only in assistant messages and ``tool_result`` blocks
    only in user messages, and the conversation opens with a user message. A list in no known
    format gets one ``unknown_format`` problem.
    """
    if fmt is None:
        try:
            fmt = detect_format(messages)
        except InvalidMessagesError as exc:
            return [Problem(_refused_index(str(exc)), "unknown_format", str(exc))]
    problems: list[Problem] = []
    seen_non_system = False
    i, n = 0, len(messages)
    answered_by_previous: set[int] = set()
    while i < n:
        message = messages[i]
        r = role(message)
        if r in SYSTEM_ROLES:
            if seen_non_system:
                problems.append(
                    Problem(i, "system_after_conversation", "system message after the conversation started")
                )
            i += 1
            continue
        if not seen_non_system and fmt == ANTHROPIC and r != "user":
            problems.append(
                Problem(i, "first_message_not_user", "an Anthropic conversation must open with a user message")
            )
        seen_non_system = True
        if fmt == ANTHROPIC:
            if r == "user" and has_block(message, "tool_use"):
                problems.append(Problem(i, "tool_use_in_user_message", "tool_use blocks belong in assistant messages"))
            if r == "assistant" and has_block(message, "tool_result"):
                problems.append(
                    Problem(i, "tool_result_in_assistant_message", "tool_result blocks belong in user messages")
                )
        if is_tool_result(message) and i not in answered_by_previous:
            problems.append(Problem(i, "orphan_tool_result", "tool result without a preceding assistant tool call"))
            i += 1
            continue
        if not has_calls(message):
            i += 1
            continue
        pairing = pair_tool_results(messages, i)
        calls = calls_of(message)
        for position, answered in enumerate(pairing.results):
            j = pairing.result_at[position][0]
            if answered is None:
                problems.append(
                    Problem(j, "orphan_tool_result", f"more tool results than the {len(calls)} call(s) at message {i}")
                )
            elif position in pairing.mismatched:
                answer = _answer_id(messages, pairing.result_at[position])
                open_ids = [calls[k].id for k in sorted({answered, *pairing.unanswered})]
                problems.append(
                    Problem(
                        j,
                        "tool_result_id_mismatch",
                        f"answers {answer!r} but no unanswered call of message {i} has that id "
                        f"(unanswered: {open_ids!r})",
                    )
                )
        if pairing.unanswered:
            missing = [calls[k].id for k in pairing.unanswered]
            problems.append(
                Problem(
                    i,
                    "tool_call_without_result",
                    f"{len(missing)} of {len(calls)} tool call(s) have no result (ids {missing!r})",
                )
            )
        if fmt == ANTHROPIC and pairing.end == i + 2:
            answered_by_previous = {i + 1}  # the next message: its tool_result blocks were paired above
            i += 1
        else:
            i = pairing.end
    return problems


def _answer_id(messages: Sequence[Message], at: tuple[int, int | None]) -> Any:
    j, k = at
    if k is None:
        return messages[j].get("tool_call_id")
    return messages[j]["content"][k].get("tool_use_id")


_INDEX_RE = re.compile(r"\[(\d+)\]")


def _refused_index(text: str) -> int:
    match = _INDEX_RE.search(text)
    return int(match.group(1)) if match else 0


def same_messages(a: Sequence[Message], b: Sequence[Message]) -> bool:
    """Whether two lists hold the same messages in the same order: the very same objects, or equal ones.

    A C-level check: a position holding the same object costs a pointer comparison (10,000
    messages: ~10 us), so it is the check for "did anything replace a message of this list".
    """
    if a is b:  # (a list's == compares every position even with itself)
        return True
    if len(a) != len(b):
        return False
    if type(a) is type(b) and type(a) in (list, tuple):
        return a == b
    return all(map(operator.is_, a, b)) or list(a) == list(b)
