"""What a restore returns (issue 44, mutation scope `restore`): ``restore_view`` and ``restore_after``.

A restore is what a new process sends the model for a session: the raw history's current state
(no snapshot), or the snapshot with the events written after it. Besides the messages, the
:class:`~ctxlife.sessions.restore.Restored` it returns carries what the host and the recorder act
on (each message's slot, the record it covers up to, the per-message token counts kept at append,
the records read): each test compares the whole of it with what the store holds.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import structlog

from ctxlife.errors import StoreError
from ctxlife.sessions import ADD, REMOVE, REPLACE, Event, SessionStore, Snapshot, open_store
from ctxlife.sessions.records import fingerprint
from ctxlife.sessions.restore import Restored, restore_after, restore_view
from ctxlife.testing import assistant, user

SUMMARY = {"role": "user", "content": "[summary] the user asked about parcels 1001 and 1002"}


def _current(store: SessionStore, sid: str, view: str = "") -> list[Any]:
    return store.current(sid, view)


def test_a_restore_without_a_snapshot_is_the_views_current_history(store: SessionStore) -> None:
    """No snapshot: the view's messages after its edits, inserts and removals, each with its slot,
    fingerprint and the token count kept at append; other views' records are not in it."""
    first = store.append("s", [user("one"), assistant("two"), user("three"), assistant("four")])
    store.append("s", [user("another lane")], view="lane")
    store.append_events(
        "s",
        [
            Event(REPLACE, user("one, edited"), first[0].seq),
            Event(REMOVE, {}, first[1].seq),
            Event(ADD, assistant("after three"), first[2].seq),
        ],
    )
    records = store.read_records("s", view="")
    restored = restore_view(store, "s")  # the default view is ""
    live = _current(store, "s")
    assert [r.message for r in live] == [
        user("one, edited"),
        user("three"),
        assistant("after three"),
        assistant("four"),
    ]
    assert restored == Restored(
        messages=[r.message for r in live],
        slots=[first[0].seq, first[2].seq, records[-1].seq, first[3].seq],
        covered=records[-1].seq,
        from_snapshot=0,
        snapshot=None,
        snapshot_error=None,
        fingerprints=[fingerprint(r.message) for r in live],
        covered_fp=records[-1].fingerprint,
        tokens=[(r.tokens, r.token_encoding) for r in live],
        records=records,
    )
    assert all(isinstance(t, int) and t > 0 for t, _ in restored.tokens)
    lane = restore_view(store, "s", "lane")
    assert lane.messages == [user("another lane")] and lane.covered == lane.slots[0] == first[-1].seq + 1


def test_a_restore_of_an_unknown_session_is_empty(store: SessionStore) -> None:
    # (``plain`` says which read found nothing: SQLite's columnar read or the record read)
    assert dataclass_with(restore_view(store, "nobody"), plain=False) == Restored([], [], 0, 0)


def test_a_quarantined_message_has_no_fingerprint_to_compare(store: SessionStore) -> None:
    """A message that could not be stored as it was (its JSON-safe form is stored) is never taken
    for the caller's message: its fingerprint is None, in a restore and in the one after it."""
    store.append("s", [user("fine"), assistant(float("nan"))])  # type: ignore[arg-type]
    restored = restore_view(store, "s")
    assert [r.quarantined is not None for r in store.read_records("s")] == [False, True]
    assert restored.fingerprints == [fingerprint(user("fine")), None]
    store.append("s", [assistant(float("inf"))])  # type: ignore[arg-type]
    after = restore_after(store, "s", "", restored)
    assert after is not None and after.fingerprints == [fingerprint(user("fine")), None, None]


def test_a_restore_from_a_snapshot_applies_what_was_written_after_it(store: SessionStore) -> None:
    """The snapshot's messages, then the view's later events: an edit of a message the snapshot kept,
    a message inserted after the snapshot's last one (twice: in order), a new message."""
    raw = store.append("s", [user("parcel 1001?"), assistant("shipped"), user("parcel 1002?"), assistant("lost")])
    slots = [None, raw[2].seq, raw[3].seq]
    store.save_snapshot(
        Snapshot(
            session_id="s",
            view="",
            messages=[SUMMARY, user("parcel 1002?"), assistant("lost")],
            raw_length=raw[3].seq,
            meta={"slots": slots, "covered_fp": raw[3].fingerprint},
        )
    )
    store.append("s", [user("not mine")], view="lane")
    later = store.append_events(
        "s",
        [
            Event(REPLACE, user("parcel 1002, the blue one?"), raw[2].seq),
            Event(ADD, assistant("found it"), raw[3].seq),
            Event(ADD, assistant("in the depot"), raw[3].seq),
            Event(ADD, user("thanks")),
        ],
    )
    restored = restore_view(store, "s")
    assert restored.messages == [
        SUMMARY,
        user("parcel 1002, the blue one?"),
        assistant("lost"),
        assistant("found it"),
        assistant("in the depot"),
        user("thanks"),
    ]
    assert restored.slots == [None, raw[2].seq, raw[3].seq, later[1].seq, later[2].seq, later[3].seq]
    assert (restored.covered, restored.covered_fp) == (later[-1].seq, later[-1].fingerprint)
    assert (restored.from_snapshot, restored.snapshot_error) == (3, None)
    assert restored.snapshot == store.load_snapshot("s", "")
    assert (restored.fingerprints, restored.tokens, restored.records) == ([], [], [])


def test_a_snapshot_with_nothing_after_it_is_restored_as_it_is(store: SessionStore) -> None:
    raw = store.append("s", [user("a"), assistant("b")])
    snapshot = Snapshot(session_id="s", view="", messages=[SUMMARY, assistant("b")], raw_length=raw[1].seq)
    store.save_snapshot(snapshot)
    restored = restore_view(store, "s")
    assert restored == Restored([SUMMARY, assistant("b")], [None, None], raw[1].seq, 2, store.load_snapshot("s", ""))


def test_a_snapshot_of_an_empty_history_is_followed_by_every_record(store: SessionStore) -> None:
    """A snapshot written before anything was recorded (``raw_length`` 0): every record of the
    view follows it."""
    store.save_snapshot(Snapshot(session_id="s", view="", messages=[SUMMARY], raw_length=0, meta={"slots": [None]}))
    raw = store.append("s", [user("a"), assistant("b")])
    store.append("s", [user("elsewhere")], view="lane")
    restored = restore_view(store, "s")
    assert restored.messages == [SUMMARY, user("a"), assistant("b")]
    assert restored.slots == [None, raw[0].seq, raw[1].seq] and restored.covered == raw[1].seq


def test_an_edit_after_a_snapshot_of_no_messages_changes_nothing(store: SessionStore) -> None:
    """A snapshot can hold no message at all (everything was removed): an edit or a removal of a
    slot it does not hold is ignored, not an error."""
    raw = store.append("s", [user("a"), assistant("b")])
    store.save_snapshot(Snapshot(session_id="s", view="", messages=[], raw_length=raw[1].seq, meta={"slots": []}))
    store.append_events("s", [Event(REPLACE, user("a, edited"), raw[0].seq), Event(REMOVE, {}, raw[1].seq)])
    store.append("s", [user("c")])
    assert restore_view(store, "s").messages == [user("c")]


def test_a_snapshot_without_slot_marks_is_mapped_onto_the_history_it_was_written_from(store: SessionStore) -> None:
    """An older snapshot (no ``slots`` in its meta) followed by an edit: each of its messages is
    found in the raw history as the snapshot saw it, newest first, so repeated texts map to the
    later copy and the first record of the history is found too."""
    raw = store.append(
        "s", [user("ok"), assistant("first"), user("ok"), assistant("second"), user("ok"), assistant("third")]
    )
    seqs = [r.seq for r in raw]
    # the summary stands for the first three; "ok" (seq 5) matches the latest "ok", not an earlier one
    store.save_snapshot(
        Snapshot(
            session_id="s",
            view="",
            messages=[SUMMARY, assistant("second"), user("ok"), assistant("third")],
            raw_length=seqs[-1],
        )
    )
    store.append("s", [user("later, not in the snapshot")])
    store.append_events("s", [Event(REPLACE, assistant("second, edited"), seqs[3])])
    restored = restore_view(store, "s")
    assert restored.slots[:4] == [None, seqs[3], seqs[4], seqs[5]]
    assert restored.messages[:4] == [SUMMARY, assistant("second, edited"), user("ok"), assistant("third")]
    assert restored.messages[4:] == [user("later, not in the snapshot")]


def test_a_snapshot_without_slot_marks_holding_the_whole_history_maps_every_message(store: SessionStore) -> None:
    raw = store.append("s", [user("a"), assistant("b"), user("c")])
    store.save_snapshot(
        Snapshot(session_id="s", view="", messages=[user("a"), assistant("b"), user("c")], raw_length=3)
    )
    store.append_events("s", [Event(REMOVE, {}, raw[0].seq), Event(REPLACE, user("c!"), raw[2].seq)])
    restored = restore_view(store, "s")
    assert restored.messages == [assistant("b"), user("c!")] and restored.slots == [raw[1].seq, raw[2].seq]


def test_plain_adds_after_a_snapshot_without_slot_marks_need_no_mapping(tmp_path: Path) -> None:
    """Only plain adds after an older snapshot: its messages keep no slot (nothing needs them), and a
    history the snapshot's messages cannot be found in is not read for them."""
    with open_store(f"file://{tmp_path / 's'}") as store:
        raw = store.append("s", [user("a"), assistant("b")])
        store.save_snapshot(Snapshot(session_id="s", view="", messages=[SUMMARY, assistant("b")], raw_length=2))
        new = store.append("s", [user("c")])
        restored = restore_view(store, "s")
    assert restored.messages == [SUMMARY, assistant("b"), user("c")]
    assert restored.slots == [None, None, new[0].seq] and raw[1].seq == 2


def _corrupt(url: str, seq: int) -> None:
    """Make record ``seq`` of session "s" unreadable in a file (not the last line: a torn last line
    is skipped by design) or SQLite store."""
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url[len("sqlite:///") :]) as conn:
            assert conn.execute("UPDATE ctxlife_raw SET json = '{not json' WHERE seq = ?", (seq,)).rowcount == 1
        return
    path = next(Path(url[len("file://") :]).rglob("s_raw.jsonl"))
    lines = path.read_text(encoding="utf-8").splitlines()
    assert seq < len(lines)
    lines[seq - 1] = "{not json"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize("kind", ["file", "sqlite"])
@pytest.mark.parametrize("snapshot", ["none", "slots", "unmarked", "old", "empty", "ahead"])
def test_an_unreadable_record_stops_a_restore_unless_it_is_told_to_skip_it(
    tmp_path: Path, kind: str, snapshot: str
) -> None:
    """A corrupt record in the part of the history a restore reads raises StoreError naming it
    (strict, the default); ``strict=False`` restores without it. Whatever the snapshot: none, one
    with slot marks, one without the fingerprint of its last record, an older one mapped by text,
    one of an empty history, one ahead of the history. (The file store reads every line; SQLite only
    the records asked for, so each read must be strict itself.)"""
    url = f"file://{tmp_path / 'sessions'}" if kind == "file" else f"sqlite:///{tmp_path / 'sessions.db'}"
    with open_store(url) as store:
        raw = store.append("s", [user("a"), assistant("b"), user("c"), assistant("d")])
        if snapshot != "none":
            length = {"slots": 2, "unmarked": 2, "old": 2, "empty": 0, "ahead": 9}[snapshot]
            meta: dict[str, Any] = {
                "slots": {"slots": [1, 2], "unmarked": [1, 2], "empty": []}.get(snapshot),
                "covered_fp": raw[1].fingerprint if snapshot in ("slots", "old") else None,
            }
            messages = [user("a"), assistant("b")][:length]
            store.save_snapshot(
                Snapshot(
                    session_id="s",
                    view="",
                    messages=messages,
                    raw_length=length,
                    meta={k: v for k, v in meta.items() if v is not None},
                )
            )
        store.append_events("s", [Event(REPLACE, assistant("b, edited"), raw[1].seq)])
    # the old snapshot's mapping reads the records it covers (seq 1); the others read seq 3
    _corrupt(url, 1 if snapshot == "old" else 3)
    with open_store(url) as store:
        with pytest.raises(StoreError, match="corrupt"):
            restore_view(store, "s")
        lenient = restore_view(store, "s", strict=False)
    kept = [user("a"), assistant("b, edited"), assistant("d")]
    assert lenient.messages == (kept[:2] + [user("c"), assistant("d")] if snapshot == "old" else kept)


def test_an_unreadable_record_stops_restore_after_unless_it_is_told_to_skip_it(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    with open_store(f"file://{folder}") as store:
        store.append("s", [user("a"), assistant("b")])
        previous = restore_view(store, "s")
        store.append("s", [user("c"), assistant("d")])
        _corrupt(f"file://{folder}", 3)
        with pytest.raises(StoreError, match="corrupt at line 3"):
            restore_after(store, "s", "", previous)
        after = restore_after(store, "s", "", previous, strict=False)
    assert after is not None and after.messages == [user("a"), assistant("b"), assistant("d")]


def test_a_snapshot_ahead_of_the_history_restores_the_history_and_says_why(store: SessionStore) -> None:
    """A snapshot covering records the raw history does not hold (lost writes): the restore is the
    raw history's, as without a snapshot, and says so."""
    raw = store.append("s", [user("a"), assistant(float("nan")), user("c")])  # type: ignore[arg-type]
    store.append("s", [user("elsewhere")], view="lane")
    store.save_snapshot(Snapshot(session_id="s", view="", messages=[SUMMARY], raw_length=40))
    with structlog.testing.capture_logs() as events:
        restored = restore_view(store, "s")
    records = store.read_records("s", view="")
    assert restored == Restored(
        messages=[r.message for r in raw],
        slots=[r.seq for r in raw],
        covered=raw[2].seq,
        from_snapshot=0,
        snapshot=None,
        snapshot_error="the snapshot is ahead of the raw history",
        fingerprints=[raw[0].fingerprint, None, raw[2].fingerprint],  # the quarantined one has none
        covered_fp=raw[2].fingerprint,
        tokens=[(r.tokens, r.token_encoding) for r in raw],
        records=records,
    )
    ahead = [e for e in events if e["event"] == "ctxlife.snapshot_ahead_of_history"]
    assert [(e["log_level"], e["session_id"], e["view"], e["raw_length"]) for e in ahead] == [("warning", "s", "", 40)]
    assert ahead[0]["hint"] == "restored from the raw history; the next snapshot replaces this one"


def test_an_unreadable_snapshot_restores_the_raw_history_and_says_why(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    with open_store(f"file://{folder}") as store:
        raw = store.append("s", [user("a"), assistant("b")])
        store.save_snapshot(Snapshot(session_id="s", view="", messages=[SUMMARY], raw_length=2))
        (folder / "s_ctx.json").write_text("{not json", encoding="utf-8")
        with structlog.testing.capture_logs() as events:
            restored = restore_view(store, "s")
    assert restored.messages == [user("a"), assistant("b")] and restored.slots == [r.seq for r in raw]
    assert restored.snapshot is None and restored.snapshot_error is not None
    assert "s_ctx.json" in restored.snapshot_error  # says which snapshot could not be read
    unreadable = [e for e in events if e["event"] == "ctxlife.snapshot_unreadable"]
    assert [(e["log_level"], e["session_id"], e["view"]) for e in unreadable] == [("error", "s", "")]
    assert unreadable[0]["error"] == restored.snapshot_error[:300]
    assert (
        unreadable[0]["hint"] == "restored from the raw history instead; the next snapshot replaces the unreadable one"
    )


def test_restore_after_adds_only_the_new_records(store: SessionStore) -> None:
    """``restore_after`` on a raw-history restore: the new plain adds appended, with their slots,
    fingerprints and counts; the same object when nothing is new; None (restore again) after an edit."""
    store.append("s", [user("a"), assistant("b")])
    previous = restore_view(store, "s")
    assert restore_after(store, "s", "", previous) is previous
    new = store.append("s", [user("c"), assistant("d")])
    store.append("s", [user("elsewhere")], view="lane")
    after = restore_after(store, "s", "", previous)
    again = restore_view(store, "s")
    assert after is not None and after.messages == again.messages == [
        user("a"),
        assistant("b"),
        user("c"),
        assistant("d"),
    ]
    assert (after.slots, after.covered, after.covered_fp) == (again.slots, new[1].seq, new[1].fingerprint)
    assert (after.fingerprints, after.tokens) == (again.fingerprints, again.tokens)
    assert (after.from_snapshot, after.snapshot, after.snapshot_error) == (0, None, None)
    store.append_events("s", [Event(REPLACE, user("a, edited"), 1)])
    assert restore_after(store, "s", "", after) is None


def test_restore_after_a_snapshot_keeps_it_and_reads_only_its_view(store: SessionStore) -> None:
    raw = store.append("s", [user("a"), assistant("b")])
    snapshot = Snapshot(
        session_id="s",
        view="",
        messages=[SUMMARY],
        raw_length=raw[1].seq,
        meta={"slots": [None], "covered_fp": raw[1].fingerprint},
    )
    store.save_snapshot(snapshot)
    store.save_snapshot(Snapshot(session_id="s", view="lane", messages=[user("other lane")], raw_length=0))
    store.append("s", [user("c")])
    previous = restore_view(store, "s")
    new = store.append("s", [assistant("d")])
    after = restore_after(store, "s", "", previous)
    assert after is not None and after.messages == [SUMMARY, user("c"), assistant("d")]
    assert after.snapshot == previous.snapshot == store.load_snapshot("s", "") and after.from_snapshot == 1
    assert (after.fingerprints, after.tokens, after.covered_fp) == ([], [], new[0].fingerprint)
    asked = store.append("s", [user("in the lane")], view="lane")
    lane = restore_view(store, "s", "lane")  # its own snapshot, not the default view's
    added = store.append("s", [assistant("answered in the lane")], view="lane")
    lane_after = restore_after(store, "s", "lane", lane)
    assert lane_after is not None
    assert lane_after.messages == [user("other lane"), user("in the lane"), assistant("answered in the lane")]
    assert lane_after.slots == [None, asked[0].seq, added[0].seq]
    assert lane_after.snapshot == store.load_snapshot("s", "lane")


def test_restore_after_a_restore_of_nothing_restores_again(store: SessionStore) -> None:
    """An empty restore covers no record: there is nothing to go on from."""
    empty = restore_view(store, "s")
    store.append("s", [user("a")])
    assert restore_after(store, "s", "", empty) is None
    first = restore_view(store, "s")
    assert first.covered == 1 and restore_after(store, "s", "", dataclass_with(first, covered=0)) is None
    store.append("s", [assistant("b")])
    after = restore_after(store, "s", "", first)  # from the first record on: only the new one is read
    assert after is not None and after.messages == [user("a"), assistant("b")]


def test_restore_after_a_rewritten_history_restores_again(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    with open_store(f"file://{folder}") as store:
        store.append("s", [user("a"), assistant("b")])
        previous = restore_view(store, "s")
        store.delete("s")
        store.append("s", [user("x"), assistant("y"), user("z")])
        assert restore_after(store, "s", "", previous) is None


def dataclass_with(restored: Restored, **changes: Any) -> Restored:
    return dataclasses.replace(restored, **changes)


def test_a_restore_in_a_new_process_returns_what_was_sent(tmp_path: Path) -> None:
    """What a restore in another process returns equals what this one wrote, event by event."""
    import subprocess
    import sys

    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        raw = store.append("s", [user("a"), assistant("b"), user("c")])
        store.append_events("s", [Event(REPLACE, user("a!"), raw[0].seq), Event(ADD, assistant("a2"), raw[0].seq)])
        expected = [r.message for r in store.current("s", "")]
    code = (
        "import json, sys\n"
        "from ctxlife.sessions import open_store\n"
        "from ctxlife.sessions.restore import restore_view\n"
        "with open_store(sys.argv[1]) as store:\n"
        "    print(json.dumps(restore_view(store, 's').messages))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout) == expected == [user("a!"), assistant("a2"), assistant("b"), user("c")]


def test_the_current_history_puts_inserts_after_their_target_in_the_order_written(store: SessionStore) -> None:
    """``current`` (the raw history's state, what a restore without a snapshot sends): messages
    inserted after the same message follow it in the order they were written, also after the last
    message; an edited slot is one record, as if its new message had been added there."""
    raw = store.append("s", [user("one"), assistant("two"), user("three")])
    store.append_events(
        "s",
        [
            Event(ADD, assistant("1a"), raw[0].seq),
            Event(ADD, assistant("1b"), raw[0].seq),
            Event(ADD, assistant("1c"), raw[0].seq),
            Event(ADD, assistant("3a"), raw[2].seq),
            Event(ADD, assistant("3b"), raw[2].seq),
            Event(REPLACE, assistant("two, edited"), raw[1].seq),
        ],
    )
    live = store.current("s")
    assert [r.message["content"] for r in live] == ["one", "1a", "1b", "1c", "two, edited", "three", "3a", "3b"]
    edited = live[4]
    assert (edited.seq, edited.op, edited.target) == (raw[1].seq, ADD, None)
    assert restore_view(store, "s").messages == [r.message for r in live]


def _snapshot(store: SessionStore, messages: list[dict[str, Any]], raw_length: int, **meta: Any) -> None:
    store.save_snapshot(Snapshot(session_id="s", view="", messages=messages, raw_length=raw_length, meta=meta))


def test_a_snapshot_without_the_fingerprint_of_its_last_record_is_followed_by_its_own_views_records(
    store: SessionStore,
) -> None:
    store.append("s", [user("a"), assistant("b")])
    _snapshot(store, [SUMMARY], 2, slots=[None])
    store.append("s", [user("elsewhere")], view="lane")
    new = store.append("s", [user("c")])
    restored = restore_view(store, "s")
    assert restored.messages == [SUMMARY, user("c")] and restored.slots == [None, new[0].seq]


@pytest.mark.parametrize("length", [1, 5])
def test_a_snapshot_is_not_used_on_a_history_rewritten_or_shorter_than_it(tmp_path: Path, length: int) -> None:
    """The snapshot's last record, named by its fingerprint, must still be there: a history written
    again from its first record, or shorter than the snapshot, restores from the raw history."""
    folder = tmp_path / "sessions"
    with open_store(f"file://{folder}") as store:
        raw = store.append("s", [user("a")])
        _snapshot(store, [SUMMARY], length, slots=[None], covered_fp=raw[0].fingerprint)
        if length == 1:  # another program deleted the raw history and wrote a new one
            (folder / "s_raw.jsonl").unlink()
            store.append("s", [user("x"), assistant("y")])
        restored = restore_view(store, "s")
    expected = [user("x"), assistant("y")] if length == 1 else [user("a")]
    assert (restored.messages, restored.snapshot) == (expected, None)
    assert restored.snapshot_error == "the snapshot is ahead of the raw history"


def test_a_message_inserted_after_one_of_an_older_snapshot_goes_right_after_it(store: SessionStore) -> None:
    """Only an insert after an older snapshot (no slot marks): its target is found by text."""
    raw = store.append("s", [user("a"), assistant("b"), user("c")])
    _snapshot(store, [SUMMARY, assistant("b"), user("c")], 3)
    store.append_events("s", [Event(ADD, assistant("b2"), raw[1].seq)])
    assert restore_view(store, "s").messages == [SUMMARY, assistant("b"), assistant("b2"), user("c")]


def test_an_older_snapshot_is_mapped_onto_its_own_views_history_only(store: SessionStore) -> None:
    """Another view holding the same text later than this view's copy is not taken for it."""
    first = store.append("s", [user("same words")])
    store.append("s", [user("same words")], view="lane")
    then = store.append("s", [assistant("b")])
    _snapshot(store, [user("same words"), assistant("b")], then[0].seq)
    store.append_events("s", [Event(REPLACE, user("same words, edited"), first[0].seq)])
    restored = restore_view(store, "s")
    assert restored.messages == [user("same words, edited"), assistant("b")]
    assert restored.slots == [first[0].seq, then[0].seq]


def test_an_older_snapshot_maps_each_message_once_newest_first(store: SessionStore) -> None:
    """Raw history ok, a, ok; snapshot a, ok: "ok" is the third record, "a" the second; the first
    "ok" is no message of the snapshot, so an edit of the third one changes the snapshot's last."""
    raw = store.append("s", [user("ok"), assistant("a"), user("ok")])
    _snapshot(store, [assistant("a"), user("ok")], 3)
    store.append_events("s", [Event(REPLACE, user("ok, edited"), raw[2].seq)])
    restored = restore_view(store, "s")
    assert restored.messages == [assistant("a"), user("ok, edited")]
    assert restored.slots == [raw[1].seq, raw[2].seq]


def test_an_older_snapshot_finds_a_message_several_records_back(store: SessionStore) -> None:
    """Snapshot a, c of the history a, b, c: "a" is two records before "c" and is found."""
    raw = store.append("s", [user("a"), assistant("b"), user("c")])
    _snapshot(store, [user("a"), user("c")], 3)
    store.append_events("s", [Event(REMOVE, {}, raw[0].seq)])
    restored = restore_view(store, "s")
    assert restored.messages == [user("c")] and restored.slots == [raw[2].seq]


def test_restore_after_a_deleted_session_restores_again(store: SessionStore) -> None:
    store.append("s", [user("a"), assistant("b")])
    previous = restore_view(store, "s")
    store.delete("s")
    assert restore_after(store, "s", "", previous) is None
    assert restore_view(store, "s").messages == []


def test_a_snapshot_of_a_view_whose_history_is_gone_restores_nothing(store: SessionStore) -> None:
    """The snapshot is ahead of a view that has no record at all (another view's records remain)."""
    store.append("s", [user("elsewhere")], view="lane")
    store.save_snapshot(Snapshot(session_id="s", view="", messages=[SUMMARY], raw_length=3))
    restored = restore_view(store, "s")
    assert restored == Restored([], [], 0, 0, None, "the snapshot is ahead of the raw history")
