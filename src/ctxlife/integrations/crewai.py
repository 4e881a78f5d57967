"""The CrewAI adapter: the only module of ctxlife that knows CrewAI.

``wrap(crew)`` binds a :class:`~ctxlife.host.Host` to one crew; each kickoff runs inside
``crewai.hooks.dispatch.scoped_hooks()`` with ctxlife's handlers registered for that scope only. Which
CrewAI point reaches which node: docs/concepts.md, "The six lifecycle nodes"; the kickoffs managed and
ctxlife's own model calls kept quiet: docs/integrations.md, "CrewAI"; one view per agent and task
(``view_id(role, "task0")``; delegated work: the role alone): docs/sessions.md, "Many agents, one session".
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import inspect
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from ctxlife.api import resolve_settings
from ctxlife.config import Settings
from ctxlife.contexts import TaskContext, ToolCallContext
from ctxlife.errors import CtxlifeError
from ctxlife.events import emit
from ctxlife.host import Host
from ctxlife.integrations import require, tool_arguments_model
from ctxlife.integrations.crewai_calls import in_own_model_call, own_model_call
from ctxlife.sessions.ids import view_id
from ctxlife.strategy import ToolSpec

ADAPTER_ATTR = "_ctxlife_adapter"
_KICKOFF_METHODS = (
    "kickoff",
    "kickoff_async",
    "akickoff",
    "kickoff_for_each",
    "kickoff_for_each_async",
    "akickoff_for_each",
)

# The adapter whose scope is active in this context (None outside any wrapped kickoff).
_active: contextvars.ContextVar[CrewAdapter | None] = contextvars.ContextVar("ctxlife_active_adapter", default=None)


CrewT = TypeVar("CrewT")
_T = TypeVar("_T")


def wrap(
    crew: CrewT,
    config: str | os.PathLike[str] | Settings | None = None,
    *,
    session_id: str | None = None,
    plugins: Sequence[object] = (),
    summary_model: object | None = None,
) -> CrewT:
    """Manage a CrewAI crew's context at all six lifecycle nodes; returns the same crew (same type).

    ``config`` is a path to a TOML file (or a pyproject.toml), a
    :class:`~ctxlife.config.Settings`, or None (``./ctxlife.toml``, then
    ``[tool.ctxlife]`` in ``./pyproject.toml``, then built-in defaults).
    ``session_id`` beats the config's; the window and model come from the config when it
    sets them, else from each agent's LLM. ``plugins`` are extra objects with
    ``@ctxlife.hookimpl`` methods, called after the configured strategies. ``summary_model`` is
    the model ``llm_summary`` summarizes with instead of each agent's LLM (a function
    ``(messages, max_tokens) -> str``, sync or async, or a CrewAI LLM). Wrapping an
    already wrapped crew is a no-op; :func:`unwrap` restores it. Needs
    ``pip install 'ctxlife[crewai]'``.
    """
    require("crewai", "crewai", "ctxlife.wrap()")
    if _adapter_of(crew) is not None:
        return crew
    if not callable(getattr(crew, "kickoff", None)) or not hasattr(crew, "__dict__"):
        raise CtxlifeError(f"ctxlife.wrap() needs a crewai.Crew, got {type(crew).__name__}; wrap the Crew object")
    settings = resolve_settings(config)
    if summary_model is not None and not callable(summary_model) and callable(getattr(summary_model, "call", None)):
        summary_model = _completion(summary_model)  # a CrewAI LLM: its calls are never managed again
    host = Host(settings, session_id=session_id, plugins=plugins, summary_model=summary_model)
    adapter = CrewAdapter(crew, host)
    adapter.install()
    return crew


def unwrap(crew: CrewT) -> CrewT:
    """Undo :func:`wrap`: the crew's kickoff methods are its own again. Returns the crew."""
    adapter = _adapter_of(crew)
    if adapter is not None:
        adapter.uninstall()
    return crew


def host_of(crew: object) -> Host | None:
    """The :class:`~ctxlife.host.Host` managing a wrapped crew, or None (``ctxlife.host_of``).

    Use it to reach the nodes and services of a wrapped crew: ``host.listeners`` for
    reports, ``host.store`` for the session store, ``host.provided_tools()``.
    """
    adapter = _adapter_of(crew)
    return adapter.host if adapter is not None else None


def _adapter_of(crew: Any) -> CrewAdapter | None:
    return getattr(crew, "__dict__", {}).get(ADAPTER_ATTR)


class CrewAdapter:
    """Binds one crew to one host; translates CrewAI contexts to ctxlife contexts."""

    def __init__(self, crew: Any, host: Host) -> None:
        # Not "from crewai.hooks import dispatch": the package re-exports a function by that name.
        dispatch = importlib.import_module("crewai.hooks.dispatch")
        self._dispatch = dispatch
        self.crew = crew
        self.host = host
        self._pending_results: dict[int, tuple[str, str | None]] = {}
        self._last_reply: dict[str, dict[str, Any]] = {}  # per view: the latest reply recorded
        self._lock = threading.Lock()
        self._points = {
            dispatch.InterceptionPoint.EXECUTION_START: self._on_execution_start,
            dispatch.InterceptionPoint.PRE_STEP: self._on_pre_step,
            dispatch.InterceptionPoint.PRE_MODEL_CALL: self._on_pre_model_call,
            dispatch.InterceptionPoint.POST_MODEL_CALL: self._on_post_model_call,
            dispatch.InterceptionPoint.PRE_TOOL_CALL: self._on_pre_tool_call,
            dispatch.InterceptionPoint.POST_TOOL_CALL: self._on_post_tool_call,
            dispatch.InterceptionPoint.POST_STEP: self._on_post_step,
        }

    # -- installation -------------------------------------------------------------------

    def install(self) -> None:
        for agent in getattr(self.crew, "agents", None) or []:
            self.host.bootstrap_text(
                agent_role=getattr(agent, "role", None),
                goal=getattr(agent, "goal", None),
                backstory=getattr(agent, "backstory", None),
            )
        self._added_tools: list[tuple[Any, Any]] = []
        specs = self.host.provided_tools()
        if specs:
            tools = {spec.name: _crewai_tool(spec) for spec in specs}
            # CrewAI runs a task with ``task.tools or agent.tools``, and a task copies its agent's
            # tools when it is built: add ours to both, or tasks built before wrap() never see them.
            holders = [
                *(getattr(self.crew, "agents", None) or []),
                *(t for t in getattr(self.crew, "tasks", None) or [] if t.tools),
            ]
            for holder in holders:
                existing = {getattr(t, "name", None) for t in (holder.tools or [])}
                for name, crew_tool in tools.items():
                    if name not in existing:
                        holder.tools = [*(holder.tools or []), crew_tool]
                        self._added_tools.append((holder, crew_tool))
        for name in _KICKOFF_METHODS:
            original = getattr(type(self.crew), name, None)
            if original is not None:
                object.__setattr__(self.crew, name, self._scoped(name, original))
        object.__setattr__(self.crew, ADAPTER_ATTR, self)

    def uninstall(self) -> None:
        for name in (*_KICKOFF_METHODS, ADAPTER_ATTR):
            self.crew.__dict__.pop(name, None)
        for holder, crew_tool in self._added_tools:
            holder.tools = [t for t in (holder.tools or []) if t is not crew_tool]
        self.host.close()

    def _scoped(self, name: str, original: Any) -> Any:
        """``original`` bound to the crew, run inside this adapter's hook scope."""
        crew = self.crew

        def scope() -> Any:  # a kickoff inside this crew's own run is already in its scope
            return contextlib.nullcontext() if _active.get() is self else self._scope()

        if inspect.iscoroutinefunction(original):

            @functools.wraps(original)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with scope():
                    return await original(crew, *args, **kwargs)

            return run_async

        @functools.wraps(original)
        def run(*args: Any, **kwargs: Any) -> Any:
            with scope():
                return original(crew, *args, **kwargs)

        return run

    @contextlib.contextmanager
    def _scope(self) -> Iterator[None]:
        with self._dispatch.scoped_hooks():
            for point, handler in self._points.items():
                self._dispatch.register_scoped(point, handler)
            token = _active.set(self)
            try:
                yield
            finally:
                _active.reset(token)

    # -- helpers ------------------------------------------------------------------------

    @staticmethod
    def _llm_facts(llm: Any) -> tuple[str | None, int | None]:
        model = getattr(llm, "model", None) if llm is not None and not isinstance(llm, str) else llm
        window = None
        getter: Any = getattr(llm, "get_context_window_size", None)
        if callable(getter):
            try:
                reported: Any = getter()
                window = int(reported)
            except Exception:  # noqa: BLE001 - an LLM without a window falls back to the config
                window = None
        return (model if isinstance(model, str) else None), window

    def _task_facts(self, task: Any) -> dict[str, Any]:
        if task is None:
            return {"task_name": None, "task_index": None}
        name = getattr(task, "name", None) or getattr(task, "description", None)
        index = None
        tasks = list(getattr(self.crew, "tasks", None) or [])
        for i, candidate in enumerate(tasks):
            if candidate is task:
                index = i
                break
        if index is None:  # a copy of the crew (kickoff_for_each): match by name/description
            for i, candidate in enumerate(tasks):
                if (getattr(candidate, "name", None) or getattr(candidate, "description", None)) == name:
                    index = i
                    break
        return {"task_name": name, "task_index": index}

    @staticmethod
    def _complete_with(llm: Any) -> Any:
        if llm is None or isinstance(llm, str) or not callable(getattr(llm, "call", None)):
            return None
        return _completion(llm)

    @staticmethod
    def _agent_role(agent: Any) -> str | None:
        role = getattr(agent, "role", None)
        return role if isinstance(role, str) else None

    @staticmethod
    def _view(agent_role: str | None, facts: dict[str, Any]) -> str:
        """The session view of an agent working on a task: role + the task's position in the crew.

        A task that is not one of the crew's (work a manager delegates) has no position: the
        agent's role alone names the view, so an agent's delegated work forms one lane.
        """
        index = facts.get("task_index")
        return view_id(agent_role, f"task{index}" if index is not None else None)

    # -- CrewAI handlers (CrewAI swallows exceptions here, so each logs its own) --------

    def _guard(self, point: str, fn: Callable[..., _T], *args: Any) -> _T | None:
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - CrewAI would swallow it silently
            emit("error", "ctxlife.adapter_failed", point=point, error=f"{type(exc).__name__}: {exc}", exc_info=True)
            return None

    def _on_execution_start(self, hctx: Any) -> None:
        self._guard("execution_start", lambda: self.host.start_run(new_lists=True))

    def _on_pre_model_call(self, hctx: Any) -> None:
        if in_own_model_call() or getattr(hctx, "executor", None) is None:
            return None  # a direct LLM call (ctxlife's own summarizer, CrewAI internals): not an agent step
        return self._guard("pre_model_call", self._pre_model_call, hctx)

    def _pre_model_call(self, hctx: Any) -> None:
        model, window = self._llm_facts(hctx.llm)
        agent = hctx.agent
        role = self._agent_role(agent)
        facts = self._task_facts(hctx.task)
        self.host.before_llm_call(
            hctx.messages,
            model=model,
            context_window=window,
            agent_role=role,
            goal=getattr(agent, "goal", None),
            backstory=getattr(agent, "backstory", None),
            complete=self._complete_with(hctx.llm),
            # use_system_prompt=False: CrewAI sends no system message, so bootstrap text opens the first user turn.
            system_prompt=getattr(agent, "use_system_prompt", True) is not False,
            view=self._view(role, facts),
            **facts,
        )

    def _on_post_model_call(self, hctx: Any) -> None:
        if in_own_model_call() or getattr(hctx, "executor", None) is None:
            return None
        return self._guard("post_model_call", self._post_model_call, hctx)

    def _post_model_call(self, hctx: Any) -> None:
        """Record the model's reply with the list it answered, in the agent's view.

        Every reply is recorded when it is made, so the last reply of an agent that never reaches
        a task end (work a manager delegates, a process that stops) is in the session too.
        """
        response = getattr(hctx, "response", None)
        said = _said(response) if isinstance(response, str) and response else None
        if said is None or self.host.store is None:
            return None
        role = self._agent_role(hctx.agent)
        view = self._view(role, self._task_facts(hctx.task))
        reply = {"role": "assistant", "content": said}
        self.host.record_reply([*hctx.messages, reply], view=view)
        with self._lock:
            self._last_reply[view] = reply
        return None

    def _tool_context(self, hctx: Any) -> ToolCallContext:
        if not isinstance(hctx.tool_input, dict):
            hctx.tool_input = {}
        role = self._agent_role(hctx.agent)
        facts = self._task_facts(hctx.task)
        return ToolCallContext(
            agent_role=role,
            view=self._view(role, facts),
            # The tool's own name (CrewAI reports an ASCII-sanitized one: every CJK name becomes "").
            tool_name=getattr(getattr(hctx, "tool", None), "name", None) or hctx.tool_name,
            tool_input=hctx.tool_input,  # the same dict: edits reach the tool
            result=getattr(hctx, "tool_result", None),
            raw_result=getattr(hctx, "raw_tool_result", None),
            **facts,
        )

    def _model_of(self, agent: Any) -> dict[str, Any]:
        """The model name and context window of an agent's LLM, as keyword arguments for the host."""
        model, window = self._llm_facts(getattr(agent, "llm", None))
        return {"model": model, "context_window": window}

    def _on_pre_tool_call(self, hctx: Any) -> bool | None:
        return self._guard("pre_tool_call", self._pre_tool_call, hctx)

    def _pre_tool_call(self, hctx: Any) -> bool | None:
        ctx = self._tool_context(hctx)
        ctx.result = None
        self.host.before_tool_call(ctx, **self._model_of(hctx.agent))
        if ctx.result is None:
            return None
        # Answered without running the tool: block it and hand the answer to POST_TOOL_CALL,
        # which CrewAI runs with the same input dict.
        with self._lock:
            self._pending_results[id(hctx.tool_input)] = (ctx.result, ctx.skipped_by)
        return False

    def _on_post_tool_call(self, hctx: Any) -> str | None:
        return self._guard("post_tool_call", self._post_tool_call, hctx)

    def _post_tool_call(self, hctx: Any) -> str | None:
        with self._lock:
            pending = self._pending_results.pop(id(hctx.tool_input), None)
        ctx = self._tool_context(hctx)
        original = ctx.result
        if pending is not None:
            ctx.result, ctx.skipped_by = pending
        self.host.after_tool_call(ctx, **self._model_of(hctx.agent))
        return ctx.result if ctx.result != original else None

    def _on_pre_step(self, hctx: Any) -> None:
        if getattr(hctx, "kind", None) != "task":
            return None
        return self._guard("pre_step", self._pre_step, hctx)

    def _task_context(self, hctx: Any, **fields: Any) -> TaskContext:
        """The task node's context of a step: the task, its agent's view and model, and ``fields``."""
        task = hctx.task
        facts = self._task_facts(task)
        return TaskContext(
            agent_role=hctx.agent_role,
            view=self._view(self._role_of_step(hctx), facts),
            description=getattr(task, "description", "") or "",
            expected_output=getattr(task, "expected_output", None),
            complete=self._complete_with(getattr(hctx.agent, "llm", None)),
            **facts,
            **fields,
        )

    def _pre_step(self, hctx: Any) -> None:
        payload = hctx.payload
        text = payload if isinstance(payload, str) else ("" if payload is None else str(payload))
        ctx = self._task_context(hctx, context_text=text)
        original = ctx.context_text
        self.host.task_start(ctx, **self._model_of(hctx.agent))
        if ctx.context_text != original:
            hctx.payload = ctx.context_text

    def _role_of_step(self, hctx: Any) -> str | None:
        """The role of the agent running a step, as the model-call hooks see it (the same view)."""
        role = self._agent_role(getattr(hctx, "agent", None))
        if role is None and isinstance(getattr(hctx, "agent_role", None), str):
            role = hctx.agent_role
        return role

    def _on_post_step(self, hctx: Any) -> None:
        if getattr(hctx, "kind", None) != "task":
            return None
        return self._guard("post_step", self._post_step, hctx)

    def _post_step(self, hctx: Any) -> None:
        output = hctx.payload
        raw = getattr(output, "raw", None)
        messages = getattr(output, "messages", None) or getattr(hctx.agent, "last_messages", None) or []
        ctx = self._task_context(
            hctx,
            output=raw if isinstance(raw, str) else (None if raw is None else str(raw)),
            messages=[dict(m) for m in messages if isinstance(m, dict)],
        )
        with self._lock:
            reply = self._last_reply.pop(ctx.view, None)
        if ctx.output and (not ctx.messages or ctx.messages[-1].get("role") != "assistant"):
            # CrewAI's final message list stops before the final answer; the answer is part of the
            # conversation (a restored session must show it): the model's own reply that gave it
            # (recorded already), else the output text.
            said = reply is not None and ctx.output in str(reply.get("content"))
            final = dict(reply) if reply is not None and said else {"role": "assistant", "content": ctx.output}
            ctx.messages.append(final)
        original = ctx.output
        self.host.task_end(ctx, **self._model_of(hctx.agent))
        if ctx.output != original and output is not None:
            output.raw = ctx.output


def _said(text: str) -> str | None:
    """What a reply says, as the conversation keeps it: a ReAct final answer's text (what the task
    end records as the final answer), or the whole reply (native tool calling, plain text); None for
    a ReAct action (CrewAI keeps it with the tool's observation: recorded at the next model call)."""
    if "Action" not in text and "Final Answer" not in text:
        return text
    # lazy: crewai is an optional extra
    from crewai.agents.parser import AgentAction, AgentFinish, OutputParserError, parse

    try:
        parsed = parse(text)
    except (OutputParserError, ValueError):
        return text
    if isinstance(parsed, AgentAction):
        return None
    if isinstance(parsed, AgentFinish) and isinstance(parsed.output, str):
        return parsed.output
    return text


def _crewai_tool(spec: ToolSpec) -> Any:
    """A CrewAI tool that calls a ctxlife :class:`~ctxlife.strategy.ToolSpec`."""
    from crewai.tools import BaseTool  # lazy: crewai is an optional extra

    schema = tool_arguments_model(spec)
    function = spec.function

    class _SpecTool(BaseTool):
        def _run(self, **kwargs: Any) -> str:
            return function(**kwargs)

    return _SpecTool(name=spec.name, description=spec.description, args_schema=schema)


def completion_for_model(model: str, *, timeout: float | None = None, **llm_options: Any) -> Any:
    """A ``complete(messages, max_tokens) -> str`` callable backed by ``crewai.LLM(model=...)``.

    ``model`` is any name CrewAI's ``LLM`` accepts (``"gpt-4o-mini"``,
    ``"openai/gpt-4o"``, ``"anthropic/claude-..."``); ``llm_options`` go to
    ``crewai.LLM`` as they are (``base_url``, ``api_key``, ...). Calls made through it
    are never managed by ctxlife again.
    """
    require("crewai", "crewai", "completion_for_model()")
    from crewai import LLM  # lazy: crewai is an optional extra

    options = dict(llm_options)
    if timeout is not None:
        options.setdefault("timeout", timeout)
    return _completion(LLM(model=model, **options))


def _completion(llm: Any) -> Any:
    """``complete(messages, max_tokens) -> str`` over a CrewAI LLM; ctxlife never manages these calls."""

    def complete(messages: list[dict[str, Any]], max_tokens: int) -> str:
        with own_model_call():
            return str(llm.call(messages))

    return complete
