"""recall's gain test told before the search: a turn it skips is one the search would have given no block.

A real file store holds a short raw history; each case is a context (the recent turns and the
turn) handed both to :func:`cannot_gain` and to the search and the strategy's own gate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxlife.recall import HistorySearch, live_keys, need_for_past
from ctxlife.recall.precheck import cannot_gain, recent_weight
from ctxlife.sessions import open_store
from ctxlife_strategies.recall import Recall

FIXED = Recall.Options
SYSTEM = {"role": "system", "content": "You are a friendly companion."}


def history() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(12):
        out.append({"role": "user", "content": f"Day {i}: let's chat about topic number {i}, nothing special."})
        out.append({"role": "assistant", "content": f"Sure, topic {i} sounds pleasant and calm."})
    out[4] = {"role": "user", "content": "I love the garden in spring, the tulips are lovely."}
    out[5] = {"role": "assistant", "content": "Tulips and a garden in spring: lovely indeed."}
    out[8] = {"role": "user", "content": "My sister Mireille is moving to Lyon next month."}
    out[12] = {"role": "user", "content": "花园里的郁金香开了，春天真美。"}
    return out


RECENT_TULIPS = [
    {"role": "user", "content": "The tulips in the garden are out, spring is lovely."},
    {"role": "assistant", "content": "How nice, tulips make a garden feel like spring."},
]

CASES = [
    (RECENT_TULIPS, "The garden tulips look lovely in spring."),  # the recent turn holds it all
    (RECENT_TULIPS, "The tulips in the garden: are they lovely in spring?"),
    (RECENT_TULIPS[:1], "Tulips, garden, spring."),
    ([], "The garden tulips look lovely in spring."),  # only the old turn holds it
    ([], "Where is Mireille moving?"),
    ([{"role": "user", "content": "Spring is here, lovely."}], "The garden tulips look lovely in spring."),
    (RECENT_TULIPS, "Where is Mireille moving next month?"),
    ([{"role": "user", "content": "Mireille is moving to Lyon."}], "Mireille moving to Lyon, you know."),
    (RECENT_TULIPS, "Thanks, that's all for today!"),
]


@pytest.fixture
def search(tmp_path: Path):
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("s1", history())
    store = open_store(url)
    found = HistorySearch(store, index_dir="memory")
    yield found
    found.close()
    store.close()


def gate(search: HistorySearch, messages: list[dict[str, Any]], turn: int) -> bool | None:
    """What the strategy decides from the search (None: no passage, no block either)."""
    query = messages[turn]["content"]
    visible = live_keys(messages)
    passages = search.passages(
        "s1",
        query,
        limit=FIXED.past_top_k,
        in_view=lambda record: (record.role, record.text) in visible,
        context=FIXED.context,
        min_score=FIXED.min_score,
        tool_weight=FIXED.tool_weight,
        min_coverage=FIXED.min_coverage,
    )
    if not passages:
        return None
    return Recall()._worth_a_block(need_for_past(query), passages, messages, turn)


@pytest.mark.parametrize(("recent", "question"), CASES)
def test_a_turn_skipped_before_searching_is_one_the_search_gives_no_block(search, recent, question):
    messages = [SYSTEM, *history()[-2:], *recent, {"role": "user", "content": question}]
    turn = len(messages) - 1
    skipped = cannot_gain(search, "s1", question, messages, turn, min_gain=FIXED.min_gain, recent=FIXED.recent_messages)
    decided = gate(search, messages, turn)
    assert not (skipped and decided)
    if question.startswith("The garden tulips") and recent == RECENT_TULIPS:
        assert skipped  # the recent turns hold every word: no search is made
    if not recent or recent[0]["content"].startswith("Spring"):
        assert not skipped and decided  # the old turn is what the message is about


def test_a_turn_in_a_script_without_spaces_is_always_searched(search):
    said = "花园里的郁金香开了"
    messages = [SYSTEM, {"role": "user", "content": said}, {"role": "user", "content": said}]  # all of it in view
    assert not cannot_gain(search, "s1", said, messages, 2, min_gain=0.35, recent=8)


def test_the_recent_weight_pairs_a_message_with_its_reply_not_the_next_question():
    asked = {"tulip": 1.0, "garden": 2.0, "spring": 4.0}
    messages = [
        {"role": "user", "content": "tulips?"},
        {"role": "user", "content": "the garden?"},
        {"role": "assistant", "content": "spring"},
        {"role": "user", "content": "the turn itself: tulips garden spring"},
    ]
    assert recent_weight(messages, 3, asked, 8) == 6.0  # "the garden?" + its reply, not "tulips?" + "the garden?"
    assert recent_weight(messages, 3, asked, 1) == 4.0  # the last message only
    assert recent_weight(messages[3:], 0, asked, 8) == 0.0
    # The next question is not a reply: "tulips?" (4) alone, not with "the garden?" (2) after it.
    assert recent_weight(messages, 3, {"tulip": 4.0, "garden": 2.0, "spring": 1.0}, 8) == 4.0


def test_the_recent_weight_leaves_out_the_system_prompt_and_what_ctxlife_inserted():
    from ctxlife.messages import mark_inserted

    asked = {"tulip": 1.0, "garden": 2.0}
    messages = [
        {"role": "system", "content": "You like tulips and the garden."},
        mark_inserted({"role": "user", "content": "Earlier: tulips in the garden."}, "recall"),
        {"role": "user", "content": "the turn itself: tulips garden"},
    ]
    assert recent_weight(messages, 2, asked, 8) == 0.0


def test_a_turn_with_no_recent_message_before_it_is_searched(search):
    said = "The garden tulips look lovely in spring."
    messages = [SYSTEM, {"role": "user", "content": said}]
    assert not cannot_gain(search, "s1", said, messages, 1, min_gain=FIXED.min_gain, recent=FIXED.recent_messages)


def test_a_rare_word_only_the_recent_context_holds_does_not_skip_a_turn_the_gate_blocks(tmp_path):
    # The gate weighs a word no match holds (here one only the context in view says) at most as much as
    # the rarest word the best match holds. Uncapped, "quokka" (said in no indexed message of 2,000)
    # outweighs the three common words half the history holds, and a pre-check with the uncapped
    # weights skips the turn the gate gives a block.
    chatter = []
    for i in range(1000):
        about = "garden tulips spring" if i % 2 == 0 else "nothing"
        chatter.append({"role": "user", "content": f"Chat {i} about {about} today."})
        chatter.append({"role": "assistant", "content": f"Reply {i}, fine."})
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append("s1", chatter)
    with open_store(url) as store:
        found = HistorySearch(store, index_dir="memory")
        recent = [{"role": "user", "content": "A quokka smiled at me."}, {"role": "assistant", "content": "Cute!"}]
        said = "Quokka, garden tulips spring."
        messages = [SYSTEM, *chatter[-2:], *recent, {"role": "user", "content": said}]
        turn = len(messages) - 1
        assert gate(found, messages, turn)  # the search finds a block worth giving
        assert not cannot_gain(found, "s1", said, messages, turn, min_gain=FIXED.min_gain, recent=FIXED.recent_messages)
        found.close()
