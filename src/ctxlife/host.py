"""The lifecycle host: one plugin manager per wrapped crew (or manage() host).

The host owns dispatch. For each node it calls the active strategies in config
order, then the extra plugins, one at a time, so that a strategy that raises or
leaves an invalid message list is rolled back alone while the others still run.
Every dispatch emits one ``ctxlife.node`` event (tokens before/after, who acted,
time taken); every failure an ``ctxlife.strategy_failed`` or
``ctxlife.invalid_sequence`` error event.
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pluggy

from ctxlife import hookspecs
from ctxlife.config import Settings
from ctxlife.contexts import Action, BootstrapContext, Complete, HookContext, LLMCallContext, TaskContext, ToolCallContext
from ctxlife.errors import CtxlifeError, PluginError
from ctxlife.events import emit
from ctxlife.messages import check_shape, is_system, last_user_index, same_messages, validate
from ctxlife.plugins import registry
from ctxlife.strategy import Strategy, ToolSpec, create_strategy
from ctxlife.tokens import TokenCounter


@dataclass
class StrategyFailure:
    """A strategy whose edit was rolled back."""

    strategy: str
    node: str
    error: str


@dataclass
class Report:
    """What one dispatch did. :func:`ctxlife.manage` returns the one for its call."""

    node: str
    tokens_before: int = 0
    tokens_after: int = 0
    context_window: int = 0
    budget: int = 0
    actions: list[Action] = field(default_factory=list)
    failures: list[StrategyFailure] = field(default_factory=list)
    duration_ms: float = 0.0
    session_id: str | None = None
    agent_role: str | None = None
    task_name: str | None = None

    @property
    def acted(self) -> list[str]:
        """Names of the strategies that recorded an action (not a "skipped" note), in order, once each."""
        return list(dict.fromkeys(a.strategy for a in self.actions if a.what != "skipped"))

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after


class Host:
    """Dispatches the six lifecycle nodes to the strategies a config selects.

    Args:
        settings: the resolved settings (see :func:`ctxlife.load_settings`).
        context_window: the model's window in tokens; the config's
            ``context_window`` wins over it, and adapters pass the framework's.
        model: the model name, to pick the tokenizer; the config's ``model`` is
            used when the framework does not say.
        session_id: the session; defaults to the config's ``session_id``.
        plugins: extra objects with ``@ctxlife.hookimpl`` methods, called after
            the configured strategies.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        context_window: int | None = None,
        model: str | None = None,
        session_id: str | None = None,
        plugins: Sequence[object] = (),
    ) -> None:
        self.settings = settings
        self.context_window = settings.context_window or context_window
        self.model = model or settings.model
        self.session_id = session_id if session_id is not None else settings.session_id
        if self.session_id is not None:
            from ctxlife.sessions.ids import validate_session_id

            validate_session_id(self.session_id)
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        reg = registry()
        shared = settings.shared()
        self.strategies: list[Strategy[Any]] = [
            create_strategy(reg.get(name), settings.options_for(name), shared) for name in settings.strategies
        ]
        self._plugin_names: list[str] = []
        for strategy in self.strategies:
            self._register(strategy, strategy.name)
        for index, plugin in enumerate(plugins):
            label = getattr(plugin, "name", None) or type(plugin).__name__
            self._register(plugin, f"{label}#{index}" if label in self._plugin_names else str(label))
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"{exc}; hook names are {', '.join(hookspecs.HOOK_NAMES)}") from None
        # (name, hookimpl) per hook, computed once: implementations marked tryfirst, then the
        # rest, then those marked trylast; within each group, config order. A strategy may
        # implement one hook twice (pluggy's specname), e.g. a tryfirst and a trylast part.
        self._impls: dict[str, list[tuple[str, Any]]] = {}
        position = {name: i for i, name in enumerate(self._plugin_names)}
        for hook in hookspecs.HOOK_NAMES:
            impls = [(self._pm.get_name(impl.plugin) or "", impl) for impl in getattr(self._pm.hook, hook).get_hookimpls()]
            for name, impl in impls:
                if impl.hookwrapper or getattr(impl, "wrapper", False):
                    raise PluginError(
                        f"plugin {name!r} implements {hook} as a hook wrapper; ctxlife calls each strategy "
                        "on its own (to roll back its edit alone), so use a plain @ctxlife.hookimpl, with "
                        "tryfirst=True or trylast=True to run before or after the others"
                    )
            self._impls[hook] = sorted(impls, key=lambda pair: (_order_group(pair[1]), position[pair[0]]))
        self.store = next((s for s in (strategy.session_store() for strategy in self.strategies) if s is not None), None)
        self._counters: dict[str | None, TokenCounter] = {}
        self._state: dict[tuple[str, str | None], dict[str, Any]] = {}
        self._bootstrap: dict[tuple[str | None, str | None], str] = {}
        self._bootstrap_actions: dict[tuple[str | None, str | None], list[Action]] = {}
        self._calls: dict[str | None, int] = {}
        self._task_started: set[tuple[str | None, str | None]] = set()
        self._lock = threading.RLock()
        self.complete: Complete | None = None
        self.listeners: list[Callable[[Report], None]] = []
        """Called with every dispatch's :class:`Report` (metrics, dashboards, the demo)."""

    def _register(self, plugin: object, name: str) -> None:
        try:
            self._pm.register(plugin, name=name)
        except (ValueError, pluggy.PluginValidationError) as exc:
            raise PluginError(f"cannot register plugin {name!r}: {exc}") from None
        self._plugin_names.append(name)

    # -- shared plumbing ----------------------------------------------------------------

    def counter(self, model: str | None = None) -> TokenCounter:
        """The token counter for a model (one per model, cached)."""
        key = model or self.model
        found = self._counters.get(key)
        if found is None:
            found = self._counters[key] = TokenCounter(key)
        return found

    def provided_tools(self) -> list[ToolSpec]:
        """The tools the active strategies offer to agents, in config order."""
        return [spec for strategy in self.strategies for spec in strategy.provided_tools()]

    def implements(self, hook: str) -> bool:
        """Whether any active strategy or plugin implements ``hook``."""
        return bool(self._impls[hook])

    def _fill(self, ctx: HookContext, node: str, *, model: str | None, context_window: int | None, session_id: str | None) -> None:
        ctx.node = node
        ctx.session_id = session_id or self.session_id
        ctx.tokens = self.counter(model)
        ctx.context_window = self.context_window or context_window or 0
        ctx.threshold = self.settings.threshold
        ctx.store = self.store
        if ctx.complete is None:
            ctx.complete = self.complete

    def _run(
        self,
        hook: str,
        ctx: HookContext,
        snapshot: Callable[[], Any],
        restore: Callable[[Any], None],
        check: Callable[[Any], str | None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> list[StrategyFailure]:
        failures: list[StrategyFailure] = []
        for name, impl in self._impls[hook]:
            saved = snapshot()
            ctx._strategy = name
            ctx.state = self._state.setdefault((name, ctx.session_id), {})
            n_actions = len(ctx.actions)
            kwargs = {"ctx": ctx}
            try:
                impl.function(*[kwargs[arg] for arg in impl.argnames])
                problem = check(saved) if check is not None else None
            except Exception as exc:  # noqa: BLE001 - isolation is the point: any failure is rolled back
                restore(saved)
                del ctx.actions[n_actions:]
                failures.append(StrategyFailure(name, ctx.node, f"{type(exc).__name__}: {exc}"))
                emit(
                    "error",
                    "ctxlife.strategy_failed",
                    strategy=name,
                    node=ctx.node,
                    error=f"{type(exc).__name__}: {exc}",
                    session_id=ctx.session_id,
                    exc_info=not isinstance(exc, CtxlifeError),
                )
                continue
            if problem is not None:
                restore(saved)
                del ctx.actions[n_actions:]
                failures.append(StrategyFailure(name, ctx.node, problem))
                emit("error", "ctxlife.invalid_sequence", strategy=name, node=ctx.node, problem=problem, session_id=ctx.session_id)
                continue
            if stop is not None and stop():
                break
        ctx._strategy = ""
        return failures

    def _emit_node(self, report: Report, ctx: HookContext) -> None:
        report.session_id, report.agent_role, report.task_name = ctx.session_id, ctx.agent_role, ctx.task_name
        for listener in self.listeners:
            try:
                listener(report)
            except Exception as exc:  # noqa: BLE001 - a broken listener must not break the agent
                emit("error", "ctxlife.listener_failed", listener=repr(listener), error=f"{type(exc).__name__}: {exc}")
        fields: dict[str, Any] = {}
        if self.settings.log_content:
            fields["content"] = _content_of(ctx)
        emit(
            "debug",
            "ctxlife.node",
            node=report.node,
            session_id=ctx.session_id,
            agent_role=ctx.agent_role,
            tokens_before=report.tokens_before,
            tokens_after=report.tokens_after,
            acted=report.acted,
            actions=[{"strategy": a.strategy, "what": a.what, **a.details} for a in report.actions],
            failed=[f.strategy for f in report.failures],
            duration_ms=round(report.duration_ms, 3),
            **fields,
        )

    # -- node 1: bootstrap --------------------------------------------------------------

    def bootstrap_text(
        self,
        *,
        agent_role: str | None = None,
        goal: str | None = None,
        backstory: str | None = None,
        session_id: str | None = None,
    ) -> str:
        """Dispatch ``ctxlife_bootstrap`` once per (agent role, session); return the text to inject."""
        session = session_id or self.session_id
        key = (agent_role, session)
        with self._lock:
            text = self._bootstrap.get(key)
            if text is not None:
                return text
            start = time.perf_counter()
            ctx = BootstrapContext(
                agent_role=agent_role,
                goal=goal,
                backstory=backstory,
                variables={
                    "agent_role": agent_role or "",
                    "session_id": session or "",
                    "date": _dt.date.today().isoformat(),
                },
            )
            self._fill(ctx, "bootstrap", model=None, context_window=None, session_id=session)
            failures = self._run(
                "ctxlife_bootstrap",
                ctx,
                snapshot=lambda: list(ctx.blocks),
                restore=lambda saved: ctx.blocks.__setitem__(slice(None), saved),
            )
            text = "\n\n".join(b.strip() for b in ctx.blocks if isinstance(b, str) and b.strip())
            self._bootstrap[key] = text
            self._bootstrap_actions[key] = list(ctx.actions)
            counter = ctx.tokens
            report = Report("bootstrap", 0, counter.count_text(text), ctx.context_window, ctx.budget, ctx.actions, failures)
            report.duration_ms = (time.perf_counter() - start) * 1000
            self._emit_node(report, ctx)
            return text

    @staticmethod
    def apply_bootstrap(messages: list[dict[str, Any]], text: str) -> bool:
        """Put ``text`` into the first system message, once. Returns True if it changed anything."""
        if not text:
            return False
        for index, message in enumerate(messages):
            if is_system(message):
                content = message.get("content")
                content = content if isinstance(content, str) else ""
                if text in content:
                    return False
                messages[index] = {**message, "content": f"{content}\n\n{text}" if content else text}
                return True
            break
        messages.insert(0, {"role": "system", "content": text})
        return True

    # -- node 2: before each model call -------------------------------------------------

    def before_llm_call(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        context_window: int | None = None,
        session_id: str | None = None,
        agent_role: str | None = None,
        goal: str | None = None,
        backstory: str | None = None,
        task_name: str | None = None,
        task_index: int | None = None,
        complete: Complete | None = None,
        first_call_of_run: bool | None = None,
    ) -> Report:
        """Run the ``before_llm_call`` pipeline on a live message list, in place."""
        start = time.perf_counter()
        with self._lock:
            session = session_id or self.session_id
            ctx = LLMCallContext(messages=messages, agent_role=agent_role, task_name=task_name, task_index=task_index, complete=complete)
            self._fill(ctx, "before_llm_call", model=model, context_window=context_window, session_id=session)
            if not ctx.context_window:
                raise CtxlifeError(
                    "no context window is known for this call; pass context_window= "
                    "(or set context_window in the config)"
                )
            index = self._calls.get(session, 0)
            self._calls[session] = index + 1
            ctx.call_index = index
            ctx.first_call_of_run = index == 0 if first_call_of_run is None else first_call_of_run
            task_key = (session, task_name)
            ctx.first_call_of_task = task_name is not None and task_key in self._task_started
            self._task_started.discard(task_key)
            counter = ctx.tokens
            counter.new_generation()
            tokens_before = counter.count_messages(messages)
            before = list(messages)  # to tell whether anything changed (then tokens_after = tokens_before)
            ctx._count_memo = (before, tokens_before)
            text = self.bootstrap_text(agent_role=agent_role, goal=goal, backstory=backstory, session_id=session)
            # What the bootstrap did shows in the report of the agent's first call.
            ctx.actions.extend(self._bootstrap_actions.pop((agent_role, session), ()))
            self.apply_bootstrap(messages, text)
            problems_before: int | None = None  # validated lazily: most calls change nothing
            live = messages

            def check(saved: list[dict[str, Any]]) -> str | None:
                nonlocal problems_before
                if ctx.messages is not live:
                    ctx.messages = live
                    return "rebound ctx.messages instead of editing it in place; use slice assignment or clear()+extend()"
                if same_messages(live, saved):
                    return None
                problems = validate(live)
                if problems:
                    if problems_before is None:  # validated only when needed: most lists are valid
                        problems_before = len(validate(saved))
                    if len(problems) > problems_before:
                        return f"left an invalid message list: {problems[0]}"
                last_user = last_user_index(saved)
                if last_user is not None and not _kept_latest_user(saved, last_user, live):
                    return "dropped the latest user message"
                problems_before = len(problems)
                return None

            def restore(saved: list[dict[str, Any]]) -> None:
                ctx.messages = live
                live[:] = saved

            failures = self._run("ctxlife_before_llm_call", ctx, snapshot=lambda: list(live), restore=restore, check=check)
            self.apply_bootstrap(messages, text)
            unchanged = same_messages(before, live)
            report = Report(
                "before_llm_call",
                tokens_before,
                tokens_before if unchanged else counter.count_messages(messages),
                ctx.context_window,
                ctx.budget,
                ctx.actions,
                failures,
                (time.perf_counter() - start) * 1000,
            )
            self._emit_node(report, ctx)
            return report

    def manage(self, messages: list[dict[str, Any]], *, context_window: int | None = None, model: str | None = None) -> Report:
        """:func:`ctxlife.manage` for this host: validate the list's shape, then run node 2."""
        check_shape(messages)
        return self.before_llm_call(messages, context_window=context_window, model=model)

    # -- nodes 3 and 4: around a tool call ----------------------------------------------

    def _tool(self, hook: str, ctx: ToolCallContext, session_id: str | None, model: str | None, context_window: int | None) -> Report:
        start = time.perf_counter()
        with self._lock:
            node = hook.removeprefix("ctxlife_")
            self._fill(ctx, node, model=model, context_window=context_window, session_id=session_id)
            counter = ctx.tokens
            before_tokens = counter.count_text(ctx.result)
            is_before = hook == "ctxlife_before_tool_call"

            def snapshot() -> tuple[dict[str, Any], str | None]:
                return dict(ctx.tool_input), ctx.result

            def restore(saved: tuple[dict[str, Any], str | None]) -> None:
                ctx.tool_input.clear()
                ctx.tool_input.update(saved[0])
                ctx.result = saved[1]

            def check(saved: tuple[dict[str, Any], str | None]) -> str | None:
                if ctx.result is not None and not isinstance(ctx.result, str):
                    return f"set ctx.result to a {type(ctx.result).__name__}; it must be a string"
                if is_before and ctx.result is not None and ctx.skipped_by is None:
                    ctx.skipped_by = ctx._strategy
                return None

            failures = self._run(
                hook,
                ctx,
                snapshot,
                restore,
                check=check,
                stop=(lambda: ctx.result is not None) if is_before else None,
            )
            report = Report(node, before_tokens, counter.count_text(ctx.result), ctx.context_window, ctx.budget, ctx.actions, failures)
            report.duration_ms = (time.perf_counter() - start) * 1000
            self._emit_node(report, ctx)
            return report

    def before_tool_call(
        self, ctx: ToolCallContext, *, session_id: str | None = None, model: str | None = None, context_window: int | None = None
    ) -> Report:
        """Node 3. After it, ``ctx.result`` is a string if a strategy answered the call itself."""
        return self._tool("ctxlife_before_tool_call", ctx, session_id, model, context_window)

    def after_tool_call(
        self, ctx: ToolCallContext, *, session_id: str | None = None, model: str | None = None, context_window: int | None = None
    ) -> Report:
        """Node 4. After it, ``ctx.result`` is what the model should see."""
        return self._tool("ctxlife_after_tool_call", ctx, session_id, model, context_window)

    # -- nodes 5 and 6: task boundaries -------------------------------------------------

    def _task(self, hook: str, ctx: TaskContext, session_id: str | None, model: str | None, context_window: int | None) -> Report:
        start = time.perf_counter()
        with self._lock:
            node = hook.removeprefix("ctxlife_")
            self._fill(ctx, node, model=model, context_window=context_window, session_id=session_id)
            attr = "context_text" if hook == "ctxlife_task_start" else "output"
            counter = ctx.tokens
            before_tokens = counter.count_text(getattr(ctx, attr))
            if hook == "ctxlife_task_start":
                self._task_started.add((ctx.session_id, ctx.task_name))

            def check(saved: Any) -> str | None:
                value = getattr(ctx, attr)
                if value is not None and not isinstance(value, str):
                    return f"set ctx.{attr} to a {type(value).__name__}; it must be a string"
                return None

            failures = self._run(
                hook,
                ctx,
                snapshot=lambda: getattr(ctx, attr),
                restore=lambda saved: setattr(ctx, attr, saved),
                check=check,
            )
            report = Report(node, before_tokens, counter.count_text(getattr(ctx, attr)), ctx.context_window, ctx.budget, ctx.actions, failures)
            report.duration_ms = (time.perf_counter() - start) * 1000
            self._emit_node(report, ctx)
            return report

    def task_start(
        self, ctx: TaskContext, *, session_id: str | None = None, model: str | None = None, context_window: int | None = None
    ) -> Report:
        """Node 5. After it, ``ctx.context_text`` is what the task should receive."""
        return self._task("ctxlife_task_start", ctx, session_id, model, context_window)

    def task_end(
        self, ctx: TaskContext, *, session_id: str | None = None, model: str | None = None, context_window: int | None = None
    ) -> Report:
        """Node 6. After it, ``ctx.output`` is the task's output to pass on."""
        return self._task("ctxlife_task_end", ctx, session_id, model, context_window)

    # -- lifetime -----------------------------------------------------------------------

    def start_run(self, session_id: str | None = None) -> None:
        """Mark the start of a run (a kickoff): the next model call is its first."""
        with self._lock:
            self._calls[session_id or self.session_id] = 0

    def close(self) -> None:
        for strategy in self.strategies:
            try:
                strategy.close()
            except Exception as exc:  # noqa: BLE001 - closing must not mask the caller's outcome
                emit("error", "ctxlife.strategy_close_failed", strategy=strategy.name, error=f"{type(exc).__name__}: {exc}")


def _order_group(impl: Any) -> int:
    """Implementations marked tryfirst run first, trylast last, the rest in between."""
    return 0 if impl.tryfirst else 2 if impl.trylast else 1


def _kept_latest_user(before: list[dict[str, Any]], index: int, after: list[dict[str, Any]]) -> bool:
    """The latest user message is still there: unchanged, or edited in place (same distance from the end)."""
    target = before[index]
    if any(m is target for m in after) or target in after:
        return True
    now = last_user_index(after)
    return now is not None and len(after) - now == len(before) - index


_CONTENT_LIMIT = 2000


def _content_of(ctx: HookContext) -> str | None:
    """What ``log_content = true`` adds to a node event: the text the node was about, cut short."""
    if isinstance(ctx, LLMCallContext):
        text = ctx.messages[-1].get("content") if ctx.messages else None
    elif isinstance(ctx, ToolCallContext):
        text = ctx.result
    elif isinstance(ctx, TaskContext):
        text = ctx.output if ctx.node == "task_end" else ctx.context_text
    elif isinstance(ctx, BootstrapContext):
        text = "\n\n".join(ctx.blocks)
    else:
        text = None
    if not isinstance(text, str):
        return None
    return text if len(text) <= _CONTENT_LIMIT else text[:_CONTENT_LIMIT] + f"... [{len(text) - _CONTENT_LIMIT} more characters]"
