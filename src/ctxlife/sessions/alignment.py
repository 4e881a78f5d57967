"""Alignment of a caller's list that no mirror relates to with a view's stored tail.

Read from its end, the caller's recordable messages ``R`` must contain a record of the view's
current messages ``T`` (an *anchor*) before which they agree with them: the (at most :data:`WINDOW`)
messages before it appear in ``T`` before the anchor, in the same order. Of the anchors that agree,
the newest record wins, then the one that explains the list at the lowest cost, then the one nearest
the list's end; what follows it in ``R`` is new (appends only). A list that aligns nowhere is new as a
whole (a new session, or a caller that kept none of the conversation).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ctxlife.sessions.plans import Plan
from ctxlife.sessions.records import ADD, Event
from ctxlife.sessions.views import Entry, TailEdge, View, anchor, recordable, stored_fp

__all__ = [
    "Alignment",
    "Reversed",
    "WINDOW",
    "agrees",
    "align_tail",
    "align_with_pending",
    "plan_by_alignment",
    "unaligned",
]

#: How many messages before an anchor must agree with the stored tail (and how many records of a
#: view's tail a recorder keeps per caller).
WINDOW = 32


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
        after_waiting: anchored on a message waiting for the store (:func:`align_with_pending`):
            ``new`` holds only what follows the waiting messages, none of them.
    """

    overlap: int
    new: list[int]
    anchor_seq: int
    aligned: bool
    fingerprints: list[str]
    after_waiting: bool = False


class Reversed:
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
            found = self._fps[k] = stored_fp(self._messages[i])
        return found


def align_with_pending(state: View, rev: Reversed) -> Alignment:
    """:func:`align_tail`, the messages waiting for the store counting as the tail's newest records.

    A list that holds them (wholly or after a compaction evicted some) then anchors on the
    newest it holds, and what follows is new; the batch written is the waiting ones plus that.
    """
    if not state.pending:
        return align_tail(state, rev)
    top = max(state.synced, state.tail[-1].seq if state.tail else 0)
    virtual = [Entry(top + 1 + i, fp) for i, (_, fp) in enumerate(state.pending)]
    saved_tail, saved_anchors = state.tail, state.anchors
    state.tail = [*saved_tail, *virtual]
    state.anchors = [*saved_anchors, virtual[0].seq]
    try:
        found = align_tail(state, rev)
    finally:
        state.tail, state.anchors = saved_tail, saved_anchors
    if found.aligned and found.anchor_seq > top:
        # Anchored on a waiting message: only what follows it is new (it goes after them all).
        found.anchor_seq = top
        found.after_waiting = True
    return found


def align_tail(state: View, rev: Reversed) -> Alignment:
    tail = state.tail
    if not tail:
        if not state.complete:
            raise TailEdge  # (its records from the kept point were all removed: the older ones decide)
        return unaligned(rev)
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
    edge = state.edge()
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
            overlap, skipped = agrees(rev, k, tail, p, state.complete, edge)
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
        return unaligned(rev)
    k, p, overlap, _ = best
    new = list(range(k - 1, -1, -1))
    return Alignment(overlap, [rev.index(i) for i in new], tail[p].seq, True, [rev.fp(i) for i in new])  # type: ignore[misc]


def agrees(rev: Reversed, k: int, tail: list[Entry], p: int, complete: bool, edge: int = 0) -> tuple[int, int]:
    """How many of the list's messages up to ``rev[k]`` agree with the tail up to ``tail[p]`` (0:
    they disagree), and how many records the agreement skips.

    Agreeing means: read backwards, the list's messages (at most :data:`WINDOW`) appear in the
    tail in the same order, possibly with records in between (a compaction evicts messages from
    the middle of a list, never reorders them). Fewer skipped records is a better fit.
    Raises :class:`~.views.TailEdge` when the answer may lie in records an incomplete tail
    (``complete`` False) lacks: anywhere before its place ``edge`` (:meth:`~.views.View.edge`).
    """
    q = p - 1
    skipped = 0
    for d in range(1, WINDOW):
        fp = rev.fp(k + d)
        if fp is None:  # the list starts here: all of it agrees
            return d, skipped
        while q >= edge and tail[q].fp != fp:
            q -= 1
            skipped += 1
        if q < edge:
            # The list holds a message the tail does not: before the view's first record, not
            # this place. An incomplete tail cannot say: the recorder reads the rest and asks again.
            if not complete:
                raise TailEdge
            return 0, 0
        q -= 1
    return WINDOW, skipped


def unaligned(rev: Reversed) -> Alignment:
    rev.index(1 << 62)
    order = list(range(len(rev._idx) - 1, -1, -1))
    return Alignment(0, [rev.index(i) for i in order], 0, False, [rev.fp(i) for i in order])  # type: ignore[misc]


def plan_by_alignment(state: View, messages: Sequence[Any]) -> Plan:
    """Appends only, by content alignment with the view's messages (its anchor noted, ``covered`` set).
    Raises :class:`~.views.TailEdge` as :func:`agrees` does."""
    found = align_with_pending(state, Reversed(messages))
    if found.aligned and found.anchor_seq <= state.synced:
        anchor(state, found.anchor_seq)
    events = [Event(ADD, messages[i], None, fp) for i, fp in zip(found.new, found.fingerprints, strict=True)]
    if found.aligned:
        state.covered = found.anchor_seq
    fps = dict(zip(found.new, found.fingerprints, strict=True))
    return Plan(events, {}, list(found.new), None, fps, after_waiting=found.after_waiting)
