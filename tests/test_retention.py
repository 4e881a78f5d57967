"""The one definition of "facts kept" (ctxlife.retention): independent of ctxlife's extractor."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ctxlife.retention import Need, NeedIndex, Retention, context_text, reused_arguments, score
from ctxlife.testing import assistant, system, tool_call, tool_result, user


def _session() -> list[dict]:
    return [
        system("You book repairs. Office hours are 0800-1700."),  # 0
        user("Hi, my account is ACCT-7731 and the unit is Block C flat 12."),  # 1
        assistant(tool_calls=[tool_call("lookup_account", {"account": "ACCT-7731"}, "c1")]),  # 2
        tool_result("c1", '{"owner": "Dana Okafor", "meter": "MTR 55-0192", "balance": 12}'),  # 3
        assistant("Thanks Dana, what is wrong?"),  # 4
        user("The boiler leaks."),  # 5
        assistant(  # 6: re-uses the account (user), the meter (tool), an invented value and a short one
            tool_calls=[
                tool_call(
                    "open_ticket",
                    {
                        "account": "ACCT-7731",
                        "meter": "MTR 55-0192",
                        "note": "boiler leak reported",
                        "hours": "0800-1700",
                        "n": 12,
                    },
                    "c2",
                )
            ]
        ),
        tool_result("c2", '{"ticket": "TK-40021"}'),  # 7
        assistant("Ticket TK-40021 is open."),  # 8
    ]


def test_reused_arguments_are_values_read_earlier_from_a_user_or_tool_and_not_in_the_system_prompt():
    needs = reused_arguments(_session())
    assert [(n.values, n.call, n.origin) for n in needs] == [
        (("ACCT-7731",), 2, 1),
        (("ACCT-7731",), 6, 1),
        (("MTR 55-0192",), 6, 3),
    ]
    # "boiler leak reported" was written by the agent, "0800-1700" is in the system prompt,
    # 12 is too short: none of them is a need.


def test_a_value_inside_a_longer_word_or_number_is_not_a_match():
    messages = [
        user("Reference 9ACCT-77310 is not mine."),
        assistant(tool_calls=[tool_call("find", {"ref": "ACCT-7731"}, "c1")]),
    ]
    assert reused_arguments(messages) == []


def test_arguments_in_other_shapes_count_too():
    messages = [
        user("Serial QX-88-1200 please."),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": {"serial": "QX-88-1200"}}}
            ],
        },
    ]
    assert [n.values for n in reused_arguments(messages)] == [("QX-88-1200",)]


def test_kept_means_present_in_the_context_sent_at_that_call():
    messages = _session()
    needs = reused_arguments(messages)
    unmanaged = {n.call: messages[: n.call] for n in needs}
    assert score(needs, unmanaged).share == 1.0
    # A context that dropped the tool result loses the meter reading, keeps the account id (user turn).
    trimmed = {2: messages[:2], 6: [messages[0], messages[1], messages[5]]}
    result = score(needs, trimmed)
    assert (result.needs, result.kept) == (3, 2)
    # A call with no context at all keeps nothing.
    assert score(needs, {}).kept == 0


def test_a_summary_holding_the_value_keeps_it_whatever_its_case_and_spacing():
    need = Need(("MTR 55-0192",), call=6)
    summary = {"role": "system", "content": "History summary: meter  mtr 55-0192 read by the user."}
    assert score([need], {6: [summary]}).kept == 1
    assert score([need], {6: [{"role": "system", "content": "History summary: meter MTR 55-019"}]}).kept == 0


def test_values_in_tool_call_arguments_of_the_context_count():
    need = Need(("ACCT-7731",), call=9)
    context = [assistant(tool_calls=[tool_call("lookup_account", {"account": "ACCT-7731"}, "c1")])]
    assert score([need], {9: context}).kept == 1


def test_any_of_the_alternatives_of_an_answer_counts_and_cjk_matches_inside_a_sentence():
    need = Need(("Green Meadow Park", "the meadow park"), call=3, kind="answer")
    assert score([need], {3: [user("We walked in the Meadow Park yesterday.")]}).kept == 1
    cjk = Need(("青草公园",), call=3, kind="answer")
    assert score([cjk], {3: [user("我昨天去了青草公园散步。")]}).kept == 1
    escaped = Need(("青草公园",), call=3)
    context = [assistant(tool_calls=[tool_call("note", {"place": "青草公园"}, "c1")])]  # JSON-escaped arguments
    assert score([escaped], {3: context}).kept == 1


def test_retention_adds_up_by_kind():
    total = Retention()
    index = NeedIndex([Need(("alpha-1",), 1, kind="answer"), Need(("beta-22",), 1, kind="planted")])
    total.add(index.score_call(1, [user("alpha-1 only")]))
    total.add(index.score_call(1, [user("alpha-1 and beta-22")]))
    assert (total.needs, total.kept, total.share) == (4, 3, 0.75)
    assert total.by_kind == {"answer": [2, 2], "planted": [2, 1]}


def test_a_need_holds_text():
    with pytest.raises(ValueError, match="non-empty strings"):
        Need(("  ",), call=1)
    assert Need("single", call=1).values == ("single",)


def test_the_metric_does_not_use_ctxlifes_fact_extractor():
    source = Path(__import__("ctxlife.retention").retention.__file__).read_text(encoding="utf-8")
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert not any(name and ("facts" in name or "summarizers" in name) for name in imported), imported
    assert "ctxlife.messages" in imported


def test_context_text_reads_content_parts_and_tool_arguments():
    text = context_text(
        [
            {"role": "user", "content": [{"type": "text", "text": "Part ONE"}]},
            assistant(tool_calls=[tool_call("do", {"x": "Value  Two"}, "c")]),
        ]
    )
    assert "part one" in text and "value two" in text and "do" in text
