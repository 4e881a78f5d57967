"""A host compares each list with the one it handed back last time and re-checks, re-counts and re-diffs
only what differs (ctxlife.messages.previous). Whatever a caller does to its list between calls -- appends,
edits in place (nested too), replaced dicts, pops, inserts, a rebuild from JSON or from shallow copies --
the counts and the shape check must be those of a fresh look at the list."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxlife.config import settings_from_dict
from ctxlife.errors import InvalidMessagesError
from ctxlife.host import Host
from ctxlife.messages import Agreement, PreviousList, check_shape, common_prefix, differences
from ctxlife.testing import assistant, tool_call, tool_result, user
from ctxlife.tokens import TokenCounter


def _fresh_count(messages: list[dict]) -> int:
    return TokenCounter().count_messages(copy.deepcopy(messages))


def _turn(i: int) -> list[dict]:
    call = tool_call("lookup", {"id": i, "q": "x" * (i % 7)}, f"call_{i}")
    return [
        user(f"question {i}"),
        assistant(None, [call]),
        tool_result(call["id"], f"result {i} " * (i % 5)),
        assistant(f"ok {i}"),
    ]


def _apply(live: list[dict], op: tuple[str, int], step: int) -> list[dict]:
    """One thing a caller does to its list between calls; returns the list it sends next."""
    kind, at = op
    k = 1 + at % max(len(live) - 1, 1)  # never the system prompt at 0
    if kind == "append":
        live += _turn(step)
    elif kind == "replace" and k < len(live):
        live[k] = (
            {**live[k], "content": f"edited {step}"} if live[k]["role"] != "assistant" else assistant(f"edited {step}")
        )
    elif kind == "nested" and k < len(live):
        for message in live[k:]:
            if message.get("tool_calls"):  # arguments edited in place, inside the same dict
                message["tool_calls"][0]["function"]["arguments"] = json.dumps({"id": step, "more": "y" * step})
                break
    elif kind == "content_in_place" and k < len(live):
        if isinstance(live[k].get("content"), str):
            live[k]["content"] += f" (and {step} more words)"
    elif kind == "pop" and len(live) > 1:
        live.pop()
    elif kind == "delete" and k < len(live):
        del live[k]
    elif kind == "insert":
        live.insert(k, user(f"inserted {step}"))
    elif kind == "json":
        return json.loads(json.dumps(live))
    elif kind == "shallow":
        return [dict(m) for m in live]
    return live


OPS = st.tuples(
    st.sampled_from(["append", "replace", "nested", "content_in_place", "pop", "delete", "insert", "json", "shallow"]),
    st.integers(0, 10_000),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=1, max_size=12))
def test_counts_equal_a_fresh_count_whatever_the_caller_did(ops):
    host = Host(settings_from_dict({"strategies": []}), context_window=1_000_000)
    try:
        live = [{"role": "system", "content": "You help."}, *_turn(0)]
        host.manage(live)
        for step, op in enumerate(ops, start=1):
            live = _apply(live, op, step)
            expected = _fresh_count(live)
            report = host.manage(live)
            assert report.tokens_before == expected, (step, op)
    finally:
        host.close()


def test_an_invalid_message_in_a_rebuilt_list_is_refused_wherever_it_is():
    host = Host(settings_from_dict({"strategies": []}), context_window=1_000_000)
    live = [{"role": "system", "content": "You help."}]
    for i in range(30):
        live += _turn(i)
    host.manage(live)
    for position in (1, 2, 3, 60, len(live) - 1):
        rebuilt = json.loads(json.dumps(live))
        rebuilt[position] = {"role": "human", "content": "hi"}
        with pytest.raises(InvalidMessagesError, match=rf"messages\[{position}\]"):
            host.manage(rebuilt)
    host.manage(json.loads(json.dumps(live)))  # the valid list is fine again
    host.close()


def test_differences_finds_each_changed_position_and_stops_after_the_limit():
    a = list(range(1000))
    b = list(a)
    for i in (0, 17, 500, 999):
        b[i] = -1
    assert differences(a, b) == (1000, [0, 17, 500, 999])
    assert differences(a, b, limit=2) == (500, [0, 17])
    assert differences(a, a[:10]) == (10, [])
    assert common_prefix(a, b) == 0
    assert common_prefix(a, b, lambda i: i in (0, 17)) == 500


def test_a_previous_list_sees_edits_deep_inside_a_message_it_kept():
    previous = PreviousList()
    message = assistant(None, [tool_call("lookup", {"id": 1}, "c1")])
    live = [user("q"), message]
    previous.remember(live, live, Agreement(0, (), ()))
    assert previous.compare(live).continues()
    message["tool_calls"][0]["function"]["arguments"] = '{"id": 2}'  # in place, nested
    found = previous.compare(live)
    assert found.changed == (1,) and not found.continues()


def test_the_shape_check_skips_only_positions_known_unchanged():
    live = [{"role": "system", "content": "s"}, *_turn(0), *_turn(1)]
    assert check_shape(live) == "openai"
    bad = copy.deepcopy(live)
    bad[6]["tool_calls"][0]["function"]["name"] = 42
    with pytest.raises(InvalidMessagesError, match=r"messages\[6\]"):
        check_shape(bad, unchanged=(Agreement(len(live), (6,), live), ("openai", 2)))
    # Position 6 said unchanged: not looked at (the comparison is what makes that safe).
    assert check_shape(bad, unchanged=(Agreement(len(live), (), live), ("openai", 2))) == "openai"
    # The first format-specific message changed: everything is looked at again.
    with pytest.raises(InvalidMessagesError, match=r"messages\[6\]"):
        check_shape(bad, unchanged=(Agreement(len(live), (2,), live), ("openai", 2)))
    # A new message of the other format is refused against the unchanged ones.
    mixed = [*live, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}]
    with pytest.raises(InvalidMessagesError, match="one format"):
        check_shape(mixed, unchanged=(Agreement(len(live), (), live), ("openai", 2)))


def test_a_new_conversation_has_nothing_to_compare_with():
    previous = PreviousList()
    found = previous.compare([user("q"), assistant("a")])
    assert found.unknown(2) == [0, 1] and not found.same(0)  # every message is looked at
    assert previous.counts == [] and previous.shape is None
    assert previous.counts_of(object()) is None


def test_agreement_says_same_only_for_compared_positions_that_did_not_change():
    found = Agreement(3, (1,), [user("a"), user("b"), user("c"), user("d")])
    assert [found.same(i) for i in range(5)] == [True, False, True, False, False]
    assert found.unknown(5) == [1, 3, 4]


def test_a_message_changed_in_one_call_is_unchanged_in_the_next():
    previous = PreviousList()
    live = [user("q"), assistant("a"), user("r")]
    previous.remember(live, live, Agreement(0, (), ()))
    live[1] = assistant("regenerated")  # replaced by the caller
    found = previous.compare(live)
    assert found.changed == (1,)
    previous.remember(live, live, found)
    assert previous.compare(live).continues()  # the new message is the one handed back now


def test_token_counts_are_reused_only_from_the_counter_that_made_them():
    previous = PreviousList()
    live = [user("q"), assistant("a")]
    counter, other = object(), object()
    previous.remember(live, live, Agreement(0, (), ()), counts=[5, 6], counter=counter)
    assert previous.counts_of(counter) == [5, 6]
    assert previous.counts_of(other) is None  # another model's counter: counts of another tokenizer
    previous.remember(live, live, previous.compare(live), counts=[5], counter=counter)
    assert previous.counts_of(counter) is None  # not one count per position
    previous.remember(live, live, previous.compare(live))  # a call that did not count
    assert previous.counts_of(counter) is None and previous.counts == []


def test_the_comparison_kept_for_a_call_serves_that_call_only():
    previous = PreviousList()
    live = [user("q"), assistant("a")]
    previous.remember(live, live, Agreement(0, (), ()))
    kept = previous.compare(live, keep=True)  # the shape check
    assert previous.compare(live) is kept  # the call it precedes: not compared again
    assert previous.compare(live) is not kept  # once only
    kept = previous.compare(live, keep=True)
    assert previous.compare(list(live)) is not kept  # another list object
    kept = previous.compare(live, keep=True)
    live.append(user("more"))
    grown = previous.compare(live)
    assert grown is not kept and grown.continues() and grown.length == 2


def test_the_shape_found_holds_only_for_the_same_list_handed_back_the_same_length():
    shape = ("openai", 2)
    previous = PreviousList()
    live = [{"role": "system", "content": "You help."}, *_turn(0)]
    previous.checked(live, shape)
    previous.remember(live, live, Agreement(0, (), ()))
    assert previous.shape == shape
    previous.checked(live, shape)
    previous.remember(list(live), live, previous.compare(live))  # handed back another list
    assert previous.shape is None
    incoming = list(live)
    previous.checked(live, shape)
    live.pop()  # the call dropped a message
    previous.remember(live, incoming, previous.compare(incoming))
    assert previous.shape is None


def test_the_hosts_frozen_copy_is_kept_as_the_list_handed_back_only_when_it_holds_its_very_objects():
    previous = PreviousList()
    live = [user("q"), assistant("a")]
    before = list(live)  # the host's copy as the call received it, never edited
    previous.remember(live, before, Agreement(0, (), ()), frozen=True)
    live.append(user("next"))  # the caller grows its own list in place: the remembered one does not
    found = previous.compare(live)
    assert found.previous is before and found.continues() and found.length == 2
    before = list(live)
    live[1] = assistant("regenerated")  # a strategy replaced a message: the copy is not that list
    previous.remember(live, before, found, frozen=True)
    found = previous.compare(live)
    assert found.previous == live and found.previous is not before and found.previous is not live
    assert found.continues()
    unfrozen = PreviousList()  # the caller's own list, which it may edit: always copied
    unfrozen.remember(live, live, Agreement(0, (), ()))
    assert unfrozen.compare(live).previous is not live
