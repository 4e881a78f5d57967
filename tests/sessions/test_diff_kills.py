"""What the raw history holds after a caller's edits, when the recorder diffs its list against an older one.

The recorder's edit script (:mod:`ctxlife.sessions.diff`, through :func:`~ctxlife.sessions.plans.diff_plan`)
maps the caller's messages onto the view: a message another writer recorded meanwhile is that record, not a
new one, even where the caller holds parallel tool results in another order than the view. Written for the
core's re-run of the recorder's files (docs/mutation/core-recording.md): each test asserts the records on
disk, through a real recorder (or host) over a real file or SQLite store. One test names a bug that run
found, fixed since (a stateless caller's edit of its last question after a restart kept the old question).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.errors import StoreError
from ctxlife.sessions import SessionStore, open_store
from ctxlife.sessions.file import FileStore
from ctxlife.sessions.recording import Recorder
from ctxlife.sessions.records import ADD, REMOVE, REPLACE
from ctxlife.testing import assistant, tool_call, tool_result, user


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    s = FileStore(tmp_path / "sessions", fsync=False)
    yield s
    s.close()


def rebuilt(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The list as a stateless caller sends it: new dicts every call."""
    return json.loads(json.dumps(messages))


def texts(store: SessionStore, sid: str = "s") -> list[Any]:
    """The view's current conversation, as the contents of its messages."""
    return [r.message.get("content") for r in store.current(sid, "")]


def test_parallel_results_recorded_in_completion_order_are_not_recorded_again_after_an_edit(
    store: SessionStore,
) -> None:
    """The bug 48f011b fixed, through the recorder: two callers share a view; the second recorded a call's
    two results in the order they completed (46, then 45). The first edits its last question and sends the
    second's messages with the results in call-id order: its list is diffed against its own older list, and
    each result is the record the view holds, none written twice."""
    recorder = Recorder(store)
    head = [user("q1"), assistant("r1"), user("q2")]
    recorder.record("s", rebuilt(head))
    calls = assistant(None, [tool_call("lookup", {"n": 45}, "c45"), tool_call("lookup", {"n": 46}, "c46")])
    r45, r46 = tool_result("c45", "forty-five"), tool_result("c46", "forty-six")
    recorder.record("s", rebuilt([calls, r46, r45, assistant("both found")]))  # the second caller's list
    before = len(store.read_records("s"))
    edited = [user("q1"), assistant("r1"), user("q2, edited"), calls, r45, r46, assistant("both found"), user("q3")]
    written = recorder.record("s", rebuilt(edited))
    assert [(r.op, r.message.get("content")) for r in written] == [(REPLACE, "q2, edited"), (ADD, "q3")]
    assert len(store.read_records("s")) == before + 2
    assert texts(store) == ["q1", "r1", "q2, edited", None, "forty-six", "forty-five", "both found", "q3"]


def test_a_message_the_caller_puts_before_its_conversation_is_not_recorded_and_its_edit_is(
    store: SessionStore,
) -> None:
    """A caller that keeps a note of its own in front of the conversation and edits a reply: the edit is one
    replace; the note, before every message the view holds, is not the conversation's (nothing else is
    written, and recording does not fail)."""
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1")])
    written = recorder.record("s", [user("(note kept in front)"), user("q1"), assistant("r1, corrected")])
    assert [(r.op, r.target, r.message.get("content")) for r in written] == [(REPLACE, 2, "r1, corrected")]
    assert texts(store) == ["q1", "r1, corrected"]


# -- a stateless caller after a restart on a compacted view (the recorder's tail starts at the kept point) --

SID = "cold"
SETTINGS = {
    "strategies": ["snapshot_restore", "llm_summary"],
    "context_window": 2000,
    "threshold": 0.5,
    "llm_summary": {"summarizer": "extractive"},
}


def _turn(i: int) -> dict[str, Any]:
    return {"role": "user", "content": f"Parcel {1000 + i}: where is it? " + "Please check. " * 12}


def _reply(i: int) -> dict[str, Any]:
    return {"role": "assistant", "content": f"Parcel {1000 + i} is in depot {i % 7}. " + "It ships soon. " * 12}


def _records(store: SessionStore) -> list[tuple[int, str, int | None, Any]]:
    return [(r.seq, r.op, r.target, r.message.get("content")) for r in store.read_records(SID)]


def _after_edit(
    tmp_path: Path,
    kind: str,
    edit: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
    conversation: list[Any] | None = None,
) -> Any:
    """A stateless caller's 30 turns through manage() (the view compacted, a snapshot saved), then, in the
    same process (warm) or a new one (cold: its recorder reads the view from the kept point on), the
    caller's whole list edited by ``edit``: the raw history after it, and how many records it had before."""
    url = f"sqlite:///{tmp_path / f'{kind}.db'}"
    settings = settings_from_dict(SETTINGS, source="test")
    store = open_store(url)
    host = ctxlife.Host(settings, session_id=SID)
    host.store = store
    history: list[dict[str, Any]] = []
    try:
        for i in range(30):
            history.append(_turn(i))
            host.manage(list(history))
            history.append(_reply(i))
        snapshot = store.load_snapshot(SID)
        assert snapshot is not None and snapshot.raw_length > 20  # compacted, long ago enough to matter
        if kind == "cold":
            host.close()  # (closes its store)
            store = open_store(url)
            host = ctxlife.Host(settings, session_id=SID)
            host.store = store
        before = len(store.read_records(SID))
        host.manage(edit(history))
        if conversation is not None:
            conversation.extend(texts(store, SID))  # the view's current conversation, as the store reads it
        return _records(store), before
    finally:
        host.close()


def _edit_evicted_reply(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    edited = [dict(m) for m in history]
    edited[21] = {"role": "assistant", "content": "Parcel 1010 was lost; refunded."}  # long evicted
    return [*edited, _turn(30)]


def test_after_a_restart_a_callers_edit_of_an_evicted_message_records_what_the_warm_process_does(
    tmp_path: Path,
) -> None:
    """The caller's list holds every message the compaction evicted, one of them edited: a new process,
    whose recorder holds only the kept part of the view, reads the older records it needs and writes what
    the process that compacted writes: the edited reply after the question before it, the last reply and
    the new question, none of the evicted messages again."""
    warm, before = _after_edit(tmp_path, "warm", _edit_evicted_reply)
    cold, cold_before = _after_edit(tmp_path, "cold", _edit_evicted_reply)
    assert cold == warm and cold_before == before
    question = next(seq for seq, _, _, content in cold if content == _turn(10)["content"])
    assert [(op, target, content) for _, op, target, content in cold[before:]] == [
        (ADD, question, "Parcel 1010 was lost; refunded."),
        (ADD, None, _reply(29)["content"]),  # never sent to ctxlife before
        (ADD, None, _turn(30)["content"]),
    ]


def _edit_last_question(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # the last recorded message is question 29 (reply 29 was never sent to ctxlife)
    return [*history[:-2], {"role": "user", "content": "Parcel 1029: where is it, and when?"}, history[-1], _turn(30)]


def test_after_a_restart_a_callers_edit_of_its_last_question_writes_none_of_the_evicted_messages_again(
    tmp_path: Path,
) -> None:
    """The new process's recorder holds the task's first message and the kept end (question 29); the
    caller's list holds every message the compaction evicted between them: they are the view's records
    (read now), and only the edited question, the last reply and the new question are added."""
    cold, before = _after_edit(tmp_path, "cold", _edit_last_question)
    added = [content for _, op, _, content in cold[before:] if op in (ADD, REPLACE)]
    assert added == ["Parcel 1029: where is it, and when?", _reply(29)["content"], _turn(30)["content"]]


def test_after_a_restart_a_callers_edit_of_its_last_question_replaces_it_as_the_warm_process_does(
    tmp_path: Path,
) -> None:
    """A stateless caller edits its latest question after a restart: the raw history's conversation is its
    list, as when the process that compacted sees the same edit (there: a removal and an add; here a
    replace). Found by mutate42: the new process paired question 29 with the caller's first unmatched message
    (reply 0, evicted by the compaction), not of one role, so nothing replaced it and the old question stayed."""
    warm_conversation: list[Any] = []
    cold_conversation: list[Any] = []
    warm, _ = _after_edit(tmp_path, "warm", _edit_last_question, warm_conversation)
    cold, before = _after_edit(tmp_path, "cold", _edit_last_question, cold_conversation)
    assert [r for r in warm if r[1] == REMOVE], warm[-4:]  # the warm process removes the old question
    edited = _edit_last_question([m for i in range(30) for m in (_turn(i), _reply(i))])
    assert cold_conversation == warm_conversation == [m["content"] for m in edited]
    old_question = next(seq for seq, op, _, content in cold if op == ADD and content == _turn(29)["content"])
    assert (REPLACE, old_question) in [(op, target) for _, op, target, _ in cold[before:]]


def _two_views(url: str, cold: bool, act: Callable[[ctxlife.Session, SessionStore], None]) -> Any:
    """A session whose view "a" was compacted (30 turns) while view "b" recorded a few turns between them;
    then ``act`` on view "a" in the same process (warm) or a new one (cold); the raw history and what view
    "a" sends next."""
    settings = settings_from_dict({**SETTINGS, "strategies": ["llm_summary"]}, source="test")
    store = open_store(url)
    host = ctxlife.Host(settings, session_id=SID)
    host.store = store
    a = ctxlife.Session(SID, host=host, view="a", system="You are a clerk.")
    b = ctxlife.Session(SID, host=host, view="b", system="You are the desk.")
    try:
        for i in range(30):
            a.messages(_turn(i))
            a.record_reply(_reply(i)["content"])
            if i % 10 == 5:
                b.messages({"role": "user", "content": f"desk note {i}"})
                b.record_reply(f"desk reply {i}")
        snapshot = store.load_snapshot(SID, "a")
        assert snapshot is not None and snapshot.raw_length > 20  # compacted, long ago enough to matter
        if cold:
            a.close()
            b.close()
            host.close()  # (closes its store)
            store = open_store(url)
            host = ctxlife.Host(settings, session_id=SID)
            host.store = store
            a = ctxlife.Session(SID, host=host, view="a", system="You are a clerk.")
        act(a, store)
        sent = a.messages(_turn(60))
        return _records(store), [m.get("content") for m in sent if m.get("role") != "system"][-4:]
    finally:
        a.close()
        host.close()


def _edit_an_old_one(session: ctxlife.Session, store: SessionStore) -> None:
    old = next(r.seq for r in store.read_records(SID) if r.message.get("content") == _reply(3)["content"])
    session.edit(old, {"role": "assistant", "content": "Parcel 1003: lost, refunded."})
    session.messages(_turn(50))


def _remove_old_ones(session: ctxlife.Session, store: SessionStore) -> None:
    records = store.read_records(SID)
    old = [r.seq for r in records if r.message.get("content") in (_turn(4)["content"], _reply(4)["content"])]
    session.remove(*old)
    session.messages(_turn(50))
    session.record_reply(_reply(50)["content"])


@pytest.mark.parametrize("act", [_edit_an_old_one, _remove_old_ones], ids=["edit", "remove"])
def test_a_cold_process_edits_an_old_message_of_one_view_as_the_warm_one_does_beside_another_view(
    tmp_path: Path, act: Callable[[ctxlife.Session, SessionStore], None]
) -> None:
    """The cold process's recorder reads view "a" from its kept point; the edit of an older record makes it
    read the rest of that view, and only that view: the raw history and what view "a" sends next are the
    warm process's (view "b"'s messages are never taken for view "a"'s)."""
    warm = _two_views(f"sqlite:///{tmp_path / 'warm.db'}", False, act)
    cold = _two_views(f"sqlite:///{tmp_path / 'cold.db'}", True, act)
    assert cold[0] == warm[0]
    assert cold[1] == warm[1] and not any("desk" in str(c) for c in cold[1])


def test_an_edit_of_a_number_the_view_does_not_hold_names_the_session_and_how_to_list_its_messages(
    store: SessionStore,
) -> None:
    recorder = Recorder(store)
    recorder.record("order-7", [user("q1"), assistant("r1")])
    with pytest.raises(StoreError) as refused:
        recorder.remove("order-7", [9])
    assert str(refused.value) == (
        "session 'order-7' view '' has no message at sequence number(s) [9]; "
        "list them with `ctxlife session export order-7 --all`"
    )
    assert texts(store, "order-7") == ["q1", "r1"]


def test_a_list_handed_back_after_an_explicit_removal_is_continued_without_recording_it_again(
    store: SessionStore,
) -> None:
    """An explicit removal leaves the recorder no list to diff against (the view as stored decides); the
    list a call hands back afterwards (``leave``) is noted, and the caller's next list, continuing it,
    records only its new message."""
    recorder = Recorder(store)
    history = [user("q1"), assistant("r1"), user("q2"), assistant("r2")]
    recorder.record("s", history)
    recorder.remove("s", [2])  # r1
    handed_back = [user("q1"), user("q2"), assistant("r2")]
    recorder.leave("s", handed_back)
    written = recorder.record("s", [*handed_back, user("q3")])
    assert [(r.op, r.message.get("content")) for r in written] == [(ADD, "q3")]
    assert texts(store) == ["q1", "q2", "r2", "q3"]


def test_after_a_restart_a_restored_list_handed_back_is_continued_without_recording_it_again(
    store: SessionStore,
) -> None:
    """A new process seeds its recorder with the restored conversation (slots known, as a restore does) and
    hands the same list back after the call: the caller's next list records only its new message."""
    history = [user("q1"), assistant("r1"), user("q2")]
    Recorder(store).record("s", history)
    restarted = Recorder(store)
    restored = rebuilt(history)
    restarted.seed("s", restored, [1, 2, 3])
    restarted.leave("s", restored)
    written = restarted.record("s", [*rebuilt(history), assistant("r2")])
    assert [(r.op, r.message.get("content")) for r in written] == [(ADD, "r2")]
    assert texts(store) == ["q1", "r1", "q2", "r2"]


def test_after_a_restart_a_recorder_seeded_with_the_whole_restored_list_records_only_what_is_new(
    store: SessionStore,
) -> None:
    """A restore told the new process's recorder the compacted view's kept point (it reads the records from
    there on), then seeds it with the whole conversation and its slots (older ones included): the tail is
    read whole first, and the caller's list, the conversation plus a question, records only the question."""
    history = [user("q1"), assistant("r1"), user("q2"), assistant("r2"), user("q3"), assistant("r3")]
    history += [user("q4"), assistant("r4")]
    Recorder(store).record("s", rebuilt(history))
    restarted = Recorder(store)
    restarted.kept_from("s", "", [history[0], history[6], history[7]], [1, 7, 8])
    restarted.seed("s", rebuilt(history), list(range(1, 9)))
    written = restarted.record("s", rebuilt([*history, user("q5")]))
    assert [(r.op, r.message.get("content")) for r in written] == [(ADD, "q5")]
    assert texts(store) == ["q1", "r1", "q2", "r2", "q3", "r3", "q4", "r4", "q5"]
    # a note the caller keeps in front of the conversation, and its last reply edited: one replace, no note
    edited = [user("(my note)"), *history, user("q5, better")]
    assert [(r.op, r.message.get("content")) for r in restarted.record("s", rebuilt(edited))] == [
        (REPLACE, "q5, better")
    ]


def test_after_a_restart_a_message_inserted_after_the_tasks_first_one_goes_there(store: SessionStore) -> None:
    """The new process's recorder holds the task's first message and the kept end of a compacted view; the
    caller inserts a note right after the first message: it is written there (after the first message's
    record, among the older records the recorder then reads), and the new question at the end."""
    history = [user("q1"), assistant("r1"), user("q2"), assistant("r2"), user("q3"), assistant("r3")]
    history += [user("q4"), assistant("r4")]
    Recorder(store).record("s", rebuilt(history))
    restarted = Recorder(store)
    compacted, slots = [history[0], history[6], history[7]], [1, 7, 8]
    restarted.kept_from("s", "", compacted, slots)
    restarted.seed("s", rebuilt(compacted), slots)
    written = restarted.record("s", rebuilt([history[0], user("(a note)"), *history[6:], user("q5")]))
    assert [(r.op, r.target, r.message.get("content")) for r in written] == [
        (ADD, 1, "(a note)"),
        (ADD, None, "q5"),
    ]
    assert texts(store) == ["q1", "(a note)", "r1", "q2", "r2", "q3", "r3", "q4", "r4", "q5"]
    assert restarted.record("s", rebuilt([history[0], user("(a note)"), *history[6:], user("q5")])) == []


def test_after_a_restart_a_compacted_view_keeping_only_its_last_message_records_only_what_is_new(
    store: SessionStore,
) -> None:
    """A compaction that kept the task's first message and only the last reply: the new process's recorder
    reads the view from that one record on, and the caller's list, the conversation plus a question,
    records only the question."""
    history = [user("q1"), assistant("r1"), user("q2"), assistant("r2")]
    Recorder(store).record("s", rebuilt(history))
    restarted = Recorder(store)
    restarted.kept_from("s", "", [history[0], history[3]], [1, 4])
    written = restarted.record("s", rebuilt([*history, user("q3")]))
    assert [(r.op, r.message.get("content")) for r in written] == [(ADD, "q3")]
    assert texts(store) == ["q1", "r1", "q2", "r2", "q3"]


def test_after_a_restart_the_whole_list_handed_back_on_a_cold_tail_is_continued(store: SessionStore) -> None:
    """The new process's recorder holds the kept part of a compacted view; the call hands back the caller's
    whole list (the evicted messages included) before anything is recorded: the older records are read to
    place them, and the caller's next list records only its new question."""
    history = [user("q1"), assistant("r1"), user("q2"), assistant("r2"), user("q3"), assistant("r3")]
    history += [user("q4"), assistant("r4")]
    Recorder(store).record("s", rebuilt(history))
    restarted = Recorder(store)
    restarted.kept_from("s", "", [history[0], history[6], history[7]], [1, 7, 8])
    restarted.leave("s", rebuilt(history))
    written = restarted.record("s", rebuilt([*history, user("q5")]))
    assert [(r.op, r.message.get("content")) for r in written] == [(ADD, "q5")]
    assert texts(store) == ["q1", "r1", "q2", "r2", "q3", "r3", "q4", "r4", "q5"]
