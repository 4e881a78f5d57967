"""Recording a caller's conversation into a session's raw history (an event log) exactly once.

What a caller's list is recorded as (``add``, ``replace``, ``remove``, nothing) and why, its limits:
docs/sessions.md, "How a caller's list becomes records". Messages count by
:func:`~ctxlife.sessions.records.fingerprint` of their stored form (:func:`~.views.stored_form`),
never by object identity. The parts: what the recorder keeps of a view (:mod:`ctxlife.sessions.views`,
which also says how mirrors and the diff work), the events for a list judged against a mirror
(:mod:`ctxlife.sessions.plans`), the alignment of a list no mirror relates to
(:mod:`ctxlife.sessions.alignment`); this module holds :class:`Recorder`, which owns them.

Cost
----
The usual call: one comparison of the list with the newest mirror (in C), fingerprints of the new
messages. The store is read the first time a (session, view) is seen (its records once, the
snapshot) and when another writer moved the session's head. A view a restore found compacted is
read from where its snapshot's kept messages start (:meth:`Recorder.kept_from`: an incomplete
tail, :attr:`~.views.View.start`); the rest only when something needs an older record (an edit of
one, a list that holds one: :class:`~.views.TailEdge`), so a cold call on a compacted 100k-message
session reads a few hundred records, not 100k.

Concurrency
-----------
Appends are conditional (``if_head``): two workers interleaving on one session never duplicate or
reorder; the loser reads what the winner wrote, diffs again and retries. One :class:`Recorder` per
store object (:func:`recorder_for`), shared by everything in the process that uses that store
object (a host, its strategies, :meth:`ctxlife.Host.record_reply`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, cast

from ctxlife.errors import StoreError
from ctxlife.events import emit
from ctxlife.messages import Agreement, same_messages
from ctxlife.sessions.alignment import Alignment, Reversed, align_tail, plan_by_alignment
from ctxlife.sessions.base import AppendConflictError, SessionStore
from ctxlife.sessions.ids import original_session_id
from ctxlife.sessions.plans import Plan, all_new, diff_plan, seen_mirror, unplaced_fps
from ctxlife.sessions.records import ADD, REMOVE, REPLACE, ErasedMessages, Event, RawRecord, RecordSlot, no_collection
from ctxlife.sessions.restore import restore_view
from ctxlife.sessions.views import (
    Entry,
    Mirror,
    Scratch,
    TailEdge,
    View,
    after_pending,
    all_recorded,
    anchor,
    apply_records,
    copies,
    keep_mirror,
    kept_part,
    map_mirror,
    recordable,
    stored_form,
    stored_fp,
    stored_mirror,
    warn_quarantined,
    whole_tail,
)

__all__ = ["Recorder", "recorder_for"]

#: Most messages kept waiting when the store refuses writes (then the oldest are dropped, logged).
_MAX_PENDING = 10_000
_MAX_RETRIES = 64


class Recorder:
    """Records callers' lists into one store's sessions exactly once (see the module docs).

    Get the one for a store with :func:`recorder_for`. Thread-safe.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._lock = threading.RLock()
        self._views: dict[tuple[str, str], View] = {}
        # Views primed with plain adds (prime_adds) not looked at yet: [top, slots, fingerprints],
        # made a View on first use (a reader that never records builds no entry per message).
        self._primed: dict[tuple[str, str], list[Any]] = {}
        # Views a restore found compacted, not looked at yet: (the slot its kept messages start at, the
        # (slot, fingerprint) of the few older ones it holds, e.g. the task's first message). The first
        # look reads the view's records from that slot on only (an incomplete tail, View.start).
        self._kept: dict[tuple[str, str], tuple[int, list[tuple[int, str]]]] = {}
        self._heads: dict[str, int] = {}
        # Fingerprints of messages removed or erased by another writer (or this process's erase) that
        # a caller's list may still hold: never recorded again from a list. Erased ones are also in
        # the store (SessionStore.erased: keyed HMACs, read once per session into _erased), so both
        # go when the host's LRU drops the session and a restarted process still knows them.
        self._removed: dict[str, set[str]] = {}
        self._erased: dict[str, ErasedMessages] = {}
        # (seq, fingerprint, recorded_at) of the session's last record this recorder wrote: another record
        # at that seq means the session was deleted (or expired) and written again by another process since.
        self._head_marks: dict[str, tuple[int, str, float | None]] = {}
        self._scratch = Scratch()  # new_lists for views with no state yet

    # -- state ------------------------------------------------------------------------------------

    def known(self, session_id: str, view: str = "") -> bool:
        """Whether this recorder keeps a state for the view (False: the next call reads the store)."""
        return (session_id, view) in self._views or (session_id, view) in self._primed

    def head(self, session_id: str) -> int:
        """The session's last sequence number as this recorder knows it (reads the store once)."""
        with self._lock:
            found = self._heads.get(session_id)
            if found is None:
                found = self._heads[session_id] = self.store.head(session_id)
            return found

    def covered(self, session_id: str, view: str = "") -> int:
        """The seq of the latest record the view's last recorded list holds: a snapshot's ``raw_length``
        (a restore is the snapshot plus the view's records after it, another writer's included)."""
        with self._lock:
            return self._view(session_id, view).covered

    def pending(self, session_id: str, view: str = "") -> int:
        """How many messages wait for the store (a failed write keeps them for the next call)."""
        with self._lock:
            state = self._views.get((session_id, view))
            return len(state.pending) if state is not None else 0

    def forget(self, session_id: str | None = None, *, removed: Iterable[str] = (), keep_pending: bool = False) -> None:
        """Drop what is known about a session (all sessions: None); the next call reads the store.

        ``removed``: fingerprints of messages just erased, never recorded again from a list (with the
        session's earlier ones). Without it they go too (the session was deleted), unless ``keep_pending``:
        keep the views whose messages wait for the store (a host dropping an idle session; written on the
        view's next call) and what is known of removed messages."""
        with self._lock:
            kept = False
            for key in [k for k in self._primed if session_id is None or k[0] == session_id]:
                del self._primed[key]
            for key in [k for k in self._kept if session_id is None or k[0] == session_id]:
                del self._kept[key]
            self._scratch.forget(session_id)
            for key in [k for k in self._views if session_id is None or k[0] == session_id]:
                if keep_pending and self._views[key].pending:
                    kept = True
                else:
                    del self._views[key]
            if not kept:
                for sid in [s for s in self._heads if session_id is None or s == session_id]:
                    del self._heads[sid]
                for sid in [s for s in self._head_marks if session_id is None or s == session_id]:
                    del self._head_marks[sid]
            for sid in [s for s in self._erased if session_id is None or s == session_id]:
                del self._erased[sid]  # read again from the store when next needed
            gone = set(removed)
            if session_id is not None and gone:
                self._mark_removed(session_id, gone)
            elif self._removed and (not keep_pending or self._erased_kept_in_store()):
                for sid in [s for s in self._removed if session_id is None or s == session_id]:
                    del self._removed[sid]

    def _erased_kept_in_store(self) -> bool:
        """Whether the store keeps what was erased (:meth:`SessionStore.erased`: it has a secret)."""
        try:
            return self.store.mark_key() is not None
        except StoreError:
            return False

    def _erased_of(self, session_id: str) -> ErasedMessages | None:
        """What the store says was erased from the session (read once, then kept until forgotten)."""
        found = self._erased.get(session_id)
        if found is None:
            if self._heads.get(session_id) == 0:
                return None  # nothing recorded yet: nothing erased (read when the session has records)
            try:
                found = self._erased[session_id] = self.store.erased(session_id)
            except StoreError:
                return None  # read again on the next call; this process's own erases are in _removed
        return found

    def _note_removed(self, session_id: str, state: View, records: Sequence[RawRecord | RecordSlot]) -> None:
        """Remember the fingerprints of the view's messages that ``records`` remove (another writer's)."""
        targets = {r.target for r in records if r.op == REMOVE and r.target is not None}
        if targets:
            self._mark_removed(session_id, {e.fp for e in state.tail if e.seq in targets})
            self._erased.pop(session_id, None)  # another writer's erase: read what it stored on next use

    def _mark_removed(self, session_id: str, fps: Iterable[str]) -> None:  # a copy in a list is stale again
        new = set(fps)
        self._removed.setdefault(session_id, set()).update(new)
        for key, state in self._views.items():
            if key[0] == session_id and state.released:
                state.released -= new

    def _not_again(self, session_id: str, view: str, state: View, plan: Plan, messages: Sequence[Any]) -> Plan:
        """``plan`` without the adds of messages removed or erased meanwhile that the list still holds (a
        removed one only until the view's caller sends a list without it: then a copy is new)."""
        removed = self._removed.get(session_id, set()) - state.released
        free = removed - unplaced_fps(plan, messages) if removed else removed
        plan = dataclasses.replace(plan, released=frozenset(free)) if free else plan
        if not plan.adds:
            return plan
        erased = self._erased_of(session_id)
        if not removed and not erased:
            return plan
        adds = [e for e in plan.events if e.op == ADD]
        gone = {e.fingerprint for e in adds if e.fingerprint in removed or (erased and e.fingerprint in erased)}
        if not gone:
            return plan
        dropped = {i for i, e in zip(plan.adds, adds, strict=True) if e.fingerprint in gone}
        emit(
            "warning",
            "ctxlife.removed_message_not_recorded",
            session_id=session_id,
            view=view,
            messages=len(dropped),
            hint="the list still holds messages removed or erased from the session: drop them from it",
        )
        kept = [e for e in plan.events if not (e.op == ADD and e.fingerprint in gone)]
        return dataclasses.replace(plan, events=kept, adds=[i for i in plan.adds if i not in dropped])

    def erased_among(self, session_id: str, messages: Sequence[Any], slots: Sequence[int | None]) -> list[int]:
        """Indices of the messages without a slot that were removed or erased from the session (a
        caller's list still holding them): what a call record must not write again."""
        loose = [i for i, slot in enumerate(slots) if slot is None and i < len(messages) and recordable(messages[i])]
        if not loose:
            return []
        with self._lock:
            removed = self._removed.get(session_id, set())
            erased = self._erased_of(session_id)
            if not removed and not erased:
                return []
            out = []
            for i in loose:
                fp = stored_fp(messages[i])
                if fp in removed or (erased and fp in erased):
                    out.append(i)
            return out

    def new_lists(self, session_id: str, view: str | None = None) -> None:
        """The session's next lists are built from scratch (a CrewAI kickoff): each view's next
        list is new messages, plus the conversation a restore put back (seeded by the restore), so a
        run that repeats the last one's first message is a new turn, not an edit or a retry. Views with
        no state yet (a new process) are marked when their state is made."""
        with self._lock:
            for key in [k for k in self._primed if k[0] == session_id]:
                self._state(*key)
            held = {lane for sid, lane in self._views if sid == session_id and view in (None, lane)}
            for lane in held:
                self._views[(session_id, lane)].built_from_scratch()
            self._scratch.mark(session_id, view, held)

    def kept_lists(self, session_id: str) -> None:
        """The session's lists are kept between calls again (a run without new_lists): a
        :meth:`new_lists` not applied to a view yet is dropped."""
        with self._lock:
            self._scratch.forget(session_id)

    def _made(self, session_id: str, view: str, state: View, partial: View | None = None) -> View:
        """Keep a view's state made now: with what its partial state learned, or new (a new_lists applied)."""
        made = state.take_over(partial) if partial is not None else self._scratch.made(session_id, view, state)
        self._views[(session_id, view)] = made
        return made

    def _state(self, session_id: str, view: str) -> View | None:
        """The view's state if this recorder has one (a primed view's is made now)."""
        state = self._views.get((session_id, view))
        primed = self._primed.pop((session_id, view), None) if state is None else None
        if primed is not None:
            top, slots, fingerprints = primed
            with no_collection():  # (one acyclic entry per message)
                tail = [Entry(s, f) for s, f in zip(slots, fingerprints, strict=True)]
            last = tail[-1].seq if tail else 0
            state = self._made(session_id, view, View(tail, top, True, [last] if last else [], last))
        return state

    def _view(self, session_id: str, view: str) -> View:
        state = self._state(session_id, view)
        if state is None or state.partial:
            loaded = self._load(session_id, view, *self._kept.pop((session_id, view), (0, [])))
            state = self._made(session_id, view, loaded, state)
        return state

    def _appending_view(self, session_id: str, view: str) -> View:
        """The view's state for :meth:`add`: an append needs the session's head, not the view's
        messages, so a view not read yet is not read (a 100k-message history costs nothing here)."""
        state = self._state(session_id, view)
        if state is None:
            head = self.head(session_id)
            state = self._made(session_id, view, View([], head, False, partial=True))
        return state

    def prime(self, session_id: str, view: str, records: Sequence[RawRecord]) -> None:
        """Take every record of the view, read from sequence number 0 by someone else (a restore
        without a snapshot), so this recorder's first look at the view does not read them again.
        Does nothing once the view is loaded. Records written after them are read on the next
        write (the recorder then catches up, or the store reports the head moved)."""
        with self._lock:
            self._primed.pop((session_id, view), None)
            self._kept.pop((session_id, view), None)
            state = self._views.get((session_id, view))
            if state is None or state.partial:
                top = records[-1].seq if records else 0
                loaded = self._loaded(session_id, records, top)
                self._made(session_id, view, loaded, state)

    def prime_adds(self, session_id: str, view: str, slots: Sequence[Any], fingerprints: Sequence[Any]) -> None:
        """:meth:`prime` for a view whose every record is a plain ``add``, given as their slots and
        fingerprints (:meth:`SessionStore.read_view`): no record object per message."""
        with self._lock:
            self._kept.pop((session_id, view), None)
            state = self._views.get((session_id, view))
            if state is None or state.partial:
                top = slots[-1] if slots else 0
                self._heads[session_id] = max(self._heads.get(session_id, 0), top)
                # (copies of the two lists: C-speed, and whoever handed them may edit theirs)
                self._primed[(session_id, view)] = [top, list(slots), list(fingerprints)]
                if state is not None:
                    del self._views[(session_id, view)]
                    self._views[(session_id, view)] = cast(View, self._state(session_id, view)).take_over(state)

    def kept_from(self, session_id: str, view: str, messages: Sequence[Any], slots: Sequence[int | None]) -> None:
        """A restore read the view's snapshot (a compacted conversation) and the records after it:
        ``messages`` and their ``slots``. This recorder's first look at the view then reads only the
        records from where the kept messages start (:func:`~.views.kept_part`); a question about an
        older record reads them all (:meth:`_complete`). Does nothing once the view is loaded."""
        kept = kept_part(messages, slots)
        with self._lock:
            state = self._views.get((session_id, view))
            if kept is not None and (state is None or state.partial) and (session_id, view) not in self._primed:
                self._kept[(session_id, view)] = kept

    def _load(self, session_id: str, view: str, start: int = 0, older: Sequence[tuple[int, str]] = ()) -> View:
        """Read the view's current state: one pass over its records (the first time a view is seen).

        ``start`` (> 1): only the records from that slot on, after the ``older`` entries a restore
        gave (:meth:`kept_from`), when they are the end of the conversation: the slot's record is a
        plain ``add`` and none after it goes in after an older one (else every record is read)."""
        head = self.store.head(session_id)
        if start > 1:
            records = self.store.read_slots(session_id, start - 1, view=view)
            if (
                records
                and records[0].seq == start
                and records[0].op == ADD
                and records[0].target is None
                and not any(r.op == ADD and r.target is not None and r.target < start for r in records)
            ):
                return self._loaded(session_id, records, max(head, records[-1].seq), start, older)
        records = self.store.read_slots(session_id, 0, view=view)
        return self._loaded(session_id, records, max(head, records[-1].seq if records else 0))

    def _loaded(
        self,
        session_id: str,
        records: Sequence[RawRecord | RecordSlot],
        top: int,
        start: int = 0,
        older: Sequence[tuple[int, str]] = (),
    ) -> View:
        """A view's state from its records (all of them, or those from ``start`` on after the
        ``older`` entries), synced up to ``top`` (which the session's head reaches too)."""
        self._heads[session_id] = max(self._heads.get(session_id, 0), top)
        tail: list[Entry] = [Entry(s, f) for s, f in older]
        gone: set[str] = set()
        apply_records(tail, records, gone)
        if gone:  # removed before this process read the view: a caller's list may still hold them
            self._mark_removed(session_id, gone)
        last = tail[-1].seq if tail else 0
        return View(tail, top, start == 0, [last] if last else [], last, start=start)

    def _complete(self, session_id: str, view: str, state: View) -> None:
        """Make an incomplete tail whole (every record of the view up to ``synced``, read now): for the
        rare question about a record older than a compacted view's kept point."""
        if not state.complete:
            whole_tail(state, self.store.read_slots(session_id, 0, view=view))

    def _cover(self, session_id: str, view: str, state: View, slots: Iterable[int | None]) -> None:
        """Complete the tail when a list about to be a mirror holds a slot older than it (a diff
        takes a mirror's slot missing from the tail for one removed since)."""
        if not state.complete and any(state.older(s) for s in slots):
            self._complete(session_id, view, state)

    def _catch_up(self, session_id: str, view: str, state: View) -> None:
        """Read the view's records another writer appended after what the tail holds."""
        # The head first: records of other views move it too (then this view may have none to read).
        head = self.store.head(session_id)
        if head < state.synced or not self._same_session(session_id):
            self._started_again(session_id, view, state)
            return
        records = self.store.read_slots(session_id, state.synced, view=view)
        if not state.complete and any(r.target is not None and r.target < state.start for r in records):
            self._complete(session_id, view, state)  # another writer's edit of an older record
        self._note_removed(session_id, state, records)
        if apply_records(state.tail, records):
            state.reorders += 1
        if records:
            # Another writer changed this view: what this recorder saw of the caller's lists may be
            # stale (that writer may also have compacted the list): diff against the store's state.
            state.mirrors = []
            state.reseed = True
        if state.pending and records:
            # A write reported as failed may have landed (a connection lost after the store wrote):
            # then the waiting batch is in the records now, and must not be written again.
            waiting = [f for _, f in state.pending]
            got = [r.fingerprint for r in records if r.op == ADD]
            if any(got[i : i + len(waiting)] == waiting for i in range(len(got) - len(waiting) + 1)):
                state.pending = []
        top = max(self._heads.get(session_id, 0), head, records[-1].seq if records else 0)
        self._heads[session_id] = top
        state.synced = top

    def _reborn(self, session_id: str, view: str, state: View) -> bool:
        """Whether the session was deleted and written again since this recorder's last write (then ``state`` is
        read anew): ``if_head`` compares only the head's number, the same for a session written again as long."""
        try:
            same = self._same_session(session_id)
        except StoreError:  # unreadable now: the write finds out
            return False
        if not same:
            self._started_again(session_id, view, state)
        return not same

    def _same_session(self, session_id: str) -> bool:
        """Whether the last record this recorder wrote is still in the session as it wrote it."""
        mark = self._head_marks.get(session_id)
        if mark is None:
            return True  # nothing to compare: the head check alone
        seq, fp, recorded_at = mark
        records = self.store.read_records(session_id, seq - 1, strict=False)
        first = records[0] if records and records[0].seq == seq else None
        if first is None or first.recorded_at != recorded_at:
            return False
        return first.erased or first.fingerprint == fp  # (an erase rewrites the record's text)

    def _started_again(self, session_id: str, view: str, state: View) -> None:
        """The session was deleted and written again by another process: read it anew, in place
        (callers hold ``state``); what waits to be written still does."""
        emit("info", "ctxlife.session_started_again", session_id=session_id, view=view)
        self._read_anew(session_id, view, state)

    def _read_anew(self, session_id: str, view: str, state: View) -> None:
        """Forget what this recorder knows of the session and read the view again, in place (callers
        hold ``state``); what waits to be written still does."""
        pending, unsure = state.pending, state.unsure
        for key in [k for k in self._views if k[0] == session_id]:
            del self._views[key]
        for key in [k for k in self._primed if k[0] == session_id]:
            del self._primed[key]
        for key in [k for k in self._kept if k[0] == session_id]:
            del self._kept[key]
        self._heads.pop(session_id, None)
        self._head_marks.pop(session_id, None)
        fresh = self._load(session_id, view)
        if pending and [e.fp for e in fresh.tail[-len(pending) :]] == [f for _, f in pending]:
            pending = []  # the write reported failed had landed
        for f in dataclasses.fields(View):
            if not f.name.startswith("_"):
                setattr(state, f.name, getattr(fresh, f.name))
        state._order = None
        state.pending, state.unsure, state.mirrors, state.reseed = pending, unsure, [], True
        self._views[(session_id, view)] = state

    # -- alignment ----------------------------------------------------------------------------------

    def align(self, session_id: str, messages: Sequence[Any], view: str = "") -> Alignment:
        """Align ``messages`` with the view's tail (reads the store only the first time)."""
        with self._lock:
            state = self._view(session_id, view)
            try:
                return align_tail(state, Reversed(messages))
            except TailEdge:
                self._complete(session_id, view, state)
                return align_tail(state, Reversed(messages))

    def expect(
        self,
        session_id: str,
        messages: Sequence[Any],
        agreement: Agreement,
        view: str = "",
        *,
        compared: list[Any] | None = None,
    ) -> None:
        """Note how the caller's list compares with the list last handed back (:meth:`leave`): the next
        :meth:`record` of it skips the messages ``agreement`` found unchanged (a view this recorder knows).
        ``compared``: a copy of ``messages`` nobody edits (the host's, kept as the next mirror's originals);
        without it one is made (~0.2 ms for 10,000 messages)."""
        with self._lock:
            state = self._state(session_id, view)
            if state is not None:
                state.hint = (messages, list(messages) if compared is None else compared, agreement)

    def leave(self, session_id: str, messages: Sequence[Any], view: str = "", *, seq: int | None = None) -> None:  # noqa: ARG002
        """Note the list as ctxlife leaves it after a call (compacted, with everything new recorded).

        The caller's next list is diffed against it first: sent back with messages appended
        (stateless or not), it costs one comparison in C and the new messages; an edit of it is an
        edit. A list with a recordable message not recorded (no strategy records calls) is not noted:
        the caller's next list finds it new. ``seq``: for compatibility (slots are known per message)."""
        with self._lock:
            state = self._view(session_id, view)
            state.hint = None  # the call is over: its comparison says nothing of the next list
            if state.pending or not state.tail or state.fresh:
                return  # (fresh: the list is not recorded yet, and matching it by content is wrong)
            newest = state.mirrors[0] if state.mirrors else None
            if newest is not None and newest.originals is not None and len(newest.originals) == len(messages):
                if same_messages(newest.originals, messages):
                    # The messages the newest mirror was made from (the very objects, in the usual
                    # call): strategies replace message dicts, never edit them (the hookspec's
                    # contract), so it is this list already.
                    return
            mirror = self._mirror_of(session_id, view, state, messages)
            if all_recorded(messages, mirror.slots):
                if newest is not None and newest.trusted:
                    # What the call received and does not hand back was evicted, not deleted.
                    state.evicted.update(s for s in newest.slots if s is not None)
                    state.evicted.difference_update(mirror.slots)
                keep_mirror(state, mirror)

    def _mirror_of(self, session_id: str, view: str, state: View, messages: Sequence[Any]) -> Mirror:
        """:func:`~.views.map_mirror`, onto the whole tail when an incomplete one cannot place a message."""
        try:
            return map_mirror(state, messages)
        except TailEdge:  # a message the incomplete tail cannot place: map onto the whole tail
            self._complete(session_id, view, state)
            return map_mirror(state, messages)

    def seed(
        self,
        session_id: str,
        messages: Sequence[Any],
        slots: Sequence[int | None],
        view: str = "",
        fingerprints: Sequence[str | None] = (),
    ) -> None:
        """Start the view's mirrors with a list whose slots are known (a restored conversation), so
        the caller's first list is diffed against it (an edit on the first call after a restart is
        an edit). Does nothing once the view has a mirror."""
        with self._lock:
            state = self._view(session_id, view)
            state.reseed = False
            if state.mirrors:
                return
            self._cover(session_id, view, state, slots)
            keep_mirror(state, stored_mirror(messages, slots, fingerprints))

    def _reseed(self, session_id: str, view: str, state: View) -> None:
        """Seed the mirrors with the view's conversation as the store has it (snapshot + events)."""
        state.reseed = False
        if state.mirrors or not state.tail:
            return
        try:
            restored = restore_view(self.store, session_id, view, strict=False)
        except StoreError:
            return  # then lists are aligned by content (appends only) until a restore succeeds
        self._cover(session_id, view, state, restored.slots)
        keep_mirror(state, stored_mirror(restored.messages, restored.slots, restored.fingerprints))

    def holds(self, session_id: str, messages: Sequence[Any], view: str = "") -> bool:
        """Whether ``messages`` is (an edited form of) the view's conversation, by the same diff as
        :meth:`record`: a restore must then leave it alone."""
        with self._lock:
            state = self._view(session_id, view)
            if state.reseed:
                self._reseed(session_id, view, state)
            return self._diff(session_id, view, state, messages) is not None

    def note(
        self,
        session_id: str,
        messages: Sequence[Any],
        slots: Sequence[int | None],
        view: str = "",
        copied: list[Any] | None = None,
    ) -> None:
        """Take ``messages``, whose slots the caller knows (a restored conversation it recorded
        explicitly), as the view's newest list: :meth:`slots_of` then maps the list a call hands back
        from it (the very objects, or the few a compaction made) instead of fingerprinting it.
        ``copied``: copies of ``messages`` the caller already holds and never edits (a ``Session``'s
        own read), kept as the mirror's instead of copying the list again."""
        with self._lock:
            state = self._view(session_id, view)
            state.reseed = False
            self._cover(session_id, view, state, slots)
            kept = copied if copied is not None and len(copied) == len(messages) else copies(messages)
            keep_mirror(state, Mirror(kept, list(slots), [None] * len(messages), originals=list(messages)))

    def _diff(self, session_id: str, view: str, state: View, messages: Sequence[Any]) -> Plan | None:
        """:func:`diff_plan`, on the whole tail when an incomplete one cannot say."""
        hint = state.hint
        try:
            return diff_plan(state, messages)
        except TailEdge:
            self._complete(session_id, view, state)
            state.hint = hint  # (the first diff used it up)
            return diff_plan(state, messages)

    def slots_of(self, session_id: str, messages: Sequence[Any], view: str = "") -> list[int | None]:
        """The slot of each message of a list this recorder recorded or saw (None: not raw history)."""
        with self._lock:
            state = self._view(session_id, view)
            newest = state.mirrors[0] if state.mirrors else None
            if newest is not None and newest.originals is not None and same_messages(newest.originals, messages):
                return list(newest.slots)  # the list left by the call (leave): the very objects, in C
            mirror = self._mirror_of(session_id, view, state, messages)
            return list(mirror.slots) if mirror is not None else [None] * len(messages)

    # -- recording ----------------------------------------------------------------------------------

    def record(self, session_id: str, messages: Sequence[Any], view: str = "") -> list[RawRecord]:
        """Bring the view's raw history to ``messages``: write what is new, edited or removed; return the new records.

        What becomes an ``add``, a ``replace`` or a ``remove`` (the diff against the mirrors,
        :mod:`ctxlife.sessions.diff`; a list no mirror relates to aligned by content): docs/sessions.md, "How a
        caller's list becomes records". Idempotent: the same list again (or a copy, or a longer list that starts with
        it) records nothing twice. A message that is not JSON is recorded in its JSON-safe form
        (``RawRecord.quarantined`` says why; an error event names it) and never blocks the others. When the store
        fails, the new messages wait (:meth:`pending`) and go first on the next call; the error propagates.
        """
        with self._lock:
            state = self._view(session_id, view)
            if state.synced < self._heads.get(session_id, 0):
                self._catch_up(session_id, view, state)
            elif state.pending:
                # After a failed write, what landed is not sent again; while the store is still down
                # the new messages join the waiting ones (the write below fails and keeps them).
                with contextlib.suppress(Exception):
                    self._catch_up(session_id, view, state)
            for _ in range(_MAX_RETRIES):
                if state.reseed:
                    self._reseed(session_id, view, state)
                plan = None if state.pending else self._diff(session_id, view, state, messages)
                if plan is None and state.fresh and not state.pending:
                    plan = all_new(messages)
                if plan is None:
                    plan = self._plan_by_alignment(session_id, view, state, messages)
                plan = self._not_again(session_id, view, state, plan, messages)
                events = plan.events
                if state.pending:
                    added = [(e.message, e.fingerprint or "") for e in events]
                    batch = [*state.pending, *added] if plan.after_waiting else after_pending(state.pending, added)
                    events = [Event(ADD, m, None, f) for m, f in batch]
                if not events:
                    self._seen(session_id, view, state, messages, plan, [])
                    # A list with nothing to record (only a system prompt) does not use up "built
                    # from scratch": the run's next list is new as a whole too.
                    if state.fresh and any(recordable(m) for m in messages):
                        state.fresh = False
                    return []
                if any(e.op != ADD or e.target is not None for e in events) and self._reborn(session_id, view, state):
                    continue  # the plan named records of the deleted conversation
                try:
                    records = self._write(session_id, view, state, events)
                except AppendConflictError as exc:
                    state = self._after_conflict(session_id, view, state, exc)
                    continue
                state.fresh = False
                mine = [r for r in records if r.op == ADD]
                written = mine[len(mine) - len(plan.adds) :] if plan.adds else []
                self._seen(session_id, view, state, messages, plan, written)
                state.covered = max(state.covered, records[-1].seq)
                return records
            raise StoreError(
                f"session {session_id!r}: could not append after {_MAX_RETRIES} attempts, other writers kept "
                f"appending first; retry later"
            )

    def _plan_by_alignment(self, session_id: str, view: str, state: View, messages: Sequence[Any]) -> Plan:
        """Appends only, by content alignment with the view's messages (the module docs)."""
        try:
            return plan_by_alignment(state, messages)
        except TailEdge:  # the list agrees with the tail up to its kept point: the older records decide
            self._complete(session_id, view, state)
            return plan_by_alignment(state, messages)

    def _seen(
        self, session_id: str, view: str, state: View, messages: Sequence[Any], plan: Plan, written: list[RawRecord]
    ) -> None:
        """Keep a mirror of the list just recorded; note the newest record it reflects (``covered``)."""
        mirror = seen_mirror(state, messages, plan, written)
        if mirror is None:
            mirror = self._mirror_of(session_id, view, state, messages)  # map what alignment did not place
        keep_mirror(state, mirror)
        state.released |= plan.released
        state.covered = max([mirror.last, *(r.seq for r in written)]) if written else mirror.last or state.covered

    def add(self, session_id: str, messages: Sequence[dict[str, Any]], view: str = "") -> list[RawRecord]:
        """Append ``messages`` to the view as they are (no diff: each call adds them again), for explicit
        APIs (:meth:`ctxlife.sessions.keeper.Keeper.append`). The newest mirror follows: the caller's next
        list continuing with them records nothing twice. A failed write keeps nothing waiting (no message is
        written after later ones): the error propagates for the caller to retry. A write that failed but
        landed is found at once (or on the retry, when the store could not be read), not written twice."""
        with self._lock:
            state = self._appending_view(session_id, view)
            return self._add_now(session_id, view, state, messages, [(m, stored_fp(m)) for m in messages])

    def _add_now(
        self,
        session_id: str,
        view: str,
        state: View,
        messages: Sequence[dict[str, Any]],
        fresh: list[tuple[dict[str, Any], str]],
    ) -> list[RawRecord]:
        fps = [f for _, f in fresh]
        if state.unsure is not None and state.unsure[1] == fps:
            found = self._landed(session_id, view, state, state.unsure[0], fps)
            if found:
                return found
        for _ in range(_MAX_RETRIES):
            if state.synced < self._heads.get(session_id, 0):
                self._catch_up(session_id, view, state)
            head = self._heads.get(session_id, 0)
            waiting = state.pending
            try:
                records = self._write(session_id, view, state, [Event(ADD, m, None, f) for m, f in fresh])
            except AppendConflictError as exc:
                state.pending = waiting
                state = self._after_conflict(session_id, view, state, exc)
                continue
            except Exception:
                state.pending = waiting  # nothing waits: the caller is told and retries
                landed: list[RawRecord] | None = None
                with contextlib.suppress(Exception):
                    landed = self._landed(session_id, view, state, head, fps)
                if landed:
                    return landed
                if landed is None:  # could not look: the retry of these messages looks first
                    state.unsure = (head, fps)
                raise
            state.unsure = None
            state.pending = waiting
            if records:
                state.covered = records[-1].seq
                if state.mirrors:
                    newest = state.mirrors[0]
                    state.mirrors[0] = newest.extended(
                        copies(messages),
                        [r.seq for r in records],
                        [r.fingerprint for r in records],
                        last=max(newest.last, records[-1].seq),
                        originals=[*(newest.originals or newest.messages), *messages],
                        head=state.synced,
                    )
            return records
        raise StoreError(f"session {session_id!r}: could not append after {_MAX_RETRIES} attempts; retry later")

    def _landed(self, session_id: str, view: str, state: View, head: int, fps: list[str]) -> list[RawRecord]:
        """The records of ``fps`` when a write made at ``head`` landed after all (the view's adds after
        ``head`` end with them); ``[]`` when it did not. Reads the store."""
        after = self.store.read_records(session_id, head, view=view, strict=False)
        adds = [r for r in after if r.op == ADD and r.target is None]
        state.unsure = None
        if len(adds) < len(fps) or [r.fingerprint for r in adds[len(adds) - len(fps) :]] != fps:
            return []
        self._catch_up(session_id, view, state)
        landed = adds[len(adds) - len(fps) :]
        state.covered = max(state.covered, landed[-1].seq)
        return landed

    def remove(self, session_id: str, slots: Sequence[int], view: str = "") -> list[RawRecord]:
        """Remove messages (by slot) from the view's conversation: a ``remove`` record each."""
        return self._edit(session_id, view, [Event(REMOVE, {}, slot) for slot in slots])

    def replace(self, session_id: str, slot: int, message: dict[str, Any], view: str = "") -> list[RawRecord]:
        """Replace the message of ``slot`` in the view's conversation (an edit): a ``replace`` record."""
        return self._edit(session_id, view, [Event(REPLACE, stored_form(message), slot)])

    def _edit(self, session_id: str, view: str, events: list[Event]) -> list[RawRecord]:
        with self._lock:
            state = self._view(session_id, view)
            for _ in range(_MAX_RETRIES):
                if state.synced < self._heads.get(session_id, 0):
                    self._catch_up(session_id, view, state)  # (which also checks it is the same session)
                else:
                    self._reborn(session_id, view, state)
                live = {e.seq for e in state.tail}
                missing = [e.target for e in events if e.target not in live]
                if missing:  # written by another writer since this recorder last looked?
                    self._catch_up(session_id, view, state)
                    if any(state.older(m) for m in missing):  # before a compacted view's kept point
                        self._complete(session_id, view, state)
                    live = {e.seq for e in state.tail}
                    missing = [e.target for e in events if e.target not in live]
                if missing:
                    # (its append may have followed a delete and rewrite elsewhere) the view as stored decides
                    self._read_anew(session_id, view, state)
                    live = {e.seq for e in state.tail}
                    missing = [e.target for e in events if e.target not in live]
                if missing:
                    shown = original_session_id(session_id)
                    raise StoreError(
                        f"session {shown!r} view {view!r} has no message at sequence number(s) {missing}; "
                        f"list them with `ctxlife session export {shlex.quote(shown)} --all`"
                    )
                removing = [e for e in events if e.op == REMOVE]
                gone = [e.fp for e in state.tail if e.seq in {r.target for r in removing}]
                try:
                    records = self._write(session_id, view, state, events)
                except AppendConflictError as exc:
                    state = self._after_conflict(session_id, view, state, exc)
                    continue
                if gone:  # as for another writer's remove: a list still holding them does not record them again
                    self._mark_removed(session_id, gone)
                # The caller's lists no longer match the view: diff the next one against the view as stored.
                state.mirrors, state.reseed = [], True
                return records
            raise StoreError(f"session {session_id!r}: could not write after {_MAX_RETRIES} attempts; retry later")

    def _after_conflict(self, session_id: str, view: str, state: View, exc: AppendConflictError) -> View:
        """Another writer moved the head (maybe in another view): read what it wrote in this view,
        so the caller re-aligns and retries at the head the store reported. A head lower than known
        means the store lost records (a Redis restarted without persistence): start over from it."""
        if exc.head < self._heads.get(session_id, 0):
            emit("warning", "ctxlife.session_head_went_back", session_id=session_id, view=view, head=exc.head)
            pending = state.pending
            self.forget(session_id)
            fresh = self._view(session_id, view)
            fresh.pending = pending
            return fresh
        self._heads[session_id] = max(self._heads.get(session_id, 0), exc.head)
        self._catch_up(session_id, view, state)
        return state

    def _write(self, session_id: str, view: str, state: View, events: list[Event]) -> list[RawRecord]:
        if not events:
            return []
        head = self._heads.get(session_id, 0)
        adds = [e for e in events if e.op == ADD]
        try:
            if len(adds) == len(events) and all(e.target is None for e in events):
                records = self.store.append(
                    session_id,
                    [stored_form(e.message) for e in events],
                    view=view,
                    if_head=head,
                    fingerprints=[e.fingerprint or stored_fp(e.message) for e in events],
                )
            else:
                records = self.store.append_events(
                    session_id,
                    [dataclasses.replace(e, message=stored_form(e.message)) if e.op == ADD else e for e in events],
                    view=view,
                    if_head=head,
                )
        except AppendConflictError:
            raise
        except Exception:
            # The store is down or full: keep the new messages for the next call (a compaction may
            # evict them from the caller's list meanwhile), oldest dropped beyond a bound; edits are
            # found again by the next call's diff.
            batch = [(e.message, e.fingerprint or stored_fp(e.message)) for e in adds]
            if len(batch) > _MAX_PENDING:
                emit(
                    "error",
                    "ctxlife.session_pending_dropped",
                    session_id=session_id,
                    view=view,
                    dropped=len(batch) - _MAX_PENDING,
                )
            state.pending = batch[-_MAX_PENDING:]
            raise
        state.pending = []
        new_head = records[-1].seq if records else head
        for (sid, _), other in self._views.items():  # our own appends do not make other views stale
            if sid == session_id and other.synced == head:
                other.synced = new_head
        for (sid, _), primed in self._primed.items():
            if sid == session_id and primed[0] == head:
                primed[0] = new_head
        self._heads[session_id] = new_head
        if records:
            self._head_marks[session_id] = (records[-1].seq, records[-1].fingerprint, records[-1].recorded_at)
        state.synced = new_head
        if not state.complete and any(r.op == ADD and r.target is not None and r.target < state.start for r in records):
            self._complete(session_id, view, state)  # an insert among older records: read them all (with it)
        elif apply_records(state.tail, records):
            state.reorders += 1
        last_add = next((r.seq for r in reversed(records) if r.op == ADD and r.target is None), None)
        if last_add is not None:
            anchor(state, last_add)
        warn_quarantined(session_id, view, records)
        return records


_recorders: weakref.WeakKeyDictionary[SessionStore, Recorder] = weakref.WeakKeyDictionary()
_recorders_lock = threading.Lock()


def recorder_for(store: SessionStore) -> Recorder:
    """The :class:`Recorder` of a store object (one per store object and process, created on first use)."""
    with _recorders_lock:
        found = _recorders.get(store)
        if found is None:
            found = _recorders[store] = Recorder(store)
        return found
