"""The host's side of the session store: opening the configured store, and what the host tells the
store's keeper around a model call.

Before the strategies run, the keeper's recorder learns how the caller's list compares with the
list handed back last (:meth:`~ctxlife.sessions.recording.Recorder.expect`); after them, the list
as the call hands it back (:func:`leave`), the view's snapshot when a strategy changed the list
(:func:`settle`) and the call record of what was sent (:func:`record_call`,
:mod:`ctxlife.sessions.calls`). Only for a view the recorder keeps, and never for a list the
caller recorded itself (``ctxlife.Session``).
"""

from __future__ import annotations

from typing import Any

from ctxlife.config import Settings
from ctxlife.contexts import Action, LLMCallContext
from ctxlife.errors import ConfigError, CtxlifeError
from ctxlife.events import describe_error, emit
from ctxlife.host_report import Report, StrategyFailure, quotable_texts
from ctxlife.messages import Agreement, check_shape
from ctxlife.sessions import open_store, store_schemes
from ctxlife.sessions.base import SessionStore
from ctxlife.sessions.keeper import keeper_for
from ctxlife.sessions.records import RawRecord, json_safe

__all__ = ["expect", "leave", "open_configured_store", "record_call", "record_reply", "settle"]


def expect(
    store: SessionStore | None,
    session: str | None,
    messages: list[dict[str, Any]],
    agreement: Agreement,
    ctx: LLMCallContext,
    compared: list[dict[str, Any]] | None = None,
) -> None:
    """Tell the recorder how the caller's list compares with the list handed back last, so its diff
    skips what the host found unchanged (``compared``: the host's copy of the list as compared, kept
    unchanged until the record: the recorder then makes none)."""
    if store is not None and session is not None and not ctx.recorded_by_caller:
        keeper_for(store).recorder.expect(session, messages, agreement, ctx.view, compared=compared)


def record_call(
    store: SessionStore | None,
    model: str | None,
    messages: list[dict[str, Any]],
    session: str | None,
    ctx: LLMCallContext,
    report: Report,
) -> None:
    """Write the call record of the list as sent (:mod:`ctxlife.sessions.calls`): each message by
    its recorded slot, or by text when ctxlife inserted it (or it is the system prompt). Only for a
    view a recorder keeps (else nothing of the list is recorded to point at). A failed write is an
    error event and a failure in ``report``; the call goes on. After a strategy's store failure in
    the same call it is skipped (and said so), so a frozen store costs the agent no second timeout."""
    if store is None or session is None:
        return
    view = getattr(ctx, "view", "") or ""
    if not keeper_for(store).recorder.known(session, view):
        return
    failed = next((f for f in report.failures if f.error.startswith("StoreError:")), None)
    if failed is not None:
        # The store failed in this very call (down, frozen, full): a write would only add its
        # timeout to the agent's wait. Said, not written.
        why = f"skipped: the store failed in this call ({failed.strategy}: {failed.error})"
        report.failures.append(StrategyFailure("call_record", report.node, why))
        emit("warning", "ctxlife.call_record_skipped", session_id=session, view=view, error=why)
        return
    try:
        details = {
            "tokens": [report.tokens_before, report.tokens_after],
            "window": report.context_window,
            "budget": report.budget,
            "model": model or ctx.tokens.model,
            "actions": json_safe([{"strategy": a.strategy, "what": a.what, **a.details} for a in report.actions]),
            # the exception's type only: its message may quote the conversation, and logs keep the rest
            "failures": [
                {"strategy": f.strategy, "node": f.node, "error": f.error.partition(":")[0]} for f in report.failures
            ],
        }
        keeper_for(store).record_call(session, messages, view, details=details)
    except Exception as exc:  # noqa: BLE001 - the call record is for people: never break the call
        error = f"{type(exc).__name__}: {exc}"
        report.failures.append(StrategyFailure("call_record", report.node, error))
        emit("error", "ctxlife.call_record_failed", session_id=session, view=view, error=error)


def leave(store: SessionStore | None, messages: list[dict[str, Any]], session: str | None, ctx: LLMCallContext) -> None:
    """Tell the session's recorder the list as the call hands it back, after every strategy: the
    caller's next list is diffed against it, so what a strategy cut (a compaction, room made for
    recall) is never taken for the caller's deletion. Only for a view a recorder keeps."""
    if store is None or session is None or ctx.recorded_by_caller:
        return
    view = getattr(ctx, "view", "") or ""
    keeper = keeper_for(store)
    if keeper.recorder.known(session, view):
        keeper.leave(session, messages, view)


def settle(
    store: SessionStore | None,
    messages: list[dict[str, Any]],
    session: str | None,
    ctx: LLMCallContext,
    *,
    log_content: bool = False,
) -> list[StrategyFailure]:
    """After every strategy (and :func:`leave`): save the view's snapshot when the call changed the
    list its keeper tracks (:meth:`~ctxlife.sessions.keeper.Keeper.settle`). Here, not in a strategy's
    last hook, because only the host knows when every hook ran: recall's room-making and a third
    party's trylast edit come after any one hook. What happened is an action of the strategy that
    keeps the snapshot; a failed write is its failure (a ``ctxlife.strategy_failed`` event, as if
    its hook had raised), and the call goes on."""
    if store is None or session is None or ctx.recorded_by_caller:
        return []
    settled = keeper_for(store).settle(session, getattr(ctx, "view", "") or "", messages)
    if settled is None:
        return []
    node = ctx.node
    if settled.snapshot is not None:
        details = {"messages": len(messages), "raw_length": settled.snapshot.raw_length}
        ctx.actions.append(Action(settled.by, node, "snapshot_saved", details))
    elif settled.skipped is not None:
        ctx.actions.append(Action(settled.by, node, "skipped", {"reason": settled.skipped, "pending": settled.pending}))
    exc = settled.error
    if exc is None:
        return []
    error, safe = describe_error(exc, quotable_texts(ctx), log_content=log_content)
    emit(
        "error",
        "ctxlife.strategy_failed",
        strategy=settled.by,
        node=node,
        error=error,
        error_type=type(exc).__name__,
        session_id=session,
        exc_info=safe and not isinstance(exc, CtxlifeError),
    )
    return [StrategyFailure(settled.by, node, f"{type(exc).__name__}: {exc}")]


def open_configured_store(settings: Settings) -> SessionStore:
    """Open the settings' session store (creates nothing until the first write)."""
    url = settings.store_url()
    scheme = url.split("://", 1)[0].lower()
    if scheme not in store_schemes():
        raise ConfigError(
            f"{settings.store_origin()}: unknown session store scheme {scheme!r}; known schemes: "
            f"{', '.join(store_schemes())}"
        )
    return open_store(url)  # a StoreError (e.g. Redis unreachable) names the store itself


def record_reply(
    store: SessionStore,
    session: str,
    reply: dict[str, Any] | list[dict[str, Any]],
    view: str,
    expected: str | None = None,
) -> list[RawRecord]:
    """``Host.record_reply`` with the session's lock held: a message is appended after the view's
    recorded conversation, a list recorded by alignment (and left as the caller's next list).
    ``expected``: the configured ``message_format`` (None: ``auto``)."""
    keeper = keeper_for(store)
    if not isinstance(reply, (dict, list)):
        raise CtxlifeError(f"record_reply takes a message dict or a list of them, got {type(reply).__name__}")
    # What is recorded is sent on every later call: a reply of no known shape is refused, nothing written.
    # (A list's other messages were checked when the call was managed: only its last, the reply, is new.)
    newest = reply if isinstance(reply, dict) else reply[-1] if reply else None
    if newest is not None:
        check_shape([json_safe(newest)], where="record_reply", expected=expected)
    if isinstance(reply, dict):
        return keeper.append(session, [reply], view)
    records = keeper.record_list(session, reply, view)
    keeper.leave(session, reply, view)  # the caller's next list continues this one
    return records
