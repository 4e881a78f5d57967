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
from hypothesis import event, example, given
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


#: At 4,000 tokens, the share of generated examples that must produce a recall block (issue 44: with the
#: random scripts alone, 1 of 21 did; each example now ends with an evicted lookup it asks about: 13, 20
#: and 9 of 21 in three runs, the others skipped for lack of room). A quarter: far above the 1 of 21.
REACH_FLOOR = 0.25


@pytest.mark.parametrize(("window", "exercised"), [(1000, False), (4000, True)])
def test_the_recall_block_keeps_every_sequence_valid(window, exercised, tmp_path):
    """At 1,000 tokens there is mostly no room for a block (it is skipped); at 4,000 there is: there,
    each generated conversation is followed by an order lookup that later turns evict, and the
    question asks about it, so most examples reach the block's checks (a floor, REACH_FLOOR)."""
    budget = int(0.25 * window)  # past_share: the most a turn that refers to the past gets
    reached: list[bool] = []

    @examples(20)
    @example(system=[], script=LONG_LOOKUP, question="What did the order 42 lookup return earlier?")
    @given(
        system=system_prompts(),
        script=scripts(min_turns=2, max_turns=6, max_steps=4),
        question=st.sampled_from(
            ["What did you look up earlier?", "请问之前的结果是什么？", "lookup result order 42", "ok"]
            if not exercised
            else [
                "What did the order 42 lookup return earlier?",
                "Earlier you looked up order 42: where was it shipped?",
                "请问 order 42 之前的查询结果是什么？",
            ]
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
        seen = len(BLOCKS_SEEN)
        try:
            driver = RecallDriver(host, Checks(), session_id=session, system=system)
            driver.budget = budget
            driver.play([*script, *LONG_LOOKUP] if exercised and script is not LONG_LOOKUP else script)
            driver.append({"role": "user", "content": question})
            driver.model_call()
            driver.check_raw_history(host.store)  # the block was never recorded
        finally:
            host.close()
        reached.append(len(BLOCKS_SEEN) > seen)
        event("recall block: " + ("reached" if reached[-1] else "not reached"))

    BLOCKS_SEEN.clear()
    prop()
    if exercised:
        share = sum(reached) / len(reached)
        assert share >= REACH_FLOOR, (
            f"a recall block in {sum(reached)} of {len(reached)} examples, below the floor {REACH_FLOOR:.0%}: "
            "the block's checks are not reached"
        )
