"""Token counts kept with the raw history: written once at append, used by every restore.

A cold start on a long session must not tokenize the whole history again (issue 23): each record
carries its message's count, and a restore hands the counts to the host's counter.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from ctxlife import Session
from ctxlife.config import settings_from_dict
from ctxlife.host import Host
from ctxlife.sessions import ADD, REMOVE, REPLACE, Event, RecordSlot, SessionStore, open_store
from ctxlife.sessions.file import FileStore
from ctxlife.tokens import FALLBACK_ENCODING, TokenCounter

MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "What is the order status of #4411?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"order": 4411}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "shipped on 2026-11-30, carrier DHL"},
    {"role": "assistant", "content": "它已于11月30日发货。"},
    {"role": "user", "content": [{"type": "text", "text": "thanks"}], "name": "ana"},
]


def test_every_record_keeps_the_count_of_its_message_from_append(store: SessionStore) -> None:
    counter = TokenCounter()
    written = store.append("s", MESSAGES)
    for records in (written, store.read_records("s")):
        assert [(r.tokens, r.token_encoding) for r in records] == [
            (counter.count_message(m), FALLBACK_ENCODING) for m in MESSAGES
        ]


def test_an_edit_is_counted_and_a_removal_has_no_count(store: SessionStore) -> None:
    first = store.append("s", MESSAGES[:2])
    edited = {"role": "user", "content": "What is the order status of #4412, and when will it arrive?"}
    store.append_events("s", [Event(REPLACE, edited, first[0].seq), Event(REMOVE, {}, first[1].seq)])
    replace, remove = store.read_records("s", first[-1].seq)
    assert replace.tokens == TokenCounter().count_message(edited) and replace.token_encoding == FALLBACK_ENCODING
    assert remove.tokens is None and remove.token_encoding is None


def test_an_erased_message_loses_the_count_of_its_text(store: SessionStore) -> None:
    written = store.append("s", MESSAGES)
    store.erase("s", [written[2].seq])
    erased = next(r for r in store.read_records("s") if r.seq == written[2].seq)
    assert erased.message["content"] != MESSAGES[2]["content"]
    assert erased.tokens is None


def test_a_count_that_is_not_a_count_is_ignored_and_the_message_counted_again(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "sessions")
    store.append("s", MESSAGES[:1])
    path = next((tmp_path / "sessions").rglob("*.jsonl"))
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["tk"] = ["many", FALLBACK_ENCODING]
    path.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    [record] = store.read_records("s")
    assert record.message == MESSAGES[0] and record.tokens is None


def test_a_schema_2_sqlite_database_is_upgraded_in_place(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = open_store(f"sqlite:///{db}")
    store.append("s", MESSAGES[:2])
    store.close()
    with sqlite3.connect(db) as conn:  # what ctxlife before token counts wrote
        conn.execute("ALTER TABLE ctxlife_raw DROP COLUMN tokens")
        conn.execute("ALTER TABLE ctxlife_raw DROP COLUMN token_encoding")
        conn.execute("UPDATE ctxlife_meta SET value = '2' WHERE key = 'schema_version'")
    store = open_store(f"sqlite:///{db}")
    store.append("s", MESSAGES[2:])
    records = store.read_records("s")
    store.close()
    assert [r.message for r in records] == MESSAGES
    assert [r.tokens is None for r in records] == [True, True, False, False, False]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM ctxlife_meta WHERE key = 'schema_version'").fetchone() == ("3",)


def _history(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(turns):
        out.append({"role": "user", "content": f"question {i}: where is parcel {1000 + i}?"})
        out.append({"role": "assistant", "content": f"Parcel {1000 + i} is in depot {i % 7}."})
    return out


def _session(url: str) -> Session:
    return Session("s", config=settings_from_dict({"strategies": [], "store": url}), context_window=100_000)


def test_a_restore_counts_the_history_with_the_counts_kept_at_append(tmp_path: Path) -> None:
    """The host's count of a restored history is the stored one: a record whose count was changed
    on disk changes the total, so nothing was tokenized again."""
    url = f"file://{tmp_path / 'sessions'}"
    history = _history(40)
    FileStore(tmp_path / "sessions").append("s", history)
    new = {"role": "user", "content": "and parcel 1003?"}
    with _session(url) as session:
        session.prepare(new)
        assert session.last_report is not None
        honest = session.last_report.tokens_before
    assert honest == TokenCounter().count_messages([*history, new])

    path = next((tmp_path / "sessions").rglob("*.jsonl"))
    lines = path.read_text(encoding="utf-8").splitlines()
    doc = json.loads(lines[0])
    doc["tk"] = [doc["tk"][0] + 50_000, doc["tk"][1]]
    path.write_text("\n".join([json.dumps(doc), *lines[1:]]) + "\n", encoding="utf-8")
    with _session(url) as session:
        session.prepare({"role": "user", "content": "and parcel 1004?"})
        assert session.last_report is not None
        assert session.last_report.tokens_before > honest + 50_000


class _CountingReads(FileStore):
    """A file store that counts full reads of the raw history (from sequence number 0), whole
    records or the recorder's slots."""

    full_reads = 0

    def read_records(self, session_id: str, after_seq: int = 0, **kwargs: Any) -> Any:
        if after_seq == 0:
            self.full_reads += 1
        return super().read_records(session_id, after_seq, **kwargs)

    def read_slots(self, session_id: str, after_seq: int = 0, **kwargs: Any) -> Any:
        if after_seq == 0:
            self.full_reads += 1
        return SessionStore.read_slots(self, session_id, after_seq, **kwargs)  # not through read_records


def test_a_cold_session_reads_its_raw_history_once(tmp_path: Path) -> None:
    """The restore and the recorder share the one read of a never-compacted history."""
    history = _history(30)
    store = _CountingReads(tmp_path / "sessions")
    store.append("s", history)
    host = Host(settings_from_dict({"strategies": []}), context_window=100_000, session_id="s")
    host.store = store
    try:
        with Session("s", host=host) as session:
            listing = session.prepare({"role": "user", "content": "and parcel 1003?"})
            assert listing[:-1] == history
            session.record_reply("In depot 3.")
        assert store.full_reads == 1
        assert [r.message["content"] for r in store.read_records("s")][-2:] == ["and parcel 1003?", "In depot 3."]
    finally:
        host.close()


def test_appending_to_a_long_session_reads_none_of_its_history(tmp_path: Path) -> None:
    """``add_items`` on a session another process wrote needs the head, not the messages; what the
    session does next (pop, prepare) reads the history then, once, and records nothing twice."""
    history = _history(30)
    store = _CountingReads(tmp_path / "sessions")
    store.append("s", history)
    host = Host(settings_from_dict({"strategies": []}), context_window=100_000, session_id="s")
    host.store = store
    turn = [{"role": "user", "content": "and parcel 1003?"}, {"role": "assistant", "content": "In depot 3."}]
    try:
        with Session("s", host=host) as session:
            session.add_items(turn)
            session.add_items([{"role": "user", "content": "and 1004?"}])
            assert store.full_reads == 0
            assert session.pop_item() == {"role": "user", "content": "and 1004?"}
            listing = session.prepare({"role": "user", "content": "and parcel 1005?"})
            assert listing == [*history, *turn, {"role": "user", "content": "and parcel 1005?"}]
        assert [r.message for r in store.current("s")] == listing
    finally:
        host.close()


def test_manage_with_snapshot_restore_reads_and_counts_a_cold_history_once(tmp_path: Path) -> None:
    """The same for ``manage()``-style hosts: the strategy's restore feeds the recorder and the counter."""
    history = _history(30)
    store = _CountingReads(tmp_path / "sessions")
    store.append("s", history)
    path = next((tmp_path / "sessions").rglob("*.jsonl"))
    lines = path.read_text(encoding="utf-8").splitlines()
    doc = json.loads(lines[0])
    doc["tk"] = [doc["tk"][0] + 50_000, doc["tk"][1]]  # proof the stored count is the one used
    path.write_text("\n".join([json.dumps(doc), *lines[1:]]) + "\n", encoding="utf-8")
    host = Host(settings_from_dict({"strategies": ["snapshot_restore"]}), context_window=200_000, session_id="s")
    host.store = store
    try:
        messages = [{"role": "user", "content": "and parcel 1003?"}]
        report = host.manage(messages)
        assert messages[:-1] == history and [a.what for a in report.actions] == ["restored"]
        assert report.tokens_after > TokenCounter().count_messages(messages) + 49_000
        assert store.full_reads == 1
    finally:
        host.close()


def test_the_slots_a_store_reads_are_those_of_its_records(store: SessionStore) -> None:
    """``read_slots`` (what a recorder keeps, without messages) agrees with ``read_records``,
    events included; the SQLite store answers it from four columns."""
    first = store.append("s", MESSAGES)
    store.append("s", [{"role": "user", "content": "other view"}], view="lane")
    store.append_events(
        "s",
        [
            Event(REPLACE, {"role": "user", "content": "edited"}, first[0].seq),
            Event(REMOVE, {}, first[1].seq),
            Event(ADD, {"role": "assistant", "content": "inserted"}, first[2].seq),
        ],
    )
    for view in (None, "", "lane"):
        for after in (0, first[2].seq):
            records = store.read_records("s", after, view=view)
            assert store.read_slots("s", after, view=view) == [
                RecordSlot(r.seq, r.fingerprint, r.op, r.target) for r in records
            ]


def test_a_field_a_later_version_adds_to_a_record_is_ignored(tmp_path: Path) -> None:
    """Forward compatibility for rolling upgrades: an older worker reads what a newer one wrote."""
    store = FileStore(tmp_path / "sessions")
    store.append("s", MESSAGES[:2])
    path = next((tmp_path / "sessions").rglob("*.jsonl"))
    docs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    docs[0]["later"] = {"anything": [1, 2]}
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    records = store.read_records("s")
    assert [(r.seq, r.message) for r in records] == [(1, MESSAGES[0]), (2, MESSAGES[1])]


def test_a_restore_after_an_edit_counts_the_edited_message(store_url: str) -> None:
    """Issue 44: no test failed when a restore kept the old message's stored count after
    ``Session.edit`` (a 1,020-token list counted as 21): compaction and the window check would use it."""
    settings = settings_from_dict({"strategies": [], "store": store_url})
    counter = TokenCounter()
    long = {"role": "user", "content": "Here is the full order log: " + "order 4411 shipped by DHL; " * 150}
    with Session("s", config=settings, context_window=100_000) as session:
        session.prepare({"role": "user", "content": "Hi"})
        session.record_reply("Hello!")
        first = session.records()[0]
        session.edit(first.seq, long)
    assert counter.count_message(long) > 1000 > 100 > counter.count_message({"role": "user", "content": "Hi"})
    new = {"role": "user", "content": "and parcel 1003?"}
    with Session("s", config=settings, context_window=100_000) as session:  # a restart: the store's counts
        sent = session.prepare(new)
        report = session.last_report
    assert sent == [long, {"role": "assistant", "content": "Hello!"}, new]  # restored, nothing compacted
    assert report is not None and report.tokens_before == counter.count_messages(sent)
