"""The recorder's write path over real file and SQLite stores: each message recorded exactly once.

Fast, focused checks (``make mutate`` runs them for every mutant of the recorder and the stores):
which of a caller's messages are new (equal messages at two places, one message object reused, a
list rebuilt from JSON), edits and removals, the messages kept waiting when the store fails and
their retry (a write that landed but was reported failed is never written twice), and the stores'
append, record reads and snapshot loads that the recorder and the restore rely on.

Faults are injected by :class:`Flaky`, a wrapper that fails a real store's ``append``; the recorder
under test is always the real one.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from ctxlife.errors import StoreError
from ctxlife.messages import BOOTSTRAP_END, BOOTSTRAP_START, Agreement, mark_inserted
from ctxlife.sessions import SessionStore, open_store
from ctxlife.sessions.base import AppendConflictError, conflict
from ctxlife.sessions.file import FileStore
from ctxlife.sessions.recording import Recorder
from ctxlife.sessions.records import ADD, REMOVE, REPLACE, Event, RawRecord, fingerprint
from ctxlife.sessions.restore import restore_view
from ctxlife.sessions.snapshot import Snapshot
from ctxlife.testing import assistant, system, tool_call, tool_result, user
from delegating_store import DelegatingStore
from fsync_spy import fsyncs

# -- helpers ---------------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    """The store the recorder tests write to (the default kind; no fsync, for speed)."""
    s = FileStore(tmp_path / "sessions", fsync=False)
    yield s
    s.close()


@pytest.fixture
def store_of_kind(store_url: str) -> Iterator[SessionStore]:
    """The store of the test's ``store_kind`` (conftest's URLs: its own prefix or schema)."""
    s = open_store(store_url)
    yield s
    s.close()


@pytest.fixture(params=["file", "sqlite"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    url = f"file://{tmp_path / 'sessions'}" if request.param == "file" else f"sqlite:///{tmp_path / 'sessions.db'}"
    s = open_store(url)
    yield s
    s.close()


class Flaky(DelegatingStore):
    """A real store whose ``append`` can be made to fail: ``"refused"`` (nothing written),
    ``"landed"`` (written, then reported failed, as when a connection drops after the write) or
    ``"down"`` (reads fail too) or ``"conflict"`` (another writer always appends first)."""

    def __init__(self, inner: SessionStore) -> None:
        super().__init__(inner)
        self.mode: str | None = None
        self.failures = 0
        self.reads = 0

    def append(self, session_id: str, messages: list[dict[str, Any]], **kwargs: Any) -> list[RawRecord]:
        if self.mode == "conflict":  # another writer always appends first
            self.failures += 1
            raise conflict(session_id, kwargs["if_head"], self.inner.head(session_id))
        if self.mode in ("refused", "down"):
            self.failures += 1
            raise StoreError(f"{self.url}: append: No space left on device")
        records = self.inner.append(session_id, messages, **kwargs)
        if self.mode == "landed":
            self.failures += 1
            raise StoreError(f"{self.url}: append: connection lost after the write was sent")
        return records

    def read_records(
        self, session_id: str, after_seq: int = 0, *, view: str | None = None, strict: bool = True
    ) -> list[RawRecord]:
        self.reads += 1
        if self.mode == "down":
            raise StoreError(f"{self.url}: read_records: connection refused")
        return self.inner.read_records(session_id, after_seq, view=view, strict=strict)


def texts(store: SessionStore, sid: str = "s", view: str = "") -> list[str]:
    """The view's current conversation, as the contents of its messages."""
    return [r.message["content"] for r in store.current(sid, view)]


def log(store: SessionStore, sid: str = "s") -> list[tuple[str, str]]:
    """Every record of the session: (op, content)."""
    return [(r.op, r.message.get("content", "")) for r in store.read_records(sid)]


def rebuilt(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The list as a stateless caller sends it: new dicts every call."""
    return json.loads(json.dumps(messages))


# -- which messages are new ------------------------------------------------------------------------------


def test_a_growing_list_records_only_what_is_new_and_a_repeat_records_nothing(store: SessionStore) -> None:
    recorder = Recorder(store)
    history = [system("sys"), user("q1")]
    first = recorder.record("s", history)
    assert [(r.seq, r.message["content"]) for r in first] == [(1, "q1")]
    assert recorder.record("s", history) == []
    assert recorder.holds("s", history) and recorder.holds("s", rebuilt(history))
    assert not recorder.holds("s", [user("something else")])
    history += [assistant("r1"), user("q2")]
    second = recorder.record("s", history)
    assert [(r.seq, r.op, r.message["content"]) for r in second] == [(2, ADD, "r1"), (3, ADD, "q2")]
    assert recorder.record("s", rebuilt(history)) == []
    assert recorder.record("s", [*rebuilt(history), assistant("r2")])[0].message["content"] == "r2"
    assert log(store) == [(ADD, "q1"), (ADD, "r1"), (ADD, "q2"), (ADD, "r2")]


def test_equal_messages_at_different_places_stay_separate_records(store: SessionStore) -> None:
    recorder = Recorder(store)
    history = [user("do a"), assistant("ok"), user("do b"), assistant("ok")]
    recorder.record("s", history)
    history += [user("do b"), assistant("ok")]
    recorder.record("s", rebuilt(history))
    assert texts(store) == ["do a", "ok", "do b", "ok", "do b", "ok"]


def test_one_message_object_reused_is_recorded_at_each_place(store: SessionStore) -> None:
    recorder = Recorder(store)
    again = user("continue")
    history = [system("sys"), user("start")]
    recorder.record("s", history)
    for i in range(3):
        history += [assistant(f"part {i}"), again]
        recorder.record("s", history)
        recorder.leave("s", history)
    assert texts(store) == ["start", "part 0", "continue", "part 1", "continue", "part 2", "continue"]
    assert recorder.record("s", history) == []


def test_system_prompts_and_inserted_messages_are_never_recorded(store: SessionStore) -> None:
    recorder = Recorder(store)
    summary = mark_inserted({"role": "user", "content": "summary of before"}, "summary")
    history = [system("sys"), summary, user("q1"), assistant("r1")]
    recorder.record("s", history)
    assert texts(store) == ["q1", "r1"]


def test_the_bootstrap_section_is_stored_without_the_users_words_changing(store: SessionStore) -> None:
    recorder = Recorder(store)
    section = f"{BOOTSTRAP_START}\nyou are the planner\n{BOOTSTRAP_END}\n\n"
    recorder.record("s", [{"role": "user", "content": section + "plan it"}])
    assert texts(store) == ["plan it"]
    # a new rendering of the section is not an edit of the user's words
    section2 = f"{BOOTSTRAP_START}\nyou are the planner, day 2\n{BOOTSTRAP_END}\n\n"
    assert recorder.record("s", [{"role": "user", "content": section2 + "plan it"}, assistant("done")])[0].op == ADD
    assert log(store) == [(ADD, "plan it"), (ADD, "done")]


def test_parallel_tool_results_sent_back_in_another_order_are_not_recorded_again(store: SessionStore) -> None:
    recorder = Recorder(store)
    calls = assistant(None, [tool_call("a", {}, "c1"), tool_call("b", {}, "c2")])
    history = [user("q"), calls, tool_result("c1", "A"), tool_result("c2", "B")]
    recorder.record("s", history)
    swapped = [user("q"), calls, tool_result("c2", "B"), tool_result("c1", "A"), assistant("done")]
    assert [r.message["content"] for r in recorder.record("s", rebuilt(swapped))] == ["done"]
    assert len(store.read_records("s")) == 5


def test_a_new_recorder_on_the_same_store_records_nothing_twice(store: SessionStore) -> None:
    history = [system("sys"), user("q1"), assistant("r1")]
    Recorder(store).record("s", history)
    restarted = Recorder(store)
    assert restarted.record("s", rebuilt(history)) == []
    assert [r.message["content"] for r in restarted.record("s", [*rebuilt(history), user("q2")])] == ["q2"]
    assert texts(store) == ["q1", "r1", "q2"]


def test_messages_another_writer_recorded_meanwhile_are_not_written_again(store: SessionStore) -> None:
    mine, theirs = Recorder(store), Recorder(store)
    mine.record("s", [user("q1")])
    theirs.record("s", [user("q1"), assistant("r1")])
    written = mine.record("s", [user("q1"), assistant("r1"), user("q2")])
    assert [r.message["content"] for r in written] == ["q2"]
    assert texts(store) == ["q1", "r1", "q2"]


def test_views_are_recorded_separately(store: SessionStore) -> None:
    recorder = Recorder(store)
    recorder.record("s", [user("main q")])
    recorder.record("s", [user("side q"), assistant("side r")], view="worker")
    recorder.record("s", [user("main q"), assistant("main r")])
    assert texts(store) == ["main q", "main r"]
    assert texts(store, view="worker") == ["side q", "side r"]
    assert [r.seq for r in store.read_records("s", view="")] == [1, 4]


def test_recording_in_several_views_reads_each_view_once(store: SessionStore) -> None:
    counting = Flaky(store)
    recorder = Recorder(counting)
    main, side = [user("main q")], [user("side q")]
    recorder.record("s", main)
    recorder.record("s", side, view="worker")
    reads = counting.reads
    for i in range(3):
        main.append(assistant(f"main {i}"))
        side.append(assistant(f"side {i}"))
        recorder.record("s", main)
        recorder.record("s", side, view="worker")
    assert counting.reads == reads  # only the records this recorder wrote since: nothing to read
    assert texts(store) == ["main q", "main 0", "main 1", "main 2"]


def test_a_message_that_is_not_json_is_recorded_safely_and_named(store: SessionStore) -> None:
    recorder = Recorder(store)
    with capture_logs() as logs:
        written = recorder.record("s", [user("fine"), assistant(float("nan"))])  # type: ignore[arg-type]
    assert [r.quarantined for r in written] == [None, "$.content: non-finite number nan"]
    events = [e for e in logs if e["event"] == "ctxlife.session_record_quarantined"]
    assert len(events) == 1
    assert {k: events[0][k] for k in ("log_level", "session_id", "view", "seq", "role", "problem")} == {
        "log_level": "error",
        "session_id": "s",
        "view": "",
        "seq": 2,
        "role": "assistant",
        "problem": "$.content: non-finite number nan",
    }
    assert "fix what produced it" in events[0]["hint"]
    assert texts(store) == ["fine", "NaN"]


def test_after_a_restart_a_list_missing_evicted_messages_removes_nothing(store: SessionStore) -> None:
    Recorder(store).record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2")])
    restarted = Recorder(store)
    # r1 was evicted by a compaction the new process never saw: not a removal
    written = restarted.record("s", [user("q1"), user("q2"), assistant("r2"), user("q3")])
    assert [(r.op, r.message["content"]) for r in written] == [(ADD, "q3")]
    assert texts(store) == ["q1", "r1", "q2", "r2", "q3"]


def test_what_a_compaction_evicted_is_never_removed_even_by_a_diff_against_an_older_list(
    store: SessionStore,
) -> None:
    """Issue 37: a caller's list of another shape than the one handed back (here without the system
    prompt, as LangChain's state is) agrees longest with the list from before the compaction; the
    messages the compaction evicted are still not the caller's removal."""
    recorder = Recorder(store)
    prompt = system("You are a clerk.")
    recorder.record("s", [prompt, user("q1"), assistant("r1"), user("q2"), assistant("r2"), user("q3")])
    summary = mark_inserted(system("History summary: q1 and q2 were answered."), "summary")
    recorder.leave("s", [prompt, summary, user("q1"), user("q3")])  # compacted, q1 pinned
    written = recorder.record("s", rebuilt([summary, user("q1"), user("q3"), assistant("r3")]))
    assert [(r.op, r.message.get("content")) for r in written] == [(ADD, "r3")]
    assert texts(store) == ["q1", "r1", "q2", "r2", "q3", "r3"]
    # The caller's own removal is still one.
    written = recorder.record("s", rebuilt([summary, user("q1"), assistant("r3")]))
    assert [(r.op, r.target) for r in written] == [(REMOVE, 5)]  # q3's slot
    assert texts(store) == ["q1", "r1", "q2", "r2", "r3"]


def test_after_a_restart_a_fresh_list_repeating_an_old_first_message_is_new(store: SessionStore) -> None:
    Recorder(store).record("s", [user("hi"), assistant("hello"), user("bye"), assistant("ciao")])
    restarted = Recorder(store)
    assert [r.message["content"] for r in restarted.record("s", [user("hi")])] == ["hi"]
    assert texts(store) == ["hi", "hello", "bye", "ciao", "hi"]


def test_callers_sharing_a_view_each_continue_their_own_list(store: SessionStore) -> None:
    recorder = Recorder(store)
    first = [user("task 1"), assistant("step 1")]
    second = [user("task 2")]
    recorder.record("s", first)
    recorder.record("s", second)
    written = recorder.record("s", [*first, user("more 1")])
    assert [(r.op, r.message["content"]) for r in written] == [(ADD, "more 1")]
    written = recorder.record("s", [*second, assistant("step 2")])
    assert [(r.op, r.message["content"]) for r in written] == [(ADD, "step 2")]
    # the first caller's list now holds what the second one recorded meanwhile: not written again
    joined = [*first, user("more 1"), assistant("step 2"), user("both")]
    assert [(r.op, r.message["content"]) for r in recorder.record("s", joined)] == [(ADD, "both")]
    assert texts(store) == ["task 1", "step 1", "task 2", "more 1", "step 2", "both"]


# -- edits and removals ---------------------------------------------------------------------------------


def test_an_edited_earlier_message_is_one_replace_and_a_dropped_one_a_remove(store: SessionStore) -> None:
    recorder = Recorder(store)
    history = [user("q1"), assistant("r1"), user("q2"), assistant("r2")]
    recorder.record("s", history)
    edited = rebuilt(history)
    edited[2]["content"] = "q2, better"
    written = recorder.record("s", edited)
    assert [(r.op, r.target) for r in written] == [(REPLACE, 3)]
    assert texts(store) == ["q1", "r1", "q2, better", "r2"]
    recorder.record("s", edited[:3])  # the caller dropped the last reply (a regeneration)
    assert texts(store) == ["q1", "r1", "q2, better"]
    assert log(store)[-1] == (REMOVE, "")


def test_a_list_built_on_an_older_list_is_diffed_against_the_view_as_it_is_now(store: SessionStore) -> None:
    """A list that agrees longest with an older list (results back in its order) predating an edit:
    the slots that edit replaced hold their new messages, the ones it removed are no place to write
    to (found by the session state machine: a replace of a removed slot, and later a removal that
    missed, left a message the caller dropped in the raw history)."""
    recorder = Recorder(store)
    calls = [tool_call("lookup", {"n": 1}, call_id="c1"), tool_call("lookup", {"n": 2}, call_id="c2")]
    head = [user("q1"), assistant(None, calls)]
    completion_order = [tool_result("c2", "two"), tool_result("c1", "one")]
    call_order = [tool_result("c1", "one"), tool_result("c2", "two")]
    recorder.record("s", rebuilt([*head, *completion_order, assistant("a1"), user("q2"), assistant("a2")]))
    recorder.record("s", rebuilt([*head, *call_order, assistant("a1"), user("q2"), assistant("a2"), user("q3")]))
    forked = [*head, *call_order, assistant("a1"), user("q2, edited")]  # q2 edited: what followed it goes
    recorder.record("s", rebuilt(forked))
    recorder.record("s", rebuilt([*forked, assistant("a2 again")]))
    later = [*head, *completion_order, assistant("a1"), user("q2, edited"), assistant("a2 again"), user("q4")]
    written = recorder.record("s", rebuilt(later))
    assert [(r.op, r.message.get("content")) for r in written] == [(ADD, "q4")]
    dropped = [*head, *completion_order, assistant("a1"), user("q2, edited"), user("q5")]  # "a2 again", "q4" go
    recorder.record("s", rebuilt(dropped))
    assert texts(store) == ["q1", None, "two", "one", "a1", "q2, edited", "q5"]


def test_an_edit_made_in_place_on_a_kept_list_is_a_replace(store: SessionStore) -> None:
    recorder = Recorder(store)
    history = [user("q1"), assistant("r1")]
    recorder.record("s", history)
    history[1]["content"] = "r1 (edited)"
    written = recorder.record("s", history)
    assert [(r.op, r.target, r.message["content"]) for r in written] == [(REPLACE, 2, "r1 (edited)")]


def test_explicit_replace_and_remove_by_slot(store: SessionStore) -> None:
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    replaced = recorder.replace("s", 2, assistant("r1 again"))
    assert [(r.seq, r.op, r.target) for r in replaced] == [(4, REPLACE, 2)]
    removed = recorder.remove("s", [1])
    assert [(r.seq, r.op, r.target) for r in removed] == [(5, REMOVE, 1)]
    assert texts(store) == ["r1 again", "q2"]
    with pytest.raises(StoreError, match=r"no message at sequence number\(s\) \[1\]"):
        recorder.remove("s", [1])
    # the edited list is diffed anew: the caller's list with the edit records nothing more
    assert recorder.record("s", [assistant("r1 again"), user("q2")]) == []


def test_an_edit_after_another_writer_appended_is_written_after_its_records(store: SessionStore) -> None:
    mine, theirs = Recorder(store), Recorder(store)
    mine.record("s", [user("q1"), assistant("r1")])
    theirs.record("s", [user("w1")], view="w")
    theirs.record("s", [user("q1"), assistant("r1"), user("q2")])
    replaced = mine.replace("s", 2, assistant("r1, better"))
    assert [(r.seq, r.op, r.target) for r in replaced] == [(5, REPLACE, 2)]
    assert [(r.seq, r.op, r.target) for r in mine.remove("s", [4])] == [(6, REMOVE, 4)]  # theirs, now known
    with pytest.raises(StoreError, match=r"no message at sequence number\(s\) \[3\]"):
        mine.remove("s", [3])  # w1, in the other view
    assert texts(store) == ["q1", "r1, better"]


def test_after_another_writer_appended_the_callers_edit_is_a_replace(store: SessionStore) -> None:
    mine, theirs = Recorder(store), Recorder(store)
    mine.record("s", [user("q1"), assistant("r1")])
    theirs.record("s", [user("q1"), assistant("r1"), user("q2")])
    written = mine.record("s", [user("q1"), assistant("r1, better"), user("q2"), assistant("r2")])
    assert [(r.op, r.target, r.message["content"]) for r in written] == [(REPLACE, 2, "r1, better"), (ADD, None, "r2")]
    assert texts(store) == ["q1", "r1, better", "q2", "r2"]


def test_explicit_edits_read_only_their_own_last_record_when_no_one_else_wrote(store: SessionStore) -> None:
    # One read per edit: the record this recorder wrote last, still there as written (the session was
    # not deleted and written again meanwhile); no catch-up, no read of the view.
    counting = Flaky(store)
    recorder = Recorder(counting)
    recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    reads = counting.reads
    recorder.replace("s", 2, assistant("r1 again"))
    recorder.remove("s", [3])
    assert counting.reads == reads + 2
    assert texts(store) == ["q1", "r1 again"]


# -- when the store fails ------------------------------------------------------------------------------------


def said(words: str) -> list[dict[str, Any]]:
    """Messages from words: ``r1``, ``b``, ``d`` are the assistant's, every other word the user's."""
    return [assistant(w) if w[0] == "r" or w in ("b", "d") else user(w) for w in words.split()]


# One outage scenario, many shapes: calls before the outage, calls during it (each refused with a
# StoreError), what waits after it, and the calls once the store is back. Every message the caller
# sent is recorded exactly once, in order, whatever failed.
OUTAGES = {
    "new messages wait and go first when the store is back": (
        "refused",
        [("record", "q1 r1")],
        [("record", "q1 r1 q2"), ("record", "q1 r1 q2 r2")],
        2,
        [("record", "q1 r1 q2 r2 q3")],
        "q1 r1 q2 r2 q3",
    ),
    "a and b evicted from the front while waiting": (
        "refused",
        [("record", "a")],
        [("record", "a b c")],
        2,
        [("record", "c d")],
        "a b c d",
    ),
    "b evicted from the middle while waiting": (
        "refused",
        [("record", "a")],
        [("record", "a b c")],
        2,
        [("record", "a c d")],
        "a b c d",
    ),
    "the first messages of a session wait": (
        "refused",
        [],
        [("record", "q1 r1"), ("record", "q1 r1 q2")],
        3,
        [("record", "q1 r1 q2")],
        "q1 r1 q2",
    ),
    "a write that landed but was reported failed is not written again": (
        "landed",
        [("record", "q1 r1")],
        [("record", "q1 r1 q2")],
        1,  # the recorder cannot know it landed: it waits, and is found in the store
        [("record", "q1 r1 q2 r2")],
        "q1 r1 q2 r2",
    ),
    "add retrying a refused batch records it once": (
        "refused",
        [],
        [("add", "a b c")],
        0,
        [("add", "a b c")],
        "a b c",
    ),
    "add and record while the store is down keep every message waiting": (
        "down",
        [("record", "q1")],
        [("add", "r1"), ("add", "q2"), ("record", "q1 r1 q2 r2")],
        3,
        [("record", "q1 r1 q2 r2")],
        "q1 r1 q2 r2",
    ),
}


@pytest.mark.parametrize("name", list(OUTAGES))
def test_an_outage_loses_no_message_and_records_none_twice(store: SessionStore, name: str) -> None:
    mode, before, during, waiting, after, recorded = OUTAGES[name]
    flaky = Flaky(store)
    recorder = Recorder(flaky)

    def call(op: str, words: str) -> list[Any]:
        return getattr(recorder, op)("s", said(words))  # type: ignore[no-any-return]

    for op, words in before:
        call(op, words)
    flaky.mode = mode
    for op, words in during:
        failure = "connection lost" if mode == "landed" else "No space left"  # a failed read is not the error
        with pytest.raises(StoreError, match=failure):
            call(op, words)
    assert recorder.pending("s") == waiting
    assert flaky.failures == len(during)
    flaky.mode = None
    for op, words in after:
        call(op, words)
    assert log(store) == [(ADD, t) for t in recorded.split()]
    assert recorder.pending("s") == 0
    if after[-1][0] == "record":
        assert call(*after[-1]) == []  # the same list again: nothing left to write


def test_a_refused_add_leaves_nothing_waiting(store: SessionStore) -> None:
    # A message whose write failed is never written later, after messages that came after it: the
    # caller is told (StoreError) and decides.
    flaky = Flaky(store)
    recorder = Recorder(flaky)
    recorder.add("s", [user("a")])
    flaky.mode = "refused"
    with pytest.raises(StoreError):
        recorder.add("s", [user("b"), user("c")])
    assert recorder.pending("s") == 0
    Recorder(store).add("s", [user("x")], view="w")  # another writer, in another view, meanwhile
    flaky.mode = None
    written = recorder.add("s", [user("d")])
    assert [r.message["content"] for r in written] == ["d"]
    assert texts(store) == ["a", "d"] and texts(store, view="w") == ["x"]
    with pytest.raises(StoreError, match=r"no message at sequence number\(s\) \[2\]"):
        recorder.remove("s", [2])  # theirs, in the other view


def test_add_retrying_a_refused_batch_records_it_once(store: SessionStore) -> None:
    flaky = Flaky(store)
    recorder = Recorder(flaky)
    flaky.mode = "refused"
    with pytest.raises(StoreError):
        recorder.add("s", [user("a"), user("b"), user("c")])
    flaky.mode = None
    recorder.add("s", [user("a"), user("b"), user("c")])  # the caller retries what it was told failed
    assert texts(store) == ["a", "b", "c"]


def test_add_whose_write_landed_is_recorded_once(store: SessionStore) -> None:
    flaky = Flaky(store)
    recorder = Recorder(flaky)
    recorder.add("s", [user("before")])
    flaky.mode = "landed"
    written = recorder.add("s", [user("a"), user("b"), user("c")])  # found in the store: no error
    flaky.mode = None
    assert [r.message["content"] for r in written] == ["a", "b", "c"]
    assert recorder.pending("s") == 0
    assert texts(store) == ["before", "a", "b", "c"]
    # added messages are part of the list: the caller's next list records only what follows them
    recorder.record("s", [user("before"), user("a"), user("b"), user("c")])
    written = recorder.record("s", [user("before"), user("a"), user("b"), user("c"), assistant("r")])
    assert [r.message["content"] for r in written] == ["r"]


def test_add_then_the_callers_list_continuing_it_records_nothing_twice(store: SessionStore) -> None:
    recorder = Recorder(store)
    history = [user("q1")]
    recorder.record("s", history)
    recorder.leave("s", history)
    recorder.add("s", [assistant("r1")])
    assert recorder.record("s", [user("q1"), assistant("r1"), user("q2")])[0].message["content"] == "q2"
    assert texts(store) == ["q1", "r1", "q2"]
    edited = recorder.record("s", [user("q1"), assistant("r1, edited"), user("q2")])
    assert [(r.op, r.target) for r in edited] == [(REPLACE, 2)]


def test_at_most_ten_thousand_messages_wait_and_dropping_more_is_an_error_event(store: SessionStore) -> None:
    flaky = Flaky(store)
    recorder = Recorder(flaky)
    flaky.mode = "refused"
    with capture_logs() as logs, pytest.raises(StoreError):
        recorder.record("s", [user(str(i)) for i in range(10_001)])
    assert recorder.pending("s") == 10_000
    dropped = [e for e in logs if e["event"] == "ctxlife.session_pending_dropped"]
    assert [(e["log_level"], e["session_id"], e["view"], e["dropped"]) for e in dropped] == [("error", "s", "", 1)]


def test_add_and_record_while_the_store_is_down_keep_every_message_waiting(store: SessionStore) -> None:
    flaky = Flaky(store)
    recorder = Recorder(flaky)
    recorder.record("s", [user("q1")])
    flaky.mode = "down"
    with pytest.raises(StoreError, match="No space left"):
        recorder.add("s", [assistant("r1")])
    with pytest.raises(StoreError, match="No space left"):  # the failed read is not the error
        recorder.add("s", [user("q2")])
    with pytest.raises(StoreError, match="No space left"):
        recorder.record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2")])
    assert recorder.pending("s") == 3
    flaky.mode = None
    recorder.record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2")])
    assert texts(store) == ["q1", "r1", "q2", "r2"]


def test_add_after_another_writer_appended_goes_after_its_records(store: SessionStore) -> None:
    mine, theirs = Recorder(store), Recorder(store)
    mine.add("s", [user("a")])
    theirs.add("s", [user("w")], view="w")
    theirs.add("s", [user("b")])
    written = mine.add("s", [user("c")])
    assert [(r.seq, r.message["content"]) for r in written] == [(4, "c")]
    assert mine.covered("s") == 4
    assert texts(store) == ["a", "b", "c"]
    with pytest.raises(StoreError, match=r"no message at sequence number\(s\) \[2\]"):
        mine.remove("s", [2])  # w is in the other view


def test_what_another_writer_did_in_one_view_is_read_before_writing_in_another(store: SessionStore) -> None:
    """A recorder that learns the head moved (a conflict in one view) reads the other views' new
    records before it writes there: the caller's next list then records only what is new."""
    mine, theirs = Recorder(store), Recorder(store)
    mine.record("s", [user("q1")])
    mine.record("s", [user("w1")], view="w")
    theirs.record("s", [user("q1"), assistant("r1")])
    mine.record("s", [user("w1"), assistant("w2")], view="w")  # conflict: mine learns the new head
    mine.add("s", [user("q2")])
    with pytest.raises(StoreError, match=r"no message at sequence number\(s\) \[4\]"):
        mine.remove("s", [4])  # w2 is in the other view
    mine.record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2")])
    assert texts(store) == ["q1", "r1", "q2", "r2"]
    assert texts(store, view="w") == ["w1", "w2"]


def test_an_edit_in_one_view_after_learning_of_another_writer_sees_its_records(store: SessionStore) -> None:
    mine, theirs = Recorder(store), Recorder(store)
    mine.record("s", [user("q1")])
    mine.record("s", [user("w1")], view="w")
    theirs.record("s", [user("q1"), assistant("r1")])
    mine.record("s", [user("w1"), assistant("w2")], view="w")
    with pytest.raises(StoreError, match=r"view '' has no message at sequence number\(s\) \[4\]"):
        mine.remove("s", [4])  # w2 is in the other view
    assert [(r.op, r.target) for r in mine.remove("s", [3])] == [(REMOVE, 3)]  # r1, theirs
    assert [(r.op, r.target) for r in mine.remove("s", [1])] == [(REMOVE, 1)]
    with pytest.raises(StoreError, match=r"no message at sequence number\(s\) \[1\]"):
        mine.remove("s", [1])
    with pytest.raises(StoreError, match=r"view 'w' has no message at sequence number\(s\) \[3\]"):
        mine.remove("s", [3], view="w")
    assert texts(store) == [] and texts(store, view="w") == ["w1", "w2"]


def test_a_corrupt_record_another_writer_left_is_skipped_not_fatal(tmp_path: Path) -> None:
    store = _file(tmp_path, fsync=False)
    mine, theirs = Recorder(store), Recorder(_file(tmp_path, fsync=False))
    mine.record("s", [user("q1")])
    theirs.record("s", [user("q1"), assistant("r1"), user("q2")])
    lines = _raw(tmp_path).read_text().splitlines(keepends=True)
    _raw(tmp_path).write_text(lines[0] + "garbage\n" + lines[2])
    mine.record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2")])
    assert store.read_records("s", strict=False)[-1].message["content"] == "r2"


def test_a_writer_that_always_loses_the_race_gives_up_with_an_error(store: SessionStore) -> None:
    flaky = Flaky(store)
    recorder = Recorder(flaky)
    recorder.record("s", [user("q1")])
    flaky.mode = "conflict"
    with pytest.raises(StoreError, match=r"^session 's': could not append after 64 attempts, other writers"):
        recorder.record("s", [user("q1"), user("q2")])
    with pytest.raises(StoreError, match=r"^session 's': could not append after 64 attempts; retry later"):
        recorder.add("s", [user("q3")])
    with pytest.raises(StoreError, match=r"^session 's': could not write after 64 attempts; retry later"):
        recorder.remove("s", [1])
    assert flaky.failures == 3 * 64


def test_record_in_one_view_after_learning_of_another_writer_records_only_what_is_new(store: SessionStore) -> None:
    mine, theirs = Recorder(store), Recorder(store)
    mine.record("s", [user("q1")])
    mine.record("s", [user("w1")], view="w")
    theirs.record("s", [user("q1"), assistant("r1")])
    mine.record("s", [user("w1"), assistant("w2")], view="w")
    written = mine.record("s", [user("q1"), assistant("r1 edited"), user("q2")])
    assert [(r.op, r.target, r.message["content"]) for r in written] == [(REPLACE, 3, "r1 edited"), (ADD, None, "q2")]


# -- the stores: append, reading records back, snapshots --------------------------------------------------


def test_append_numbers_records_after_the_head_and_reads_them_back(any_store: SessionStore) -> None:
    store = any_store
    assert store.head("s") == 0 and store.read_records("s") == []
    first = store.append("s", [user("a"), assistant("b")])
    assert all(r.recorded_at is not None for r in first)
    assert [(r.seq, r.view, r.fingerprint) for r in first] == [
        (1, "", fingerprint(user("a"))),
        (2, "", fingerprint(assistant("b"))),
    ]
    store.append("s", [user("c")], view="w", if_head=2)
    assert store.head("s") == 3
    back = store.read_records("s")
    assert [(r.seq, r.view, r.message, r.op) for r in back] == [
        (1, "", user("a"), ADD),
        (2, "", assistant("b"), ADD),
        (3, "w", user("c"), ADD),
    ]
    assert [r.fingerprint for r in back] == [fingerprint(m) for m in (user("a"), assistant("b"), user("c"))]
    assert all(r.recorded_at is not None for r in back)
    assert [r.seq for r in store.read_records("s", 1)] == [2, 3]
    assert [r.seq for r in store.read_records("s", 0, view="w")] == [3]
    assert store.append("s", []) == []


def test_append_with_a_stale_head_writes_nothing_and_says_the_head(any_store: SessionStore) -> None:
    store = any_store
    store.append("s", [user("a"), user("b")])
    with pytest.raises(
        AppendConflictError, match=r"session 's' moved on: its last sequence number is 2, not 1"
    ) as caught:
        store.append("s", [user("c")], if_head=1)
    assert caught.value.head == 2
    with pytest.raises(AppendConflictError):
        store.append("s", [], if_head=1)
    assert store.append("s", [], if_head=2) == []
    assert store.head("s") == 2


def test_messages_with_line_breaks_and_unicode_read_back_exactly(any_store: SessionStore) -> None:
    store = any_store
    odd = [user("line 1\nline 2\r\n}\n{"), assistant('{"not": "a record"}'), user("caf\u00e9 \U0001f600 \u2028")]
    store.append("s", odd)
    store.append("s", [user("more")])
    assert [r.message for r in store.read_records("s")] == [*odd, user("more")]
    assert [r.message for r in store.read_records("s", 3)] == [user("more")]


def test_another_handles_appends_are_read_incrementally(any_store: SessionStore) -> None:
    store = any_store
    other = open_store(store.url)
    try:
        store.append("s", [user("a")])
        assert [r.seq for r in other.read_records("s")] == [1]
        store.append("s", [user("b"), user("c")])
        assert [r.message["content"] for r in other.read_records("s", 1)] == ["b", "c"]
        assert [r.message["content"] for r in other.read_records("s", 2)] == ["c"]
        assert other.head("s") == 3
        other.append("s", [user("d")], if_head=3)
        assert [r.seq for r in store.read_records("s", 3)] == [4]
        assert store.head("s") == 4
    finally:
        other.close()


def test_snapshot_save_and_load(any_store: SessionStore) -> None:
    store = any_store
    assert store.load_snapshot("s") is None
    snap = Snapshot(session_id="s", view="w", messages=[user("a")], raw_length=3, meta={"k": 1})
    store.save_snapshot(snap)
    loaded = store.load_snapshot("s", "w")
    assert loaded is not None and loaded.to_dict() == snap.to_dict()
    assert store.load_snapshot("s") is None
    store.save_snapshot(Snapshot(session_id="s", view="w", messages=[], raw_length=4))
    again = store.load_snapshot("s", "w")
    assert again is not None and again.raw_length == 4 and again.messages == []


def test_a_restore_is_the_snapshot_plus_the_records_after_it(any_store: SessionStore) -> None:
    store = any_store
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1")])
    store.save_snapshot(Snapshot(session_id="s", messages=[user("summary")], raw_length=2))
    recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    restored = restore_view(store, "s")
    assert restored.messages == [user("summary"), user("q2")]


def test_append_validates_if_head_and_keeps_the_callers_fingerprints(any_store: SessionStore) -> None:
    store = any_store
    with pytest.raises(StoreError, match=r"if_head must be an int >= 0 or None, got -1"):
        store.append("s", [user("a")], if_head=-1)
    with pytest.raises(StoreError, match=r"append to session 's': 1 fingerprints for 2 messages"):
        store.append("s", [user("a"), user("b")], fingerprints=["f"])
    written = store.append("s", [user("a")], fingerprints=["known-fp"])
    assert [r.fingerprint for r in written] == ["known-fp"]
    assert [r.fingerprint for r in store.read_records("s")] == ["known-fp"]
    with pytest.raises(AppendConflictError, match=r"session 's' moved on: its last sequence number is 1, not 0"):
        store.append("s", [], if_head=0)


def test_edit_events_read_back_with_their_targets(any_store: SessionStore) -> None:
    store = any_store
    store.append("s", [user("a"), user("b")])
    store.append_events("s", [Event(REPLACE, user("a2"), 1), Event(REMOVE, {}, 2)], if_head=2)
    back = store.read_records("s", 2)
    assert [(r.seq, r.op, r.target, r.message.get("content")) for r in back] == [
        (3, REPLACE, 1, "a2"),
        (4, REMOVE, 2, None),
    ]
    assert [r.message["content"] for r in store.current("s")] == ["a2"]
    store.erase("s", [1])
    assert [(r.seq, r.erased) for r in store.read_records("s")][:3] == [(1, True), (2, False), (3, True)]


def test_a_quarantined_message_reads_back_with_its_reason(any_store: SessionStore) -> None:
    store = any_store
    store.append("s", [assistant(float("nan"))])  # type: ignore[arg-type]
    assert [(r.message["content"], r.quarantined) for r in store.read_records("s")] == [
        ("NaN", "$.content: non-finite number nan")
    ]


# -- the file store: fsync, corrupt lines -------------------------------------------------------------------


def _file(tmp_path: Path, **options: Any) -> FileStore:
    return FileStore(tmp_path / "sessions", **options)


def test_file_append_is_fsynced_before_it_returns_unless_turned_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = fsyncs(monkeypatch)
    store = _file(tmp_path)
    store.append("s", [user("a")])
    raw = str(tmp_path / "sessions" / "s_raw.jsonl")
    assert synced == [raw, str(tmp_path / "sessions")]  # the file, then the folder that got a new file
    store.append("s", [user("b")])
    assert synced[2:] == [raw]
    synced.clear()
    _file(tmp_path, fsync=False).append("s", [user("c")])
    assert synced == []
    assert FileStore.from_url(f"file://{tmp_path / 'sessions'}?fsync=false").fsync is False


def test_file_snapshot_is_fsynced_and_replaced_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _file(tmp_path)
    store.save_snapshot(Snapshot(session_id="s", messages=[user("old")], raw_length=1))
    synced = fsyncs(monkeypatch)
    store.save_snapshot(Snapshot(session_id="s", messages=[user("new")], raw_length=2))
    assert len(synced) == 2 and synced[1] == str(tmp_path / "sessions")
    assert [p.name for p in (tmp_path / "sessions").iterdir()] == ["s_ctx.json"]
    loaded = store.load_snapshot("s")
    assert loaded is not None and loaded.messages == [user("new")]


def _raw(tmp_path: Path) -> Path:
    return tmp_path / "sessions" / "s_raw.jsonl"


def test_file_corrupt_line_is_named_when_strict_and_skipped_when_lenient(tmp_path: Path) -> None:
    store = _file(tmp_path)
    store.append("s", [user("a"), user("b"), user("c")])
    lines = _raw(tmp_path).read_text().splitlines(keepends=True)
    lines[1] = '{"not": "a record"} {"two": "documents"}\n'
    _raw(tmp_path).write_text("".join(lines))
    fresh = _file(tmp_path)
    with pytest.raises(StoreError, match=r"s_raw\.jsonl\) is corrupt at line 2: invalid JSON"):
        fresh.read_records("s")
    with capture_logs() as logs:
        assert [r.message["content"] for r in fresh.read_records("s", strict=False)] == ["a", "c"]
    assert [
        (e["event"], e["log_level"], e["store"], e["session_id"], e["file"], e["line"], e["problem"]) for e in logs
    ] == [("raw_record_skipped", "error", "file", "s", "s_raw.jsonl", 2, "invalid JSON")]
    assert [r.message["content"] for r in fresh.read_records("s", 2, strict=False)] == ["c"]
    assert fresh.head("s") == 3
    store.append("s", [user("d")], view="w")
    assert [r.message["content"] for r in _file(tmp_path).read_records("s", 3, strict=False)] == ["d"]
    assert [r.message["content"] for r in _file(tmp_path).read_records("s", 0, view="", strict=False)] == ["a", "c"]


def test_file_line_holding_two_records_is_corruption_not_two_records(tmp_path: Path) -> None:
    store = _file(tmp_path)
    store.append("s", [user("a"), user("b"), user("c")])
    lines = _raw(tmp_path).read_text().splitlines(keepends=True)
    lines[1] = lines[1].rstrip("\n") + "," + lines[2]
    _raw(tmp_path).write_text("".join(lines))
    with pytest.raises(StoreError, match=r"corrupt at line 2: invalid JSON"):
        _file(tmp_path).read_records("s")


def test_file_batch_the_disk_cannot_hold_whole_is_cut_back_and_the_next_append_continues(tmp_path: Path) -> None:
    """A batch is all or nothing: when the write stops part way (here EFBIG from a file size limit,
    as a full disk would), the part written is cut off and the next batch follows the last whole one."""
    store = _file(tmp_path)
    store.append("s", [user("a")])
    size = _raw(tmp_path).stat().st_size
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    ignored = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, hard))
        with pytest.raises(StoreError, match="File too large"):
            store.append("s", [user("b" * 500), user("c")])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, ignored)
    assert _raw(tmp_path).stat().st_size == size
    store.append("s", [user("d")])
    assert [(r.seq, r.message["content"]) for r in _file(tmp_path).read_records("s")] == [(1, "a"), (2, "d")]


def test_file_raw_history_is_private_and_an_unwritable_one_is_named(tmp_path: Path) -> None:
    store = _file(tmp_path)
    store.append("s", [user("a")])
    assert _raw(tmp_path).stat().st_mode & 0o777 == 0o600
    planted = tmp_path / "sessions" / "t_raw.jsonl"
    planted.symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(StoreError, match=rf"^cannot append 1 message\(s\) to {planted}: Too many levels"):
        store.append("t", [user("a")])


def test_file_append_to_an_expired_session_starts_it_over(tmp_path: Path) -> None:
    store = _file(tmp_path, ttl=3600)
    store.append("s", [user("old")])
    os.utime(_raw(tmp_path), (0, 0))
    store.append("s", [user("new")])
    assert [(r.seq, r.message["content"]) for r in store.read_records("s")] == [(1, "new")]


def test_file_line_that_is_json_but_not_a_record_is_named(tmp_path: Path) -> None:
    store = _file(tmp_path)
    store.append("s", [user("a"), user("b")])
    lines = _raw(tmp_path).read_text().splitlines(keepends=True)
    lines[0] = '{"seq": 0, "view": "", "at": 1.0, "fp": "x", "msg": {}}\n'
    _raw(tmp_path).write_text("".join(lines))
    with pytest.raises(StoreError, match=r"corrupt at line 1: sequence number 0 is not an int >= 1"):
        _file(tmp_path).read_records("s")
    lines[0] = "\n"
    _raw(tmp_path).write_text("".join(lines))
    with pytest.raises(StoreError, match=r"corrupt at line 1: blank line"):
        _file(tmp_path).read_records("s")


def test_file_torn_last_line_is_skipped_with_a_warning_and_cut_by_the_next_append(tmp_path: Path) -> None:
    store = _file(tmp_path)
    store.append("s", [user("a")])
    torn = '{"seq": 2, "view": "", "at'
    with _raw(tmp_path).open("a") as f:
        f.write(torn)
    fresh = _file(tmp_path)
    with capture_logs() as logs:
        assert [r.seq for r in fresh.read_records("s")] == [1]
    assert [
        {k: e[k] for k in ("event", "log_level", "store", "session_id", "file", "reason", "bytes")} for e in logs
    ] == [
        {
            "event": "raw_torn_record_skipped",
            "log_level": "warning",
            "store": "file",
            "session_id": "s",
            "file": "s_raw.jsonl",
            "reason": "no trailing newline",
            "bytes": len(torn),
        }
    ]
    assert fresh.head("s") == 1
    with capture_logs() as logs:
        fresh.append("s", [user("b")], if_head=1)
    assert [e["event"] for e in logs] == ["raw_torn_record_repaired"]  # cut quietly, one event saying so
    assert [(r.seq, r.message["content"]) for r in _file(tmp_path).read_records("s")] == [(1, "a"), (2, "b")]


@pytest.mark.parametrize(
    ("garbage", "reason"),
    [
        ("not json\n", "invalid JSON in the last line"),
        ("[1, 2]\n", "invalid last line (not a JSON object but list)"),
        ("\n", "invalid last line (blank line)"),
    ],
)
def test_file_invalid_last_lines_are_skipped_with_a_warning_naming_the_line(
    tmp_path: Path, garbage: str, reason: str
) -> None:
    store = _file(tmp_path)
    store.append("s", [user("a"), user("b")])
    with _raw(tmp_path).open("a") as f:
        f.write(garbage)
    fresh = _file(tmp_path)
    with capture_logs() as logs:
        assert [r.message["content"] for r in fresh.read_records("s")] == ["a", "b"]
    assert [(e["event"], e["store"], e["session_id"], e["file"], e["reason"], e["line"]) for e in logs] == [
        ("raw_torn_record_skipped", "file", "s", "s_raw.jsonl", reason, 3)
    ]
    with capture_logs() as logs:
        fresh.append("s", [user("c")])
    assert [(e["event"], e["session_id"]) for e in logs] == [("raw_torn_record_repaired", "s")]  # cut quietly
    assert [(r.seq, r.message["content"]) for r in _file(tmp_path).read_records("s", 1)] == [(2, "b"), (3, "c")]


def test_file_lines_are_numbered_right_when_reading_on_from_where_the_store_was(tmp_path: Path) -> None:
    """A store reads on from the end it remembers (after its own appends and reads, another writer's
    lines, an invalid last line cut by the next append): the line a warning names is still the file's."""
    store = _file(tmp_path)

    def garbage_at(after_seq: int) -> int:
        with _raw(tmp_path).open("a") as f:
            f.write("not json\n")
        with capture_logs() as logs:
            assert store.read_records("s", after_seq) == []
        [event] = logs
        return int(event["line"])

    store.append("s", [user("a"), user("b")])
    store.append("s", [user("c")])
    assert garbage_at(3) == 4  # after the store's own appends
    store.append("s", [user("d")])  # cuts the invalid line
    other = _file(tmp_path)  # another writer
    other.append("s", [user("e"), user("f")])
    assert [r.message["content"] for r in store.read_records("s", 4)] == ["e", "f"]
    assert garbage_at(6) == 7  # after reading the other writer's lines
    other.append("s", [user("g")])  # cuts it, then an invalid line again after a valid one
    with _raw(tmp_path).open("a") as f:
        f.write("not json\n")
    with capture_logs() as logs:
        assert [r.message["content"] for r in store.read_records("s", 6)] == ["g"]
    assert [e["line"] for e in logs] == [8]
    store.append("s", [user("h")])
    assert garbage_at(8) == 9  # after reading a valid line and an invalid one


def test_file_rewritten_by_another_process_is_read_again(tmp_path: Path) -> None:
    reader, writer = _file(tmp_path), _file(tmp_path)
    writer.append("s", [user("x" * 200) for _ in range(3)])
    assert len(reader.read_records("s")) == 3
    raw = tmp_path / "sessions" / "s_raw.jsonl"
    raw.write_bytes(b"".join(raw.read_bytes().splitlines(keepends=True)[:-1]))  # another process drops it
    writer.append("s", [user("replacement")])
    assert [(r.seq, r.message["content"]) for r in reader.read_records("s", 2)] == [(3, "replacement")]


def test_file_snapshot_that_is_corrupt_names_the_file(tmp_path: Path) -> None:
    store = _file(tmp_path)
    store.save_snapshot(Snapshot(session_id="s", messages=[], raw_length=0))
    (tmp_path / "sessions" / "s_ctx.json").write_text("{not json")
    with pytest.raises(StoreError, match=r"s_ctx\.json"):
        store.load_snapshot("s")


def test_file_snapshot_of_an_expired_session_is_gone_and_an_unreadable_one_is_named(tmp_path: Path) -> None:
    store = _file(tmp_path, ttl=3600)
    store.save_snapshot(Snapshot(session_id="s", messages=[], raw_length=0))
    assert store.load_snapshot("s") is not None
    os.utime(_raw(tmp_path), (0, 0))
    assert store.load_snapshot("s") is None
    snapshot = tmp_path / "sessions" / "t_ctx.json"
    snapshot.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(StoreError, match=rf"^cannot read snapshot file {snapshot}: Too many levels of symbolic links"):
        _file(tmp_path).load_snapshot("t")


# -- the SQLite store: corrupt rows -------------------------------------------------------------------------


def test_sqlite_corrupt_row_is_named_when_strict_and_skipped_when_lenient(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    store = open_store(f"sqlite:///{path}")
    store.append("s", [user("a"), user("b"), user("c"), user("d")])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE ctxlife_raw SET json = '[1, 2]' WHERE seq = 2")
        conn.execute(f'UPDATE ctxlife_raw SET json = \'{{"ctxlife_event": "{"bogus" * 40}"}}\' WHERE seq = 3')
        conn.execute("UPDATE ctxlife_raw SET fp = NULL WHERE seq = 4")
    conn.close()
    with pytest.raises(
        StoreError, match=r"raw record seq=2 of session 's' in .*sessions\.db is corrupt: not a JSON object"
    ):
        store.read_records("s")
    with pytest.raises(StoreError, match=r"seq=3 .* is corrupt: malformed"):
        store.read_records("s", 2)
    with capture_logs() as logs:
        lenient = store.read_records("s", strict=False)
    assert [(r.seq, r.message["content"]) for r in lenient] == [(1, "a"), (4, "d")]
    assert [(e["event"], e["log_level"], e["store"], e["session_id"], e["seq"], e["problem"]) for e in logs] == [
        ("raw_record_skipped", "error", "sqlite", "s", 2, "not a JSON object"),
        ("raw_record_skipped", "error", "sqlite", "s", 3, f"malformed ctxlife_event record (op '{'bogus' * 40}"[:120]),
    ]
    assert lenient[1].fingerprint == fingerprint(user("d"))  # a row without one gets it computed
    with sqlite3.connect(path) as conn:
        conn.execute('UPDATE ctxlife_raw SET json = \'{"role": "user"\' WHERE seq = 2')
    conn.close()
    with pytest.raises(StoreError, match=r"seq=2 .* is corrupt: invalid JSON"):
        store.read_records("s")
    store.close()


def test_sqlite_rows_that_together_look_like_one_array_are_not_misread(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    store = open_store(f"sqlite:///{path}")
    store.append("s", [user("a"), user("b"), user("c")])
    with sqlite3.connect(path) as conn:
        conn.execute("""UPDATE ctxlife_raw SET json = '{"role": "user"' WHERE seq = 1""")
        conn.execute("""UPDATE ctxlife_raw SET json = '"content": "x"}' WHERE seq = 2""")
        conn.execute("""UPDATE ctxlife_raw SET json = '{"role": "user", "content": "y"},{"z": 1}' WHERE seq = 3""")
    conn.close()
    with capture_logs() as logs:
        assert store.read_records("s", strict=False) == []
    assert [(e["event"], e["store"], e["session_id"], e["seq"]) for e in logs] == [
        ("raw_record_skipped", "sqlite", "s", 1),
        ("raw_record_skipped", "sqlite", "s", 2),
        ("raw_record_skipped", "sqlite", "s", 3),
    ]
    store.close()


@pytest.mark.parametrize("store_kind", ["redis", "postgres"])
def test_server_store_corrupt_record_is_named_when_strict_and_skipped_when_lenient(
    store_of_kind: SessionStore, store_kind: str, store_url: str, request: pytest.FixtureRequest
) -> None:
    """The stores' one rule for an unreadable record (``SessionStore._corrupt``), in Redis and PostgreSQL."""
    store = store_of_kind
    store.append("s", [user("a"), user("b"), user("c")])
    if store_kind == "redis":
        client = request.getfixturevalue("redis_client")
        client.lset(store._key("s", "raw"), 1, "not json")  # type: ignore[attr-defined]
        error, problem = r"raw record 2 of session 's' \(key .*\) is corrupt: invalid JSON", "invalid JSON"
    else:
        from pg_sql import pg_sql

        pg_sql(store_url, "UPDATE {s}.ctxlife_raw SET json = '[1]' WHERE session_id = 's' AND seq = 2")
        error, problem = r"raw record seq=2 of session 's' in .* is corrupt: not a JSON object", "not a JSON object"
    with pytest.raises(StoreError, match=error):
        store.read_records("s")
    with capture_logs() as logs:
        assert [r.message["content"] for r in store.read_records("s", strict=False)] == ["a", "c"]
    assert [(e["event"], e["log_level"], e["store"], e["session_id"], e["seq"], e["problem"]) for e in logs] == [
        ("raw_record_skipped", "error", store_kind, "s", 2, problem)
    ]


def test_sqlite_text_holding_two_documents_is_one_corrupt_record(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    store = open_store(f"sqlite:///{path}")
    store.append("s", [user("a"), user("b"), user("c")])
    with sqlite3.connect(path) as conn:
        conn.execute("""UPDATE ctxlife_raw SET json = '{"role": "user", "content": "x"},{"z": 1}' WHERE seq = 2""")
        conn.execute("""UPDATE ctxlife_raw SET json = '{"ctxlife_event": "bogus"}' WHERE seq = 3""")
    conn.close()
    with capture_logs() as logs:
        assert [r.message["content"] for r in store.read_records("s", strict=False)] == ["a"]
    assert [(e["session_id"], e["seq"]) for e in logs] == [("s", 2), ("s", 3)]
    with pytest.raises(StoreError, match=r"seq=3 of session 's' in .* is corrupt: malformed"):
        store.read_records("s", 2)
    assert store.read_records("s", 2, strict=False) == []
    store.close()


def test_sqlite_expired_session_reads_as_absent(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    store = open_store(f"sqlite:///{path}?ttl=1h")
    store.append("s", [user("a")])
    store.save_snapshot(Snapshot(session_id="s", messages=[user("a")], raw_length=1))
    assert store.load_snapshot("s") is not None
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE ctxlife_sessions SET touched_at = 0")
    conn.close()
    assert store.load_snapshot("s") is None
    assert store.read_records("s") == []
    store.append("s", [user("b")])  # starts the session over, active now
    assert [(r.seq, r.message["content"]) for r in store.read_records("s")] == [(1, "b")]
    store.close()


def test_sqlite_errors_name_the_operation_and_the_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    store = open_store(f"sqlite:///{path}")
    store.save_snapshot(Snapshot(session_id="s", view="w", messages=[], raw_length=0))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE ctxlife_snapshots SET json = '{not json'")
    conn.close()
    with pytest.raises(StoreError, match=rf"^snapshot of view 'w' of session 's' in {path} is not valid JSON"):
        store.load_snapshot("s", "w")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE ctxlife_snapshots SET view = ''")
    conn.close()
    with pytest.raises(StoreError, match=rf"^snapshot of session 's' in {path} is not valid JSON"):
        store.load_snapshot("s")
    with sqlite3.connect(path) as conn:  # another program broke the database
        conn.execute("DROP TABLE ctxlife_snapshots")
        conn.execute("DROP TABLE ctxlife_raw")
    conn.close()
    with pytest.raises(StoreError, match=r"append failed: no such table"):
        store.append("s", [user("x")])
    with pytest.raises(StoreError, match=r"load_snapshot failed: no such table"):
        store.load_snapshot("s")
    with pytest.raises(StoreError, match=r"read_records failed: no such table"):
        store.read_records("s")
    with pytest.raises(StoreError, match=r"read_records failed: no such table"):
        store.read_records("s", view="w")
    store.close()


def test_sqlite_a_stored_count_that_is_not_a_count_is_ignored(tmp_path: Path) -> None:
    """A row's token count is trusted only as a whole number >= 0 with its encoding's name: any
    other value (another program's, a damaged file) reads as no count, so the message is counted
    again instead of the context being mis-sized."""
    path = tmp_path / "sessions.db"
    store = open_store(f"sqlite:///{path}")
    written = store.append("s", [user(str(i)) for i in range(7)])
    encoding = written[0].token_encoding
    assert isinstance(encoding, str) and all(r.tokens is not None for r in written)
    # valid: 7 and 0; not a count: negative, fractional, text; no encoding name, or one as bytes
    stored = [(7, encoding), (0, encoding), (-1, encoding), (2.5, encoding), ("many", encoding)]
    stored += [(7, None), (7, encoding.encode())]
    with sqlite3.connect(path) as conn:
        for seq, (tokens, name) in enumerate(stored, 1):
            conn.execute("UPDATE ctxlife_raw SET tokens = ?, token_encoding = ? WHERE seq = ?", (tokens, name, seq))
    conn.close()
    expected = [(7, encoding), (0, encoding)] + [(None, None)] * 5
    assert [(r.tokens, r.token_encoding) for r in store.read_records("s")] == expected
    store.close()


def test_a_view_never_recorded_has_nothing_waiting(store: SessionStore) -> None:
    recorder = Recorder(store)
    assert recorder.pending("s") == 0 and recorder.pending("s", view="worker") == 0


def test_an_edit_and_a_new_message_in_a_named_view_are_written_to_that_view(store: SessionStore) -> None:
    """Edits and additions written together stay in the caller's view, and the added message is
    stored without ctxlife's bootstrap section, as a plain addition is."""
    recorder = Recorder(store)
    history = [user("q1"), assistant("r1")]
    recorder.record("s", history, view="worker")
    section = f"{BOOTSTRAP_START}\nyou are the worker\n{BOOTSTRAP_END}\n\n"
    edited = [user("q1, better"), assistant("r1"), {"role": "user", "content": section + "q2"}]
    written = recorder.record("s", edited, view="worker")
    assert [(r.op, r.view) for r in written] == [(REPLACE, "worker"), (ADD, "worker")]
    assert texts(store, view="worker") == ["q1, better", "r1", "q2"]
    assert texts(store) == []


def test_add_to_a_view_already_read_covers_what_it_wrote(store: SessionStore) -> None:
    recorder = Recorder(store)
    recorder.record("s", [user("a")])
    recorder.add("s", [user("b"), user("c")])
    assert recorder.covered("s") == 3


def test_add_in_a_named_view_after_a_conflict_reads_only_that_view(store: SessionStore) -> None:
    mine, theirs = Recorder(store), Recorder(store)
    mine.record("s", [user("a")], view="v")  # the view read whole
    theirs.add("s", [user("b")], view="v")
    theirs.add("s", [user("x")])  # another view
    assert [r.seq for r in mine.add("s", [user("c")], view="v")] == [4]
    with pytest.raises(StoreError, match=r"no message at sequence number\(s\) \[3\]"):
        mine.remove("s", [3], view="v")  # x is in the other view
    assert texts(store, view="v") == ["a", "b", "c"]


@pytest.mark.parametrize("write", ["record", "add"])
def test_writing_in_a_view_read_before_others_wrote_elsewhere_reads_only_that_view(
    store: SessionStore, write: str
) -> None:
    mine, theirs = Recorder(store), Recorder(store)
    mine.record("s", [user("a")], view="v")
    theirs.add("s", [user("x")])
    mine.record("s", [user("y")])  # the session's head moved twice, in another view
    written = (
        mine.record("s", [user("a"), user("b")], view="v")
        if write == "record"
        else mine.add("s", [user("b")], view="v")
    )
    assert [r.seq for r in written] == [4]
    with pytest.raises(StoreError, match=r"no message at sequence number\(s\) \[2\]"):
        mine.remove("s", [2], view="v")
    assert texts(store, view="v") == ["a", "b"] and texts(store) == ["x", "y"]


# -- the diff against the caller's last list ------------------------------------------------------------


def test_a_tool_call_and_results_appended_after_a_system_note_are_recorded(store: SessionStore) -> None:
    recorder = Recorder(store)
    history = [user("q")]
    recorder.record("s", history)
    calls = assistant(None, [tool_call("search", {}, "c1")])
    note = mark_inserted({"role": "user", "content": "recalled: nothing"}, "recall")
    history += [calls, system("tool output follows"), tool_result("c1", "found"), note, assistant("done")]
    written = recorder.record("s", history)
    assert [(r.op, r.message["role"], r.message.get("content")) for r in written] == [
        (ADD, "assistant", None),
        (ADD, "tool", "found"),
        (ADD, "assistant", "done"),
    ]
    assert recorder.record("s", rebuilt(history)) == []


def test_a_message_put_where_the_list_held_a_system_note_is_recorded_there(store: SessionStore) -> None:
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), system("be brief"), assistant("r1")])
    written = recorder.record("s", [user("q1"), user("and be kind"), assistant("r1")])
    assert [(r.op, r.message["content"]) for r in written] == [(ADD, "and be kind")]
    assert texts(store) == ["q1", "and be kind", "r1"]


def test_a_recorded_message_the_caller_replaced_by_a_system_note_is_removed(store: SessionStore) -> None:
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("a long tool dump"), user("q2")])
    written = recorder.record("s", [user("q1"), system("(output elided)"), user("q2")])
    assert [(r.op, r.target) for r in written] == [(REMOVE, 2)]
    assert texts(store) == ["q1", "q2"]


def test_a_message_inserted_between_recorded_ones_keeps_its_place(store: SessionStore) -> None:
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2")])
    written = recorder.record("s", [user("q1"), assistant("r1"), user("aside"), user("q2"), assistant("r2")])
    assert [(r.op, r.target, r.message["content"]) for r in written] == [(ADD, 2, "aside")]
    assert texts(store) == ["q1", "r1", "aside", "q2", "r2"]


def test_a_reply_replaced_by_a_question_is_a_removal_and_an_add_not_an_edit(store: SessionStore) -> None:
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1")])
    written = recorder.record("s", [user("q1"), user("q1, again")])
    assert sorted((r.op, r.target) for r in written if r.op != ADD) == [(REMOVE, 2)]
    assert [r.message["content"] for r in written if r.op == ADD] == ["q1, again"]
    assert texts(store) == ["q1", "q1, again"]


def test_a_reply_regenerated_after_the_conversation_went_on_drops_what_followed(store: SessionStore) -> None:
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1")])
    recorder.record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2")])
    written = recorder.record("s", [user("q1"), assistant("r1, regenerated")])
    assert sorted((r.op, r.target) for r in written) == [(REMOVE, 3), (REMOVE, 4), (REPLACE, 2)]
    assert texts(store) == ["q1", "r1, regenerated"]


def test_a_callers_edit_beside_what_another_caller_recorded_writes_that_message_once(store: SessionStore) -> None:
    recorder = Recorder(store)
    recorder.record("s", [user("task A"), assistant("a1")])
    recorder.record("s", [user("task B")])  # another caller sharing the view
    written = recorder.record("s", [user("task A"), assistant("a1, better"), user("task B"), assistant("a2")])
    assert [(r.op, r.target, r.message["content"]) for r in written] == [
        (REPLACE, 2, "a1, better"),
        (ADD, None, "a2"),
    ]
    assert texts(store) == ["task A", "a1, better", "task B", "a2"]


def _two_callers(recorder: Recorder, theirs: list[dict[str, Any]]) -> None:
    """Caller A records its task; caller B, sharing the view, records its own list meanwhile."""
    recorder.record("s", [user("task A")])
    recorder.record("s", [theirs[0]])
    if len(theirs) > 1:
        recorder.record("s", theirs)


def test_a_callers_list_holding_some_of_another_callers_messages_writes_only_its_own(store: SessionStore) -> None:
    recorder = Recorder(store)
    _two_callers(recorder, [user("task B"), assistant("b1"), assistant("b2")])
    written = recorder.record("s", [user("task A"), assistant("b1"), user("mine")])
    assert [r.message["content"] for r in written] == ["mine"]
    # the message B wrote is known at its place: an edit of it is a replace of that record
    edited = recorder.record("s", [user("task A"), assistant("b1, edited"), user("mine")])
    assert [(r.op, r.target) for r in edited] == [(REPLACE, 3)]
    assert texts(store) == ["task A", "task B", "b1, edited", "b2", "mine"]


def test_a_callers_list_holding_all_of_another_callers_messages_writes_only_its_own(store: SessionStore) -> None:
    recorder = Recorder(store)
    _two_callers(recorder, [user("task B"), assistant("b1"), assistant("b2")])
    joined = [user("task A"), user("task B"), assistant("b1"), assistant("b2"), user("mine")]
    assert [r.message["content"] for r in recorder.record("s", joined)] == ["mine"]
    assert texts(store) == ["task A", "task B", "b1", "b2", "mine"]


def test_a_caller_repeating_another_callers_message_records_the_repeat(store: SessionStore) -> None:
    recorder = Recorder(store)
    _two_callers(recorder, [user("go")])
    written = recorder.record("s", [user("task A"), user("go"), user("go")])
    assert [(r.seq, r.message["content"]) for r in written] == [(3, "go")]
    assert texts(store) == ["task A", "go", "go"]


def test_parallel_results_of_another_callers_calls_out_of_order_and_a_new_one(store: SessionStore) -> None:
    recorder = Recorder(store)
    calls = assistant(None, [tool_call("a", {}, "c1"), tool_call("b", {}, "c2"), tool_call("c", {}, "c3")])
    _two_callers(recorder, [user("task B"), calls, tool_result("c1", "A"), tool_result("c2", "B")])
    mine = [user("task A"), calls, tool_result("c2", "B"), tool_result("c1", "A"), tool_result("c3", "C")]
    written = recorder.record("s", rebuilt(mine))
    assert [(r.message["role"], r.message["content"]) for r in written] == [("tool", "C")]
    assert len(store.read_records("s")) == 6


def test_the_list_just_recorded_covers_its_newest_record(store: SessionStore) -> None:
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1")])
    assert recorder.covered("s") == 2


def test_a_message_added_together_with_an_edit_can_be_edited_next(store: SessionStore) -> None:
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1")])
    written = recorder.record("s", [user("q1, better"), assistant("r1"), user("q2")])
    assert [(r.seq, r.op, r.target) for r in written] == [(3, REPLACE, 1), (4, ADD, None)]
    edited = recorder.record("s", [user("q1, better"), assistant("r1"), user("q2, better")])
    assert [(r.op, r.target) for r in edited] == [(REPLACE, 4)]
    assert texts(store) == ["q1, better", "r1", "q2, better"]


def test_a_list_the_host_found_continuing_the_last_one_records_only_what_is_new(store: SessionStore) -> None:
    recorder = Recorder(store)
    history = [system("sys"), user("q1")]
    recorder.record("s", history)
    recorder.leave("s", history)
    after = [system("sys, renewed"), *history[1:], assistant("r1")]
    recorder.expect("s", after, Agreement(len(history), (0,), history))
    assert [r.message["content"] for r in recorder.record("s", after)] == ["r1"]
    assert texts(store) == ["q1", "r1"]


def test_lists_built_from_scratch_are_new_and_what_is_handed_back_is_their_continuation(store: SessionStore) -> None:
    recorder = Recorder(store)
    recorder.record("s", [user("hi"), assistant("hello")])
    recorder.new_lists("s")  # a new run builds its lists from scratch: the same opening is a new turn
    run = [user("hi"), assistant("hello"), user("q"), assistant("r")]
    assert [r.message["content"] for r in recorder.record("s", run)] == ["hi", "hello", "q", "r"]
    # the list handed back (compacted) is what the caller continues: nothing evicted is removed
    summary = mark_inserted({"role": "user", "content": "summary: greeted, asked q"}, "summary")
    recorder.leave("s", [run[0], summary, run[3]])
    written = recorder.record("s", [run[0], summary, run[3], user("bye")])
    assert [(r.op, r.message["content"]) for r in written] == [(ADD, "bye")]
    assert texts(store) == ["hi", "hello", "hi", "hello", "q", "r", "bye"]


# -- messages waiting for the store, held by the caller's list ------------------------------------------


def test_waiting_messages_the_list_holds_only_in_part_are_each_written_once(store: SessionStore) -> None:
    flaky = Flaky(store)
    recorder = Recorder(flaky)
    recorder.record("s", [user("a")])
    flaky.mode = "refused"
    with pytest.raises(StoreError):
        recorder.record("s", [user("a"), assistant("b"), user("c")])
    flaky.mode = None
    recorder.record("s", [user("a"), assistant("b"), user("x")])  # c regenerated as x
    assert texts(store) == ["a", "b", "c", "x"]


def test_while_the_store_refuses_the_list_covers_only_stored_records(store: SessionStore) -> None:
    """A snapshot of the list (raw_length = covered) must not claim waiting messages are stored,
    nor leave out a stored one (a restore would then show it twice)."""
    flaky = Flaky(store)
    recorder = Recorder(flaky)
    recorder.record("s", [user("a")])
    flaky.mode = "refused"
    history = [user("a"), assistant("b"), user("c"), assistant("d")]
    with pytest.raises(StoreError):
        recorder.record("s", history)
    for kept in (history, history[:2]):  # the list holds the newest waiting message, or only the first
        with pytest.raises(StoreError):
            recorder.record("s", [*kept, user("more")])
        assert recorder.covered("s") == 1


def test_waiting_messages_after_a_message_the_list_changed_are_written_once(store: SessionStore) -> None:
    flaky = Flaky(store)
    recorder = Recorder(flaky)
    recorder.record("s", [user("a")])
    flaky.mode = "refused"
    with pytest.raises(StoreError):
        recorder.record("s", [user("a"), assistant("b")])
    flaky.mode = None
    recorder.record("s", [user("a, reworded"), assistant("b"), user("c")])
    assert texts(store).count("b") == 1 and texts(store)[-2:] == ["b", "c"]


def test_waiting_messages_after_a_message_the_list_changed_do_not_drop_that_message(store: SessionStore) -> None:
    flaky = Flaky(store)
    recorder = Recorder(flaky)
    recorder.record("s", [user("a")])
    flaky.mode = "refused"
    with pytest.raises(StoreError):
        recorder.record("s", [user("a"), assistant("b")])
    flaky.mode = None
    recorder.record("s", [user("a, reworded"), assistant("b"), user("c")])
    assert "a, reworded" in texts(store)


def test_a_message_passed_again_keeps_its_slot_when_an_equal_one_was_recorded_later(store: SessionStore) -> None:
    recorder = Recorder(store)
    task, ok, more, ok_again = user("task"), assistant("ok"), user("more"), assistant("ok")
    recorder.record("s", [task, ok, more, ok_again])
    # the caller reworded its task and dropped the rest: its "ok" is the first one, not the equal later one
    assert recorder.slots_of("s", [user("task, reworded"), ok]) == [None, 2]


def test_slots_stay_right_after_messages_are_inserted_in_the_middle_twice(store: SessionStore) -> None:
    recorder = Recorder(store)
    q1, r1, x, y, q2, r2 = user("q1"), assistant("r1"), user("x"), user("y"), user("q2"), assistant("r2")
    recorder.record("s", [q1, r1, q2, r2])
    recorder.record("s", [q1, r1, x, q2, r2])
    recorder.record("s", [q1, r1, x, y, q2, r2])
    assert texts(store) == ["q1", "r1", "x", "y", "q2", "r2"]
    assert recorder.slots_of("s", [user("q1, reworded"), r1, x, y, q2, r2]) == [None, 2, 5, 6, 3, 4]


def test_slots_stay_right_after_reading_another_writers_inserts_twice(store: SessionStore) -> None:
    mine, theirs = Recorder(store), Recorder(store)
    q1, r1, x, y, q2, r2 = user("q1"), assistant("r1"), user("x"), user("y"), user("q2"), assistant("r2")
    mine.record("s", [q1, r1, q2, r2])
    theirs.record("s", [q1, r1, x, q2, r2])
    assert mine.record("s", [q1, r1, x, q2, r2]) == []  # x is theirs: read, not written again
    assert mine.slots_of("s", [q1, r1, x]) == [1, 2, 5]
    theirs.record("s", [q1, r1, x, y, q2, r2])
    assert mine.record("s", [q1, r1, x, y, q2, r2]) == []
    # a repeat of the first question after y is a new message, not the record before y
    assert mine.slots_of("s", [q1, r1, x, y, user("q1")]) == [1, 2, 5, 6, None]
    assert texts(store) == ["q1", "r1", "x", "y", "q2", "r2"]


def test_a_message_passed_again_after_an_add_keeps_its_slot(store: SessionStore) -> None:
    recorder = Recorder(store)
    task, ok = user("task"), assistant("ok")
    recorder.record("s", [task, ok])
    recorder.add("s", [user("more"), assistant("ok")])
    assert recorder.slots_of("s", [user("task, reworded"), ok]) == [None, 2]


def test_a_caller_continuing_its_list_while_another_callers_messages_wait_writes_only_its_new_one(
    store: SessionStore,
) -> None:
    flaky = Flaky(store)
    recorder = Recorder(flaky)
    recorder.record("s", [user("task A")])
    recorder.record("s", [user("task B")])  # another caller sharing the view
    flaky.mode = "refused"
    with pytest.raises(StoreError):
        recorder.record("s", [user("task B"), assistant("b1")])
    flaky.mode = None
    recorder.record("s", [user("task A"), assistant("a1")])
    assert texts(store) == ["task A", "task B", "b1", "a1"]


def test_a_waiting_message_another_view_holds_too_is_still_written_in_its_own(store: SessionStore) -> None:
    flaky = Flaky(store)
    recorder = Recorder(flaky)
    recorder.record("s", [user("a")])
    flaky.mode = "refused"
    with pytest.raises(StoreError):
        recorder.record("s", [user("a"), assistant("b")])
    Recorder(store).record("s", [assistant("b")], view="w")  # another writer, in another view
    flaky.mode = None
    recorder.record("s", [user("a"), user("c")])  # b evicted from the list meanwhile
    assert texts(store) == ["a", "b", "c"] and texts(store, view="w") == ["b"]


def test_add_retrying_a_refused_batch_another_view_holds_too_still_writes_it(store: SessionStore) -> None:
    flaky = Flaky(store)
    recorder = Recorder(flaky)
    recorder.add("s", [user("a")])
    flaky.mode = "refused"
    with pytest.raises(StoreError):
        recorder.add("s", [assistant("b")])
    Recorder(store).add("s", [assistant("b")], view="w")  # another writer, in another view
    flaky.mode = None
    recorder.add("s", [assistant("b")])
    assert texts(store) == ["a", "b"] and texts(store, view="w") == ["b"]


def test_lists_built_from_scratch_stay_new_after_a_list_with_only_a_system_prompt(store: SessionStore) -> None:
    recorder = Recorder(store)
    recorder.record("s", [user("hi"), assistant("hello")])
    recorder.new_lists("s")
    assert recorder.record("s", [system("sys")]) == []
    assert [r.message["content"] for r in recorder.record("s", [system("sys"), user("hi"), assistant("hello")])] == [
        "hi",
        "hello",
    ]
