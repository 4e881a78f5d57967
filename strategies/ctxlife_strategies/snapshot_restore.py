"""``snapshot_restore``: sessions that survive restarts — a context snapshot plus the raw history.

What it does, its options and why: docs/strategies/snapshot_restore.md.
The host saves the snapshot once every strategy ran (:meth:`ctxlife.sessions.keeper.Keeper.settle`).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

import ctxlife
from ctxlife.events import emit
from ctxlife.messages import is_summary, is_system, validate
from ctxlife.sessions import SessionStore
from ctxlife.sessions.keeper import Keeper, keeper_for
from ctxlife.sessions.restore import restore_view
from ctxlife.sessions.views import recordable

#: How many calls in a row a restore that failed for a passing reason (the store down) is tried.
_RESTORE_ATTEMPTS = 3


class BadSessionError(ctxlife.StoreError):
    """The stored session cannot be restored as it is (a record that is not a message, an invalid result)."""


class SnapshotRestore(ctxlife.Strategy):
    name = "snapshot_restore"
    needs_store = True  # the host opens its session store (the `store` setting) for this strategy

    class Options(ctxlife.Options):
        restore: bool = Field(True, description="Restore the saved context on the first model call of a run.")

    options: Options

    # -- node 2, first: restore and record ------------------------------------------------

    @ctxlife.hookimpl(tryfirst=True)
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        session = ctx.session_id
        if ctx.recorded_by_caller:
            return  # the caller (ctxlife.Session) restored and recorded the list, and saves the snapshot
        if session is None:
            if not ctx.state.get("warned"):
                ctx.state["warned"] = True
                emit(
                    "warning",
                    "ctxlife.no_session",
                    strategy=self.name,
                    hint="pass session_id= to wrap()/manage() or set session_id in the config",
                )
            return
        store = _store(ctx)
        if store is None:
            ctx.record("skipped", reason="no_store")
            return
        view = _view(ctx)
        state = _state(ctx, view)
        keeper = keeper_for(store)
        failed: Exception | None = None
        restored = False
        # Each view's first call of a run: a kickoff builds every agent's list anew, not only the first's.
        first = ctx.first_call_of_run or ctx.first_call_of_view
        if (first or not state.get("started") or state.get("retry_restore")) and self.options.restore:
            failed = self._restore(ctx, store, keeper, session, view, state)
            restored = failed is None and bool(ctx.actions) and ctx.actions[-1].what == "restored"
        state["started"] = True
        try:
            keeper.record_list(session, ctx.messages, view)
        except Exception:
            # The store failed (down, disk full): the new messages wait in the recorder for the
            # next call, and the host rolls this call's edit back; a restore made in this call is
            # then made again on the next one.
            if restored:
                state["started"] = False
            raise
        if not state.get("restore_failed"):
            # The host saves the snapshot after every strategy ran, if one changed this list.
            keeper.track(session, view, ctx.messages, by=self.name)
        if failed is not None:
            raise failed  # reported by the host (ctxlife.strategy_failed); the list was left alone

    def _restore(
        self,
        ctx: ctxlife.LLMCallContext,
        store: SessionStore,
        keeper: Keeper,
        session: str,
        view: str,
        state: dict[str, Any],
    ) -> Exception | None:
        """Restore the list by alignment; return the error when the restore failed (list left alone)."""
        try:
            restored = self._restored_list(ctx, store, keeper, session, view)
        except Exception as exc:  # noqa: BLE001 - a failed restore must leave the list alone and never block recording
            # A record that is not a message stays bad: give up for this host. Anything else (the
            # store unreachable, a read failing) is retried on the next calls, a few times.
            attempts = int(state.get("retry_restore", 0)) + 1
            permanent = isinstance(exc, BadSessionError) or attempts >= _RESTORE_ATTEMPTS
            state["retry_restore"] = 0 if permanent else attempts
            state["restore_failed"] = str(exc)
            emit(
                "error",
                "ctxlife.restore_failed",
                strategy=self.name,
                session_id=session,
                view=view,
                error=f"{type(exc).__name__}: {exc}",
                retried=not permanent,
                hint="the list was left as the caller sent it; no snapshot is written for this view until a "
                "restore succeeds (fix or remove the record named, e.g. with `ctxlife session export`)",
            )
            return exc
        state["retry_restore"] = 0
        state.pop("restore_failed", None)
        if restored is None:
            return None
        messages, from_snapshot, from_tail = restored
        ctx.messages[:] = messages
        ctx.record("restored", messages=from_snapshot + from_tail, from_raw_tail=from_tail)
        return None

    def _restored_list(
        self, ctx: ctxlife.LLMCallContext, store: SessionStore, keeper: Keeper, session: str, view: str
    ) -> tuple[list[dict[str, Any]], int, int] | None:
        """The restored list, or None when there is nothing to restore or the list holds the conversation."""
        recorder = keeper.recorder
        restored_view = restore_view(store, session, view)
        if restored_view.tokens:  # counted once at append: the history is not tokenized again
            ctx.tokens.remember(restored_view.messages, restored_view.tokens)
        if restored_view.records:  # one read of the raw history, for the recorder too
            recorder.prime(session, view, restored_view.records)
        elif restored_view.snapshot is not None:  # compacted: the recorder reads from the kept messages on
            recorder.kept_from(session, view, restored_view.messages, restored_view.slots)
        for message, slot in zip(restored_view.messages, restored_view.slots, strict=True):
            if not isinstance(message.get("role"), str):
                raise BadSessionError(
                    f"session {session!r} view {view!r}: raw record {slot} is not a message (it has no string "
                    f"'role'); it is never put into the model's list. Remove or fix it in the raw history "
                    f"(`ctxlife session export {session}`)"
                )
        # The caller's first list is diffed against the restored conversation (an edit is an edit).
        recorder.seed(session, restored_view.messages, restored_view.slots, view, restored_view.fingerprints)
        saved = restored_view.messages
        if not saved:
            return None  # a new session
        messages = ctx.messages
        found = recorder.align(session, messages, view)
        conversation = sum(1 for m in saved if recordable(m))
        if (found.aligned and (found.overlap >= 2 or found.overlap >= conversation)) or recorder.holds(
            session, messages, view
        ):
            # The list holds the recorded conversation's end (two messages of it, or all of a shorter
            # one): a stateless caller, or a new host for a caller that kept its list. Nothing to
            # put back.
            ctx.record("skipped", reason="list_holds_conversation")
            return None
        current_system = [m for m in messages if is_system(m) and not is_summary(m)]
        # Everything else the run starts with (the new user message, and whatever the caller put
        # before it) follows the restored conversation.
        current = [m for m in messages if not is_system(m) or is_summary(m)]
        # Text a redaction strategy removes never comes back through a restore (ctxlife_filter_text).
        restored = [ctx.filter_message(m, "restore") for m in saved if not (is_system(m) and not is_summary(m))]
        if not current_system:  # nothing newer to prefer: keep the saved prompt
            current_system = [m for m in saved if is_system(m) and not is_summary(m)]
        result = current_system + restored + current
        fmt = ctx.message_format
        problems = validate(result, fmt)
        if problems and len(problems) > len(validate(messages, fmt)):
            raise BadSessionError(
                f"session {session!r} view {view!r}: the restored conversation is not a valid message list "
                f"({problems[0]})"
            )
        from_tail = max(0, len(saved) - restored_view.from_snapshot)
        return result, len(restored) - from_tail, from_tail

    # -- node 6: save at task end ---------------------------------------------------------

    @ctxlife.hookimpl
    def ctxlife_task_end(self, ctx: ctxlife.TaskContext) -> None:
        if ctx.session_id is None or not ctx.messages:
            return
        store = _store(ctx)
        if store is None:
            return
        view = _view(ctx)
        state = _state(ctx, view)
        # The task's final messages are copies of the live list; what is new (the final answer)
        # is found by alignment like any other list.
        keeper_for(store).record_list(ctx.session_id, ctx.messages, view)
        self._save(ctx, store, ctx.session_id, view, state, ctx.messages)

    def _save(
        self,
        ctx: ctxlife.HookContext,
        store: SessionStore,
        session: str,
        view: str,
        state: dict[str, Any],
        messages: list[dict[str, Any]],
    ) -> None:
        keeper = keeper_for(store)
        if state.get("restore_failed"):
            # The list lacks the saved conversation: writing it would destroy the good snapshot.
            ctx.record("skipped", reason="restore_failed")
            return
        pending = keeper.recorder.pending(session, view)
        if pending:
            # The raw history must hold everything a snapshot shows first, or a restore would
            # read the pending messages twice (in the snapshot and in the raw tail after it).
            ctx.record("skipped", reason="raw_history_pending", pending=pending)
            return
        snapshot = keeper.save_snapshot(session, view, messages)
        if snapshot is not None:
            ctx.record("snapshot_saved", messages=len(messages), raw_length=snapshot.raw_length)


def _store(ctx: ctxlife.HookContext) -> SessionStore | None:
    store = ctx.store
    return store if isinstance(store, SessionStore) else None


def _view(ctx: ctxlife.HookContext) -> str:
    view = getattr(ctx, "view", "")
    return view if isinstance(view, str) else ""


def _state(ctx: ctxlife.HookContext, view: str) -> dict[str, Any]:
    views: dict[str, dict[str, Any]] = ctx.state.setdefault("views", {})
    return views.setdefault(view, {})
