"""The edit script between the list ctxlife last saw of a conversation and the caller's list now.

A caller edits its conversation between calls: it appends (the usual case), edits an earlier
message (a corrected question, a tool result cleared by context editing), regenerates a reply,
pops or deletes messages, or sends parallel tool results back in another order. The recorder
(:mod:`ctxlife.sessions.recording`) keeps *mirrors*: lists it saw (or handed back), each position
with the *slot* (the sequence number of the record that added the message) of its recordable
message. This module turns "mirror, caller's list" into events:

1. :func:`common_prefix` (:mod:`ctxlife.messages.previous`) finds how far the two lists agree,
   with C-level list comparisons (bisection over slices), so the usual call -- the mirror plus
   new messages -- costs one pass in C and Python work only for what is new.
2. Otherwise :func:`edit_script` diffs their recordable messages by fingerprint (common prefix
   and suffix first, :class:`difflib.SequenceMatcher` on the rest): positions that agree keep
   their slot; a run of messages that replaces a run of others is a ``replace`` per pair of one
   role (parallel tool results in another order are no change: the recorder puts each run of
   them in call-id order before diffing); messages the caller lacks are ``remove`` events, except
   before the first message it shares with the mirror (a caller that keeps only the tail of its
   conversation deletes nothing) and when the mirror is the store's view rather than a list the
   caller held; new messages are ``add`` events, after the slot before them.

Messages of the view the mirror does not hold (evicted by a compaction, appended by another
writer) are not new when the caller sends them: :func:`edit_script` maps them to their slots
through ``hidden``.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from difflib import SequenceMatcher
from typing import Protocol

from ctxlife.messages import common_prefix
from ctxlife.sessions.records import ADD, REMOVE, REPLACE

__all__ = ["Edit", "Hidden", "HiddenMessages", "Script", "common_prefix", "edit_script"]


@dataclasses.dataclass(frozen=True, slots=True)
class Edit:
    """One event of a :class:`Script`: ``op`` on ``target`` (a slot), with the caller's message
    at list position ``index`` (for ``add``/``replace``; -1 for ``remove``)."""

    op: str
    target: int | None
    index: int


@dataclasses.dataclass
class Script:
    """The events that turn the mirror into the caller's list, and the slot of each of the
    caller's recordable positions (``None``: a new message, its slot known once written)."""

    edits: list[Edit]
    slots: dict[int, int]
    related: bool
    shared: int = 0  # how many of the caller's messages are the mirror's (same place in the order)


class Hidden(Protocol):
    """The view's current messages a mirror lacks, by place (a slot's place in ``order``)."""

    def between(self, low: int, high: int) -> Iterable[tuple[int, int, str]]:
        """``(place, slot, fingerprint)`` of those with ``low < place < high``, in order of place."""
        ...


class HiddenMessages:
    """:class:`Hidden` over a list of ``(slot, fingerprint)``."""

    def __init__(self, messages: Sequence[tuple[int, str]], order: dict[int, int]) -> None:
        self._places = sorted((order[slot], slot, fp) for slot, fp in messages if slot in order)
        self._keys = [place for place, _, _ in self._places]

    def between(self, low: int, high: int) -> Iterator[tuple[int, int, str]]:
        k = bisect.bisect_right(self._keys, low)
        while k < len(self._places) and self._places[k][0] < high:
            yield self._places[k]
            k += 1


def edit_script(
    mirror: Sequence[tuple[int, str]],
    caller: Sequence[tuple[int, str]],
    hidden: Sequence[tuple[int, str]] | Hidden,
    order: dict[int, int],
    *,
    removals: bool = True,
    same_kind: Callable[[int, int], bool] | None = None,
    movable: Callable[[int], bool] | None = None,
) -> Script:
    """The edit script from ``mirror`` to ``caller``.

    Args:
        mirror: ``(slot, fingerprint)`` of the mirror's recordable messages, in order.
        caller: ``(list index, fingerprint)`` of the caller's recordable messages, in order.
        hidden: ``(slot, fingerprint)`` of the view's current messages the mirror lacks (what a
            compaction evicted, what others appended), or a :class:`Hidden` that finds them by
            place (the recorder's: it reads only the places an added message can take).
        order: the place of every current slot of the view in conversation order.
        removals: whether messages the caller lacks are removed. False for a mirror that is not
            a list the caller held (the view as the store has it, which may hold what a
            compaction evicted without a snapshot saying so, or what another worker wrote since
            the caller last looked): then nothing is removed, and before the mirror's last
            messages only one-for-one replacements are edits and the rest are adds.
        same_kind: ``same_kind(slot, index)`` -- whether the mirror's message at ``slot`` and the
            caller's at list ``index`` can be one message edited (an edit keeps the role: an
            edited question, a cleared tool result, a regenerated reply). A pair that cannot is
            a removal and an add, never a replacement.
        movable: ``movable(index)`` -- whether the caller's message at list ``index`` is one of a run
            whose order means nothing (parallel tool results): the view's copy of it is looked for
            anywhere in the run, not only after the run's messages before it.

    ``related`` is False when the lists share no message (then nothing is an edit: the caller's
    list is another conversation, or a fresh one, for the caller to align otherwise).
    """
    a = [fp for _, fp in mirror]
    b = [fp for _, fp in caller]
    slots: dict[int, int] = {}
    edits: list[Edit] = []
    start = 0
    while start < len(a) and start < len(b) and a[start] == b[start]:
        slots[caller[start][0]] = mirror[start][0]
        start += 1
    end_a, end_b = len(a), len(b)
    while end_a > start and end_b > start and a[end_a - 1] == b[end_b - 1]:
        end_a -= 1
        end_b -= 1
        slots[caller[end_b][0]] = mirror[end_a][0]
    opcodes = SequenceMatcher(None, a[start:end_a], b[start:end_b], autojunk=False).get_opcodes()
    related = bool(slots) or any(tag == "equal" for tag, *_ in opcodes)
    # The store's view's last messages and the caller's run in their place: paired only after what the
    # caller kept of the hidden messages (what a compaction evicted, in any role) is mapped back, below.
    unpaired_end: tuple[list[tuple[int, str]], int, int] | None = None
    for tag, i1, i2, j1, j2 in opcodes:
        i1, i2, j1, j2 = i1 + start, i2 + start, j1 + start, j2 + start
        if tag == "equal":
            for k in range(i2 - i1):
                slots[caller[j1 + k][0]] = mirror[i1 + k][0]
        else:  # replace, delete or insert: a replace opcode's sides share no message
            # At the mirror's end a replacement is what it looks like even for the store's view of
            # the conversation (a compaction never evicts the newest messages); elsewhere only then
            # when removals are trusted, or one for one.
            paired = min(i2 - i1, j2 - j1) if tag == "replace" else 0
            if not (removals or i2 == len(a)) and i2 - i1 != j2 - j1:
                paired = 0
            if not removals and i2 == len(a) and tag == "replace" and same_kind is not None:
                # The store's view's end: paired by _replace_end, after what a compaction evicted is mapped back
                # (the caller's run may begin with it, in any role).
                paired = 0
                unpaired_end = (list(mirror[i1:i2]), j1, j2)
            if same_kind is not None:
                k = 0
                while k < paired and same_kind(mirror[i1 + k][0], caller[j1 + k][0]):
                    k += 1
                paired = k
            for k in range(paired):
                index = caller[j1 + k][0]
                slots[index] = mirror[i1 + k][0]
                edits.append(Edit(REPLACE, mirror[i1 + k][0], index))
            if removals:
                for slot, _ in mirror[i1 + paired : i2]:
                    edits.append(Edit(REMOVE, slot, -1))
            for index, _ in caller[j1 + paired : j2]:
                edits.append(Edit(ADD, None, index))
    shared = len(slots) - sum(1 for e in edits if e.op == REPLACE)
    if related:
        _map_hidden(caller, slots, edits, hidden, order, movable)
        if unpaired_end is not None and same_kind is not None:
            _replace_end(caller, slots, edits, unpaired_end, same_kind)
        _drop_front_removals(mirror, caller, slots, edits)
        _place_adds(caller, slots, edits)
    return Script(edits, slots, related, shared)


def _map_hidden(
    caller: Sequence[tuple[int, str]],
    slots: dict[int, int],
    edits: list[Edit],
    hidden: Sequence[tuple[int, str]] | Hidden,
    order: dict[int, int],
    movable: Callable[[int], bool] | None = None,
) -> None:
    """A new message equal to a view message the mirror lacks, lying between the same neighbours,
    is that message (the caller kept what a compaction evicted, or received what others wrote). A
    movable one (a parallel tool result) may lie anywhere in its run: the view holds a run in the
    order it was recorded, the caller's comes sorted by call id."""
    adds = {e.index for e in edits if e.op == ADD}
    if not adds or not hidden:
        return
    found = hidden if hasattr(hidden, "between") else HiddenMessages(hidden, order)
    end = len(order) + 1
    # the place of the next mapped message after each caller position (the upper bound)
    upper = [end] * len(caller)
    bound = end
    for pos in range(len(caller) - 1, -1, -1):
        upper[pos] = bound
        slot = slots.get(caller[pos][0])
        if slot is not None and slot in order:
            bound = order[slot]
    lower = -1
    run_lower = -1  # the lower bound where the current run of movable messages began
    in_run = False
    used: set[int] = set()
    kept: set[int] = set()
    for pos, (index, fp) in enumerate(caller):
        moves = movable is not None and movable(index)
        if moves and not in_run:
            run_lower = lower
        in_run = moves
        slot = slots.get(index)
        if slot is not None:
            lower = max(lower, order.get(slot, lower))
            continue
        if index not in adds:
            continue
        for place, hidden_slot, hidden_fp in found.between(run_lower if moves else lower, upper[pos]):
            if hidden_fp == fp and hidden_slot not in used:
                slots[index] = hidden_slot
                used.add(hidden_slot)
                kept.add(index)
                lower = max(lower, place)
                break
    if kept:
        edits[:] = [e for e in edits if not (e.op == ADD and e.index in kept)]


def _replace_end(
    caller: Sequence[tuple[int, str]],
    slots: dict[int, int],
    edits: list[Edit],
    unpaired_end: tuple[list[tuple[int, str]], int, int],
    same_kind: Callable[[int, int], bool],
) -> None:
    """The store's view's last messages are replaced by the caller's new messages in their place that
    follow every message of that run now known (mapped back from what a compaction evicted), one for one
    while the roles agree: an edited latest question or a regenerated last reply after a restart, as the
    process that compacted records it. With nothing evicted in the run, that is the pairing by place.

    Every caller message of the run not in ``slots`` is an add still (``_map_hidden`` took back the adds
    it mapped)."""
    ends, j1, j2 = unpaired_end
    run = [index for index, _ in caller[j1:j2]]
    known = [k for k, index in enumerate(run) if index in slots]
    new = [index for index in run[known[-1] + 1 if known else 0 :] if index not in slots]
    replaced: set[int] = set()
    for (slot, _), index in zip(ends, new, strict=False):
        if not same_kind(slot, index):
            break
        slots[index] = slot
        replaced.add(index)
        edits.append(Edit(REPLACE, slot, index))
    if replaced:
        edits[:] = [e for e in edits if not (e.op == ADD and e.index in replaced)]


def _drop_front_removals(
    mirror: Sequence[tuple[int, str]], caller: Sequence[tuple[int, str]], slots: dict[int, int], edits: list[Edit]
) -> None:
    """Messages of the mirror before the first message the caller shares with it are not removed:
    the caller holds the conversation's tail (it trimmed its own list, or started a new one)."""
    shared = [slots[index] for index, _ in caller if index in slots]
    if not shared:
        edits[:] = [e for e in edits if e.op != REMOVE]
        return
    order = {slot: i for i, (slot, _) in enumerate(mirror)}
    first = min((order[s] for s in shared if s in order), default=None)
    if first is None:
        edits[:] = [e for e in edits if e.op != REMOVE]
        return
    edits[:] = [
        e for e in edits if not (e.op == REMOVE and e.target is not None and order.get(e.target, first) < first)
    ]


def _place_adds(caller: Sequence[tuple[int, str]], slots: dict[int, int], edits: list[Edit]) -> None:
    """An add goes right after the slot before it when known messages follow it, else at the end;
    adds before every shared message (text the caller keeps in front of the conversation) are dropped."""
    adds = {e.index for e in edits if e.op == ADD}
    if not adds:
        return
    placed: dict[int, Edit] = {}
    previous: int | None = None
    pending: list[int] = []
    for index, _ in caller:
        if index in adds:
            pending.append(index)
            continue
        slot = slots.get(index)
        if slot is None:
            continue
        for p in pending:
            if previous is not None:
                placed[p] = Edit(ADD, previous, p)
            # before every shared message: not placed (dropped)
        pending = []
        previous = slot
    for p in pending:
        placed[p] = Edit(ADD, None, p)
    rest = [e for e in edits if e.op != ADD]
    rest.extend(placed[i] for i in sorted(placed))
    edits[:] = rest
