"""The events that bring a view to a caller's list, judged against a mirror (:func:`diff_plan`).

The usual call is a mirror plus new messages (one comparison in C); otherwise an edit script over
fingerprints (:mod:`ctxlife.sessions.diff`) gives the ``add``/``replace``/``remove`` events.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from ctxlife.messages import (
    differences,
    same_messages,
)
from ctxlife.sessions.diff import common_prefix, edit_script
from ctxlife.sessions.records import ADD, REMOVE, REPLACE, Event, RawRecord
from ctxlife.sessions.views import Mirror, TailHidden, View, copies, known_fp, recordable, stored_form, stored_fp

__all__ = [
    "Plan",
    "all_new",
    "continues",
    "diff_plan",
    "results_in_order",
    "same_kind",
    "seen_mirror",
    "soft_same",
    "unplaced_fps",
    "written_after",
]


@dataclasses.dataclass
class Plan:
    """What :meth:`Recorder.record` writes for a list, and what it knows of the list's positions."""

    events: list[Event]
    slots: dict[int, int]  # list position -> slot, for the positions already in the view
    adds: list[int]  # the list positions of the add events, in order
    base: Mirror | None = None  # the mirror the list starts with (the usual call), if any
    fps: dict[int, str] = dataclasses.field(default_factory=dict)  # fingerprints computed for positions
    # the adds follow the messages waiting for the store and repeat none of them (a repeat is said again)
    after_waiting: bool = False
    # The list's messages in a list nobody edits (the host's copy as compared), for the next mirror's
    # originals without another copy; None: copy the list.
    originals: list[Any] | None = None
    # Fingerprints of removed messages the list no longer holds: released for the view once it is recorded
    # (a copy in a later list is a new message, Recorder._not_again).
    released: frozenset[str] = frozenset()


def unplaced_fps(plan: Plan, messages: Sequence[Any]) -> set[str]:
    """Fingerprints of the list's recordable messages the view does not hold: the plan's adds, and the copies a
    mirror keeps unplaced (a removed message the caller's list still holds, not recorded again)."""
    base = plan.base
    known = base.slots[: base.length] if base is not None else []
    return {
        plan.fps.get(i) or stored_fp(m)
        for i, m in enumerate(messages)
        if i not in plan.slots and (i >= len(known) or known[i] is None) and recordable(m)
    }


def continues(state: View, mirror: Mirror, messages: Sequence[Any]) -> list[Any] | None:
    """Whether the host's comparison (:meth:`Recorder.expect`) shows that ``messages`` continues
    ``mirror``: the mirror was made from the very list the host compared against, and every message
    of it is still there (equal, or different only in what is not an edit: see :func:`soft_same`).
    Then the list's messages in a list nobody edits (the host's copy when nothing replaced one since
    it compared them); else None."""
    hint, state.hint = state.hint, None  # good for one diff of one call's list
    if hint is None or hint[0] is not messages or mirror.originals is None:
        return None
    _, compared, agreement = hint
    size = len(mirror.messages)
    if agreement.length < size or not same_messages(mirror.originals, agreement.previous):
        return None
    changed = [i for i in agreement.changed if i < size]
    if not same_messages(compared, messages):  # replaced since (the bootstrap section, applied)
        length, also = differences(compared, messages)
        if len(compared) != len(messages) or length < len(messages):
            return None
        changed = sorted({*changed, *(i for i in also if i < size)})
        compared = list(messages)
    soft = soft_same(mirror, messages)
    return compared if all(soft(i) for i in changed) else None


def all_new(messages: Sequence[Any]) -> Plan:
    """Every recordable message of the list is new (a list built from scratch)."""
    plan = Plan([], {}, [], None)
    for i, message in enumerate(messages):
        if recordable(message):
            fp = plan.fps[i] = stored_fp(message)
            plan.events.append(Event(ADD, message, None, fp))
            plan.adds.append(i)
    return plan


def same_kind(mirror: Mirror, messages: Sequence[Any]) -> Callable[[int, int], bool]:
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


def results_in_order(items: list[tuple[int, str]], messages: list[Any]) -> list[tuple[int, str]]:
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


def soft_same(mirror: Mirror, messages: Sequence[Any]) -> Any:
    """Differences at a list position that are not edits of the conversation: two messages that are
    not recorded (a system prompt, a summary, ctxlife's bootstrap message), or the same message by
    fingerprint (a prompt-cache marker moved, ctxlife's bootstrap section re-rendered)."""

    def same(i: int) -> bool:
        theirs = messages[i]
        if mirror.slots[i] is None:
            return not recordable(theirs)
        return recordable(theirs) and mirror.fps[i] == stored_fp(theirs)

    return same


def diff_plan(state: View, messages: Sequence[Any]) -> Plan | None:
    """The events that bring the view to ``messages``, judged against the best mirror; None when
    no mirror relates to the list (align it instead). Raises :class:`~.views.TailEdge` when an
    incomplete tail lacks the records a new message may be (the recorder completes it, asks again)."""
    # The mirror the list agrees with longest (the newest first on a tie): the caller's own
    # list, when several callers share the view.
    best: tuple[Mirror, int] | None = None
    mirrors = state.mirrors
    originals = continues(state, mirrors[0], messages) if mirrors else None
    if originals is not None:
        mirrors = []  # the host's comparison showed it: no second one
        best = (state.mirrors[0], len(state.mirrors[0].messages))
    for mirror in mirrors:
        p = common_prefix(mirror.messages, messages, soft_same(mirror, messages))
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
        later = written_after(state, max(mirror.last, mirror.head))
        plan = Plan([], {}, [], mirror, originals=originals)
        cursor = 0
        used: set[int] = set()
        for i in range(p, len(messages)):
            message = messages[i]
            if not recordable(message):
                continue
            fp = plan.fps[i] = stored_fp(message)
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
    mirrored = results_in_order([(s, f) for s, f, _ in live], [m for _, _, m in live])
    kept = [(i, m) for i, m in enumerate(messages) if recordable(m)]
    caller = results_in_order([(i, known_fp(mirror, m)) for i, m in kept], [m for _, m in kept])
    hidden = TailHidden(tail, {s for s, _ in mirrored}, None if state.complete else state.edge())
    script = edit_script(
        mirrored,
        caller,
        hidden,
        order,
        removals=mirror.trusted,
        same_kind=same_kind(mirror, messages),
        movable=lambda i: messages[i].get("role") == "tool",
    )
    if not script.related:
        return None
    if not mirror.trusted and script.shared < min(2, len(mirrored)) and len(script.slots) < len(mirrored):
        return None  # one shared message and the rest gone: a new conversation, not an edit
    plan = Plan([], script.slots, [], None, dict(caller))
    for edit in script.edits:
        if edit.op == REMOVE:
            plan.events.append(Event(REMOVE, {}, edit.target))
        elif edit.op == REPLACE:
            plan.events.append(Event(REPLACE, stored_form(messages[edit.index]), edit.target, plan.fps[edit.index]))
        else:
            plan.events.append(Event(ADD, messages[edit.index], edit.target, plan.fps[edit.index]))
            plan.adds.append(edit.index)
    return plan


def written_after(state: View, slot: int) -> list[tuple[int, str]]:
    """The view's current messages after ``slot`` (what others wrote since), oldest first."""
    tail = state.tail
    i = len(tail)
    while i > 0 and tail[i - 1].seq > slot:
        i -= 1
    return [(e.seq, e.fp) for e in tail[i:]]


def seen_mirror(state: View, messages: Sequence[Any], plan: Plan, written: Sequence[RawRecord]) -> Mirror | None:
    """The mirror of a list just recorded by ``plan`` (``written``: its adds' records), when the plan
    placed every recordable position (None: map the list, :func:`~.views.map_mirror`). What the caller
    holds again is no longer evicted."""
    known = dict(plan.slots)
    for index, record in zip(plan.adds, written, strict=False):
        known[index] = record.seq
    if state.evicted:
        state.evicted.difference_update(known.values())  # the caller holds them again: its own
    base = plan.base
    start = len(base.messages) if base is not None else 0
    rest = range(start, len(messages))
    if not all(i in known for i in rest if recordable(messages[i])) or not (base is not None or known or not messages):
        return None
    # The base mirror's positions as they were, then what this call placed: costs what is new.
    slots = [known.get(i) if recordable(messages[i]) else None for i in rest]
    fps = [
        (plan.fps.get(i) or stored_fp(messages[i])) if slot is not None else None
        for i, slot in zip(rest, slots, strict=True)
    ]
    newest = max((s for s in slots if s is not None), default=0)
    previous = state.mirrors[0] if state.mirrors else None
    if base is not None:
        return base.extended(
            copies(messages[start:], previous, start),
            slots,
            fps,
            last=max(base.last, newest),
            originals=list(messages) if plan.originals is None else plan.originals,
        )
    return Mirror(copies(messages, previous), slots, fps, originals=list(messages))
