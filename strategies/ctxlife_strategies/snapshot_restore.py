"""``snapshot_restore``: sessions that survive restarts — a context snapshot plus the raw history.

Per session two records live in a store (file by default, SQLite or Redis):

* the **snapshot**: the working context the agent should see next (after compaction);
* the **raw history**: every message the conversation produced, appended once, never rewritten.

On the first model call of a run (a kickoff, or a new process under ``manage()``), the live
messages are replaced by the current system message(s), the snapshot's conversation, whatever
the raw history gained after the snapshot was taken, and the current user message: the agent
sees one continuous conversation. New messages are appended to the raw history exactly once.
The snapshot is saved after every call in which another strategy changed the context (a
compaction), and at every task end.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

import ctxlife
from ctxlife.events import emit
from ctxlife.messages import (
    inserted_meta,
    is_inserted,
    is_recall_block,
    is_summary,
    is_system,
    restore_inserted,
    same_messages,
)
from ctxlife.sessions import DEFAULT_STORE_URL, SessionStore, Snapshot, open_store, store_schemes


class SnapshotRestore(ctxlife.Strategy):
    name = "snapshot_restore"

    class Options(ctxlife.Options):
        store: str = Field(
            DEFAULT_STORE_URL,
            description='Where sessions live: "file://DIR" (default), "sqlite:///PATH.db", '
            '"redis://HOST:PORT/DB" or "rediss://..." (with ?ttl=SECONDS for expiry).',
        )
        restore: bool = Field(True, description="Restore the saved context on the first model call of a run.")

        @field_validator("store")
        @classmethod
        def _has_scheme(cls, value: str) -> str:
            if "://" not in value:
                raise ValueError(f"expected a store URL such as {DEFAULT_STORE_URL!r}, got {value!r}")
            return value

    options: Options

    def __init__(self, options: SnapshotRestore.Options | None = None, settings: ctxlife.SharedSettings | None = None) -> None:
        super().__init__(options, settings)
        scheme = self.options.store.split("://", 1)[0].lower()
        if scheme not in store_schemes():
            where = f" ({self.settings.origin(self.name, 'store')})"
            raise ctxlife.StrategyOptionsError(
                f"strategy 'snapshot_restore' option 'store'{where}: unknown session store scheme {scheme!r}; "
                f"known schemes: {', '.join(store_schemes())}"
            )
        self._store: SessionStore = open_store(self.options.store)

    def session_store(self) -> SessionStore:
        return self._store

    def close(self) -> None:
        self._store.close()

    # -- node 2, first: restore and record ------------------------------------------------

    @ctxlife.hookimpl(tryfirst=True)
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        session = ctx.session_id
        if session is None:
            if not ctx.state.get("warned"):
                ctx.state["warned"] = True
                emit("warning", "ctxlife.no_session", strategy=self.name, hint="pass session_id= to wrap()/manage() or set session_id in the config")
            return
        if ctx.first_call_of_run or "raw_length" not in ctx.state:
            # Count once per run; afterwards this worker keeps the count as it appends.
            ctx.state["raw_length"] = self._store.raw_length(session)
            if ctx.first_call_of_run and self.options.restore:
                self._restore(ctx, session)
        self._record_new(ctx.state, ctx.messages, session)

    def _restore(self, ctx: ctxlife.LLMCallContext, session: str) -> None:
        snapshot = self._store.load_snapshot(session)
        saved = snapshot.messages if snapshot is not None else []
        if snapshot is not None:  # the summaries it holds are ctxlife's, in this process too
            restore_inserted(saved, snapshot.meta.get("inserted"))
        tail = self._store.read_raw(session, start=snapshot.raw_length if snapshot is not None else 0)
        if not saved and not tail:
            return  # a new session
        messages = ctx.messages
        current_system = [m for m in messages if is_system(m) and not is_summary(m)]
        # Everything else the run starts with (the new user message, and whatever the caller put
        # before it) follows the restored conversation.
        current = [m for m in messages if not is_system(m) or is_summary(m)]
        restored = [m for m in saved if not (is_system(m) and not is_summary(m))]
        if not current_system:  # nothing newer to prefer: keep the saved prompt
            current_system = [m for m in saved if is_system(m) and not is_summary(m)]
        messages[:] = current_system + restored + tail + current
        # What came from the store is already in the raw history.
        ctx.state["seen"] = {id(m): m for m in (*restored, *tail)}
        ctx.record("restored", messages=len(restored) + len(tail), from_raw_tail=len(tail))

    def _record_new(self, state: dict[str, Any], messages: list[dict[str, Any]], session: str) -> None:
        """Append every message not recorded yet (not system prompts, not summaries) to the raw history."""
        seen: dict[int, dict[str, Any]] = state.get("seen", {})
        new = [m for m in messages if id(m) not in seen and not is_system(m) and not is_inserted(m)]
        # Remember only what is in the live list now, so memory follows the context, not the session.
        state["seen"] = {id(m): m for m in messages}
        state["view"] = list(messages)
        self._append(state, session, new)

    def _append(self, state: dict[str, Any], session: str, new: list[dict[str, Any]]) -> None:
        """Append ``new`` after whatever an earlier failed write left pending; keep it pending on failure.

        A store that is down (Redis restarting, a full disk) must not lose messages: they wait in
        ``backlog`` (even if a compaction evicts them from the context) until a write succeeds.
        """
        batch = [*state.get("backlog", ()), *new]
        if not batch:
            return
        state["backlog"] = batch
        self._store.append_raw(session, batch)
        state["backlog"] = []
        state["raw_length"] = state.get("raw_length", 0) + len(batch)

    # -- node 2, last: save after a compaction --------------------------------------------

    @ctxlife.hookimpl(specname="ctxlife_before_llm_call", trylast=True)
    def save_after_compaction(self, ctx: ctxlife.LLMCallContext) -> None:
        if ctx.session_id is None:
            return
        view = ctx.state.get("view")
        if view is None or same_messages(view, ctx.messages):
            return
        # Another strategy rewrote the context: messages it added (a summary) are not raw history,
        # but the snapshot must hold them.
        ctx.state["seen"] = {id(m): m for m in ctx.messages}
        ctx.state["view"] = list(ctx.messages)
        self._save(ctx, ctx.messages)

    # -- node 6: save at task end ---------------------------------------------------------

    @ctxlife.hookimpl
    def ctxlife_task_end(self, ctx: ctxlife.TaskContext) -> None:
        if ctx.session_id is None or not ctx.messages:
            return
        view = ctx.state.get("view") or []
        # The task's final messages are copies of the live list; what is new (the final answer)
        # is what follows our last view of it.
        final = ctx.messages
        new = [m for m in final[len(view):] if not is_system(m) and not is_inserted(m)]
        self._append(ctx.state, ctx.session_id, new)
        self._save(ctx, final)
        ctx.state.pop("seen", None)
        ctx.state.pop("view", None)

    def _save(self, ctx: ctxlife.HookContext, messages: list[dict[str, Any]]) -> None:
        assert ctx.session_id is not None
        if ctx.state.get("backlog"):
            # The raw history must hold everything a snapshot shows first, or a restore would
            # read the pending messages twice (in the snapshot and in the raw tail after it).
            ctx.record("skipped", reason="raw_history_pending", pending=len(ctx.state["backlog"]))
            return
        # Everything in the raw history up to now is reflected in this snapshot.
        # Messages a strategy inserts for one call only (the recall block) are not part of the session.
        kept = [m for m in messages if not is_recall_block(m)]
        snapshot = Snapshot(
            session_id=ctx.session_id,
            messages=kept,
            raw_length=ctx.state.get("raw_length", 0),
            meta={"inserted": inserted_meta(kept)},  # summaries stay recognised after a restore elsewhere
        )
        self._store.save_snapshot(snapshot)
        ctx.record("snapshot_saved", messages=len(messages), raw_length=snapshot.raw_length)
