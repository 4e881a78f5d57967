"""Recording a caller's conversation into a session's raw history (an event log) exactly once.

A caller hands ctxlife its message list before every model call. The recorder brings the view's
raw history to that list: appended messages are ``add`` records, a message changed in place a
``replace``, messages the caller dropped a ``remove`` (:mod:`ctxlife.sessions.records`). Only
recordable messages count (not system prompts, not messages ctxlife inserted: :func:`recordable`),
in their stored form (:func:`stored_form`: without ctxlife's bootstrap section), by
:func:`~ctxlife.sessions.records.fingerprint`, never by object identity. So the same conversation
passed twice, rebuilt from JSON on every call, or passed by a fresh host records nothing twice,
while two equal messages at different places (two ``"ok"`` replies) stay two records.

Mirrors and the diff
--------------------
Per view the recorder keeps *mirrors*: the lists it recorded and the lists handed back after each
call (:meth:`Recorder.leave`, called by the host after every strategy), each position with its
slot. The caller's list is diffed against the mirror it agrees with longest
(:mod:`ctxlife.sessions.diff`): the usual call is that mirror plus new messages, found with one
comparison in C; otherwise an edit script over fingerprints gives the events. A mirror a process
has not seen from the caller (a new host, or after another writer changed the view) is the view as
the store has it (:func:`~ctxlife.sessions.restore.restore_view`); a diff against it removes
nothing before the conversation's end, since the store may hold what a compaction evicted.
What a call received and handed back without (a strategy's cut) is *evicted*: no diff removes it,
not even one against a list older than the cut (a caller whose next list has another shape, e.g.
without the system prompt, may agree longest with it), until the caller sends it again.

Alignment, for lists no mirror relates to
-----------------------------------------
Read from its end, the caller's recordable messages ``R`` must contain a record of the view's
current messages ``T`` (an *anchor*) before which they agree with them: the (at most
:data:`WINDOW`) messages before it appear in ``T`` before the anchor, in the same order. Of the
anchors that agree, the newest record wins, then the one that explains the list at the lowest cost,
then the one nearest the list's end; what follows it in ``R`` is new (appends only). A list that
aligns nowhere is new as a whole (a new session, or a caller that kept none of the conversation).

Cost
----
The usual call: one comparison of the list with the newest mirror (in C), fingerprints of the new
messages. The store is read the first time a (session, view) is seen (its records once, the
snapshot) and when another writer moved the session's head.

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
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ctxlife.errors import StoreError
from ctxlife.events import emit
from ctxlife.messages import (
    Agreement,
    differences,
    has_bootstrap_section,
    is_inserted,
    is_system,
    same_messages,
    strip_bootstrap,
)
from ctxlife.sessions.base import AppendConflictError, SessionStore
from ctxlife.sessions.diff import common_prefix, edit_script
from ctxlife.sessions.records import ADD, REMOVE, REPLACE, ErasedMessages, Event, RawRecord, RecordSlot, fingerprint
from ctxlife.sessions.restore import restore_view

__all__ = ["WINDOW", "Alignment", "Recorder", "recordable", "recorder_for", "stored_form"]

#: How many messages before an anchor must agree with the stored tail (and how many records of a
#: view's tail a recorder keeps per caller).
WINDOW = 32
#: Recent anchors kept per view (about one per caller sharing the view).
_ANCHORS = 8
#: Most messages kept waiting when the store refuses writes (then the oldest are dropped, logged).
_MAX_PENDING = 10_000
_MAX_RETRIES = 64
#: Mirrors kept per view (about one per caller sharing the view).
_MIRRORS = 8


def recordable(message: Any) -> bool:
    """Whether a message belongs in the raw history: a message dict that is neither a system prompt
    nor one ctxlife inserted (a summary, a recall block, a bootstrap system message)."""
    return isinstance(message, dict) and not is_system(message) and not is_inserted(message)


def stored_form(message: dict[str, Any]) -> dict[str, Any]:
    """What the raw history keeps of a recordable message: the message without ctxlife's bootstrap
    section (which opens the first user turn where a list has no system prompt). A new rendering
    of the bootstrap text is therefore never an edit of the user's words."""
    if message.get("role") == "user" and has_bootstrap_section(message):
        return strip_bootstrap(message)
    return message


def _fp(message: dict[str, Any]) -> str:
    return fingerprint(stored_form(message))


@dataclasses.dataclass
class Alignment:
    """Where a caller's list meets the view's stored tail.

    Attributes:
        overlap: how many recordable messages up to and including the anchor agree with the
            stored tail (at most :data:`WINDOW`; 0 when the list aligns nowhere).
        new: indices (into the caller's list) of the recordable messages after the anchor, in order.
        anchor_seq: the sequence number of the anchor record (0 without one).
        aligned: whether an anchor was found.
        fingerprints: the fingerprints of the ``new`` messages.
    """

    overlap: int
    new: list[int]
    anchor_seq: int
    aligned: bool
    fingerprints: list[str]


@dataclasses.dataclass(slots=True)  # one per message of a view: 100k of them in a long session
class _Entry:
    seq: int  # the slot
    fp: str  # the fingerprint of its current message
    after: int | None = None  # the slot it was inserted after (None: appended)


class _Mirror:
    """A list ctxlife saw (or handed back) for a view, with the slot of each recordable position.

    ``messages`` (copies of the caller's), ``slots`` and ``fps`` (fingerprints), one per position.
    A mirror of a list that continues this one appends its positions to these same lists when no
    other mirror did (:meth:`extended`): the usual call copies nothing of the history. This mirror's
    are the first :attr:`length` positions; it takes its own copy only when it is read after that.
    """

    def __init__(
        self,
        messages: list[Any],
        slots: list[int | None],
        fps: list[str | None],
        *,
        trusted: bool = True,
        last: int = -1,
        originals: list[Any] | None = None,
        head: int = -1,
    ) -> None:
        self._messages, self._slots, self._fps = messages, slots, fps
        self.length = len(messages)
        # A list the caller sent or was handed back (True), or the view as the store has it (False).
        # A diff against the latter removes nothing (the store may hold what a compaction evicted
        # without a snapshot saying so), and a list sharing only one message with it and lacking the
        # rest is a new conversation that repeats an old message ("hi"), not an edit.
        self.trusted = trusted
        # The newest slot the list holds (0: none).
        self.last = last if last >= 0 else max((s for s in slots if s is not None), default=0)
        # The caller's message objects at each position (the newest mirror only; None once older): a
        # message passed again is found by identity, then checked against the copy (the mirror keeps
        # copies, so an edit made in place is an edit).
        self.originals = originals
        # The view's records up to this seq were known when the mirror was made: only records after it
        # (others' writes) can be in a list that continues the mirror without being new.
        self.head = head
        self._by_source: dict[int, int] | None = None

    def _own(self) -> None:
        if len(self._messages) != self.length:  # a newer mirror appended to the lists: copy this one's part
            n = self.length
            self._messages, self._slots, self._fps = self._messages[:n], self._slots[:n], self._fps[:n]

    @property
    def messages(self) -> list[Any]:
        self._own()
        return self._messages

    @property
    def slots(self) -> list[int | None]:
        self._own()
        return self._slots

    @property
    def fps(self) -> list[str | None]:
        self._own()
        return self._fps

    def extended(
        self,
        messages: list[Any],
        slots: list[int | None],
        fps: list[str | None],
        *,
        last: int,
        originals: list[Any],
        head: int = -1,
    ) -> _Mirror:
        """A mirror of this list with positions appended (on this mirror's lists when no other mirror
        appended to them: then it costs what is new)."""
        n = self.length
        if len(self._messages) == n:
            self._messages.extend(messages)
            self._slots.extend(slots)
            self._fps.extend(fps)
            lists = self._messages, self._slots, self._fps
        else:
            lists = self._messages[:n] + messages, self._slots[:n] + slots, self._fps[:n] + fps
        return _Mirror(*lists, last=last, originals=originals, head=head)

    def index_of(self, message: Any, at: int | None = None) -> int | None:
        """The position of ``message`` when it is an object this mirror copied, unchanged since.

        ``at``: look only there (the position the message holds in a list that continues this one),
        unless the index of every position is built already: the usual call asks about the few new
        messages of a list, and building that index over the whole list would cost its length.
        """
        originals = self.originals
        if originals is None:
            return None
        if self._by_source is not None:
            i = self._by_source.get(id(message))
        elif at is not None:
            i = at if at < len(originals) and originals[at] is message else None
        else:
            self._by_source = {id(m): i for i, m in enumerate(originals)}
            i = self._by_source.get(id(message))
        return i if i is not None and self.messages[i] == message else None

    def release(self) -> None:
        """Stop keeping the caller's objects alive (a newer mirror keeps them now)."""
        self.originals = None
        self._by_source = None


@dataclasses.dataclass
class _Plan:
    """What :meth:`Recorder.record` writes for a list, and what it knows of the list's positions."""

    events: list[Event]
    slots: dict[int, int]  # list position -> slot, for the positions already in the view
    adds: list[int]  # the list positions of the add events, in order
    base: _Mirror | None = None  # the mirror the list starts with (the usual call), if any
    fps: dict[int, str] = dataclasses.field(default_factory=dict)  # fingerprints computed for positions


@dataclasses.dataclass
class _View:
    tail: list[_Entry]  # the view's current messages (slot, fingerprint), in conversation order
    synced: int  # the tail holds every record of the view with seq <= synced
    complete: bool  # the tail starts at the view's first record
    anchors: list[int] = dataclasses.field(default_factory=list)  # seqs of recent anchors, newest last
    covered: int = 0  # seq of the latest record the last recorded list holds (a snapshot's raw_length)
    pending: list[tuple[dict[str, Any], str]] = dataclasses.field(default_factory=list)
    # Lists seen or handed back for this view, most recent first (see :mod:`ctxlife.sessions.diff`).
    mirrors: list[_Mirror] = dataclasses.field(default_factory=list)
    # The mirrors must be rebuilt from the store before the next diff: the view was just read, or
    # another writer changed it (appended, edited, or compacted it and saved a snapshot).
    reseed: bool = True
    # The caller's next list was built from scratch (Recorder.new_lists): one no mirror relates
    # to is all new, not aligned with the view's messages by content (that would take a repeated
    # first message for one already recorded).
    fresh: bool = False
    # What the host found comparing the caller's list with the list it handed back last (see
    # Recorder.expect): the list object, its messages as compared, and the agreement.
    hint: tuple[Sequence[Any], list[Any], Agreement] | None = None
    # Bumped when the tail changes other than by appending at its end (see order()).
    reorders: int = 0
    _order: tuple[list[_Entry], int, dict[int, int]] | None = dataclasses.field(default=None, repr=False)
    # Only appended to (Recorder.add on a view not read yet): the tail holds only what this recorder
    # wrote, and the view's records are read the first time anything else needs them.
    partial: bool = False
    # An explicit append whose write failed without telling whether it landed: (the head it was
    # written at, its fingerprints). A retry of the same messages looks for them first.
    unsure: tuple[int, list[str]] | None = None
    # Slots a strategy cut from a list it handed back (a compaction, room made for recall) that the
    # caller has not sent since: a diff never removes them (compaction is not deletion).
    evicted: set[int] = dataclasses.field(default_factory=set)

    def take_over(self, partial: _View) -> _View:
        """This fully read state, with what a partial state of the same view learned meanwhile."""
        self.pending = partial.pending
        self.covered = partial.covered or self.covered
        self.mirrors = partial.mirrors
        self.reseed = partial.reseed
        self.fresh = partial.fresh
        self.hint = partial.hint
        self.unsure = partial.unsure
        self.evicted = partial.evicted
        return self

    def order(self) -> dict[int, int]:
        """The place of each of the view's current slots in :attr:`tail`; kept from call to call and
        extended by what was appended (a diff then costs what changed, not the view's length)."""
        tail = self.tail
        kept = self._order
        if kept is None or kept[0] is not tail or kept[1] != self.reorders or len(kept[2]) > len(tail):
            order = {e.seq: i for i, e in enumerate(tail)}
        else:
            order = kept[2]
            for i in range(len(order), len(tail)):
                order[tail[i].seq] = i
        self._order = (tail, self.reorders, order)
        return order


class _TailHidden:
    """The tail's messages a mirror lacks, found by place (a :class:`~ctxlife.sessions.diff.Hidden`)."""

    def __init__(self, tail: list[_Entry], in_mirror: set[int]) -> None:
        self.tail = tail
        self.in_mirror = in_mirror

    def between(self, low: int, high: int) -> Iterator[tuple[int, int, str]]:
        tail, in_mirror = self.tail, self.in_mirror
        for place in range(max(low + 1, 0), min(high, len(tail))):
            entry = tail[place]
            if entry.seq not in in_mirror:
                yield place, entry.seq, entry.fp


class _Reversed:
    """A caller's recordable messages read lazily from the end, fingerprints computed on demand."""

    __slots__ = ("_fps", "_idx", "_messages", "_pos")

    def __init__(self, messages: Sequence[Any]) -> None:
        self._messages = messages
        self._pos = len(messages)
        self._idx: list[int] = []
        self._fps: list[str | None] = []

    def index(self, k: int) -> int | None:
        """List index of the ``k``-th recordable message from the end (0 = last), or None."""
        while len(self._idx) <= k and self._pos > 0:
            self._pos -= 1
            if recordable(self._messages[self._pos]):
                self._idx.append(self._pos)
                self._fps.append(None)
        return self._idx[k] if k < len(self._idx) else None

    def fp(self, k: int) -> str | None:
        i = self.index(k)
        if i is None:
            return None
        found = self._fps[k]
        if found is None:
            found = self._fps[k] = _fp(self._messages[i])
        return found


class Recorder:
    """Records callers' lists into one store's sessions exactly once (see the module docs).

    Get the one for a store with :func:`recorder_for`. Thread-safe.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._lock = threading.RLock()
        self._views: dict[tuple[str, str], _View] = {}
        self._heads: dict[str, int] = {}
        # Fingerprints of messages removed or erased by another writer (or this process's erase) that
        # a caller's list may still hold: never recorded again from a list. Erased ones are also in
        # the store (SessionStore.erased: keyed HMACs, read once per session into _erased), so both
        # go when the host's LRU drops the session and a restarted process still knows them.
        self._removed: dict[str, set[str]] = {}
        self._erased: dict[str, ErasedMessages] = {}
        # (seq, fingerprint, recorded_at) of the session's last record this recorder wrote: a catch-up
        # that finds another record at that seq knows the session was deleted (or expired) and
        # written again by another process since.
        self._head_marks: dict[str, tuple[int, str, float | None]] = {}

    # -- state ------------------------------------------------------------------------------------

    def known(self, session_id: str, view: str = "") -> bool:
        """Whether this recorder keeps a state for the view (False: the next call reads the store)."""
        return (session_id, view) in self._views

    def head(self, session_id: str) -> int:
        """The session's last sequence number as this recorder knows it (reads the store once)."""
        with self._lock:
            found = self._heads.get(session_id)
            if found is None:
                found = self._heads[session_id] = self.store.head(session_id)
            return found

    def covered(self, session_id: str, view: str = "") -> int:
        """The sequence number of the latest record the view's last recorded list holds.

        This is the ``raw_length`` of a snapshot of that list: a restore is the snapshot plus the
        view's records after it (including any another writer appended meanwhile).
        """
        with self._lock:
            return self._view(session_id, view).covered

    def pending(self, session_id: str, view: str = "") -> int:
        """How many messages wait for the store (a failed write keeps them for the next call)."""
        with self._lock:
            state = self._views.get((session_id, view))
            return len(state.pending) if state is not None else 0

    def forget(self, session_id: str | None = None, *, removed: Iterable[str] = (), keep_pending: bool = False) -> None:
        """Drop what is known about a session (all sessions: None); the next call reads the store.

        ``removed``: fingerprints of messages just erased from the session; a caller's list that
        still holds them does not record them again (the session's earlier ones are kept too).
        Without it the session's memory of removed messages goes as well (the session was deleted),
        unless ``keep_pending``: keep the views whose messages still wait for the store (a host
        dropping an idle session from memory; they are written on the view's next call), and what
        is known of removed messages.
        """
        with self._lock:
            kept = False
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
                self._removed.setdefault(session_id, set()).update(gone)
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

    def _note_removed(self, session_id: str, state: _View, records: Sequence[RawRecord | RecordSlot]) -> None:
        """Remember the fingerprints of the view's messages that ``records`` remove (another writer's)."""
        targets = {r.target for r in records if r.op == REMOVE and r.target is not None}
        if targets:
            self._removed.setdefault(session_id, set()).update(e.fp for e in state.tail if e.seq in targets)
            self._erased.pop(session_id, None)  # another writer's erase: read what it stored on next use

    def _not_again(self, session_id: str, view: str, plan: _Plan) -> _Plan:
        """``plan`` without the adds of messages removed or erased meanwhile that the list still holds."""
        if not plan.adds:
            return plan
        removed = self._removed.get(session_id, set())
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
                fp = _fp(messages[i])
                if fp in removed or (erased and fp in erased):
                    out.append(i)
            return out

    def new_lists(self, session_id: str, view: str | None = None) -> None:
        """The session's next lists are built from scratch (a CrewAI kickoff): each view's next
        list is new messages, plus the conversation a restore put back (seeded by the restore), so a
        run that repeats the last one's first message is a new turn, not an edit or a retry."""
        with self._lock:
            for (sid, lane), state in self._views.items():
                if sid == session_id and view in (None, lane):
                    state.mirrors = []  # a restore seeds the conversation it puts back
                    state.reseed = False
                    state.fresh = True

    def _view(self, session_id: str, view: str) -> _View:
        state = self._views.get((session_id, view))
        if state is None or state.partial:
            loaded = self._load(session_id, view)
            state = self._views[(session_id, view)] = loaded if state is None else loaded.take_over(state)
        return state

    def _appending_view(self, session_id: str, view: str) -> _View:
        """The view's state for :meth:`add`: an append needs the session's head, not the view's
        messages, so a view not read yet is not read (a 100k-message history costs nothing here)."""
        state = self._views.get((session_id, view))
        if state is None:
            head = self.head(session_id)
            state = self._views[(session_id, view)] = _View([], head, False, partial=True)
        return state

    def prime(self, session_id: str, view: str, records: Sequence[RawRecord]) -> None:
        """Take every record of the view, read from sequence number 0 by someone else (a restore
        without a snapshot), so this recorder's first look at the view does not read them again.
        Does nothing once the view is loaded. Records written after them are read on the next
        write (the recorder then catches up, or the store reports the head moved)."""
        with self._lock:
            state = self._views.get((session_id, view))
            if state is None or state.partial:
                top = records[-1].seq if records else 0
                loaded = self._loaded(session_id, records, top)
                self._views[(session_id, view)] = loaded if state is None else loaded.take_over(state)

    def _load(self, session_id: str, view: str) -> _View:
        """Read the view's current state: one pass over its records (the first time a view is seen)."""
        head = self.store.head(session_id)
        records = self.store.read_slots(session_id, 0, view=view)
        return self._loaded(session_id, records, max(head, records[-1].seq if records else 0))

    def _loaded(self, session_id: str, records: Sequence[RawRecord | RecordSlot], top: int) -> _View:
        """A view's state from all its records, synced up to ``top`` (which the session's head reaches too)."""
        self._heads[session_id] = max(self._heads.get(session_id, 0), top)
        tail: list[_Entry] = []
        _apply(tail, records)
        last = tail[-1].seq if tail else 0
        return _View(tail, top, True, [last] if last else [], last)

    def _catch_up(self, session_id: str, view: str, state: _View) -> None:
        """Read the view's records another writer appended after what the tail holds."""
        # The head first: records of other views move it too (then this view may have none to read).
        head = self.store.head(session_id)
        if head < state.synced or not self._same_session(session_id):
            self._started_again(session_id, view, state)
            return
        records = self.store.read_slots(session_id, state.synced, view=view)
        self._note_removed(session_id, state, records)
        if _apply(state.tail, records):
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

    def _started_again(self, session_id: str, view: str, state: _View) -> None:
        """The session was deleted and written again by another process: read it anew, in place
        (callers hold ``state``); what waits to be written still does."""
        emit("info", "ctxlife.session_started_again", session_id=session_id, view=view)
        pending, unsure = state.pending, state.unsure
        for key in [k for k in self._views if k[0] == session_id]:
            del self._views[key]
        self._heads.pop(session_id, None)
        self._head_marks.pop(session_id, None)
        fresh = self._load(session_id, view)
        if pending and [e.fp for e in fresh.tail[-len(pending) :]] == [f for _, f in pending]:
            pending = []  # the write reported failed had landed
        for f in dataclasses.fields(_View):
            if not f.name.startswith("_"):
                setattr(state, f.name, getattr(fresh, f.name))
        state._order = None
        state.pending, state.unsure, state.mirrors, state.reseed = pending, unsure, [], True
        self._views[(session_id, view)] = state

    # -- alignment ----------------------------------------------------------------------------------

    def align(self, session_id: str, messages: Sequence[Any], view: str = "") -> Alignment:
        """Align ``messages`` with the view's tail (reads the store only the first time)."""
        with self._lock:
            return self._align(self._view(session_id, view), _Reversed(messages))

    def _align_with_pending(self, state: _View, rev: _Reversed) -> Alignment:
        """:meth:`_align`, the messages waiting for the store counting as the tail's newest records.

        A list that holds them (wholly or after a compaction evicted some) then anchors on the
        newest it holds, and what follows is new; the batch written is the waiting ones plus that.
        """
        if not state.pending:
            return self._align(state, rev)
        top = max(state.synced, state.tail[-1].seq if state.tail else 0)
        virtual = [_Entry(top + 1 + i, fp) for i, (_, fp) in enumerate(state.pending)]
        saved_tail, saved_anchors = state.tail, state.anchors
        state.tail = [*saved_tail, *virtual]
        state.anchors = [*saved_anchors, virtual[0].seq]
        try:
            found = self._align(state, rev)
        finally:
            state.tail, state.anchors = saved_tail, saved_anchors
        if found.aligned and found.anchor_seq > top:
            # Anchored on a waiting message: only what follows it is new (it goes after them all).
            found.anchor_seq = top
        return found

    def _align(self, state: _View, rev: _Reversed) -> Alignment:
        tail = state.tail
        if not tail:
            return self._unaligned(rev)
        # Live records: the last one, recent anchors, and whatever came after the oldest of them.
        floor_seq = min(state.anchors) if state.anchors else tail[-1].seq
        lowest = len(tail) - 1
        while lowest > 0 and tail[lowest - 1].seq >= floor_seq:
            lowest -= 1
        positions: dict[str, list[int]] = {}
        for p in range(len(tail) - 1, lowest - 1, -1):  # newest first
            positions.setdefault(tail[p].fp, []).append(p)
        # The anchor: of the places where the list agrees with the tail, the one at the newest
        # record (a list follows the history's end); among those, the one that explains the list
        # at the lowest cost (new messages, twice for one equal to a live record, plus records
        # skipped); then the one nearest the list's end.
        # Scanning stops at a perfect fit (the newest record, nothing skipped: the steady state), or
        # once no better anchor is possible.
        best: tuple[int, int, int, int] | None = None  # (k, p, overlap, cost)
        live = len(tail) - lowest
        newest = tail[-1].seq
        k = 0
        repeats = 0  # how many of the messages after rev[k] equal a live record (new ones rarely do)
        while True:
            fp = rev.fp(k)
            if fp is None:
                break
            if best is not None and ((tail[best[1]].seq == newest and k > best[3]) or k > best[0] + live):
                break
            if k and rev.fp(k - 1) in positions:
                repeats += 1
            for p in positions.get(fp, ()):
                if best is not None and tail[p].seq < tail[best[1]].seq:
                    break  # positions are newest first: nothing newer here
                overlap, skipped = self._agrees(rev, k, tail, p, state.complete)
                if overlap == 1 and k == 0 and p != len(tail) - 1 and rev.fp(1) is None:
                    # A list of one old message and nothing after it: a fresh list whose message
                    # repeats an earlier one (a new task's prompt), not a caller's kept place.
                    continue
                cost = k + repeats + skipped
                if overlap and (best is None or tail[p].seq > tail[best[1]].seq or cost < best[3]):
                    best = (k, p, overlap, cost)
                    break
            k += 1
        if best is None:
            return self._unaligned(rev)
        k, p, overlap, _ = best
        new = list(range(k - 1, -1, -1))
        return Alignment(overlap, [rev.index(i) for i in new], tail[p].seq, True, [rev.fp(i) for i in new])  # type: ignore[misc]

    def expect(self, session_id: str, messages: Sequence[Any], agreement: Agreement, view: str = "") -> None:
        """Note how the caller's list compares with the list last handed back (and passed to
        :meth:`leave`): the next :meth:`record` of that list then skips comparing the messages
        ``agreement`` found unchanged. Only for a view this recorder knows; costs a copy of the list."""
        with self._lock:
            state = self._views.get((session_id, view))
            if state is not None:
                state.hint = (messages, list(messages), agreement)

    def leave(self, session_id: str, messages: Sequence[Any], view: str = "", *, seq: int | None = None) -> None:  # noqa: ARG002
        """Note the list as ctxlife leaves it after a call (compacted, with everything new recorded).

        The caller's next list is diffed against it first: sent back with messages appended
        (stateless or not), it costs one comparison in C and the new messages; an edit of it is an
        edit. Call it only when every recordable message of ``messages`` is recorded. ``seq`` is
        accepted for compatibility and not needed (slots are known per message).
        """
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
            mirror = self._mirror_of(state, messages)
            if mirror is not None:
                if newest is not None and newest.trusted:
                    # What the call received and does not hand back was evicted, not deleted.
                    state.evicted.update(s for s in newest.slots if s is not None)
                    state.evicted.difference_update(mirror.slots)
                self._keep_mirror(state, mirror)

    def _mirror_of(self, state: _View, messages: Sequence[Any]) -> _Mirror | None:
        """A mirror of ``messages``: slots from the newest mirror where the list agrees with it (in C),
        the rest mapped onto the view's current messages by fingerprint, in order."""
        known = state.mirrors[0] if state.mirrors else None
        if known is not None and len(known.messages) == len(messages):
            if common_prefix(known.messages, messages) == len(messages):
                return known
        slots: list[int | None] = []
        fps: list[str | None] = []
        if known is not None:
            p = common_prefix(known.messages, messages)
            slots, fps = list(known.slots[:p]), list(known.fps[:p])
        else:
            p = 0
        # Map the rest onto the view's messages after the last mapped slot, from the end backwards
        # (the newest messages are the surest).
        floor_slot = max((s for s in slots if s is not None), default=0)
        order = state.order()
        floor = order.get(floor_slot, -1) if floor_slot else -1
        rest = messages[p:]
        rest_slots: list[int | None] = [None] * len(rest)
        rest_fps: list[str | None] = [None] * len(rest)
        ceiling = len(state.tail)
        for k in range(len(rest) - 1, -1, -1):
            message = rest[k]
            if not recordable(message):
                continue
            # the same object, unchanged since (compared with the mirror's copy): its slot and fingerprint
            i = known.index_of(message) if known is not None else None
            hit = (known.slots[i], known.fps[i]) if known is not None and i is not None else None
            fp = hit[1] if hit is not None and hit[1] is not None else _fp(message)
            rest_fps[k] = fp
            slot = hit[0] if hit is not None and hit[0] is not None and hit[1] == fp and hit[0] in order else None
            if slot is not None and floor < order[slot] < ceiling:
                ceiling = order[slot]
            else:
                probe = ceiling - 1
                while probe > floor and state.tail[probe].fp != fp:
                    probe -= 1
                slot = state.tail[probe].seq if probe > floor else None
                if slot is not None:
                    ceiling = probe
            rest_slots[k] = slot
        slots += rest_slots
        fps += rest_fps
        kept = known.messages[:p] if known is not None else []
        return _Mirror(kept + _copies(messages[p:]), slots, fps, originals=list(messages))

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
            self._keep_mirror(state, _stored_mirror(messages, slots, fingerprints))

    def _reseed(self, session_id: str, view: str, state: _View) -> None:
        """Seed the mirrors with the view's conversation as the store has it (snapshot + events)."""
        state.reseed = False
        if state.mirrors or not state.tail:
            return
        try:
            restored = restore_view(self.store, session_id, view, strict=False)
        except StoreError:
            return  # then lists are aligned by content (appends only) until a restore succeeds
        self._keep_mirror(state, _stored_mirror(restored.messages, restored.slots, restored.fingerprints))

    def holds(self, session_id: str, messages: Sequence[Any], view: str = "") -> bool:
        """Whether ``messages`` is (an edited form of) the view's conversation, by the same diff as
        :meth:`record`: a restore must then leave it alone."""
        with self._lock:
            state = self._view(session_id, view)
            if state.reseed:
                self._reseed(session_id, view, state)
            return self._plan(state, messages) is not None

    def note(self, session_id: str, messages: Sequence[Any], slots: Sequence[int | None], view: str = "") -> None:
        """Take ``messages``, whose slots the caller knows (a restored conversation it recorded
        explicitly), as the view's newest list: :meth:`slots_of` then maps the list a call hands back
        from it (the very objects, or the few a compaction made) instead of fingerprinting it."""
        with self._lock:
            state = self._view(session_id, view)
            state.reseed = False
            self._keep_mirror(
                state, _Mirror(_copies(messages), list(slots), [None] * len(messages), originals=list(messages))
            )

    def slots_of(self, session_id: str, messages: Sequence[Any], view: str = "") -> list[int | None]:
        """The slot of each message of a list this recorder recorded or saw (None: not raw history)."""
        with self._lock:
            state = self._view(session_id, view)
            newest = state.mirrors[0] if state.mirrors else None
            if newest is not None and newest.originals is not None and same_messages(newest.originals, messages):
                return list(newest.slots)  # the list left by the call (leave): the very objects, in C
            mirror = self._mirror_of(state, messages)
            return list(mirror.slots) if mirror is not None else [None] * len(messages)

    @staticmethod
    def _keep_mirror(state: _View, mirror: _Mirror) -> None:
        if not any(slot is not None for slot in mirror.slots):
            return  # a list with nothing of the view tells nothing about it
        if mirror.head < 0:
            mirror.head = state.synced
        mirrors = [m for m in state.mirrors if m is not mirror]
        for older in mirrors:  # only the newest keeps the caller's objects alive
            older.release()
        mirrors.insert(0, mirror)
        del mirrors[_MIRRORS:]
        state.mirrors = mirrors

    # -- diffing against a mirror -----------------------------------------------------------------

    def _plan(self, state: _View, messages: Sequence[Any]) -> _Plan | None:
        """The events that bring the view to ``messages``, judged against the best mirror; None when
        no mirror relates to the list (align it instead)."""
        # The mirror the list agrees with longest (the newest first on a tie): the caller's own
        # list, when several callers share the view.
        best: tuple[_Mirror, int] | None = None
        mirrors = state.mirrors
        if mirrors and _continues(state, mirrors[0], messages):
            mirrors = []  # the host's comparison showed it: no second one
            best = (state.mirrors[0], len(state.mirrors[0].messages))
        for mirror in mirrors:
            p = common_prefix(mirror.messages, messages, _soft(mirror, messages))
            if best is None or p > best[1]:
                best = (mirror, p)
            if p == len(mirror.messages) and p >= best[1]:
                break  # the list continues this mirror (the usual call: the newest one)
        if best is None:
            return None
        mirror, p = best
        if p == len(mirror.messages):
            # The usual call: the mirror plus new messages, maybe with some others wrote meanwhile
            # (those are theirs: matched in order, not written again). Costs what is new.
            later = self._after(state, max(mirror.last, mirror.head))
            plan = _Plan([], {}, [], mirror)
            cursor = 0
            used: set[int] = set()
            for i in range(p, len(messages)):
                message = messages[i]
                if not recordable(message):
                    continue
                fp = plan.fps[i] = _fp(message)
                probe = cursor
                while probe < len(later) and later[probe][1] != fp:
                    probe += 1
                if probe == len(later) and message.get("role") == "tool":
                    # Parallel tool results come back in any order: one recorded before the cursor
                    # (and not matched yet) is this same result, not a new one.
                    probe = next((k for k in range(cursor) if k not in used and later[k][1] == fp), len(later))
                if probe < len(later):
                    plan.slots[i] = later[probe][0]
                    used.add(probe)
                    cursor = max(cursor, probe + 1)
                    continue
                plan.events.append(Event(ADD, message, None, fp))
                plan.adds.append(i)
            return plan
        # An older mirror (the list agrees with it longest) may predate edits: its slots are taken as
        # the view holds them now (a slot removed since is no place to write to; one replaced since
        # holds its new message), so the diff is against the view's current state.
        order = state.order()
        tail = state.tail
        # A slot ctxlife evicted since is not in the caller's list either: hidden, never removed (an
        # older mirror predates the compaction; the caller's list continues the compacted one).
        evicted = state.evicted
        live = [
            (s, tail[order[s]].fp, m)
            for s, f, m in zip(mirror.slots, mirror.fps, mirror.messages, strict=True)
            if s is not None and f is not None and s in order and s not in evicted
        ]
        mirrored = _results_in_order([(s, f) for s, f, _ in live], [m for _, _, m in live])
        kept = [(i, m) for i, m in enumerate(messages) if recordable(m)]
        caller = _results_in_order([(i, _known_fp(mirror, m)) for i, m in kept], [m for _, m in kept])
        hidden = _TailHidden(tail, {s for s, _ in mirrored})
        script = edit_script(
            mirrored, caller, hidden, order, removals=mirror.trusted, same_kind=_same_kind(mirror, messages)
        )
        if not script.related:
            return None
        if not mirror.trusted and script.shared < min(2, len(mirrored)) and len(script.slots) < len(mirrored):
            return None  # one shared message and the rest gone: a new conversation, not an edit
        plan = _Plan([], script.slots, [], None, dict(caller))
        for edit in script.edits:
            if edit.op == REMOVE:
                plan.events.append(Event(REMOVE, {}, edit.target))
            elif edit.op == REPLACE:
                plan.events.append(Event(REPLACE, stored_form(messages[edit.index]), edit.target, plan.fps[edit.index]))
            else:
                plan.events.append(Event(ADD, messages[edit.index], edit.target, plan.fps[edit.index]))
                plan.adds.append(edit.index)
        return plan

    @staticmethod
    def _after(state: _View, slot: int) -> list[tuple[int, str]]:
        """The view's current messages after ``slot`` (what others wrote since), oldest first."""
        tail = state.tail
        i = len(tail)
        while i > 0 and tail[i - 1].seq > slot:
            i -= 1
        return [(e.seq, e.fp) for e in tail[i:]]

    @staticmethod
    def _agrees(rev: _Reversed, k: int, tail: list[_Entry], p: int, complete: bool) -> tuple[int, int]:
        """How many of the list's messages up to ``rev[k]`` agree with the tail up to ``tail[p]`` (0:
        they disagree), and how many records the agreement skips.

        Agreeing means: read backwards, the list's messages (at most :data:`WINDOW`) appear in the
        tail in the same order, possibly with records in between (a compaction evicts messages from
        the middle of a list, never reorders them). Fewer skipped records is a better fit.
        """
        q = p - 1
        skipped = 0
        for d in range(1, WINDOW):
            fp = rev.fp(k + d)
            if fp is None:  # the list starts here: all of it agrees
                return d, skipped
            while q >= 0 and tail[q].fp != fp:
                q -= 1
                skipped += 1
            if q < 0:
                # The list holds a message the tail does not: before the view's first record, not
                # this place; past the edge of a trimmed tail, what was checked agrees.
                return (0, 0) if complete else (d, skipped)
            q -= 1
        return WINDOW, skipped

    @staticmethod
    def _unaligned(rev: _Reversed) -> Alignment:
        rev.index(1 << 62)
        order = list(range(len(rev._idx) - 1, -1, -1))
        return Alignment(0, [rev.index(i) for i in order], 0, False, [rev.fp(i) for i in order])  # type: ignore[misc]

    # -- recording ----------------------------------------------------------------------------------

    def record(self, session_id: str, messages: Sequence[Any], view: str = "") -> list[RawRecord]:
        """Bring the view's raw history to ``messages``: write what is new, edited or removed; return the new records.

        ``messages`` is diffed against the lists ctxlife last saw or handed back for the view
        (:mod:`ctxlife.sessions.diff`): appended messages are ``add`` records, a message that
        differs from the one at its place is a ``replace``, messages the caller dropped from the
        middle or end of its conversation are ``remove`` records (not what it never held, nor what
        a compaction evicted). A list no mirror relates to is aligned with the view's messages by
        content (the module docs); everything after its anchor is new.

        Idempotent: calling it again with the same list (or a copy, or a longer list that starts
        with it) records nothing twice. A message that is not JSON is recorded in its JSON-safe
        form (``RawRecord.quarantined`` says why; an error event names it) and never blocks the
        others. When the store fails, the new messages wait (:meth:`pending`) and go first on the
        next call; the error propagates.
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
                plan = None if state.pending else self._plan(state, messages)
                if plan is None and state.fresh and not state.pending:
                    plan = _all_new(messages)
                if plan is None:
                    plan = self._plan_by_alignment(state, messages)
                plan = self._not_again(session_id, view, plan)
                events = plan.events
                if state.pending:
                    batch = _after_pending(state.pending, [(e.message, e.fingerprint or "") for e in events])
                    events = [Event(ADD, m, None, f) for m, f in batch]
                if not events:
                    self._seen(state, messages, plan, [])
                    # A list with nothing to record (only a system prompt) does not use up "built
                    # from scratch": the run's next list is new as a whole too.
                    if state.fresh and any(recordable(m) for m in messages):
                        state.fresh = False
                    return []
                try:
                    records = self._write(session_id, view, state, events)
                except AppendConflictError as exc:
                    state = self._after_conflict(session_id, view, state, exc)
                    continue
                state.fresh = False
                mine = [r for r in records if r.op == ADD]
                self._seen(state, messages, plan, mine[len(mine) - len(plan.adds) :] if plan.adds else [])
                state.covered = max(state.covered, records[-1].seq)
                return records
            raise StoreError(
                f"session {session_id!r}: could not append after {_MAX_RETRIES} attempts, other writers kept "
                f"appending first; retry later"
            )

    def _plan_by_alignment(self, state: _View, messages: Sequence[Any]) -> _Plan:
        """Appends only, by content alignment with the view's messages (the module docs)."""
        rev = _Reversed(messages)
        found = self._align_with_pending(state, rev)
        if found.aligned and found.anchor_seq <= state.synced:
            self._anchor(state, found.anchor_seq)
        events = [Event(ADD, messages[i], None, fp) for i, fp in zip(found.new, found.fingerprints, strict=True)]
        if found.aligned:
            state.covered = found.anchor_seq
        return _Plan(events, {}, list(found.new), None, dict(zip(found.new, found.fingerprints, strict=True)))

    def _seen(self, state: _View, messages: Sequence[Any], plan: _Plan, written: list[RawRecord]) -> None:
        """Keep a mirror of the list just recorded; note the newest record it reflects (``covered``)."""
        known = dict(plan.slots)
        for index, record in zip(plan.adds, written, strict=False):
            known[index] = record.seq
        if state.evicted:
            state.evicted.difference_update(known.values())  # the caller holds them again: its own
        base = plan.base
        start = len(base.messages) if base is not None else 0
        rest = range(start, len(messages))
        if all(i in known for i in rest if recordable(messages[i])) and (base is not None or known or not messages):
            # The base mirror's positions as they were, then what this call placed: costs what is new.
            slots = [known.get(i) if recordable(messages[i]) else None for i in rest]
            fps = [
                (plan.fps.get(i) or _fp(messages[i])) if slot is not None else None
                for i, slot in zip(rest, slots, strict=True)
            ]
            newest = max((s for s in slots if s is not None), default=0)
            previous = state.mirrors[0] if state.mirrors else None
            if base is not None:
                mirror: _Mirror | None = base.extended(
                    _copies(messages[start:], previous, start),
                    slots,
                    fps,
                    last=max(base.last, newest),
                    originals=list(messages),
                )
            else:
                mirror = _Mirror(_copies(messages, previous), slots, fps, originals=list(messages))
        else:
            mirror = self._mirror_of(state, messages)  # map what alignment did not place
        if mirror is None:
            return
        self._keep_mirror(state, mirror)
        state.covered = max([mirror.last, *(r.seq for r in written)]) if written else mirror.last or state.covered

    def add(self, session_id: str, messages: Sequence[dict[str, Any]], view: str = "") -> list[RawRecord]:
        """Append ``messages`` to the view as they are (no diff: each call adds them again).

        For explicit APIs (a session's ``add``, a model's reply; see
        :meth:`ctxlife.sessions.keeper.Keeper.append`). The newest mirror follows, so the caller's
        next list that continues with them records nothing twice. A failed write keeps nothing
        waiting, so a message is never written later after messages that came after it: the error
        propagates for the caller to retry. A write that failed but landed (a connection lost after
        the store wrote) is found at once, or on the retry of the same messages when the store could
        not be read, and returned, not written twice.
        """
        with self._lock:
            state = self._appending_view(session_id, view)
            return self._add_now(session_id, view, state, messages, [(m, _fp(m)) for m in messages])

    def _add_now(
        self,
        session_id: str,
        view: str,
        state: _View,
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
                        _copies(messages),
                        [r.seq for r in records],
                        [r.fingerprint for r in records],
                        last=max(newest.last, records[-1].seq),
                        originals=[*(newest.originals or newest.messages), *messages],
                        head=state.synced,
                    )
            return records
        raise StoreError(f"session {session_id!r}: could not append after {_MAX_RETRIES} attempts; retry later")

    def _landed(self, session_id: str, view: str, state: _View, head: int, fps: list[str]) -> list[RawRecord]:
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
                    self._catch_up(session_id, view, state)
                live = {e.seq for e in state.tail}
                missing = [e.target for e in events if e.target not in live]
                if missing:  # written by another writer since this recorder last looked?
                    self._catch_up(session_id, view, state)
                    live = {e.seq for e in state.tail}
                    missing = [e.target for e in events if e.target not in live]
                if missing:
                    raise StoreError(
                        f"session {session_id!r} view {view!r} has no message at sequence number(s) {missing}; "
                        f"list them with `ctxlife session show {session_id} --all`"
                    )
                try:
                    records = self._write(session_id, view, state, events)
                except AppendConflictError as exc:
                    state = self._after_conflict(session_id, view, state, exc)
                    continue
                state.mirrors = []  # the caller's lists no longer match the view: diff against it anew
                return records
            raise StoreError(f"session {session_id!r}: could not write after {_MAX_RETRIES} attempts; retry later")

    def _after_conflict(self, session_id: str, view: str, state: _View, exc: AppendConflictError) -> _View:
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

    def _write(self, session_id: str, view: str, state: _View, events: list[Event]) -> list[RawRecord]:
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
                    fingerprints=[e.fingerprint or _fp(e.message) for e in events],
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
            batch = [(e.message, e.fingerprint or _fp(e.message)) for e in adds]
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
        self._heads[session_id] = new_head
        if records:
            self._head_marks[session_id] = (records[-1].seq, records[-1].fingerprint, records[-1].recorded_at)
        state.synced = new_head
        if _apply(state.tail, records):
            state.reorders += 1
        last_add = next((r.seq for r in reversed(records) if r.op == ADD and r.target is None), None)
        if last_add is not None:
            self._anchor(state, last_add)
        for r in records:
            if r.quarantined:
                emit(
                    "error",
                    "ctxlife.session_record_quarantined",
                    session_id=session_id,
                    view=view,
                    seq=r.seq,
                    role=r.message.get("role"),
                    problem=r.quarantined,
                    hint="the message was recorded in a JSON-safe form; fix what produced it",
                )
        return records

    def _anchor(self, state: _View, seq: int) -> None:
        anchors = state.anchors
        if seq in anchors:
            anchors.remove(seq)
        anchors.append(seq)
        del anchors[:-_ANCHORS]


def _apply(tail: list[_Entry], records: Sequence[RawRecord | RecordSlot]) -> bool:
    """Apply a view's records (events) to its current state ``tail`` (as :func:`.base.materialize`);
    return whether an entry moved or left (anything but appends at the end)."""
    moved = False
    for r in records:
        if r.op == ADD:
            entry = _Entry(r.seq, r.fingerprint)
            if r.target is None:
                tail.append(entry)
            else:
                at = next((i for i, e in enumerate(tail) if e.seq == r.target), None)
                if at is None:
                    tail.append(entry)
                else:
                    at += 1
                    while at < len(tail) and tail[at].after == r.target:
                        at += 1
                    entry.after = r.target
                    moved = moved or at < len(tail)
                    tail.insert(at, entry)
        elif r.op == REPLACE:
            for e in tail:
                if e.seq == r.target:
                    e.fp = r.fingerprint
                    break
        elif r.op == REMOVE:
            for i, e in enumerate(tail):
                if e.seq == r.target:
                    del tail[i]
                    moved = True
                    break
    return moved


def _continues(state: _View, mirror: _Mirror, messages: Sequence[Any]) -> bool:
    """Whether the host's comparison (:meth:`Recorder.expect`) shows that ``messages`` continues
    ``mirror``: the mirror was made from the very list the host compared against, and every message
    of it is still there (equal, or different only in what is not an edit: see :func:`_soft`)."""
    hint, state.hint = state.hint, None  # good for one diff of one call's list
    if hint is None or hint[0] is not messages or mirror.originals is None:
        return False
    _, compared, agreement = hint
    size = len(mirror.messages)
    if agreement.length < size or not same_messages(mirror.originals, agreement.previous):
        return False
    changed = [i for i in agreement.changed if i < size]
    if not same_messages(compared, messages):  # replaced since (the bootstrap section, applied)
        length, also = differences(compared, messages)
        if len(compared) != len(messages) or length < len(messages):
            return False
        changed = sorted({*changed, *(i for i in also if i < size)})
    soft = _soft(mirror, messages)
    return all(soft(i) for i in changed)


def _all_new(messages: Sequence[Any]) -> _Plan:
    """Every recordable message of the list is new (a list built from scratch)."""
    plan = _Plan([], {}, [], None)
    for i, message in enumerate(messages):
        if recordable(message):
            fp = plan.fps[i] = _fp(message)
            plan.events.append(Event(ADD, message, None, fp))
            plan.adds.append(i)
    return plan


def _stored_mirror(
    messages: Sequence[Any], slots: Sequence[int | None], stored_fps: Sequence[str | None] = ()
) -> _Mirror:
    """A mirror of the view as the store has it (a record that is not a message has no place in a diff).

    ``stored_fps``: the store's fingerprints of the messages' records, when they are the records as
    stored; one is used where it is :func:`_fp` of the message (the stored form is the message
    itself), which saves hashing a long history again.
    """
    kept = [
        s if s is not None and isinstance(m.get("role"), str) else None for m, s in zip(messages, slots, strict=True)
    ]
    known = stored_fps if len(stored_fps) == len(messages) else [None] * len(messages)
    fps = [
        None if s is None else (fp if fp is not None and stored_form(m) is m else _fp(m))
        for m, s, fp in zip(messages, kept, known, strict=True)
    ]
    return _Mirror(_copies(messages), kept, fps, trusted=False, originals=list(messages))


def _known_fp(mirror: _Mirror, message: Any) -> str:
    """The message's fingerprint: the mirror's, when the message is the object the mirror copied and
    still equals the copy (a restored list handed back: no second hashing of every message)."""
    index = mirror.index_of(message)
    if index is not None:
        fp = mirror.fps[index]
        if fp is not None:
            return fp
    return _fp(message)


def _copies(messages: Sequence[Any], reuse: _Mirror | None = None, start: int | None = None) -> list[Any]:
    """Shallow copies of the messages: a caller that later edits one in place (``m["content"] = ...``)
    then differs from the mirror, as an edit must. (An edit deep inside a content part list is not
    seen: copying every part of every message would cost more than the diff.)

    A message the mirror ``reuse`` copied, unchanged since, shares that copy: copies are never
    edited, so a restored 100k history and the first list recorded from it hold one set, not two.
    ``start``: ``messages`` are a list's positions from ``start`` on, looked up in ``reuse`` at the
    same positions only (see :meth:`_Mirror.index_of`: the usual call costs what is new).
    """
    if reuse is None or reuse.originals is None:
        return [dict(m) if isinstance(m, dict) else m for m in messages]
    copied = reuse.messages
    out = []
    for k, m in enumerate(messages):
        i = reuse.index_of(m, None if start is None else start + k)
        out.append(copied[i] if i is not None else dict(m) if isinstance(m, dict) else m)
    return out


def _same_kind(mirror: _Mirror, messages: Sequence[Any]) -> Callable[[int, int], bool]:
    """Whether the mirror's message at a slot and the caller's at a list index have one role (see
    :func:`~ctxlife.sessions.diff.edit_script`); the slots' roles are looked up only when asked."""
    roles: dict[int, Any] = {}

    def same(slot: int, index: int) -> bool:
        if not roles:
            roles.update(
                (s, m.get("role")) for m, s in zip(mirror.messages, mirror.slots, strict=True) if s is not None
            )
        return bool(roles.get(slot) == messages[index].get("role"))

    return same


def _results_in_order(items: list[tuple[int, str]], messages: list[Any]) -> list[tuple[int, str]]:
    """``items`` with each run of consecutive tool results in call-id order: parallel results sent
    back in another (completion) order are the same messages, not an edit."""
    out = list(items)
    i = 0
    while i < len(out):
        if messages[i].get("role") != "tool":
            i += 1
            continue
        j = i
        while j < len(out) and messages[j].get("role") == "tool":
            j += 1
        # by call id (an edited result keeps its place), then fingerprint (repeated ids)
        order = sorted(range(i, j), key=lambda k: (str(messages[k].get("tool_call_id", "")), out[k][1]))
        out[i:j] = [out[k] for k in order]
        i = j
    return out


def _soft(mirror: _Mirror, messages: Sequence[Any]) -> Any:
    """Differences at a list position that are not edits of the conversation: two messages that are
    not recorded (a system prompt, a summary, ctxlife's bootstrap message), or the same message by
    fingerprint (a prompt-cache marker moved, ctxlife's bootstrap section re-rendered)."""

    def same(i: int) -> bool:
        theirs = messages[i]
        if mirror.slots[i] is None:
            return not recordable(theirs)
        return recordable(theirs) and mirror.fps[i] == _fp(theirs)

    return same


def _after_pending(
    pending: list[tuple[dict[str, Any], str]], batch: list[tuple[dict[str, Any], str]]
) -> list[tuple[dict[str, Any], str]]:
    """``pending`` then ``batch``, without the part of ``batch`` that repeats the end of ``pending``."""
    if not pending:
        return batch
    pfps = [f for _, f in pending]
    bfps = [f for _, f in batch]
    for overlap in range(min(len(pfps), len(bfps)), 0, -1):
        if pfps[len(pfps) - overlap :] == bfps[:overlap]:
            return pending + batch[overlap:]
    # The batch may hold all of pending (the list still carries it): then it is the batch alone,
    # what comes before the waiting messages included (it is new too: a list that aligns nowhere).
    for start in range(len(bfps) - len(pfps) + 1):
        if bfps[start : start + len(pfps)] == pfps:
            return batch
    return pending + batch


_recorders: weakref.WeakKeyDictionary[SessionStore, Recorder] = weakref.WeakKeyDictionary()
_recorders_lock = threading.Lock()


def recorder_for(store: SessionStore) -> Recorder:
    """The :class:`Recorder` of a store object (one per store object and process, created on first use)."""
    with _recorders_lock:
        found = _recorders.get(store)
        if found is None:
            found = _recorders[store] = Recorder(store)
        return found
