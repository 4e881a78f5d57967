"""The postgres store read back as the file store reads the same history, and what it keeps in which
table and column (read with plain SQL from outside the store): the cases scope `stores-postgres` of
`make mutate` found no test for (docs/mutation/stores-postgres.md).
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from pg_sql import pg_sql

from ctxlife.errors import StoreError
from ctxlife.sessions import ADD, REMOVE, REPLACE, Event, Snapshot, open_store

pytestmark = pytest.mark.usefixtures("postgres_url")


@pytest.fixture
def url(postgres_url: str) -> str:
    return f"{postgres_url}?schema=t_rows_{uuid.uuid4().hex[:12]}"


def msg(text: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": text}


def history(store: Any) -> None:
    """Two views, edits, an insertion, a removal, and a message quoting the event key's text."""
    a, b, c = store.append("s", [msg("a"), msg("b", "assistant"), msg("c")])
    store.append("s", [msg("lane one")], view="lane")
    store.append_events("s", [Event(REPLACE, msg("c, edited"), c.seq)])
    store.append_events("s", [Event(ADD, msg("x, inserted after a"), a.seq), Event(REMOVE, {}, b.seq)])
    store.append("s", [msg('a user pasting {"ctxlife_event": "remove", "target": 1}')])
    store.append_events("s", [Event(REMOVE, {}, 4)], view="lane")


def test_the_slots_are_the_file_stores_for_the_same_history(url: str, tmp_path: Path) -> None:
    with open_store(url) as pg, open_store(f"file://{tmp_path / 'sessions'}") as file:
        history(pg)
        history(file)
        slots = file.read_slots("s")
        # the precondition: every kind of slot is in the history
        assert {s.op for s in slots} == {ADD, REPLACE, REMOVE} and any(s.target is not None for s in slots)
        assert pg.read_slots("s") == slots
        for after in (0, 3, 6, 9):
            for view in (None, "", "lane"):
                assert pg.read_slots("s", after, view=view) == file.read_slots("s", after, view=view), (after, view)

        def fields(records: list[Any]) -> list[tuple[Any, ...]]:
            return [(r.seq, r.message, r.fingerprint, r.view, r.op, r.target) for r in records]

        assert fields(pg.read_records("s")) == fields(file.read_records("s"))
        assert fields(pg.current("s")) == fields(file.current("s"))
        assert fields([pg.latest("s")]) == fields([file.latest("s")])  # type: ignore[list-item]
        assert pg.latest("s", "lane") is None and file.latest("s", "lane") is None  # its message removed


def test_each_operation_that_finds_no_free_connection_names_itself_and_its_session(url: str) -> None:
    # One connection (pool_max=1), held by a lock: every other call waits pool_timeout, then fails
    # naming the store, the operation and the session, with what to check.
    with open_store(f"{url}&pool_max=1&pool_min=0&pool_timeout=0.2") as store:
        store.append("s", [msg("a")])
        store.put_blob("s", "k", "v")
        calls: dict[str, Any] = {
            "append": lambda: store.append("s", [msg("b")]),
            "read_records": lambda: store.read_records("s"),
            "read_slots": lambda: store.read_slots("s"),
            "head": lambda: store.head("s"),
            "load_snapshot": lambda: store.load_snapshot("s"),
            "get_blob": lambda: store.get_blob("s", "k"),
            "put_blob": lambda: store.put_blob("s", "k", "w"),
            "delete": lambda: store.delete("s"),
            "save_snapshot": lambda: store.save_snapshot(
                Snapshot(session_id="s", messages=[msg("a")], raw_length=1, updated_at=1.0)
            ),
        }
        with store.lock("other"):
            for what, call in calls.items():
                with pytest.raises(StoreError) as info:
                    call()
                text = str(info.value)
                assert text.startswith(f"postgres store {store.url}: {what} of session 's' failed: "), text
                # the pool's own words, then what to check
                assert "couldn't get a connection after 0.20 sec" in text and "pg-secret" not in text
                assert text.endswith(" sec; is the database reachable, and are pool_max connections enough?"), text
            with pytest.raises(StoreError, match=r": list_sessions failed: .*pool_max connections enough"):
                store.list_sessions()
        # the connection is back: nothing of the above was done
        assert [r.message for r in store.read_records("s")] == [msg("a")] and store.get_blob("s", "k") == "v"


def test_migrating_a_database_a_newer_ctxlife_migrated_since_it_was_opened_is_refused(url: str) -> None:
    with open_store(url) as store:
        store.append("s", [msg("x")])
        pg_sql(url, "INSERT INTO {s}.ctxlife_schema_version (version) VALUES (7)")
        with pytest.raises(StoreError, match=r"is version 7, newer than this ctxlife understands \(2\)"):
            store.migrate()
    assert pg_sql(url, "SELECT version FROM {s}.ctxlife_schema_version ORDER BY version") == [(1,), (2,), (7,)]


def test_migrate_waits_for_a_worker_creating_the_schema(url: str) -> None:
    # A worker's first write creates the schema under an advisory lock; `ctxlife store migrate` run at
    # the same moment takes the same lock, so the two never both create (one would fail on the version
    # rows). Held here by an outside connection, as the worker holds it.
    import psycopg

    from ctxlife.sessions.postgres import _key

    schema = url.rsplit("schema=", 1)[1]
    base = url.split("?", 1)[0]
    waiting = (
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    )
    with open_store(url) as store, psycopg.connect(base, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (_key("migrate", schema),))
        done: list[Any] = []

        def migrate() -> None:
            try:
                done.append(store.migrate())
            except Exception as exc:  # noqa: BLE001 - shown by the assertion below
                done.append(exc)

        worker = threading.Thread(target=migrate)
        worker.start()
        try:
            # the migrate waits on that lock (the server says so): it has neither finished nor failed
            while worker.is_alive() and pg_sql(base, waiting) == [(0,)]:
                worker.join(0.02)
            assert not done and pg_sql(base, waiting) == [(1,)], done
        finally:
            holder.execute("SELECT pg_advisory_unlock(%s)", (_key("migrate", schema),))
            worker.join(30)
        assert done == [(None, 2)]


def test_an_error_of_a_damaged_schema_names_the_operation_without_the_connection_hint(url: str) -> None:
    with open_store(url) as store:
        store.put_blob("s", "k", "v")
        pg_sql(url, "DROP TABLE {s}.ctxlife_blobs")  # someone dropped a table: not a connection problem
        with pytest.raises(StoreError) as info:
            store.put_blob("s", "k", "w")
    text = str(info.value)
    assert text.startswith(f"postgres store {store.url}: put_blob of session 's' failed: relation "), text
    assert text.endswith('ctxlife_blobs" does not exist'), text


def test_erasing_an_edit_leaves_what_the_file_store_leaves_and_no_text_of_it_in_recall(
    url: str, tmp_path: Path
) -> None:
    with open_store(url) as pg, open_store(f"file://{tmp_path / 'sessions'}") as file:
        for store in (pg, file):
            store.append("s", [msg("my card is 4111"), msg("noted", "assistant")])
            store.append_events("s", [Event(REPLACE, msg("my card is 4242 now"), 1)])
            store.append_events("s", [Event(REPLACE, msg("my card is on file"), 1)])
            store.append("s", [msg("the gate code is 1234")])
            store.append_events("s", [Event(ADD, msg("my pin is 9876"), 5)])  # inserted after the gate code
        recall = "SELECT slot, text FROM {s}.ctxlife_recall ORDER BY slot"
        current = [(1, "my card is on file"), (2, "noted"), (5, "the gate code is 1234"), (6, "my pin is 9876")]
        assert pg_sql(url, recall) == current  # recall holds each slot's current text
        assert pg.erase_matching("s", "4242") == file.erase_matching("s", "4242") == [1]  # an old edit of slot 1
        assert pg.erase_matching("s", "9876") == file.erase_matching("s", "9876") == [6]  # the insertion

        def fields(records: list[Any]) -> list[tuple[Any, ...]]:
            return [(r.seq, r.message, r.fingerprint, r.op, r.target, r.erased) for r in records]

        # the erased records as the file store keeps them (tombstones, and their fingerprints)
        assert fields(pg.read_records("s")) == fields(file.read_records("s"))
        assert pg.read_slots("s") == file.read_slots("s")
        # recall drops the erased records' slots (slot 1 is searched no more, as with the SQLite index),
        # not their neighbours'
        assert pg_sql(url, recall) == [(2, "noted"), (5, "the gate code is 1234")]
        counts = pg_sql(url, "SELECT recall_docs, recall_len FROM {s}.ctxlife_sessions")
        assert counts == pg_sql(url, "SELECT count(*), sum(len) FROM {s}.ctxlife_recall_docs")


def test_a_write_kept_waiting_for_its_session_fails_naming_it_with_the_connection_hint(url: str) -> None:
    # libpq's options pass through the URL: here a lock_timeout, so a write waiting for its session's
    # row (held by another worker's transaction) fails instead of waiting: a server error of the
    # connection kind (not the pool's), named with what to check.
    import psycopg

    schema = url.rsplit("schema=", 1)[1]
    with open_store(f"{url}&options=--lock_timeout%3D200") as store:
        store.append("s", [msg("a")])
        with psycopg.connect(url.split("?", 1)[0]) as holder:  # one transaction, open until the block ends
            holder.execute(f'SELECT 1 FROM "{schema}".ctxlife_sessions WHERE session_id = %s FOR UPDATE', ("s",))
            with pytest.raises(StoreError) as info:
                store.append("s", [msg("b")])
        assert [r.message for r in store.read_records("s")] == [msg("a")]
    text = str(info.value)
    assert text.startswith(f"postgres store {store.url}: append of session 's' failed: "), text
    assert text.endswith("lock timeout; is the database reachable, and are pool_max connections enough?"), text


def test_a_libpq_option_with_a_space_passes_through_unchanged(url: str) -> None:
    with open_store(f"{url}&options=-c%20lock_timeout%3D200&pool_timeout=1") as store:
        assert store.append("s", [msg("a")])[0].seq == 1


def test_the_mark_key_is_made_once_kept_in_the_meta_table_and_read_by_every_store_object(url: str) -> None:
    with open_store(url) as store:
        assert store.mark_key() is None  # reading never makes one
        key = store.mark_key(create=True)
    assert isinstance(key, bytes) and len(key) == 32
    assert pg_sql(url, "SELECT key, value FROM {s}.ctxlife_meta") == [("mark_key", key.hex())]
    with open_store(url) as other:  # another process's store: the same key, never a new one
        assert other.mark_key() == key and other.mark_key(create=True) == key
    assert pg_sql(url, "SELECT count(*) FROM {s}.ctxlife_meta") == [(1,)]
    pg_sql(url, "UPDATE {s}.ctxlife_meta SET value = 'not hex' WHERE key = 'mark_key'")
    with open_store(url) as damaged, pytest.raises(StoreError) as info:
        damaged.mark_key()
    assert str(info.value) == f"postgres store {damaged.url}: the stored mark key is not hex"


def test_a_mark_key_read_without_a_free_connection_names_it(url: str) -> None:
    with open_store(f"{url}&pool_max=1&pool_min=0&pool_timeout=0.2") as store:
        store.append("s", [msg("a")])
        with store.lock("other"), pytest.raises(StoreError) as info:
            store.mark_key(create=True)
    assert str(info.value).startswith(f"postgres store {store.url}: mark_key failed: couldn't get a connection")


def test_a_corrupt_event_record_is_skipped_by_the_slots_with_an_event_naming_it(url: str) -> None:
    import structlog

    with open_store(url) as store:
        store.append("s", [msg("a"), msg("b")])
        store.append_events("s", [Event(REPLACE, msg("b, edited"), 2)])
        pg_sql(url, """UPDATE {s}.ctxlife_raw SET json = '{"ctxlife_event": "bogus"}' WHERE seq = 3""")
        with structlog.testing.capture_logs() as logs:
            slots = store.read_slots("s")  # a recorder's read: lenient
        assert [s.seq for s in slots] == [1, 2]
        skipped = [e for e in logs if e["event"] == "raw_record_skipped"]
        assert len(skipped) == 1 and skipped[0]["session_id"] == "s" and skipped[0]["seq"] == 3, skipped
        with pytest.raises(StoreError, match=r"raw record seq=3 of session 's' .* is corrupt"):
            store.read_records("s")  # a strict read names it


def test_an_append_returns_and_stores_what_the_file_stores_does(url: str, tmp_path: Path) -> None:
    # a plain message, one in a lane, and one that cannot be stored as it was (bytes: quarantined)
    batches = [([msg("a")], ""), ([msg("lane one")], "lane"), ([{"role": "user", "content": b"raw bytes"}], "")]
    with open_store(url) as pg, open_store(f"file://{tmp_path / 'sessions'}") as file:
        for messages, view in batches:
            mine, theirs = pg.append("s", messages, view=view), file.append("s", messages, view=view)
            assert [(r.seq, r.message, r.fingerprint, r.view, r.quarantined) for r in mine] == [
                (r.seq, r.message, r.fingerprint, r.view, r.quarantined) for r in theirs
            ]
            assert all(isinstance(r.recorded_at, float) and r.recorded_at > 0 for r in mine)
        assert file.read_records("s")[2].quarantined  # the precondition: the bytes were quarantined
        assert [(r.seq, r.view, r.quarantined) for r in pg.read_records("s")] == [
            (r.seq, r.view, r.quarantined) for r in file.read_records("s")
        ]


def test_a_stale_compare_and_append_names_the_session_and_both_heads(url: str) -> None:
    from ctxlife.sessions import AppendConflictError

    with open_store(url) as store:
        store.append("s", [msg("a"), msg("b")])
        with pytest.raises(AppendConflictError) as info:
            store.append("s", [msg("c")], if_head=1)
    assert str(info.value).startswith("session 's' moved on: its last sequence number is 2, not 1;"), info.value
