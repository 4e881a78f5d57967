"""What a view's conversation is now: its snapshot with the events recorded after it applied.

Restore (the ``snapshot_restore`` strategy, :class:`ctxlife.Session`) and the recorder's first
look at a view all start from :func:`restore_view`: the view's snapshot (the working context as
ctxlife last left it, compacted) followed by the records written after it, where a ``replace``
swaps the message of its slot, a ``remove`` drops it and an ``add`` appends (or goes in after its
target). Superseded and removed messages are never part of the result. Without a usable snapshot
(none yet, or one that cannot be read: a corrupt snapshot is reported and then rebuilt from the
raw history, the source of truth) the result is the raw history's current state. An erase
that was killed before it finished is completed first (:meth:`SessionStore.finish_erase`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from ctxlife.errors import StoreError
from ctxlife.events import emit
from ctxlife.messages import MARK_KEYS, restore_inserted
from ctxlife.sessions.base import SessionStore
from ctxlife.sessions.records import ADD, REMOVE, REPLACE, RawRecord, fingerprint, materialize
from ctxlife.sessions.snapshot import Snapshot

__all__ = ["Restored", "restore_after", "restore_view", "snapshot_slots"]


@dataclasses.dataclass
class Restored:
    """A view's conversation as a restore gives it.

    Attributes:
        messages: the snapshot's messages (its system prompt and summaries included) with the
            later events applied, or the raw history's current messages without a snapshot.
        slots: per message, its slot (the ``seq`` of the record that added it); None for messages
            that are not raw history (a system prompt, a summary).
        covered: the sequence number of the latest record reflected (a new snapshot's ``raw_length``).
        from_snapshot: how many of ``messages`` came from the snapshot.
        snapshot: the snapshot used (None without one).
        snapshot_error: why the stored snapshot could not be used (then the raw history was).
    """

    messages: list[dict[str, Any]]
    slots: list[int | None]
    covered: int
    from_snapshot: int
    snapshot: Snapshot | None = None
    snapshot_error: str | None = None
    #: Per message, the store's fingerprint of its record when ``messages`` are the raw history's
    #: records as stored (no snapshot); empty otherwise.
    fingerprints: list[str | None] = dataclasses.field(default_factory=list)
    #: The store's fingerprint of the record at ``covered`` when it is one of this view's (to tell, on
    #: :func:`restore_after`, that the history was not rewritten since); None otherwise.
    covered_fp: str | None = None
    #: Per message, ``(tokens, encoding)`` as the store counted its record at append
    #: (:attr:`RawRecord.tokens`), when ``messages`` are the raw history's records (no snapshot);
    #: empty otherwise. :meth:`ctxlife.TokenCounter.remember` takes them.
    tokens: list[tuple[int | None, str | None]] = dataclasses.field(default_factory=list)
    #: Every record of the view, as read from sequence number 0 (no snapshot): a recorder takes
    #: them (:meth:`~ctxlife.sessions.recording.Recorder.prime`) instead of reading them again.
    #: Empty otherwise, and not carried by :func:`restore_after`.
    records: list[RawRecord] = dataclasses.field(default_factory=list, repr=False)
    #: Whether every record of the view is a plain ``add``, read just now from sequence number 0
    #: (:meth:`~ctxlife.sessions.SessionStore.read_view`; no snapshot): then ``slots`` and
    #: ``fingerprints`` (none after a ``messages_only`` read) are every record's, and ``messages``
    #: were decoded by this read, referenced by nothing else (a reader may hand them out as they
    #: are). Not carried by :func:`restore_after`.
    plain: bool = False


def snapshot_slots(messages: list[Any], slots: list[int | None]) -> list[int | None]:
    """``slots`` as a snapshot's ``meta["slots"]`` keeps them (one per message)."""
    return list(slots[: len(messages)]) + [None] * max(0, len(messages) - len(slots))


def restore_view(
    store: SessionStore, session_id: str, view: str = "", *, strict: bool = True, messages_only: bool = False
) -> Restored:
    """The view's conversation now (see the module docs); one read of the records after the snapshot.

    ``strict`` as for :meth:`~ctxlife.sessions.SessionStore.read_records` (an unreadable record
    raises; with False it is skipped). ``messages_only``: for a reader that hands the messages out
    and keeps nothing (a new ``Session``'s first read): a view never edited is read without its
    fingerprints and token counts (:meth:`~ctxlife.sessions.SessionStore.read_view`), so the
    result has neither (nor ``covered_fp``: a later :func:`restore_after` reads it all again).
    """
    try:  # an erase killed halfway is completed before any of the session is read (one blob read)
        store.finish_erase(session_id)
    except StoreError as exc:
        emit(
            "error",
            "ctxlife.erase_not_completed",
            session_id=session_id,
            error=str(exc)[:300],
            hint="an interrupted erase could not be completed now; it is tried again on the next restore",
        )
    snapshot: Snapshot | None = None
    error: str | None = None
    try:
        snapshot = store.load_snapshot(session_id, view)
    except StoreError as exc:
        error = str(exc)
        emit(
            "error",
            "ctxlife.snapshot_unreadable",
            session_id=session_id,
            view=view,
            error=error[:300],
            hint="restored from the raw history instead; the next snapshot replaces the unreadable one",
        )
    if snapshot is None:
        plain = store.read_view(session_id, view, messages_only=messages_only)
        if plain is not None:  # a view never edited (the usual one): no record object per message
            return Restored(
                plain.messages,
                cast("list[int | None]", plain.seqs),
                plain.seqs[-1] if plain.seqs else 0,
                0,
                None,
                error,
                cast("list[str | None]", plain.fingerprints),
                plain.fingerprints[-1] if plain.fingerprints else None,
                plain.tokens,
                plain=True,
            )
        return _from_history(store, session_id, view, strict, error)
    later = _after_snapshot(store, session_id, view, snapshot, strict)
    if later is None:
        # The snapshot reflects records the raw history does not hold (a store that lost its last
        # writes, e.g. a file store with fsync=false after a power loss, then went on recording):
        # the raw history is the source of truth.
        emit(
            "warning",
            "ctxlife.snapshot_ahead_of_history",
            session_id=session_id,
            view=view,
            raw_length=snapshot.raw_length,
            hint="restored from the raw history; the next snapshot replaces this one",
        )
        return _from_history(store, session_id, view, strict, "the snapshot is ahead of the raw history")
    messages = list(snapshot.messages)
    # A snapshot written before marks were keyed with the store's secret (issue 38): its meta
    # names its inserted messages; they are marked again, with the store's secret.
    with MARK_KEYS.marking_with(store):
        restore_inserted(messages, snapshot.meta.get("inserted"))
    slots = _slots(store, session_id, view, snapshot, strict, later)
    _apply(messages, slots, later)
    covered = later[-1].seq if later else snapshot.raw_length
    return Restored(
        messages,
        slots,
        covered,
        len(snapshot.messages),
        snapshot,
        None,
        covered_fp=later[-1].fingerprint if later else None,
    )


def restore_after(
    store: SessionStore, session_id: str, view: str, previous: Restored, *, strict: bool = True
) -> Restored | None:
    """``previous`` brought up to date with the records written since: O(new records), not O(history).

    Returns None when that cannot be done from them alone, and the caller then calls
    :func:`restore_view`: a snapshot was saved or changed since, a record edits, inserts or
    removes a message, or the record ``previous`` ended at is gone or differs (the session was
    deleted, expired or written again). ``previous`` is left as it was.
    """
    if previous.covered_fp is None or previous.covered <= 0:
        return None
    try:
        snapshot = store.load_snapshot(session_id, view)
    except StoreError:
        return None
    if snapshot != previous.snapshot:
        return None
    records = store.read_records(session_id, previous.covered - 1, view=view, strict=strict)
    if not records or records[0].seq != previous.covered or records[0].fingerprint != previous.covered_fp:
        return None
    later = records[1:]
    if not later:
        return previous
    if any(r.op != ADD or r.target is not None for r in later):
        return None
    return Restored(
        previous.messages + [r.message for r in later],
        previous.slots + [r.seq for r in later],
        later[-1].seq,
        previous.from_snapshot,
        previous.snapshot,
        previous.snapshot_error,
        previous.fingerprints + [None if r.quarantined else r.fingerprint for r in later]
        if previous.fingerprints
        else [],
        later[-1].fingerprint,
        previous.tokens + _token_counts(later) if previous.tokens else [],
    )


def _from_history(store: SessionStore, session_id: str, view: str, strict: bool, error: str | None) -> Restored:
    """The view's raw history as it stands, every record read (no usable snapshot: ``error`` says why, if
    there was one)."""
    records = store.read_records(session_id, 0, view=view, strict=strict)
    current = materialize(records)
    return Restored(
        [r.message for r in current],
        [r.seq for r in current],
        records[-1].seq if records else 0,
        0,
        None,
        error,
        [None if r.quarantined else r.fingerprint for r in current],
        records[-1].fingerprint if records else None,
        _token_counts(current),
        records,
    )


def _after_snapshot(
    store: SessionStore, session_id: str, view: str, snapshot: Snapshot, strict: bool
) -> list[RawRecord] | None:
    """The view's records after the snapshot's ``raw_length``; None when the record the snapshot
    ends at is not in the raw history as the snapshot saw it (its fingerprint is kept in
    ``meta["covered_fp"]``), or, for a snapshot without one, when the session's head is below it."""
    start = snapshot.raw_length
    covered_fp = snapshot.meta.get("covered_fp")
    if start <= 0:
        return store.read_records(session_id, 0, view=view, strict=strict)
    if not isinstance(covered_fp, str):
        later = store.read_records(session_id, start, view=view, strict=strict)
        return later if later or store.head(session_id) >= start else None
    records = store.read_records(session_id, start - 1, view=view, strict=strict)
    if not records or records[0].seq != start:
        return None
    first = records[0]
    if first.fingerprint != covered_fp and not first.erased:  # an erase rewrites the record's text
        return None
    return records[1:]


def _token_counts(records: list[RawRecord]) -> list[tuple[int | None, str | None]]:
    """``(tokens, encoding)`` of each record; equal pairs share one tuple (a 100k-message history
    holds a few thousand distinct ones, and one encoding name instead of one per record)."""
    shared: dict[tuple[int | None, str | None], tuple[int | None, str | None]] = {}
    return [shared.setdefault(pair, pair) for pair in [(r.tokens, r.token_encoding) for r in records]]


def _slots(
    store: SessionStore, session_id: str, view: str, snapshot: Snapshot, strict: bool, later: list[RawRecord]
) -> list[int | None]:
    """The slot of each snapshot message: from its meta, else (an older snapshot) mapped onto the
    raw history by fingerprint when an event after it needs them."""
    kept = snapshot.meta.get("slots")
    n = len(snapshot.messages)
    if isinstance(kept, list) and len(kept) == n and all(s is None or isinstance(s, int) for s in kept):
        return list(kept)
    if not any(r.op != ADD or r.target is not None for r in later):
        return [None] * n
    # The history as the snapshot saw it: the events after it must not move the mapping (a message
    # removed after it would be mapped to an earlier one with the same text).
    current = materialize(
        r for r in store.read_records(session_id, 0, view=view, strict=strict) if r.seq <= snapshot.raw_length
    )
    slots: list[int | None] = [None] * n
    k = len(current) - 1
    for i in range(n - 1, -1, -1):
        fp = fingerprint(snapshot.messages[i])
        probe = k
        while probe >= 0 and current[probe].fingerprint != fp:
            probe -= 1
        if probe >= 0:
            slots[i] = current[probe].seq
            k = probe - 1
    return slots


def _apply(messages: list[dict[str, Any]], slots: list[int | None], records: list[RawRecord]) -> None:
    """Apply a view's events after a snapshot to its messages (and their ``slots``), in place."""
    after: dict[int | None, int | None] = {}
    for record in records:
        if record.op == ADD:
            at = _index(slots, record.target) if record.target is not None else None
            if at is None:
                messages.append(record.message)
                slots.append(record.seq)
                continue
            at += 1
            while at < len(slots) and slots[at] is not None and after.get(slots[at]) == record.target:
                at += 1
            messages.insert(at, record.message)
            slots.insert(at, record.seq)
            after[record.seq] = record.target
        elif record.op == REPLACE:
            at = _index(slots, record.target)
            if at is not None:
                messages[at] = record.message
        elif record.op == REMOVE:
            at = _index(slots, record.target)
            if at is not None:
                del messages[at]
                del slots[at]


def _index(slots: list[int | None], slot: int | None) -> int | None:
    if slot is None:
        return None
    for i in range(len(slots) - 1, -1, -1):
        if slots[i] == slot:
            return i
    return None
