"""The session keeper (ctxlife.sessions.keeper, scope `keeper`): what the store holds and what a restore
returns after each of its calls, asserted where the keeper's own tests reached no difference (the survivors
of the scope's first mutation run, docs/mutation/keeper.md). Each test uses a real file or SQLite store; the
stores that fail or count are real stores behind a thin wrapper (tests/delegating_store.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from ctxlife.errors import StoreError
from ctxlife.messages import mark_inserted
from ctxlife.sessions import SessionStore, open_store
from ctxlife.sessions import keeper as keeper_module
from ctxlife.sessions.keeper import Keeper, Settled, changed, keeper_for
from ctxlife.sessions.records import fingerprint
from ctxlife.sessions.snapshot import Snapshot
from delegating_store import DelegatingStore


def U(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def A(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def recall(text: str) -> dict[str, Any]:
    return mark_inserted({"role": "user", "content": f"Recalled: {text}"}, "recall")


@pytest.fixture(params=["file", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    url = f"file://{tmp_path / 'sessions'}?fsync=false" if request.param == "file" else f"sqlite:///{tmp_path / 's.db'}"
    opened = open_store(url)
    yield opened
    opened.close()


def texts(records: Any) -> list[str]:
    return [str(r.message.get("content")) for r in records]


class Failing(DelegatingStore):
    """A real store whose writes fail while ``down`` (appends, snapshots) and that counts its mark-key calls."""

    def __init__(self, inner: SessionStore) -> None:
        super().__init__(inner)
        self.down = False
        self.mark_key_failing = False
        self.mark_key_calls = 0  # the calls that may create it (reading it is the marks' business)

    def append(self, session_id: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        if self.down:
            raise StoreError(f"{self.url}: append: No space left on device")
        return self.inner.append(session_id, messages, **kwargs)

    def save_snapshot(self, snapshot: Snapshot) -> None:
        if self.down:
            raise StoreError(f"{self.url}: save_snapshot: No space left on device")
        self.inner.save_snapshot(snapshot)

    def mark_key(self, create: bool = False) -> bytes | None:
        self.mark_key_calls += create is True
        if self.mark_key_failing:
            raise StoreError(f"{self.url}: mark_key: connection refused")
        return self.inner.mark_key(create)


# -- the explicit events, in the default view -----------------------------------------------------------------


def test_each_write_without_a_view_goes_to_the_default_view(store: SessionStore) -> None:
    keeper = Keeper(store)
    records = keeper.append("s", [U("q1"), A("r1"), U("q2")])
    assert [r.view for r in records] == ["", "", ""]
    replaced = keeper.replace("s", records[1].slot, A("r1, corrected"))
    assert replaced.view == "" and replaced.slot == records[1].slot
    assert [r.view for r in keeper.remove("s", [records[2].slot])] == [""]
    assert [r.view for r in keeper.record_list("s", [U("q1"), A("r1, corrected"), U("q3")])] == [""]
    assert texts(store.current("s")) == ["q1", "r1, corrected", "q3"]
    assert store.current("s", "XXXX") == []


def test_leave_without_a_view_notes_the_default_views_list(store: SessionStore) -> None:
    # A strategy cut the middle of the list the call hands back (the first question and the latest round kept):
    # the caller's next list, lacking r1 and q2, removes nothing.
    keeper = Keeper(store)
    keeper.record_list("s", [U("q1"), A("r1"), U("q2"), A("r2"), U("q3")])
    keeper.leave("s", [U("q1"), A("r2"), U("q3")])
    keeper.record_list("s", [U("q1"), A("r2"), U("q3"), A("r3")])
    assert texts(store.current("s")) == ["q1", "r1", "q2", "r2", "q3", "r3"]


def test_each_write_in_a_named_view_goes_to_that_view(store: SessionStore) -> None:
    keeper = Keeper(store)
    keeper.append("s", [U("main")])
    records = keeper.append("s", [U("q1"), A("r1"), U("q2")], "w")
    assert keeper.replace("s", records[1].slot, A("r1, corrected"), "w").view == "w"
    assert [r.view for r in keeper.remove("s", [records[2].slot], "w")] == ["w"]
    keeper.record_list("s", [U("q1"), A("r1, corrected"), U("q3"), A("r3"), U("q4")], "w")
    keeper.leave("s", [U("q1"), A("r3"), U("q4")], "w")
    keeper.record_list("s", [U("q1"), A("r3"), U("q4"), A("r4")], "w")
    assert texts(store.current("s", "w")) == ["q1", "r1, corrected", "q3", "r3", "q4", "r4"]
    assert texts(store.current("s")) == ["main"]


def test_replace_returns_the_replace_record_it_wrote(store: SessionStore) -> None:
    keeper = Keeper(store)
    first, _ = keeper.append("s", [U("q1"), A("r1")])
    record = keeper.replace("s", first.slot, U("q1, edited"))
    assert record.message == U("q1, edited") and record.target == first.slot and record.seq == 3


# -- the store's mark secret ----------------------------------------------------------------------------------


def test_the_first_write_that_records_something_makes_the_stores_mark_key_once(store: SessionStore) -> None:
    counted = Failing(store)
    keeper = Keeper(counted)
    assert keeper.append("s", []) == [] and counted.mark_key_calls == 0
    assert store.mark_key() is None  # the precondition: reading never creates it
    keeper.append("s", [U("q1")])
    assert store.mark_key() is not None  # made by the keeper, before any summary is marked
    keeper.append("s", [A("r1")])
    keeper.record_list("s", [U("q1"), A("r1"), U("q2")])
    assert counted.mark_key_calls == 1  # once per store object: not a store round trip per write


def test_a_list_write_makes_the_mark_key_too(store: SessionStore) -> None:
    keeper = Keeper(store)
    assert keeper.record_list("s", [U("q1")])
    assert store.mark_key() is not None


def test_a_store_failing_to_give_its_mark_key_fails_no_write(store: SessionStore) -> None:
    failing = Failing(store)
    failing.mark_key_failing = True
    keeper = Keeper(failing)
    assert [r.message for r in keeper.append("s", [U("q1")])] == [U("q1")]
    assert texts(store.current("s")) == ["q1"]


# -- what a call changed (changed) ----------------------------------------------------------------------------


def test_a_call_that_changed_only_its_recall_block_changed_nothing_a_snapshot_holds() -> None:
    before = [U("q1"), A("r1"), recall("old"), U("q2")]
    assert changed(before, list(before)) is False
    assert changed(before, [U("q1"), A("r1"), recall("new"), U("q2")]) is False
    assert changed(before, [U("q1"), A("r1"), U("q2")]) is False
    assert changed(before, [A("r1"), recall("old"), U("q2")]) is True
    assert changed([U("q1"), U("q2")], [U("q1"), recall("new"), U("q2")]) is False
    assert changed([U("q1")], [U("q1"), U("q2")]) is True


# -- the one snapshot writer ----------------------------------------------------------------------------------


def test_a_snapshot_names_the_record_it_ends_at_and_each_messages_slot(store: SessionStore) -> None:
    keeper = Keeper(store)
    records = keeper.append("s", [U("q1"), A("r1"), U("q2"), A("r2")])
    summary = mark_inserted({"role": "system", "content": "Summary: q1 and r1"}, "summary")
    snapshot = keeper.save_snapshot("s", "", [summary, U("q2"), recall("x"), A("r2")])
    assert snapshot is not None and snapshot.raw_length == 4
    assert snapshot.meta["covered_fp"] == records[3].fingerprint
    assert snapshot.meta["slots"] == [None, 3, 4]
    assert snapshot.meta["inserted"] and snapshot.meta["inserted"][0][0] == 0  # the summary, at index 0
    stored = store.load_snapshot("s")
    assert stored is not None and [m["content"] for m in stored.messages][1:] == ["q2", "r2"]
    assert stored.session_id == "s" and stored.view == "" and stored.raw_length == 4


@pytest.mark.parametrize("covered", [1, 2])
def test_a_snapshot_covering_an_early_record_names_that_records_fingerprint(store: SessionStore, covered: int) -> None:
    keeper = Keeper(store)
    records = keeper.append("s", [U("q1"), A("r1"), U("q2")])
    snapshot = keeper.save_snapshot("s", "", [U("q1")][:covered] + [A("r1")][: covered - 1], covered=covered)
    assert snapshot is not None and snapshot.raw_length == covered
    assert snapshot.meta["covered_fp"] == records[covered - 1].fingerprint


def test_a_snapshot_covering_another_views_record_names_no_fingerprint(store: SessionStore) -> None:
    keeper = Keeper(store)
    keeper.append("s", [U("w1")], "w")
    main = keeper.append("s", [U("q1")])
    snapshot = keeper.save_snapshot("s", "w", [U("w1")], covered=main[0].seq)
    assert snapshot is not None and "covered_fp" not in snapshot.meta
    assert snapshot.meta["slots"] == [1]  # the message's slot in its own view, as the recorder knows it
    assert keeper.save_snapshot("s", "w", [U("w1")], covered=0) is not None  # nothing covered: none either
    assert "covered_fp" not in (store.load_snapshot("s", "w") or Snapshot("s")).meta


def test_a_corrupt_record_after_the_covered_one_still_lets_the_snapshot_name_it(tmp_path: Path) -> None:
    # Another writer left a corrupt line after the record a snapshot ends at: the snapshot is written, naming
    # that record's fingerprint (read leniently), not refused.
    store = open_store(f"file://{tmp_path / 'sessions'}?fsync=false")
    records = Keeper(store).append("s", [U("a"), U("b"), U("c"), U("d")])
    raw = tmp_path / "sessions" / "s_raw.jsonl"
    lines = raw.read_text().splitlines(keepends=True)
    raw.write_text(lines[0] + lines[1] + '{"not": "a record"} {"two": "documents"}\n' + lines[3])
    fresh = open_store(f"file://{tmp_path / 'sessions'}?fsync=false")
    with pytest.raises(StoreError, match="corrupt"):  # the precondition: a strict read refuses the history
        fresh.read_records("s", 1)
    snapshot = Keeper(fresh).save_snapshot("s", "", [U("a"), U("b")], slots=[1, 2], covered=2)
    assert snapshot is not None and snapshot.meta["covered_fp"] == records[1].fingerprint
    store.close()
    fresh.close()


def test_a_views_snapshot_names_the_slots_of_that_views_messages(store: SessionStore) -> None:
    keeper = Keeper(store)
    keeper.append("s", [U("same"), A("theirs")], "w")
    keeper.append("s", [U("same"), A("main")])
    snapshot = keeper.save_snapshot("s", "w", [U("same"), A("theirs")])
    assert snapshot is not None and snapshot.meta["slots"] == [1, 2]
    fresh = Keeper(store)  # a recorder that read nothing yet: it reads the view
    snapshot = fresh.save_snapshot("s", "w", [U("same")])
    assert snapshot is not None and snapshot.meta["slots"] == [1]


def test_a_snapshot_of_a_list_still_holding_an_erased_message_keeps_the_others_slots(store: SessionStore) -> None:
    keeper = Keeper(store)
    keeper.append("s", [U("q1"), A("card 4111-1111"), U("q2"), A("r2")])
    assert keeper.erase("s", [2]) == [2]
    snapshot = keeper.save_snapshot("s", "", [U("q1"), A("card 4111-1111"), U("q2"), A("r2")])
    assert snapshot is not None and [m["content"] for m in snapshot.messages] == ["q1", "q2", "r2"]
    assert snapshot.meta["slots"] == [1, 3, 4]


def test_a_snapshot_given_its_slots_keeps_them_and_pads_a_short_list_with_none(store: SessionStore) -> None:
    keeper = Keeper(store)
    keeper.append("s", [U("q1"), A("r1")])
    snapshot = keeper.save_snapshot("s", "", [U("q1"), recall("x"), A("r1"), U("new")], slots=[1, None, 2])
    assert snapshot is not None and snapshot.meta["slots"] == [1, 2, None]


def test_the_same_snapshot_is_written_once_and_a_changed_one_again(store: SessionStore) -> None:
    keeper = Keeper(store)
    keeper.append("s", [U("q1"), A("r1")])
    assert keeper.save_snapshot("s", "", [U("q1"), A("r1")]) is not None
    assert keeper.save_snapshot("s", "", [U("q1"), A("r1")]) is None
    assert keeper.save_snapshot("s", "", [U("q1"), A("r1"), recall("x")]) is None  # the recall block is never kept
    assert keeper.save_snapshot("s", "", [A("r1")]) is not None
    assert keeper.save_snapshot("s", "", [A("r1")], covered=1) is not None  # covering less: another snapshot


def test_the_oldest_remembered_snapshot_is_forgotten_first(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keeper_module, "_SAVED_VIEWS", 2)
    keeper = Keeper(store)
    for view in ("a", "b", "c"):
        keeper.append("s", [U(view)], view)
    for view in ("a", "b"):
        assert keeper.save_snapshot("s", view, [U(view)]) is not None
    assert keeper.save_snapshot("s", "a", [U("a")]) is None  # two remembered: a (now the newest) and b
    assert keeper.save_snapshot("s", "c", [U("c")]) is not None  # b, the oldest, forgotten
    assert keeper.save_snapshot("s", "c", [U("c")]) is None
    assert keeper.save_snapshot("s", "a", [U("a")]) is None
    assert keeper.save_snapshot("s", "b", [U("b")]) is not None


def test_a_message_that_is_not_json_is_snapshotted_in_a_safe_form_and_named(store: SessionStore) -> None:
    keeper = Keeper(store)
    keeper.append("s", [U("q1")], "w")
    odd = {"role": "user", "content": "q2", "raw": b"\x00\x01" * 400}
    with capture_logs() as logs:
        snapshot = keeper.save_snapshot("s", "w", [U("q1"), odd])
    assert snapshot is not None and snapshot.messages[0] == U("q1") and isinstance(snapshot.messages[1]["raw"], str)
    (event,) = [e for e in logs if e["event"] == "ctxlife.snapshot_message_quarantined"]
    assert event["log_level"] == "error" and event["session_id"] == "s" and event["view"] == "w"
    assert event["index"] == 1 and "bytes" in event["problem"] and len(event["problem"]) <= 500
    stored = store.load_snapshot("s", "w")
    assert stored is not None and stored.messages[1]["content"] == "q2"


def test_a_long_quarantine_reason_is_cut_at_500_characters(store: SessionStore) -> None:
    keeper = Keeper(store)
    odd = {"role": "user", "content": "q", **{f"field_{i:03}": b"x" for i in range(60)}}
    with capture_logs() as logs:
        keeper.save_snapshot("s", "", [odd])
    (event,) = [e for e in logs if e["event"] == "ctxlife.snapshot_message_quarantined"]
    assert len(event["problem"]) == 500 and event["problem"].startswith("$.field_000: bytes; $.field_001: bytes; ")


# -- settle: the snapshot of what a call handed back ----------------------------------------------------------


def test_settle_saves_a_changed_list_once_and_nothing_for_an_unchanged_one(store: SessionStore) -> None:
    keeper = Keeper(store)
    keeper.append("s", [U("q1"), A("r1"), U("q2")])
    assert keeper.settle("s", "", [U("q2")]) is None  # not tracked in this call
    keeper.track("s", "", [U("q1"), A("r1"), U("q2")], by="snapshot_restore")
    assert keeper.settle("s", "", [U("q1"), A("r1"), recall("x"), U("q2")]) is None  # only the recall block
    keeper.track("s", "", [U("q1"), A("r1"), U("q2")], by="snapshot_restore")
    settled = keeper.settle("s", "", [A("r1"), U("q2")])
    assert settled is not None and settled.by == "snapshot_restore" and settled.snapshot is not None
    assert settled.skipped is None and settled.error is None
    stored = store.load_snapshot("s")
    assert stored is not None and [m["content"] for m in stored.messages] == ["r1", "q2"]
    assert keeper.settle("s", "", [U("q2")]) is None  # a settle ends the call's tracking


def test_settle_of_a_view_saves_that_views_snapshot(store: SessionStore) -> None:
    keeper = Keeper(store)
    keeper.append("s", [U("w1"), A("w2")], "w")
    keeper.track("s", "w", [U("w1"), A("w2")], by="mine")
    settled = keeper.settle("s", "w", [A("w2")])
    assert settled is not None and settled.snapshot is not None and settled.snapshot.view == "w"
    assert store.load_snapshot("s") is None
    stored = store.load_snapshot("s", "w")
    assert stored is not None and [m["content"] for m in stored.messages] == ["w2"]


def test_a_failed_save_is_returned_and_due_on_the_next_call_even_unchanged(store: SessionStore) -> None:
    failing = Failing(store)
    keeper = Keeper(failing)
    keeper.append("s", [U("q1"), A("r1"), U("q2")])
    keeper.track("s", "", [U("q1"), A("r1"), U("q2")], by="snapshot_restore")
    failing.down = True
    settled = keeper.settle("s", "", [A("r1"), U("q2")])
    assert settled is not None and settled.by == "snapshot_restore" and settled.snapshot is None
    assert isinstance(settled.error, StoreError) and "save_snapshot" in str(settled.error)
    failing.down = False
    keeper.track("s", "", [A("r1"), U("q2")], by="snapshot_restore")
    again = keeper.settle("s", "", [A("r1"), U("q2")])  # unchanged in this call, but due
    assert again is not None and again.snapshot is not None and again.error is None
    stored = store.load_snapshot("s")
    assert stored is not None and [m["content"] for m in stored.messages] == ["r1", "q2"]
    keeper.track("s", "", [A("r1"), U("q2")], by="snapshot_restore")
    assert keeper.settle("s", "", [A("r1"), U("q2")]) is None  # no longer due


def _two_waiting(store: SessionStore) -> tuple[Failing, Keeper]:
    """A keeper whose store went down while it recorded q2 and r2: those two messages wait for the store."""
    failing = Failing(store)
    keeper = Keeper(failing)
    keeper.record_list("s", [U("q1"), A("r1")])
    failing.down = True
    with pytest.raises(StoreError):
        keeper.record_list("s", [U("q1"), A("r1"), U("q2"), A("r2")])
    assert keeper.recorder.pending("s") == 2  # the precondition: two messages wait for the store
    return failing, keeper


def test_a_save_waiting_for_the_raw_history_is_skipped_and_due(store: SessionStore) -> None:
    failing, keeper = _two_waiting(store)
    keeper.track("s", "", [U("q1"), A("r1"), U("q2"), A("r2")], by="snapshot_restore")
    settled = keeper.settle("s", "", [U("q2"), A("r2")])
    assert settled is not None and settled.by == "snapshot_restore"
    assert settled.skipped == "raw_history_pending" and settled.pending == 2 and settled.snapshot is None
    assert store.load_snapshot("s") is None
    failing.down = False
    keeper.record_list("s", [U("q1"), A("r1"), U("q2"), A("r2")])
    assert keeper.recorder.pending("s") == 0
    keeper.track("s", "", [U("q2"), A("r2")], by="snapshot_restore")
    again = keeper.settle("s", "", [U("q2"), A("r2")])  # unchanged, but due
    assert again is not None and again.snapshot is not None and again.snapshot.raw_length == 4


def test_a_save_that_is_due_when_the_same_snapshot_was_written_last_is_no_longer_due(store: SessionStore) -> None:
    failing = Failing(store)
    keeper = Keeper(failing)
    keeper.append("s", [U("q1"), A("r1")])
    assert keeper.save_snapshot("s", "", [A("r1")]) is not None
    keeper.track("s", "", [U("q1"), A("r1")], by="x")
    failing.down = True
    keeper.append("s", [])  # nothing to write: no failure
    settled = keeper.settle("s", "", [A("r1")])  # the same snapshot as the last one: nothing to write
    assert settled is not None and settled.snapshot is None and settled.error is None
    keeper.track("s", "", [A("r1")], by="x")
    assert keeper.settle("s", "", [A("r1")]) is None


# -- the record of a call -------------------------------------------------------------------------------------


def test_a_call_record_of_a_list_still_holding_an_erased_message_keeps_only_its_role(store: SessionStore) -> None:
    from ctxlife.sessions.calls import sent_calls

    keeper = Keeper(store)
    records = keeper.append("s", [U("q1"), A("card 4111-1111"), U("q2")])
    assert keeper.erase("s", [records[1].slot]) == [records[1].slot]
    n = keeper.record_call("s", [U("q1"), A("card 4111-1111"), U("q2")], details={"tokens": [3, 100]})
    (call,) = sent_calls(store, "s")
    assert call.record.n == n and call.tokens == (3, 100)
    assert "4111" not in str(call.doc) and "4111" not in str(call.messages)
    assert [m["role"] for m in call.messages] == ["user", "assistant", "user"]
    assert [m.get("content") for m in call.messages][::2] == ["q1", "q2"]


def test_a_call_record_names_each_message_by_its_slot_in_its_view(store: SessionStore) -> None:
    from ctxlife.sessions.calls import sent_calls

    keeper = Keeper(store)
    keeper.append("s", [U("other")])
    records = keeper.append("s", [U("w1"), A("w2")], "w")
    keeper.record_call("s", [U("w1"), A("w2"), recall("x")], "w", details={})
    (call,) = sent_calls(store, "s", "w")
    assert call.slots == [records[0].slot, records[1].slot, None] and call.head == 3
    assert sent_calls(store, "s") == []


# -- forgetting -----------------------------------------------------------------------------------------------


def test_drop_idle_keeps_the_messages_waiting_for_the_store(store: SessionStore) -> None:
    failing, keeper = _two_waiting(store)
    keeper.drop_idle("s")
    assert keeper.recorder.pending("s") == 2
    failing.down = False
    keeper.record_list("s", [U("q1"), A("r1"), U("q2"), A("r2"), U("q3")])
    assert texts(store.current("s")) == ["q1", "r1", "q2", "r2", "q3"]


def test_drop_idle_and_forget_drop_only_that_sessions_memory_of_its_snapshots(store: SessionStore) -> None:
    keeper = Keeper(store)
    for sid in ("s", "t"):
        keeper.append(sid, [U("q1")], "w")
        assert keeper.save_snapshot(sid, "w", [U("q1")]) is not None
    keeper.drop_idle("s")
    assert keeper.save_snapshot("t", "w", [U("q1")]) is None  # t's memory kept
    assert keeper.save_snapshot("s", "w", [U("q1")]) is not None  # s's dropped: written again
    keeper.forget("s")
    assert keeper.save_snapshot("t", "w", [U("q1")]) is None
    assert keeper.save_snapshot("s", "w", [U("q1")]) is not None
    keeper.forget()
    assert keeper.save_snapshot("t", "w", [U("q1")]) is not None


def test_drop_idle_keeps_another_sessions_run_built_from_scratch(tmp_path: Path) -> None:
    # A new process starts session t's run from scratch (a CrewAI kickoff) before t's view is read; the host
    # drops another, idle session meanwhile: t's repeated task is still a new turn, not an edit of the old one.
    url = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(url) as store:
        Keeper(store).record_list("t", [U("task"), A("once")], "a")
    with open_store(url) as store:
        keeper = Keeper(store)
        keeper.record_list("s", [U("other")])
        keeper.recorder.new_lists("t", "a")
        keeper.drop_idle("s")
        keeper.record_list("t", [U("task"), A("twice")], "a")
        assert texts(store.current("t", "a")) == ["task", "once", "task", "twice"]


def test_one_keeper_per_store_object(tmp_path: Path) -> None:
    first = open_store(f"file://{tmp_path / 'a'}")
    second = open_store(f"file://{tmp_path / 'a'}")
    try:
        keeper = keeper_for(first)
        assert keeper.store is first and keeper_for(first) is keeper
        assert keeper_for(second) is not keeper and keeper_for(second).store is second
        keeper.append("s", [U("q1")])
        assert texts(second.current("s")) == ["q1"]
    finally:
        first.close()
        second.close()


def test_a_keepers_store_and_recorder_are_its_own(store: SessionStore) -> None:
    keeper = Keeper(store)
    assert keeper.store is store and keeper.recorder.store is store
    assert fingerprint(U("q1")) == keeper.append("s", [U("q1")])[0].fingerprint


def test_forget_drops_that_sessions_tracked_call_and_due_save_only(store: SessionStore) -> None:
    # A session deleted while a call of it is under way: the call's settle writes no snapshot of it; another
    # session's save that failed stays due.
    failing = Failing(store)
    keeper = Keeper(failing)
    for sid in ("s", "t"):
        keeper.append(sid, [U("q1"), A("r1")])
    keeper.track("t", "", [U("q1"), A("r1")], by="x")
    failing.down = True
    settled = keeper.settle("t", "", [A("r1")])
    assert settled is not None and settled.error is not None  # the precondition: t's save is due
    failing.down = False
    keeper.track("s", "", [U("q1"), A("r1")], by="x")
    keeper.forget("s")
    assert keeper.settle("s", "", [A("r1")]) is None
    assert store.load_snapshot("s") is None
    keeper.track("t", "", [A("r1")], by="x")
    again = keeper.settle("t", "", [A("r1")])  # unchanged in this call, still due
    assert again is not None and again.snapshot is not None
    keeper.track("t", "", [A("r1")], by="x")
    failing.down = True
    assert (keeper.settle("t", "", [U("r1, changed")]) or Settled("")).error is not None  # due again
    failing.down = False
    keeper.forget()
    keeper.track("s", "", [U("q1"), A("r1")], by="x")
    keeper.track("t", "", [A("r1")], by="x")
    keeper.forget()
    assert keeper.settle("s", "", [A("r1")]) is None and keeper.settle("t", "", [A("r1")]) is None


# -- reading --------------------------------------------------------------------------------------------------


def test_a_restore_without_a_view_reads_the_default_view_whole(store: SessionStore) -> None:
    records = Keeper(store).append("s", [U("q1"), A("r1")])
    Keeper(store).append("t", [U("w1")], "w")
    restored = Keeper(store).restore("s")
    assert restored.messages == [U("q1"), A("r1")] and restored.slots == [1, 2] and restored.covered == 2
    assert restored.fingerprints == [r.fingerprint for r in records]  # not a messages-only read
    assert restored.covered_fp == records[-1].fingerprint
    assert Keeper(store).restore("t", "w").messages == [U("w1")]


class Keyless(DelegatingStore):
    """A third party's store: only the abstract methods, and the rewrite an erase needs; it keeps no mark key
    (marks use this process's secret), so what was erased is known to this process only."""

    def _rewrite_records(self, session_id: str, values: dict[int, dict[str, Any]]) -> int:
        return self.inner._rewrite_records(session_id, values)


def test_an_erased_message_a_list_still_holds_is_not_recorded_again_on_a_store_without_a_mark_key(
    store: SessionStore,
) -> None:
    keyless = Keyless(store)
    keeper = Keeper(keyless)
    keeper.record_list("s", [U("q1"), A("card 4111-1111"), U("q2")])
    assert keyless.mark_key(create=True) is None  # the precondition: the store keeps no secret
    assert keeper.erase("s", [2]) == [2]
    keeper.record_list("s", [U("q1"), A("card 4111-1111"), U("q2"), A("r2")])
    assert "4111" not in str([r.message for r in store.read_records("s", strict=False)])
    assert texts(store.current("s")) == ["q1", "q2", "r2"]


def test_a_due_save_made_by_a_direct_save_is_no_longer_due(store: SessionStore) -> None:
    # A call's save failed (due); the strategy's own save at the task's end then wrote it: the next call that
    # changes nothing reports nothing.
    failing = Failing(store)
    keeper = Keeper(failing)
    keeper.append("s", [U("q1"), A("r1")])
    keeper.track("s", "", [U("q1"), A("r1")], by="x")
    failing.down = True
    assert (keeper.settle("s", "", [A("r1")]) or Settled("")).error is not None
    failing.down = False
    assert keeper.save_snapshot("s", "", [A("r1")]) is not None
    keeper.track("s", "", [A("r1")], by="x")
    assert keeper.settle("s", "", [A("r1")]) is None
