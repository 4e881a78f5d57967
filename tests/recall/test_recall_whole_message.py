"""A long message is indexed in chunks, but the recall block quotes it whole: the excerpt is cut from the
whole message around the matched chunk, so a value just past a chunk's end is shown (issue 41's quality defect:
"酒店的预订号是" | " HZ-48213" split at a chunk boundary, and the block showed the phrase without the code).

Each test checks its own precondition: the chunking does put the key phrase and its value in different chunks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxlife.config import settings_from_dict
from ctxlife.host import Host
from ctxlife.messages import is_recall_block, validate
from ctxlife.recall.records import CHUNK_CHARS, chunks
from ctxlife_strategies.recall import Recall

WINDOW = 4000
DAYS = 40


def host_on(tmp: Path, store: str) -> Host:
    url = f"file://{tmp / 'sessions'}" if store == "file" else f"sqlite:///{tmp / 'sessions.db'}"
    settings = settings_from_dict(
        {
            "strategies": ["snapshot_restore", "llm_summary", "recall"],
            "store": url,
            "llm_summary": {"summarizer": "extractive", "max_summary_tokens": 200, "min_gain_tokens": 20},
        }
    )
    return Host(settings, context_window=WINDOW, session_id="s1")


def filler(i: int, language: str) -> list[dict[str, Any]]:
    if language == "cn":
        return [
            {"role": "user", "content": f"第{i}天：今天我们聊聊日常生活，比如散步、做饭和天气，心情还不错。"},
            {"role": "assistant", "content": f"好的，第{i}天听起来很平静。规律的生活和适当的休息对身心都有好处。"},
        ]
    return [
        {"role": "user", "content": f"Day {i}: let's chat about the garden. Nothing special, just the usual routine."},
        {"role": "assistant", "content": f"Sure, day {i} sounds pleasant. Small routines make a week feel calmer."},
    ]


def split_between(text: str, phrase: str, value: str) -> bool:
    """The chunking puts ``phrase`` in a chunk without ``value`` and no chunk holds both."""
    pieces = chunks(text)
    return (
        len(pieces) > 1
        and any(phrase in p and value not in p for p in pieces)
        and not any(phrase in p and value in p for p in pieces)
    )


def ask_after(h: Host, first: list[list[dict[str, Any]]], language: str, question: str) -> str:
    """Play ``first``, then DAYS days of small talk (compaction evicts it), then ask: the recall block sent."""
    live: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    hello = [{"role": "user", "content": "Hello!"}, {"role": "assistant", "content": "Hi!"}]  # the first: always kept
    for exchange in [hello, *first, *(filler(i, language) for i in range(1, DAYS + 1))]:
        for message in exchange:
            live.append(message)
            if message["role"] in ("user", "tool"):
                assert h.manage(live).failures == []
    long = {m["content"] for exchange in first for m in exchange if len(str(m["content"])) > CHUNK_CHARS}
    assert long and not any(m.get("content") in long for m in live)  # evicted: only recall can show it whole
    live.append({"role": "user", "content": question})
    assert h.manage(live).failures == []
    assert validate(live) == []
    found = [m["content"] for m in live if is_recall_block(m)]
    assert len(found) == 1
    block: str = found[0]
    assert h.counter().count_text(block) <= Recall.Options.past_share * WINDOW  # the block's budget held
    return block


# "…酒店的预订号是" ends the first chunk (at its only space), " HZ-48213…" starts the next.
CN_FILL = "这次旅行的安排比较复杂，我们先坐高铁到杭州，然后换乘大巴去西湖附近，午饭在湖边的小店吃。"
CN_VALUE = "酒店的预订号是 HZ-48213，入住时间是下午三点，退房是中午十二点。"
CN_BOOKING = (CN_FILL * 40)[: CHUNK_CHARS - 8] + CN_VALUE + CN_FILL * 2

# The sentence naming the code starts well before the chunk's overlap with the next; the code is past its end.
EN_NOTE = (
    " ".join(f"Item {i}: pack the blue bag, check the train times and water the plants." for i in range(14))
    + " About the gym: the locker code that the front desk gave me last month, which I keep forgetting because"
    " I only go on Tuesdays and Thursdays after work and they change it every few weeks without telling anyone,"
    " not even the regulars who have been members for years, is"
    " 7391-KESTREL-NORTHWING. Also bring a towel."
)


@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_a_chinese_value_just_past_its_chunks_end_is_in_the_block(tmp_path, store):
    assert split_between(CN_BOOKING, "酒店的预订号是", "HZ-48213")
    h = host_on(tmp_path, store)
    try:
        said = [[{"role": "user", "content": CN_BOOKING}, {"role": "assistant", "content": "好的，我记下了。"}]]
        block = ask_after(h, said, "cn", "酒店的预订号是多少？")
    finally:
        h.close()
    assert "酒店的预订号是 HZ-48213" in block


def test_an_english_value_just_past_its_chunks_end_is_in_the_block(tmp_path):
    assert split_between(EN_NOTE, "locker code", "7391-KESTREL-NORTHWING")
    h = host_on(tmp_path, "file")
    try:
        said = [[{"role": "user", "content": EN_NOTE}, {"role": "assistant", "content": "Noted."}]]
        block = ask_after(h, said, "en", "What was my gym locker code?")
    finally:
        h.close()
    assert "7391-KESTREL-NORTHWING" in block and "locker code" in block


def test_a_match_deep_inside_a_long_tool_result_shows_its_value_within_the_budget(tmp_path):
    rows = [{"sku": f"SKU-{i:05d}", "bin": f"B{i % 40:02d}", "qty": (i * 7) % 50} for i in range(210)]
    rows[112]["note"] = (  # row 112: its note ends one chunk, its lot starts the next
        "held in quarantine: the supplier recalled this batch after a contamination report from the northern depot,"
        " and the lab must clear it before anything ships; the lot to quote on every return form is"
    )
    rows[112]["lot"] = "QX-55-ALPHA"
    result = json.dumps({"warehouse": "W7", "items": rows})
    assert len(result) > 10_000 and split_between(result, "quarantine", "QX-55-ALPHA")
    h = host_on(tmp_path, "sqlite")
    try:
        call = {"id": "call_inv", "type": "function", "function": {"name": "inventory", "arguments": "{}"}}
        said = [
            [
                {"role": "user", "content": "Pull the W7 inventory."},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_inv", "content": result},
                {"role": "assistant", "content": "Inventory loaded: 210 items."},
            ]
        ]
        block = ask_after(h, said, "en", "Which lot is in quarantine after the supplier recall?")
        assert h.counter().count_text(block) < h.counter().count_text(result) // 10
    finally:
        h.close()
    assert "QX-55-ALPHA" in block
