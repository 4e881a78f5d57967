from __future__ import annotations

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.messages import validate
from ctxlife.testing import assistant, conversation, system, tool_call, tool_result, user


def run(messages, window=100_000, **options):
    settings = settings_from_dict({"strategies": ["truncate_last_n"], "truncate_last_n": options})
    return ctxlife.manage(messages, config=settings, context_window=window)


def test_keeps_system_messages_pinned_task_and_last_n_rounds():
    messages = conversation(6, tools_per_round=2)
    report = run(messages, rounds=2, always=True)
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert users == [
        "Request 0: please look up item R0000.",
        "Request 4: please look up item R0004.",
        "Request 5: please look up item R0005.",
    ]
    assert messages[0]["role"] == "system"
    assert validate(messages) == []
    assert report.actions[0].details == {"removed_messages": 23, "kept_rounds": 2}


def test_cuts_never_split_native_tool_units_even_with_repeated_ids():
    messages = [system("s")]
    for r in range(5):
        calls = [tool_call("a", {"r": r}, call_id="dup"), tool_call("b", {"r": r}, call_id="dup2")]
        messages += [
            user(f"u{r}"),
            assistant(None, calls),
            tool_result("dup", "x"),
            tool_result("dup2", "y"),
            assistant(f"a{r}"),
        ]
    run(messages, rounds=1, pin_first_user=False, always=True)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert messages[1]["content"] == "u4" and validate(messages) == []


def test_waits_for_the_warning_line_by_default():
    messages = conversation(6)
    before = list(messages)
    tokens = ctxlife.TokenCounter().count_messages(messages)
    report = run(messages, window=int(tokens / 0.4) + 100, rounds=2)
    assert messages == before and not report.actions
    report = run(messages, window=int(tokens / 0.4) - 100, rounds=2)
    assert report.acted == ["truncate_last_n"] and report.tokens_after < report.tokens_before


def test_fewer_rounds_than_n_is_left_alone_and_all_system_messages_stay():
    messages = [system("a"), system("b"), user("u0"), assistant("x"), user("u1")]
    before = list(messages)
    assert not run(messages, rounds=2, always=True).actions and messages == before
    messages = [system("a"), user("u0"), assistant("x"), user("u1"), assistant("y"), user("u2")]
    run(messages, rounds=1, pin_first_user=False, always=True)
    assert messages == [system("a"), user("u2")]


def test_default_acts_only_above_the_threshold_and_always_cuts_every_call():
    # The README's and configs/default.toml's promise: a small conversation in a big window is left alone.
    messages = conversation(6)
    before = list(messages)
    report = run(messages, window=128_000, rounds=2)
    assert messages == before and report.acted == []
    report = run(messages, window=128_000, rounds=2, always=True)
    assert report.acted == ["truncate_last_n"] and len(messages) < len(before)


def test_the_shipped_default_config_leaves_a_small_conversation_alone():
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    messages = [system("s"), user("hi"), assistant("hello"), user("how are you?"), assistant("fine"), user("and now?")]
    before = list(messages)
    report = ctxlife.manage(messages, config=repo / "configs" / "default.toml", context_window=128_000)
    assert messages == before and report.acted == [] and report.tokens_before < 100


def test_the_report_names_the_cut_and_a_cut_that_removes_nothing_is_no_action():
    messages = conversation(4)
    report = run(messages, rounds=1, always=True)
    assert [(a.what, a.details) for a in report.actions] == [("truncated", {"removed_messages": 5, "kept_rounds": 1})]
    # everything before the last round is pinned: nothing to remove, nothing reported
    messages = [system("s"), user("the task"), user("the question")]
    assert run(messages, rounds=1, always=True).actions == []
    assert len(messages) == 3


def test_no_more_rounds_than_kept_leaves_an_opening_greeting_alone():
    messages = [system("s"), assistant("Hello! How can I help?"), user("q1"), assistant("a1"), user("q2")]
    before = list(messages)
    assert run(messages, rounds=2, always=True).actions == []
    assert messages == before


def test_a_context_exactly_at_the_threshold_is_left_alone():
    messages = conversation(6)
    tokens = ctxlife.TokenCounter().count_messages(messages)
    settings = {"strategies": ["truncate_last_n"], "threshold": 0.5, "truncate_last_n": {"rounds": 2}}
    report = ctxlife.manage(messages, config=settings_from_dict(settings), context_window=2 * tokens)
    assert report.actions == []
    report = ctxlife.manage(messages, config=settings_from_dict(settings), context_window=2 * tokens - 2)
    assert report.acted == ["truncate_last_n"]


def test_the_question_being_worked_on_and_inserted_messages_stay_when_older_than_the_kept_rounds():
    summary = ctxlife.messages.mark_inserted(user("History summary: the user asked for R1."), "summary")
    messages = [
        system("s"),
        user("the task"),
        assistant("ok"),
        summary,
        assistant("noted"),
        user("What is the price of R2?"),
        assistant("checking"),
        user("Analyze the tool result and answer."),
        assistant("still checking"),
        user("Analyze the tool result and answer."),
        assistant("R2 costs 3."),
    ]
    run(messages, rounds=1, always=True)
    assert [m["content"] for m in messages if m["role"] == "user"][1:] == [
        summary["content"],
        "What is the price of R2?",
        "Analyze the tool result and answer.",
    ]
