"""The LangChain v1 adapter: the only module of ctxlife that knows LangChain.

:class:`CtxlifeMiddleware` is an ``AgentMiddleware`` for ``langchain.agents.create_agent``: one TOML
policy runs unchanged on a LangChain agent, exactly as under ``ctxlife.wrap(crew)``. Which LangChain
hook reaches which node, the write-back (compaction is not deletion), the session id, the async hooks:
docs/integrations.md, "LangChain v1". Needs ``pip install 'ctxlife[langchain]'``.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxlife.integrations import require, tool_arguments_model

require("langchain", "langchain", "ctxlife.integrations.langchain")

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse  # noqa: E402
from langchain.agents.middleware.types import ExtendedModelResponse  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    AnyMessage,
    BaseMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langchain_core.tools import BaseTool, StructuredTool  # noqa: E402
from langgraph.graph.message import REMOVE_ALL_MESSAGES  # noqa: E402
from langgraph.prebuilt.tool_node import ToolCallRequest  # noqa: E402
from langgraph.runtime import Runtime  # noqa: E402
from langgraph.types import Command  # noqa: E402

from ctxlife.api import resolve_settings  # noqa: E402
from ctxlife.config import Settings  # noqa: E402
from ctxlife.contexts import TaskContext, ToolCallContext  # noqa: E402
from ctxlife.host import Host  # noqa: E402
from ctxlife.host_report import Report  # noqa: E402
from ctxlife.messages import is_summary, is_system  # noqa: E402
from ctxlife.sessions.ids import session_key  # noqa: E402
from ctxlife.strategy import ToolSpec  # noqa: E402

__all__ = ["CtxlifeMiddleware", "from_openai_messages", "to_openai_messages"]

# Set while ctxlife itself calls the model (a summarizer), for code that needs to tell.
_own_call: contextvars.ContextVar[bool] = contextvars.ContextVar("ctxlife_langchain_own_call", default=False)


def to_openai_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages as the OpenAI-format dicts ctxlife manages (one dict per message)."""
    return [_to_dict(m) for m in messages]


def from_openai_messages(messages: Sequence[dict[str, Any]]) -> list[AnyMessage]:
    """OpenAI-format dicts back to LangChain messages."""
    return [_from_dict(m) for m in messages]


def _to_dict(message: BaseMessage) -> dict[str, Any]:
    converted = convert_to_openai_messages(message)
    return converted if isinstance(converted, dict) else {"role": "user", "content": str(converted)}


def _from_dict(message: dict[str, Any]) -> AnyMessage:
    converted: AnyMessage = convert_to_messages([message])[0]  # type: ignore[assignment]  # always a concrete message class
    return converted


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p if isinstance(p, str) else str(p.get("text", "")) for p in content if isinstance(p, (str, dict))
        )
    return "" if content is None else str(content)


def _thread_id() -> str | None:
    """The LangGraph ``thread_id`` of the running call, if any (what the framework reports as the session)."""
    try:
        from langgraph.config import get_config  # lazy: langgraph is optional (LangChain runs without it)

        configurable = get_config().get("configurable") or {}
    except Exception:  # noqa: BLE001 - outside a graph run there is no config
        return None
    value = configurable.get("thread_id")
    # Any string (slack:C01:..., alice@example.com) is a session: mapped to its store key reversibly,
    # or refused here, at the call (an empty or very long id), never silently unrecorded.
    return session_key(str(value)) if value is not None else None


def _model_facts(model: Any) -> tuple[str | None, int | None]:
    """The model name and input window a LangChain chat model reports (``profile["max_input_tokens"]``)."""
    name = None
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            name = value
            break
    window = None
    profile = getattr(model, "profile", None)
    if isinstance(profile, Mapping):
        limit = profile.get("max_input_tokens")
        window = limit if isinstance(limit, int) and limit > 0 else None
    return name, window


def _completion(model: Any) -> Callable[[list[dict[str, Any]], int], str]:
    """``complete(messages, max_tokens) -> str`` over the agent's own chat model (for ``llm_summary``)."""

    def complete(messages: list[dict[str, Any]], max_tokens: int) -> str:
        token = _own_call.set(True)
        try:
            reply = model.invoke(from_openai_messages(messages))
        finally:
            _own_call.reset(token)
        return _text(getattr(reply, "content", reply))

    return complete


def _langchain_tool(spec: ToolSpec) -> BaseTool:
    """A LangChain tool that calls a ctxlife :class:`~ctxlife.strategy.ToolSpec` (all arguments strings)."""
    schema = tool_arguments_model(spec)
    function = spec.function

    def run(**kwargs: Any) -> str:
        return function(**kwargs)

    return StructuredTool.from_function(func=run, name=spec.name, description=spec.description, args_schema=schema)


@dataclass
class _Prepared:
    """A model request after node 2, and how to write the managed conversation back into the state."""

    request: ModelRequest[Any]
    rewrite: list[AnyMessage] | None  # the managed state messages, when they differ from the state's
    report: Report

    def finish(self, response: Any) -> Any:
        if self.rewrite is None:
            return response
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        if not isinstance(response, ModelResponse):
            return response  # an inner middleware returned something else: leave the state alone
        update = {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *self.rewrite, *response.result]}
        return ExtendedModelResponse(model_response=response, command=Command(update=update))


class CtxlifeMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Manage a LangChain v1 agent's context with a ctxlife config: ``create_agent(..., middleware=[...])``.

    Args:
        config: a TOML path, a :class:`~ctxlife.config.Settings` or None (``./ctxlife.toml``,
            then ``[tool.ctxlife]`` in ``./pyproject.toml``, then the built-in defaults).
        context_window: the model's window in tokens; beats the config's, which beats the
            model's ``profile["max_input_tokens"]``.
        session_id: the session; beats the config's, which beats the call's LangGraph ``thread_id``.
        plugins: extra objects with ``@ctxlife.hookimpl`` methods, after the configured strategies.
        model: the model name for the tokenizer; beats the config's and the chat model's own.
        summary_model: what ``llm_summary`` summarizes with instead of the agent's chat model
            (a chat model, or a function ``(messages, max_tokens) -> str``, sync or async).

    ``middleware.host`` is the :class:`~ctxlife.host.Host` (listeners, store, node methods).
    """

    def __init__(
        self,
        config: str | os.PathLike[str] | Settings | None = None,
        *,
        context_window: int | None = None,
        session_id: str | None = None,
        plugins: Sequence[object] = (),
        model: str | None = None,
        summary_model: object | None = None,
    ) -> None:
        super().__init__()
        key = session_key(session_id) if session_id is not None else None
        if summary_model is not None and callable(getattr(summary_model, "invoke", None)):
            summary_model = _completion(summary_model)  # a chat model: its calls are never managed again
        self.host = Host(
            resolve_settings(config),
            context_window=context_window,
            model=model,
            session_id=key,
            plugins=plugins,
            summary_model=summary_model,
        )
        self.tools = [_langchain_tool(spec) for spec in self.host.provided_tools()]
        # The state's message objects live from call to call: convert each one once. Two generations,
        # rotated every 64 calls, so memory follows the live conversation.
        self._converted: dict[int, tuple[BaseMessage, dict[str, Any]]] = {}
        self._converted_old: dict[int, tuple[BaseMessage, dict[str, Any]]] = {}
        self._calls = 0
        # The system prompt of each running agent's latest model call (as the model got it), until the
        # run ends: node 6 gets the same list shape as node 2 (see after_agent).
        self._prompts: dict[str | None, dict[str, Any]] = {}

    def _as_dicts(self, messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
        """The messages as OpenAI-format dicts; the same message object gives the same dict object."""
        out = []
        for message in messages:
            key = id(message)
            found = self._converted.get(key) or self._converted_old.get(key)
            if found is None or found[0] is not message:
                found = (message, _to_dict(message))
            self._converted[key] = found
            out.append(found[1])
        return out

    def _rotate(self) -> None:
        self._calls += 1
        if self._calls % 64 == 0:
            self._converted_old, self._converted = self._converted, {}

    @property
    def name(self) -> str:
        return "CtxlifeMiddleware"

    def session(self) -> str | None:
        """This call's session: explicit argument > environment > config > the LangGraph thread id."""
        return self.host.session_id or _thread_id()

    # -- agent start and end: a run, nodes 5 and 6 -------------------------------------

    def before_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        session = self.session()
        self.host.start_run(session)
        messages = state.get("messages") or []
        ask = next((m for m in reversed(messages) if getattr(m, "type", None) == "human"), None)
        ctx = TaskContext(description=_text(ask.content) if ask is not None else "", context_text="")
        self.host.task_start(ctx, session_id=session)
        return None

    async def abefore_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.before_agent, state, runtime)  # to_thread carries the run's context

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        messages = list(state.get("messages") or [])
        last = messages[-1] if messages else None
        output = _text(last.content) if isinstance(last, AIMessage) else None
        session = self.session()
        prompt = self._prompts.pop(session, None)
        wanted = self.host.implements("ctxlife_task_end")  # converting a long history costs: only when used
        # [system prompt, *state messages], as at every model call: the recorder then finds this list
        # continuing the one the last call handed back (after a compaction too) and records the reply
        # alone, instead of diffing it against an older list.
        head = [dict(prompt)] if prompt is not None else []
        ctx = TaskContext(
            output=output, messages=[*head, *(dict(m) for m in self._as_dicts(messages))] if wanted else []
        )
        self.host.task_end(ctx, session_id=session)
        if isinstance(last, AIMessage) and ctx.output is not None and ctx.output != output and last.id is not None:
            return {"messages": [last.model_copy(update={"content": ctx.output})]}  # same id: replaced in place
        return None

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.after_agent, state, runtime)

    # -- node 2 (and the bootstrap): what the model receives ----------------------------

    def prepare(self, request: ModelRequest[Any]) -> _Prepared:
        """Run nodes 1 and 2 on a model request; the result says what to send and what to write back."""
        system = request.system_message
        originals: list[BaseMessage] = [*([system] if system is not None else []), *request.messages]
        self._rotate()
        dicts = self._as_dicts(originals)
        by_identity = {id(d): m for d, m in zip(dicts, originals, strict=True)}
        live = list(dicts)
        model_name, window = _model_facts(request.model)
        session = self.session()
        report = self.host.before_llm_call(
            live,
            model=model_name,
            context_window=window,
            session_id=session,
            complete=_completion(request.model),
        )
        # The first system message is the system prompt when the agent has one, or when ctxlife
        # created it for the bootstrap text; a system message from the state, or a summary a
        # strategy inserted, belongs to the conversation (the state).
        head_is_prompt = (
            bool(live)
            and is_system(live[0])
            and (system is not None or (id(live[0]) not in by_identity and not is_summary(live[0])))
        )
        new_system = live[0] if head_is_prompt else None
        if new_system is not None:
            self._prompts[session] = new_system
        else:
            self._prompts.pop(session, None)
        if len(live) == len(dicts) and all(a is b for a, b in zip(live, dicts, strict=True)):
            return _Prepared(request, None, report)
        rest = live[1:] if head_is_prompt else live
        messages: list[AnyMessage] = [by_identity.get(id(d)) or _from_dict(d) for d in rest]  # type: ignore[misc]
        if new_system is None:
            system_message = None
        elif new_system is dicts[0] and system is not None:
            system_message = system
        else:
            system_message = SystemMessage(content=_text(new_system.get("content")))
        unchanged = len(messages) == len(request.messages) and all(
            a is b for a, b in zip(messages, request.messages, strict=True)
        )
        new_request = request.override(system_message=system_message, messages=messages)
        return _Prepared(new_request, None if unchanged else messages, report)

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> Any:
        prepared = self.prepare(request)
        return prepared.finish(handler(prepared.request))

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> Any:
        prepared = await asyncio.to_thread(self.prepare, request)
        return prepared.finish(await handler(prepared.request))

    # -- nodes 3 and 4: around each tool call -------------------------------------------

    def _before_tool(self, request: ToolCallRequest) -> tuple[ToolCallRequest, ToolMessage | None, str | None]:
        call = request.tool_call
        args = call.get("args") or {}
        session = self.session()
        ctx = ToolCallContext(
            tool_name=str(call.get("name") or ""), tool_input=dict(args) if isinstance(args, dict) else {}
        )
        self.host.before_tool_call(ctx, session_id=session)
        if ctx.result is not None:  # answered without running the tool; it still passes node 4
            answer = ToolCallContext(
                tool_name=ctx.tool_name,
                tool_input=ctx.tool_input,
                result=ctx.result,
                raw_result=ctx.result,
                skipped_by=ctx.skipped_by,
            )
            self.host.after_tool_call(answer, session_id=session)
            return (
                request,
                ToolMessage(content=answer.result or "", tool_call_id=call.get("id") or "", name=ctx.tool_name),
                session,
            )
        if ctx.tool_input != args:
            request = request.override(tool_call={**call, "args": ctx.tool_input})
        return request, None, session

    def _after_tool(self, request: ToolCallRequest, result: Any, session: str | None) -> Any:
        if not isinstance(result, ToolMessage):
            return result  # a Command: the tool steers the graph itself
        text = _text(result.content)
        args = request.tool_call.get("args") or {}
        raw = result.artifact if result.artifact is not None else result.content
        ctx = ToolCallContext(
            tool_name=str(request.tool_call.get("name") or ""),
            tool_input=dict(args) if isinstance(args, dict) else {},
            result=text,
            raw_result=raw,
        )
        self.host.after_tool_call(ctx, session_id=session)
        if ctx.result is not None and ctx.result != text:
            return result.model_copy(update={"content": ctx.result})
        return result

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> Any:
        request, answered, session = self._before_tool(request)
        if answered is not None:
            return answered
        return self._after_tool(request, handler(request), session)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
    ) -> Any:
        request, answered, session = await asyncio.to_thread(self._before_tool, request)
        if answered is not None:
            return answered
        result = await handler(request)
        return await asyncio.to_thread(self._after_tool, request, result, session)
