"""Call records in every store (file, SQLite, Redis, and the default a third-party store inherits):
numbered, per view, deleted with the session, scrubbed by erase, a repeated text stored once, and a
failed write that never breaks the call."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

import ctxlife
from ctxlife.cli import main
from ctxlife.config import settings_from_dict
from ctxlife.errors import StoreError
from ctxlife.messages import BOOTSTRAP_END, BOOTSTRAP_START
from ctxlife.sessions import SessionStore, open_store
from ctxlife.sessions.calls import calls_for, sent_calls
from delegating_store import DelegatingStore

KINDS = ("file", "sqlite", "redis", "default")


class Delegating(DelegatingStore):
    """Only the abstract methods (as a third party would): call records use the default of
    :class:`SessionStore` (one blob); erasing needs ``_rewrite_records``."""

    def _rewrite_records(self, session_id: str, values: dict[int, dict[str, Any]]) -> int:
        return self.inner._rewrite_records(session_id, values)


@pytest.fixture(params=KINDS)
def calls_store(request: pytest.FixtureRequest, make_url: Callable[[str], str]) -> Iterator[SessionStore]:
    kind = str(request.param)
    url = make_url("file" if kind == "default" else kind)
    store = open_store(url + ("?fsync=false" if url.startswith("file") else ""))
    yield Delegating(store) if kind == "default" else store
    store.close()


def _doc(i: int) -> dict[str, Any]:
    return {"v": 1, "head": i, "m": [i], "tokens": [i, i]}


def test_numbered_per_session_listed_per_view(calls_store: SessionStore) -> None:
    assert calls_store.read_calls("s1") == []
    assert calls_store.append_call("s1", "", _doc(1)) == 1
    assert calls_store.append_call("s1", "agent-b", _doc(2)) == 2
    assert calls_store.append_call("s2", "", _doc(3)) == 1  # sessions are independent
    assert calls_store.append_call("s1", "", {"v": 1, "note": "Zoë ✈️ 東京"}) == 3
    every = calls_store.read_calls("s1")
    assert [(c.n, c.view) for c in every] == [(1, ""), (2, "agent-b"), (3, "")]
    assert every[0].doc == _doc(1) and every[2].doc["note"] == "Zoë ✈️ 東京"
    assert [c.n for c in calls_store.read_calls("s1", "agent-b")] == [2]
    assert calls_store.read_calls("s1", "nobody") == []


def _summarizing(store: SessionStore, sid: str, summary: str, turns: int) -> list[list[dict[str, Any]]]:
    """A session summarized by the caller's model (its summary says ``summary``); the lists sent."""
    settings = settings_from_dict(
        {
            "strategies": ["llm_summary"],
            "context_window": 1200,
            "threshold": 0.5,
            "llm_summary": {"summarizer": "llm", "min_gain_tokens": 50, "max_summary_tokens": 150},
        },
        source="test",
    )

    def model(messages: list[dict[str, Any]], max_tokens: int) -> str:
        # A summary that carries one fact of its span (one that carries none is not used): the first of
        # the facts the prompt lists (the span's come before those carried from an earlier summary).
        listed = re.search(r"codes: (TCK-\d+)", json.dumps(messages))
        return f"{summary} Span: {listed.group(1)}." if listed else summary

    host = ctxlife.Host(settings, summary_model=model)
    host.store = store
    sent = []
    with ctxlife.Session(sid, host=host, system="You are a clerk.") as session:
        for i in range(turns):
            sent.append(session.messages({"role": "user", "content": f"Ticket TCK-{i}? " + "Details. " * 30}))
            session.record_reply(f"Ticket TCK-{i} is open. " + "We checked. " * 20)
    return sent


def test_deleted_with_the_session_and_whole_after_it_starts_over(calls_store: SessionStore) -> None:
    sent = _summarizing(calls_store, "s1", "LEDGER: refunds asked.", 8)
    assert [c.messages for c in sent_calls(calls_store, "s1")] == sent
    assert calls_store.delete("s1")
    assert calls_store.read_calls("s1") == [] and sent_calls(calls_store, "s1") == []
    # The same process records the session again: its first record holds every text it names.
    again = _summarizing(calls_store, "s1", "LEDGER: refunds asked.", 3)
    found = sent_calls(calls_store, "s1")
    assert [c.messages for c in found] == again and not any(c.missing for c in found)


def test_erase_matching_scrubs_the_call_records(calls_store: SessionStore) -> None:
    _summarizing(calls_store, "s1", "LEDGER: the card is 4111-1111-1111-1111.", 8)
    assert "4111-1111" in json.dumps([c.doc for c in calls_store.read_calls("s1")])
    calls_store.erase_matching("s1", r"4111-1111-1111-1111")
    assert "4111-1111" not in json.dumps([c.doc for c in calls_store.read_calls("s1")])
    summaries = [m for c in sent_calls(calls_store, "s1") for m in c.messages if "LEDGER" in str(m.get("content"))]
    assert summaries and all("[erased]" in str(m["content"]) for m in summaries)


def test_erase_of_a_slot_scrubs_its_copy_sent_with_the_bootstrap(calls_store: SessionStore) -> None:
    said = {"role": "user", "content": "my passport is X1234567"}
    [record] = calls_store.append("s1", [said])
    sent = {"role": "user", "content": f"{BOOTSTRAP_START}\nRules.\n{BOOTSTRAP_END}\n\n{said['content']}"}
    calls_for(calls_store).record("s1", "", [sent], [record.seq], head=record.seq, details={})
    assert sent_calls(calls_store, "s1")[0].messages == [sent]
    calls_store.erase("s1", [record.seq])
    assert "X1234567" not in json.dumps([c.doc for c in calls_store.read_calls("s1")])
    assert sent_calls(calls_store, "s1")[0].messages[0]["content"] == "[erased]"


def test_erase_matching_a_roles_name_scrubs_a_sent_text_and_keeps_its_role(calls_store: SessionStore) -> None:
    said = {"role": "user", "content": "my passport is X1234567"}
    [record] = calls_store.append("s1", [said])
    note = {"role": "system", "content": "Summary: the system passport X1234567 was checked."}  # not recorded
    calls_for(calls_store).record("s1", "", [note, said], [None, record.seq], head=record.seq, details={})
    (call,) = calls_store.read_calls("s1")
    assert list(call.doc["t"].values()) == [note]  # the precondition: the record keeps the sent text itself
    assert calls_store.erase_matching("s1", r"system|X1234567") == [record.seq]
    (sent,) = sent_calls(calls_store, "s1")
    # the pattern also matches the role's name: the text goes, the role stays (the list stays valid)
    assert sent.messages[0] == {"role": "system", "content": "Summary: the [erased] passport [erased] was checked."}
    assert (sent.messages[1]["role"], sent.messages[1]["content"]) == ("user", "[erased]")


def test_a_summary_repeated_by_1000_calls_is_stored_once(calls_store: SessionStore) -> None:
    system = {"role": "system", "content": "You are a clerk."}
    summary = {"role": "user", "content": "Summary of the conversation so far: " + "refunds, tickets. " * 40}
    calls = 200 if isinstance(calls_store, Delegating) else 1000  # the default rewrites its blob per call
    records = calls_store.append("s1", [{"role": "user", "content": f"turn {i}"} for i in range(calls)])
    log = calls_for(calls_store)
    for i in range(calls):
        recent = records[max(0, i - 5) : i + 1]
        log.record(
            "s1",
            "",
            [system, summary, *(r.message for r in recent)],
            [None, None, *(r.seq for r in recent)],
            head=records[i].seq,
            details={},
        )
    stored = json.dumps([c.doc for c in calls_store.read_calls("s1")])
    assert stored.count("refunds, tickets.") == 40  # one copy of the summary's text
    assert len(stored) < calls * 150  # each call: its time, head, slots and two keys (the summary: ~760)
    # A record holds what differs from the writer's previous one (here: the six recent slots), not the list.
    assert all(len(c.doc["m"]) <= 6 for c in calls_store.read_calls("s1"))
    last = sent_calls(calls_store, "s1")[-1]
    assert last.messages == [system, summary, *(r.message for r in records[calls - 6 :])]


class _Broken:
    """Makes a store's call-record writes fail (a full disk)."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def __call__(self, session_id: str, view: str, doc: dict[str, Any]) -> int:
        raise StoreError(f"{self.store.url}: append_call: No space left on device")


def test_a_failed_write_is_reported_and_the_call_goes_on(calls_store: SessionStore) -> None:
    settings = settings_from_dict({"strategies": [], "context_window": 8000}, source="test")
    host = ctxlife.Host(settings)
    host.store = calls_store
    with contextlib.ExitStack() as stack:
        stack.enter_context(pytest.MonkeyPatch.context()).setattr(calls_store, "append_call", _Broken(calls_store))
        logs = stack.enter_context(capture_logs())
        with ctxlife.Session("s1", host=host) as session:
            sent = session.messages({"role": "user", "content": "hello"})
    assert sent == [{"role": "user", "content": "hello"}]
    report = session.last_report
    assert report is not None and [f.strategy for f in report.failures] == ["call_record"]
    assert "No space left on device" in report.failures[0].error
    [event] = [e for e in logs if e["event"] == "ctxlife.call_record_failed"]
    assert event["session_id"] == "s1" and "No space left" in event["error"]
    assert calls_store.read_calls("s1") == [] and [r.message for r in calls_store.read_records("s1")] == sent


def test_export_lists_the_calls(make_url: Callable[[str], str], capsys: Any) -> None:
    url = make_url("sqlite")
    with open_store(url) as store:
        sent = _summarizing(store, "s1", "LEDGER: refunds asked.", 6)
    assert main(["session", "export", "s1", "--calls", "--store", url]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [c["call"] for c in data] == list(range(1, 7))
    assert [c["messages"] for c in data] == sent
    assert all(c["tokens"][0] >= c["tokens"][1] for c in data)


def test_they_expire_with_the_session(make_url: Callable[[str], str], redis_client: Any) -> None:
    url = make_url("redis") + "&ttl=60"
    with open_store(url) as store:
        _summarizing(store, "s1", "LEDGER: refunds asked.", 2)
        keys = {k.decode() for k in redis_client.keys(f"{url.split('prefix=')[1].split('&')[0]}*")}
        calls = next(k for k in keys if k.endswith(":calls"))
        assert 0 < redis_client.ttl(calls) <= 60
    with open_store(make_url("sqlite") + "?ttl=1") as store:
        store.append_call("s1", "", _doc(1))
        assert [c.n for c in store.read_calls("s1")] == [1]
        time.sleep(1.2)  # idle longer than its ttl: gone, and the next write starts it over
        assert store.read_calls("s1") == []
        assert store.append_call("s1", "", _doc(2)) == 1


@pytest.mark.parametrize(("option", "expected"), [("", 2), ("?synchronous=NORMAL", 1)])
def test_a_sqlite_call_record_leaves_the_appends_as_durable_as_configured(
    tmp_path: Any, option: str, expected: int
) -> None:
    # A call record is committed without a disk flush (it is made durable by the next append's);
    # the raw history's appends keep the store's synchronous setting (2 = FULL, 1 = NORMAL).
    with open_store(f"sqlite:///{tmp_path / 's.db'}{option}") as store:
        store.append("s", [{"role": "user", "content": "q"}])
        assert store.append_call("s", "", {"m": [1]}) == 1
        assert [c.doc for c in store.read_calls("s")] == [{"m": [1]}]
        assert store._conn().execute("PRAGMA synchronous").fetchone()[0] == expected  # type: ignore[attr-defined]
