"""The lifecycle host: one plugin manager per wrapped crew (or manage() host).

The host owns dispatch. For each node it calls the active strategies in config
order, then the extra plugins, one at a time, so that a strategy that raises or
leaves an invalid message list is rolled back alone while the others still run.
Every dispatch emits one ``ctxlife.node`` event (tokens before/after, who acted,
time taken); every failure an ``ctxlife.strategy_failed`` or
``ctxlife.invalid_sequence`` error event.

Its other parts: what it keeps per session and the per-session locks
(:mod:`ctxlife.host_sessions`), the report and node event (:mod:`ctxlife.host_report`),
what it tells the session store's keeper (:mod:`ctxlife.host_recording`).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import functools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pluggy

from ctxlife import hookspecs, host_recording
from ctxlife import messages as message_model
from ctxlife.config import Settings, validate_context_window
from ctxlife.contexts import (
    BootstrapContext,
    Complete,
    HookContext,
    LLMCallContext,
    TaskContext,
    TextContext,
    ToolCallContext,
)
from ctxlife.errors import CtxlifeError, PluginError
from ctxlife.events import describe_error, emit
from ctxlife.host_report import Report, StrategyFailure, emit_node, quotable_texts
from ctxlife.host_sessions import SessionState, SessionTable
from ctxlife.messages import check_shape, last_user_index, same_messages, validate
from ctxlife.messages.text import map_texts
from ctxlife.models import as_completion
from ctxlife.plugins import PluginManager, registry
from ctxlife.sessions.base import SessionStore
from ctxlife.sessions.ids import validate_session_id, validate_view
from ctxlife.sessions.keeper import keeper_for
from ctxlife.sessions.records import RawRecord
from ctxlife.strategy import Strategy, ToolSpec, create_strategy
from ctxlife.telemetry import NO_SPAN, host_tracer
from ctxlife.tokens import REPLY_PRIMING_TOKENS, TokenCounter


class Host:
    """Dispatches the six lifecycle nodes to the strategies a config selects.

    Use it directly to drive every node from any framework or your own loop (adapters do exactly
    this): one method per node (:meth:`bootstrap_text`/:meth:`apply_bootstrap`,
    :meth:`before_llm_call`, :meth:`before_tool_call`, :meth:`after_tool_call`, :meth:`task_start`,
    :meth:`task_end`), each editing the node's context in place, each with an ``a``-prefixed async
    twin that runs the dispatch in a worker thread. What each node edits, and an example:
    docs/integrations.md, "Every node from your own loop"; which value wins (an argument here, the
    environment, the file, what the framework reports for a call): docs/configuration.md.

    Args:
        settings: the resolved settings (see :func:`ctxlife.load_settings`); they hold
            the config file's values with the environment's applied on top.
        context_window: the model's window in tokens, explicitly: beats the settings.
        model: the model name (picks the tokenizer), explicitly: beats the settings.
        session_id: the default session, explicitly: beats the settings. A node
            method's ``session_id=`` names the session of that one call.
        plugins: extra objects with ``@ctxlife.hookimpl`` methods, called after
            the configured strategies.
        summary_model: the model strategies summarize with (``llm_summary``): a function
            ``(messages, max_tokens) -> str`` (sync or async), a LangChain chat model or a
            CrewAI LLM (see :func:`ctxlife.models.as_completion`); beats the framework's model.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        context_window: int | None = None,
        model: str | None = None,
        session_id: str | None = None,
        plugins: Sequence[object] = (),
        summary_model: object | None = None,
    ) -> None:
        self.settings = settings
        validate_context_window(context_window, "context_window")
        # Explicit argument > environment > config file (settings hold both, env applied last);
        # what a framework reports comes per call and is used only when these are None.
        self.context_window: int | None = context_window or settings.context_window
        self.model: str | None = model or settings.agent_model
        self.session_id = session_id if session_id is not None else settings.session_id
        if self.session_id is not None:
            validate_session_id(self.session_id)
        self._pm = PluginManager(hookspecs.PROJECT)
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
            impls = [
                (str(self._pm.get_name(impl.plugin)), impl) for impl in getattr(self._pm.hook, hook).get_hookimpls()
            ]
            for name, impl in impls:
                if impl.hookwrapper or getattr(impl, "wrapper", False):
                    raise PluginError(
                        f"plugin {name!r} implements {hook} as a hook wrapper; ctxlife calls each strategy "
                        "on its own (to roll back its edit alone), so use a plain @ctxlife.hookimpl, with "
                        "tryfirst=True or trylast=True to run before or after the others"
                    )

            def order(pair: tuple[str, Any]) -> tuple[int, int]:
                impl = pair[1]
                return (0 if impl.tryfirst else 2 if impl.trylast else 1), position[pair[0]]

            self._impls[hook] = sorted(impls, key=order)
        # One store per host (the top-level ``store`` setting), shared by every strategy as ctx.store:
        # opened when the config names one or an active strategy keeps sessions (needs_store).
        self.store: SessionStore | None = None
        if settings.store_configured or any(s.needs_store for s in self.strategies):
            self.store = host_recording.open_configured_store(settings)
        self._counters: dict[str | None, TokenCounter] = {}
        self._shapes = message_model.ShapeMemo()  # manage() only: it serves the default session alone
        # Per session: its state and its lock, least recently used first (see ctxlife.host_sessions).
        self._table = SessionTable(self._drop_idle)
        self._lock = threading.RLock()  # host-wide, rare: opening the store, making a token counter
        self.complete: Complete | None = None
        self.summary_model: Complete | None = None
        if summary_model is not None:
            self.summary_model = as_completion(summary_model)
        self.listeners: list[Callable[[Report], None]] = []
        """Called with every dispatch's :class:`Report` (metrics, dashboards, the demo)."""
        self.tracer = host_tracer(self.model)
        """OpenTelemetry spans per node and strategy (:mod:`ctxlife.telemetry`); None: not installed, no tracing."""

    def _register(self, plugin: object, name: str) -> None:
        try:
            self._pm.register(plugin, name=name)
        except (ValueError, pluggy.PluginValidationError) as exc:
            raise PluginError(f"cannot register plugin {name!r}: {exc}") from None
        self._plugin_names.append(name)

    # -- shared plumbing ----------------------------------------------------------------

    def counter(self, model: str | None = None) -> TokenCounter:
        """The token counter for this host's model, else ``model`` (what the framework reports); cached.

        One counter serves every session at once: its caches are keyed by the text or message they
        hold (checked on each hit), so concurrent calls at worst count a message twice, never wrongly.
        """
        key = self.model or model
        found = self._counters.get(key)
        if found is None:
            with self._lock:  # not the sessions' table: loading an encoding can take 0.2 s
                found = self._counters.get(key)
                if found is None:
                    found = self._counters[key] = TokenCounter(key)
        return found

    def _drop_idle(self, session: str) -> None:
        """Forget the store recorder's views of a session the host dropped (see :class:`SessionTable`)."""
        if self.store is not None:
            keeper_for(self.store).drop_idle(session)

    def provided_tools(self) -> list[ToolSpec]:
        """The tools the active strategies offer to agents, in config order."""
        return [spec for strategy in self.strategies for spec in strategy.provided_tools()]

    def implements(self, hook: str) -> bool:
        """Whether any active strategy or plugin implements ``hook``."""
        return bool(self._impls[hook])

    def implementers(self, hook: str) -> list[str]:
        """Names of the active strategies and plugins implementing ``hook``, in dispatch order."""
        return list(dict.fromkeys(name for name, _ in self._impls[hook]))

    def _fill(
        self,
        ctx: HookContext,
        node: str,
        *,
        model: str | None,
        context_window: int | None,
        session_id: str | None,
        view: str | None = None,
    ) -> None:
        ctx.node = node
        ctx.session_id = session_id or self.session_id
        if view is not None:
            ctx.view = validate_view(view)
        ctx.tokens = self.counter(model)
        if context_window is not None and (type(context_window) is not int or context_window < 0):
            validate_context_window(context_window, "context_window")  # text, NaN, negative; 0 means unknown
        ctx.context_window = self.context_window or context_window or 0  # explicit/env/config > framework
        ctx.threshold = self.settings.threshold
        ctx.store = self.store
        ctx._text_filter = self.filter_text
        ctx._message_filter = self.filter_message
        if self.summary_model is not None:
            ctx.complete = self.summary_model
        elif ctx.complete is None:
            ctx.complete = self.complete

    def _run(
        self,
        hook: str,
        ctx: HookContext,
        snapshot: Callable[[], Any],
        restore: Callable[[Any], None],
        check: Callable[[Any], str | None] | None = None,
        stop: Callable[[], bool] | None = None,
        *,
        session: SessionState,
    ) -> list[StrategyFailure]:
        failures: list[StrategyFailure] = []
        tracer = self.tracer
        if tracer is not None:
            tracer.start_node(ctx)
        # The marks strategies put on what they insert (summaries, recall blocks) are keyed with
        # the store's secret: every worker on the store recognises them, no third party can forge one.
        with message_model.MARK_KEYS.marking_with(self.store):
            for name, impl in self._impls[hook]:
                saved = snapshot()
                ctx._strategy = name
                ctx.state = session.state.setdefault(name, {})
                n_actions = len(ctx.actions)
                kwargs = {"ctx": ctx}
                try:
                    with tracer.strategy(name, ctx) if tracer is not None else NO_SPAN as span:
                        impl.function(*[kwargs[arg] for arg in impl.argnames])
                        problem = check(saved) if check is not None else None
                        span.finish(problem, ctx, n_actions)
                except Exception as exc:  # noqa: BLE001 - isolation is the point: any failure is rolled back
                    restore(saved)
                    problem = f"{type(exc).__name__}: {exc}"
                    error, safe = describe_error(exc, quotable_texts(ctx, saved), log_content=self.settings.log_content)
                    emit(
                        "error",
                        "ctxlife.strategy_failed",
                        strategy=name,
                        node=ctx.node,
                        error=error,
                        error_type=type(exc).__name__,
                        session_id=ctx.session_id,
                        exc_info=safe and not isinstance(exc, CtxlifeError),
                    )
                else:
                    if problem is None:
                        if stop is not None and stop():
                            break
                        continue
                    restore(saved)
                    emit(
                        "error",
                        "ctxlife.invalid_sequence",
                        strategy=name,
                        node=ctx.node,
                        problem=problem,
                        session_id=ctx.session_id,
                    )
                del ctx.actions[n_actions:]
                failures.append(StrategyFailure(name, ctx.node, problem))
        ctx._strategy = ""
        return failures

    def _finish(
        self, ctx: HookContext, tokens_before: int, tokens_after: int, failures: list[StrategyFailure], start: float
    ) -> Report:
        """The dispatch's :class:`Report`, told (:func:`~ctxlife.host_report.emit_node`)."""
        report = Report(ctx.node, tokens_before, tokens_after, ctx.context_window, ctx.budget, ctx.actions, failures)
        report.duration_ms = (time.perf_counter() - start) * 1000
        emit_node(report, ctx, self.tracer, self.listeners, self.settings.log_content)
        return report

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
        with self._table.locked(session) as state:
            return self._bootstrap_text(state, session, agent_role, goal, backstory)

    def _bootstrap_text(
        self, state: SessionState, session: str | None, agent_role: str | None, goal: str | None, backstory: str | None
    ) -> str:
        """:meth:`bootstrap_text` with the session's lock held."""
        text = state.bootstrap.get(agent_role)
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
            session=state,
        )
        text = "\n\n".join(b.strip() for b in ctx.blocks if isinstance(b, str) and b.strip())
        state.bootstrap[agent_role] = text
        state.bootstrap_actions[agent_role] = list(ctx.actions)
        self._finish(ctx, 0, ctx.tokens.count_text(text), failures, start)
        return text

    @staticmethod
    def apply_bootstrap(
        messages: list[dict[str, Any]], text: str, *, system_prompt: bool = True, fmt: str | None = None
    ) -> bool:
        """Put ``text`` into the list as one marked section (a new rendering replaces the old one); True if it
        changed anything. Where it goes (``system_prompt``, ``fmt``): :func:`ctxlife.messages.apply_bootstrap`."""
        return message_model.apply_bootstrap(messages, text, system_prompt=system_prompt, fmt=fmt)

    # -- the privacy filter: text leaving the store -------------------------------------

    def filter_text(self, text: str, *, where: str, session_id: str | None = None, view: str = "") -> str:
        """``text`` after every ``ctxlife_filter_text`` implementation (redaction), in dispatch order.

        Call it on any text taken out of the session store before a model or a person sees it
        (``where``: ``"recall"``, ``"search"``, ``"restore"``, ``"show"``, ``"export"``, ``"report"``, or
        ``"record"`` before writing). Free when no active strategy filters text.
        """
        if not self._impls["ctxlife_filter_text"] or not text:
            return text
        ctx = TextContext(text=text, where=where, session_id=session_id or self.session_id, view=view)
        ctx.node = "filter_text"
        ctx.store = self.store

        def restore(saved: str) -> None:
            ctx.text = saved

        def check(saved: str) -> str | None:
            return None if isinstance(ctx.text, str) else f"set ctx.text to a {type(ctx.text).__name__}, not a str"

        with self._table.locked(ctx.session_id) as state:
            self._run(
                "ctxlife_filter_text", ctx, snapshot=lambda: ctx.text, restore=restore, check=check, session=state
            )
        return ctx.text

    def filter_message(
        self, message: dict[str, Any], *, where: str, session_id: str | None = None, view: str = ""
    ) -> dict[str, Any]:
        """``message`` with every text a model or a person reads through :meth:`filter_text` (which texts,
        and the same dict back when nothing changed: :func:`ctxlife.messages.text.map_texts`)."""
        if not self._impls["ctxlife_filter_text"]:
            return message

        def text(value: str) -> str:
            return self.filter_text(value, where=where, session_id=session_id, view=view)

        cleaned: dict[str, Any] = map_texts(message, text)
        kind = message_model.inserted_kind(message) if cleaned is not message else None
        if kind is not None and message_model.inserted_kind(cleaned) is None:
            # a summary or recall block whose text was filtered is still ctxlife's
            with message_model.MARK_KEYS.marking_with(self.store):
                message_model.mark_inserted(cleaned, kind)
        return cleaned

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
        system_prompt: bool = True,
        view: str | None = None,
        recorded_by_caller: bool = False,
    ) -> Report:
        """Node 2: run the ``before_llm_call`` pipeline on a live message list, in place.

        ``messages`` are OpenAI chat or Anthropic Messages dicts (see :mod:`ctxlife.messages`);
        after the call they are what to send. Write them back as the source of truth of your
        loop, so a compaction is not redone on the next call. The bootstrap text (node 1) is
        applied here too, on an agent's first call; ``system_prompt=False`` says the agent sends
        no system message (CrewAI's ``use_system_prompt=False``): the bootstrap text then opens
        the first user turn. ``model``/``context_window`` are what the framework reports (used
        when neither this host nor the config sets one); ``complete`` lets strategies call the
        agent's model (``llm_summary`` with ``summarizer = "llm"``). ``view`` names the lane of the
        session this call belongs to (an agent's or task's; default ``""``). ``recorded_by_caller``
        says the caller restored and recorded the list itself and saves its snapshot
        (``ctxlife.Session``, through :mod:`ctxlife.sessions.keeper`): strategies then leave the
        session's persistence alone (:attr:`~ctxlife.contexts.LLMCallContext.recorded_by_caller`).
        """
        start = time.perf_counter()
        session = session_id or self.session_id
        with self._table.locked(session) as state:
            ctx = LLMCallContext(
                messages=messages,
                agent_role=agent_role,
                task_name=task_name,
                task_index=task_index,
                complete=complete,
                recorded_by_caller=recorded_by_caller,
            )
            self._fill(
                ctx, "before_llm_call", model=model, context_window=context_window, session_id=session, view=view
            )
            if not ctx.context_window:
                raise CtxlifeError(
                    "no context window is known for this call; pass context_window= "
                    "(or set context_window in the config)"
                )
            index = state.calls
            state.calls = index + 1
            ctx.call_index = index
            ctx.first_call_of_run = index == 0 if first_call_of_run is None else first_call_of_run
            ctx.first_call_of_view = ctx.view not in state.views_in_run
            state.views_in_run.add(ctx.view)
            ctx.first_call_of_task = task_name is not None and task_name in state.task_started
            state.task_started.discard(task_name)
            counter = ctx.tokens
            counter.new_generation()
            previous = state.previous_list(ctx.view)
            agreement = previous.compare(messages)
            counts = _counts(counter, messages, agreement, previous.counts_of(counter))
            tokens_before = REPLY_PRIMING_TOKENS + sum(counts)
            before = list(messages)  # to tell whether anything changed (then tokens_after = tokens_before)
            host_recording.expect(self.store, session, messages, agreement, ctx, before)  # (before: never edited)
            ctx._count_memo = (before, tokens_before)
            configured = self.settings.message_format
            fmt = ctx.message_format = configured if configured != "auto" else state.format_of(messages)
            text = self._bootstrap_text(state, session, agent_role, goal, backstory)
            # What the bootstrap did shows in the report of the agent's first call.
            ctx.actions.extend(state.bootstrap_actions.pop(agent_role, ()))
            self.apply_bootstrap(messages, text, system_prompt=system_prompt, fmt=fmt)
            problems_before: int | None = None  # validated lazily: most calls change nothing
            live = messages

            def check(saved: list[dict[str, Any]]) -> str | None:
                nonlocal problems_before
                if ctx.messages is not live:
                    ctx.messages = live
                    return (
                        "rebound ctx.messages instead of editing it in place; use slice assignment or clear()+extend()"
                    )
                if same_messages(live, saved):
                    return None
                problems = validate(live, fmt)
                if problems:
                    if problems_before is None:  # validated only when needed: most lists are valid
                        problems_before = len(validate(saved, fmt))
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

            failures = self._run(
                "ctxlife_before_llm_call", ctx, snapshot=lambda: list(live), restore=restore, check=check, session=state
            )
            self.apply_bootstrap(messages, text, system_prompt=system_prompt, fmt=fmt)
            host_recording.leave(self.store, live, session, ctx)
            failures += host_recording.settle(self.store, live, session, ctx, log_content=self.settings.log_content)
            unchanged = same_messages(before, live)
            if not unchanged:
                length, edited = message_model.differences(before, live)
                counts = _counts(counter, live, message_model.Agreement(length, tuple(edited), before), counts)
            previous.remember(live, before, agreement, counts, counter, frozen=True)
            report = Report(
                "before_llm_call",
                tokens_before,
                tokens_before if unchanged else REPLY_PRIMING_TOKENS + sum(counts),
                ctx.context_window,
                ctx.budget,
                ctx.actions,
                failures,
                (time.perf_counter() - start) * 1000,
            )
            host_recording.record_call(self.store, self.model, live, session, ctx, report)
            emit_node(report, ctx, self.tracer, self.listeners, self.settings.log_content)
            return report

    def manage(
        self,
        messages: list[dict[str, Any]],
        *,
        context_window: int | None = None,
        model: str | None = None,
        complete: Complete | None = None,
    ) -> Report:
        """:func:`ctxlife.manage` for this host: validate the list's shape, then run node 2.

        ``complete``: the model strategies summarize with in this call (as :meth:`before_llm_call`'s;
        the host's ``summary_model`` beats it), e.g. a ``summary_model`` made per request.
        """
        expected = None if self.settings.message_format == "auto" else self.settings.message_format
        # Only messages new or edited since the last call are classified.
        with self._table.locked(self.session_id) as state:
            previous = state.previous_list("") if isinstance(messages, list) else None
            unchanged = None
            if previous is not None and previous.shape is not None:
                unchanged = (previous.compare(messages, keep=True), previous.shape)
            try:
                check_shape(messages, expected=expected, memo=self._shapes, unchanged=unchanged)
                if previous is not None:
                    previous.checked(messages, self._shapes.found)
                return self.before_llm_call(messages, context_window=context_window, model=model, complete=complete)
            finally:
                if previous is not None:
                    previous.drop()  # the comparison kept for this call is used up (or the call failed)

    # -- nodes 3 and 4: around a tool call ----------------------------------------------

    def _tool(
        self, hook: str, ctx: ToolCallContext, session_id: str | None, model: str | None, context_window: int | None
    ) -> Report:
        start = time.perf_counter()
        with self._table.locked(session_id or self.session_id) as state:
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
                session=state,
            )
            return self._finish(ctx, before_tokens, counter.count_text(ctx.result), failures, start)

    def before_tool_call(
        self,
        ctx: ToolCallContext,
        *,
        session_id: str | None = None,
        model: str | None = None,
        context_window: int | None = None,
    ) -> Report:
        """Node 3, before a tool runs: ``ctx.tool_name`` and ``ctx.tool_input`` set, ``ctx.result`` None.

        After it, ``ctx.tool_input`` is what the tool should receive; if ``ctx.result`` is
        a string, a strategy answered the call itself (``ctx.skipped_by`` names it): do not
        run the tool, and pass that string through :meth:`after_tool_call` as its result.
        """
        return self._tool("ctxlife_before_tool_call", ctx, session_id, model, context_window)

    def after_tool_call(
        self,
        ctx: ToolCallContext,
        *,
        session_id: str | None = None,
        model: str | None = None,
        context_window: int | None = None,
    ) -> Report:
        """Node 4, after a tool returned: ``ctx.result`` is the tool's output as text.

        After it, ``ctx.result`` is what the model should see (``tool_output`` caps it and
        keeps the full text recallable through :meth:`provided_tools`).
        """
        return self._tool("ctxlife_after_tool_call", ctx, session_id, model, context_window)

    # -- nodes 5 and 6: task boundaries -------------------------------------------------

    def _task(
        self, hook: str, ctx: TaskContext, session_id: str | None, model: str | None, context_window: int | None
    ) -> Report:
        start = time.perf_counter()
        with self._table.locked(session_id or self.session_id) as state:
            node = hook.removeprefix("ctxlife_")
            self._fill(ctx, node, model=model, context_window=context_window, session_id=session_id, view=ctx.view)
            attr = "context_text" if hook == "ctxlife_task_start" else "output"
            counter = ctx.tokens
            before_tokens = counter.count_text(getattr(ctx, attr))
            if hook == "ctxlife_task_start":
                state.task_started.add(ctx.task_name)

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
                session=state,
            )
            return self._finish(ctx, before_tokens, counter.count_text(getattr(ctx, attr)), failures, start)

    def task_start(
        self,
        ctx: TaskContext,
        *,
        session_id: str | None = None,
        model: str | None = None,
        context_window: int | None = None,
    ) -> Report:
        """Node 5, a task (or an agent run) starts: ``ctx.context_text`` is what it receives from earlier work.

        After it, ``ctx.context_text`` is what the task should receive (``task_scope``).
        """
        return self._task("ctxlife_task_start", ctx, session_id, model, context_window)

    def task_end(
        self,
        ctx: TaskContext,
        *,
        session_id: str | None = None,
        model: str | None = None,
        context_window: int | None = None,
    ) -> Report:
        """Node 6, a task (or an agent run) ended: ``ctx.output`` is its final text, ``ctx.messages`` its messages.

        After it, ``ctx.output`` is the output to pass on; strategies save snapshots and
        task summaries here.
        """
        return self._task("ctxlife_task_end", ctx, session_id, model, context_window)

    # -- lifetime -----------------------------------------------------------------------

    def start_run(self, session_id: str | None = None, *, new_lists: bool = False) -> None:
        """Mark the start of a run (a kickoff): the next model call is its first.

        ``new_lists=True`` says the run builds its lists from scratch (a CrewAI kickoff), so a
        run whose first messages repeat the last run's (the same task again) is a new turn of
        the session, restored in front and recorded again, not an edit that removes the last
        run's answers. Leave it False for a caller that sends its kept conversation each run.
        """
        session = session_id or self.session_id
        with self._table.locked(session) as state:
            state.calls = 0
            state.views_in_run.clear()
        if new_lists:
            self.new_lists(session)
        elif session is not None and self.store is not None:
            keeper_for(self.store).recorder.kept_lists(session)

    def new_lists(self, session_id: str | None = None, view: str | None = None) -> None:
        """Say the next list of the session's ``view`` (every view: None) is built from scratch.

        Its messages are then recorded as new (plus the conversation a restore puts back), even
        when they repeat what the view holds: the same task message again is a new turn, not an
        edit that removes what followed it, nor a retried request. Nothing to do for a caller that
        keeps its list between calls.
        """
        session = session_id or self.session_id
        if session is not None and self.store is not None:
            keeper_for(self.store).recorder.new_lists(session, None if view is None else validate_view(view))

    def record_reply(
        self,
        reply: dict[str, Any] | list[dict[str, Any]],
        *,
        session_id: str | None = None,
        view: str | None = None,
    ) -> list[RawRecord]:
        """Record the model's reply in the session's raw history (the last reply of a process too).

        Call it after the model answered, with the reply message, or better with the whole list
        the reply was appended to: a list is recorded by alignment (what is already recorded is
        skipped, so calling it and then passing the same list to the next :meth:`manage` records
        nothing twice); a single message is appended after the view's recorded conversation
        (:meth:`Keeper.append <ctxlife.sessions.keeper.Keeper.append>`: when the store fails the
        error propagates, and calling again records it once).
        Returns the new records (``[]`` without a session). A message that is not
        JSON is recorded in a JSON-safe form; one of no known shape, or in another format than
        ``message_format``, is refused (:class:`~ctxlife.errors.InvalidMessagesError`, nothing written).
        """
        session = session_id or self.session_id
        if session is None:
            return []
        validate_session_id(session)
        lane = validate_view(view or "")
        configured = self.settings.message_format
        expected = None if configured == "auto" else configured
        with self._table.locked(session):
            return host_recording.record_reply(self.open_store(), session, reply, lane, expected)

    def open_store(self) -> SessionStore:
        """The host's session store, opened now from the settings if the host has none yet.

        A host opens its store at construction when the config names one or an active strategy
        keeps sessions; explicit session APIs (:meth:`record_reply`, ``ctxlife.Session``) open it
        here otherwise. Opening creates nothing until the first write.
        """
        with self._lock:
            if self.store is None:
                self.store = host_recording.open_configured_store(self.settings)
            return self.store

    async def arecord_reply(self, reply: dict[str, Any] | list[dict[str, Any]], **kwargs: Any) -> list[RawRecord]:
        """:meth:`record_reply` without blocking the event loop."""
        return await asyncio.to_thread(functools.partial(self.record_reply, reply, **kwargs))

    def forget_lists(self, session_id: str | None = None) -> None:
        """Drop the copies this host keeps of a session's last lists (every session: None), after
        its messages were erased or deleted; the next call looks at its whole list again."""
        self._table.forget_lists(session_id)

    def close(self) -> None:
        """Close every strategy (stores, files) and the host's store. The host is not used after this."""
        self.forget_lists()
        for strategy in self.strategies:
            _close_quietly(strategy.close, "ctxlife.strategy_close_failed", strategy=strategy.name)
        if self.store is not None:
            _close_quietly(self.store.close, "ctxlife.store_close_failed", store=getattr(self.store, "url", ""))

    # -- async twins: the same dispatch in a worker thread, so the event loop never waits on it --

    async def abootstrap_text(self, **kwargs: Any) -> str:
        """:meth:`bootstrap_text` without blocking the event loop."""
        return await asyncio.to_thread(functools.partial(self.bootstrap_text, **kwargs))

    async def abefore_llm_call(self, messages: list[dict[str, Any]], **kwargs: Any) -> Report:
        """:meth:`before_llm_call` in a worker thread: an LLM summary never blocks the event loop.

        The list is edited in place as with the sync method; do not touch it until this returns.
        """
        return await asyncio.to_thread(functools.partial(self.before_llm_call, messages, **kwargs))

    async def amanage(
        self, messages: list[dict[str, Any]], *, context_window: int | None = None, model: str | None = None
    ) -> Report:
        """:meth:`manage` without blocking the event loop."""
        return await asyncio.to_thread(
            functools.partial(self.manage, messages, context_window=context_window, model=model)
        )

    async def abefore_tool_call(self, ctx: ToolCallContext, **kwargs: Any) -> Report:
        """:meth:`before_tool_call` without blocking the event loop."""
        return await asyncio.to_thread(functools.partial(self.before_tool_call, ctx, **kwargs))

    async def aafter_tool_call(self, ctx: ToolCallContext, **kwargs: Any) -> Report:
        """:meth:`after_tool_call` without blocking the event loop."""
        return await asyncio.to_thread(functools.partial(self.after_tool_call, ctx, **kwargs))

    async def atask_start(self, ctx: TaskContext, **kwargs: Any) -> Report:
        """:meth:`task_start` without blocking the event loop."""
        return await asyncio.to_thread(functools.partial(self.task_start, ctx, **kwargs))

    async def atask_end(self, ctx: TaskContext, **kwargs: Any) -> Report:
        """:meth:`task_end` without blocking the event loop."""
        return await asyncio.to_thread(functools.partial(self.task_end, ctx, **kwargs))


def _close_quietly(close: Callable[[], None], event: str, **about: str) -> None:
    """``close()``; a failure is an error ``event`` with ``about``, never raised."""
    try:
        close()
    except Exception as exc:  # noqa: BLE001 - closing must not mask the caller's outcome
        emit("error", event, **about, error=f"{type(exc).__name__}: {exc}")


def _counts(
    counter: TokenCounter,
    messages: Sequence[dict[str, Any]],
    agreement: message_model.Agreement,
    prior: list[int] | None,
) -> list[int]:
    """The tokens of each message: ``prior``'s count where ``agreement`` says the message is the one
    ``prior`` counted at that position, a count (from the counter's cache) everywhere else."""
    if prior is None or not agreement.length:
        return counter.count_each(messages)
    counts = prior[: agreement.length]
    for i in agreement.changed:
        counts[i] = counter.count_each((messages[i],))[0]
    counts += counter.count_each(messages, agreement.length)
    return counts


def _kept_latest_user(before: list[dict[str, Any]], index: int, after: list[dict[str, Any]]) -> bool:
    """The latest user message is still there: unchanged, or edited in place (same distance from the end)."""
    target = before[index]
    if any(m is target for m in after) or target in after:
        return True
    now = last_user_index(after)
    return now is not None and len(after) - now == len(before) - index
