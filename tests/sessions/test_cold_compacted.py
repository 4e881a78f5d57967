"""A cold call on a compacted session reads only the records it keeps, and records what a warm one does.

A new process (a new store object, so a new recorder) restoring a compacted view reads its snapshot
and the records after it; the recorder then reads the view's records from where the snapshot's kept
messages start (plus the task's first message the snapshot holds), not the whole history. Whatever
needs an older record (an edit of it, another writer's edit, a list that holds it) reads the rest,
so each scenario below records exactly what the process that compacted the session records.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.sessions import SessionStore, open_store
from ctxlife.sessions.keeper import keeper_for
from ctxlife.sessions.records import REMOVE, REPLACE, Event, RawRecord
from delegating_store import DelegatingStore

SID = "cold"
SETTINGS = {
    "strategies": ["llm_summary"],
    "context_window": 2000,
    "threshold": 0.5,
    "llm_summary": {"summarizer": "extractive"},
}


class Counting(DelegatingStore):
    """Counts the raw records each read returns, with the sequence number it read after."""

    def __init__(self, inner: SessionStore) -> None:
        super().__init__(inner)
        self.reads: list[tuple[int, int]] = []

    def read_records(self, session_id: str, after_seq: int = 0, **kwargs: Any) -> list[RawRecord]:
        found = self.inner.read_records(session_id, after_seq, **kwargs)
        self.reads.append((after_seq, len(found)))
        return found

    def _rewrite_records(self, session_id: str, values: dict[int, dict[str, Any]]) -> int:
        return self.inner._rewrite_records(session_id, values)  # (erase)


def _turn(i: int) -> dict[str, Any]:
    return {"role": "user", "content": f"Parcel {1000 + i}: where is it? " + "Please check. " * 12}


def _reply(i: int) -> str:
    return f"Parcel {1000 + i} is in depot {i % 7}. " + "It ships soon. " * 12


def _host(store: SessionStore) -> ctxlife.Host:
    host = ctxlife.Host(settings_from_dict(SETTINGS, source="test"), session_id=SID)
    host.store = store
    return host


def _compacted(store: SessionStore, turns: int = 30) -> tuple[ctxlife.Host, ctxlife.Session]:
    """A session of ``turns`` turns whose view was compacted (a snapshot); the warm host and session."""
    host = _host(store)
    session = ctxlife.Session(SID, host=host, system="You are a clerk.")
    for i in range(turns):
        session.messages(_turn(i))
        session.record_reply(_reply(i))
    snapshot = store.load_snapshot(SID)
    assert snapshot is not None and snapshot.raw_length > 20  # compacted, long ago enough to matter
    return host, session


def _kept_start(store: SessionStore) -> int:
    """The slot the snapshot's kept messages start at (after the widest gap in its slots)."""
    snapshot = store.load_snapshot(SID)
    assert snapshot is not None
    slots = [s for s in snapshot.meta["slots"] if s is not None]
    gaps = [(b - a, b) for a, b in zip(slots, slots[1:], strict=False)]
    return max(gaps)[1]


def _records(store: SessionStore) -> list[tuple[int, str, int | None, dict[str, Any]]]:
    return [(r.seq, r.op, r.target, r.message) for r in store.read_records(SID)]


def test_a_cold_call_on_a_compacted_session_reads_only_the_records_it_keeps(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    first = open_store(url)
    host, session = _compacted(first)
    head, start = first.head(SID), _kept_start(first)
    assert start > 20
    session.close()
    host.close()  # (closes its store)

    store = Counting(open_store(url))
    host = _host(store)
    try:
        with ctxlife.Session(SID, host=host, system="You are a clerk.") as cold:
            listing = cold.messages(_turn(99))
            cold.record_reply(_reply(99))
            other = open_store(url)  # another writer appends meanwhile
            other.append(SID, [{"role": "user", "content": "(from the desk) parcel 1098?"}])
            other.close()
            again = cold.messages(_turn(100))
        # Every read starts at the kept point or later: no record before it is read.
        assert store.reads and min(after for after, _ in store.reads) >= start - 1, store.reads
        assert sum(rows for _, rows in store.reads) < 3 * (head - start + 5), store.reads
        desk = {"role": "user", "content": "(from the desk) parcel 1098?"}
        assert listing[-1] == _turn(99) and again[-2:] == [desk, _turn(100)]
        reply = {"role": "assistant", "content": _reply(99)}
        assert [r.message for r in store.read_records(SID)[head:]] == [_turn(99), reply, desk, _turn(100)]
    finally:
        host.close()


def _edit_old(session: ctxlife.Session, store: SessionStore) -> None:
    session.edit(3, {"role": "assistant", "content": "Parcel 1001: lost, refunded."})
    session.messages(_turn(50))


def _edit_kept(session: ctxlife.Session, store: SessionStore) -> None:
    last = store.read_records(SID)[-1].seq
    session.edit(last - 1, {"role": "user", "content": "Parcel 1029: where is it, and when?"})
    session.messages(_turn(50))


def _remove_old(session: ctxlife.Session, store: SessionStore) -> None:
    session.remove(5, 6)
    session.messages(_turn(50))
    session.record_reply(_reply(50))


def _erase_old(session: ctxlife.Session, store: SessionStore) -> None:
    session.erase(4)
    session.messages(_turn(50))


def _pop_and_continue(session: ctxlife.Session, store: SessionStore) -> None:
    session.pop()
    session.messages(_turn(50))
    session.record_reply(_reply(50))
    session.messages(_turn(51))


def _others_edit_old(session: ctxlife.Session, store: SessionStore) -> None:
    """Another writer (its own store object) edits and removes old records between two calls."""
    session.messages(_turn(50))
    session.record_reply(_reply(50))
    other = open_store(store.url)
    try:
        other.append_events(
            SID,
            [
                Event(REPLACE, {"role": "assistant", "content": "Parcel 1001: found."}, 3),
                Event(REMOVE, {}, 7),
            ],
        )
        other.append(SID, [{"role": "user", "content": "(from the desk) parcel 1060?"}])
    finally:
        other.close()
    session.messages(_turn(51))


SCENARIOS: dict[str, Callable[[ctxlife.Session, SessionStore], None]] = {
    "edit_old": _edit_old,
    "edit_kept": _edit_kept,
    "remove_old": _remove_old,
    "erase_old": _erase_old,
    "pop": _pop_and_continue,
    "others_edit_old": _others_edit_old,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_cold_process_records_what_the_warm_one_does(tmp_path: Path, name: str) -> None:
    """The same compacted session three times: one process goes on (warm); a new one starts cold;
    another new one first has its recorder read the whole view (``covered()``: as every cold start
    did before the kept point). Each then does the same thing. Their raw histories are the same, and
    the two new processes send the same lists (a warm one's summarizer remembers more)."""
    scenario = SCENARIOS[name]
    results = {}
    for kind in ("warm", "cold", "whole"):
        url = f"sqlite:///{tmp_path / f'{kind}.db'}"
        store = open_store(url)
        host, session = _compacted(store)
        if kind != "warm":
            session.close()
            host.close()  # (closes its store)
            store = open_store(url)
            host = _host(store)
            if kind == "whole":
                keeper_for(store).recorder.covered(SID)
            session = ctxlife.Session(SID, host=host, system="You are a clerk.")
        try:
            scenario(session, store)
            sent = session.messages(_turn(60))
            results[kind] = (_records(store), sent, session.get_items())
        finally:
            session.close()
            host.close()
    assert results["cold"][0] == results["warm"][0] == results["whole"][0]  # the raw history
    # the list sent and the items, but for the marks of inserted messages (keyed per process)
    assert _unmarked(results["cold"][1:]) == _unmarked(results["whole"][1:])


def _unmarked(value: Any) -> Any:
    return re.sub(r"<!-- ctxlife:[^>]*-->", "<mark>", json.dumps(value))


def test_a_stateless_caller_on_a_cold_compacted_session_records_only_its_new_message(tmp_path: Path) -> None:
    """``manage()`` with the caller's whole list (snapshot_restore): the new message is recorded once."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = open_store(url)
    settings = settings_from_dict({**SETTINGS, "strategies": ["snapshot_restore", "llm_summary"]}, source="test")
    history: list[dict[str, Any]] = []
    host = ctxlife.Host(settings, session_id=SID)
    host.store = store
    for i in range(30):
        history += [_turn(i)]
        host.manage(list(history))
        history += [{"role": "assistant", "content": _reply(i)}]
    host.close()
    store.close()
    store = Counting(open_store(url))
    before = len(store.read_records(SID))
    store.reads.clear()
    host = ctxlife.Host(settings, session_id=SID)
    host.store = store
    try:
        host.manage([*history, _turn(30)])
        after = store.read_records(SID)
        assert [r.message for r in after[before:]] == [history[-1], _turn(30)]
    finally:
        host.close()
