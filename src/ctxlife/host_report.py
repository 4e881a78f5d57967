"""What a host's dispatch leaves behind: its :class:`Report`, the texts kept out of the logs, and
the ``ctxlife.node`` event.

Every dispatch emits one ``ctxlife.node`` event (tokens before/after, who acted, time taken) and
hands its report to the host's listeners; an exception's text is logged only when it quotes none of
the node's contents (:func:`quotable_texts`, :func:`ctxlife.events.describe_error`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ctxlife.contexts import Action, BootstrapContext, HookContext, LLMCallContext, TaskContext, ToolCallContext
from ctxlife.events import emit
from ctxlife.messages import text_of
from ctxlife.telemetry import Tracer

__all__ = ["CONTENT_LIMIT", "Report", "StrategyFailure", "content_excerpt", "emit_node", "quotable_texts"]


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


def emit_node(
    report: Report,
    ctx: HookContext,
    tracer: Tracer | None,
    listeners: list[Callable[[Report], None]],
    log_content: bool,
) -> None:
    """Finish a dispatch's report: the tracer's span, the listeners, one ``ctxlife.node`` event."""
    report.session_id, report.agent_role, report.task_name = ctx.session_id, ctx.agent_role, ctx.task_name
    if tracer is not None:
        tracer.end_node(ctx, report)
    for listener in listeners:
        try:
            listener(report)
        except Exception as exc:  # noqa: BLE001 - a broken listener must not break the agent
            emit("error", "ctxlife.listener_failed", listener=repr(listener), error=f"{type(exc).__name__}: {exc}")
    fields: dict[str, Any] = {}
    if log_content:
        fields["content"] = content_excerpt(ctx)
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


CONTENT_LIMIT = 2000


def quotable_texts(ctx: HookContext, saved: Any = None) -> list[str]:
    """Every text of a node's context an exception could quote (to keep it out of the logs)."""
    texts: list[str] = []
    if isinstance(ctx, LLMCallContext):
        seen: set[int] = set()
        for message in [*ctx.messages, *(saved if isinstance(saved, list) else ())]:
            if id(message) not in seen and isinstance(message, dict):
                seen.add(id(message))
                texts.append(text_of(message))
    elif isinstance(ctx, ToolCallContext):
        texts += [ctx.result or "", str(ctx.raw_result) if ctx.raw_result is not None else "", repr(ctx.tool_input)]
        if isinstance(saved, tuple) and len(saved) == 2:
            texts.append(saved[1] or "")
        texts += [str(v) for v in ctx.tool_input.values()] if isinstance(ctx.tool_input, dict) else []
    elif isinstance(ctx, TaskContext):
        texts += [ctx.context_text or "", ctx.output or "", ctx.description or ""]
        texts += [text_of(m) for m in ctx.messages if isinstance(m, dict)]
        if isinstance(saved, str):
            texts.append(saved)
    elif isinstance(ctx, BootstrapContext):
        texts += [*(b for b in ctx.blocks if isinstance(b, str)), ctx.goal or "", ctx.backstory or ""]
    return texts


def content_excerpt(ctx: HookContext) -> str | None:
    """What ``log_content = true`` adds to a node event: the text the node was about, cut short."""
    if isinstance(ctx, LLMCallContext):
        text = text_of(ctx.messages[-1]) if ctx.messages else None
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
    return (
        text
        if len(text) <= CONTENT_LIMIT
        else text[:CONTENT_LIMIT] + f"... [{len(text) - CONTENT_LIMIT} more characters]"
    )
