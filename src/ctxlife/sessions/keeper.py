"""The keeper: the one owner of a session's persistence in a process.

Everything that writes a session goes through the :class:`Keeper` of its store (:func:`keeper_for`:
one per store object and process). Its rules (explicit events, compare-and-append, a list diffed in
one place, a record of each call, one snapshot writer, the raw history wins): docs/sessions.md, "One
keeper per store". Where each is done: a list's diff in :mod:`ctxlife.sessions.recording`
(:meth:`Keeper.record_list`), call records in :mod:`ctxlife.sessions.calls`; a snapshot is saved once
the whole call is known (:meth:`Keeper.track` at its start, :meth:`Keeper.settle` after every
strategy), and a save that was due and did not happen (the store failed) is due on the next call too.

Reading is :meth:`Keeper.restore`: the view's snapshot with the events after it applied
(:mod:`ctxlife.sessions.restore`), brought up to date incrementally from the last read.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ctxlife.events import emit
from ctxlife.messages import inserted_meta, is_recall_block, same_messages
from ctxlife.sessions.base import SessionStore
from ctxlife.sessions.calls import calls_for
from ctxlife.sessions.recording import Recorder, recorder_for
from ctxlife.sessions.records import REMOVE, RawRecord, erased_message, fingerprint, json_safe
from ctxlife.sessions.restore import Restored, restore_after, restore_view
from ctxlife.sessions.snapshot import Snapshot

__all__ = ["Keeper", "Settled", "changed", "keeper_for"]

Message = dict[str, Any]

#: Views whose last saved snapshot a keeper remembers (to skip writing the same one twice); the
#: oldest are forgotten first, and a forgotten one costs one extra write at most.
_SAVED_VIEWS = 1024


@dataclass(frozen=True)
class Settled:
    """What :meth:`Keeper.settle` did with a view's snapshot at the end of a call that was due one."""

    by: str  #: the strategy that keeps the snapshot (named in :meth:`Keeper.track`)
    snapshot: Snapshot | None = None  #: the snapshot written (None: the same one was written last, or none)
    skipped: str | None = None  #: why a due save was not made (``raw_history_pending``); due on the next call
    pending: int = 0  #: with ``skipped``: how many messages wait for the store
    error: Exception | None = None  #: why the write failed (a ``StoreError``); due on the next call


def changed(before: Sequence[Message], after: Sequence[Message]) -> bool:
    """Whether a call changed its list in a way a snapshot must hold: anything but the recall block
    (one call's insert, never saved). Costs one comparison in C when nothing changed."""
    if same_messages(before, after):
        return False
    return not same_messages(
        [m for m in before if not is_recall_block(m)], [m for m in after if not is_recall_block(m)]
    )


class Keeper:
    """Owns the persistence of one store's sessions in this process (see the module docs). Thread-safe."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.recorder: Recorder = recorder_for(store)
        self._lock = threading.RLock()
        # (session, view) -> (fingerprints of the snapshot's messages, raw_length) last written here
        self._saved: OrderedDict[tuple[str, str], tuple[list[str], int]] = OrderedDict()
        # (session, view) -> (the list recorded at the call's start, the strategy keeping its snapshot)
        self._tracked: dict[tuple[str, str], tuple[list[Message], str]] = {}
        self._due: set[tuple[str, str]] = set()  # views whose snapshot save failed or was skipped
        self._mark_key_made = False

    # -- reading ----------------------------------------------------------------------------------

    def restore(
        self, session_id: str, view: str = "", previous: Restored | None = None, *, messages_only: bool = False
    ) -> Restored:
        """The view's conversation now: ``previous`` brought up to date when it can be (O(new
        records)), else the snapshot with the events after it applied (one read). The raw records
        read on the way are handed to the recorder, so it does not read them again; for a
        compacted view, the first slot the restored conversation holds (the recorder reads from there).
        ``messages_only``: as for :func:`~ctxlife.sessions.restore.restore_view` (the recorder
        then gets nothing: it reads the view when it first needs it)."""
        current = restore_after(self.store, session_id, view, previous) if previous is not None else None
        if current is None:
            current = restore_view(self.store, session_id, view, messages_only=messages_only)
            if current.records:
                self.recorder.prime(session_id, view, current.records)
            elif (
                current.plain and not messages_only
            ):  # every record a plain add: the slots and fingerprints are the records'
                self.recorder.prime_adds(session_id, view, current.slots, current.fingerprints)
            elif current.snapshot is not None:  # compacted: the recorder reads from the kept messages on
                self.recorder.kept_from(session_id, view, current.messages, current.slots)
        return current

    # -- explicit events --------------------------------------------------------------------------

    def append(self, session_id: str, messages: Sequence[Message], view: str = "") -> list[RawRecord]:
        """Append exactly ``messages`` to the view (``add`` records, in order); return their records.

        Compare-and-append, and nothing waits after a failed write (docs/sessions.md, "One keeper per store"):
        :meth:`Recorder.add <ctxlife.sessions.recording.Recorder.add>`.
        """
        if not messages:
            return []
        records = self.recorder.add(session_id, messages, view)
        if records:
            self._ensure_mark_key()
        return records

    def replace(self, session_id: str, slot: int, message: Message, view: str = "") -> RawRecord:
        """The caller's edit: the message recorded as ``slot`` becomes ``message`` (a ``replace`` record)."""
        return self.recorder.replace(session_id, slot, message, view)[0]

    def remove(self, session_id: str, slots: Sequence[int], view: str = "") -> list[RawRecord]:
        """The caller's own removal of the messages recorded as ``slots`` (``remove`` records)."""
        return self.recorder.remove(session_id, slots, view)

    # -- lists (callers that hand over nothing else) ------------------------------------------------

    def record_list(self, session_id: str, messages: Sequence[Any], view: str = "") -> list[RawRecord]:
        """Record what is new or edited in a caller's whole list (see :meth:`Recorder.record`)."""
        records = self.recorder.record(session_id, messages, view)
        if records:
            self._ensure_mark_key()
        return records

    def _ensure_mark_key(self) -> None:
        """Make the store's mark secret after the first write that recorded something (once per store object), so
        a summary made while the store is down later marks with it without waiting on the store."""
        if self._mark_key_made:
            return
        self._mark_key_made = True
        with contextlib.suppress(Exception):  # then the first mark makes it (or uses the process's key)
            self.store.mark_key(create=True)

    def leave(self, session_id: str, messages: Sequence[Any], view: str = "") -> None:
        """Note the list as a call hands it back: the caller's next list is diffed against it, so
        what a strategy evicted is never taken for the caller's removal."""
        self.recorder.leave(session_id, messages, view)

    def note_list(
        self,
        session_id: str,
        messages: Sequence[Any],
        slots: Sequence[int | None],
        view: str = "",
        copied: list[Any] | None = None,
    ) -> None:
        """The caller's list before a call, with the slot of each message it knows (a ``Session``'s
        restored conversation): the call's record then names them without fingerprinting the list.
        ``copied``: see :meth:`Recorder.note`."""
        self.recorder.note(session_id, messages, slots, view, copied)

    def record_call(
        self, session_id: str, messages: Sequence[Message], view: str = "", *, details: dict[str, Any]
    ) -> int:
        """Write the record of one model call: what ``messages`` (the list as sent) were, each by its
        recorded slot or, for what ctxlife inserted, by its text (:mod:`ctxlife.sessions.calls`).
        ``details``: the call's tokens, window, actions and failures. Returns the record's number."""
        slots = self.recorder.slots_of(session_id, messages, view)
        erased = self.recorder.erased_among(session_id, messages, slots)
        if erased:  # the caller's list still holds erased messages: the record keeps only their role
            messages = list(messages)
            for i in erased:
                messages[i] = erased_message(messages[i])
        head = self.recorder.head(session_id)  # the recorder read or wrote every slot it gives: head >= each
        return calls_for(self.store).record(session_id, view, messages, slots, head=head, details=details)

    # -- the snapshot -----------------------------------------------------------------------------

    def save_snapshot(
        self,
        session_id: str,
        view: str,
        messages: Sequence[Message],
        *,
        slots: Sequence[int | None] | None = None,
        covered: int | None = None,
        covered_fp: str | None = None,
    ) -> Snapshot | None:
        """Save ``messages`` (a view's working context after a compaction) as the view's snapshot.

        ``slots`` gives each message's record (None: not raw history, e.g. a summary) and
        ``covered`` the latest record the list reflects; both default to what the recorder knows
        of a list it recorded. ``covered_fp`` is the fingerprint of the record ``covered`` (read
        from the store when not given). Recall blocks (one call's insert) are left out, and so are
        messages erased from the session that the caller's list still holds. A value that is not
        JSON is kept in a JSON-safe form and named in a ``ctxlife.snapshot_message_quarantined``
        error event. Returns the snapshot written, or None when the same one was written last.
        Raises :class:`~ctxlife.errors.StoreError` when the write fails.
        """
        indexed = [(i, m) for i, m in enumerate(messages) if not is_recall_block(m)]
        kept = [m for _, m in indexed]
        if slots is None:
            marks = self.recorder.slots_of(session_id, kept, view)
        else:
            marks = [slots[i] if i < len(slots) else None for i, _ in indexed]
        erased = set(self.recorder.erased_among(session_id, kept, marks))
        if erased:  # the caller's list still holds erased messages: a restore must not bring them back
            kept = [m for i, m in enumerate(kept) if i not in erased]
            marks = [slot for i, slot in enumerate(marks) if i not in erased]
        raw_length = self.recorder.covered(session_id, view) if covered is None else covered
        safe = [_quarantined(session_id, view, i, m) for i, m in enumerate(kept)]
        fps = [fingerprint(m) for m in safe]
        key = (session_id, view)
        with self._lock:
            if self._saved.get(key) == (fps, raw_length):
                self._saved.move_to_end(key)
                return None
        meta: dict[str, Any] = {"inserted": inserted_meta(kept), "slots": list(marks)}
        if covered_fp is None:
            covered_fp = self._fingerprint_at(session_id, view, raw_length)
        if covered_fp is not None:
            meta["covered_fp"] = covered_fp
        snapshot = Snapshot(session_id=session_id, view=view, messages=safe, raw_length=raw_length, meta=meta)
        self.store.save_snapshot(snapshot)
        with self._lock:
            self._due.discard(key)
            self._saved[key] = (fps, raw_length)
            self._saved.move_to_end(key)
            while len(self._saved) > _SAVED_VIEWS:
                self._saved.popitem(last=False)
        return snapshot

    def track(self, session_id: str, view: str, recorded: Sequence[Message], *, by: str) -> None:
        """Keep the view's snapshot to the list the current call hands back. ``recorded``: the call's
        list as it was recorded (before the strategies changed it); ``by``: the strategy that keeps
        the snapshot, named in what :meth:`settle` reports. Call it again on every call."""
        with self._lock:
            self._tracked[(session_id, view)] = (list(recorded), by)

    def settle(self, session_id: str, view: str, messages: Sequence[Message]) -> Settled | None:
        """After every strategy of a call ran (the host): save ``messages``, the list the call hands
        back, as the view's snapshot when it differs from the list :meth:`track` ed (:func:`changed`),
        or when an earlier save was due and did not happen. None: the view is not tracked in this
        call, or nothing is due. A failed write is returned (``error``), not raised: the call goes
        on, and the save is due on the next call."""
        key = (session_id, view)
        with self._lock:
            tracked = self._tracked.pop(key, None)
            due = key in self._due
        if tracked is None or not (due or changed(tracked[0], messages)):
            return None
        with self._lock:
            self._due.add(key)
        by = tracked[1]
        pending = self.recorder.pending(session_id, view)
        if pending:
            # The raw history must hold everything a snapshot shows first, or a restore would read
            # the pending messages twice (in the snapshot and in the raw tail after it).
            return Settled(by, skipped="raw_history_pending", pending=pending)
        try:
            snapshot = self.save_snapshot(session_id, view, messages)
        except Exception as exc:  # noqa: BLE001 - reported by the host; the call goes on
            return Settled(by, error=exc)
        with self._lock:
            self._due.discard(key)  # (also when the same snapshot was written last: nothing to write)
        return Settled(by, snapshot=snapshot)

    def _fingerprint_at(self, session_id: str, view: str, seq: int) -> str | None:
        """The fingerprint of the view's record ``seq`` (None: not one of the view's, or unreadable)."""
        if seq <= 0:
            return None
        records = self.store.read_records(session_id, seq - 1, view=view, strict=False)
        return records[0].fingerprint if records and records[0].seq == seq else None

    # -- forgetting -------------------------------------------------------------------------------

    def erase(self, session_id: str, slots: Sequence[int] | None = None, pattern: str | None = None) -> list[int]:
        """Erase messages (by slot, or every one whose text matches the regular expression ``pattern``)
        from every copy the store keeps (:meth:`SessionStore.erase`); a caller's list that still
        holds one never records it again in this process (a ``ctxlife.removed_message_not_recorded``
        warning asks to drop it). Returns the slots erased."""
        latest: dict[int, str] = {}
        for record in self.store.read_records(session_id, strict=False):
            if record.op != REMOVE:
                latest[record.slot] = record.fingerprint  # the text the caller's list holds now
        if pattern is not None:
            erased = self.store.erase_matching(session_id, pattern)
        else:
            erased = self.store.erase(session_id, slots or ())
        self.forget(session_id, removed=[latest[s] for s in erased if s in latest])
        return erased

    def drop_idle(self, session_id: str) -> None:
        """Drop what this process keeps of an idle session to bound memory (a host evicting it): the
        next call reads the store again; messages still waiting for the store stay."""
        self.recorder.forget(session_id, keep_pending=True)
        with self._lock:
            for key in [k for k in self._saved if k[0] == session_id]:
                del self._saved[key]

    def forget(self, session_id: str | None = None, *, removed: Sequence[str] = ()) -> None:
        """Drop what this process knows of a session (every session: None) after it was erased or
        deleted: the next call reads the store. ``removed``: fingerprints of erased messages, never
        recorded again from a caller's list (without it, a deleted session's memory goes too)."""
        self.recorder.forget(session_id, removed=removed)
        with self._lock:
            for key in [k for k in self._saved if session_id is None or k[0] == session_id]:
                del self._saved[key]
            self._drop_calls(lambda key: session_id is None or key[0] == session_id)

    def _drop_calls(self, which: Callable[[tuple[str, str]], bool]) -> None:
        """Forget the tracked calls and due saves of the views ``which`` selects (lock held)."""
        for key in [k for k in self._tracked if which(k)]:
            del self._tracked[key]
        self._due = {k for k in self._due if not which(k)}


def _quarantined(session_id: str, view: str, index: int, message: Message) -> Message:
    """``message`` when it is JSON, else its JSON-safe form (named in an error event)."""
    problems: list[str] = []
    clean = json_safe(message, problems)
    if not problems:
        return message
    emit(
        "error",
        "ctxlife.snapshot_message_quarantined",
        session_id=session_id,
        view=view,
        index=index,
        problem="; ".join(problems)[:500],
    )
    safe: Message = clean
    return safe


_keepers: weakref.WeakKeyDictionary[SessionStore, Keeper] = weakref.WeakKeyDictionary()
_keepers_lock = threading.Lock()


def keeper_for(store: SessionStore) -> Keeper:
    """The :class:`Keeper` of a store object (one per store object and process, made on first use)."""
    with _keepers_lock:
        found = _keepers.get(store)
        if found is None:
            found = _keepers[store] = Keeper(store)
        return found
