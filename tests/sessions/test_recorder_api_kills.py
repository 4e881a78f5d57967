"""What the recorder writes after a session went back, was written again, or a failed write landed.

Written for the survivors of `make mutate MUTATE_SCOPE=recorder-api` (docs/mutation/recorder-api.md, issue 44):
each test drives a real recorder over a real file store (another process's writes made through a second
store object on the same directory) and asserts what the store holds, what the recorder reports, or the
event it emits.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from ctxlife.errors import StoreError
from ctxlife.sessions import SessionStore
from ctxlife.sessions.file import FileStore
from ctxlife.sessions.keeper import Keeper
from ctxlife.sessions.recording import Recorder, recorder_for
from ctxlife.sessions.records import ADD, REPLACE, RawRecord
from ctxlife.testing import assistant, system, user
from delegating_store import DelegatingStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileStore]:
    s = FileStore(tmp_path / "sessions", fsync=False)
    yield s
    s.close()


def texts(store: SessionStore, sid: str = "s", view: str = "") -> list[Any]:
    """The view's current conversation, as the contents of its messages."""
    return [r.message.get("content") for r in store.current(sid, view)]


def ops(records: list[RawRecord]) -> list[tuple[str, Any]]:
    return [(r.op, r.message.get("content")) for r in records]


def events_named(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == name]


class Failing(DelegatingStore):
    """A real store whose next ``append`` fails: ``"refused"`` (nothing written), ``"landed"`` (written, then
    reported failed: a connection lost after the write), ``"others"`` (another writer's messages written
    instead, then refused); ``before`` runs just before it (another process's write). Once, then it is well."""

    def __init__(self, inner: SessionStore) -> None:
        super().__init__(inner)
        self.mode: str | None = None
        self.before: Any = None
        self.after: Any = None
        self.reads_fail = 0  # how many reads fail from the failed append on (the store unreachable a moment)

    def append(self, session_id: str, messages: list[dict[str, Any]], **kwargs: Any) -> list[RawRecord]:
        mode, self.mode = self.mode, None
        if mode is None:
            return self.inner.append(session_id, messages, **kwargs)
        if self.before is not None:
            self.before()
            kwargs["if_head"] = self.inner.head(session_id)  # (the other write is not the failure tested)
        if mode == "landed":
            self.inner.append(session_id, messages, **kwargs)
            if self.after is not None:
                self.after()
        elif mode == "others":
            self.inner.append(session_id, [user(f"other {i}") for i in range(len(messages))])
        raise StoreError(f"{self.url}: append: connection lost ({mode})")

    def read_records(self, session_id: str, after_seq: int = 0, **kwargs: Any) -> list[RawRecord]:
        if self.reads_fail:
            self.reads_fail -= 1
            raise StoreError(f"{self.url}: read_records: connection refused")
        return self.inner.read_records(session_id, after_seq, **kwargs)

    def mark_key(self, create: bool = False) -> bytes | None:
        return self.inner.mark_key(create)

    def erased(self, session_id: str) -> Any:
        return self.inner.erased(session_id)


# -- the store went back (a Redis restarted without persistence): _after_conflict -------------------------------


def test_a_session_that_went_back_to_fewer_records_gets_the_callers_conversation_and_a_warning(
    store: FileStore, tmp_path: Path
) -> None:
    """The recorder wrote four messages to view "main"; then the session lost them and holds two others (a
    store restarted without its data, modelled by another process deleting and writing it again). The
    caller's next list is written whole after them, and a warning names the session, view and head. What the
    recorder knows of another session (a reply removed from it) is kept."""
    recorder = Recorder(store)
    recorder.record("t", [user("t1"), assistant("t2")])
    recorder.remove("t", [2])  # another session's removal, which only this recorder knows
    recorder.record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2")], view="main")
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.delete("s")
        other.append("s", [user("x1"), assistant("x2")], view="main")
    assert store.head("s") == 2 < recorder.head("s") == 4  # the precondition: the head went back
    with capture_logs() as logs:
        written = recorder.record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2"), user("q3")], "main")
    assert ops(written) == [(ADD, "q1"), (ADD, "r1"), (ADD, "q2"), (ADD, "r2"), (ADD, "q3")]
    assert texts(store, view="main") == ["x1", "x2", "q1", "r1", "q2", "r2", "q3"]
    back = events_named(logs, "ctxlife.session_head_went_back")
    assert [(e["log_level"], e["session_id"], e["view"], e["head"]) for e in back] == [("warning", "s", "main", 2)]
    assert events_named(logs, "ctxlife.session_started_again") == []  # the conflict told it, not a re-read
    recorder.record("t", [user("t1"), assistant("t2"), user("t3")])  # the other session is left as it was
    assert texts(store, "t") == ["t1", "t3"]


# -- written again (another process deleted the session): _started_again, _read_anew ---------------------------


def _written_again(store: FileStore, tmp_path: Path, first: list[Any], again: list[Any], view: str = "") -> Recorder:
    recorder = Recorder(store)
    recorder.record("s", first, view=view)
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.delete("s")
        other.append("s", again, view=view)
    return recorder


def test_a_session_written_again_is_read_anew_once_and_the_event_names_the_view(
    store: FileStore, tmp_path: Path
) -> None:
    """Another process deleted the session and wrote it again as long as before, in the same view: a removal
    by number of a message the new session does not hold is refused, after one re-read of the session (one
    event, naming the session and the view), and writes nothing."""
    recorder = _written_again(store, tmp_path, [user("q1"), assistant("r1")], [user("x1"), assistant("x2")], "main")
    assert store.head("s") == recorder.head("s") == 2  # the precondition: only the records changed
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.append("s", [user("y1")], view="helper")
    with capture_logs() as logs, pytest.raises(StoreError, match=r"has no message at sequence number\(s\) \[3\]"):
        recorder.remove("s", [3], view="main")
    again = events_named(logs, "ctxlife.session_started_again")
    assert [(e["log_level"], e["session_id"], e["view"]) for e in again] == [("info", "s", "main")]
    assert texts(store, view="main") == ["x1", "x2"] and texts(store, view="helper") == ["y1"]


def test_messages_waiting_when_the_session_was_written_again_shorter_are_written_after_its_records(
    store: FileStore, tmp_path: Path
) -> None:
    """The store refused a write (the question waits); meanwhile another process deleted the session and
    wrote one message. The caller's next list, compacted to the reply and a new question, is written after
    that message with the waiting question first, with no warning that the head went back (the recorder read
    the new session, its head with it)."""
    failing = Failing(store)
    recorder = Recorder(failing)
    recorder.record("s", [user("q1"), assistant("r1")])
    failing.mode = "refused"
    with pytest.raises(StoreError):
        recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    assert recorder.pending("s") == 1  # the precondition: q2 waits
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.delete("s")
        other.append("s", [user("x1")])
    with capture_logs() as logs:
        recorder.record("s", [assistant("r2"), user("q3")])
    assert texts(store) == ["x1", "q2", "r2", "q3"]
    assert recorder.pending("s") == 0
    assert len(events_named(logs, "ctxlife.session_started_again")) == 1
    assert events_named(logs, "ctxlife.session_head_went_back") == []


def test_a_write_that_landed_in_a_session_written_again_is_not_written_twice(store: FileStore, tmp_path: Path) -> None:
    """Another process deleted the session and wrote three messages; then the recorder's write of the caller's
    new question landed there but was reported failed (it waits). The caller's next list is the session as
    now stored: nothing is written and nothing waits (the question is found in the session read anew); the
    same plus a reply writes only the reply."""
    failing = Failing(store)
    recorder = Recorder(failing)
    recorder.record("s", [user("q1"), assistant("r1")])

    def rewrite() -> None:
        with FileStore(tmp_path / "sessions", fsync=False) as other:
            other.delete("s")
            other.append("s", [user("x1"), assistant("x2"), user("x3")])

    failing.mode, failing.before = "landed", rewrite
    with pytest.raises(StoreError):
        recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    failing.before = None
    assert texts(store) == ["x1", "x2", "x3", "q2"] and recorder.pending("s") == 1  # the precondition
    assert recorder.record("s", [user("x1"), assistant("x2"), user("x3"), user("q2")]) == []
    assert recorder.pending("s") == 0
    written = recorder.record("s", [user("x1"), assistant("x2"), user("x3"), user("q2"), assistant("r2")])
    assert ops(written) == [(ADD, "r2")]
    assert texts(store) == ["x1", "x2", "x3", "q2", "r2"] and recorder.pending("s") == 0


def test_after_a_session_was_written_again_another_views_list_is_written_to_it_whole(
    store: FileStore, tmp_path: Path
) -> None:
    """The recorder wrote views "" and "helper"; another process deleted the session and wrote it again,
    longer, in view "" only. The recorder meets the new session through view "" (its write conflicts, it
    reads the session anew); the helper's caller then sends its same list: all of it is written to the new
    session's helper view (what the recorder knew of the old one is gone with it)."""
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1")])
    recorder.record("s", [user("h1"), assistant("h2")], view="helper")
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.delete("s")
        other.append("s", [user("x1"), assistant("x2"), user("x3"), assistant("x4"), user("x5")])
    with capture_logs() as logs:
        recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    assert len(events_named(logs, "ctxlife.session_started_again")) == 1  # the precondition: read anew,
    assert texts(store, view="helper") == []  # and the new session has no helper messages
    recorder.record("s", [user("h1"), assistant("h2")], view="helper")
    assert texts(store, view="helper") == ["h1", "h2"]


def test_after_a_session_was_written_again_an_edit_of_its_message_is_a_replace(
    store: FileStore, tmp_path: Path
) -> None:
    """Another process deleted the session and wrote it again, longer; the caller (having read the new
    session) sends its conversation with the second message corrected and a question. The recorder's write
    conflicts, it reads the session anew and diffs the list against the conversation as stored: the
    correction replaces that message, the question is added, nothing else is written."""
    recorder = _written_again(store, tmp_path, [user("q1"), assistant("r1")], [user("x1"), assistant("x2"), user("x3")])
    assert store.head("s") == 3 > recorder.head("s") == 2  # the precondition: the recorder's write will conflict
    with capture_logs() as logs:
        written = recorder.record("s", [user("x1"), assistant("x2, corrected"), user("x3"), user("q9")])
    assert len(events_named(logs, "ctxlife.session_started_again")) == 1
    assert ops(written) == [(REPLACE, "x2, corrected"), (ADD, "q9")]
    assert texts(store) == ["x1", "x2, corrected", "x3", "q9"]


# -- an explicit append (Recorder.add) whose write failed: _landed ---------------------------------------------


def test_an_add_refused_after_the_same_message_was_added_before_is_an_error_not_found_landed(
    store: FileStore,
) -> None:
    """The caller added "ok" once; its second add of "ok" is refused (nothing written). The recorder looks
    for it after the head its write was made at, not among older records: the add raises, the store holds
    one "ok", and the caller's retry writes the second."""
    failing = Failing(store)
    recorder = Recorder(failing)
    recorder.add("s", [user("ok")])
    failing.mode = "refused"
    with pytest.raises(StoreError, match="connection lost"):
        recorder.add("s", [user("ok")])
    assert texts(store) == ["ok"]
    assert ops(recorder.add("s", [user("ok")])) == [(ADD, "ok")]
    assert texts(store) == ["ok", "ok"]


def test_an_add_refused_while_another_writer_appended_is_an_error_not_found_landed(store: FileStore) -> None:
    """The caller's add is refused, and another writer appended a message at that moment: the recorder's
    look finds a message after its head that is not the caller's: the add raises, nothing of the caller's is
    written, and the retry writes it after the other writer's."""
    failing = Failing(store)
    recorder = Recorder(failing)
    recorder.add("s", [user("before")])
    failing.mode = "others"
    with pytest.raises(StoreError, match="connection lost"):
        recorder.add("s", [user("mine")])
    assert texts(store) == ["before", "other 0"]  # the precondition: another message after the head
    assert ops(recorder.add("s", [user("mine")])) == [(ADD, "mine")]
    assert texts(store) == ["before", "other 0", "mine"]


def test_an_add_that_landed_before_another_views_append_is_found_once_and_the_other_view_left_alone(
    store: FileStore, tmp_path: Path
) -> None:
    """The caller's add landed but was reported failed, and another process appended to view "helper" right
    after it. The add returns the landed record (not an error: nothing to retry), the view holds it once,
    the recorder reports it as the newest record the view's list holds, and a removal by the helper
    message's number in this view is refused (that message is not this view's)."""
    failing = Failing(store)
    recorder = Recorder(failing)
    recorder.record("s", [user("before")])  # (the view read: a state the add keeps up to date)

    def helper_appends() -> None:
        with FileStore(tmp_path / "sessions", fsync=False) as other:
            other.append("s", [user("helper's")], view="helper")

    failing.mode, failing.after = "landed", helper_appends
    written = recorder.add("s", [user("mine")])
    assert [(r.seq, r.message["content"]) for r in written] == [(2, "mine")]
    assert texts(store) == ["before", "mine"] and texts(store, view="helper") == ["helper's"]
    assert recorder.covered("s") == 2
    with pytest.raises(StoreError, match=r"no message at sequence number\(s\) \[3\]"):
        recorder.remove("s", [3])
    assert texts(store, view="helper") == ["helper's"]


def test_an_add_that_landed_before_another_writers_insert_is_found_once(store: FileStore, tmp_path: Path) -> None:
    """The caller's add landed but was reported failed, and another writer then inserted a note after the
    view's first message (an add placed among older records). The add returns the landed record, and the
    view holds the caller's message once."""
    failing = Failing(store)
    recorder = Recorder(failing)
    recorder.add("s", [user("first"), assistant("second")])

    def insert_note() -> None:
        theirs = Recorder(FileStore(tmp_path / "sessions", fsync=False))
        inserted = theirs.record("s", [user("first"), user("(a note)"), assistant("second"), user("mine")])
        assert [(r.op, r.target) for r in inserted] == [(ADD, 1)]  # the precondition: an insert
        theirs.store.close()

    failing.mode, failing.after = "landed", insert_note
    written = recorder.add("s", [user("mine")])
    assert [(r.seq, r.message["content"]) for r in written] == [(3, "mine")]
    assert texts(store) == ["first", "(a note)", "second", "mine"]


# -- what a restore asks the recorder: align, holds -------------------------------------------------------------


def _two_views(store: SessionStore) -> None:
    """Views "" and "helper" of session "s", their records interleaved: q1 h1 r1 h2 q2."""
    recorder = Recorder(store)
    recorder.record("s", [user("q1")])
    recorder.record("s", [user("h1")], view="helper")
    recorder.record("s", [user("q1"), assistant("r1")])
    recorder.record("s", [user("h1"), assistant("h2")], view="helper")
    recorder.record("s", [user("q1"), assistant("r1"), user("q2")])


def test_a_list_is_aligned_with_its_own_views_messages_the_default_view_without_naming_it(store: FileStore) -> None:
    """A new process aligns the helper's list (its two messages and a question) with view "helper": it meets
    that view's end (anchor h2, seq 4, two messages agree, the question new), not the session's other view;
    the default view's list, aligned without naming a view, meets view ""'s end."""
    _two_views(store)
    found = Recorder(store).align("s", [user("h1"), assistant("h2"), user("h3")], "helper")
    assert (found.aligned, found.anchor_seq, found.overlap, found.new) == (True, 4, 2, [2])
    found = Recorder(store).align("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2")])
    assert (found.aligned, found.anchor_seq, found.overlap, found.new) == (True, 5, 3, [3])


def _conversation(turns: int) -> list[dict[str, Any]]:
    return [m for i in range(turns) for m in (user(f"q{i}"), assistant(f"r{i}"))]


def test_a_compacted_views_alignment_through_evicted_messages_is_the_whole_reads(store: FileStore) -> None:
    """A new process told a compacted view's kept point (its messages 2-4 evicted; another view's message sits
    among them in the session) aligns the caller's window, which holds the evicted messages, plus a question:
    the alignment walks past the kept point (the view's older records are read then, not the other view's)
    and is the one a process reading the whole view finds: 19 messages agree, the question is new."""
    history = _conversation(10)
    recorder = Recorder(store)
    recorder.record("s", history[:4])
    recorder.record("s", [user("z")], view="helper")
    recorder.record("s", history)
    assert [r.seq for r in store.read_records("s", view="helper")] == [5]  # the precondition: among them
    restarted = Recorder(store)
    restarted.kept_from("s", "", [history[0], *history[4:]], [1, *range(6, 22)])
    restarted.seed("s", [history[0]], [1])
    window = [*history[1:], user("q10")]
    found = restarted.align("s", window, "")
    whole = Recorder(store).align("s", window, "")
    assert (found.aligned, found.anchor_seq, found.overlap, found.new) == (True, 21, 19, [19])
    assert found == whole


def test_a_new_process_holds_an_edited_form_of_the_views_conversation_and_not_another(store: FileStore) -> None:
    """A new process (nothing seeded) asks whether a list is the view's conversation: the stored one with
    its reply edited is (an edit, which a restore must leave alone), an unrelated one is not, and another
    view's conversation is not this view's."""
    _two_views(store)
    assert Recorder(store).holds("s", [user("q1"), assistant("r1, edited"), user("q2")])
    assert not Recorder(store).holds("s", [user("something else")])
    recorder = Recorder(store)  # (one process asking about both views)
    assert recorder.holds("s", [user("q1"), assistant("r1, edited"), user("q2")])
    assert recorder.holds("s", [user("h1"), assistant("h2, edited")], "helper")
    assert not recorder.holds("s", [user("h1"), assistant("h2, edited")])


# -- what was removed, across forgetting an idle session: _erased_kept_in_store ---------------------------------


class SecretUnreadable(DelegatingStore):
    """A real store whose secret cannot be read now (a permission, a network error): ``mark_key`` raises."""

    def mark_key(self, create: bool = False) -> bytes | None:
        raise StoreError(f"{self.url}: mark key: permission denied")


def test_a_removed_message_is_not_recorded_again_after_an_idle_forget_when_the_stores_secret_is_unreadable(
    store: FileStore,
) -> None:
    """The caller's reply is removed by number; the host then drops the idle session (keeping what waits) while
    the store's secret cannot be read, so the store cannot say what was removed: the recorder keeps it, and
    the caller's list still holding the reply does not record it again."""
    unreadable = SecretUnreadable(store)
    recorder = Recorder(unreadable)
    recorder.record("s", [user("q1"), assistant("card 4111"), user("q2")])
    recorder.remove("s", [2])
    recorder.forget("s", keep_pending=True)
    assert not recorder.known("s")  # the precondition: the session's state is gone, read again next
    recorder.record("s", [user("q1"), assistant("card 4111"), user("q2"), assistant("r2")])
    assert texts(store) == ["q1", "q2", "r2"]


def test_after_a_session_was_written_again_a_view_primed_by_a_restore_gets_its_callers_list_whole(
    store: FileStore, tmp_path: Path
) -> None:
    """A new process's recorder is primed with view "helper" by a restore (its plain adds' slots and
    fingerprints) and records a question in view "". Another process deletes the session and writes it again, longer, in
    view "" only; the recorder meets it through view "" and reads it anew. The helper's caller then sends the
    list the restore gave: all of it is written to the new session's helper view (the primed slots were the
    old session's)."""
    Recorder(store).record("s", [user("h1"), assistant("h2")], view="helper")
    Recorder(store).record("s", [user("q1"), assistant("r1")])
    recorder = Recorder(store)
    helper = store.read_records("s", view="helper")
    recorder.prime_adds("s", "helper", [r.seq for r in helper], [r.fingerprint for r in helper])
    recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.delete("s")
        other.append("s", [user(f"x{i}") for i in range(6)])
    with capture_logs() as logs:
        recorder.record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2")])
    assert len(events_named(logs, "ctxlife.session_started_again")) == 1  # the precondition: read anew
    recorder.record("s", [user("h1"), assistant("h2")], view="helper")
    assert texts(store, view="helper") == ["h1", "h2"]


# -- removed or erased messages a caller's list still holds: _not_again, erased_among ---------------------------


def test_a_removed_reply_the_list_still_holds_is_not_recorded_again_and_a_warning_says_how_many(
    store: FileStore,
) -> None:
    """The caller's reply is removed by number from view "main"; its next list still holds it, and two new
    messages: only those are written, one warning names the session, the view and the one message left out
    and says what to do, and the list's messages map to their records (the removed reply to none), so the
    list plus a question then records only the question."""
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1"), user("q2")], "main")
    recorder.remove("s", [2], "main")
    listed = [user("q1"), assistant("r1"), user("q2"), assistant("r2"), user("q3")]
    with capture_logs() as logs:
        written = recorder.record("s", listed, "main")
    assert [(r.seq, *ops([r])[0]) for r in written] == [(5, ADD, "r2"), (6, ADD, "q3")]
    assert texts(store, view="main") == ["q1", "q2", "r2", "q3"]
    left_out = events_named(logs, "ctxlife.removed_message_not_recorded")
    assert [(e["log_level"], e["session_id"], e["view"], e["messages"]) for e in left_out] == [
        ("warning", "s", "main", 1)
    ]
    assert left_out[0]["hint"] == "the list still holds messages removed or erased from the session: drop them from it"
    assert recorder.slots_of("s", listed, "main") == [1, None, 3, 5, 6]
    assert ops(recorder.record("s", [*listed, assistant("r3")], "main")) == [(ADD, "r3")]


def test_a_message_another_process_erased_is_not_recorded_again_by_a_new_process(
    store: FileStore, tmp_path: Path
) -> None:
    """Another process erased the caller's reply (the store keeps what was erased, keyed by its secret); a
    new process's recorder gets the caller's list still holding it, and a question: only the question is
    written; the call record's check names the reply's index as erased, not the question's nor the system
    prompt's."""
    Recorder(store).record("s", [user("q1"), assistant("card 4111"), user("q2")])
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        assert Keeper(other).erase("s", [2]) == [2]
    recorder = Recorder(store)
    written = recorder.record("s", [user("q1"), assistant("card 4111"), user("q2"), assistant("r2")])
    assert ops(written) == [(ADD, "r2")]
    assert texts(store) == ["q1", "q2", "r2"]
    listed = [system("sys"), user("q1"), assistant("card 4111"), user("q3")]
    assert Recorder(store).erased_among("s", listed, [None, 1, None, None]) == [2]
    assert Recorder(store).erased_among("s", listed, [None, 1, None, None, None, None]) == [2]


def test_the_removed_messages_of_a_call_record_are_the_ones_without_a_slot(store: FileStore) -> None:
    """A call record asks which messages of a list must not be written again: a removed reply without a
    slot is one; the same reply with its slot, a new message, a system prompt and a list of another session
    are not."""
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    recorder.record("t", [user("q1"), assistant("r1")])
    recorder.remove("s", [2])
    listed = [system("r1"), user("q1"), assistant("r1"), user("new")]
    assert recorder.erased_among("s", listed, [None, 1, None, None]) == [2]
    assert recorder.erased_among("s", listed, [None, 1, 2, None]) == []
    assert recorder.erased_among("t", listed, [None, 1, None, None]) == []
    assert recorder.erased_among("s", listed[:3], [None, 1, None, None]) == [2]


# -- another writer's removals and replacements: _note_removed ----------------------------------------------------


def test_a_reply_another_writer_removed_is_not_recorded_again_from_this_callers_list(
    store: FileStore, tmp_path: Path
) -> None:
    """Another process removes the caller's reply by number; this process's caller still holds it and adds a
    question: the reply is not written back (the recorder learns the removal when its write meets the other
    process's record), the question is, and a warning says one message was left out."""
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        Recorder(other).remove("s", [2])
    with capture_logs() as logs:
        recorder.record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2")])
    assert texts(store) == ["q1", "q2", "r2"]
    assert [e["messages"] for e in events_named(logs, "ctxlife.removed_message_not_recorded")] == [1]


def test_a_message_another_writer_replaced_may_be_sent_again_as_a_new_message(store: FileStore, tmp_path: Path) -> None:
    """Another process corrects the caller's first question; this process's caller sends the corrected
    conversation and then asks the first question's old text again, as a new message: it is written (a
    replaced message is not a removed one), with no warning."""
    recorder = Recorder(store)
    recorder.record("s", [user("go"), assistant("ok"), user("q2")])
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        Recorder(other).replace("s", 1, user("go, edited"))
    with capture_logs() as logs:
        recorder.record("s", [user("go, edited"), assistant("ok"), user("q2"), assistant("r2"), user("go")])
    assert texts(store) == ["go, edited", "ok", "q2", "r2", "go"]
    assert events_named(logs, "ctxlife.removed_message_not_recorded") == []


# -- covered: the newest record the view's last list holds (a snapshot's raw_length): _seen ------------------------


def test_covered_follows_a_list_that_holds_another_writers_reply_and_survives_a_list_with_nothing_recorded(
    store: FileStore, tmp_path: Path
) -> None:
    """The caller's list holds the reply another process appended (nothing to write): the view's list covers
    that reply's record; a list holding only a system prompt then records nothing and leaves it so."""
    recorder = Recorder(store)
    recorder.record("s", [user("q1")])
    assert recorder.covered("s") == 1
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.append("s", [assistant("r1")])
    recorder.record("s", [user("q1")], view="helper")  # learns the head moved
    assert recorder.record("s", [user("q1"), assistant("r1")]) == []  # the precondition: nothing written
    assert recorder.covered("s") == 2
    assert recorder.record("s", [system("sys")]) == []
    assert recorder.covered("s") == 2


def test_an_add_that_landed_while_the_store_could_not_be_read_is_found_on_the_retry_not_written_twice(
    store: FileStore, tmp_path: Path
) -> None:
    """The caller's add landed but was reported failed, and the store could not be read right after (so
    the recorder could not look): the add raises the write's error. Another process then writes in another
    view, and the caller retries the same messages: the recorder looks first (in its view), finds them, and
    returns their records without writing them again."""
    failing = Failing(store)
    recorder = Recorder(failing)
    recorder.add("s", [user("before")])
    failing.mode, failing.reads_fail = "landed", 1
    with pytest.raises(StoreError, match="connection lost"):
        recorder.add("s", [user("a"), user("b")])
    assert texts(store) == ["before", "a", "b"] and failing.reads_fail == 0  # the precondition: landed, unread
    with FileStore(tmp_path / "sessions", fsync=False) as other:  # meanwhile another process writes elsewhere
        other.append("s", [user("helper's")], view="helper")
    written = recorder.add("s", [user("a"), user("b")])
    assert [(r.seq, r.message["content"]) for r in written] == [(2, "a"), (3, "b")]
    assert texts(store) == ["before", "a", "b"]
    assert recorder.covered("s") == 3
    assert ops(recorder.add("s", [user("c")])) == [(ADD, "c")]  # the look is made once: the next add writes
    assert texts(store) == ["before", "a", "b", "c"] and texts(store, view="helper") == ["helper's"]


def test_an_add_of_other_messages_after_an_unread_failure_writes_them(store: FileStore) -> None:
    """As above, but the caller then adds other messages (it gave up on the first): they are written, the
    first ones stay as the store holds them."""
    failing = Failing(store)
    recorder = Recorder(failing)
    recorder.add("s", [user("before")])
    failing.mode, failing.reads_fail = "refused", 1
    with pytest.raises(StoreError, match="connection lost"):
        recorder.add("s", [user("a")])
    assert ops(recorder.add("s", [user("b")])) == [(ADD, "b")]
    assert ops(recorder.add("s", [user("a")])) == [(ADD, "a")]
    assert texts(store) == ["before", "b", "a"]


# -- the same session or one written again: _same_session, _reborn ------------------------------------------------


def test_a_session_whose_last_record_another_process_erased_is_still_the_same_session(
    store: FileStore, tmp_path: Path
) -> None:
    """Another process erases the last message this recorder wrote (its text rewritten in place); the
    recorder's next edit finds the session is the one it wrote (not deleted and written again): the edit is
    made with no re-read of the session, and the erased message is not written back."""
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1"), user("card 4111")])
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        assert Keeper(other).erase("s", [3]) == [3]
    with capture_logs() as logs:
        recorder.replace("s", 2, assistant("r1, edited"))
    assert events_named(logs, "ctxlife.session_started_again") == []
    assert texts(store) == ["q1", "r1, edited"]
    recorder.record("s", [user("q1"), assistant("r1, edited"), user("card 4111"), user("q2")])
    assert texts(store) == ["q1", "r1, edited", "q2"]


def test_a_session_written_again_as_long_with_the_same_last_message_is_told_by_its_time(
    store: FileStore, tmp_path: Path
) -> None:
    """Another process deleted the session and wrote it again as long, ending with the same message as this
    recorder's last (same text, same place, a later time): an edit by number then reads the session anew
    (one event) and edits the new session's message."""
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("ok")])
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.delete("s")
        other.append("s", [user("x1"), assistant("ok")])
    with capture_logs() as logs:
        recorder.replace("s", 1, user("x1, edited"))
    assert len(events_named(logs, "ctxlife.session_started_again")) == 1
    assert texts(store) == ["x1, edited", "ok"]


def test_messages_waiting_when_an_explicit_append_finds_the_session_went_back_still_wait_and_are_written_next(
    store: FileStore, tmp_path: Path
) -> None:
    """The store refused the caller's question (it waits); then the session lost its records and holds two
    others. An explicit append meets the lower head (a warning), is written after them, and the question
    still waits: the caller's next list, new to the session, is written after it with the question once."""
    failing = Failing(store)
    recorder = Recorder(failing)
    recorder.record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2")])
    failing.mode = "refused"
    with pytest.raises(StoreError):
        recorder.record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2"), user("q3")])
    assert recorder.pending("s") == 1  # the precondition: q3 waits
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.delete("s")
        other.append("s", [user("x1"), assistant("x2")])
    with capture_logs() as logs:
        assert ops(recorder.add("s", [assistant("a note")])) == [(ADD, "a note")]
    assert [e["head"] for e in events_named(logs, "ctxlife.session_head_went_back")] == [2]
    assert recorder.pending("s") == 1
    recorder.record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2"), user("q3")])
    assert texts(store) == ["x1", "x2", "a note", "q1", "r1", "q2", "r2", "q3"]  # (the session is new to it)
    assert recorder.pending("s") == 0


# -- what the recorder knows: known, head, covered, recorder_for, note, slots_of ----------------------------------


def test_what_the_recorder_knows_of_a_view_and_a_session(store: FileStore, tmp_path: Path) -> None:
    """A view is known once recorded or primed by a restore, not before nor after it is forgotten; the
    session's head is read once (another process's append is seen on the next write, not by head()); covered
    is the default view's newest record without naming it; one recorder per store object."""
    Recorder(store).record("s", [user("q1"), assistant("r1")], view="helper")
    recorder = Recorder(store)
    assert not recorder.known("s") and not recorder.known("s", "helper")
    recorder.prime_adds("s", "helper", [1, 2], [r.fingerprint for r in store.read_records("s")])
    assert recorder.known("s", "helper") and not recorder.known("s")
    assert recorder.head("s") == 2
    recorder.record("s", [user("d1")])
    assert recorder.known("s") and recorder.head("s") == 3 and recorder.covered("s") == 3
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.append("s", [user("d2")])
    assert recorder.head("s") == 3
    recorder.forget("s")
    assert not recorder.known("s") and not recorder.known("s", "helper")
    assert recorder.head("s") == 4 and recorder.covered("s") == 4 and recorder.covered("s", "helper") == 2
    assert recorder_for(store) is recorder_for(store) and recorder_for(store) is not recorder
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        assert recorder_for(other) is not recorder_for(store)


def test_a_noted_list_maps_to_its_slots_and_what_follows_it_by_content(store: FileStore) -> None:
    """A restored conversation noted with its slots (as a Session's own read does): the very list maps to
    them, an edited copy of it and the list with a new message appended map by content (the new message to
    none, the edited one to none), and the noted list plus a question records only the question."""
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1")])
    restored = [system("sys"), user("q1"), assistant("r1")]
    copied = [dict(m) for m in restored]
    recorder.note("s", restored, [None, 1, 2], copied=copied)
    assert recorder.slots_of("s", restored) == [None, 1, 2]
    assert recorder.slots_of("s", [*restored, user("q2")]) == [None, 1, 2, None]
    assert recorder.slots_of("s", [system("sys"), user("q1"), assistant("r1, edited")]) == [None, 1, None]
    assert ops(recorder.record("s", [*restored, user("q2")])) == [(ADD, "q2")]


def test_an_add_after_the_recorder_learned_another_writer_appended_to_the_view_keeps_that_message(
    store: FileStore, tmp_path: Path
) -> None:
    """Another process appends a reply to the view; this process learns the session moved on from a write in
    another view, then adds a note explicitly: the note goes after the other process's reply, and the caller's
    next list (its question, that reply, the note, a new question) records only the new question."""
    recorder = Recorder(store)
    recorder.record("s", [user("q1")])
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.append("s", [assistant("r1")])
    recorder.record("s", [user("h1")], view="helper")  # meets the other process's write: the head moved
    assert [(r.seq, r.message["content"]) for r in recorder.add("s", [user("a note")])] == [(4, "a note")]
    written = recorder.record("s", [user("q1"), assistant("r1"), user("a note"), user("q2")])
    assert ops(written) == [(ADD, "q2")]
    assert texts(store) == ["q1", "r1", "a note", "q2"]


def test_an_edit_is_written_when_the_store_cannot_be_read_to_check_it_is_the_same_session(store: FileStore) -> None:
    """The caller corrects a reply while the store's records cannot be read (only the check that the session
    is still the one the recorder wrote needs them; writes work): the correction is written, as a replace."""
    failing = Failing(store)
    recorder = Recorder(failing)
    recorder.record("s", [user("q1"), assistant("r1")])
    failing.reads_fail = 1000  # (every read fails while the caller sends its list)
    written = recorder.record("s", [user("q1"), assistant("r1, corrected")])
    assert failing.reads_fail < 1000  # the precondition: the check's read failed
    failing.reads_fail = 0
    assert ops(written) == [(REPLACE, "r1, corrected")]
    assert texts(store) == ["q1", "r1, corrected"]


def test_an_add_that_meets_another_writers_append_is_written_after_it_and_nothing_waits(
    store: FileStore, tmp_path: Path
) -> None:
    """Another process appended to the view unknown to this recorder: its explicit add conflicts, reads what
    the other wrote and is written after it; nothing waits for the store."""
    recorder = Recorder(store)
    recorder.record("s", [user("q1")])
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.append("s", [assistant("r1")])
    assert [(r.seq, r.message["content"]) for r in recorder.add("s", [user("a note")])] == [(3, "a note")]
    assert recorder.pending("s") == 0
    assert texts(store) == ["q1", "r1", "a note"]


def test_a_removal_after_the_session_was_written_again_shorter_is_refused_naming_the_missing_number(
    store: FileStore, tmp_path: Path
) -> None:
    """Another process deleted the session and wrote one message (fewer than this recorder wrote): a removal
    by the number of this recorder's last message reads the session anew (one event) and is refused, naming
    that number; nothing is written."""
    recorder = Recorder(store)
    recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.delete("s")
        other.append("s", [user("x1")])
    with capture_logs() as logs, pytest.raises(StoreError, match=r"no message at sequence number\(s\) \[3\]"):
        recorder.remove("s", [3])
    assert len(events_named(logs, "ctxlife.session_started_again")) == 1
    assert texts(store) == ["x1"]


def test_a_new_processs_recorder_covers_the_views_last_record_and_nothing_for_an_empty_view(store: FileStore) -> None:
    """A new process's recorder reads a view: covered (a snapshot's raw_length) is the view's last record, and
    0 for a view with no record yet, before any list is recorded."""
    Recorder(store).record("s", [user("q1"), assistant("r1")])
    Recorder(store).record("s", [user("h1")], view="helper")
    assert Recorder(store).covered("s") == 2
    assert Recorder(store).covered("s", "helper") == 3
    assert Recorder(store).covered("s", "empty") == 0
    assert Recorder(store).covered("new") == 0


# -- what a restore hands the recorder: prime_adds; what was erased: _erased_of ------------------------------------


def test_a_view_primed_by_a_restore_records_only_the_callers_new_message(store: FileStore, tmp_path: Path) -> None:
    """A new process's recorder is primed with the view's plain adds (their slots and fingerprints, as a
    restore reads them), while another view holds a newer record: the caller's list plus a question records
    only the question, after that record."""
    Recorder(store).record("s", [user("q1"), assistant("r1")])
    Recorder(store).record("s", [user("h1")], view="helper")
    recorder = Recorder(store)
    records = store.read_records("s", view="")
    recorder.prime_adds("s", "", [r.seq for r in records], [r.fingerprint for r in records])
    written = recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    assert [(r.seq, r.message["content"]) for r in written] == [(4, "q2")]
    assert texts(store) == ["q1", "r1", "q2"]


def test_a_new_session_primed_empty_records_its_first_list_with_no_warning(store: FileStore) -> None:
    """A restore of a session with no record primes the recorder with nothing: the caller's first list is
    written from the session's first record, with no warning that the head went back."""
    recorder = Recorder(store)
    recorder.prime_adds("new", "", [], [])
    with capture_logs() as logs:
        written = recorder.record("new", [user("q1")])
    assert [(r.seq, r.message["content"]) for r in written] == [(1, "q1")]
    assert events_named(logs, "ctxlife.session_head_went_back") == []


def test_a_sessions_only_message_erased_by_another_process_is_not_recorded_again(
    store: FileStore, tmp_path: Path
) -> None:
    """Another process erased the only message of a session; a new process's recorder gets the caller's list
    still holding it, and a question: only the question is written."""
    Recorder(store).record("s", [user("card 4111")])
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        assert Keeper(other).erase("s", [1]) == [1]
    written = Recorder(store).record("s", [user("card 4111"), user("q2")])
    assert ops(written) == [(ADD, "q2")]
    assert texts(store) == ["q2"]


# -- a corrupt line in the middle of a session (strict reads raise, the recorder's are lenient) --------------------


def _corrupt_line(root: Path, session_id: str, seq: int) -> None:
    """Overwrite the file store's line of record ``seq`` with an unreadable one (not the last line: a
    corrupt middle record, which lenient reads skip with an error event and strict reads refuse)."""
    path = root / f"{session_id}_raw.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if b'"seq":%d,' % seq in line or b'"seq": %d,' % seq in line)
    lines[at] = b'{"broken\n'
    path.write_bytes(b"".join(lines))


def test_an_add_that_landed_is_found_past_a_corrupt_record_of_another_view(store: FileStore, tmp_path: Path) -> None:
    """The caller's add landed but was reported failed; another process then wrote two messages in another
    view, the first of which is now an unreadable line. The recorder's look (lenient) finds the add: it
    returns its record, not an error, and the view holds it once."""
    failing = Failing(store)
    recorder = Recorder(failing)
    recorder.record("s", [user("before")])

    def others_then_corruption() -> None:
        with FileStore(tmp_path / "sessions", fsync=False) as other:
            other.append("s", [user("x"), user("y")], view="helper")
        _corrupt_line(tmp_path / "sessions", "s", 3)

    failing.mode, failing.after = "landed", others_then_corruption
    with capture_logs():
        written = recorder.add("s", [user("mine")])
    assert [(r.seq, r.message["content"]) for r in written] == [(2, "mine")]
    with pytest.raises(StoreError):  # the precondition: a strict read refuses the session
        store.read_records("s")
    assert [r.message["content"] for r in store.read_records("s", view="", strict=False)] == ["before", "mine"]


def test_after_a_restart_an_edit_is_a_replace_though_an_older_record_is_unreadable(
    store: FileStore, tmp_path: Path
) -> None:
    """A session's second record is now an unreadable line. A new process's recorder gets the caller's list,
    the conversation as a lenient read gives it with its last question corrected: the correction replaces
    that question (the list is diffed against the stored conversation), nothing is added."""
    Recorder(store).record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2")])
    _corrupt_line(tmp_path / "sessions", "s", 2)
    with pytest.raises(StoreError):  # the precondition: a strict read refuses the session
        store.read_records("s")
    with capture_logs():
        written = Recorder(store).record("s", [user("q1"), user("q2, corrected"), assistant("r2")])
    assert [(r.op, r.target, r.message.get("content")) for r in written] == [(REPLACE, 3, "q2, corrected")]


def test_an_unchecked_add_is_looked_for_on_its_retry_after_a_restore_primed_the_view(store: FileStore) -> None:
    """The caller's add landed but was reported failed while the store could not be read (the recorder
    could not look); a restore then primes the view (its plain adds, the landed one among them). The caller
    retries the same message: it is found, not written again."""
    failing = Failing(store)
    recorder = Recorder(failing)
    recorder.add("s", [user("before")])
    failing.mode, failing.reads_fail = "landed", 1
    with pytest.raises(StoreError, match="connection lost"):
        recorder.add("s", [user("a")])
    records = store.read_records("s")
    recorder.prime_adds("s", "", [r.seq for r in records], [r.fingerprint for r in records])
    assert [(r.seq, r.message["content"]) for r in recorder.add("s", [user("a")])] == [(2, "a")]
    assert texts(store) == ["before", "a"]
