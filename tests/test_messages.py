from __future__ import annotations

import pytest

from ctxlife.errors import InvalidMessagesError
from ctxlife.messages import Unit, check_shape, current_turn_index, is_summary, pair_tool_results, round_starts, split_units, validate
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


def test_parallel_results_are_paired_by_id_in_any_order():
    calls = [tool_call("a", call_id="c1"), tool_call("b", call_id="c2"), tool_call("c", call_id="c3")]
    messages = [user("u"), assistant(None, calls), tool_result("c3", "3"), tool_result("c1", "1"), tool_result("c2", "2"), assistant("ok")]
    assert validate(messages) == []
    assert pair_tool_results(messages, 1).results == (2, 0, 1)
    assert split_units(messages) == [Unit(0, 1), Unit(1, 5), Unit(5, 6)]
    # The one that is missing is named by its id, wherever the others are.
    problems = validate([user("u"), assistant(None, calls), tool_result("c3", "3"), tool_result("c1", "1"), user("next")])
    assert [(p.index, p.code) for p in problems] == [(1, "tool_call_without_result")]
    assert "'c2'" in problems[0].detail


def test_ids_repeated_inside_one_message_or_missing_fall_back_to_position():
    dup = [tool_call("a", call_id="same"), tool_call("b", call_id="same")]
    messages = [user("u"), assistant(None, dup), tool_result("same", "1"), tool_result("same", "2")]
    assert validate(messages) == [] and pair_tool_results(messages, 1).results == (0, 1)
    no_ids = [{"role": "tool", "content": "1"}, {"role": "tool", "content": "2"}]
    calls = [tool_call("a", call_id="c1"), tool_call("b", call_id="c2")]
    assert validate([user("u"), assistant(None, calls), *no_ids]) == []
    # A result without an id takes the first call the others left open.
    mixed = [user("u"), assistant(None, calls), tool_result("c2", "2"), {"role": "tool", "content": "1"}]
    assert validate(mixed) == [] and pair_tool_results(mixed, 1).results == (1, 0)


def test_results_must_directly_follow_their_call_message():
    calls = [tool_call("a", call_id="c1"), tool_call("b", call_id="c2")]
    messages = [user("u"), assistant(None, calls), tool_result("c1", "1"), user("x"), tool_result("c2", "2")]
    assert codes(messages) == ["tool_call_without_result", "orphan_tool_result"]


def test_the_200_tau_bench_trajectories_pair_by_id_and_survive_reused_or_missing_ids(tau_bench):
    import copy
    import random

    rng = random.Random(13)
    reused = parallel = 0
    for item in tau_bench:
        traj = item["traj"]
        assert validate(traj) == [], item["task_id"]
        seen: set[str] = set()
        for i, message in enumerate(traj):
            if message.get("tool_calls"):
                ids = [c["id"] for c in message["tool_calls"]]
                reused += bool(seen & set(ids))
                seen |= set(ids)
                pairing = pair_tool_results(traj, i)
                answered = [traj[i + 1 + offset]["tool_call_id"] for offset in range(len(pairing.results))]
                assert [ids[k] for k in pairing.results] == answered
        # One id for every call of the trajectory, or none at all: still valid, paired by position.
        for variant in ("same", "none"):
            changed = copy.deepcopy(traj)
            for message in changed:
                for call in message.get("tool_calls") or []:
                    call["id"] = "call_0" if variant == "same" else None
                if message["role"] == "tool":
                    if variant == "same":
                        message["tool_call_id"] = "call_0"
                    else:
                        del message["tool_call_id"]
            assert validate(changed) == [], (item["task_id"], variant)
        # Merge consecutive tool steps into one parallel call message, then shuffle each run of results.
        merged: list[dict] = []
        for message in copy.deepcopy(traj):
            head = next((m for m in reversed(merged) if m["role"] != "tool"), None)
            ids = {c["id"] for c in (head or {}).get("tool_calls") or []}
            if message.get("tool_calls") and merged and merged[-1]["role"] == "tool" and ids and not ids & {c["id"] for c in message["tool_calls"]}:
                head["tool_calls"] += message["tool_calls"]
                continue
            merged.append(message)
        parallel += sum(len(m.get("tool_calls") or []) > 1 for m in merged)
        start = 0
        while start < len(merged):
            end = start
            while end < len(merged) and merged[end]["role"] == "tool":
                end += 1
            if end > start:
                run = merged[start:end]
                rng.shuffle(run)
                merged[start:end] = run
            start = end + 1
        assert validate(merged) == [], item["task_id"]
    assert parallel > 100  # the merged variants really hold parallel calls
    assert reused > 50  # the data really reuses ids across turns


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
