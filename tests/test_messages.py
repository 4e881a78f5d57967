from __future__ import annotations

import pytest

from ctxlife.errors import InvalidMessagesError
from ctxlife.messages import Unit, check_shape, current_turn_index, is_summary, round_starts, split_units, validate
from ctxlife.testing import assistant, system, tool_call, tool_result, user


def codes(messages):
    return [p.code for p in validate(messages)]


def test_units_keep_a_tool_call_with_all_its_results():
    calls = [tool_call("a", call_id="c1"), tool_call("b", call_id="c2")]
    messages = [system("s"), user("u"), assistant(None, calls), tool_result("c1", "1"), tool_result("c2", "2"), assistant("done")]
    assert split_units(messages) == [Unit(0, 1), Unit(1, 2), Unit(2, 5), Unit(5, 6)]
    assert round_starts(messages) == [1]


def test_valid_native_and_react_sequences():
    calls = [tool_call("a", call_id="c1")]
    assert validate([system("s"), user("u"), assistant(None, calls), tool_result("c1", "r"), assistant("ok")]) == []
    react = [system("s"), user("u"), assistant("Thought: x\nAction: a\nAction Input: {}\nObservation: r"), user("go on")]
    assert validate(react) == []


def test_repeated_tool_call_ids_are_paired_by_position():
    # Real traces reuse ids; each result answers the call at its position.
    first = [tool_call("a", call_id="dup")]
    second = [tool_call("b", call_id="dup")]
    messages = [user("u"), assistant(None, first), tool_result("dup", "1"), assistant(None, second), tool_result("dup", "2")]
    assert validate(messages) == []


def test_orphaned_results_missing_results_and_mismatched_ids_are_reported():
    calls = [tool_call("a", call_id="c1"), tool_call("b", call_id="c2")]
    assert codes([user("u"), tool_result("c1", "r")]) == ["orphan_tool_result"]
    assert codes([user("u"), assistant(None, calls), tool_result("c1", "r"), user("next")]) == ["tool_call_without_result"]
    assert codes([user("u"), assistant(None, calls)]) == ["tool_call_without_result"]
    assert codes([user("u"), assistant(None, calls[:1]), tool_result("zz", "r")]) == ["tool_result_id_mismatch"]
    assert codes([user("u"), assistant(None, calls[:1]), tool_result("c1", "r"), tool_result("c1", "again")]) == ["orphan_tool_result"]
    assert codes([user("u"), system("late")]) == ["system_after_conversation"]


def test_summary_messages_are_recognised_by_their_prefix():
    assert is_summary(system("History summary: booked HAT136."))
    assert not is_summary(system("You are an agent.")) and not is_summary(assistant(None))


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("not a list", "must be a list of message dicts, got str"),
        ([{"content": "no role"}], "messages[0] is not a message dict with a 'role'"),
        ([user("ok"), "text"], "messages[1] is not a message dict"),
    ],
)
def test_check_shape_names_the_bad_element(bad, fragment):
    with pytest.raises(InvalidMessagesError, match=pytest.importorskip("re").escape(fragment)):
        check_shape(bad)


def test_the_current_turn_is_the_last_user_message_that_is_not_a_repeated_prompt():
    prompt = "Analyze the tool result. If requirements are met, provide the Final Answer."
    messages = [system("s"), user("first task"), assistant("a"), user("what about NO6JO3?"), assistant("step"), user(prompt), assistant("step"), user(prompt)]
    assert current_turn_index(messages) == 3
    assert current_turn_index([user("yes"), assistant("a"), user("yes")]) == 2  # all repeat: the last
    assert current_turn_index([system("s")]) is None
