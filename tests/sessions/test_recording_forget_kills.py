"""What the raw history holds after a session is deleted, erased or dropped while idle, and after a restore.

Written for the recorder's survivors of the core's run after 0f5c4c8 (docs/mutation/core-recording.md, issue 44:
`forget`, `prime`, `_state` and the made state of a view): each test drives a real keeper or recorder over a real
file or SQLite store (a store that fails or keeps no secret is a real one behind tests/delegating_store.py) and
asserts what a user relies on: what the store holds after the next call, what a restore returns, that another
session is left as it was. The last two: a message another process removed is not recorded again from a caller's list
that still holds it, after a restart too; one the caller dropped and says again (a regenerated reply) is recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.errors import StoreError
from ctxlife.sessions import SessionStore, open_store
from ctxlife.sessions.keeper import Keeper
from delegating_store import DelegatingStore


def U(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def A(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


@pytest.fixture(params=["file", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "file":
        return f"file://{tmp_path / 'sessions'}?fsync=false"
    return f"sqlite:///{tmp_path / 's.db'}"


@pytest.fixture
def store(url: str) -> Iterator[SessionStore]:
    opened = open_store(url)
    yield opened
    opened.close()


def texts(store: SessionStore, sid: str = "s", view: str = "") -> list[str]:
    """The view's current conversation, as the contents of its messages."""
    return [str(r.message.get("content")) for r in store.current(sid, view)]


class Failing(DelegatingStore):
    """A real store whose appends fail while ``down`` (a full disk); its reads are the real store's (the SQLite
    store's one read of a plain view's columns included)."""

    def __init__(self, inner: SessionStore) -> None:
        super().__init__(inner)
        self.down = False

    def append(self, session_id: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        if self.down:
            raise StoreError(f"{self.url}: append: No space left on device")
        return self.inner.append(session_id, messages, **kwargs)

    def read_view(self, session_id: str, view: str = "", *, messages_only: bool = False) -> Any:
        return self.inner.read_view(session_id, view, messages_only=messages_only)


class Keyless(DelegatingStore):
    """A third party's store keeping no secret: what was erased is known to the erasing process only."""

    def _rewrite_records(self, session_id: str, values: dict[int, dict[str, Any]]) -> int:
        return self.inner._rewrite_records(session_id, values)

    def delete(self, session_id: str) -> bool:
        return self.inner.delete(session_id)


def _waiting(store: SessionStore, sid: str = "s") -> tuple[Failing, Keeper]:
    """A keeper whose store went down while it recorded q2 and r2 of ``sid``: those two wait for the store."""
    failing = Failing(store)
    keeper = Keeper(failing)
    keeper.record_list(sid, [U("q1"), A("r1")])
    failing.down = True
    with pytest.raises(StoreError):
        keeper.record_list(sid, [U("q1"), A("r1"), U("q2"), A("r2")])
    assert keeper.recorder.pending(sid) == 2  # the precondition: two messages wait for the store
    failing.down = False
    return failing, keeper


# -- a session deleted ------------------------------------------------------------------------------------------


def test_messages_waiting_when_the_session_is_deleted_are_not_written_into_the_next_conversation(
    store: SessionStore,
) -> None:
    """The store refused q2 and r2; the user then deletes the session (as Session.delete does: the store's
    delete, then the keeper forgets it) and starts over: the new conversation holds none of the old one."""
    _, keeper = _waiting(store)
    store.delete("s")
    keeper.forget("s")
    assert keeper.recorder.pending("s") == 0
    keeper.record_list("s", [U("new task")])
    assert texts(store) == ["new task"]


def test_a_deleted_session_started_again_with_its_first_message_records_the_whole_new_conversation(
    store: SessionStore,
) -> None:
    """This process restored the session (the recorder took the records the restore read, or their slots and
    fingerprints), then deleted it. A new conversation beginning with the same task is new as a whole: its task
    message is recorded too, not taken for the deleted one."""
    keeper = Keeper(store)
    keeper.append("s", [U("task"), A("old reply")])
    Keeper(store).append("t", [U("other")])
    restorer = Keeper(store)
    assert restorer.restore("s").messages == [U("task"), A("old reply")]
    assert restorer.recorder.known("s")  # the precondition: primed with the records read, not read again
    store.delete("s")
    restorer.forget("s")
    restorer.record_list("s", [U("task"), A("new reply")])
    assert texts(store) == ["task", "new reply"]
    assert texts(store, "t") == ["other"]


def test_after_a_delete_a_message_erased_before_it_may_be_recorded_again(url: str) -> None:
    """A message erased from a session is never recorded again from a list that still holds it, until the
    session is deleted: the next conversation may say the same thing (on a store that keeps a secret, and on
    one that keeps none, where only the erasing process knew)."""
    for keyless in (False, True):
        with open_store(url) as inner:
            store: SessionStore = Keyless(inner) if keyless else inner
            sid = f"s{keyless}"
            keeper = Keeper(store)
            keeper.record_list(sid, [U("q1"), A("code 1234"), U("q2")])
            assert keeper.erase(sid, [2]) == [2]
            keeper.record_list(sid, [U("q1"), A("code 1234"), U("q2"), A("r2")])
            assert texts(inner, sid) == ["q1", "q2", "r2"]  # the precondition: not recorded again
            inner.delete(sid)
            keeper.forget(sid)
            keeper.record_list(sid, [U("what was it?"), A("code 1234")])
            assert texts(inner, sid) == ["what was it?", "code 1234"]


# -- another session left as it was -----------------------------------------------------------------------------


def test_an_erase_in_one_session_on_a_store_without_a_secret_is_remembered_past_another_sessions_delete(
    store: SessionStore,
) -> None:
    keyless = Keyless(store)
    keeper = Keeper(keyless)
    keeper.record_list("s", [U("q1"), A("card 4111-1111"), U("q2")])
    keeper.record_list("t", [U("w1")])
    assert keyless.mark_key(create=True) is None  # the precondition: the store keeps no secret
    assert keeper.erase("s", [2]) == [2]
    store.delete("t")
    keeper.forget("t")
    keeper.drop_idle("u")
    keeper.record_list("s", [U("q1"), A("card 4111-1111"), U("q2"), A("r2")])
    assert "4111" not in str([r.message for r in store.read_records("s", strict=False)])
    assert texts(store) == ["q1", "q2", "r2"]


def test_an_erase_on_a_store_without_a_secret_is_remembered_when_the_session_is_dropped_idle(
    store: SessionStore,
) -> None:
    """A host drops an idle session from memory (keeping what waits for the store): a store keeping no secret
    cannot say what was erased, so this process keeps remembering it."""
    keyless = Keyless(store)
    keeper = Keeper(keyless)
    keeper.record_list("s", [U("q1"), A("card 4111-1111"), U("q2")])
    assert keeper.erase("s", [2]) == [2]
    keeper.drop_idle("s")
    keeper.record_list("s", [U("q1"), A("card 4111-1111"), U("q2"), A("r2")])
    assert texts(store) == ["q1", "q2", "r2"]


def test_deleting_one_session_keeps_what_waits_for_the_store_in_another(store: SessionStore) -> None:
    _, keeper = _waiting(store, "t")
    keeper.record_list("s", [U("x1")])
    store.delete("s")
    keeper.forget("s")
    assert keeper.recorder.pending("t") == 2
    keeper.record_list("t", [U("q1"), A("r1"), U("q2"), A("r2"), U("q3")])
    assert texts(store, "t") == ["q1", "r1", "q2", "r2", "q3"]


def test_another_sessions_delete_and_rewrite_is_found_after_this_process_deleted_one(url: str) -> None:
    """This process records session t, and deletes session s. Another process deletes t and writes a longer
    conversation in another view of it: this process's next list of t is new to the session, written whole."""
    with open_store(url) as store, open_store(url) as other:
        keeper = Keeper(store)
        keeper.record_list("t", [U("q1"), A("r1")])
        keeper.record_list("s", [U("x")])
        store.delete("s")
        keeper.forget("s")
        other.delete("t")
        other.append("t", [U("y1"), A("y2"), U("y3")], view="helper")
        with capture_logs() as events:
            keeper.record_list("t", [U("q1"), A("r1"), U("q2")])
        assert texts(store, "t") == ["q1", "r1", "q2"]
        assert texts(store, "t", "helper") == ["y1", "y2", "y3"]
        assert [e["session_id"] for e in events if e["event"] == "ctxlife.session_started_again"] == ["t"]


def test_a_session_this_process_deleted_and_recorded_again_is_not_reported_as_started_again(
    store: SessionStore,
) -> None:
    keeper = Keeper(store)
    keeper.record_list("s", [U("q1"), A("r1"), U("q2")])
    store.delete("s")
    keeper.forget("s")
    with capture_logs() as events:
        keeper.record_list("s", [U("new")])
        keeper.record_list("s", [U("new"), A("reply")])
    assert texts(store) == ["new", "reply"]
    assert [e for e in events if e["event"] == "ctxlife.session_started_again"] == []


def test_a_dropped_idle_session_with_messages_waiting_finds_another_processs_delete_and_rewrite(url: str) -> None:
    """The store refused q2 and r2; the host drops the idle session (the waiting messages stay). Another process
    deletes the session and writes a longer one in another view; the store comes back: the caller's next list
    is new to the session, written whole."""
    with open_store(url) as store, open_store(url) as other:
        _, keeper = _waiting(store)
        keeper.drop_idle("s")
        other.delete("s")
        other.append("s", [U("y1"), A("y2"), U("y3")], view="helper")
        keeper.record_list("s", [U("q1"), A("r1"), U("q2"), A("r2"), U("q3")])
        assert texts(store) == ["q1", "r1", "q2", "r2", "q3"]
        assert texts(store, "s", "helper") == ["y1", "y2", "y3"]


def test_a_snapshot_saved_after_a_restored_session_was_deleted_and_written_again_is_the_one_restored(
    url: str,
) -> None:
    """A new process restores a session, deletes it; another process writes a new conversation into it; this
    process then saves a summary of it as the view's snapshot (a strategy's own save, no list recorded
    first). The snapshot covers the new conversation's records: a restore returns the summary and what was
    appended after it, not the whole raw history."""
    with open_store(url) as first:
        Keeper(first).append("s", [U("task"), A("a1"), U("q2"), A("a2"), U("q3"), A("a3")])
    with open_store(url) as store, open_store(url) as other:
        keeper = Keeper(store)
        assert len(keeper.restore("s").messages) == 6
        store.delete("s")
        keeper.forget("s")
        other.append("s", [U("x1"), A("x2")])
        saved = keeper.save_snapshot("s", "", [U("summary of x1, x2")], slots=[None])
        assert saved is not None and saved.raw_length == 2
        other.append("s", [U("x3")])
    with open_store(url) as fresh:
        assert [m["content"] for m in Keeper(fresh).restore("s").messages] == ["summary of x1, x2", "x3"]


# -- a restored view ----------------------------------------------------------------------------------------------


def _restarted(
    url: str, messages: list[dict[str, Any]], *, edited: bool = False, failing: bool = False
) -> tuple[SessionStore, Keeper]:
    """A session written by one process (its second message replaced when ``edited``: not plain adds), then
    restored by a new one (through a store that can be made to fail, when ``failing``): the recorder takes
    what the restore read. Returns the new process's store and keeper."""
    with open_store(url) as first:
        records = Keeper(first).append("s", messages)
        if edited:
            first.append_events("s", [_replace(records[1].slot, A("a1, corrected"))])
    store = open_store(url)
    keeper = Keeper(Failing(store) if failing else store)
    restored = keeper.restore("s")
    assert restored.messages[0] == messages[0] and keeper.recorder.known("s")  # primed, not read again
    return store, keeper


def _replace(slot: int, message: dict[str, Any]) -> Any:
    from ctxlife.sessions.records import REPLACE, Event

    return Event(REPLACE, message, slot)


@pytest.mark.parametrize("edited", [False, True])
def test_a_snapshot_saved_right_after_a_restore_covers_every_record_restored(url: str, edited: bool) -> None:
    """A new process restores a session and saves a summary of it before recording anything (a strategy
    compacting the restored list): the snapshot covers the records restored, so a restore returns the summary
    and what another process appended after it."""
    store, keeper = _restarted(url, [U("task"), A("a1"), U("q2"), A("a2")], edited=edited)
    try:
        assert keeper.save_snapshot("s", "", [U("summary"), A("a2")]) is not None
        with open_store(url) as other:
            other.append("s", [U("q3")])
        with open_store(url) as fresh:
            assert [m["content"] for m in Keeper(fresh).restore("s").messages] == ["summary", "a2", "q3"]
    finally:
        store.close()


# -- a view appended to before it is read -------------------------------------------------------------------------


class LostReply(DelegatingStore):
    """A real store whose next append lands but reports a lost connection, and whose reads fail meanwhile."""

    def __init__(self, inner: SessionStore) -> None:
        super().__init__(inner)
        self.lost = False

    def append(self, session_id: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        records = self.inner.append(session_id, messages, **kwargs)
        if self.lost:
            raise StoreError(f"{self.url}: append: connection lost")
        return records

    def read_records(self, session_id: str, after_seq: int = 0, **kwargs: Any) -> list[Any]:
        if self.lost:
            raise StoreError(f"{self.url}: read_records: connection lost")
        return self.inner.read_records(session_id, after_seq, **kwargs)


@pytest.mark.parametrize("between", ["nothing", "restore", "list"])
def test_an_append_retried_after_a_lost_reply_in_a_new_process_is_written_once(url: str, between: str) -> None:
    """A new process appends to a session it has not read (Session.add): the write lands but the connection is
    lost before the reply, and the store cannot be read to tell. The caller retries the same message once the
    store answers again, maybe after restoring the session (an edited one: the recorder takes the records
    read) or sending its list: the message is in the session once (Recorder.add's promise)."""
    with open_store(url) as first:
        records = Keeper(first).append("s", [U("q1"), A("r1")])
        first.append_events("s", [_replace(records[1].slot, A("r1, corrected"))])
    with open_store(url) as inner:
        store = LostReply(inner)
        keeper = Keeper(store)
        store.lost = True
        with pytest.raises(StoreError):
            keeper.append("s", [U("q2")])
        store.lost = False
        assert texts(inner) == ["q1", "r1, corrected", "q2"]  # the precondition: the write landed
        if between == "restore":
            assert [m["content"] for m in keeper.restore("s").messages] == ["q1", "r1, corrected", "q2"]
        elif between == "list":
            assert keeper.record_list("s", [U("q1"), A("r1, corrected"), U("q2")]) == []
        records = keeper.append("s", [U("q2")])
        assert [(r.seq, r.message["content"]) for r in records] == [(4, "q2")]
        assert texts(inner) == ["q1", "r1, corrected", "q2"]


@pytest.mark.parametrize("edited", [False, True])
def test_messages_waiting_after_a_restore_are_written_once_when_the_store_comes_back(url: str, edited: bool) -> None:
    """A new process restores a session (the recorder takes what the restore read) and the store refuses the
    next turn: it waits. When the store answers again, the caller's next list is recorded by alignment with
    the view's messages: the waiting turn and the new reply are written once each, nothing restored again."""
    store, keeper = _restarted(url, [U("task"), A("a1"), U("q2"), A("a2")], edited=edited, failing=True)
    try:
        restored = keeper.restore("s").messages
        assert isinstance(keeper.store, Failing)
        keeper.store.down = True
        with pytest.raises(StoreError):
            keeper.record_list("s", [*restored, U("q3")])
        keeper.store.down = False
        assert keeper.recorder.pending("s") == 1  # the precondition: q3 waits for the store
        keeper.record_list("s", [*restored, U("q3"), A("a3")])
        assert texts(store) == ["task", "a1, corrected" if edited else "a1", "q2", "a2", "q3", "a3"]
    finally:
        store.close()


def test_a_snapshot_saved_in_a_new_process_before_the_session_has_records_hides_none_written_after(url: str) -> None:
    with open_store(url) as store:
        keeper = Keeper(store)
        assert keeper.restore("s").messages == []
        assert keeper.save_snapshot("s", "", [U("hello")], slots=[None]) is not None
        with open_store(url) as other:
            other.append("s", [U("x1")])
    with open_store(url) as fresh:
        assert [m["content"] for m in Keeper(fresh).restore("s").messages] == ["hello", "x1"]


def test_a_session_this_process_deleted_is_not_reported_as_started_again_when_another_process_writes_first(
    url: str,
) -> None:
    """This process deletes a session; another process writes a new conversation into it; this process's first
    act is an edit of it (Session.edit): the edit is written, and the session is not reported as deleted and
    written again behind this process's back (it deleted it itself)."""
    with open_store(url) as store, open_store(url) as other:
        keeper = Keeper(store)
        keeper.record_list("s", [U("q1"), A("r1"), U("q2")])
        store.delete("s")
        keeper.forget("s")
        other.append("s", [U("y1"), A("y2")])
        with capture_logs() as events:
            keeper.recorder.replace("s", 2, A("y2, corrected"))
        assert texts(store) == ["y1", "y2, corrected"]
        assert [e for e in events if e["event"] == "ctxlife.session_started_again"] == []


def test_a_session_of_one_message_restored_in_a_new_process_records_the_next_turn_once(url: str) -> None:
    store, keeper = _restarted(url, [U("task")])
    try:
        assert [m["content"] for m in keeper.restore("s").messages] == ["task"]
        keeper.record_list("s", [U("task"), A("done")])
        assert texts(store) == ["task", "done"]
    finally:
        store.close()


def test_a_run_built_from_scratch_whose_first_call_restores_an_edited_session_records_its_repeated_task(
    url: str,
) -> None:
    """A new process starts a run built from scratch (start_run(new_lists=True), a CrewAI kickoff), then its
    first call restores the session, an edited one (the recorder takes the records read): the run's list,
    which repeats the last run's task, is a new turn."""
    with open_store(url) as first:
        records = Keeper(first).append("s", [U("task"), A("done once")])
        first.append_events("s", [_replace(records[1].slot, A("done once, corrected"))])
    with open_store(url) as store:
        keeper = Keeper(store)
        keeper.recorder.new_lists("s")
        assert [m["content"] for m in keeper.restore("s").messages] == ["task", "done once, corrected"]
        keeper.record_list("s", [U("task"), A("done twice")])
        assert texts(store) == ["task", "done once, corrected", "task", "done twice"]


# -- a message another process removed, in a restarted process ----------------------------------------------------


def _managed(url: str) -> ctxlife.Host:
    """A host managing session s on the store at ``url`` (a process of the caller's app)."""
    settings = settings_from_dict({"strategies": ["truncate_last_n"], "context_window": 8000}, source="test")
    host = ctxlife.Host(settings, session_id="s")
    host.store = open_store(url)
    return host


@pytest.mark.parametrize("by", ["remove", "pop"])
@pytest.mark.parametrize("restart", [False, True])
def test_a_message_another_process_removed_is_not_recorded_again_from_the_callers_list(
    tmp_path: Path, restart: bool, by: str
) -> None:
    """A caller's loop keeps its own list; another process removes a message from the session (an admin's
    Session.remove of a wrong reply, or Session.pop of the last message). The loop's next turn still holds it:
    whether its process ran on or restarted meanwhile, the session's conversation goes on without it."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    loop = _managed(url)
    turn = [U("q1"), A("r1 (wrong)"), U("q2")]
    loop.before_llm_call(turn)
    loop.record_reply([*turn, A("a2")])
    with ctxlife.Session("s", loop.settings, host=_managed(url)) as admin:
        if by == "remove":
            admin.remove(2)
        else:
            admin.pop()
    kept = ["q1", "q2", "a2"] if by == "remove" else ["q1", "r1 (wrong)", "q2"]
    with open_store(url) as store:
        assert texts(store) == kept  # the precondition: removed
    if restart:
        loop.close()
        loop = _managed(url)
    loop.before_llm_call([*turn, A("a2"), U("q3")])
    loop.record_reply([*turn, A("a2"), U("q3"), A("a3")])
    loop.close()
    with open_store(url) as store:
        assert texts(store) == [*kept, "q3", "a3"]


def test_a_reply_regenerated_after_a_pop_with_the_same_words_is_recorded(tmp_path: Path) -> None:
    """The app pops the last reply (the user asks to regenerate), calls the model with the list without it, and
    the model answers the same words: the session holds the question and the regenerated answer. (The list
    without it is what tells a regenerated copy from a stale one: a host that records every call sees it.)"""
    url = f"sqlite:///{tmp_path / 's.db'}"
    settings = settings_from_dict({"strategies": ["snapshot_restore"], "context_window": 8000}, source="test")
    loop = ctxlife.Host(settings, session_id="s")
    loop.store = open_store(url)
    loop.before_llm_call([U("What is 2+2?")])
    loop.record_reply([U("What is 2+2?"), A("4.")])
    with ctxlife.Session("s", loop.settings, host=_managed(url)) as app:
        app.pop()
    with open_store(url) as store:
        assert texts(store) == ["What is 2+2?"]  # the precondition: popped
    loop.before_llm_call([U("What is 2+2?")])  # the list sent again holds no reply
    loop.record_reply([U("What is 2+2?"), A("4.")])
    with capture_logs() as logs:
        loop.record_reply([U("What is 2+2?"), A("4."), U("Thanks.")])  # recorded once: not again
    loop.close()
    assert not [e for e in logs if e["event"] == "ctxlife.removed_message_not_recorded"]
    with open_store(url) as store:
        assert texts(store) == ["What is 2+2?", "4.", "Thanks."]


def test_a_removed_message_stays_stale_in_every_list_that_still_holds_it_and_again_after_a_second_removal(
    store: SessionStore,
) -> None:
    """One keeper (a warm process): a list still holding a removed message never records it, however often it is
    sent; a list without it releases it, for good (a later list without it too), so the same words later are a new
    message; removed again, a list still holding that copy does not record it."""
    keeper = Keeper(store)
    keeper.record_list("s", [U("q1"), A("wrong"), U("q2")])
    keeper.remove("s", [2])
    for _ in range(2):  # the stale list, sent twice
        keeper.record_list("s", [U("q1"), A("wrong"), U("q2"), A("a2")])
    assert texts(store) == ["q1", "q2", "a2"]
    keeper.record_list("s", [U("q1"), U("q2"), A("a2")])  # the caller dropped it
    keeper.record_list("s", [U("q1"), U("q2"), A("a2"), U("q3")])  # and goes on without it
    keeper.record_list("s", [U("q1"), U("q2"), A("a2"), U("q3"), A("wrong")])  # the same words, said anew
    assert texts(store) == ["q1", "q2", "a2", "q3", "wrong"]
    keeper.remove("s", [store.current("s", "")[-1].seq])  # removed again
    keeper.record_list("s", [U("q1"), U("q2"), A("a2"), U("q3"), A("wrong"), U("q4")])
    assert texts(store) == ["q1", "q2", "a2", "q3", "q4"]


def test_a_removal_in_one_session_leaves_another_sessions_released_copy_alone(store: SessionStore) -> None:
    """Session t's caller dropped its removed "ok" and says it again: recorded, though session s removes an
    "ok" of its own meanwhile (what one session removed is not another's)."""
    keeper = Keeper(store)
    keeper.record_list("t", [U("q"), A("ok")])
    keeper.remove("t", [2])
    keeper.record_list("t", [U("q")])  # released for t
    keeper.record_list("s", [U("q"), A("ok")])
    keeper.remove("s", [2])
    keeper.record_list("t", [U("q"), A("ok")])
    assert texts(store, "t") == ["q", "ok"]


def test_a_removed_message_a_list_keeps_sending_stays_stale_when_the_list_is_diffed_anew(store: SessionStore) -> None:
    """The stale copy sent again and again is not "a list without it": when the caller's own removal of another
    message makes the next list be diffed against the view anew (the copy an add again), it is still not recorded."""
    keeper = Keeper(store)
    keeper.record_list("s", [U("q1"), A("wrong"), U("q2")])
    keeper.remove("s", [2])
    for _ in range(2):
        keeper.record_list("s", [U("q1"), A("wrong"), U("q2"), A("a2")])
    keeper.record_list("s", [U("q1"), A("wrong"), U("q2")])  # the caller drops a2 (a remove record)
    keeper.record_list("s", [U("q1"), A("wrong"), U("q2"), U("q3")])
    assert texts(store) == ["q1", "q2", "q3"]


def test_an_erased_message_said_again_after_the_list_dropped_it_is_still_not_recorded(store: SessionStore) -> None:
    """Erased is for good: once the caller's list dropped an erased message, its removal is released (the same
    words may be said anew), but the store's erased set still keeps the very message out of the raw history."""
    keeper = Keeper(store)
    keeper.record_list("s", [U("q1"), A("my card is 4111 1111 1111 1111"), U("q2")])
    keeper.erase("s", [2])
    keeper.record_list("s", [U("q1"), U("q2")])  # the caller dropped it: released as a removal
    keeper.record_list("s", [U("q1"), U("q2"), A("my card is 4111 1111 1111 1111")])
    assert texts(store) == ["q1", "q2"]
