"""Issue 23: a steady manage() call classifies only the messages that are new or edited since the last call,
and an old message edited in place is still caught."""

from __future__ import annotations

import copy

import pytest

from ctxlife.config import settings_from_dict
from ctxlife.errors import InvalidMessagesError
from ctxlife.host import Host
from ctxlife.messages import formats as message_model  # where check_shape looks up _classify
from ctxlife.testing import assistant, tool_call, tool_result, user


@pytest.fixture
def host():
    h = Host(settings_from_dict({"strategies": []}), context_window=1_000_000)
    yield h
    h.close()


def _conversation(turns: int) -> list[dict]:
    out: list[dict] = [{"role": "system", "content": "You help."}]
    for i in range(turns):
        call = tool_call("lookup", {"id": i}, f"call_{i}")
        out += [
            user(f"question {i}"),
            assistant(None, [call]),
            tool_result(call["id"], f"result {i}"),
            assistant(f"ok {i}"),
        ]
    return out


@pytest.fixture
def classified(monkeypatch):
    calls: list[int] = []
    real = message_model._classify
    monkeypatch.setattr(message_model, "_classify", lambda message, i: calls.append(i) or real(message, i))
    return calls


def test_a_grown_list_classifies_only_its_new_messages(host, classified):
    live = _conversation(20)
    host.manage(live)
    assert len(classified) == 40  # every tool call and tool result once
    classified.clear()
    call = tool_call("lookup", {"id": "new"}, "call_new")
    live += [user("one more"), assistant(None, [call]), tool_result(call["id"], "found")]
    host.manage(live)
    assert classified == [len(live) - 2, len(live) - 1]


def test_a_list_rebuilt_from_copies_classifies_only_what_differs(host, classified):
    live = _conversation(5)
    host.manage(live)
    classified.clear()
    rebuilt = copy.deepcopy(live)  # a stateless caller: new dicts, equal to the list handed back
    host.manage(rebuilt)
    assert classified == []
    again = copy.deepcopy(rebuilt)
    again[3]["content"] = "result 0, edited"  # a tool result
    call = tool_call("lookup", {"id": "new"}, "call_new")
    again += [assistant(None, [call]), tool_result(call["id"], "found")]
    host.manage(again)
    assert classified == [3, len(again) - 2, len(again) - 1]


def test_a_rebuilt_list_with_an_invalid_message_is_refused(host):
    live = _conversation(3)
    host.manage(live)
    rebuilt = copy.deepcopy(live)
    rebuilt[2]["tool_calls"][0]["function"]["name"] = 42
    with pytest.raises(InvalidMessagesError, match=r"messages\[2\]"):
        host.manage(rebuilt)


@pytest.mark.parametrize(
    "edit",
    [
        lambda live: live[2]["tool_calls"][0].__setitem__("function", "lookup(3)"),  # nested, in place
        lambda live: live[2]["tool_calls"][0]["function"].__setitem__("name", 42),
        lambda live: live[2].__setitem__("tool_calls", {"id": "x"}),  # a field replaced
        lambda live: live[3].__setitem__("tool_call_id", 7),
        lambda live: live[3].__setitem__("content", 3.5),
        lambda live: live[1].__setitem__("content", [{"type": "mystery", "data": "?"}]),
        lambda live: live[1].__setitem__("role", "human"),
    ],
)
def test_an_old_message_edited_in_place_is_still_refused(host, edit):
    live = _conversation(3)
    host.manage(live)
    host.manage(live)  # known now
    edit(live)
    with pytest.raises(InvalidMessagesError):
        host.manage(live)


def test_content_parts_edited_in_place_are_checked_again(host):
    parts = {"role": "user", "content": [{"type": "text", "text": "see this"}]}
    live = [parts]
    host.manage(live)
    parts["content"].append({"type": "input_text", "text": "Responses API content"})
    with pytest.raises(InvalidMessagesError, match="Responses API"):
        host.manage(live)
    parts["content"].pop()
    parts["content"][0]["text"] = None
    with pytest.raises(InvalidMessagesError, match="text part"):
        host.manage(live)


def test_formats_stay_checked_across_calls(host):
    # A list known to be OpenAI chat (tool calls) that gains an Anthropic block is refused as mixed.
    live = _conversation(2)
    host.manage(live)
    live.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]})
    with pytest.raises(InvalidMessagesError, match="one format"):
        host.manage(live)


def test_the_same_object_twice_in_a_list_is_fine(host, classified):
    call = tool_call("lookup", {"id": 1})
    shared_result = tool_result(call["id"], "same")
    live = [user("a"), assistant(None, [call]), shared_result, user("b")]
    host.manage(live)
    call2 = {**call}
    live += [assistant(None, [call2]), shared_result]
    host.manage(live)
    assert live[-1] is shared_result
