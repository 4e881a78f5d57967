"""Recording a caller's conversation into a session's raw history exactly once, by alignment.

A caller hands ctxlife its message list before every model call. What is *new* in it is found by
**aligning** its recordable messages (not system prompts, not messages ctxlife inserted: see
:func:`recordable`) with the stored tail of its view, by :func:`~ctxlife.sessions.base.fingerprint`,
never by object identity. So the same conversation passed twice, rebuilt from JSON on every call,
or passed by a fresh host (a new process) records nothing twice, while two equal messages at
different places (two ``"ok"`` replies) stay two records.

How a list aligns
-----------------
Read from its end, the caller's recordable messages ``R`` must contain a record of the view's tail
``T`` (an *anchor*) before which they agree with the tail: the (at most :data:`WINDOW`) messages
before it appear in ``T`` before the anchor, in the same order (a compaction may have evicted
records in between, never reordered them). Of the anchors that agree, the newest record wins, then
the one that explains the list at the lowest cost (new messages, counted twice when equal to a
recent record, plus records skipped), then the one nearest the list's end; what follows it in
``R`` is new. A list that aligns
nowhere is new as a whole (a new session, or a caller that kept none of the recorded conversation).

Two exact shortcuts come first. A list that starts with the list ctxlife last left (after the
call's compaction; :meth:`Recorder.leave`, also seeded from the snapshot by a new host) is that
list plus new messages, whatever it repeats; a caller that keeps its message objects is aligned on
the newest object already matched to the view's newest record. Only other lists are aligned by
content, where a conversation repeating the same messages for more than :data:`WINDOW` messages is
ambiguous.

Anchors are looked for only among the view's *live* records: the last one, the ones this recorder
aligned recently (one per caller, so several threads sharing a view each keep their place), and
those appended after them by others. An old record equal to a new message (a user saying
"continue" again) is therefore not mistaken for it.

Cost
----
Steady state: fingerprints of the new messages and of at most :data:`WINDOW` messages before them;
the store is read only the first time a (session, view) is seen and when another writer moved the
session's head (an ``if_head`` append conflict). Nothing here grows with the history's length.

Concurrency
-----------
Appends are conditional (``if_head``): two workers interleaving on one session never duplicate or
reorder; the loser reads what the winner appended, re-aligns and retries. One :class:`Recorder` per
store object (:func:`recorder_for`), shared by everything in the process that uses that store
object (a host, its strategies, :meth:`ctxlife.Host.record_reply`).
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ctxlife.errors import StoreError
from ctxlife.events import emit
from ctxlife.messages import is_inserted, is_system
from ctxlife.sessions.base import AppendConflictError, RawRecord, SessionStore, fingerprint

__all__ = ["WINDOW", "Alignment", "Recorder", "recordable", "recorder_for"]

#: How many messages before an anchor must agree with the stored tail (and how many records of a
#: view's tail a recorder keeps per caller).
WINDOW = 32
#: Recent anchors kept per view (about one per caller sharing the view).
_ANCHORS = 8
#: Most messages kept waiting when the store refuses writes (then the oldest are dropped, logged).
_MAX_PENDING = 10_000
_MAX_RETRIES = 64
#: Message objects remembered per view (see ``_View.objects``).
_OBJECTS = 512


def recordable(message: Any) -> bool:
    """Whether a message belongs in the raw history: a message dict that is neither a system prompt
    nor one ctxlife inserted (a summary, a recall block, a bootstrap system message)."""
    return isinstance(message, dict) and not is_system(message) and not is_inserted(message)


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


@dataclasses.dataclass
class _Entry:
    seq: int
    fp: str


@dataclasses.dataclass
class _View:
    tail: list[_Entry]  # the view's last records (at least WINDOW before the oldest anchor), oldest first
    synced: int  # the tail holds every record of the view with seq <= synced
    complete: bool  # the tail starts at the view's first record
    anchors: list[int] = dataclasses.field(default_factory=list)  # seqs of recent anchors, newest last
    covered: int = 0  # seq of the latest record the last recorded list holds (a snapshot's raw_length)
    pending: list[tuple[dict[str, Any], str]] = dataclasses.field(default_factory=list)
    # Message objects matched to a record (id -> (object, seq, fingerprint)), most recent last: a
    # caller that keeps its list (CrewAI, most loops) is aligned by them exactly, however many equal
    # messages it holds. The references keep the ids from being reused; bounded.
    objects: OrderedDict[int, tuple[Any, int, str]] = dataclasses.field(default_factory=OrderedDict)
    # The list as ctxlife last left it (after compaction): its length, the (index, fingerprint) of
    # its last WINDOW recordable messages, and the record its newest recordable message is. A
    # caller that sends it back with messages appended (stateless or not) continues it exactly.
    left: tuple[int, list[tuple[int, str]], int] | None = None


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
            found = self._fps[k] = fingerprint(self._messages[i])
        return found

    def count_up_to(self, k: int) -> int:
        """How many recordable messages there are from the start up to and including the ``k``-th from the end."""
        self.index(1 << 62)  # walk to the start (only on the rare no-anchor path)
        return len(self._idx) - k


class Recorder:
    """Records callers' lists into one store's sessions exactly once (see the module docs).

    Get the one for a store with :func:`recorder_for`. Thread-safe.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._lock = threading.RLock()
        self._views: dict[tuple[str, str], _View] = {}
        self._heads: dict[str, int] = {}

    # -- state ------------------------------------------------------------------------------------

    def known(self, session_id: str, view: str = "") -> bool:
        """Whether this recorder has read the view's tail already (False: the next call reads the store)."""
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

    def forget(self, session_id: str | None = None) -> None:
        """Drop what is known about a session (all sessions: None); the next call reads the store."""
        with self._lock:
            for key in [k for k in self._views if session_id is None or k[0] == session_id]:
                del self._views[key]
            for sid in [s for s in self._heads if session_id is None or s == session_id]:
                del self._heads[sid]

    def tail_records(self, session_id: str, view: str = "") -> list[tuple[int, str]]:
        """``(seq, fingerprint)`` of the view's tail as this recorder holds it (for tests and tools)."""
        with self._lock:
            return [(e.seq, e.fp) for e in self._view(session_id, view).tail]

    def _view(self, session_id: str, view: str) -> _View:
        state = self._views.get((session_id, view))
        if state is None:
            state = self._views[(session_id, view)] = self._load(session_id, view)
        return state

    def _load(self, session_id: str, view: str) -> _View:
        head = self.store.head(session_id)
        after = max(0, head - 4 * WINDOW)
        while True:
            records = self.store.read_records(session_id, after, view=view, strict=False)
            if len(records) >= WINDOW or after == 0:
                break
            after = max(0, head - 4 * (head - after))
        top = max(head, records[-1].seq if records else 0)
        self._heads[session_id] = max(self._heads.get(session_id, 0), top)
        tail = [_Entry(r.seq, r.fingerprint) for r in records]
        last = tail[-1].seq if tail else 0
        return _View(tail, top, after == 0, [last] if last else [], last)

    def _catch_up(self, session_id: str, view: str, state: _View) -> None:
        """Read the view's records another writer appended after what the tail holds."""
        # The head first: records of other views move it too (then this view may have none to read).
        head = self.store.head(session_id)
        records = self.store.read_records(session_id, state.synced, view=view, strict=False)
        state.tail.extend(_Entry(r.seq, r.fingerprint) for r in records)
        if state.pending and records:
            # A write reported as failed may have landed (a connection lost after the store wrote):
            # then the waiting batch is in the records now, and must not be written again.
            waiting = [f for _, f in state.pending]
            got = [r.fingerprint for r in records]
            if any(got[i : i + len(waiting)] == waiting for i in range(len(got) - len(waiting) + 1)):
                state.pending = []
        top = max(self._heads.get(session_id, 0), head, records[-1].seq if records else 0)
        self._heads[session_id] = top
        state.synced = top

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
        known = self._by_identity(state, rev) or self._continuing(state, rev)
        if known is not None:
            return known
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

    @staticmethod
    def _by_identity(state: _View, rev: _Reversed) -> Alignment | None:
        """The alignment given by the newest message object already matched to a record, if any.

        Only a hint, checked: the object must be the view's newest record (else another writer's
        records follow it, which only alignment by content can place), must still have that
        record's fingerprint (not edited in place) and must not occur twice in the list's end (the
        same dict appended again).
        """
        objects = state.objects
        if not objects:
            return None
        for k in range(2 * WINDOW):
            index = rev.index(k)
            if index is None:
                return None
            message = rev._messages[index]
            found = objects.get(id(message))
            if found is None or found[0] is not message:
                continue
            for later in range(k):
                other = rev.index(later)
                if other is not None and rev._messages[other] is message:
                    return None
            if rev.fp(k) != found[2] or found[1] != state.tail[-1].seq:
                return None  # edited in place, or records came after it that the caller may hold
            new = list(range(k - 1, -1, -1))
            return Alignment(WINDOW, [rev.index(i) for i in new], found[1], True, [rev.fp(i) for i in new])  # type: ignore[misc]
        return None

    @staticmethod
    def _continuing(state: _View, rev: _Reversed) -> Alignment | None:
        """The alignment of a list that starts with the list ctxlife last left (see ``_View.left``).

        Checked on that list's last :data:`WINDOW` recordable messages (same place, same
        fingerprint), and only while its newest record is the view's newest one.
        """
        left = state.left
        messages = rev._messages
        if left is None or len(messages) < left[0] or left[2] != state.tail[-1].seq:
            return None
        length, marks, seq = left
        for index, fp in marks:
            if not recordable(messages[index]) or fingerprint(messages[index]) != fp:
                return None
        new = [i for i in range(length, len(messages)) if recordable(messages[i])]
        return Alignment(WINDOW, new, seq, True, [fingerprint(messages[i]) for i in new])

    def leave(self, session_id: str, messages: Sequence[Any], view: str = "", *, seq: int | None = None) -> None:
        """Note the list as ctxlife leaves it after a call (compacted, with everything new recorded).

        A caller that sends it back with messages appended, rebuilt from JSON or not, is then
        aligned exactly however many equal messages the conversation holds. Costs :data:`WINDOW`
        fingerprints. Call it only when every recordable message of ``messages`` is recorded;
        ``seq`` is the record its newest recordable message is (default: the last recorded list's).
        """
        with self._lock:
            state = self._view(session_id, view)
            if state.pending or not state.tail:
                return
            marks: list[tuple[int, str]] = []
            i = len(messages)
            while i > 0 and len(marks) < WINDOW:
                i -= 1
                if recordable(messages[i]):
                    marks.append((i, fingerprint(messages[i])))
            marks.reverse()
            state.left = (len(messages), marks, state.covered if seq is None else seq) if marks else None

    @staticmethod
    def _remember(state: _View, pairs: list[tuple[Any, int, str]]) -> None:
        objects = state.objects
        for message, seq, fp in pairs:
            key = id(message)
            objects.pop(key, None)
            objects[key] = (message, seq, fp)
        while len(objects) > _OBJECTS:
            objects.popitem(last=False)

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
        """Append what is new in ``messages`` (by alignment) to the view's raw history; return the new records.

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
            rev = _Reversed(messages)
            for _ in range(_MAX_RETRIES):
                found = self._align_with_pending(state, rev)
                if found.aligned and found.anchor_seq <= state.synced:
                    self._anchor(state, found.anchor_seq)
                    anchor = rev.index(len(found.new))
                    if anchor is not None and found.anchor_seq <= state.synced:
                        self._remember(state, [(messages[anchor], found.anchor_seq, rev.fp(len(found.new)) or "")])
                new = [messages[i] for i in found.new]
                batch = _after_pending(state.pending, list(zip(new, found.fingerprints, strict=True)))
                if not batch:
                    if found.aligned:
                        state.covered = found.anchor_seq
                    return []
                try:
                    records = self._append(session_id, view, state, batch)
                except AppendConflictError as exc:
                    state = self._after_conflict(session_id, view, state, exc)
                    rev = _Reversed(messages)
                    continue
                state.covered = records[-1].seq
                # The caller's objects for the records just written (pending ones went first).
                mine = records[len(records) - len(new) :] if len(new) <= len(records) else records
                self._remember(
                    state, [(m, r.seq, r.fingerprint) for m, r in zip(new[-len(mine) :], mine, strict=False)]
                )
                return records
            raise StoreError(
                f"session {session_id!r}: could not append after {_MAX_RETRIES} attempts, other writers kept "
                f"appending first; retry later"
            )

    def add(self, session_id: str, messages: Sequence[dict[str, Any]], view: str = "") -> list[RawRecord]:
        """Append ``messages`` to the view as they are (no alignment: each call adds them again).

        For explicit APIs (a session's ``add``). The recorder's tail follows, so a later
        :meth:`record` of a list that holds them does not record them twice.
        """
        with self._lock:
            state = self._view(session_id, view)
            batch = [(m, fingerprint(m)) for m in messages]
            for _ in range(_MAX_RETRIES):
                if state.synced < self._heads.get(session_id, 0):
                    self._catch_up(session_id, view, state)
                try:
                    records = self._append(session_id, view, state, _after_pending(state.pending, batch))
                except AppendConflictError as exc:
                    state = self._after_conflict(session_id, view, state, exc)
                    continue
                if records:
                    state.covered = records[-1].seq
                return records
            raise StoreError(f"session {session_id!r}: could not append after {_MAX_RETRIES} attempts; retry later")

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

    def _append(
        self, session_id: str, view: str, state: _View, batch: list[tuple[dict[str, Any], str]]
    ) -> list[RawRecord]:
        if not batch:
            return []
        head = self._heads.get(session_id, 0)
        try:
            records = self.store.append(
                session_id, [m for m, _ in batch], view=view, if_head=head, fingerprints=[f for _, f in batch]
            )
        except AppendConflictError:
            raise
        except Exception:
            # The store is down or full: keep the batch for the next call (a compaction may evict
            # these messages from the caller's list meanwhile), oldest dropped beyond a bound.
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
        state.synced = new_head
        state.tail.extend(_Entry(r.seq, r.fingerprint) for r in records)
        if records:
            self._anchor(state, records[-1].seq)
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
        # Keep WINDOW records before the oldest anchor, and everything after it.
        oldest = min(anchors)
        cut = 0
        for i, entry in enumerate(state.tail):
            if entry.seq >= oldest:
                cut = max(0, i - WINDOW)
                break
        if cut:
            del state.tail[:cut]
            state.complete = False


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
    # The batch may hold all of pending (the list still carries it): then it is the batch alone.
    for start in range(len(bfps) - len(pfps) + 1):
        if bfps[start : start + len(pfps)] == pfps:
            return batch[start:]
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
