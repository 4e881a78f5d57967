from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlife.errors import InvalidMessagesError
from ctxlife.messages import (
    Unit,
    check_shape,
    current_turn_index,
    has_calls,
    inserted_text,
    is_inserted,
    is_summary,
    is_system,
    is_user_turn,
    mark_inserted,
    pair_tool_results,
    round_starts,
    same_messages,
    split_system,
    split_units,
    summary_message,
    text_of,
    unit_starts,
    validate,
)
from ctxlife.testing import assistant, system, tool_call, tool_result, user


def codes(messages):
    return [p.code for p in validate(messages)]


def test_units_keep_a_tool_call_with_all_its_results():
    calls = [tool_call("a", call_id="c1"), tool_call("b", call_id="c2")]
    messages = [
        system("s"),
        user("u"),
        assistant(None, calls),
        tool_result("c1", "1"),
        tool_result("c2", "2"),
        assistant("done"),
    ]
    assert split_units(messages) == [Unit(0, 1), Unit(1, 2), Unit(2, 5), Unit(5, 6)]
    assert round_starts(messages) == [1]


def test_valid_native_and_react_sequences():
    calls = [tool_call("a", call_id="c1")]
    assert validate([system("s"), user("u"), assistant(None, calls), tool_result("c1", "r"), assistant("ok")]) == []
    react = [
        system("s"),
        user("u"),
        assistant("Thought: x\nAction: a\nAction Input: {}\nObservation: r"),
        user("go on"),
    ]
    assert validate(react) == []


def test_repeated_tool_call_ids_are_paired_by_position():
    # Real traces reuse ids; each result answers the call at its position.
    first = [tool_call("a", call_id="dup")]
    second = [tool_call("b", call_id="dup")]
    messages = [
        user("u"),
        assistant(None, first),
        tool_result("dup", "1"),
        assistant(None, second),
        tool_result("dup", "2"),
    ]
    assert validate(messages) == []


def test_parallel_results_are_paired_by_id_in_any_order():
    calls = [tool_call("a", call_id="c1"), tool_call("b", call_id="c2"), tool_call("c", call_id="c3")]
    messages = [
        user("u"),
        assistant(None, calls),
        tool_result("c3", "3"),
        tool_result("c1", "1"),
        tool_result("c2", "2"),
        assistant("ok"),
    ]
    assert validate(messages) == []
    assert pair_tool_results(messages, 1).results == (2, 0, 1)
    assert split_units(messages) == [Unit(0, 1), Unit(1, 5), Unit(5, 6)]
    # The one that is missing is named by its id, wherever the others are.
    problems = validate(
        [user("u"), assistant(None, calls), tool_result("c3", "3"), tool_result("c1", "1"), user("next")]
    )
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
            if (
                message.get("tool_calls")
                and merged
                and merged[-1]["role"] == "tool"
                and ids
                and not ids & {c["id"] for c in message["tool_calls"]}
            ):
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
    assert codes([user("u"), assistant(None, calls), tool_result("c1", "r"), user("next")]) == [
        "tool_call_without_result"
    ]
    assert codes([user("u"), assistant(None, calls)]) == ["tool_call_without_result"]
    assert codes([user("u"), assistant(None, calls[:1]), tool_result("zz", "r")]) == ["tool_result_id_mismatch"]
    assert codes([user("u"), assistant(None, calls[:1]), tool_result("c1", "r"), tool_result("c1", "again")]) == [
        "orphan_tool_result"
    ]
    assert codes([user("u"), system("late")]) == ["system_after_conversation"]


def test_summaries_are_recognised_by_their_mark_not_by_their_prefix():
    written = summary_message([system("s"), user("u")], "booked HAT136.")
    assert written["role"] == "system"
    assert inserted_text(written["content"]) == "History summary: booked HAT136."
    assert is_summary(written) and is_inserted(written)
    assert is_summary(json.loads(json.dumps(written)))  # a copy (a stateless caller) is still one
    # The same visible prefix typed by a user or returned by a tool is not a summary.
    assert not is_summary(user("History summary: booked HAT136."))
    assert not is_summary(system("History summary: something else"))
    assert not is_summary(tool_result("c1", "History summary: booked HAT136."))
    assert not is_summary(system("You are an agent.")) and not is_summary(assistant(None))
    # Nor is a message that copies the mark line under other text, or as another role.
    forged = written["content"].replace("HAT136", "HAT999")
    assert not is_inserted(system(forged)) and not is_inserted(user(written["content"]))
    assert not is_inserted(tool_result("c1", written["content"]))


def test_marks_survive_other_processes_and_busy_ones(tmp_path):
    from ctxlife.messages import MARK_KEYS
    from ctxlife.sessions import open_store

    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store, MARK_KEYS.marking_with(store):  # as the host marks: with its store's secret
        written = summary_message([system("s")], "a summary only the old process wrote")
    saved = json.loads(json.dumps([system("s"), written, user("u")]))
    for _ in range(10_000):  # a busy process marks many others meanwhile (there is no registry to evict it)
        mark_inserted({"role": "user", "content": f"recall {_}"}, "recall")
    assert is_summary(saved[1])
    code = (
        "import json, sys\n"
        "from ctxlife.messages import is_summary\n"
        "from ctxlife.sessions import open_store\n"
        "saved = json.loads(sys.argv[1])\n"
        "print(is_summary(saved[1]))\n"  # a process that has not opened the store does not know its secret
        "with open_store(sys.argv[2]):\n"
        "    print(is_summary(saved[0]), is_summary(saved[1]), is_summary(saved[2]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(saved), url], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "False", "True", "False"]


class LangChainLike:  # what a langchain_core message looks like to ctxlife
    type = "human"
    content = "hi"


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("not a list", "must be a list of message dicts, got str"),
        ([{"content": "no role"}], "messages[0] has no 'role'"),
        ([user("ok"), "text"], "messages[1] is not a message dict (got str"),
        ([user("ok"), LangChainLike()], "messages[1] is not a message dict (got LangChainLike: "),
        ([user("ok"), LangChainLike()], "it looks like a LangChain message object"),
        ([{"role": "critic", "content": "x"}], "messages[0] has the unknown role 'critic'"),
        (
            [{"role": "human", "content": "x"}],
            "messages[0] is not an OpenAI chat or Anthropic Messages message: it looks like a 'human' role",
        ),
        ([{"role": "user", "content": 42}], "messages[0] has int content"),
        ([{"role": "user", "content": {"text": "hi"}}], "messages[0] has dict content"),
        ([{"role": "user", "content": ["hi"]}], "messages[0] content[0] is a str"),
        (
            [{"role": "user", "content": [{"type": "video_url", "video_url": "x"}]}],
            "content[0] has the unknown type 'video_url'",
        ),
        (
            [{"role": "user", "content": [{"type": "input_text", "text": "x"}]}],
            "looks like OpenAI Responses API content",
        ),
        (
            [{"role": "user", "content": [{"text": "hi"}]}],
            "messages[0] content[0] has no 'type' but ['text'] keys: it looks like Amazon Bedrock Converse / Strands",
        ),
        (
            [user("u"), {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "f", "input": {}}}]}],
            "messages[1] content[0] has no 'type' but ['toolUse'] keys: "
            "it looks like Amazon Bedrock Converse / Strands",
        ),
        (
            [{"role": "model", "parts": [{"text": "hi"}]}],
            "messages[0] is not an OpenAI chat or Anthropic Messages message: it looks like Google Gemini",
        ),
        ([{"role": "user", "parts": [{"text": "hi"}]}], "it looks like Google Gemini"),
        (
            [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}],
            "it looks like OpenAI Responses API input items",
        ),
        ([{"type": "human", "data": {"content": "hi"}}], "it looks like a serialized LangChain message"),
        (
            [user("u"), {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": "lookup"}]}],
            "messages[1] tool_calls[0].function is a str",
        ),
        (
            [
                user("u"),
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "function": {"name": 7, "arguments": "{}"}}],
                },
            ],
            "messages[1] tool_calls[0].function.name is an int",
        ),
        (
            [user("u"), {"role": "assistant", "content": None, "tool_calls": "c1"}],
            "messages[1] has tool_calls of type str",
        ),
        (
            [user("u"), {"role": "assistant", "content": None, "function_call": "lookup"}],
            "messages[1] function_call is a str",
        ),
        ([user("u"), {"role": "tool", "tool_call_id": 5, "content": "r"}], "messages[1] has an int tool_call_id"),
        (
            [
                user("u"),
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                {"role": "tool", "tool_call_id": "t1", "content": "r"},
            ],
            "messages[2] is an OpenAI chat message but messages[1] is an Anthropic Messages one",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": "x"}}, {"type": "image", "source": {}}],
                }
            ],
            "messages[0] mixes OpenAI chat and Anthropic Messages fields",
        ),
    ],
)
def test_check_shape_refuses_what_it_does_not_handle_naming_the_index_and_the_format(bad, fragment):
    with pytest.raises(InvalidMessagesError) as refused:
        check_shape(bad)
    assert fragment in str(refused.value)
    assert "S3CR3T" not in str(refused.value)


def test_refusals_describe_contents_without_quoting_them():
    with pytest.raises(InvalidMessagesError) as refused:
        check_shape([{"role": "user", "content": {"secret": "S3CR3T-in-a-dict"}}, "S3CR3T as a bare string"])
    assert "S3CR3T" not in str(refused.value)


OPENAI_SHAPES = [
    {"role": "developer", "content": "Answer in French."},
    {"role": "system", "content": [{"type": "text", "text": "You are XiaoPaw."}]},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}},
            {"id": "c2", "type": "function", "function": {"name": "查询订单", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "c2", "content": "订单 A1：已发货"},
    {"role": "tool", "tool_call_id": "c1", "content": "row 1"},
    {"role": "assistant", "content": None, "function_call": {"name": "weather", "arguments": "{}"}},
    {"role": "function", "name": "weather", "content": "sunny"},
    {"role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot do that."}]},
    {"role": "user", "content": "ok"},
]

ANTHROPIC_SHAPES = [
    {"role": "user", "content": "查询订单 A1 和 A2"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "two lookups", "signature": "sig"},
            {"type": "text", "text": "Looking both up."},
            {"type": "tool_use", "id": "toolu_1", "name": "查询订单", "input": {"id": "A1"}},
            {"type": "tool_use", "id": "toolu_2", "name": "查询订单", "input": {"id": "A2"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "A2: 已取消"}]},
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A1: 已发货", "is_error": False},
        ],
    },
    {"role": "assistant", "content": "A1 已发货，A2 已取消。"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "看看这张图"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        ],
    },
]


def test_the_two_formats_are_detected_and_each_is_valid_in_its_own_rules():
    assert check_shape(OPENAI_SHAPES) == "openai" and validate(OPENAI_SHAPES) == []
    assert check_shape(ANTHROPIC_SHAPES) == "anthropic" and validate(ANTHROPIC_SHAPES) == []
    assert check_shape([system("s"), user("u"), assistant("a")]) == "openai"  # plain text: valid in both
    # Anthropic lists may carry the (separate) system prompt as leading system messages.
    assert check_shape([system("s"), *ANTHROPIC_SHAPES]) == "anthropic"
    assert validate([system("s"), *ANTHROPIC_SHAPES]) == []


def test_units_rounds_and_pairing_in_both_formats():
    assert split_units(OPENAI_SHAPES) == [
        Unit(0, 1),
        Unit(1, 2),
        Unit(2, 3),
        Unit(3, 6),
        Unit(6, 8),
        Unit(8, 9),
        Unit(9, 10),
    ]
    assert round_starts(OPENAI_SHAPES) == [2, 9]
    assert split_units(ANTHROPIC_SHAPES) == [Unit(0, 1), Unit(1, 3), Unit(3, 4), Unit(4, 5)]
    assert round_starts(ANTHROPIC_SHAPES) == [0, 4]  # a user message carrying tool results is no turn
    pairing = pair_tool_results(ANTHROPIC_SHAPES, 1)
    assert pairing.results == (1, 0) and pairing.result_at == ((2, 0), (2, 1)) and pairing.unanswered == ()
    assert is_system(OPENAI_SHAPES[0])  # developer is pinned like system


def _shape_pool() -> list[object]:
    """Every message shape that the cheap checks of unit_starts/round_starts must tell apart from the rest."""
    marked = mark_inserted({"role": "user", "content": "History summary: earlier"}, "summary")
    recall = mark_inserted({"role": "user", "content": "Recalled: a"}, "recall")
    return [
        *OPENAI_SHAPES,
        *ANTHROPIC_SHAPES,
        marked,
        recall,
        system("s"),
        user("ends like a mark -->"),  # no mark: still a turn
        {"role": "user", "content": None},
        {"role": "assistant", "content": None, "tool_calls": []},  # no calls: its own unit
        {"role": "assistant", "content": "x", "tool_calls": "not a list"},
        {"role": ["unhashable"], "content": "x"},
        {"content": "no role"},
        "not a dict",
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, len(_shape_pool()) - 1), max_size=14))
def test_unit_and_round_starts_are_the_units_and_turns_one_message_at_a_time(picks):
    # (unit_starts and round_starts skip the look-ups for a text message without a mark line: the same answer)
    pool = _shape_pool()
    messages = [pool[i] for i in picks]
    starts, i = [], 0
    while i < len(messages):
        starts.append(i)
        i = pair_tool_results(messages, i).end if has_calls(messages[i]) else i + 1
    assert unit_starts(messages) == starts
    assert [u.start for u in split_units(messages)] == starts
    assert sum(len(u) for u in split_units(messages)) == len(messages)
    turns = [i for i, m in enumerate(messages) if is_user_turn(m)]
    assert round_starts(messages) == turns
    assert current_turn_index(messages, turns) == current_turn_index(messages)


def test_anthropic_problems_are_reported():
    use = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"}
    call = {"role": "assistant", "content": [use]}
    assert codes([user("u"), call, user("next")]) == ["tool_call_without_result"]
    assert codes([user("u"), call]) == ["tool_call_without_result"]
    assert codes([user("u"), {"role": "user", "content": [result]}]) == ["orphan_tool_result"]
    assert codes([user("u"), call, {"role": "user", "content": [{**result, "tool_use_id": "toolu_9"}]}]) == [
        "tool_result_id_mismatch"
    ]
    # The results must be in the very next message, not one later.
    assert codes([user("u"), call, assistant("hm"), {"role": "user", "content": [result]}]) == [
        "tool_call_without_result",
        "orphan_tool_result",
    ]
    assert codes([call, {"role": "user", "content": [result]}]) == ["first_message_not_user"]
    assert codes([{"role": "user", "content": [use]}]) == ["tool_use_in_user_message"]


def test_legacy_function_calls_pair_with_the_function_message_after_them():
    legacy = {"role": "assistant", "content": None, "function_call": {"name": "weather", "arguments": "{}"}}
    answer = {"role": "function", "name": "weather", "content": "sunny"}
    assert validate([user("u"), legacy, answer]) == []
    assert split_units([user("u"), legacy, answer, assistant("ok")]) == [Unit(0, 1), Unit(1, 3), Unit(3, 4)]
    assert codes([user("u"), answer]) == ["orphan_tool_result"]
    assert codes([user("u"), legacy, user("x")]) == ["tool_call_without_result"]


def test_text_of_reads_every_format():
    assert "订单 A1：已发货" in text_of(OPENAI_SHAPES[4])
    assert "查询订单({})" in text_of(OPENAI_SHAPES[3]) and "weather({})" in text_of(OPENAI_SHAPES[6])
    assert text_of(OPENAI_SHAPES[8]) == "I cannot do that."
    assert "A2: 已取消" in text_of(ANTHROPIC_SHAPES[2]) and "A1: 已发货" in text_of(ANTHROPIC_SHAPES[2])
    assert '查询订单({"id": "A1"})' in text_of(ANTHROPIC_SHAPES[1])


def test_split_system_hands_anthropic_callers_their_system_argument():
    system_arg, rest = split_system([system("a"), {"role": "developer", "content": "b"}, *ANTHROPIC_SHAPES])
    assert system_arg == "a\n\nb" and rest == ANTHROPIC_SHAPES
    blocks, _ = split_system(
        [
            {"role": "system", "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}]},
            user("u"),
        ]
    )
    assert blocks == [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}]
    assert split_system([user("u")]) == (None, [user("u")])


def test_the_current_turn_is_the_last_user_message_that_is_not_a_repeated_prompt():
    prompt = "Analyze the tool result. If requirements are met, provide the Final Answer."
    messages = [
        system("s"),
        user("first task"),
        assistant("a"),
        user("what about NO6JO3?"),
        assistant("step"),
        user(prompt),
        assistant("step"),
        user(prompt),
    ]
    assert current_turn_index(messages) == 3
    assert current_turn_index([user("yes"), assistant("a"), user("yes")]) == 2  # all repeat: the last
    assert current_turn_index([system("s")]) is None


@pytest.mark.parametrize(
    "call",
    [{"id": "c1", "function": "lookup"}, {"id": "c1", "function": {"name": 7, "arguments": "{}"}}, "lookup"],
)
def test_manage_refuses_a_malformed_tool_call_instead_of_crashing(call):
    import ctxlife

    messages = [user("u"), {"role": "assistant", "content": None, "tool_calls": [call]}, tool_result("c1", "r")]
    with pytest.raises(InvalidMessagesError, match=r"messages\[1\] tool_calls\[0\]"):
        ctxlife.manage(messages, context_window=8000)


_USE = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
_RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"}
_ORPHAN = "orphan_tool_result: tool result without a preceding assistant tool call"


@pytest.mark.parametrize(
    "messages, fmt, problems",
    [
        pytest.param(
            [system("s"), {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}, user("u")],
            "anthropic",
            ["message 1: first_message_not_user: an Anthropic conversation must open with a user message"],
            id="anthropic-opens-with-assistant",
        ),
        pytest.param(
            [user("u"), {"role": "assistant", "content": [_USE]}, {"role": "user", "content": [_RESULT, _USE]}],
            None,
            ["message 2: tool_use_in_user_message: tool_use blocks belong in assistant messages"],
            id="tool-use-beside-the-results",
        ),
        pytest.param(
            [user("u"), {"role": "assistant", "content": [_RESULT]}],
            None,
            ["message 1: tool_result_in_assistant_message: tool_result blocks belong in user messages"],
            id="tool-result-in-assistant",
        ),
        pytest.param(
            [system("s"), user("u"), tool_result("c9", "r"), tool_result("c8", "r"), system("late")],
            None,
            [
                f"message 2: {_ORPHAN}",
                f"message 3: {_ORPHAN}",
                "message 4: system_after_conversation: system message after the conversation started",
            ],
            id="two-orphans-then-a-late-system-prompt",
        ),
        pytest.param(
            [user("u"), assistant(None, [tool_call("f", {}, "c1")]), tool_result("c1", "r"), tool_result("c2", "r")],
            None,
            ["message 3: orphan_tool_result: more tool results than the 1 call(s) at message 1"],
            id="openai-extra-result",
        ),
        pytest.param(
            [
                user("u"),
                {"role": "assistant", "content": [_USE]},
                {"role": "user", "content": [_RESULT, {**_RESULT, "tool_use_id": "toolu_2"}]},
            ],
            None,
            ["message 2: orphan_tool_result: more tool results than the 1 call(s) at message 1"],
            id="anthropic-extra-result-names-the-message-not-the-block",
        ),
        pytest.param(
            [user("u"), assistant(None, [tool_call("f", {}, "c1")]), tool_result("c2", "r")],
            None,
            [
                "message 2: tool_result_id_mismatch: answers 'c2' but no unanswered call of message 1 "
                "has that id (unanswered: ['c1'])"
            ],
            id="openai-wrong-id",
        ),
    ],
)
def test_each_problem_names_the_message_and_says_what_is_wrong(messages, fmt, problems):
    # What a caller reads in the rollback event and the InvalidMessagesError: the index of the
    # message at fault, the problem's code and what is wrong, for every problem in the list.
    assert [str(p) for p in validate(messages, fmt)] == problems


class _Messages(Sequence):
    """A caller's own sequence type (no __eq__ of its own)."""

    def __init__(self, items):
        self._items = list(items)

    def __getitem__(self, i):
        return self._items[i]

    def __len__(self):
        return len(self._items)


def test_same_messages_compares_by_object_or_by_value_whatever_the_sequence_type():
    first, second = user("q"), assistant("a")
    copies = [user("q"), assistant("a")]  # equal, not the same objects
    assert same_messages([first, second], [first, second])
    assert same_messages([first, second], copies)
    assert same_messages([first, second], (first, second))  # a list and a tuple of the same messages
    assert same_messages([first, second], tuple(copies))
    assert same_messages(_Messages([first, second]), _Messages([first, second]))
    assert same_messages(_Messages([first, second]), _Messages(copies))
    assert not same_messages([first, second], [first])
    assert not same_messages([first, second], [first, second, user("more")])
    assert not same_messages([first, second], (first, assistant("other")))
    assert not same_messages(_Messages([first, second]), _Messages([second, first]))
