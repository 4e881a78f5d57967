"""What a user's strictly typed code sees of ctxlife's public API (checked by tests/test_typing.py)."""

from __future__ import annotations

import asyncio
from typing import Any, assert_type

from crewai import Crew

import ctxlife
from ctxlife.integrations.langchain import CtxlifeMiddleware


def crew_side(crew: Crew) -> None:
    wrapped = ctxlife.wrap(crew, "ctxlife.toml", session_id="u1")
    assert_type(wrapped, Crew)  # wrap() returns its argument's type
    assert_type(ctxlife.unwrap(wrapped), Crew)
    host = ctxlife.host_of(wrapped)
    assert_type(host, ctxlife.Host | None)


def plain_side() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    report = ctxlife.manage(messages, context_window=8000, session_id="u1")
    assert_type(report, ctxlife.Report)
    assert_type(report.acted, list[str])
    assert_type(asyncio.run(ctxlife.amanage(messages, context_window=8000)), ctxlife.Report)

    host = ctxlife.Host(ctxlife.load_settings(None), context_window=8000)
    assert_type(host.before_llm_call(messages), ctxlife.Report)
    call = ctxlife.ToolCallContext(tool_name="lookup", tool_input={"item": "R1"})
    assert_type(host.before_tool_call(call), ctxlife.Report)
    assert_type(call.result, str | None)
    task = ctxlife.TaskContext(description="answer")
    assert_type(host.task_start(task), ctxlife.Report)
    assert_type(host.task_end(task), ctxlife.Report)
    assert_type(host.provided_tools(), list[ctxlife.ToolSpec])
    assert_type(host.bootstrap_text(agent_role="clerk"), str)


async def async_side(host: ctxlife.Host) -> None:
    call = ctxlife.ToolCallContext(tool_name="lookup")
    assert_type(await host.aafter_tool_call(call), ctxlife.Report)
    assert_type(await host.abefore_llm_call([{"role": "user", "content": "x"}]), ctxlife.Report)


def langchain_side() -> None:
    middleware = CtxlifeMiddleware("ctxlife.toml", context_window=8000, session_id="u1")
    assert_type(middleware.host, ctxlife.Host)


class Shout(ctxlife.Strategy):
    name = "shout"

    @ctxlife.hookimpl
    def ctxlife_after_tool_call(self, ctx: ctxlife.ToolCallContext) -> None:
        if ctx.result is not None:
            ctx.result = ctx.result.upper()
            ctx.record("shouted", length=len(ctx.result))


def errors() -> None:
    try:
        ctxlife.load_settings("missing.toml")
    except ctxlife.ConfigError as exc:
        assert_type(exc, ctxlife.ConfigError)
    except ctxlife.MissingDependencyError:
        pass
