"""What the raw history holds after restarts, cold tails, other processes' writes and lists handed back.

Written for the recorder's survivors of the core's re-run (docs/mutation/core-recording.md, issue 44): each
test drives a real recorder (or keeper) over a real file store and asserts the records on disk: what a
caller's list adds, that nothing is written twice, that nothing the caller holds is lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.errors import StoreError
from ctxlife.sessions import SessionStore, open_store
from ctxlife.sessions.file import FileStore
from ctxlife.sessions.keeper import Keeper
from ctxlife.sessions.recording import Recorder
from ctxlife.sessions.records import ADD, REPLACE
from ctxlife.testing import assistant, user


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileStore]:
    s = FileStore(tmp_path / "sessions", fsync=False)
    yield s
    s.close()


def rebuilt(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The list as a stateless caller sends it: new dicts every call."""
    return json.loads(json.dumps(messages))


def texts(store: SessionStore, sid: str = "s", view: str = "") -> list[Any]:
    """The view's current conversation, as the contents of its messages."""
    return [r.message.get("content") for r in store.current(sid, view)]


def added(records: list[Any]) -> list[tuple[str, Any]]:
    return [(r.op, r.message.get("content")) for r in records]


def test_a_session_deleted_and_written_again_in_another_view_gets_the_callers_whole_conversation(
    store: FileStore, tmp_path: Path
) -> None:
    """Another process deleted the session and wrote a longer one, all of it in another view: this view has
    no record after the recorder's, only the head moved. The record this recorder wrote last is gone, so the
    caller's conversation is new to the session: all of it is written, not only its last message."""
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1")])
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.delete("s")
        other.append("s", [user("x1"), assistant("x2"), user("x3")], view="helper")
    assert store.head("s") == 3 and texts(store) == []  # the precondition: the head is past this recorder's (2)
    with capture_logs() as events:
        recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    assert texts(store) == ["q1", "r1", "q2"]
    assert texts(store, view="helper") == ["x1", "x2", "x3"]
    assert [e["session_id"] for e in events if e["event"] == "ctxlife.session_started_again"] == ["s"]


def test_a_view_restored_before_another_process_appended_to_it_records_none_of_its_messages_twice(
    tmp_path: Path,
) -> None:
    """A keeper restores view "b" of an SQLite session (plain adds: the recorder takes their slots without
    reading the view again); another process then appends to view "b", and this process records a turn in
    view "". The caller of view "b" then sends the conversation as the store now holds it, its first message
    corrected, plus a question: the correction replaces the first message and the question is added; the
    other process's message is read, not written again."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(url) as first:
        first.append("s", [user("a1")])
        first.append("s", [user("b1")], view="b")
    with open_store(url) as store:
        keeper = Keeper(store)
        restored = keeper.restore("s", "b")
        assert restored.plain and not restored.records  # the precondition: slots taken, no record read
        with open_store(url) as other:
            other.append("s", [assistant("b2")], view="b")
        keeper.recorder.record("s", [user("a1"), assistant("a2")])
        written = keeper.recorder.record("s", [user("b1, corrected"), assistant("b2"), user("b3")], view="b")
        assert added(written) == [(REPLACE, "b1, corrected"), (ADD, "b3")]
        assert texts(store, view="b") == ["b1, corrected", "b2", "b3"]
        assert texts(store) == ["a1", "a2"]


def test_a_new_runs_first_list_handed_back_before_it_is_recorded_still_records_its_repeated_first_message(
    store: FileStore,
) -> None:
    """A run repeats the last run's first message (the same task). Its first list is handed back after the
    call (``leave``) before anything records it: it is not taken for the old records by content, and the
    run's next list records the new task message and its reply, after the last run's."""
    recorder = Recorder(store)
    recorder.record("s", [user("task"), assistant("done once")])
    recorder.new_lists("s")
    recorder.leave("s", [user("task")])
    written = recorder.record("s", [user("task"), assistant("done twice")])
    assert added(written) == [(ADD, "task"), (ADD, "done twice")]
    assert texts(store) == ["task", "done once", "task", "done twice"]


def _conversation(turns: int) -> list[dict[str, Any]]:
    return [m for i in range(turns) for m in (user(f"q{i}"), assistant(f"r{i}"))]


def _restarted_on_a_compacted_view(store: SessionStore, history: list[dict[str, Any]]) -> Recorder:
    """A new process's recorder told a compacted view's kept point (the task's first message, then the
    conversation from slot 5 on: slots 2-4 evicted), seeded with the task's first message alone."""
    Recorder(store).record("s", rebuilt(history))
    restarted = Recorder(store)
    kept = [history[0], *history[4:]]
    restarted.kept_from("s", "", kept, [1, *range(5, len(history) + 1)])
    restarted.seed("s", rebuilt(history[:1]), [1])
    return restarted


def test_after_a_restart_a_window_holding_evicted_messages_records_only_its_new_question(
    store: SessionStore,
) -> None:
    """The caller keeps its conversation without the task's first message: it relates to no list the
    recorder holds, so it is aligned with the view's end by content, through records older than the kept
    point (read now): only its new question is written."""
    history = _conversation(10)
    restarted = _restarted_on_a_compacted_view(store, history)
    written = restarted.record("s", rebuilt([*history[1:], user("q10")]))
    assert added(written) == [(ADD, "q10")]
    assert texts(store) == [m["content"] for m in [*history, user("q10")]]


@pytest.mark.parametrize("new", [[], [user("q20")]], ids=["nothing-new", "a-question"])
def test_after_a_restart_a_long_window_holding_evicted_messages_records_nothing_twice(
    store: SessionStore, new: list[dict[str, Any]]
) -> None:
    """The same with a window longer than alignment looks back (32 messages): its oldest messages, evicted
    by the compaction, are placed after the alignment (older records read then). The window, and the window
    with a question after it, record only the question, once."""
    history = _conversation(20)
    restarted = _restarted_on_a_compacted_view(store, history)
    window = history[1:]
    assert added(restarted.record("s", rebuilt([*window, *new]))) == [(ADD, m["content"]) for m in new]
    assert restarted.record("s", rebuilt([*window, *new])) == []
    written = restarted.record("s", rebuilt([*window, *new, assistant("last")]))
    assert added(written) == [(ADD, "last")]
    assert texts(store) == [m["content"] for m in [*history, *new, assistant("last")]]


def test_after_a_restart_a_note_another_process_inserted_before_the_kept_point_is_placed_among_older_records(
    store: SessionStore, tmp_path: Path
) -> None:
    """A restore told the new process's recorder a compacted view's kept point (slot 7); before it reads the
    view, another process inserts a note after the task's first message. The recorder, seeded with the
    conversation as it now is (the note included), gets the caller's list holding the note, an evicted
    reply after it and a new question: the note and the reply are the view's records (the older records
    are read: the note sits among them), only the question is written."""
    history = [user("q1"), assistant("r1"), user("q2"), assistant("r2"), user("q3"), assistant("r3")]
    history += [user("q4"), assistant("r4")]
    Recorder(store).record("s", rebuilt(history))
    restarted = Recorder(store)
    restarted.kept_from("s", "", [history[0], history[6], history[7]], [1, 7, 8])
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        theirs = Recorder(other)
        theirs.record("s", rebuilt(history))
        inserted = theirs.record("s", rebuilt([history[0], user("(a note)"), *history[1:]]))
    assert [(r.seq, r.op, r.target) for r in inserted] == [(9, ADD, 1)]  # the precondition: an insert
    restarted.seed("s", rebuilt([history[0], user("(a note)"), *history[6:]]), [1, 9, 7, 8])
    written = restarted.record("s", rebuilt([history[0], user("(a note)"), history[1], *history[6:], user("q5")]))
    assert added(written) == [(ADD, "q5")]
    assert texts(store) == ["q1", "(a note)", "r1", "q2", "r2", "q3", "r3", "q4", "r4", "q5"]


def test_after_a_restart_a_new_runs_first_list_handed_back_before_it_is_recorded_still_records_its_first_message(
    store: SessionStore,
) -> None:
    """The warm case of test_a_new_runs_first_list_handed_back_before_it_is_recorded_... in a new process: the
    run (new_lists) repeats the last run's task; its first list is handed back before anything records it.
    The run's next list records the new task message and its reply, after the last run's, as in one process."""
    Recorder(store).record("s", [user("task"), assistant("done once")])
    restarted = Recorder(store)
    restarted.new_lists("s")
    restarted.leave("s", [user("task")])
    written = restarted.record("s", [user("task"), assistant("done twice")])
    assert texts(store) == ["task", "done once", "task", "done twice"]
    assert added(written) == [(ADD, "task"), (ADD, "done twice")]


def test_a_run_built_from_scratch_after_a_restart_keeps_the_last_runs_reply_as_one_process_does(
    tmp_path: Path,
) -> None:
    """Two runs of the same task (``start_run(new_lists=True)``, each list built from scratch, the reply
    recorded with the list it follows), in one process and with a restart between them: the raw history's
    conversation is both runs in both cases. With the restart, the second run's reply replaced the first's."""
    conversations = []
    for restart in (False, True):
        url = f"sqlite:///{tmp_path / f'{restart}.db'}"
        settings = settings_from_dict({"strategies": ["truncate_last_n"], "context_window": 8000}, source="test")
        host = ctxlife.Host(settings, session_id="s")
        host.store = open_store(url)
        for run in ("once", "twice"):
            if restart and run == "twice":
                host.close()  # (closes its store)
                host = ctxlife.Host(settings, session_id="s")
                host.store = open_store(url)
            host.start_run(new_lists=True)
            messages = [{"role": "system", "content": "You are a clerk."}, user("task")]
            host.manage(messages)
            host.record_reply([*messages, assistant(f"done {run}")])
        host.close()
        with open_store(url) as store:
            conversations.append(texts(store))
    assert conversations[0] == ["task", "done once", "task", "done twice"]  # one process
    assert conversations[1] == conversations[0]


def _eight() -> list[dict[str, Any]]:
    return [
        user("q1"),
        assistant("r1"),
        user("q2"),
        assistant("r2"),
        user("q3"),
        assistant("r3"),
        user("q4"),
        assistant("r4"),
    ]


def test_after_a_restart_a_view_that_kept_its_first_exchange_records_only_the_new_question(
    store: SessionStore,
) -> None:
    """A compaction that kept the task's first question and its answer, then the last exchange: the new
    process's recorder reads the view from the kept point and is seeded with that conversation; the
    caller's whole list plus a question records only the question."""
    history = _eight()
    Recorder(store).record("s", rebuilt(history))
    restarted = Recorder(store)
    kept, slots = [*history[:2], *history[6:]], [1, 2, 7, 8]
    restarted.kept_from("s", "", kept, slots)
    restarted.seed("s", rebuilt(kept), slots)  # (as a restore does: the conversation it put back)
    written = restarted.record("s", rebuilt([*history, user("q5")]))
    assert added(written) == [(ADD, "q5")]
    assert texts(store) == ["q1", "r1", "q2", "r2", "q3", "r3", "q4", "r4", "q5"]


def test_after_a_restart_a_view_whose_kept_part_another_process_removed_records_what_a_whole_read_does(
    tmp_path: Path,
) -> None:
    """Another process removes both messages a compacted view kept (after the task's first message) before
    the new process's recorder reads the view, and the recorder is seeded with the list the restore put back.
    A recorder told the kept point (it reads from there) and one that reads the whole view record the same
    for the caller's list plus a question, and the question."""
    history = _eight()
    outcomes = []
    for told in (True, False):
        with FileStore(tmp_path / str(told), fsync=False) as store:
            Recorder(store).record("s", rebuilt(history))
            restarted = Recorder(store)
            if told:
                restarted.kept_from("s", "", [history[0], *history[6:]], [1, 7, 8])
            with FileStore(tmp_path / str(told), fsync=False) as other:
                Recorder(other).remove("s", [7, 8])
            assert texts(store) == ["q1", "r1", "q2", "r2", "q3", "r3"]  # the precondition: the kept part removed
            restarted.seed("s", rebuilt([history[0], *history[6:]]), [1, 7, 8])  # (the list a restore put back)
            written = restarted.record("s", rebuilt([*history, user("q5")]))
            outcomes.append((added(written), texts(store)))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0][-1] == (ADD, "q5")


def _written_again_as_long(store: FileStore, tmp_path: Path, *, helper_says: str) -> Recorder:
    """A recorder that wrote [q1, r1, q2] to view ""; then another process deleted the session and wrote it
    again as long as before: [x1, x2] in view "", ``helper_says`` in view "helper"."""
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.delete("s")
        other.append("s", [user("x1"), assistant("x2")])
        other.append("s", [user(helper_says)], view="helper")
    assert store.head("s") == 3  # the precondition: the head this recorder last wrote
    return recorder


def test_a_removal_by_a_number_of_another_view_after_the_session_was_written_again_is_refused(
    store: FileStore, tmp_path: Path
) -> None:
    """Another process deleted the session and wrote it again as long as before, one message in another
    view. A removal by that message's number in this view is refused (the view has no message there), names
    the session and how to list its messages, and writes nothing."""
    recorder = _written_again_as_long(store, tmp_path, helper_says="y1")
    before = store.read_records("s")
    with pytest.raises(StoreError, match=r"session 's' view '' has no message at sequence number\(s\) \[3\]"):
        recorder.remove("s", [3])
    assert store.read_records("s") == before
    assert texts(store) == ["x1", "x2"] and texts(store, view="helper") == ["y1"]


def test_an_edit_after_another_process_appended_to_the_view_keeps_its_message_editable(
    store: FileStore, tmp_path: Path
) -> None:
    """Another process appends a reply to the view; this process learns the session moved on from a write
    in another view, then edits the view's first message by number. The caller's next lists hold the other
    process's reply, then edit it: the edit replaces that reply (it is the view's message, read before the
    first edit), nothing is added twice."""
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1")])
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.append("s", [assistant("r1, more")])
    recorder.record("s", [user("b1")], view="helper")  # meets the other process's write: the head moved
    recorder.replace("s", 1, user("q1, edited"))
    assert texts(store) == ["q1, edited", "r1", "r1, more"]  # the precondition: the edit, the other's reply
    assert added(recorder.record("s", [user("q1, edited"), assistant("r1"), assistant("r1, more"), user("q2")])) == [
        (ADD, "q2")
    ]
    edited = [user("q1, edited"), assistant("r1"), assistant("r1, corrected"), user("q2")]
    assert added(recorder.record("s", edited)) == [(REPLACE, "r1, corrected")]
    assert texts(store) == ["q1, edited", "r1", "r1, corrected", "q2"]


def test_after_a_restart_a_restored_conversation_that_evicted_nothing_reads_the_whole_view(
    store: SessionStore,
) -> None:
    """A restore whose conversation holds every message from the first (no kept point: nothing evicted)
    leaves the new process's recorder reading the whole view: the caller's list plus a question records
    only the question."""
    history = _eight()
    Recorder(store).record("s", rebuilt(history))
    restarted = Recorder(store)
    restarted.kept_from("s", "", rebuilt(history), list(range(1, 9)))
    written = restarted.record("s", rebuilt([*history, user("q5")]))
    assert added(written) == [(ADD, "q5")]
    assert texts(store) == ["q1", "r1", "q2", "r2", "q3", "r3", "q4", "r4", "q5"]


def test_a_removal_from_a_list_after_the_session_was_written_again_with_another_view_records_this_view_only(
    store: FileStore, tmp_path: Path
) -> None:
    """Another process deleted the session and wrote it again as long as before, one message in another
    view. The caller drops its last reply: nothing of the new session is removed, the caller's conversation
    is written to this view, and the other view keeps its message."""
    recorder = _written_again_as_long(store, tmp_path, helper_says="q1")
    recorder.record("s", [user("q1"), assistant("r1")])
    assert texts(store) == ["x1", "x2", "q1", "r1"]
    assert texts(store, view="helper") == ["q1"]


def test_after_a_restart_a_sessions_new_run_is_not_undone_by_other_sessions_kept_lists_or_forgetting(
    store: SessionStore,
) -> None:
    """A new process marks session "a"'s next list built from scratch and "b"'s too, then "b" keeps its lists
    after all (``kept_lists``) and session "c" is forgotten (a host dropping it). Session "a"'s run repeating
    the task is a new turn after the last run's; session "b"'s list, kept, edits its last reply."""
    for sid in ("a", "b", "c"):
        Recorder(store).record(sid, [user("task"), assistant("done once")])
    restarted = Recorder(store)
    restarted.new_lists("a", view="")
    restarted.new_lists("b", view="")
    restarted.kept_lists("b")
    restarted.forget("c")
    restarted.record("a", [user("task"), assistant("done twice")])
    restarted.record("b", [user("task"), assistant("done twice")])
    assert texts(store, "a") == ["task", "done once", "task", "done twice"]
    assert texts(store, "b") == ["task", "done twice"]


def test_a_new_run_of_a_session_the_recorder_does_not_know_yet_beside_one_it_knows(store: SessionStore) -> None:
    """A process that recorded session "x" in a helper view marks session "y"'s next lists built from scratch
    before it knows "y": "y"'s run repeating its task is a new turn after the last run's."""
    Recorder(store).record("y", [user("task"), assistant("done once")])
    recorder = Recorder(store)
    recorder.record("x", [user("other")], view="helper")
    recorder.new_lists("y")
    recorder.record("y", [user("task"), assistant("done twice")])
    assert texts(store, "y") == ["task", "done once", "task", "done twice"]
    assert texts(store, "x", view="helper") == ["other"]
