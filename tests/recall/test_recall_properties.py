"""Property: whatever the conversation, the recalled block never breaks the list or displaces the question.

Conversations come from the reliability suite's generators (chat, ReAct text, native tool calls
with repeated ids, CJK, emoji, huge and empty contents), played call by call like an agent loop
that keeps sending its live list. After every call: the list is provider-valid, the latest user
message is still the latest user message, unchanged; there is at most one recall block, right
before the question being worked on (the turn), within the budget; and the raw history holds exactly what the
conversation produced
(the block is never recorded).
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))

from reliability_gen import Call, Chat, Checks, Driver, Native, User, examples, scripts, system_prompts  # noqa: E402

from ctxlife.config import settings_from_dict  # noqa: E402
from ctxlife.host import Host  # noqa: E402
from ctxlife.messages import current_turn_index, is_recall_block, last_user_index, validate  # noqa: E402

BLOCKS_SEEN: list[int] = []

_FILLER = " ".join(f"step{i} of the itinerary planning notes" for i in range(60))
LONG_LOOKUP: list[Any] = [
    User("Please look up order 42 for me."),
    Native([Call("get_order", {"order_id": "ORD-1"}, "call_0", "order 42: shipped to Lisbon, amount 318.40 EUR")]),
    Chat("Order 42 was shipped to Lisbon."),
    *[step for i in range(8) for step in (User(f"Next topic {i}: {_FILLER}"), Chat(f"Noted {i}. {_FILLER}"))],
]


class RecallDriver(Driver):
    """The reliability driver, with recall's own checks after every model call."""

    budget = 0

    def model_call(self) -> Any:
        before = list(self.live)
        question = last_user_index([m for m in before if not is_recall_block(m)])
        latest = [m for m in before if not is_recall_block(m)][question] if question is not None else None
        report = self.host.manage(self.live)
        self.reports.append(report)
        self.recorded_upto = len(self.produced)
        after = self.live
        assert report.failures == [], report.failures
        assert validate(after) == [], validate(after)[:3]
        found = [i for i, m in enumerate(after) if is_recall_block(m)]
        assert len(found) <= 1, f"{len(found)} recall blocks"
        if latest is not None:
            j = last_user_index(after)
            assert j is not None and after[j] == latest, "latest user message dropped or changed"
            if found:
                turn = current_turn_index(after)
                assert turn is not None and found[0] == turn - 1, "the block is not right before the turn's question"
        if found:
            self.checks.hit("recall_block_in_place")
            BLOCKS_SEEN.append(1)
            assert self.host.counter().count_text(after[found[0]]["content"]) <= self.budget
        return report


@pytest.mark.parametrize(("window", "exercised"), [(1000, False), (4000, True)])
def test_the_recall_block_keeps_every_sequence_valid(window, exercised, tmp_path):
    """At 1,000 tokens there is mostly no room for a block (it is skipped); at 4,000 there is."""
    budget = int(0.25 * window)  # past_share: the most a turn that refers to the past gets

    @examples(20)
    # Random scripts of up to 6 turns often fit 4,000 tokens (nothing evicted, nothing to recall):
    # this one always evicts an order lookup and then asks about it, so the block's checks run.
    @example(system=[], script=LONG_LOOKUP, question="What did the order 42 lookup return earlier?")
    @given(
        system=system_prompts(),
        script=scripts(min_turns=2, max_turns=6, max_steps=4),
        question=st.sampled_from(
            ["What did you look up earlier?", "请问之前的结果是什么？", "lookup result order 42", "ok"]
        ),
    )
    def prop(system, script, question):
        session = f"r-{uuid.uuid4().hex[:12]}"
        settings = settings_from_dict(
            {
                "strategies": ["snapshot_restore", "llm_summary", "recall"],
                "store": f"file://{tmp_path / 'sessions'}",
                "llm_summary": {"summarizer": "extractive", "max_summary_tokens": 120, "min_gain_tokens": 20},
            }
        )
        host = Host(settings, context_window=window, session_id=session)
        try:
            driver = RecallDriver(host, Checks(), session_id=session, system=system)
            driver.budget = budget
            driver.play(script)
            driver.append({"role": "user", "content": question})
            driver.model_call()
            driver.check_raw_history(host.store)  # the block was never recorded
        finally:
            host.close()

    BLOCKS_SEEN.clear()
    prop()
    if exercised:
        assert BLOCKS_SEEN, "no example produced a recall block: the property was never exercised"
