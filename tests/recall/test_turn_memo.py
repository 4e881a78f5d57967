"""Turns ranked again after the history changed: an index keeps the term counts of the turns it ranked while its
records stay as they were (``HistoryIndex.memo``); an edit or a new reply must be ranked by what is there now."""

from __future__ import annotations

from ctxlife.recall import HistoryIndex
from ctxlife.recall.history import passages_from
from ctxlife.sessions import RawRecord

FILLER = [
    ("user", "we went sailing on the bay"),
    ("assistant", "the wind was strong that day"),
    ("user", "my sister baked bread"),
    ("assistant", "fresh bread is the best"),
    ("user", "the museum opens at nine"),
    ("assistant", "plan to arrive early then"),
]


def records(pairs: list[tuple[str, str]], start: int = 1) -> list[RawRecord]:
    return [
        RawRecord(start + i, {"role": role, "content": text}, recorded_at=1_700_000_000.0 + start + i)
        for i, (role, text) in enumerate(pairs)
    ]


def best_turn(index: HistoryIndex, query: str) -> list[int]:
    passage = passages_from(index, query, limit=1, context=0)[0]
    return sorted(r.seq for r in passage.records)


def test_a_turn_is_ranked_by_its_edited_reply_not_the_one_counted_before() -> None:
    index = HistoryIndex(None)
    index.add(
        records(
            [
                *FILLER,
                ("user", "tell me about the lighthouse keeper"),  # 7: turn A
                ("assistant", "the code is 4455, the code for the door"),  # 8
                ("user", "we walked home"),
                ("assistant", "a long walk"),
                ("user", "the lighthouse keeper again"),  # 11: turn B
                ("assistant", "sure"),  # 12
            ]
        )
    )
    query = "lighthouse keeper code"
    assert best_turn(index, query) == [7, 8]
    # The code moves from A's reply to B's: B is the turn that holds every word now.
    index.add(
        [
            RawRecord(13, {"role": "assistant", "content": "sure"}, op="replace", target=8),
            RawRecord(14, {"role": "assistant", "content": "the code is 9911"}, op="replace", target=12),
        ]
    )
    assert best_turn(index, query) == [11, 12]
    assert [r.text for r in passages_from(index, query, limit=1, context=0)[0].records] == [
        "the lighthouse keeper again",
        "the code is 9911",
    ]


def test_a_question_ranked_alone_is_ranked_with_its_reply_once_the_reply_is_recorded() -> None:
    index = HistoryIndex(None)
    index.add(records([*FILLER, ("user", "the lighthouse keeper, with no code"), ("assistant", "noted")]))
    index.add(records([("user", "what is the lighthouse keeper's door?")], start=9))
    query = "lighthouse keeper door code"
    assert passages_from(index, query, limit=2, context=0)  # its turn counted without a reply
    index.add(records([("assistant", "the door code is 7777")], start=10))
    assert best_turn(index, query) == [9, 10]
