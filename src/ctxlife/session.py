"""``ctxlife.Session`` and ``ctxlife.AsyncSession``: a conversation that outlives the process, for any loop.

The API (the Agents SDK's ``Session`` protocol plus ``prepare``/``record_reply`` around each model
call), views, and an example: docs/sessions.md, "The Session API (any loop, no framework)".
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from collections.abc import Iterable, Sequence
from itertools import compress, repeat
from typing import Any, Self, cast

from ctxlife.api import as_message, resolve_settings
from ctxlife.config import Settings
from ctxlife.errors import InvalidMessagesError, StoreError
from ctxlife.events import emit
from ctxlife.host import Host
from ctxlife.host_report import Report, StrategyFailure
from ctxlife.messages import (
    Problem,
    check_shape,
    is_inserted,
    is_recall_block,
    is_system,
    is_tool_result,
    plain_role,
    same_messages,
    validate,
)
from ctxlife.messages.formats import FORMAT_NAMES, SYSTEM_ROLES, ShapeMemo, clear_format
from ctxlife.messages.previous import frozen_copy
from ctxlife.recall import configured_index_dir, remove_index
from ctxlife.sessions.base import SessionStore
from ctxlife.sessions.ids import original_session_id, session_key, validate_view
from ctxlife.sessions.keeper import Keeper, keeper_for
from ctxlife.sessions.records import RawRecord, json_safe, no_collection
from ctxlife.sessions.restore import Restored

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

    Safe to share between threads and concurrent requests: calls on one object run one at a time.
    Several objects (processes, workers) on one session never lose or reorder each other's
    messages: each records its messages by appending after what the others recorded.
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
        self.session_id: str = session_id
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
        """The :class:`~ctxlife.host_report.Report` of the latest :meth:`messages`/:meth:`prepare` call."""
        # The view's conversation as last read: the next read adds the records written since
        # (see restore_after) instead of reading the whole history again. Callers get copies.
        self._last_read: Restored | None = None
        # Whether a read handed its messages to a caller as decoded (see _restored): then this object
        # has none of its own until it reads again, and keeps what it reads from then on.
        self._handed_out = False
        # One call at a time per object: requests sharing it (threads, AsyncSession's to_thread)
        # queue instead of interleaving a restore of one with the write of another.
        self._lock = threading.RLock()
        # Messages this object recorded since its last read (add, record_reply): a new turn is checked
        # against the conversation as last read plus these.
        self._appended: list[Message] = []
        # What the turn checks classified: the conversation as last read keeps its message objects
        # from read to read, so a turn's check classifies only what is new (see ShapeMemo).
        self._shapes = ShapeMemo()
        # The format the view's conversation is clearly in, once read (see _check_new; message_format auto).
        self._format: str | None = None

    # -- the Agents SDK protocol (sync) -----------------------------------------------------------

    def get_items(self, limit: int | None = None) -> list[Message]:
        """The conversation so far: the view's snapshot (compacted context) and every record after it.

        The prompt of ``system=`` is not an item; a system message added as one is, and so is a
        summary ctxlife wrote.
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
        """Record ``messages`` in the view, in order, exactly as given; return their records.

        Appended after whatever other writers (workers, requests) recorded meanwhile, never over
        it. A message that is not JSON (NaN, bytes) is recorded in a JSON-safe form (the record's
        ``quarantined`` says why) and never blocks the others; one of no known shape even so (an
        unknown role, an OpenAI Responses item), in another format than ``message_format`` (with ``auto``:
        than the conversation's), or a tool result that answers no call recorded before it, is refused with
        :class:`~ctxlife.errors.InvalidMessagesError`, nothing written.
        When the store fails,
        :class:`~ctxlife.errors.StoreError` propagates and nothing is left to be written later:
        call again (messages whose write landed despite the error are not written twice).
        """
        batch = [_checked(m, i) for i, m in enumerate(messages)]
        # A message of no known shape even in its JSON-safe form (an unknown role, a number as content,
        # a Responses item) would be sent on every later call: refused, nothing written.
        if not batch:
            return []
        with self._lock:
            self._check_new(batch, f"session {self._shown!r} add()")
            records = self._keeper().append(self.session_id, batch, self.view)
            self._appended += [r.message for r in records]
            return records

    def messages(self, *new: Message) -> list[Message]:
        """Return what the model should be sent next, with the ``new`` messages; record them.

        The ``new`` messages are appended to the view's raw history as they are (after whatever
        another writer recorded meanwhile). The result is the system prompt (``system=``) and the
        view's conversation (its snapshot and the records after it, the new turn included), run
        through the config's strategies (the ``before_llm_call`` node: compaction, recall, ...).
        When a strategy compacted it, the result is saved as the view's snapshot, so the next call
        starts from it; a snapshot that could not be written is reported in
        :attr:`last_report`'s ``failures`` (the turn is recorded: do not send it again). The
        list is yours: send it as it is.
        """
        turn = [_checked(m, i) for i, m in enumerate(new)]
        with self._lock:
            keeper = self._keeper()
            prompt: list[Message] = [{"role": "system", "content": self.system}] if self.system else []
            expected = self._expected()
            where = f"session {self._shown!r}"
            if turn:  # a turn that would make the list invalid is refused before anything is recorded
                # (against the conversation as last read: the read after the append sees the rest)
                known = self._last_read if self._last_read is not None else self._read()
                # (unfiltered: the host's text filter changes no message's shape; it runs once, below)
                with no_collection():  # (a list and the memo's tuples of the messages' values: acyclic)
                    items = self._items_known(known)
                    check_shape(prompt + items + turn, where=where, expected=expected, memo=self._shapes)
                if _new_problem(_tail(items), turn) is not None:  # confirmed on the conversation as it is now
                    _refuse_invalid_turn(_tail(self._items(self._restored())[0]), turn, where)
                keeper.append(self.session_id, turn, self.view)
            restored = self._restored(for_host=True)
            items, slots = self._items(restored)
            listing = prompt + items
            if not turn:
                check_shape(listing, where=where, expected=expected)
            slot_of = {id(m): slot for m, slot in zip(items, slots, strict=True)}
            # For the call record; this object's own read (never edited, never handed out) is the
            # recorder's copy of the items when they are that read's copies, position by position.
            kept = self._last_read
            mine = kept.messages if kept is not None and items is restored.messages else None
            copied = None if mine is None else [*(dict(m) for m in prompt), *mine]
            keeper.note_list(self.session_id, listing, [None] * len(prompt) + slots, self.view, copied)
            before = list(listing)
            report = self.host.before_llm_call(listing, recorded_by_caller=True, **self._call_keywords())
            self.last_report = report
            # Saved when a strategy changed the conversation, not for the system prompt (the caller's,
            # with the bootstrap text: never restored from the snapshot) nor the recall block alone.
            # (before is the prompt, never an item, + items: its conversation is the items')
            if not same_messages(before, listing) and not same_messages(_conversation(items), _conversation(listing)):
                self._save(report, listing, [slot_of.get(id(m)) for m in listing], restored)
            return listing

    def prepare(self, *new: Message) -> list[Message]:
        """:meth:`messages`: record the new turn and return the managed list to send to the model.

        Call :meth:`record_reply` with the model's answer afterwards.
        """
        return self.messages(*new)

    def record_reply(self, reply: object) -> RawRecord:
        """Record the model's reply (text, message dict or SDK message object) in the view.

        Record every reply, the last one of a process included: after a restart the conversation
        then continues after it (not after two user turns in a row). As :meth:`add` when the
        store fails, or for a message it refuses (no known shape, another format, a tool result that
        answers no call: nothing written).
        """
        message = as_message(reply)
        with self._lock:
            self._check_new([message], f"session {self._shown!r} record_reply()")
            record = self._keeper().append(self.session_id, [message], self.view)[0]
            self._appended.append(record.message)
            return record

    def pop(self) -> Message | None:
        """Remove and return the view's latest recorded message (None when it has none).

        The raw history keeps a ``remove`` record (the message stays in the log for audit until
        :meth:`erase`); restores and :meth:`get_items` no longer show it. A summary that already
        folded it in stays as it is.
        """
        with self._lock:
            # The latest recorded message, whether or not a compaction left it in the context.
            latest = self.store.latest(self.session_id, self.view)
            if latest is None:
                return None
            self._keeper().remove(self.session_id, [latest.seq], self.view)
            popped: Message = latest.message
            return popped

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
        A list of yours that still holds the old text, handed to ``manage()``, writes it back (as
        another writer's list would): edit your list too. (A removed or erased message it still
        holds is not recorded again.)

        A message of no known shape (an unknown role, content that is not text or parts, another format
        than ``message_format``), or one that
        would make the conversation invalid where it stands (a tool result in place of a question), is
        refused with :class:`~ctxlife.errors.InvalidMessagesError` and nothing is written (every later
        call would send it).
        """
        where = f"session {self._shown!r} edit({seq})"
        new = _checked(message, 0)
        with self._lock:
            self._check_new([new], where, appended=False)
            items, slots = self._items(self._restored())
            if seq in slots:  # (a message a compaction left out of the context is checked alone)
                at = slots.index(seq)
                edited = [*items[:at], new, *items[at + 1 :]]
                before, after = validate(items), validate(edited)
                if len(after) > len(before):
                    problem = after[-1]
                    raise InvalidMessagesError(
                        f"{where} would make the conversation invalid ({problem.code}: {problem.detail}); "
                        "nothing was recorded"
                    )
            return self._keeper().replace(self.session_id, seq, new, self.view)

    def remove(self, *seqs: int) -> list[RawRecord]:
        """Remove the messages recorded as ``seqs`` from the conversation (``remove`` records)."""
        with self._lock:
            return self._keeper().remove(self.session_id, list(seqs), self.view)

    def erase(self, *seqs: int) -> list[int]:
        """Delete messages for privacy: their text is overwritten everywhere the store keeps it (raw
        history, snapshots, tool-output blobs) and they leave the conversation (and the recall
        index). Returns the sequence numbers erased. See :meth:`SessionStore.erase`. A list of
        yours that still holds an erased message (``manage()`` on it) does not record it again in
        this process; drop it from the list."""
        with self._lock:
            erased = self._keeper().erase(self.session_id, list(seqs))
            self._forget(erased=True)
            return erased

    def erase_matching(self, pattern: str) -> list[int]:
        """:meth:`erase` every message matching the regular expression ``pattern``, and scrub the
        matches from summaries. Returns the sequence numbers erased."""
        with self._lock:
            erased = self._keeper().erase(self.session_id, pattern=pattern)
            self._forget(erased=True)
            return erased

    def clear(self) -> None:
        """Delete the whole session (every view's snapshot and records, and its blobs)."""
        with self._lock:
            self.store.delete(self.session_id)
            self._forget()

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
        return f"{type(self).__name__}({self._shown!r}{view}, store={self.store.url!r})"

    # -- internals --------------------------------------------------------------------------------

    def _keeper(self) -> Keeper:
        return keeper_for(self.store)

    def _forget(self, *, erased: bool = False) -> None:
        """After an erase or delete: what this process and the config keep of the session outside
        the store go too (the keeper's state, the host's lists, a recall index in ``index_dir``)."""
        self._last_read = None
        self._format = None
        if not erased:  # (the keeper's erase forgot what it had to, keeping what was erased)
            self._keeper().forget(self.session_id)
        self.host.forget_lists(self.session_id)
        folder = configured_index_dir(self.host.settings)
        if folder is not None:
            remove_index(folder, self.session_id)

    @property
    def _shown(self) -> str:
        """The session's id as the caller gave it (``session_id`` is its store key), for errors and repr."""
        return original_session_id(self.session_id)

    def _call_keywords(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "view": self.view}

    def _expected(self) -> str | None:
        """The configured message format a message must be in (None: any known one, ``auto``)."""
        configured = self.host.settings.message_format
        return None if configured == "auto" else configured

    def _check_new(self, new: list[Message], where: str, *, appended: bool = True) -> None:
        """Refuse (:class:`InvalidMessagesError`, before anything is written) messages that every later call
        would send and fail on: of no known shape, in another format than ``message_format``, or, with
        ``auto``, clearly in the other format than the one the view's conversation is clearly in (an
        Anthropic ``tool_use`` block after OpenAI tool calls). The lock is held."""
        safe = [json_safe(m) for m in new]
        expected = self._expected()
        check_shape(safe, where=where, expected=expected)
        if appended and any(map(is_tool_result, safe)):  # (an edit is checked where it stands: see edit)
            self._refuse_orphan_results(safe, where)
        if expected is not None:
            return
        found, first = clear_format(safe)
        if found is None:
            return  # plain text: valid in either format
        have = self._conversation_format()
        if have is not None and have != found:
            # Confirmed on the conversation as stored now (another writer may have deleted and replaced it).
            have = self._format = clear_format(_conversation(self._read().messages))[0]
        if have is not None and have != found:
            raise InvalidMessagesError(
                f"{where}[{first}] is an {FORMAT_NAMES[found]} message but the session's conversation is in "
                f"{FORMAT_NAMES[have]} format; one conversation must use one format: convert the message "
                "(every later call would send both and fail); nothing was recorded"
            )

    def _refuse_orphan_results(self, new: list[Message], where: str) -> None:
        """A tool result that answers no call recorded before it can never be answered: every later call would
        send it and the provider refuse the list. (A call still waiting for its results is the middle of a
        tool loop: allowed.) Checked against the conversation as last read, confirmed on a fresh read."""

        def orphans_after(known: Restored) -> tuple[list[Message], list[Problem]]:
            tail = _tail(self._items_known(known))
            return tail, [p for p in validate(tail + new) if p.code == "orphan_tool_result" and p.index >= len(tail)]

        kept = self._last_read
        tail, orphans = orphans_after(kept if kept is not None else self._read())
        if orphans and kept is not None:
            tail, orphans = orphans_after(self._read())  # (another writer may have recorded the call meanwhile)
        if not orphans:
            return
        raise InvalidMessagesError(
            f"{where}[{orphans[0].index - len(tail)}] is a tool result that answers no call recorded before it "
            f"({orphans[0].detail}); nothing was recorded. Record the assistant message that made the call first "
            "(record_reply), then its results"
        )

    def _conversation_format(self) -> str | None:
        """The format the view's conversation is clearly in (None while it is plain text), read once and kept:
        a conversation's format does not change (it is forgotten with the conversation, see _forget)."""
        if self._format is None:
            known = self._last_read if self._last_read is not None else self._read()
            self._format = clear_format(self._items_known(known))[0]
        return self._format

    def _items_known(self, known: Restored) -> list[Message]:
        """The conversation as ``known`` (a read) holds it, with what this object recorded since."""
        return [*_conversation(known.messages), *self._appended]

    def _read(self, messages_only: bool = False) -> Restored:
        """The view's conversation as the store has it now, kept for the next read (never handed out)."""
        current = self._keeper().restore(self.session_id, self.view, self._last_read, messages_only=messages_only)
        self._appended = []  # what this object recorded since is in what was just read
        if current.records:
            current = dataclasses.replace(current, records=[])  # handed to the recorder; not kept twice
        self._last_read = current
        return current

    def _restored(self, for_host: bool = False) -> Restored:
        first = self._last_read is None and not self._handed_out
        # A first read that is only handed out (get_items) needs no fingerprints or token counts.
        current = self._read(messages_only=first and not for_host)
        if first and current.plain:
            # This object's first read, every message decoded just now (read_view): the caller takes
            # them as they are, no copy; a later read of this object reads the store again and keeps that.
            self._last_read = None
            self._handed_out = True
            restored = current
        else:
            # The caller's messages are its own to edit: copies, never the ones kept for the next read.
            with no_collection():  # (copies of JSON values: acyclic)
                copies = [frozen_copy(m) if type(m) is dict else m for m in current.messages]
            restored = dataclasses.replace(current, messages=copies, slots=list(current.slots))
        if for_host and restored.tokens:  # the counts the store kept: the host does not tokenize the history again
            with no_collection():  # (a tuple of each message's values: acyclic)
                self.host.counter().remember(restored.messages, restored.tokens)
        return restored

    def _items(self, restored: Restored) -> tuple[list[Message], list[int | None]]:
        """The conversation as items (no system prompt of the caller's, no recall block), each with its slot."""
        messages, slots = restored.messages, restored.slots
        if not _all_items(messages):  # (usually all are: then the lists as they are)
            # A system message the caller added is recorded (it has a slot) and stays; the prompt put
            # first by ``system=`` is saved in snapshots without one.
            kept = [i for i, m in enumerate(messages) if _is_item(m) or (slots[i] is not None and _added(m))]
            messages, slots = [messages[i] for i in kept], [slots[i] for i in kept]
        if not self.host.implements("ctxlife_filter_text"):
            return messages, slots
        # text a redaction strategy removes never comes back (ctxlife_filter_text, where="restore")
        where = {"where": "restore", "session_id": self.session_id, "view": self.view}
        return [self.host.filter_message(m, **where) for m in messages], slots

    def _restore(self) -> tuple[list[Message], int]:
        """The view's conversation (snapshot + the events after it) and the last sequence number it covers."""
        with self._lock:
            restored = self._restored()
            return self._items(restored)[0], restored.covered

    def _save(self, report: Report, listing: list[Message], slots: list[int | None], restored: Restored) -> None:
        """The one snapshot write of a call that compacted; a failed write is reported, not raised."""
        try:
            self._keeper().save_snapshot(
                self.session_id,
                self.view,
                listing,
                slots=slots,
                covered=restored.covered,
                covered_fp=restored.covered_fp,
            )
        except StoreError as exc:
            report.failures.append(StrategyFailure("session", "before_llm_call", f"{type(exc).__name__}: {exc}"))
            emit(
                "error",
                "ctxlife.snapshot_save_failed",
                session_id=self.session_id,
                view=self.view,
                error=f"{type(exc).__name__}: {exc}"[:300],
                hint="the turn is recorded (do not send it again); the next call compacts from the raw history",
            )


def _is_item(message: Any) -> bool:
    """Whether a restored message is part of the conversation (not a caller's system prompt, not a recall block)."""
    role = plain_role(message)  # (the usual message, at a dict look-up: only a marked text ends with its mark line)
    if type(role) is str and role not in SYSTEM_ROLES:
        return True
    return not (is_recall_block(message) or (is_system(message) and not is_inserted(message)))


def _added(message: Any) -> bool:
    """Whether a system message is one a caller added (not a summary or note ctxlife inserted)."""
    return type(message) is dict and is_system(message) and not is_inserted(message)


def _all_items(messages: Sequence[Message]) -> bool:
    """Whether every restored message is an item (:func:`_is_item`). For the usual conversation,
    dicts without a system role whose contents are text or None, none ending like a mark line, it
    is told in C passes over the list, without a call per message."""
    try:
        if set(map(type, messages)) <= {dict} and SYSTEM_ROLES.isdisjoint(map(dict.get, messages, repeat("role"))):
            contents = list(map(dict.get, messages, repeat("content")))
            if set(map(type, contents)) <= {str, type(None)}:
                texts = cast("Iterable[str]", compress(contents, map(isinstance, contents, repeat(str))))
                return not any(map(str.endswith, texts, repeat(" -->")))  # (a mark line ends so)
    except TypeError:  # an unhashable role
        pass
    return all(map(_is_item, messages))


def _conversation(messages: Sequence[Message]) -> list[Message]:
    """The restored messages that are items, as they are (see :meth:`Session._items`, which filters their text)."""
    if _all_items(messages):  # (the usual list, told in C passes)
        return list(messages)
    return [m for m in messages if _is_item(m)]


#: How many of the conversation's last messages a new turn is validated with (a unit's calls and results).
_TAIL = 16


def _tail(items: list[Message]) -> list[Message]:
    """The conversation's last :data:`_TAIL` messages, reaching back to the call the first of them answers:
    cut after it, the results of a call with many (17 parallel lookups) were taken for results of none."""
    start = max(len(items) - _TAIL, 0)
    while start > 0 and is_tool_result(items[start]):
        start -= 1
    return items[start:]


def _new_problem(tail: list[Message], turn: list[Message]) -> Problem | None:
    """The problem a provider would reject ``turn`` for after ``tail`` (None: it adds none)."""
    before = validate(tail)
    added = validate(tail + turn)
    if len(added) > len(before):
        return added[-1]
    # A call the tail ends with, still waiting for its results, is no problem before the turn (the turn
    # brings them); still waiting after it, it is one (a user turn before a call's result): the same
    # problem in both lists, so the count above does not see it.
    for problem in before:
        if problem.code == "tool_call_without_result" and all(map(is_tool_result, tail[problem.index + 1 :])):
            return next((p for p in added if p.index == problem.index and p.code == problem.code), None)
    return None


def _refuse_invalid_turn(tail: list[Message], turn: list[Message], where: str) -> None:
    """Refuse a turn a provider would reject after the conversation (an orphan tool result, a user
    turn before a call's result): nothing of it is recorded."""
    problem = _new_problem(tail, turn)
    if problem is not None:
        raise InvalidMessagesError(
            f"{where}: the new turn would make the conversation invalid ({problem.code}: {problem.detail}); "
            f"nothing was recorded. Send tool results right after the assistant message that made the calls"
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
        self.session_id: str = session_id
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
        return f"{type(self).__name__}({original_session_id(self.session_id)!r}{view})"
