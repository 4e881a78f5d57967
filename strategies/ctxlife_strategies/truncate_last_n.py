"""``truncate_last_n``: keep the system messages and the last N rounds.

It acts when the context is above ``threshold`` x window (the warning line), or on every
call with ``always = true``. A round is a user message and everything after it up to the next user message,
so a cut never separates a tool call from its result. The first user message
(under CrewAI: the task itself) is pinned by default, and the question being worked
on (the last user message that is not a repeated framework prompt such as CrewAI's
"Analyze the tool result...") always stays, so the agent never loses what it was asked.
"""

from __future__ import annotations

from pydantic import Field

import ctxlife
from ctxlife.messages import current_turn_index, is_inserted, is_system, round_starts


class TruncateLastN(ctxlife.Strategy):
    name = "truncate_last_n"

    class Options(ctxlife.Options):
        rounds: int = Field(2, ge=1, description="How many of the most recent rounds to keep verbatim.")
        always: bool = Field(
            False,
            description="Cut on every call, even below the threshold (default: only when the context exceeds "
            "threshold x context window).",
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
        if not self.options.always and ctx.count() <= ctx.budget:
            return
        cut = starts[-self.options.rounds]
        # The task (first user message) and the question being worked on always stay.
        pinned = {starts[0]} if self.options.pin_first_user else set()
        turn = current_turn_index(messages)
        if turn is not None:
            pinned.add(turn)
        # System prompts and what ctxlife inserted (a summary, a user message in Anthropic lists) stay.
        head = [m for i, m in enumerate(messages[:cut]) if is_system(m) or is_inserted(m) or i in pinned]
        removed = cut - len(head)
        if removed == 0:
            return
        messages[:cut] = head
        ctx.record("truncated", removed_messages=removed, kept_rounds=self.options.rounds)
