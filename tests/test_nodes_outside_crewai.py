"""Every lifecycle node without CrewAI: Host's node methods, provided_tools, host_of, the manage() warning, async."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.messages import bootstrap_section
from ctxlife.summarizers import register_summarizer, unregister_summarizer
from ctxlife.testing import conversation, system, user


class Recorder:
    """A plugin that records which node ran, with what."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[str] = []

    @ctxlife.hookimpl
    def ctxlife_bootstrap(self, ctx: ctxlife.BootstrapContext) -> None:
        self.seen.append("bootstrap")
        ctx.blocks.append("RULES: be brief.")

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        self.seen.append("before_llm_call")

    @ctxlife.hookimpl
    def ctxlife_before_tool_call(self, ctx: ctxlife.ToolCallContext) -> None:
        self.seen.append("before_tool_call")
        if "edit_me" in ctx.tool_input:
            ctx.tool_input["checked"] = True

    @ctxlife.hookimpl
    def ctxlife_after_tool_call(self, ctx: ctxlife.ToolCallContext) -> None:
        self.seen.append("after_tool_call")

    @ctxlife.hookimpl
    def ctxlife_task_start(self, ctx: ctxlife.TaskContext) -> None:
        self.seen.append("task_start")
        ctx.context_text = "carried: " + ctx.context_text

    @ctxlife.hookimpl
    def ctxlife_task_end(self, ctx: ctxlife.TaskContext) -> None:
        self.seen.append("task_end")


def test_the_six_nodes_through_host_methods(tmp_path):
    recorder = Recorder()
    settings = settings_from_dict(
        {
            "strategies": ["tool_output", "tool_cache"],
            "tool_output": {"max_tokens": 100, "store_dir": str(tmp_path)},
            "tool_cache": {"tools": ["lookup"]},
        }
    )
    host = ctxlife.Host(settings, context_window=8000, session_id="u1", plugins=[recorder])
    [recall] = host.provided_tools()
    assert recall.name == "ctxlife_recall" and set(recall.parameters) == {"ref", "start", "query"}

    host.start_run()
    task = ctxlife.TaskContext(description="answer", context_text="earlier output")
    host.task_start(task)
    assert task.context_text == "carried: earlier output"

    messages = [system("You are a clerk."), user("Check R0001.")]
    report = host.before_llm_call(messages)
    assert messages[0]["content"].endswith(bootstrap_section("RULES: be brief.")) and report.node == "before_llm_call"

    edited = ctxlife.ToolCallContext(tool_name="write", tool_input={"edit_me": 1})
    host.before_tool_call(edited)
    assert edited.tool_input == {"edit_me": 1, "checked": True} and edited.result is None
    call = ctxlife.ToolCallContext(tool_name="lookup", tool_input={"item": "R0001"})
    host.before_tool_call(call)
    assert call.result is None
    call.result = "item R0001: " + "stock " * 500 + "END"
    host.after_tool_call(call)
    assert "ctxlife_recall" in call.result and ctxlife.TokenCounter().count_text(call.result) <= 100
    [ref] = [a.details["ref"] for a in call.actions if a.what == "capped"]
    # The recall tool, called like a framework would (node 3 answers it without running anything).
    recall_call = ctxlife.ToolCallContext(
        tool_name="ctxlife_recall", tool_input={"ref": ref, "start": "0", "query": "END"}
    )
    host.before_tool_call(recall_call)
    assert recall_call.result is not None and "END" in recall_call.result and recall_call.skipped_by == "tool_output"
    # The same read-only call again: tool_cache answers at node 3.
    again = ctxlife.ToolCallContext(tool_name="lookup", tool_input={"item": "R0001"})
    host.before_tool_call(again)
    assert again.skipped_by == "tool_cache"

    task.output = "R0001 is in stock."
    host.task_end(task)
    assert recorder.seen[:3] == ["task_start", "bootstrap", "before_llm_call"]
    assert {"before_tool_call", "after_tool_call", "task_end"} <= set(recorder.seen)
    host.close()


def test_host_of_is_public_and_none_for_unwrapped_objects():
    assert ctxlife.host_of(object()) is None
    assert "host_of" in ctxlife.__all__ and "amanage" in ctxlife.__all__


def test_manage_warns_once_about_strategies_it_cannot_run(tmp_path, monkeypatch):
    # once per process: a fresh record, so an earlier test in the same process (mutmut runs them all in one)
    # that warned about the same strategies does not silence this one
    monkeypatch.setattr(ctxlife.api, "_warned", set())
    settings = settings_from_dict(
        {"strategies": ["truncate_last_n", "tool_output", "task_scope"], "tool_output": {"store_dir": str(tmp_path)}}
    )
    with pytest.warns(ctxlife.CtxlifeWarning) as caught:
        ctxlife.manage([user("hi")], config=settings, context_window=8000)
    [warning] = [w for w in caught if issubclass(w.category, ctxlife.CtxlifeWarning)]
    assert warning.filename == __file__  # it points at the app's manage() call (it named ctxlife's api.py)
    text = str(warning.message)
    assert (
        "tool_output (host.before_tool_call(ctx), host.after_tool_call(ctx))" in text
        and "task_scope (host.task_start(ctx), host.task_end(ctx))" in text
    )
    assert "host.provided_tools()" in text and "truncate_last_n" not in text.split("unless you call them")[1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ctxlife.manage([user("hi again")], config=settings, context_window=8000)  # once
        ctxlife.manage(
            [user("hi")], config=settings_from_dict({"strategies": ["truncate_last_n"]}), context_window=8000
        )


def test_amanage_keeps_the_event_loop_running_during_a_slow_summary_with_concurrent_sessions(loop_witness):
    class Slow:
        name = "slow_for_test"

        def summarize(self, request: Any) -> str:
            # Returns once the event loop ran a callback meanwhile and all three summaries are under way.
            loop_witness.wait_for_the_loop()
            return "The user looked up many items; all were in stock."

    register_summarizer("slow_for_test", lambda: Slow())
    loop_witness.overlapping(3)
    try:
        settings = settings_from_dict(
            {"strategies": ["llm_summary"], "llm_summary": {"summarizer": "slow_for_test", "min_gain_tokens": 10}}
        )

        async def session(name: str) -> ctxlife.Report:
            messages = conversation(30, tools_per_round=1)
            return await ctxlife.amanage(messages, config=settings, context_window=3000, session_id=name)

        async def main() -> list[ctxlife.Report]:
            return list(await asyncio.gather(*(session(n) for n in ("alice", "bob", "carol"))))

        reports = loop_witness.run(main)
    finally:
        unregister_summarizer("slow_for_test")
    assert [r.session_id for r in reports] == ["alice", "bob", "carol"]
    assert all("llm_summary" in r.acted for r in reports)
    # The loop ran while each summary was in progress, and the three were in progress at once (not queued).
    assert loop_witness.served >= 3 and loop_witness.blocked == 0 and loop_witness.not_overlapping == 0


def test_async_host_methods_match_the_sync_ones(tmp_path):
    settings = settings_from_dict(
        {"strategies": ["tool_output"], "tool_output": {"max_tokens": 100, "store_dir": str(tmp_path)}}
    )
    host = ctxlife.Host(settings, context_window=8000)

    async def main() -> tuple[str | None, ctxlife.Report]:
        call = ctxlife.ToolCallContext(tool_name="read", tool_input={}, result="x " * 1000)
        await host.aafter_tool_call(call)
        messages = [system("s"), user("u")]
        report = await host.abefore_llm_call(messages)
        await host.atask_start(ctxlife.TaskContext())
        await host.atask_end(ctxlife.TaskContext(output="done"))
        return call.result, report

    result, report = asyncio.run(main())
    assert result is not None and "ctxlife_recall" in result and report.node == "before_llm_call"


def test_precedence_explicit_beats_environment_beats_file_beats_framework(monkeypatch, tmp_path):
    config = tmp_path / "ctxlife.toml"
    config.write_text('strategies = []\ncontext_window = 7000\nagent_model = "gpt-4"\nsession_id = "from-file"\n')

    def used(**explicit: Any) -> tuple[int, str | None, str | None]:
        host = ctxlife.Host(ctxlife.load_settings(config), **explicit)
        report = host.before_llm_call([user("hi")], context_window=5000, model="framework-model")
        return report.context_window, host.counter("framework-model").model, report.session_id

    assert used() == (7000, "gpt-4", "from-file")
    monkeypatch.setenv("CTXLIFE_CONTEXT_WINDOW", "6000")
    monkeypatch.setenv("CTXLIFE_SESSION_ID", "from-env")
    assert used()[0] == 6000 and used()[2] == "from-env"
    assert used(context_window=9000, model="gpt-4o", session_id="explicit") == (9000, "gpt-4o", "explicit")
    config.write_text("strategies = []\n")
    monkeypatch.delenv("CTXLIFE_CONTEXT_WINDOW")
    monkeypatch.delenv("CTXLIFE_SESSION_ID")
    assert used()[:2] == (5000, "framework-model")  # nothing set: what the framework reports
