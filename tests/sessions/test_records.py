"""The raw-history data model on every store: sequence numbers, fingerprints, views, conditional
appends, quarantine of unserialisable messages, legacy data, pop, per-view snapshots and ttl."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import structlog

from ctxlife.errors import SessionIdError, StoreError
from ctxlife.sessions import (
    MAX_SESSION_ID_LENGTH,
    AppendConflictError,
    RawRecord,
    SessionStore,
    Snapshot,
    fingerprint,
    open_store,
    view_id,
)


def msg(role: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **extra}


def test_records_get_gap_free_sequence_numbers_fingerprints_views_and_times(store: SessionStore) -> None:
    t0 = time.time()
    first = store.append("s", [msg("user", "q0"), msg("assistant", "ok")], view="alice")
    second = store.append("s", [msg("user", "q0")])  # the same content again: a new record
    assert [r.seq for r in first + second] == [1, 2, 3]
    assert [r.view for r in first + second] == ["alice", "alice", ""]
    assert all(r.recorded_at is not None and t0 - 1 <= r.recorded_at <= time.time() + 1 for r in first + second)
    records = store.read_records("s")
    assert records == first + second
    assert records[0].fingerprint == records[2].fingerprint == fingerprint(msg("user", "q0"))
    assert records[1].fingerprint != records[0].fingerprint
    assert store.head("s") == 3
    assert store.read_records("s", after_seq=1) == records[1:]
    assert store.read_records("s", view="alice") == records[:2]
    assert store.read_records("s", after_seq=1, view="") == records[2:]
    assert store.read_records("nobody") == [] and store.head("nobody") == 0
    with pytest.raises(StoreError, match="after_seq"):
        store.read_records("s", after_seq=-1)
    with pytest.raises(SessionIdError, match="view"):
        store.append("s", [msg("user", "x")], view="no spaces allowed")


def test_fingerprints_ignore_key_order_but_nothing_else() -> None:
    assert fingerprint({"role": "user", "content": "hi"}) == fingerprint({"content": "hi", "role": "user"})
    assert fingerprint({"role": "user", "content": "hi"}) != fingerprint({"role": "user", "content": "hi "})
    assert fingerprint({"role": "user", "content": 1}) != fingerprint({"role": "user", "content": 1.5})
    assert len(fingerprint({"role": "user", "content": "\ud800 lone surrogate"})) == 32


def test_fingerprints_ignore_prompt_cache_markers_that_frameworks_move_between_calls() -> None:
    plain = msg("user", "hi")
    assert fingerprint({**plain, "cache_breakpoint": True}) == fingerprint(plain)  # CrewAI
    blocks = msg("user", [{"type": "text", "text": "hi"}])
    marked = msg("user", [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}])
    assert fingerprint(marked) == fingerprint(blocks)  # Anthropic prompt caching
    assert fingerprint(marked) != fingerprint(plain)


def test_a_session_history_written_with_cache_markers_aligns_with_the_same_messages_without(
    store: SessionStore,
) -> None:
    from ctxlife.sessions.recording import recorder_for

    recorder = recorder_for(store)
    first = [msg("user", "q0", cache_breakpoint=True)]
    recorder.record("cache", first)
    later = [msg("user", "q0"), msg("assistant", "a0", cache_breakpoint=True)]
    assert [r.message["content"] for r in recorder.record("cache", later)] == ["a0"]
    assert store.head("cache") == 2


def test_if_head_appends_only_when_nothing_was_appended_meanwhile(store: SessionStore) -> None:
    store.append("s", [msg("user", "q0")], if_head=0)
    with pytest.raises(AppendConflictError) as info:
        store.append("s", [msg("user", "late")], if_head=0)
    assert info.value.head == 1 and "after 0" in str(info.value)
    with pytest.raises(AppendConflictError):
        store.append("s", [], if_head=5)
    assert store.append("s", [], if_head=1) == []
    assert [r.message["content"] for r in store.read_records("s")] == ["q0"]


def test_concurrent_conditional_writers_never_share_a_sequence_number(store: SessionStore, store_url: str) -> None:
    """Eight threads, each with its own store handle, append with if_head and retry on conflict."""
    errors: list[BaseException] = []

    def worker(w: int) -> None:
        own = open_store(store_url)
        try:
            for i in range(15):
                while True:
                    head = own.head("c")
                    try:
                        own.append("c", [msg("user", f"{w}-{i}")], view=f"w{w}", if_head=head)
                        break
                    except AppendConflictError:
                        continue
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    records = store.read_records("c")
    assert [r.seq for r in records] == list(range(1, 121))
    assert sorted(r.message["content"] for r in records) == sorted(f"{w}-{i}" for w in range(8) for i in range(15))
    for w in range(8):  # each writer's own order is kept
        assert [r.message["content"] for r in records if r.view == f"w{w}"] == [f"{w}-{i}" for i in range(15)]


def test_a_message_that_is_not_json_is_quarantined_and_never_blocks_the_batch(store: SessionStore) -> None:
    bad = [
        msg("assistant", None, tool_calls=[{"id": "c1", "function": {"name": "f", "arguments": {"x": float("nan")}}}]),
        msg("tool", b"\xffbinary result", tool_call_id="c1"),
        msg("user", {"a set"}),
    ]
    with structlog.testing.capture_logs():
        records = store.append("q", [msg("user", "before"), *bad, msg("user", "after")])
    assert [r.seq for r in records] == [1, 2, 3, 4, 5]
    stored = store.read_records("q")
    assert [r.quarantined is None for r in stored] == [True, False, False, False, True]
    assert "non-finite" in stored[1].quarantined and "bytes" in stored[2].quarantined
    assert stored[1].message["tool_calls"][0]["function"]["arguments"] == {"x": "NaN"}
    assert stored[2].message["content"] == "\ufffdbinary result"
    assert stored[3].message["content"] == ["a set"] or stored[3].message["content"] == "{'a set'}"
    # The identity of the original message is the identity of its safe form: alignment still finds it.
    assert [r.fingerprint for r in stored[1:4]] == [fingerprint(m) for m in bad]


def test_each_view_has_its_own_snapshot(store: SessionStore) -> None:
    store.save_snapshot(Snapshot(session_id="v", messages=[msg("user", "default")], raw_length=1))
    store.save_snapshot(
        Snapshot(session_id="v", view="writer.t1", messages=[msg("user", "writer")], raw_length=2, updated_at=5.0)
    )
    assert store.load_snapshot("v").messages == [msg("user", "default")]
    assert store.load_snapshot("v", "writer.t1").messages == [msg("user", "writer")]
    assert store.load_snapshot("v", "nobody") is None
    [info] = store.list_sessions()
    assert info.session_id == "v" and info.updated_at is not None and info.updated_at > 5.0
    assert store.delete("v")
    assert store.load_snapshot("v", "writer.t1") is None and store.list_sessions() == []


def test_view_ids_are_safe_and_keep_distinct_roles_distinct() -> None:
    assert view_id() == "" and view_id(None, None) == ""
    assert view_id("Researcher", 0) == "Researcher.0"
    a, b = view_id("Senior Researcher"), view_id("Senior-Researcher")
    assert a != b and a.startswith("Senior-Researcher-")
    assert view_id("研究员") != view_id("作家")
    for v in (a, b, view_id("研究员"), view_id("../x"), view_id("." * 5)):
        Snapshot(session_id="s", view=v, messages=[], raw_length=0)  # valid view names


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (("Senior Researcher",), "Senior-Researcher-74518d0a"),
        (("Researcher", 0), "Researcher.0"),
        (("研究员",), "v-6b67b631"),
        (("../x",), "x-d42ff05c"),
        (("." * 5,), "v-a357faf7"),
        (("a..b",), "a.b-80a0fd92"),
        (("-Writer-", "task 1"), "Writer-.task-1-205141b1"),
        (("", None, "ok"), "ok"),
        (("a" * 90 + " b",), "a" * 80 + "-1f1e163a"),
        (("x" * 300,), "x" * MAX_SESSION_ID_LENGTH),
        (("Xavier X",), "Xavier-X-7163b014"),
        (("r\ud800",), "r-f109d264"),
    ],
)
def test_view_ids_are_the_same_in_every_version(parts: tuple[Any, ...], expected: str) -> None:
    """A stored session's views are found again by name after an upgrade: a wrap()'s view names (a role,
    a task) are fixed values (make mutate, scope ids: mutants of view_id survived the test above)."""
    assert view_id(*parts) == expected


# -- stored data of other versions -----------------------------------------------------------------


def test_a_sqlite_database_of_schema_2_is_upgraded_and_keeps_its_history(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with open_store(f"sqlite:///{path}") as store:
        store.append("s", [msg("user", "q0"), msg("assistant", "a0")])
    with sqlite3.connect(path) as conn:  # what schema 2 held: no token counts
        conn.executescript(
            "ALTER TABLE ctxlife_raw DROP COLUMN tokens; ALTER TABLE ctxlife_raw DROP COLUMN token_encoding;"
            "UPDATE ctxlife_meta SET value = '2' WHERE key = 'schema_version';"
        )
    conn.close()
    with open_store(f"sqlite:///{path}") as store:
        assert [(r.seq, r.message["content"], r.tokens) for r in store.read_records("s")] == [
            (1, "q0", None),
            (2, "a0", None),
        ]
        assert store.append("s", [msg("user", "q1")], if_head=2)[0].seq == 3
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM ctxlife_meta WHERE key = 'schema_version'").fetchone() == ("3",)
    conn.close()


def test_data_of_ctxlife_0_1_is_not_read_as_records(tmp_path: Path) -> None:
    """0.1 was never released: its plain-message lines and its schema-1 database are refused, with the fix."""
    with open_store(f"file://{tmp_path / 'f'}") as store:
        store.append("s", [msg("user", "q0")])
    raw = tmp_path / "f" / "s_raw.jsonl"
    raw.write_text(json.dumps(msg("user", "old")) + "\n" + raw.read_text())
    with (
        open_store(f"file://{tmp_path / 'f'}") as store,
        pytest.raises(StoreError, match="corrupt at line 1: not a record"),
    ):
        store.read_records("s")
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            "CREATE TABLE ctxlife_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
            "INSERT INTO ctxlife_meta VALUES ('schema_version', '1');"
        )
    conn.close()
    with pytest.raises(StoreError, match=r"schema version 1; this ctxlife reads versions 2 to 3: start a new database"):
        with open_store(f"sqlite:///{path}") as store:
            store.append("s", [msg("user", "q0")])


# -- reading creates nothing; ttl --------------------------------------------------------------------


@pytest.mark.parametrize("store_kind", ["file", "sqlite"])
def test_opening_and_reading_create_nothing(store_url: str, tmp_path: Path) -> None:
    before = sorted(tmp_path.rglob("*"))
    with open_store(store_url) as store:
        assert store.list_sessions() == []
        assert store.read_records("s") == [] and store.head("s") == 0
        assert store.load_snapshot("s", "v") is None and store.get_blob("s", "k") is None
        assert store.delete("s") is False
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("store_kind", ["file", "sqlite"])
def test_ttl_expires_idle_sessions_as_a_whole(store_url: str) -> None:
    url = f"{store_url}?ttl=0.4"
    with open_store(url) as store:
        store.append("idle", [msg("user", "q0")])
        store.save_snapshot(Snapshot(session_id="idle", messages=[msg("user", "q0")], raw_length=1))
        store.put_blob("idle", "k", "v")
        store.append("busy", [msg("user", "b0")])
        time.sleep(0.25)
        store.append("busy", [msg("user", "b1")])  # a write keeps a session alive
        time.sleep(0.25)
        assert (
            store.read_records("idle") == []
            and store.load_snapshot("idle") is None
            and store.get_blob("idle", "k") is None
        )
        assert [r.message["content"] for r in store.read_records("busy")] == ["b0", "b1"]
        assert [i.session_id for i in store.list_sessions()] == ["busy"]
        assert store.append("idle", [msg("user", "again")])[0].seq == 1  # starts over, as in Redis
    with pytest.raises(StoreError, match="ttl"):
        open_store(f"{store_url}?ttl=soon")


def test_file_store_reads_only_new_bytes_and_notices_a_rewrite_by_another_process(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    reader, writer = open_store(url), open_store(url)
    writer.append("s", [msg("user", "x" * 1000) for _ in range(50)])
    assert len(reader.read_records("s")) == 50
    writer.append("s", [msg("user", "new")])
    assert [r.message["content"] for r in reader.read_records("s", after_seq=50)] == ["new"]
    # Another process drops the last record and appends a longer one: same file, different bytes
    # after the offset the reader remembered. The reader must notice.
    _drop_last_line(tmp_path / "s_raw.jsonl")
    writer.append("s", [msg("user", "replacement " * 50)])
    got = reader.read_records("s", after_seq=50)
    assert [(r.seq, r.message["content"][:11]) for r in got] == [(51, "replacement")]
    assert isinstance(got[0], RawRecord)


def _drop_last_line(path: Path) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]))
