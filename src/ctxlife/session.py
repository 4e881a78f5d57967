"""``ctxlife.Session`` and ``ctxlife.AsyncSession``: a conversation that outlives the process, for any loop.

A session keeps one conversation in the host's store (the top-level ``store`` setting): its raw
history (every message, exactly once) and a snapshot of the working context (after compaction).
The API follows the ecosystem's convention (the OpenAI Agents SDK's ``Session`` protocol:
``get_items``, ``add_items``, ``pop_item``, ``clear_session``) and adds the two calls a loop of
your own needs around each model call::

    import ctxlife

    with ctxlife.Session("u42", config="ctxlife.toml", system="You are a clerk.") as session:
        messages = session.prepare({"role": "user", "content": "Where is order 17?"})
        reply = call_your_model(messages)           # restored context + the new turn, managed
        session.record_reply(reply)                 # the reply is history too (also the last one)

After a restart, ``Session("u42", ...)`` gives back the same conversation: ``prepare`` sends the
snapshot, the records after it and the new turn. :class:`AsyncSession` has the same methods as
coroutines (its ``get_items``/``add_items``/``pop_item``/``clear_session`` have the Agents SDK's
signatures, so it can be handed to code that expects that protocol).

One session holds several *views* (lanes): each agent or task of a crew records and restores its
own. ``Session(id, view="researcher")`` reads and writes one view; ``clear()`` removes the whole
session (every view).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Iterable, Sequence
from typing import Any, Self

from ctxlife.api import as_message, resolve_settings
from ctxlife.config import Settings
from ctxlife.errors import InvalidMessagesError
from ctxlife.host import Host, Report
from ctxlife.messages import check_shape, inserted_meta, is_inserted, is_recall_block, is_system, same_messages
from ctxlife.messages.previous import frozen_copy
from ctxlife.recall import configured_index_dir, remove_index
from ctxlife.sessions.base import RawRecord, SessionStore, Snapshot
from ctxlife.sessions.ids import session_key, validate_view
from ctxlife.sessions.recording import Recorder, recorder_for
from ctxlife.sessions.restore import Restored, restore_after, restore_view

__all__ = ["AsyncSession", "Session"]

Message = dict[str, Any]


class Session:
    """One conversation (one view of one session) kept in the host's store.

    Args:
        session_id: the session (letters, digits, ``.``, ``_``, ``-``; see
            :func:`~ctxlife.sessions.validate_session_id`).
        config: a config path, :class:`~ctxlife.config.Settings` or None (``./ctxlife.toml``, then
            ``[tool.ctxlife]``, then the defaults), as for :func:`ctxlife.manage`. Its ``store``
            is where the session lives; its strategies manage what :meth:`messages` returns.
        view: the lane inside the session (an agent's or task's; ``""``: the default view).
        system: a system prompt put first in every list :meth:`messages` returns (never recorded).
        context_window, model, plugins, summary_model: as for :class:`ctxlife.Host`.
        host: an existing host to use (shared by many sessions); it is not closed by :meth:`close`.

    Thread-safe as far as the store and host are; one object per conversation is the usual shape.
    """

    def __init__(
        self,
        session_id: str,
        config: str | os.PathLike[str] | Settings | None = None,
        *,
        view: str = "",
        system: str | None = None,
        context_window: int | None = None,
        model: str | None = None,
        plugins: Sequence[object] = (),
        host: Host | None = None,
        summary_model: object | None = None,
    ) -> None:
        session_id = session_key(session_id)  # any string: a framework's id is mapped to a store key
        validate_view(view)
        self.session_id = session_id
        self.view = view
        self.system = system
        self._owns_host = host is None
        if host is None:
            host = Host(
                resolve_settings(config),
                context_window=context_window,
                model=model,
                session_id=session_id,
                plugins=plugins,
                summary_model=summary_model,
            )
        self.host: Host = host
        try:
            store = host.open_store()  # the config's store (the default one when it names none)
        except Exception:
            if self._owns_host:
                host.close()
            raise
        self.store: SessionStore = store
        self.last_report: Report | None = None
        """The :class:`~ctxlife.host.Report` of the latest :meth:`messages`/:meth:`prepare` call."""
        # The view's conversation as last read: the next read adds the records written since
        # (see restore_after) instead of reading the whole history again. Callers get copies.
        self._last_read: Restored | None = None

    # -- the Agents SDK protocol (sync) -----------------------------------------------------------

    def get_items(self, limit: int | None = None) -> list[Message]:
        """The conversation so far: the view's snapshot (compacted context) and every record after it.

        System prompts are not items (pass them as ``system=``); a summary ctxlife wrote is one.
        With ``limit``, only the latest ``limit`` items, oldest first.
        """
        items, _ = self._restore()
        if limit is None:
            return items
        return items[-limit:] if limit > 0 else []

    def add_items(self, items: Iterable[Message]) -> None:
        """Append ``items`` to the view's raw history as they are (each call adds them again).

        Chat messages only: OpenAI Responses API items (what the Agents SDK's ``Runner`` saves) are
        refused here, naming :class:`ctxlife.integrations.openai_agents.AgentsSession`, the session
        that converts them (stored as they are, they would make the next :meth:`messages` fail).
        """
        batch = list(items)
        for index, item in enumerate(batch):
            _refuse_responses_item(item, index)
        self.add(*batch)

    def pop_item(self) -> Message | None:
        """Remove and return the session's latest item (None if empty); see :meth:`pop`."""
        return self.pop()

    def clear_session(self) -> None:
        """Delete the whole session: every view's snapshot and records, and its blobs."""
        self.clear()

    # -- ctxlife's own names ----------------------------------------------------------------------

    def add(self, *messages: Message) -> list[RawRecord]:
        """Record ``messages`` in the view, in order; return their records (sequence numbers).

        A message that is not JSON (NaN, bytes) is recorded in a JSON-safe form (the record's
        ``quarantined`` says why) and never blocks the others.
        """
        batch = [_checked(m, i) for i, m in enumerate(messages)]
        if not batch:
            return []
        return self._recorder().add(self.session_id, batch, view=self.view)

    def messages(self, *new: Message) -> list[Message]:
        """Return what the model should be sent next, with the ``new`` messages; record them.

        That is the system prompt (``system=``), the restored conversation (the view's snapshot
        and the records after it) and the new turn, run through the config's strategies (the
        ``before_llm_call`` node: compaction, recall, ...). When a strategy compacted it, the
        result is saved as the view's snapshot, so the next call starts from it. The list is
        yours: send it as it is.
        """
        turn = [_checked(m, i) for i, m in enumerate(new)]
        items, _ = self._restore(for_host=True)
        listing: list[Message] = [{"role": "system", "content": self.system}] if self.system else []
        listing += items
        listing += turn
        configured = self.host.settings.message_format
        check_shape(
            listing, where=f"session {self.session_id!r}", expected=None if configured == "auto" else configured
        )
        before = list(listing)
        # Record the new turn first (diffed against what was restored), so the list the host hands
        # back after its strategies is all recorded (a strategy that records, such as
        # snapshot_restore, finds nothing new: nothing is recorded twice).
        recorder = self._recorder()
        recorder.record(self.session_id, before, self.view)
        report = self.host.before_llm_call(listing, **self._call_keywords())
        self.last_report = report
        saved = any(action.what == "snapshot_saved" for action in report.actions)
        if not saved and not same_messages(before, listing):
            self._save(listing, recorder.covered(self.session_id, self.view))
        recorder.leave(self.session_id, listing, self.view)
        return listing

    def prepare(self, *new: Message) -> list[Message]:
        """:meth:`messages`: record the new turn and return the managed list to send to the model.

        Call :meth:`record_reply` with the model's answer afterwards.
        """
        return self.messages(*new)

    def record_reply(self, reply: object) -> RawRecord:
        """Record the model's reply (text, message dict or SDK message object) in the view.

        Record every reply, the last one of a process included: after a restart the conversation
        then continues after it (not after two user turns in a row).
        """
        records = self.host.record_reply(as_message(reply), session_id=self.session_id, view=self.view)
        return records[0]

    def pop(self) -> Message | None:
        """Remove and return the view's latest message (None when it has none).

        The raw history keeps a ``remove`` record (the message stays in the log for audit until
        :meth:`erase`); restores and :meth:`get_items` no longer show it. A summary that already
        folded it in stays as it is.
        """
        restored = self._restored()
        for message, slot in zip(reversed(restored.messages), reversed(restored.slots), strict=True):
            if slot is not None:
                self._recorder().remove(self.session_id, [slot], self.view)
                popped: Message = message
                return popped
        return None

    def records(self) -> list[RawRecord]:
        """The view's current messages with their sequence numbers (``record.seq``), oldest first.

        The numbers are what :meth:`edit`, :meth:`remove` and :meth:`erase` take. Edited messages
        show their latest text; removed ones are not listed (``ctxlife session export --all``
        shows the whole log).
        """
        return self.store.current(self.session_id, self.view)

    def edit(self, seq: int, message: Message) -> RawRecord:
        """Replace the message recorded as ``seq`` (see :meth:`records`) with ``message``.

        A ``replace`` record is written; the next restore and :meth:`messages` show the new text.
        """
        return self._recorder().replace(self.session_id, seq, _checked(message, 0), self.view)[0]

    def remove(self, *seqs: int) -> list[RawRecord]:
        """Remove the messages recorded as ``seqs`` from the conversation (``remove`` records)."""
        return self._recorder().remove(self.session_id, list(seqs), self.view)

    def erase(self, *seqs: int) -> list[int]:
        """Delete messages for privacy: their text is overwritten everywhere the store keeps it (raw
        history, snapshots, tool-output blobs) and they leave the conversation (and the recall
        index). Returns the sequence numbers erased. See :meth:`SessionStore.erase`."""
        erased = self.store.erase(self.session_id, seqs)
        self._forget_everywhere()
        return erased

    def erase_matching(self, pattern: str) -> list[int]:
        """:meth:`erase` every message matching the regular expression ``pattern``, and scrub the
        matches from summaries. Returns the sequence numbers erased."""
        erased = self.store.erase_matching(self.session_id, pattern)
        self._forget_everywhere()
        return erased

    def clear(self) -> None:
        """Delete the whole session (every view's snapshot and records, and its blobs)."""
        self.store.delete(self.session_id)
        self._forget_everywhere()

    def _forget_everywhere(self) -> None:
        """After an erase or delete: what this process and the config keep of the session outside
        the store go too (the recorder's state, the host's lists, a recall index in ``index_dir``)."""
        self._recorder().forget(self.session_id)
        self.host.forget_lists(self.session_id)
        folder = configured_index_dir(self.host.settings)
        if folder is not None:
            remove_index(folder, self.session_id)

    # -- lifetime ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the host (and its store) if this session created it. Idempotent."""
        if self._owns_host:
            self._owns_host = False
            self.host.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        view = f", view={self.view!r}" if self.view else ""
        return f"{type(self).__name__}({self.session_id!r}{view}, store={self.store.url!r})"

    # -- internals --------------------------------------------------------------------------------

    def _recorder(self) -> Recorder:
        return recorder_for(self.store)

    def _call_keywords(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "view": self.view}

    def _restored(self, for_host: bool = False) -> Restored:
        last = self._last_read
        current = restore_after(self.store, self.session_id, self.view, last) if last is not None else None
        if current is None:
            current = restore_view(self.store, self.session_id, self.view)
            if current.records:  # one read of the raw history, for the recorder too
                self._recorder().prime(self.session_id, self.view, current.records)
                current = dataclasses.replace(current, records=[])
        self._last_read = current
        # The caller's messages are its own to edit: copies, never the ones kept for the next read.
        restored = dataclasses.replace(
            current,
            messages=[frozen_copy(m) if type(m) is dict else m for m in current.messages],
            slots=list(current.slots),
        )
        if for_host and restored.tokens:  # the counts the store kept: the host does not tokenize the history again
            self.host.counter().remember(restored.messages, restored.tokens)
        self._recorder().seed(self.session_id, restored.messages, restored.slots, self.view, restored.fingerprints)
        return restored

    def _restore(self, for_host: bool = False) -> tuple[list[Message], int]:
        """The view's conversation (snapshot + the events after it) and the last sequence number it covers;
        ``for_host``: it goes to the host next, which then takes the token counts the store kept."""
        restored = self._restored(for_host)
        items = [
            # text a redaction strategy removes never comes back (ctxlife_filter_text, where="restore")
            self.host.filter_message(m, where="restore", session_id=self.session_id, view=self.view)
            for m in restored.messages
            if not is_recall_block(m) and not (is_system(m) and not is_inserted(m))
        ]
        return items, restored.covered

    def _save(self, listing: list[Message], covered: int) -> None:
        kept = [m for m in listing if not is_recall_block(m)]
        slots = self._recorder().slots_of(self.session_id, kept, self.view)
        self.store.save_snapshot(
            Snapshot(
                session_id=self.session_id,
                view=self.view,
                messages=kept,
                raw_length=covered,
                meta={"inserted": inserted_meta(kept), "slots": slots},
            )
        )


def _refuse_responses_item(item: object, index: int) -> None:
    if not isinstance(item, dict) or "type" not in item:  # chat messages carry no "type"
        return
    try:
        check_shape([item], where=f"add_items: item {index}")
    except InvalidMessagesError as exc:
        if "Responses API" in str(exc):
            raise InvalidMessagesError(
                f"{exc}. For the OpenAI Agents SDK's Runner.run(session=...), use "
                "ctxlife.integrations.openai_agents.AgentsSession (pip install 'ctxlife[agents]'): "
                "it converts Responses items and manages each model call"
            ) from None


def _checked(message: object, index: int) -> Message:
    if not isinstance(message, dict):
        raise InvalidMessagesError(
            f"message {index} must be a message dict (e.g. {{'role': 'user', 'content': '...'}}), "
            f"got {type(message).__name__}; for a model's reply object use record_reply()"
        )
    return message


class AsyncSession:
    """:class:`Session` for asyncio apps: the same methods as coroutines, run in a worker thread.

    The store and the strategies (an LLM summary can take seconds) never block the event loop.
    ``get_items``/``add_items``/``pop_item``/``clear_session`` have the OpenAI Agents SDK
    ``Session`` protocol's signatures. The session (host, store) is built on first use, in a
    worker thread too. Use ``async with`` or :meth:`close`.
    """

    def __init__(
        self,
        session_id: str,
        config: str | os.PathLike[str] | Settings | None = None,
        *,
        view: str = "",
        system: str | None = None,
        context_window: int | None = None,
        model: str | None = None,
        plugins: Sequence[object] = (),
        host: Host | None = None,
        summary_model: object | None = None,
    ) -> None:
        session_id = session_key(session_id)  # any string: a framework's id is mapped to a store key
        validate_view(view)
        self.session_id = session_id
        self.view = view
        self._args = (config,)
        self._kwargs: dict[str, Any] = {
            "view": view,
            "system": system,
            "context_window": context_window,
            "model": model,
            "plugins": plugins,
            "host": host,
            "summary_model": summary_model,
        }
        self._session: Session | None = None
        self._opening = asyncio.Lock()

    async def session(self) -> Session:
        """The underlying :class:`Session` (built in a worker thread on first use)."""
        if self._session is None:
            async with self._opening:
                if self._session is None:
                    self._session = await asyncio.to_thread(Session, self.session_id, *self._args, **self._kwargs)
        return self._session

    async def get_items(self, limit: int | None = None) -> list[Message]:
        """:meth:`Session.get_items`."""
        return await asyncio.to_thread((await self.session()).get_items, limit)

    async def add_items(self, items: list[Message]) -> None:
        """:meth:`Session.add_items`."""
        await asyncio.to_thread((await self.session()).add_items, list(items))

    async def pop_item(self) -> Message | None:
        """:meth:`Session.pop_item`."""
        return await asyncio.to_thread((await self.session()).pop_item)

    async def clear_session(self) -> None:
        """:meth:`Session.clear_session`."""
        await asyncio.to_thread((await self.session()).clear_session)

    async def add(self, *messages: Message) -> list[RawRecord]:
        """:meth:`Session.add`."""
        return await asyncio.to_thread((await self.session()).add, *messages)

    async def messages(self, *new: Message) -> list[Message]:
        """:meth:`Session.messages` without blocking the event loop."""
        return await asyncio.to_thread((await self.session()).messages, *new)

    async def prepare(self, *new: Message) -> list[Message]:
        """:meth:`Session.prepare` without blocking the event loop."""
        return await asyncio.to_thread((await self.session()).prepare, *new)

    async def record_reply(self, reply: object) -> RawRecord:
        """:meth:`Session.record_reply`."""
        return await asyncio.to_thread((await self.session()).record_reply, reply)

    async def pop(self) -> Message | None:
        """:meth:`Session.pop`."""
        return await asyncio.to_thread((await self.session()).pop)

    async def records(self) -> list[RawRecord]:
        """:meth:`Session.records`."""
        return await asyncio.to_thread((await self.session()).records)

    async def edit(self, seq: int, message: Message) -> RawRecord:
        """:meth:`Session.edit`."""
        return await asyncio.to_thread((await self.session()).edit, seq, message)

    async def remove(self, *seqs: int) -> list[RawRecord]:
        """:meth:`Session.remove`."""
        return await asyncio.to_thread((await self.session()).remove, *seqs)

    async def erase(self, *seqs: int) -> list[int]:
        """:meth:`Session.erase`."""
        return await asyncio.to_thread((await self.session()).erase, *seqs)

    async def erase_matching(self, pattern: str) -> list[int]:
        """:meth:`Session.erase_matching`."""
        return await asyncio.to_thread((await self.session()).erase_matching, pattern)

    async def clear(self) -> None:
        """:meth:`Session.clear`."""
        await asyncio.to_thread((await self.session()).clear)

    async def close(self) -> None:
        """:meth:`Session.close` (nothing to do if the session was never used)."""
        if self._session is not None:
            await asyncio.to_thread(self._session.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        view = f", view={self.view!r}" if self.view else ""
        return f"{type(self).__name__}({self.session_id!r}{view})"
