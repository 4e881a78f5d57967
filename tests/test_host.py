"""The host: ordered dispatch, isolation and rollback, reports and events."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.contexts import TaskContext, ToolCallContext
from ctxlife.errors import CtxlifeError, InvalidMessagesError
from ctxlife.host import Host
from ctxlife.messages import bootstrap_section
from ctxlife.testing import (
    HookRecorder,
    assistant,
    conversation,
    installed_strategy,
    system,
    tool_call,
    tool_result,
    user,
)

NONE = settings_from_dict({"strategies": []})


class Tagger:
    """Appends its name to the last message's content, to show call order."""

    def __init__(self, name):
        self.name = name

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx):
        last = ctx.messages[-1]
        ctx.messages[-1] = {**last, "content": f"{last['content']}|{self.name}"}
        ctx.record("tagged")


def test_plugins_run_in_the_given_order_after_configured_strategies():
    messages = conversation(4)
    messages.append(user("latest"))
    report = ctxlife.manage(
        messages,
        config=settings_from_dict({"strategies": ["truncate_last_n"], "truncate_last_n": {"always": True}}),
        context_window=8000,
        plugins=[Tagger("a"), Tagger("b")],
    )
    assert messages[-1]["content"] == "latest|a|b"
    assert report.acted == ["truncate_last_n", "a", "b"]
    assert report.tokens_after < report.tokens_before and report.tokens_saved > 0


def test_a_raising_strategy_is_rolled_back_alone_and_reported():
    class Exploder:
        name = "exploder"

        @ctxlife.hookimpl
        def ctxlife_before_llm_call(self, ctx):
            ctx.messages.clear()
            ctx.record("cleared")
            raise ValueError("kaput")

    messages = [system("s"), user("u")]
    with capture_logs() as logs:
        report = ctxlife.manage(messages, config=NONE, context_window=1000, plugins=[Exploder(), Tagger("after")])
    assert messages == [system("s"), user("u|after")]
    assert [f.strategy for f in report.failures] == ["exploder"] and report.acted == ["after"]
    event = next(e for e in logs if e["event"] == "ctxlife.strategy_failed")
    assert (
        event["strategy"] == "exploder" and event["node"] == "before_llm_call" and event["error"] == "ValueError: kaput"
    )
    assert event["log_level"] == "error"


@pytest.mark.parametrize(
    "edit, problem",
    [
        (
            lambda m: m.__delitem__(slice(1, 2)),
            "left an invalid message list: message 1: "
            "orphan_tool_result: tool result without a preceding assistant tool call",
        ),
        (
            lambda m: m.__delitem__(slice(2, 3)),
            "left an invalid message list: message 1: "
            "tool_call_without_result: 1 of 1 tool call(s) have no result (ids ['c1'])",
        ),
        (lambda m: m.__delitem__(-1), "dropped the latest user message"),
        (
            lambda m: m.append(system("late")),
            "left an invalid message list: message 5: "
            "system_after_conversation: system message after the conversation started",
        ),
    ],
)
def test_an_invalid_result_is_rolled_back_with_an_event(edit, problem):
    class Breaker:
        @ctxlife.hookimpl
        def ctxlife_before_llm_call(self, ctx):
            edit(ctx.messages)

    call = tool_call("t", call_id="c1")
    messages = [system("s"), assistant(None, [call]), tool_result("c1", "r"), assistant("ok"), user("u")]
    original = list(messages)
    with capture_logs() as logs:
        report = ctxlife.manage(messages, config=NONE, context_window=1000, plugins=[Breaker()])
    assert messages == original
    assert report.failures[0].error == problem
    assert any(e["event"] == "ctxlife.invalid_sequence" and e["problem"] == problem for e in logs)


def test_rebinding_messages_is_detected_and_undone():
    class Rebinder:
        @ctxlife.hookimpl
        def ctxlife_before_llm_call(self, ctx):
            ctx.messages = [user("x")]

    messages = [user("u")]
    report = ctxlife.manage(messages, config=NONE, context_window=1000, plugins=[Rebinder()])
    assert messages == [user("u")] and "rebound ctx.messages" in report.failures[0].error


def test_state_is_per_strategy_and_session_and_survives_calls():
    class Counter:
        def __init__(self, name):
            self.name = name

        @ctxlife.hookimpl
        def ctxlife_before_llm_call(self, ctx):
            ctx.state["n"] = ctx.state.get("n", 0) + 1
            ctx.record("counted", n=ctx.state["n"])

    host = Host(NONE, context_window=1000, plugins=[Counter("a"), Counter("b")])
    for _ in range(3):
        report = host.manage([user("u")])
    assert [a.details["n"] for a in report.actions] == [3, 3]
    host.session_id = "other"
    assert [a.details["n"] for a in host.manage([user("u")]).actions] == [1, 1]


def test_first_call_of_task_is_true_only_on_the_first_model_call_after_a_task_started():
    recorder = HookRecorder()
    host = Host(NONE, context_window=1000, plugins=[recorder])
    host.before_llm_call([user("before any task")], task_name="report")
    host.task_start(ctxlife.TaskContext(task_name="report", description="write the report"))
    for _ in range(2):
        host.before_llm_call([user("u")], task_name="report")
    host.task_start(ctxlife.TaskContext(task_name="review", description="review it"))
    host.before_llm_call([user("u")], task_name="report")  # another task's call: not its first
    host.before_llm_call([user("u")], task_name="review")
    calls = recorder.of("ctxlife_before_llm_call")
    assert [(c.snapshot["task_name"], c.snapshot["first_call_of_task"]) for c in calls] == [
        ("report", False),
        ("report", True),
        ("report", False),
        ("report", False),
        ("review", True),
    ]


def test_manage_reuses_one_host_per_config_and_validates_input():
    recorder = HookRecorder()
    for _ in range(2):
        ctxlife.manage([user("u")], config=NONE, context_window=1000, plugins=[recorder])
    calls = recorder.of("ctxlife_before_llm_call")
    assert [c.snapshot["call_index"] for c in calls] == [0, 1]
    assert [c.snapshot["first_call_of_run"] for c in calls] == [True, False]
    assert len(recorder.of("ctxlife_bootstrap")) == 1
    with pytest.raises(InvalidMessagesError):
        ctxlife.manage([{"content": "x"}], config=NONE, context_window=1000)
    with pytest.raises(CtxlifeError, match="no context window is known for this call; pass context_window="):
        ctxlife.manage([user("u")], config=NONE)


def test_bootstrap_blocks_are_injected_once():
    class Boot:
        @ctxlife.hookimpl
        def ctxlife_bootstrap(self, ctx):
            ctx.blocks.append(f"Profile for {ctx.variables['session_id']}.")

    host = Host(NONE, context_window=1000, session_id="u42", plugins=[Boot()])
    messages = [system("You are XiaoPaw."), user("hi")]
    for _ in range(3):
        host.manage(messages)
    assert messages[0]["content"] == "You are XiaoPaw.\n\n" + bootstrap_section("Profile for u42.")
    bare = [user("hi")]
    host.manage(bare)
    assert bare[0] == system(bootstrap_section("Profile for u42."))


def test_tool_nodes_short_circuit_and_chain():
    class Cache:
        name = "cache"

        @ctxlife.hookimpl
        def ctxlife_before_tool_call(self, ctx):
            ctx.result = "cached!"

    class NeverReached:
        @ctxlife.hookimpl
        def ctxlife_before_tool_call(self, ctx):
            raise AssertionError("strategies after one that answered must not run")

    class Upper:
        @ctxlife.hookimpl
        def ctxlife_after_tool_call(self, ctx):
            ctx.result = ctx.result.upper()

    class BadType:
        name = "badtype"

        @ctxlife.hookimpl
        def ctxlife_after_tool_call(self, ctx):
            ctx.result = 42

    host = Host(NONE, context_window=1000, plugins=[Cache(), NeverReached(), Upper(), BadType()])
    ctx = ToolCallContext(tool_name="t", tool_input={"a": 1})
    before = host.before_tool_call(ctx)
    assert ctx.result == "cached!" and ctx.skipped_by == "cache" and not before.failures
    after = host.after_tool_call(ctx)
    assert ctx.result == "CACHED!"
    assert after.failures[0].strategy == "badtype" and "must be a string" in after.failures[0].error


def test_task_nodes_edit_context_and_output():
    class Isolate:
        @ctxlife.hookimpl
        def ctxlife_task_start(self, ctx):
            ctx.context_text = ""

        @ctxlife.hookimpl
        def ctxlife_task_end(self, ctx):
            ctx.output = ctx.output.strip() + " (checked)"

    host = Host(NONE, context_window=1000, plugins=[Isolate()])
    start = TaskContext(task_name="t", context_text="earlier output")
    host.task_start(start)
    end = TaskContext(task_name="t", output=" result ")
    host.task_end(end)
    assert start.context_text == "" and end.output == "result (checked)"


def test_a_strategy_written_as_a_class_is_configured_by_name():
    class Note(ctxlife.Strategy):
        name = "note_test_strategy"

        class Options(ctxlife.Options):
            text: str = "note"

        @ctxlife.hookimpl
        def ctxlife_bootstrap(self, ctx):
            ctx.blocks.append(self.options.text)

    with installed_strategy(Note):
        settings = settings_from_dict(
            {"strategies": ["note_test_strategy"], "note_test_strategy": {"text": "Rules: be brief."}}
        )
        messages = [system("s"), user("u")]
        ctxlife.manage(messages, config=settings, context_window=1000)
    assert messages[0]["content"] == "s\n\n" + bootstrap_section("Rules: be brief.")


def test_events_carry_counts_and_names_and_contents_only_when_asked():
    secret = "the launch code is 0000-SECRET"
    with capture_logs() as logs:
        ctxlife.manage(
            [system("s"), user(secret)],
            config=settings_from_dict({"strategies": ["truncate_last_n"]}),
            context_window=1000,
        )
    node = next(e for e in logs if e["event"] == "ctxlife.node" and e["node"] == "before_llm_call")
    assert node["tokens_before"] > 0 and "content" not in node
    assert secret not in repr(logs)
    with capture_logs() as logs:
        ctxlife.manage(
            [system("s"), user(secret)],
            config=settings_from_dict({"strategies": [], "log_content": True}),
            context_window=1000,
        )
    node = next(e for e in logs if e["event"] == "ctxlife.node" and e["node"] == "before_llm_call")
    assert node["content"] == secret


def test_a_strategy_that_fails_to_close_does_not_stop_the_host_from_closing_the_rest():
    closed = []

    class Stubborn(ctxlife.Strategy):
        name = "stubborn_test_strategy"

        def close(self):
            raise OSError("busy")

    class Tidy(ctxlife.Strategy):
        name = "tidy_test_strategy"

        def close(self):
            closed.append(self.name)

    with installed_strategy(Stubborn), installed_strategy(Tidy):
        host = Host(settings_from_dict({"strategies": ["stubborn_test_strategy", "tidy_test_strategy"]}))
        with capture_logs() as logs:
            host.close()
    assert closed == ["tidy_test_strategy"]
    failed = [e for e in logs if e["event"] == "ctxlife.strategy_close_failed"]
    assert [(e["strategy"], e["error"], e["log_level"]) for e in failed] == [
        ("stubborn_test_strategy", "OSError: busy", "error")
    ]


def test_record_reply_of_the_whole_list_records_the_turns_no_strategy_recorded(tmp_path: Path) -> None:
    # A host with a store and no strategy that records calls: each call's list is not recorded, so
    # record_reply of the list with the reply records what is new in it, the user's turn included.
    from ctxlife.sessions import open_store, session_key

    settings = settings_from_dict({"strategies": [], "store": f"file://{tmp_path}"})
    host = Host(settings, context_window=1000)
    first = [{"role": "user", "content": "task"}]
    host.before_llm_call(first, session_id="s")
    host.record_reply([*first, {"role": "assistant", "content": "ok1"}], session_id="s")
    second = [*first, {"role": "assistant", "content": "ok1"}, {"role": "user", "content": "more"}]
    host.before_llm_call(second, session_id="s")
    host.record_reply([*second, {"role": "assistant", "content": "ok2"}], session_id="s")
    host.close()
    with open_store(settings.store) as store:
        assert [r.message["content"] for r in store.read_records(session_key("s"))] == ["task", "ok1", "more", "ok2"]
