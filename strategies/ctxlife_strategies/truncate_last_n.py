"""``truncate_last_n``: keep the system messages and the last N rounds.

A round is a user message and everything after it up to the next user message,
so a cut never separates a tool call from its result. The first user message
(under CrewAI: the task itself) is pinned by default, and the question being worked
on (the last user message that is not a repeated framework prompt such as CrewAI's
"Analyze the tool result...") always stays, so the agent never loses what it was asked.
"""

from __future__ import annotations

from pydantic import Field

import ctxlife
from ctxlife.messages import current_turn_index, is_system, round_starts


class TruncateLastN(ctxlife.Strategy):
    name = "truncate_last_n"

    class Options(ctxlife.Options):
        rounds: int = Field(2, ge=1, description="How many of the most recent rounds to keep verbatim.")
        only_above_threshold: bool = Field(
            False,
            description="Act only when the context exceeds threshold x context window (else on every call).",
        )
        pin_first_user: bool = Field(
            True,
            description="Always keep the first user message (the task statement under CrewAI).",
        )

    options: Options

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        messages = ctx.messages
        starts = round_starts(messages)
        if len(starts) <= self.options.rounds:
            return
        if self.options.only_above_threshold and ctx.count() <= ctx.budget:
            return
        cut = starts[-self.options.rounds]
        # The task (first user message) and the question being worked on always stay.
        pinned = {starts[0]} if self.options.pin_first_user else set()
        turn = current_turn_index(messages)
        if turn is not None:
            pinned.add(turn)
        head = [m for i, m in enumerate(messages[:cut]) if is_system(m) or i in pinned]
        removed = cut - len(head)
        if removed == 0:
            return
        messages[:cut] = head
        ctx.record("truncated", removed_messages=removed, kept_rounds=self.options.rounds)
