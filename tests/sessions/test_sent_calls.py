"""What a session's call records say each model call was sent (``sent_calls``: what ``ctxlife session show
--context``, ``ctxlife replay`` and ``ctxlife report`` show): a message as it stood at that call after a later edit,
the calls after a removal, a changed system prompt, each view's own calls, texts and records no log holds, a record
written without a head, a text that is not valid UTF-8 on its own."""

from __future__ import annotations

from typing import Any

import pytest

from ctxlife.config import settings_from_dict
from ctxlife.host import Host
from ctxlife.messages import BOOTSTRAP_END, BOOTSTRAP_START
from ctxlife.sessions.calls import CALL_FORMAT, MISSING_TEXT, calls_for, sent_calls
from ctxlife.sessions.file import FileStore

pytestmark = pytest.mark.filterwarnings("ignore::ctxlife.CtxlifeWarning")  # no task ends here


def U(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def A(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def S(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def _host(store: FileStore) -> Host:
    host = Host(settings_from_dict({"strategies": ["snapshot_restore"]}), context_window=100_000, session_id="s")
    host.store = store  # the store the host records the calls in
    return host


def _shown(calls: list[Any]) -> list[list[str]]:
    return [[m["content"] for m in call.messages] for call in calls]


def _three_calls(path: Any) -> FileStore:
    """Three calls: the second edits the first's answer, the third drops that answer (a removal)."""
    store = FileStore(path)
    host = _host(store)
    host.before_llm_call([S("sys"), U("q0"), A("a0 draft"), U("q1")])
    host.before_llm_call([S("sys"), U("q0"), A("a0 final"), U("q1"), A("a1"), U("q2")])
    host.before_llm_call([S("sys"), U("q0"), U("q1"), A("a1"), U("q2"), A("a2"), U("q3")])
    host.close()
    return FileStore(path)


def test_each_call_shows_the_messages_as_they_stood_when_it_was_sent(tmp_path: Any) -> None:
    store = _three_calls(tmp_path)
    ops = [(r.op, r.target) for r in store.read_records("s")]
    assert ("replace", 2) in ops and ("remove", 2) in ops  # (the precondition: an edit, then a removal)
    calls = sent_calls(store, "s")
    assert _shown(calls) == [
        ["sys", "q0", "a0 draft", "q1"],  # the draft, although the slot holds the final answer since
        ["sys", "q0", "a0 final", "q1", "a1", "q2"],
        ["sys", "q0", "q1", "a1", "q2", "a2", "q3"],  # the records after the removal are read too
    ]
    assert [c.number for c in calls] == [1, 2, 3] and [c.missing for c in calls] == [0, 0, 0]
    assert calls[2].slots[0] is None and calls[2].slots[1:] == [1, 3, 5, 6, 8, 9]  # the prompt has no slot


def test_a_record_written_without_a_head_shows_each_messages_latest_version(tmp_path: Any) -> None:
    store = _three_calls(tmp_path)
    store.append_call("s", "", {"v": 1, "m": [2]})  # a writer that noted no head: the slot as it stands now
    store.append_call("s", "", {"v": 1, "head": 3, "m": [2]})  # before the edit (seq 4)
    *_, no_head, at_three = sent_calls(store, "s")
    assert _shown([no_head, at_three]) == [["a0 final"], ["a0 draft"]]


def test_a_changed_system_prompt_is_shown_as_each_call_sent_it(tmp_path: Any) -> None:
    store = FileStore(tmp_path)
    host = _host(store)
    host.before_llm_call([S("prompt v1"), U("q0"), A("a0"), U("q1")])
    host.before_llm_call([S("prompt v2"), U("q0"), A("a0"), U("q1"), A("a1"), U("q2")])
    host.close()
    assert _shown(sent_calls(FileStore(tmp_path), "s")) == [
        ["prompt v1", "q0", "a0", "q1"],
        ["prompt v2", "q0", "a0", "q1", "a1", "q2"],
    ]


def test_each_view_shows_its_own_calls(tmp_path: Any) -> None:
    store = FileStore(tmp_path)
    host = _host(store)
    host.before_llm_call([S("sys"), U("for a")], view="agent-a")
    host.before_llm_call([S("sys"), U("for the default view")])
    host.before_llm_call([S("sys"), U("for a"), A("done"), U("again for a")], view="agent-a")
    host.close()
    store = FileStore(tmp_path)
    assert _shown(sent_calls(store, "s", "agent-a")) == [
        ["sys", "for a"],
        ["sys", "for a", "done", "again for a"],
    ]
    assert _shown(sent_calls(store, "s")) == [["sys", "for the default view"]]
    assert sent_calls(store, "s", "nobody") == []


def test_texts_and_records_no_log_holds_are_shown_as_missing_and_counted(tmp_path: Any) -> None:
    store = FileStore(tmp_path)
    store.append("s", [U("hello")])  # slot 1
    store.append_call("s", "", {"v": 1, "head": 1, "m": [1, "0123456789abcdef", 99]})  # a key, a slot not held
    store.append_call("s", "", {"v": 1, "head": 1, "base": 42, "keep": 2, "m": [1]})  # a base record not found
    store.append_call("s", "", {"v": 1, "head": 1, "base": 1, "m": [1]})  # a base without keep: none taken
    unknown_text, unknown_base, no_keep = sent_calls(store, "s")
    missing = {"role": "user", "content": MISSING_TEXT}
    assert unknown_text.messages == [U("hello"), missing, missing] and unknown_text.missing == 2
    assert unknown_text.slots == [1, None, 99]
    assert unknown_base.messages == [missing, missing, U("hello")] and unknown_base.missing == 2
    assert no_keep.messages == [U("hello")] and no_keep.missing == 0


def test_a_text_with_a_lone_surrogate_is_recorded_and_shown(tmp_path: Any) -> None:
    # (a str Python holds but UTF-8 cannot encode on its own: its key must still be made)
    store = FileStore(tmp_path)
    store.append("s", [U("hello")])
    odd = S("a prompt cut in the middle of an emoji \ud83d")
    calls_for(store).record("s", "", [odd, U("hello")], [None, 1], head=1, details={})
    [call] = sent_calls(store, "s")
    assert call.messages == [odd, U("hello")] and call.missing == 0


def test_two_runs_sending_the_same_question_with_other_bootstrap_sections_show_each_as_sent(tmp_path: Any) -> None:
    store = FileStore(tmp_path)
    [first, second] = store.append("s", [U("What is in stock?"), U("And now?")])
    log = calls_for(store)
    for rules, record in (("Rules of run 1.", first), ("Rules of run 2.", second)):
        sent = U(f"{BOOTSTRAP_START}\n{rules}\n{BOOTSTRAP_END}\n\n{record.message['content']}")
        log.record("s", "", [sent], [record.seq], head=second.seq, details={"tokens": [7, 7]})
    one, two = sent_calls(store, "s")
    assert _shown([one, two]) == [
        [f"{BOOTSTRAP_START}\nRules of run 1.\n{BOOTSTRAP_END}\n\nWhat is in stock?"],
        [f"{BOOTSTRAP_START}\nRules of run 2.\n{BOOTSTRAP_END}\n\nAnd now?"],
    ]
    assert one.slots == [1] and two.slots == [2]  # each the recorded message, sent in another form
    # the record as the module documents it: its format, the head, the entries, the details
    assert (one.doc["v"], one.doc["head"], one.doc["tokens"], one.tokens) == (CALL_FORMAT, 2, [7, 7], (7, 7))


def test_a_call_without_a_user_message_is_recorded_and_shown(tmp_path: Any) -> None:
    store = FileStore(tmp_path)
    n = calls_for(store).record("s", "", [S("sys"), A("Hello! How can I help?")], [None, None], head=0, details={})
    [call] = sent_calls(store, "s")
    assert n == 1 and _shown([call]) == [["sys", "Hello! How can I help?"]] and call.slots == [None, None]


@pytest.mark.parametrize("prompt", [True, False], ids=["with a prompt sent by text", "recorded messages only"])
def test_a_log_deleted_by_another_process_is_written_whole_again(tmp_path: Any, prompt: bool) -> None:
    # This process's writer knows the texts and the entries of its last record; another process deletes the
    # session; the same list sent again must not lean on the deleted record or texts (it is written whole).
    store = FileStore(tmp_path)
    sent = [*([S("sys")] if prompt else []), U("What is in stock?")]
    slots = [*([None] if prompt else []), 1]
    log = calls_for(store)
    store.append("s", [U("What is in stock?")])
    assert log.record("s", "", sent, slots, head=1, details={}) == 1
    with FileStore(tmp_path) as other:  # the other process: the session is gone, its call records too
        assert other.delete("s")
    store.append("s", [U("What is in stock?")])
    assert log.record("s", "", sent, slots, head=1, details={}) == 1  # numbered from 1 again
    [call] = sent_calls(store, "s")
    assert call.messages == sent and call.missing == 0
    assert "base" not in call.doc and "keep" not in call.doc
