"""Issue 13 end to end: each message shape through the strategies that used to get it wrong."""

from __future__ import annotations

import json

import ctxlife
from ctxlife import messages as model
from ctxlife.config import settings_from_dict
from ctxlife.host import Host
from ctxlife.messages import is_summary, split_system, validate
from ctxlife.testing import assistant, system, tool_call, tool_result, user
from ctxlife.tokens import TokenCounter

SUMMARY = {"summarizer": "extractive", "min_gain_tokens": 0, "max_summary_tokens": 120}


def host(*names: str, window: int = 2000, fmt: str = "auto", tmp_path=None, **options) -> Host:
    data: dict = {"strategies": list(names), "message_format": fmt}
    data.update(options)
    if tmp_path is not None and "snapshot_restore" in names:
        data["store"] = f"file://{tmp_path}"
    return Host(settings_from_dict(data), context_window=window, session_id="shapes" if tmp_path else None)


def chat(rounds: int, words: int = 60) -> list[dict]:
    out = []
    for r in range(rounds):
        out += [user(f"question {r}: " + "detail " * words), assistant(f"answer {r}: " + "reply " * words)]
    return out


# -- developer messages are system prompts ---------------------------------------------------------


def test_truncate_last_n_keeps_developer_messages():
    developer = {"role": "developer", "content": "Answer in French."}
    messages = [system("s"), developer, *chat(6), user("last")]
    host("truncate_last_n", truncate_last_n={"rounds": 1}).manage(messages)
    assert developer in messages  # before: dropped with the old rounds


def test_llm_summary_keeps_developer_messages_out_of_the_summary():
    developer = {"role": "developer", "content": "Answer in French."}
    messages = [system("s"), developer, *chat(10), user("last")]
    report = host("llm_summary", llm_summary=SUMMARY).manage(messages)
    assert "compacted" in [a.what for a in report.actions]
    assert messages[:2] == [system("s"), developer]  # before: evicted into the summary
    summary = next(m for m in messages if is_summary(m))
    assert "French" not in summary["content"]


# -- Anthropic Messages ------------------------------------------------------------------------------------

RESULT = "订单 A1：已发货，预计 5 月 20 日送达。" + "物流记录 " * 120


def anthropic_session(steps: int) -> list[dict]:
    out: list[dict] = [{"role": "user", "content": "帮我查一下订单 A1 到 A9 的状态"}]
    for k in range(steps):
        out.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"查询第 {k} 个"},
                    {"type": "tool_use", "id": f"toolu_{k:02d}a", "name": "查询订单", "input": {"id": f"A{k}"}},
                    {"type": "tool_use", "id": f"toolu_{k:02d}b", "name": "查询物流", "input": {"id": f"A{k}"}},
                ],
            }
        )
        out.append(
            {
                "role": "user",
                "content": [  # results in the other order
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{k:02d}b",
                        "content": [{"type": "text", "text": RESULT}],
                    },
                    {"type": "tool_result", "tool_use_id": f"toolu_{k:02d}a", "content": f"A{k}: 已发货"},
                ],
            }
        )
    return out


def test_anthropic_tool_results_are_counted():
    block = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x" * 1490}]}
    assert TokenCounter("gpt-4o").count_message(block) > 150  # before: 3 (the text was never read)


def test_truncate_last_n_never_keeps_a_tool_result_without_its_tool_use():
    messages = anthropic_session(4) + [{"role": "user", "content": "再查一次 A3"}]
    before = list(messages)
    report = host("truncate_last_n", fmt="anthropic", truncate_last_n={"rounds": 1, "pin_first_user": False}).manage(
        messages
    )
    assert validate(before, "anthropic") == [] and validate(messages, "anthropic") == []
    assert report.failures == []
    # Before: the tool_result carriers counted as rounds, so a cut could keep one without its call.
    assert messages[0] == {"role": "user", "content": "再查一次 A3"}


def test_llm_summary_compacts_an_anthropic_session_and_stays_anthropic():
    messages = anthropic_session(6) + [{"role": "user", "content": "总结一下"}]
    report = host("llm_summary", window=4000, fmt="anthropic", llm_summary=SUMMARY).manage(messages)
    compacted = [a for a in report.actions if a.what == "compacted"]
    assert compacted, report.actions  # before: the results counted 3 tokens each, so it never fired
    assert validate(messages, "anthropic") == [] and model.check_shape(messages) == "anthropic"
    summary = next(m for m in messages if is_summary(m))
    assert summary["role"] == "user"  # no system role in an Anthropic conversation
    assert "called 查询" in summary["content"] and "A1" in summary["content"] and "type: text" not in summary["content"]


def test_auto_detection_sees_anthropic_once_the_session_shows_blocks():
    h = host("llm_summary", window=4000, llm_summary=SUMMARY)
    messages = anthropic_session(6) + [{"role": "user", "content": "总结一下"}]
    h.manage(messages)
    assert validate(messages, "anthropic") == []
    # A later call whose list holds only plain text is still Anthropic: no system message is added.
    plain = [
        {"role": "user", "content": "你好 " * 900},
        {"role": "assistant", "content": "好"},
        {"role": "user", "content": "继续"},
    ] * 3
    h.manage(plain)
    assert all(m["role"] != "system" for m in plain)


def test_split_system_hands_back_the_system_argument():
    messages = [system("你是客服助手。"), *anthropic_session(1)]
    system_arg, conversation = split_system(messages)
    assert system_arg == "你是客服助手。" and conversation == messages[1:]


# -- legacy function calls -------------------------------------------------------------------------


def test_llm_summary_never_splits_a_legacy_function_call_from_its_result():
    messages = [system("s"), user("weather?")]
    for k in range(8):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "weather", "arguments": json.dumps({"day": k})},
            }
        )
        messages.append({"role": "function", "name": "weather", "content": f"day {k}: " + "sunny and warm " * 40})
    messages.append(user("and tomorrow?"))
    report = host("llm_summary", window=2000, llm_summary=SUMMARY).manage(messages)
    assert "compacted" in [a.what for a in report.actions]
    assert validate(messages) == []  # before: the result was kept and its call evicted
    summary = next(m for m in messages if is_summary(m))
    assert "weather" in summary["content"]


# -- parallel calls ---------------------------------------------------------------------------------------


def test_parallel_results_in_any_order_survive_truncation_and_summary():
    messages = [system("s")]
    for r in range(5):
        calls = [
            tool_call("a", {"r": r}, f"c{r}a"),
            tool_call("b", {"r": r}, f"c{r}b"),
            tool_call("c", {"r": r}, f"c{r}c"),
        ]
        messages += [user(f"turn {r} " + "x " * 50), assistant(None, calls)]
        messages += [
            tool_result(f"c{r}c", "C " * 80),
            tool_result(f"c{r}a", "A " * 80),
            tool_result(f"c{r}b", "B " * 80),
        ]
        messages.append(assistant(f"done {r}"))
    messages.append(user("last"))
    for strategy, options in (("truncate_last_n", {"rounds": 2}), ("llm_summary", SUMMARY)):
        live = list(messages)
        report = host(strategy, window=2500, **{strategy: options}).manage(live)
        assert report.failures == [] and validate(live) == []
        assert report.tokens_after < report.tokens_before


# -- summaries across processes -----------------------------------------------------------------------------


def test_a_restored_summary_is_still_a_summary_in_a_new_process(tmp_path):
    first = host("llm_summary", "snapshot_restore", window=2000, tmp_path=tmp_path, llm_summary=SUMMARY)
    messages = [system("s"), *chat(10), user("last")]
    first.manage(messages)
    assert any(is_summary(m) for m in messages)
    first.close()
    # a new process knows nothing of the first one: the summary is recognised by its own mark line
    second = host("llm_summary", "snapshot_restore", window=2000, tmp_path=tmp_path, llm_summary=SUMMARY)
    live = [system("s"), user("after the restart " + "more " * 400)]
    second.manage(live)
    raw = [r.message for r in second.store.read_records("shapes")]
    assert not [m for m in raw if str(m.get("content", "")).startswith("History summary:")]
    assert sum(is_summary(m) for m in live) == 1  # the restored one is recognised (and folded)
    second.close()


def test_manage_returns_lists_the_provider_accepts_in_both_formats():
    for messages, fmt in (
        (anthropic_session(3) + [{"role": "user", "content": "好"}], "anthropic"),
        ([system("s"), *chat(8), user("go")], "openai"),
    ):
        ctxlife.manage(
            messages,
            config=settings_from_dict({"strategies": ["llm_summary"], "llm_summary": SUMMARY}),
            context_window=1500,
        )
        assert validate(messages, fmt) == []


def test_replay_caps_anthropic_tool_results_and_stays_valid(tmp_path):
    from ctxlife.replay import Conversation, replay

    recorded = anthropic_session(4) + [{"role": "user", "content": "好"}, {"role": "assistant", "content": "完成"}]
    settings = settings_from_dict(
        {
            "strategies": ["tool_output"],
            "message_format": "anthropic",
            "tool_output": {"max_tokens": 100, "store_dir": str(tmp_path)},
        }
    )
    result = replay(Conversation("anthropic", recorded), settings, context_window=8000)
    assert result.tool_tokens_saved > 0  # before: Anthropic results never went through tool_output
    assert all(not row.problems for row in result.rows)


def test_bootstrap_never_edits_a_summary_that_opens_an_anthropic_conversation():
    settings = settings_from_dict(
        {
            "strategies": ["bootstrap", "llm_summary"],
            "message_format": "anthropic",
            "bootstrap": {"text": "PROFILE: 张伟"},
            "llm_summary": SUMMARY,
        }
    )
    h = Host(settings, context_window=3000)
    messages = anthropic_session(6) + [{"role": "user", "content": "总结一下"}]
    h.manage(messages)
    h.manage(messages)
    summary = next(m for m in messages if is_summary(m))
    assert "PROFILE" not in summary["content"]  # before: the section went into the summary, which then was no summary
    assert sum(str(m["content"]).count("PROFILE: 张伟") for m in messages) == 1
    assert validate(messages, "anthropic") == []


def test_a_restored_conversation_keeps_one_bootstrap_section_in_its_first_user_turn(tmp_path):
    settings = settings_from_dict(
        {
            "strategies": ["bootstrap", "snapshot_restore"],
            "message_format": "anthropic",
            "bootstrap": {"text": "PROFILE: 张伟"},
            "store": f"file://{tmp_path}",
        }
    )
    first = Host(settings, context_window=8000, session_id="zw")
    messages = anthropic_session(2) + [{"role": "user", "content": "好"}]
    first.manage(messages)
    first.close()
    second = Host(settings, context_window=8000, session_id="zw")  # a restart
    live = [{"role": "user", "content": "我回来了"}]
    second.manage(live)
    second.close()
    sections = [i for i, m in enumerate(live) if "PROFILE: 张伟" in str(m["content"])]
    assert sections == [0], sections  # before: the new turn kept its own section too
    assert live[-1] == {"role": "user", "content": "我回来了"}
    assert validate(live, "anthropic") == []
