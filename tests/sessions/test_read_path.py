"""A new ``Session``'s read of a never-compacted view: the SQLite store decodes it as columns
(``SQLiteStore.read_view``) and hands the decoded messages to the caller without a copy. What a
user relies on: the same conversation as the record-by-record read, whatever the messages hold, and
a list that is the caller's own to edit."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

import ctxlife
from ctxlife.config import Settings, settings_from_dict
from ctxlife.sessions import open_store
from ctxlife.sessions.records import materialize


def config(url: str) -> Settings:
    return settings_from_dict({"store": url, "strategies": []})


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "look", "arguments": '{"q": "x"}'}}],
}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": '{"ctxlife_event": "only text", "ctxlife_erased": 1}'}


def by_records(url: str, sid: str) -> list[dict[str, Any]]:
    with open_store(url) as store:
        return [r.message for r in materialize(store.read_records(sid))]


def test_a_new_sessions_items_are_the_callers_to_edit(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with ctxlife.Session("s", config(url)) as writer:
        writer.add(user("q1"), CALL, RESULT, {"role": "assistant", "content": [{"type": "text", "text": "a1"}]})
    with ctxlife.Session("s", config(url), context_window=8000) as session:
        items = session.get_items()
        assert items == [user("q1"), CALL, RESULT, {"role": "assistant", "content": [{"type": "text", "text": "a1"}]}]
        items[1]["tool_calls"][0]["function"]["arguments"] = "edited"
        items[3]["content"][0]["text"] = "edited"
        items.append(user("not recorded"))
        assert session.get_items() == by_records(url, "s")  # the session's own read, not the caller's list
        assert session.get_items()[3]["content"][0]["text"] == "a1"
        sent = session.messages(user("q2"))
        assert sent == by_records(url, "s") and sent[-1] == user("q2")
    with open_store(url) as store:  # the caller's edits were never recorded as edits
        assert [r.op for r in store.read_records("s")] == ["add"] * 5


@pytest.mark.parametrize(
    "history",
    [
        pytest.param([user("q"), CALL, RESULT], id="text naming the event keys"),
        pytest.param([user("q"), {"role": "user", "content": math.nan}], id="a quarantined message"),
        pytest.param([{"role": "system", "content": "be brief"}, user("q")], id="a system message recorded (an item)"),
        pytest.param(
            [user("see <!-- a comment -->"), {"role": "user", "content": [{"type": "text", "text": "x -->"}]}],
            id="texts ending like a mark line (items)",
        ),
        pytest.param([], id="empty"),
    ],
)
def test_the_columnar_read_restores_what_the_records_hold(tmp_path: Path, history: list[dict[str, Any]]) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(url) as store:
        store.append("s", history)
    expected = by_records(url, "s")  # a system message recorded is an item (the prompt of system= is never recorded)
    with ctxlife.Session("s", config(url)) as session:
        assert session.get_items() == expected
        assert session.get_items() == expected  # the second read is the session's own
    with open_store(url) as store:  # a first read that only hands the messages out reads no more than them
        light, full = store.read_view("s", messages_only=True), store.read_view("s")
        assert light is not None and (light.messages, light.fingerprints, light.tokens) == (expected, [], [])
        assert light.seqs == list(range(1, len(history) + 1))
        if full is not None:
            assert (full.seqs, full.messages) == (light.seqs, light.messages)


def test_an_edited_view_is_read_record_by_record(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with ctxlife.Session("s", config(url)) as writer:
        writer.add(user("q1"), user("q2"), user("q3"))
        assert writer.pop() == user("q3")
        writer.edit(1, user("q1, edited"))
    with open_store(url) as store:
        assert store.read_view("s") is None  # an event: the columnar read declines
    with ctxlife.Session("s", config(url)) as session:
        assert session.get_items() == [user("q1, edited"), user("q2")]


def test_a_restored_call_hands_out_copies_the_next_call_does_not_see_edited(tmp_path: Path) -> None:
    # The session's own read is also the recorder's copy of the list (not copied twice): the list a
    # call returns is still the caller's alone to edit.
    url = f"sqlite:///{tmp_path / 's.db'}"
    with ctxlife.Session("s", config(url)) as writer:
        writer.add(user("q1"), CALL, RESULT, {"role": "assistant", "content": "a1"})
    with ctxlife.Session("s", config(url), system="be brief", context_window=8000) as session:
        sent = session.messages(user("q2"))
        assert sent[1:] == by_records(url, "s") and sent[0] == {"role": "system", "content": "be brief"}
        sent[2]["tool_calls"][0]["function"]["arguments"] = "edited"
        sent[4]["content"] = "edited"
        again = session.messages(user("q3"))
        assert again[1:] == by_records(url, "s") and again[-1] == user("q3")
        assert again[2] == CALL and again[4] == {"role": "assistant", "content": "a1"}
    with open_store(url) as store:
        assert [r.op for r in store.read_records("s")] == ["add"] * 6
