"""What a user's strictly typed code sees of ctxlife's public API (checked by tests/test_typing.py)."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol, assert_type

from crewai import Crew

import ctxlife
from ctxlife.integrations.langchain import CtxlifeMiddleware
from ctxlife.sessions import RawRecord


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
    assert_type(ctxlife.record_reply("hello", session_id="u1")[0].seq, int)
    assert_type(asyncio.run(ctxlife.arecord_reply(messages, session_id="u1")), list[RawRecord])

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


def session_side() -> None:
    with ctxlife.Session("u1", "ctxlife.toml", system="You are a clerk.", context_window=8000) as session:
        sent = session.prepare({"role": "user", "content": "hi"})
        assert_type(sent, list[dict[str, Any]])
        assert_type(session.record_reply("hello").seq, int)
        assert_type(session.get_items(limit=2), list[dict[str, Any]])
        session.add_items([{"role": "user", "content": "more"}])
        assert_type(session.pop_item(), dict[str, Any] | None)
        session.clear_session()
        assert_type(session.host, ctxlife.Host)


class AgentsSdkSession(Protocol):
    """The OpenAI Agents SDK's ``Session`` protocol (agents.memory.session), item type aside."""

    session_id: str

    async def get_items(self, limit: int | None = None) -> list[dict[str, Any]]: ...
    async def add_items(self, items: list[dict[str, Any]]) -> None: ...
    async def pop_item(self) -> dict[str, Any] | None: ...
    async def clear_session(self) -> None: ...


async def async_session_side() -> None:
    session: AgentsSdkSession = ctxlife.AsyncSession("u1", "ctxlife.toml", context_window=8000)
    assert_type(await session.get_items(), list[dict[str, Any]])
    async with ctxlife.AsyncSession("u2", context_window=8000) as chat:
        assert_type(await chat.prepare({"role": "user", "content": "hi"}), list[dict[str, Any]])
        assert_type((await chat.record_reply({"role": "assistant", "content": "yo"})).seq, int)


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
