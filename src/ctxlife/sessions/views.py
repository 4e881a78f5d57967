"""What a recorder knows of a view: its current slots (the tail), and the mirrors of lists it saw.

A *mirror* is a list ctxlife saw from a caller or handed back, with the slot of each recordable
position (how the recorder uses them: below). Which messages are recorded at all (:func:`recordable`)
and in what form (:func:`stored_form`) is decided here too.

Mirrors and the diff
--------------------
Per view the recorder keeps *mirrors*: the lists it recorded and the lists handed back after each
call (:meth:`~ctxlife.sessions.recording.Recorder.leave`, called by the host after each strategy),
each position with its slot. The caller's list is diffed against the mirror it agrees with longest
(:mod:`ctxlife.sessions.diff`): the usual call is that mirror plus new messages, found with one
comparison in C; otherwise an edit script over fingerprints gives the events. A mirror a process
has not seen from the caller (a new host, or after another writer changed the view) is the view as
the store has it (:func:`~ctxlife.sessions.restore.restore_view`); a diff against it removes
nothing before the conversation's end, since the store may hold what a compaction evicted.
What a call received and handed back without (a strategy's cut) is *evicted*: no diff removes it,
not even one against a list older than the cut (a caller whose next list has another shape, e.g.
without the system prompt, may agree longest with it), until the caller sends it again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from ctxlife.events import emit
from ctxlife.messages import (
    Agreement,
    common_prefix,
    has_bootstrap_section,
    is_inserted,
    is_system,
    strip_bootstrap,
)
from ctxlife.sessions.records import ADD, REMOVE, REPLACE, RawRecord, RecordSlot, fingerprint

__all__ = [
    "ANCHORS",
    "Entry",
    "MIRRORS",
    "Mirror",
    "TailEdge",
    "TailHidden",
    "View",
    "after_pending",
    "all_recorded",
    "anchor",
    "apply_records",
    "copies",
    "keep_mirror",
    "kept_part",
    "known_fp",
    "map_mirror",
    "recordable",
    "stored_form",
    "stored_fp",
    "stored_mirror",
    "warn_quarantined",
    "whole_tail",
]

#: Mirrors kept per view (about one per caller sharing the view).
MIRRORS = 8
#: Recent anchors kept per view (about one per caller sharing the view).
ANCHORS = 8


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


def stored_fp(message: dict[str, Any]) -> str:
    return fingerprint(stored_form(message))


@dataclasses.dataclass(slots=True)  # one per message of a view: 100k of them in a long session
class Entry:
    seq: int  # the slot
    fp: str  # the fingerprint of its current message
    after: int | None = None  # the slot it was inserted after (None: appended)


class Mirror:
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
    ) -> Mirror:
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
        return Mirror(*lists, last=last, originals=originals, head=head)

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


class TailEdge(Exception):  # noqa: N818 (a signal between the recorder's parts, never raised to a caller)
    """A question about a view needs records before the start of an incomplete tail (:attr:`View.start`):
    the recorder reads the whole tail (:meth:`~ctxlife.sessions.recording.Recorder._complete`) and asks again."""


@dataclasses.dataclass
class View:
    tail: list[Entry]  # the view's current messages (slot, fingerprint), in conversation order
    synced: int  # the tail holds every record of the view with seq <= synced
    # The tail starts at the view's first record. When not (a compacted view read from where its
    # restored conversation's kept messages start, ``start``), a question about a record it lacks
    # raises TailEdge, and the recorder reads them all.
    complete: bool
    anchors: list[int] = dataclasses.field(default_factory=list)  # seqs of recent anchors, newest last
    covered: int = 0  # seq of the latest record the last recorded list holds (a snapshot's raw_length)
    pending: list[tuple[dict[str, Any], str]] = dataclasses.field(default_factory=list)
    # Lists seen or handed back for this view, most recent first (see :mod:`ctxlife.sessions.diff`).
    mirrors: list[Mirror] = dataclasses.field(default_factory=list)
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
    _order: tuple[list[Entry], int, dict[int, int]] | None = dataclasses.field(default=None, repr=False)
    # Only appended to (Recorder.add on a view not read yet): the tail holds only what this recorder
    # wrote, and the view's records are read the first time anything else needs them.
    partial: bool = False
    # An explicit append whose write failed without telling whether it landed: (the head it was
    # written at, its fingerprints). A retry of the same messages looks for them first.
    unsure: tuple[int, list[str]] | None = None
    # Slots a strategy cut from a list it handed back (a compaction, room made for recall) that the
    # caller has not sent since: a diff never removes them (compaction is not deletion).
    evicted: set[int] = dataclasses.field(default_factory=set)
    # Fingerprints of removed messages this view's caller sent a list without: a later copy is new (a
    # regenerated reply in the same words), no longer a stale one (Recorder._not_again).
    released: set[str] = dataclasses.field(default_factory=set)
    # With ``complete`` False: the tail holds every current record from this slot on, after a few
    # older ones a restore gave (the task's first message), and none of the records between.
    start: int = 0

    def older(self, slot: int | None) -> bool:
        """Whether an incomplete tail cannot say what ``slot`` is (before its start, not one it holds)."""
        return slot is not None and not self.complete and slot < self.start and slot not in self.order()

    def edge(self) -> int:
        """The place in :attr:`tail` of the first entry from :attr:`start` on: older records the tail
        lacks may lie anywhere before it (0 for a complete tail: none)."""
        if self.complete:
            return 0
        start, tail = self.start, self.tail
        i = 0
        while i < len(tail) and tail[i].seq < start:
            i += 1
        return i

    def built_from_scratch(self) -> None:
        """The caller's next list is built from scratch (Recorder.new_lists): a restore seeds the
        conversation it puts back; the rest of the list is new."""
        self.mirrors, self.reseed, self.fresh = [], False, True

    def take_over(self, partial: View) -> View:
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


class TailHidden:
    """The tail's messages a mirror lacks, found by place (a :class:`~ctxlife.sessions.diff.Hidden`).

    ``edge``: for an incomplete tail, :meth:`View.edge` (records it lacks may lie anywhere before
    that place: asking there raises :class:`TailEdge`); None for a complete one."""

    def __init__(self, tail: list[Entry], in_mirror: set[int], edge: int | None = None) -> None:
        self.tail = tail
        self.in_mirror = in_mirror
        self.edge = edge

    def between(self, low: int, high: int) -> Iterator[tuple[int, int, str]]:
        tail, in_mirror = self.tail, self.in_mirror
        if self.edge is not None and low < self.edge:
            raise TailEdge  # records the tail lacks may lie there
        for place in range(max(low + 1, 0), min(high, len(tail))):
            entry = tail[place]
            if entry.seq not in in_mirror:
                yield place, entry.seq, entry.fp


def apply_records(
    tail: list[Entry], records: Sequence[RawRecord | RecordSlot], removed: set[str] | None = None
) -> bool:
    """Apply a view's records (events) to its current state ``tail`` (as :func:`.base.materialize`);
    return whether an entry moved or left (anything but appends at the end). ``removed`` gathers the
    fingerprints of the messages the records remove."""
    moved = False
    for r in records:
        if r.op == ADD:
            entry = Entry(r.seq, r.fingerprint)
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
                    if removed is not None:
                        removed.add(e.fp)
                    del tail[i]
                    moved = True
                    break
    return moved


def stored_mirror(
    messages: Sequence[Any], slots: Sequence[int | None], stored_fps: Sequence[str | None] = ()
) -> Mirror:
    """A mirror of the view as the store has it (a record that is not a message has no place in a diff).

    ``stored_fps``: the store's fingerprints of the messages' records, when they are the records as
    stored; one is used where it is :func:`stored_fp` of the message (the stored form is the message
    itself), which saves hashing a long history again.
    """
    kept = [
        s if s is not None and isinstance(m.get("role"), str) else None for m, s in zip(messages, slots, strict=True)
    ]
    known = stored_fps if len(stored_fps) == len(messages) else [None] * len(messages)
    fps = [
        None if s is None else (fp if fp is not None and stored_form(m) is m else stored_fp(m))
        for m, s, fp in zip(messages, kept, known, strict=True)
    ]
    return Mirror(copies(messages), kept, fps, trusted=False, originals=list(messages))


def known_fp(mirror: Mirror, message: Any) -> str:
    """The message's fingerprint: the mirror's, when the message is the object the mirror copied and
    still equals the copy (a restored list handed back: no second hashing of every message)."""
    index = mirror.index_of(message)
    if index is not None:
        fp = mirror.fps[index]
        if fp is not None:
            return fp
    return stored_fp(message)


def copies(messages: Sequence[Any], reuse: Mirror | None = None, start: int | None = None) -> list[Any]:
    """Shallow copies of the messages: a caller that later edits one in place (``m["content"] = ...``)
    then differs from the mirror, as an edit must. (An edit deep inside a content part list is not
    seen: copying every part of every message would cost more than the diff.)

    A message the mirror ``reuse`` copied, unchanged since, shares that copy: copies are never
    edited, so a restored 100k history and the first list recorded from it hold one set, not two.
    ``start``: ``messages`` are a list's positions from ``start`` on, looked up in ``reuse`` at the
    same positions only (see :meth:`Mirror.index_of`: the usual call costs what is new).
    """
    if reuse is None or reuse.originals is None:
        return [dict(m) if isinstance(m, dict) else m for m in messages]
    copied = reuse.messages
    out = []
    for k, m in enumerate(messages):
        i = reuse.index_of(m, None if start is None else start + k)
        out.append(copied[i] if i is not None else dict(m) if isinstance(m, dict) else m)
    return out


def after_pending(
    pending: list[tuple[dict[str, Any], str]], batch: list[tuple[dict[str, Any], str]]
) -> list[tuple[dict[str, Any], str]]:
    """``pending`` then ``batch``, without the part of ``batch`` that repeats the end of ``pending``."""
    if not pending:
        return batch
    pfps = [f for _, f in pending]
    bfps = [f for _, f in batch]
    # A list anchored on a record before the waiting ones (a message between, which the view cannot
    # hold, kept it from anchoring on them: one removed from the session, left out of ``batch``).
    for overlap in range(min(len(pfps), len(bfps)), 0, -1):
        if pfps[len(pfps) - overlap :] == bfps[:overlap]:
            return pending + batch[overlap:]
    # The batch may hold all of pending (the list still carries it): then it is the batch alone,
    # what comes before the waiting messages included (it is new too: a list that aligns nowhere).
    for start in range(len(bfps) - len(pfps) + 1):
        if bfps[start : start + len(pfps)] == pfps:
            return batch
    return pending + batch


def keep_mirror(state: View, mirror: Mirror) -> None:
    if not any(slot is not None for slot in mirror.slots):
        return  # a list with nothing of the view tells nothing about it
    if mirror.head < 0:
        mirror.head = state.synced
    mirrors = [m for m in state.mirrors if m is not mirror]
    for older in mirrors:  # only the newest keeps the caller's objects alive
        older.release()
    mirrors.insert(0, mirror)
    del mirrors[MIRRORS:]
    state.mirrors = mirrors


def map_mirror(state: View, messages: Sequence[Any]) -> Mirror:
    """A mirror of ``messages``: slots from the newest mirror where the list agrees with it (in C),
    the rest mapped onto the view's current messages by fingerprint, in order. Raises :class:`TailEdge`
    when an incomplete tail cannot place a message (the recorder completes it and maps again)."""
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
    if floor_slot and state.older(floor_slot):
        raise TailEdge
    order = state.order()
    floor = order.get(floor_slot, -1) if floor_slot else -1
    edge = state.edge()
    lowest = max(floor, edge - 1)  # (below an incomplete tail's edge may lie records it lacks)
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
        fp = hit[1] if hit is not None and hit[1] is not None else stored_fp(message)
        rest_fps[k] = fp
        if hit is not None and state.older(hit[0]):
            raise TailEdge
        slot = hit[0] if hit is not None and hit[0] is not None and hit[1] == fp and hit[0] in order else None
        if slot is not None and floor < order[slot] < ceiling:
            ceiling = order[slot]
        else:
            probe = ceiling - 1
            while probe > lowest and state.tail[probe].fp != fp:
                probe -= 1
            slot = state.tail[probe].seq if probe > lowest else None
            if slot is not None:
                ceiling = probe
            elif floor < edge and not state.complete:
                # Below the edge lie records the tail lacks. The object the newest mirror had at a
                # slot the tail holds (a message the restore gave), still that record's message,
                # is that record (not an equal one evicted between); any other reads them all.
                at = order.get(hit[0]) if hit is not None and hit[0] is not None else None
                if at is None or not floor < at < ceiling or state.tail[at].fp != fp:
                    raise TailEdge
                slot, ceiling = hit[0], at  # type: ignore[index]
        rest_slots[k] = slot
    slots += rest_slots
    fps += rest_fps
    kept = known.messages[:p] if known is not None else []
    return Mirror(kept + copies(messages[p:]), slots, fps, originals=list(messages))


def kept_part(messages: Sequence[Any], slots: Sequence[int | None]) -> tuple[int, list[tuple[int, str]]] | None:
    """Where a restored compacted conversation's kept messages start (the slot after the widest gap
    in its slots), and the (slot, fingerprint) of the few older messages it holds (the task's first
    message, taken as restored); None when its slots do not rise or nothing is older than its start."""
    held = [(s, m) for s, m in zip(slots, messages, strict=False) if s is not None]
    if not held or any(a[0] >= b[0] for a, b in zip(held, held[1:], strict=False)):
        return None  # (no slot, or an order a restore of inserted messages gives: read them all)
    cut = max(range(len(held)), key=lambda i: held[i][0] - (held[i - 1][0] if i else 0))
    start = held[cut][0]
    if start <= 1 or any(not isinstance(m, dict) for _, m in held[:cut]):
        return None
    return start, [(s, stored_fp(m)) for s, m in held[:cut]]


def whole_tail(state: View, records: Sequence[RawRecord | RecordSlot]) -> None:
    """Make an incomplete tail whole from every record of its view (those after ``synced`` left out)."""
    tail: list[Entry] = []
    apply_records(tail, [r for r in records if r.seq <= state.synced])
    state.tail, state.complete, state.start = tail, True, 0
    state.reorders += 1
    state._order = None


def anchor(state: View, seq: int) -> None:
    """Note ``seq`` as the view's newest anchor (see :mod:`~.alignment`)."""
    anchors = state.anchors
    if seq in anchors:
        anchors.remove(seq)
    anchors.append(seq)
    del anchors[:-ANCHORS]


def warn_quarantined(session_id: str, view: str, records: Sequence[RawRecord]) -> None:
    """An error event for each record written in a JSON-safe form (its message was not JSON)."""
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


def all_recorded(messages: Sequence[Any], slots: Sequence[int | None]) -> bool:
    """Whether every recordable message of ``messages`` has a slot (``slots``: a mirror's, one per position)."""
    mine = list(slots[: len(messages)])
    return None not in mine or all(s is not None or not recordable(m) for m, s in zip(messages, mine, strict=True))


class Scratch:
    """:meth:`Recorder.new_lists <ctxlife.sessions.recording.Recorder.new_lists>` for views the recorder
    holds no state of yet (a restarted process's kickoff): a state made for one of them later is built
    from scratch then (:meth:`made`), once."""

    def __init__(self) -> None:
        self._every: dict[str, set[str]] = {}  # session -> the views marked already (every other one waits)
        self._one: set[tuple[str, str]] = set()

    def mark(self, session_id: str, view: str | None, held: set[str]) -> None:
        """Lists built from scratch for ``view`` (every view: None); ``held``: the views marked now."""
        if view is None:
            self._every[session_id] = held
        elif view not in held:
            self._one.add((session_id, view))

    def made(self, session_id: str, view: str, state: View) -> View:
        """A new state of the view: built from scratch if a mark waits for it."""
        marked = self._every.get(session_id)
        if (session_id, view) in self._one or (marked is not None and view not in marked):
            self._one.discard((session_id, view))
            if marked is not None:
                marked.add(view)
            state.built_from_scratch()
        return state

    def forget(self, session_id: str | None) -> None:
        """Drop the marks of a session (every session: None)."""
        for sid in [s for s in self._every if session_id in (None, s)]:
            del self._every[sid]
        self._one = {key for key in self._one if session_id not in (None, key[0])}
