"""The session store interface (the contract every store implements) and helpers for store implementers.

What a session holds (records, snapshots, call records, blobs, a lock): docs/sessions.md, "What a
session holds"; the rules every store follows: "Writing a store" there. The records and their stored form
are :mod:`ctxlife.sessions.records`, the snapshot :mod:`ctxlife.sessions.snapshot`, the helpers for a
store's URL :mod:`ctxlife.sessions.urls`.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import json
import math
import re
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Self

from ctxlife.errors import CtxlifeError, StoreError
from ctxlife.events import emit
from ctxlife.messages.inserted import MARK_KEYS, inserted_kind, inserted_text, mark_inserted
from ctxlife.sessions.ids import original_session_id, validate_session_id, validate_view
from ctxlife.sessions.records import (
    ERASED_TEXT,
    REMOVE,
    REPLACE,
    CallRecord,
    ErasedMessages,
    Event,
    PreparedMessage,
    RawRecord,
    RecordSlot,
    ViewRows,
    canonical_json,
    erased_mark,
    erased_message,
    event_value,
    fingerprint,
    json_text,
    materialize,
    prepare_messages,
    unwrap_event,
    whole_units,
)
from ctxlife.sessions.snapshot import Snapshot

__all__ = [
    "AppendConflictError",
    "LockTimeoutError",
    "SessionInfo",
    "SessionStore",
]

#: How long a store whose mark key could not be read is not asked again (marks use the process's key).
_MARK_KEY_RETRY_SECONDS = 30.0


class LockTimeoutError(StoreError):
    """:meth:`SessionStore.lock` could not get the session lock within its ``timeout``."""


class AppendConflictError(StoreError):
    """:meth:`SessionStore.append` was given ``if_head`` but the session's last sequence number differs.

    ``head`` is the session's actual last sequence number: read the records after the one you knew
    (``read_records(session_id, after_seq=...)``), re-align, and retry.
    """

    def __init__(self, message: str, head: int) -> None:
        super().__init__(message)
        self.head = head


#: The blob the default call log of :class:`SessionStore` lives in (one JSON line per call).
_CALLS_BLOB = "ctxlife_calls"
#: The blob an erase's intent lives in while it runs (:meth:`SessionStore.finish_erase`).
_ERASE_INTENT_BLOB = "ctxlife_erase"
#: The blob of a session's erased messages, one keyed mark a line (:meth:`SessionStore.erased`).
_ERASED_BLOB = "ctxlife_erased"


@dataclasses.dataclass(frozen=True)
class SessionInfo:
    """One row of :meth:`SessionStore.list_sessions`.

    Attributes:
        session_id: the session id.
        message_count: number of raw-history records (the last sequence number).
        updated_at: the newest snapshot's ``updated_at`` (over all views), or ``None`` if the session
            has no snapshot.
        last_active: when anything of the session was last written, if the store knows (not
            compared by ``==``).
    """

    session_id: str
    message_count: int
    updated_at: float | None
    last_active: float | None = dataclasses.field(default=None, compare=False)


class SessionStore(abc.ABC):
    """A place where sessions live. Implementations: file (default), sqlite, redis.

    Instances are safe to use from several threads; use one per process (or per thread pool) and
    :meth:`close` it when done (or use it as a context manager). Every method validates the session
    id first (:func:`validate_session_id`).
    """

    #: The URL the store was opened with, passwords removed (for messages and logs).
    url: str = ""

    # -- snapshot -------------------------------------------------------------------------------

    @abc.abstractmethod
    def load_snapshot(self, session_id: str, view: str = "") -> Snapshot | None:
        """Return the snapshot of the session's ``view``, or ``None`` if it has none.

        A stored record that cannot be parsed raises :class:`StoreError` (never returns ``None`` for
        a corrupt record: that would silently start the session over). Records of older format
        versions are migrated (:meth:`Snapshot.from_json`).
        """

    @abc.abstractmethod
    def save_snapshot(self, snapshot: Snapshot) -> None:
        """Replace the snapshot of ``snapshot.view`` in ``snapshot.session_id`` atomically.

        After a crash at any moment, :meth:`load_snapshot` returns either the old snapshot or the new
        one, never a mix or a partial record.
        """

    # -- raw history -----------------------------------------------------------------------------

    @abc.abstractmethod
    def append(
        self,
        session_id: str,
        messages: list[dict[str, Any]],
        *,
        view: str = "",
        if_head: int | None = None,
        fingerprints: list[str] | None = None,
    ) -> list[RawRecord]:
        """Append ``messages`` (one record each, in order) to the session's raw history; return the records.

        Under the session's write lock the store reads the last sequence number (the *head*), gives
        the batch ``head + 1, head + 2, ...``, and writes it atomically: records of two concurrent
        calls never interleave, none is lost, and a crash leaves the whole batch or a prefix of it
        (never a record with a gap before it). With ``if_head`` the batch is written only if the
        head is still ``if_head``; otherwise :class:`AppendConflictError` (with the actual head) is
        raised and nothing is written: this is how a recorder that aligned its caller's list with
        the records up to ``if_head`` appends exactly once.

        A message that is not JSON is recorded in its JSON-safe form with a ``quarantined`` reason
        (:func:`prepare_messages`); it never blocks the batch. ``fingerprints`` are the messages'
        :func:`fingerprint`, when the caller computed them already. An empty list is a no-op
        (returns ``[]``, still checks ``if_head``).
        """

    def _prepare_append(
        self, session_id: str, messages: list[dict[str, Any]], view: str, if_head: int | None, fingerprints: Any
    ) -> list[PreparedMessage]:
        """What every :meth:`append` does first: validate its arguments and encode the messages
        (:func:`prepare_messages`). An empty batch still checks ``if_head``; the caller returns ``[]``."""
        validate_session_id(session_id)
        validate_view(view)
        if if_head is not None and (isinstance(if_head, bool) or not isinstance(if_head, int) or if_head < 0):
            raise StoreError(f"if_head must be an int >= 0 or None, got {if_head!r}")
        prepared = prepare_messages(session_id, messages, fingerprints)
        if not prepared and if_head is not None and (head := self.head(session_id)) != if_head:
            raise conflict(session_id, if_head, head)
        return prepared

    @staticmethod
    def _corrupt(strict: bool, error: str, **skipped: Any) -> None:
        """The rule for a stored record that cannot be read (not a torn last one): a strict read raises
        :class:`StoreError` with ``error`` (naming the record and the problem); a lenient one (a
        recorder's) logs a ``raw_record_skipped`` error event with ``skipped`` and the caller skips it."""
        if strict:
            raise StoreError(error) from None
        emit("error", "raw_record_skipped", logger="ctxlife.sessions", **skipped)

    @abc.abstractmethod
    def read_records(
        self, session_id: str, after_seq: int = 0, *, view: str | None = None, strict: bool = True
    ) -> list[RawRecord]:
        """Return the session's records with sequence number > ``after_seq``, in order.

        ``view`` keeps only that view's records (None: all views). Unknown sessions give ``[]``.
        Reading from a recent ``after_seq`` costs what the new records cost, not the whole history
        (this is the incremental reader for indexes and recorders).

        A torn or invalid *last* record (the process died in the middle of writing it) is skipped
        with a ``raw_torn_record_skipped`` warning. Any other unreadable record raises
        :class:`StoreError` naming the session, the line or sequence number and the problem; with
        ``strict=False`` it is skipped with a ``raw_record_skipped`` error event instead (for
        recorders, which must never be blocked by one bad record).
        """

    @abc.abstractmethod
    def head(self, session_id: str) -> int:
        """The session's last sequence number (0 for an empty or unknown session)."""

    def append_events(
        self, session_id: str, events: list[Event], *, view: str = "", if_head: int | None = None
    ) -> list[RawRecord]:
        """Append ``events`` (edits of the view's conversation, see :class:`Event`) atomically, in order.

        Each event is one record with its own sequence number, written by :meth:`append` (so
        ``if_head`` and atomicity are the same); a record's ``op``/``target`` say what it did. The
        raw history stays a log: an edited or removed message keeps its record (for audit, until
        :meth:`erase`), and :func:`materialize` gives the view's current state.
        """
        values = [event_value(e) for e in events]
        fps = [
            e.fingerprint if e.fingerprint is not None else fingerprint(e.message if e.op != REMOVE else {})
            for e in events
        ]
        return self.append(session_id, values, view=view, if_head=if_head, fingerprints=fps)

    def read_view(self, session_id: str, view: str = "", *, messages_only: bool = False) -> ViewRows | None:
        """The view's records as columns (:class:`~.records.ViewRows`) when each is a plain ``add``
        of a message stored as it was, in one read; None otherwise, or when the store has no such
        read (the default): then :meth:`read_records`. Lets a restore of a never-edited view skip
        a :class:`RawRecord` per message (the SQLite store overrides it). ``messages_only``: a
        reader that needs only the messages and their slots (no fingerprints, no token counts; a
        quarantined record counts as plain: its message is its stored form)."""
        return None

    def read_slots(self, session_id: str, after_seq: int = 0, *, view: str | None = None) -> list[RecordSlot]:
        """``(seq, fingerprint, op, target)`` of the records :meth:`read_records` (``strict=False``)
        returns: what a recorder keeps of a view's history, without its messages. A store that can
        skip decoding the messages overrides it (the SQLite store reads four columns), so a recorder
        loading a 100,000-message view does not hold them all in memory at once."""
        return [
            RecordSlot(r.seq, r.fingerprint, r.op, r.target)
            for r in self.read_records(session_id, after_seq, view=view, strict=False)
        ]

    def current(self, session_id: str, view: str = "") -> list[RawRecord]:
        """The view's current conversation: one record per live message (see :func:`materialize`)."""
        return materialize(self.read_records(session_id, view=view))

    def latest(self, session_id: str, view: str = "") -> RawRecord | None:
        """The last record of :meth:`current` (None when the view holds no message).

        A store that reads slots without their messages (:meth:`read_slots` overridden: SQLite,
        PostgreSQL) finds the slot from them and decodes only the records from that slot on, not
        the whole view.
        """
        if type(self).read_slots is SessionStore.read_slots:
            found = self.current(session_id, view)
            return found[-1] if found else None
        # Order only: a replace changes a slot's message, never its place.
        live = materialize(s for s in self.read_slots(session_id, view=view) if s.op != REPLACE)  # type: ignore[misc]
        if not live:
            return None
        slot = live[-1].seq
        return next((r for r in materialize(self.read_records(session_id, slot - 1, view=view)) if r.seq == slot), None)

    def mark_key(self, create: bool = False) -> bytes | None:
        """The store's secret that keys the marks on the messages ctxlife inserts (summaries, recall blocks).

        Made on the first call with ``create`` (the first mark; reading never creates it) and
        kept in the store, so every process on the store recognises the marks and text from
        anywhere else (a tool result ending with a line that looks like a mark) never passes for
        one (:mod:`ctxlife.messages.inserted`). None: none yet (``create`` false), or a store
        that keeps none (a third-party store that does not implement :meth:`_read_mark_key`:
        its marks use a secret of the process, and a restart re-marks a snapshot's inserted
        messages from its meta).
        """
        key: bytes | None = getattr(self, "_mark_key_cache", None)
        if key is None:
            failed_at: float | None = getattr(self, "_mark_key_failed_at", None)
            if failed_at is not None and time.monotonic() - failed_at < _MARK_KEY_RETRY_SECONDS:
                # The store failed to give it a moment ago (down, frozen): not another timeout per mark.
                raise StoreError(f"{self.url}: the mark key could not be read a moment ago; retried later")
            try:
                key = self._read_mark_key(create)
            except Exception:
                self._mark_key_failed_at: float | None = time.monotonic()
                raise
            self._mark_key_failed_at = None
            if key is not None:
                self._mark_key_cache = key
        return key

    def _read_mark_key(self, create: bool) -> bytes | None:
        """The stored secret of :meth:`mark_key` (made and stored first when ``create`` and there is
        none, without ever replacing one another process stored); None when the store keeps none."""
        return None

    def derived_dir(self, session_id: str) -> Path | None:
        """A folder for data derived from the session (a search index), deleted with the session.

        The store creates nothing there; whoever derives data creates the folder. :meth:`delete`,
        TTL expiry and ``ctxlife session rm`` remove it with the session. None: the store keeps no
        local files (Redis), so derived data lives in memory.
        """
        validate_session_id(session_id)
        return None

    # -- call records ----------------------------------------------------------------------------

    def append_call(self, session_id: str, view: str, doc: dict[str, Any]) -> int:
        """Append one call record (a JSON object, see :mod:`ctxlife.sessions.calls`) to the session's
        call log; return its number (1, 2, 3, ... per session, over every view).

        Deleted with the session (:meth:`delete`, TTL expiry), scrubbed by :meth:`erase` and
        :meth:`erase_matching`. This default keeps the log in one blob and rewrites it on every call
        (O(calls) per call, not safe for two processes writing one session at once): a store
        overrides it with an append in place (and :meth:`read_calls`, ``_rewrite_calls``).
        """
        validate_view(view)
        line = json_text({"view": view, "doc": doc}, what=f"call record of session {session_id!r}")
        text = self.get_blob(session_id, _CALLS_BLOB) or ""
        self.put_blob(session_id, _CALLS_BLOB, text + line + "\n")
        return text.count("\n") + 1

    def read_calls(self, session_id: str, view: str | None = None) -> list[CallRecord]:
        """The session's call records in the order written (``view``: only that view's; None: all).

        An unknown session, or one recorded before call records existed, gives ``[]``. An unreadable
        record is skipped with a ``call_record_skipped`` error event (call records are a log for
        people: one bad line must not hide the others)."""
        if view is not None:
            validate_view(view)
        return decode_calls(session_id, (self.get_blob(session_id, _CALLS_BLOB) or "").splitlines(), view)

    def _rewrite_calls(self, session_id: str, docs: dict[int, dict[str, Any]]) -> int:
        """Overwrite the documents of the call records ``{n: doc}`` in place (for :meth:`erase`)."""
        if not docs:
            return 0
        lines = (self.get_blob(session_id, _CALLS_BLOB) or "").splitlines()
        found = {n: erased_call(lines[n - 1], doc) for n, doc in docs.items() if 0 < n <= len(lines)}
        if found:
            lines = [found.get(n, line) for n, line in enumerate(lines, 1)]
            self.put_blob(session_id, _CALLS_BLOB, "".join(line + "\n" for line in lines))
        return len(found)

    def _scrub_calls(self, session_id: str, slots: set[int], regex: re.Pattern[str] | None) -> None:
        """Erase from the call records the texts of erased ``slots`` and every match of ``regex``."""
        self._rewrite_calls(
            session_id, scrubbed_calls(self.read_calls(session_id), slots, regex, self._scrubbed_message)
        )

    def _scrubbed_message(self, message: Any, regex: re.Pattern[str]) -> Any:
        """``message`` with every match of ``regex`` replaced (:func:`_scrubbed`). A summary or recall block
        ctxlife inserted stays one: its mark covers its text, so it is made anew over the scrubbed text with
        the store's secret (one no longer recognised was restored as a system prompt, or left out, and shown
        as the system prompt in reports)."""
        with MARK_KEYS.marking_with(self):
            kind = inserted_kind(message)
            if kind is None:
                return _scrubbed(message, regex)
            body = _unmarked(message)
            clean = _scrubbed(body, regex)
            return message if clean == body else mark_inserted(clean, kind)

    def _rewrite_records(self, session_id: str, values: dict[int, dict[str, Any]]) -> int:
        """Overwrite the stored value of the records ``{seq: value}`` in place (for :meth:`erase`)."""
        raise StoreError(
            f"{type(self).__name__} cannot erase records: implement _rewrite_records(session_id, values) "
            f"(overwrite the stored value of each seq in place)"
        )

    def erase(self, session_id: str, slots: Iterable[int]) -> list[int]:
        """Delete messages for privacy: every trace of the ``slots`` (their ``add`` and ``replace``
        records) is overwritten with a tombstone (the role only), the messages leave every
        snapshot, tool-output blobs they reference are overwritten, and a ``remove`` event per slot
        still live is appended (so incremental readers, such as the recall index, drop them too).
        Call records keep no message text of a recorded slot (they name it), except a message sent
        in another form (with the bootstrap section): that copy is overwritten too.

        A slot that is part of a tool call/result unit (an assistant message making tool calls and
        the results that answer it, :func:`ctxlife.messages.split_units`) erases the whole unit: the
        call and every result of it, so the view's list stays valid (no orphan tool result, no call
        without its result) for restore and :meth:`ctxlife.Session.prepare`.

        Interrupted (the process killed, a store error), the erase is completed on the session's
        next use by any process (:meth:`finish_erase`). A caller's list that still holds an erased
        message never records it again, in any process (:meth:`erased`).

        Returns the slots erased (unknown slots are ignored). Text a summary already took from
        the messages stays in that summary: use :meth:`erase_matching` to scrub a value everywhere.
        """
        wanted = [int(s) for s in slots]
        self.finish_erase(session_id, replacing=True)  # one at a time: an interrupted erase's intent is kept
        return self._erase(session_id, wanted, None)

    def erase_matching(self, session_id: str, pattern: str | re.Pattern[str]) -> list[int]:
        """:meth:`erase` every message whose text matches ``pattern`` (a regular expression, searched
        in each text as written, tool arguments included; not in roles, types or ids), or that refers
        to a kept tool output (a blob) whose text does, and replace the matches with ``[erased]`` in
        every snapshot (summaries included) and call record. Returns the slots."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        if regex.search("") is not None:  # (an empty pattern from an unset shell variable, "\d*", ".*")
            raise CtxlifeError(
                f"erase of session {original_session_id(session_id)!r}: the pattern {regex.pattern!r} matches an "
                "empty text, so it would erase every message; use a pattern that needs at least one character, or "
                "delete the whole session "
                "(SessionStore.delete, `ctxlife session rm`)"
            )
        self.finish_erase(session_id, replacing=True)  # one at a time: an interrupted erase's intent is kept
        blobs: dict[str, bool] = {}

        def in_blob(ref: str) -> bool:  # a full tool output kept aside holds the match
            if ref not in blobs:
                try:
                    text = self.get_blob(session_id, ref)
                except StoreError:
                    text = None
                blobs[ref] = text is not None and regex.search(text) is not None
            return blobs[ref]

        slots = []
        for r in self.read_records(session_id):
            if r.op == REMOVE:
                continue
            text = canonical_json(r.message)
            if _matches(r.message, regex) or any(in_blob(ref) for ref in _BLOB_REF.findall(text)):
                slots.append(r.slot)
        return self._erase(session_id, slots, regex)

    def _erase(self, session_id: str, slots: list[int], regex: re.Pattern[str] | None) -> list[int]:
        """Erase ``slots`` (whole units) and scrub ``regex`` from the snapshots.

        A journal first: the erase's *intent* (its slots and pattern, in the blob
        ``ctxlife_erase``) is stored before anything changes and deleted when all of it is done,
        so an erase killed at any point is completed on the session's next use
        (:meth:`finish_erase`, which every restore runs). Then the fingerprints of the erased
        messages are remembered (:meth:`erased`), the blobs, the ``remove`` events and the
        snapshots go, while the raw records still hold the text; the raw records are rewritten
        last but one, and the derived data (the index) deleted last (every run deletes it).
        """
        records = self.read_records(session_id)
        wanted = whole_units(records, set(slots))
        affected = [r for r in records if r.op != REMOVE and r.slot in wanted]
        found = sorted({r.slot for r in affected})
        if not found and regex is None:
            return found
        intent: dict[str, Any] = {"slots": found, "pattern": None if regex is None else regex.pattern}
        if regex is not None:
            intent["flags"] = int(regex.flags)
        self.put_blob(session_id, _ERASE_INTENT_BLOB, json_text(intent, what="erase intent"))
        self._remember_erased(session_id, [r.fingerprint for r in affected if not r.erased])
        self._scrub_blobs(session_id, [r.message for r in affected])
        self._scrub_calls(session_id, set(found), regex)
        by_view: dict[str, list[RawRecord]] = {}
        for r in records:
            by_view.setdefault(r.view, []).append(r)
        for view, mine in by_view.items():
            live = [r.seq for r in materialize(mine) if r.seq in wanted]
            gone = {r.fingerprint for r in affected if r.view == view}
            if live:
                self.append_events(session_id, [Event(REMOVE, {}, target=s) for s in live], view=view)
            if gone or regex is not None:
                self._drop_from_snapshot(session_id, view, set(found), gone, regex)
        self._rewrite_records(
            session_id,
            {r.seq: event_value(Event(r.op, erased_message(r.message), r.target)) for r in affected if not r.erased},
        )
        self._erased(session_id)
        self._delete_blob(session_id, _ERASE_INTENT_BLOB)
        return found

    def finish_erase(self, session_id: str, *, replacing: bool = False) -> list[int]:
        """Complete an erase that was interrupted (killed, or stopped by a store error) before it
        finished: its intent is still in the store (see :meth:`erase`). Every restore of the
        session runs it first (:func:`ctxlife.sessions.restore.restore_view`), as do ``ctxlife
        session`` commands, so whichever process uses the session next finishes the erase; costs
        one blob read when there is none. Returns the slots erased ([] without an intent).

        An unreadable intent raises :class:`StoreError`; with ``replacing`` (a new erase, which
        then stores its own) it is dropped with an error event instead."""
        text = self.get_blob(session_id, _ERASE_INTENT_BLOB)
        if not text:
            return []
        try:
            doc = json.loads(text)
            found = [int(s) for s in doc["slots"]]
            pattern = doc.get("pattern")
            regex = None if pattern is None else re.compile(str(pattern), int(doc.get("flags", 0)))
        except (ValueError, TypeError, KeyError, re.error) as exc:
            problem = (
                f"{self.url}: the intent of an interrupted erase of session {session_id!r} is unreadable "
                f"({str(exc)[:200]})"
            )
            if not replacing:
                raise StoreError(
                    f"{problem}; erase the value again (ctxlife session erase ID --match REGEX replaces the "
                    f"intent) or delete the session (ctxlife session rm ID)"
                ) from None
            emit("error", "ctxlife.erase_intent_unreadable", session_id=session_id, error=problem)
            self._delete_blob(session_id, _ERASE_INTENT_BLOB)
            return []
        emit("warning", "ctxlife.interrupted_erase_completed", session_id=session_id, messages=len(found))
        return self._erase(session_id, found, regex)

    def erased(self, session_id: str) -> ErasedMessages:
        """The messages erased from the session, to tell a caller's list that still holds one
        (:meth:`ErasedMessages.__contains__` takes a fingerprint). Stored by every erase with the
        session, as HMACs of the fingerprints keyed with the store's secret (:meth:`mark_key`),
        never the fingerprints or the text; deleted with the session. Empty for a store that keeps
        no secret (then only the process that erased remembers them)."""
        key = self.mark_key()
        text = self.get_blob(session_id, _ERASED_BLOB) if key is not None else None
        return ErasedMessages(key, frozenset(text.split()) if text else frozenset())

    def _remember_erased(self, session_id: str, fps: list[str]) -> None:
        """Add the fingerprints of messages being erased to the session's :meth:`erased` (one blob)."""
        if not fps:
            return
        key = self.mark_key(create=True)
        if key is None:
            return
        known = set((self.get_blob(session_id, _ERASED_BLOB) or "").split())
        marks = known | {erased_mark(key, fp) for fp in fps}
        if marks != known:
            self.put_blob(session_id, _ERASED_BLOB, "".join(m + "\n" for m in sorted(marks)))

    def _delete_blob(self, session_id: str, key: str) -> None:
        """Delete a blob of ctxlife's own (the erase intent); stores override it to delete for
        real, this default leaves it empty (read as none)."""
        self.put_blob(session_id, key, "")

    def _erased(self, session_id: str) -> None:
        """After an erase: delete the session's derived data (the recall index, a cache of the raw
        history that still holds the erased text; it is rebuilt from the scrubbed history on use)."""
        folder = self.derived_dir(session_id)
        if folder is not None and folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)

    def _drop_from_snapshot(
        self, session_id: str, view: str, slots: set[int], fps: set[str], regex: re.Pattern[str] | None
    ) -> None:
        try:
            snapshot = self.load_snapshot(session_id, view)
        except StoreError:
            return  # an unreadable snapshot is rebuilt from the raw history (which no longer holds them)
        if snapshot is None:
            return
        marks = snapshot.meta.get("slots")
        kept: list[Any] = []
        kept_marks: list[Any] = []
        moved: dict[int, int] = {}  # a kept message's index -> its index after the erase
        changed = False
        for i, message in enumerate(snapshot.messages):
            slot = marks[i] if isinstance(marks, list) and i < len(marks) else None
            if slot in slots or (slot is None and fps and fingerprint(message) in fps):
                changed = True
                continue
            if regex is not None:
                clean = self._scrubbed_message(message, regex)
                changed = changed or clean != message
                message = clean
            moved[i] = len(kept)
            kept.append(message)
            kept_marks.append(slot)
        if not changed:
            return
        meta = dict(snapshot.meta)
        if isinstance(marks, list):
            meta["slots"] = kept_marks
        if isinstance(meta.get("inserted"), list):
            # which messages ctxlife inserted (a restore re-marks them from it), at their new places
            meta["inserted"] = [
                [moved[entry[0]], entry[1]]
                for entry in meta["inserted"]
                if isinstance(entry, list) and len(entry) == 2 and entry[0] in moved
            ]
        self.save_snapshot(snapshot.model_copy(update={"messages": kept, "meta": meta}))

    def _scrub_blobs(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Overwrite the blobs (tool outputs kept aside) that erased messages refer to."""
        for ref in sorted({m for message in messages for m in _BLOB_REF.findall(canonical_json(message))}):
            with contextlib.suppress(StoreError):
                if self.get_blob(session_id, ref) is not None:
                    self.put_blob(session_id, ref, ERASED_TEXT)

    # -- sessions ----------------------------------------------------------------------------------

    @abc.abstractmethod
    def list_sessions(self) -> list[SessionInfo]:
        """Return every session that has a snapshot or raw history, sorted by session id."""

    @abc.abstractmethod
    def delete(self, session_id: str) -> bool:
        """Delete the session's snapshots, raw history, call records and blobs; return whether anything existed.

        Deleting an unknown session is not an error. A lock currently held on the session is not
        broken.
        """

    @abc.abstractmethod
    def lock(
        self, session_id: str, ttl_seconds: float = 30.0, timeout: float | None = 10.0
    ) -> contextlib.AbstractContextManager[None]:
        """Return a context manager holding the session's exclusive lock while inside it.

        The lock excludes every other holder of the same session lock in any thread, process or (for
        networked stores) machine sharing the store. It is not re-entrant: taking it again while
        holding it waits (and times out).

        Args:
            ttl_seconds: the lock expires this long after it was taken, so a holder that died
                cannot block the session forever. A holder that runs longer than this may lose the
                lock to another (stores log ``session_lock_expired`` on release when that happened):
                pick a TTL longer than the work. Stores whose lock dies with its holder (the file
                store's ``flock``) may ignore it.
            timeout: seconds to wait for the lock; ``0`` tries once, ``None`` waits forever.

        Raises:
            LockTimeoutError: the lock was not free within ``timeout``.
        """

    # -- blobs ---------------------------------------------------------------------------------

    @abc.abstractmethod
    def put_blob(self, session_id: str, key: str, text: str) -> None:
        """Store ``text`` under ``key`` in the session (atomic replace).

        ``key`` follows the session-id rule (:func:`~ctxlife.sessions.ids.validate_blob_key`).
        """

    @abc.abstractmethod
    def get_blob(self, session_id: str, key: str) -> str | None:
        """Return the text stored under ``key`` in the session, or ``None``."""

    # -- lifecycle ---------------------------------------------------------------------------------

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections and file handles. Idempotent."""

    def __enter__(self) -> Self:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        """A store is a handle on shared storage: copies of a structure holding it share it."""
        return self

    def __copy__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


#: A tool-output blob reference (``tool_output`` keeps full results aside under ``to_<hash>``).
_BLOB_REF = re.compile(r"\bto_[0-9a-f]{16}\b")


#: Keys whose values say what a message or part is, not what it says: an erase by pattern neither
#: matches nor scrubs them (a pattern that is a role's name would erase every message of that role).
_STRUCTURE_KEYS = frozenset({"role", "type", "id", "tool_call_id", "tool_use_id", "call_id"})


def _texts(value: Any) -> Iterator[str]:
    """The strings of a message an erase by pattern looks in: every one but :data:`_STRUCTURE_KEYS`' values."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _STRUCTURE_KEYS:
                yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


def _matches(message: Any, regex: re.Pattern[str]) -> bool:
    """Whether a text of ``message`` (:func:`_texts`: as written, not JSON-escaped) holds a match."""
    return any(regex.search(text) is not None for text in _texts(message))


def _scrubbed(value: Any, regex: re.Pattern[str]) -> Any:
    """``value`` with every match of ``regex`` in its texts (:func:`_texts`) replaced by :data:`ERASED_TEXT`."""
    if isinstance(value, str):
        return regex.sub(ERASED_TEXT, value)
    if isinstance(value, dict):
        return {k: v if k in _STRUCTURE_KEYS else _scrubbed(v, regex) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v, regex) for v in value]
    return value


def _unmarked(message: Any) -> Any:
    """A copy of an inserted ``message`` without the line that marks it (a copy of what is marked only)."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return {**message, "content": inserted_text(content)}
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        last = content[-1]
        if isinstance(last.get("text"), str):
            return {**message, "content": [*content[:-1], {**last, "text": inserted_text(last["text"])}]}
    return message


def scrubbed_calls(
    calls: Iterable[CallRecord],
    slots: set[int],
    regex: re.Pattern[str] | None,
    scrub: Callable[[Any, re.Pattern[str]], Any],
) -> dict[int, dict[str, Any]]:
    """The call-record documents to write back so none holds the text of an erased slot (a recorded
    message sent in another form, ``[slot, key]`` in ``m``: see :mod:`ctxlife.sessions.calls`) nor a
    match of ``regex`` (``scrub(message, regex)``: the store's, which replaces each by ``[erased]`` and
    marks a scrubbed summary anew; roles and ids kept): ``{n: doc}``, the changed ones only."""
    calls = list(calls)
    erased_keys: set[str] = set()
    if slots:
        for call in calls:
            for entry in call.doc.get("m") or ():
                if isinstance(entry, list) and len(entry) == 2 and entry[0] in slots:
                    erased_keys.add(str(entry[1]))
    out: dict[int, dict[str, Any]] = {}
    for call in calls:
        found = call.doc.get("t")
        if not isinstance(found, dict):
            continue
        texts = dict(found)
        for key, message in found.items():
            if key in erased_keys and isinstance(message, dict):
                texts[key] = erased_message(message)
            elif regex is not None and _matches(message, regex):
                texts[key] = scrub(message, regex)
        if texts != found:
            out[call.n] = {**call.doc, "t": texts}
    return out


def erased_doc(doc: dict[str, Any], value: dict[str, Any]) -> str:
    """A stored record ``doc`` (``{"seq": ..., "msg": ...}``) as an erase rewrites it: ``value`` in
    place of its message, its fingerprint anew, no token count or quarantine reason (of the text erased)."""
    doc.pop("bad", None)
    doc.pop("tk", None)
    doc["msg"] = value
    doc["fp"] = fingerprint(unwrap_event(value)[0])
    return json_text(doc, what="erased record")


def erased_call(line: str | bytes, doc: dict[str, Any]) -> str:
    """A stored call-record line (``{"view": ..., "doc": ...}``) with ``doc`` in place of its own."""
    return json_text({"view": json.loads(line).get("view", ""), "doc": doc}, what="erased call record")


def decode_calls(session_id: str, lines: Iterable[str | bytes], view: str | None) -> list[CallRecord]:
    """Call records from stored lines ``{"view": ..., "doc": {...}}`` (numbered from 1, every line
    counted); an unreadable line is skipped with a ``call_record_skipped`` error event."""
    out = []
    for n, line in enumerate(lines, 1):
        try:
            value = json.loads(line)
            lane, doc = value["view"], value["doc"]
            if not isinstance(lane, str) or not isinstance(doc, dict):
                raise ValueError("fields of the wrong types")
        except (ValueError, KeyError, TypeError) as exc:
            from ctxlife.events import emit  # lazy: structlog (and rich) only when a record is unreadable

            emit("error", "ctxlife.call_record_skipped", session_id=session_id, call=n, error=str(exc)[:200])
            continue
        if view is None or lane == view:
            out.append(CallRecord(n, lane, doc))
    return out


def check_after_seq(after_seq: object) -> int:
    """Validate :meth:`SessionStore.read_records`'s ``after_seq`` argument."""
    if isinstance(after_seq, bool) or not isinstance(after_seq, int) or after_seq < 0:
        raise StoreError(f"after_seq must be an int >= 0, got {after_seq!r}")
    return after_seq


def conflict(session_id: str, if_head: int, head: int) -> AppendConflictError:
    """The :class:`AppendConflictError` for an ``if_head`` that no longer holds."""
    return AppendConflictError(
        f"session {session_id!r} moved on: its last sequence number is {head}, not {if_head}; "
        f"read the records after {if_head} and retry",
        head,
    )


def check_blob_text(session_id: str, key: str, text: object) -> bytes:
    """Validate a blob's text for :meth:`SessionStore.put_blob`; return it encoded as UTF-8."""
    if not isinstance(text, str):
        raise StoreError(f"blob {key!r} of session {session_id!r} must be a str, got {type(text).__name__}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise StoreError(
            f"blob {key!r} of session {session_id!r} is not valid Unicode text (lone surrogates); "
            f"encode binary data (e.g. base64) before storing it"
        ) from None


def check_lock_args(ttl_seconds: object, timeout: object) -> None:
    """Validate :meth:`SessionStore.lock`'s numeric arguments."""
    if (
        isinstance(ttl_seconds, bool)
        or not isinstance(ttl_seconds, (int, float))
        or not (ttl_seconds > 0 and math.isfinite(ttl_seconds))
    ):
        raise StoreError(f"lock ttl_seconds must be a finite number > 0, got {ttl_seconds!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0):
        raise StoreError(f"lock timeout must be a number >= 0 or None, got {timeout!r}")


def poll_until(try_once: Callable[[], bool], timeout: float | None, describe: str) -> None:
    """Call ``try_once`` with capped exponential back-off until it returns True or ``timeout`` ends.

    Raises :class:`LockTimeoutError` with ``describe`` in the message on timeout.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.002
    while True:
        if try_once():
            return
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            raise LockTimeoutError(
                f"could not take {describe} within {timeout} s: another worker holds it. "
                f"Retry later, raise the timeout, or check for a stuck worker"
            )
        sleep = delay if deadline is None else min(delay, max(0.0, deadline - now))
        time.sleep(sleep)
        delay = min(delay * 2, 0.05)
