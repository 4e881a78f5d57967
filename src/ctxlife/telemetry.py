"""OpenTelemetry spans for every node dispatch and every strategy call (the ``ctxlife[otel]`` extra).

The spans, their attributes and events: docs/inspecting.md, "OpenTelemetry". Without OpenTelemetry
installed, :func:`host_tracer` returns None and the host does no tracing work at all; with it
installed but no SDK configured, spans are OpenTelemetry's non-recording no-ops.
"""

from __future__ import annotations

import weakref
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from ctxlife import __version__

if TYPE_CHECKING:
    from ctxlife.contexts import HookContext


class NodeReport(Protocol):
    """What :meth:`Tracer.end_node` reads of a dispatch's :class:`ctxlife.host_report.Report`."""

    tokens_before: int
    tokens_after: int
    context_window: int
    budget: int
    failures: list[Any]

    @property
    def acted(self) -> list[str]: ...


__all__ = ["NO_SPAN", "NodeReport", "StrategySpan", "Tracer", "host_tracer"]

#: The instrumentation scope name of ctxlife's spans.
SCOPE = "ctxlife"

# Numeric details of actions that become span attributes (action detail -> attribute).
_DETAILS = {
    "evicted_messages": "ctxlife.evicted_messages",
    "removed_messages": "ctxlife.evicted_messages",
    "summary_tokens": "ctxlife.summary_tokens",
    "summarizer": "ctxlife.summarizer.name",
    "passages": "ctxlife.recalled_passages",
}


def host_tracer(model: str | None = None) -> Tracer | None:
    """A :class:`Tracer` on OpenTelemetry's global provider, or None when OpenTelemetry is not installed."""
    try:
        from opentelemetry import trace  # lazy: an optional extra (ctxlife[otel])
    except ImportError:
        return None
    return Tracer(trace.get_tracer(SCOPE, __version__), model=model)


def _scalar(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return str(value)


class StrategySpan:
    """The span of one strategy call: a context manager, current while the strategy runs."""

    __slots__ = ("_scope", "_span")

    def __init__(self, span: Any) -> None:
        from opentelemetry import trace  # lazy: an optional extra (ctxlife[otel])

        self._span = span
        self._scope = trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False)

    def __enter__(self) -> StrategySpan:
        self._scope.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is not None and self._span.is_recording():
            from opentelemetry.trace import Status, StatusCode  # lazy: an optional extra (ctxlife[otel])

            # The type only: an exception's text may quote the conversation.
            self._span.set_attribute("error.type", kind.__name__)
            self._span.set_status(Status(StatusCode.ERROR, f"{kind.__name__} (the strategy's edit was rolled back)"))
        self._scope.__exit__(kind, exc, tb)

    def finish(self, problem: str | None, ctx: HookContext, first_action: int) -> None:
        """Record what the strategy did (``ctx.actions`` from ``first_action``) and a rollback for ``problem``."""
        span = self._span
        if not span.is_recording():
            return
        actions = ctx.actions[first_action:]
        span.set_attribute("ctxlife.actions", [a.what for a in actions])
        for action in actions:
            span.add_event(
                "ctxlife.action",
                {"ctxlife.strategy": action.strategy, "ctxlife.what": action.what}
                | {f"ctxlife.{k}": _scalar(v) for k, v in action.details.items()},
            )
            for key, attribute in _DETAILS.items():
                if key in action.details:
                    span.set_attribute(attribute, _scalar(action.details[key]))
            if action.what == "recalled" and "tokens" in action.details:
                span.set_attribute("ctxlife.recalled_tokens", _scalar(action.details["tokens"]))
            if "seconds" in action.details and isinstance(action.details["seconds"], (int, float)):
                span.set_attribute("ctxlife.summarizer.latency_ms", round(float(action.details["seconds"]) * 1000, 3))
        if problem is not None:
            from opentelemetry.trace import Status, StatusCode  # lazy: an optional extra (ctxlife[otel])

            span.set_attribute("error.type", "invalid_sequence")
            span.set_status(Status(StatusCode.ERROR, f"rolled back: {problem}"))


class _NoSpan:
    """What the host uses when it has no tracer: does nothing, costs next to nothing."""

    __slots__ = ()

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def finish(self, problem: str | None, ctx: HookContext, first_action: int) -> None:
        return None


#: The shared do-nothing span.
NO_SPAN = _NoSpan()


class Tracer:
    """Opens and closes ctxlife's spans for one host (see the module docs)."""

    def __init__(self, tracer: Any, *, model: str | None = None) -> None:
        self._tracer = tracer
        self.model = model
        self._nodes: weakref.WeakKeyDictionary[HookContext, Any] = weakref.WeakKeyDictionary()

    def start_node(self, ctx: HookContext) -> None:
        """Open the span of the node ``ctx`` is being dispatched for (ended by :meth:`end_node`)."""
        span = self._tracer.start_span(f"ctxlife.{ctx.node}")
        if not span.is_recording():
            return  # no SDK, or not sampled: no strategy spans either (their parent is not recorded)
        attributes: dict[str, Any] = {"ctxlife.node": ctx.node, "ctxlife.view": ctx.view}
        if ctx.session_id is not None:
            attributes["gen_ai.conversation.id"] = ctx.session_id
        if ctx.agent_role:
            attributes["gen_ai.agent.name"] = ctx.agent_role
        if ctx.task_name:
            attributes["ctxlife.task.name"] = ctx.task_name
        if self.model:
            attributes["gen_ai.request.model"] = self.model
        span.set_attributes(attributes)
        self._nodes[ctx] = span

    def strategy(self, name: str, ctx: HookContext) -> StrategySpan | _NoSpan:
        """The span of one strategy's call at the node ``ctx`` is dispatched for (a child of the node's span)."""
        node = self._nodes.get(ctx)
        if node is None:
            return NO_SPAN
        from opentelemetry import trace  # lazy: an optional extra (ctxlife[otel])

        span = self._tracer.start_span(
            f"ctxlife.strategy {name}",
            context=trace.set_span_in_context(node),
            attributes={"ctxlife.strategy": name, "ctxlife.node": ctx.node},
        )
        return StrategySpan(span)

    def end_node(self, ctx: HookContext, report: NodeReport) -> None:
        """Close the node's span with the dispatch's figures."""
        span = self._nodes.pop(ctx, None)
        if span is None:
            return
        if span.is_recording():
            span.set_attributes(
                {
                    "ctxlife.tokens.before": report.tokens_before,
                    "ctxlife.tokens.after": report.tokens_after,
                    "ctxlife.context_window": report.context_window,
                    "ctxlife.threshold_tokens": report.budget,
                    "ctxlife.strategies.acted": report.acted,
                    "ctxlife.strategies.failed": [f.strategy for f in report.failures],
                }
            )
        span.end()
