"""The postgres store read back as the file store reads the same history, and what it keeps in which
table and column (read with plain SQL from outside the store): the cases scope `stores-postgres` of
`make mutate` found no test for (docs/mutation/stores-postgres.md).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator
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
    with open_store(url) as store:
        with _waiting_for_the_migrate_lock(url, store.migrate) as (_, done):
            pass  # the migrate waits on that lock (the server says so): it has neither finished nor failed
        assert done == [(None, 2)]


#: Sessions of this database waiting for an advisory lock (pg_locks: one row per waiting lock request).
_WAITING = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


@contextlib.contextmanager
def _waiting_for_the_migrate_lock(url: str, operation: Callable[[], Any]) -> Iterator[tuple[Any, list[Any]]]:
    """Hold the advisory lock a first write and `ctxlife store migrate` take (on an outside connection),
    run ``operation`` in a thread, and once the server shows it waiting for the lock (neither finished nor
    failed) yield that connection and a list that gets what ``operation`` returned or raised; on exit,
    release the lock and wait for the thread."""
    import psycopg

    from ctxlife.sessions.postgres import _key

    base = url.split("?", 1)[0]
    lock = _key("migrate", url.rsplit("schema=", 1)[1])
    done: list[Any] = []

    def run() -> None:
        try:
            done.append(operation())
        except Exception as exc:  # noqa: BLE001 - shown by the caller's assertion
            done.append(exc)

    with psycopg.connect(base, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (lock,))
        worker = threading.Thread(target=run)
        worker.start()
        try:
            while worker.is_alive() and pg_sql(base, _WAITING) == [(0,)]:
                worker.join(0.02)
            assert not done and pg_sql(base, _WAITING) == [(1,)], done
            yield holder, done
        finally:
            holder.execute("SELECT pg_advisory_unlock(%s)", (lock,))
            worker.join(30)


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
        bogus = '{"ctxlife_event": "%s", "message": {}, "target": 2}' % ("x" * 200)  # an op no ctxlife wrote
        pg_sql(url, "UPDATE {s}.ctxlife_raw SET json = %s WHERE seq = 3", (bogus,))
        with structlog.testing.capture_logs() as logs:
            slots = store.read_slots("s")  # a recorder's read: lenient
        assert [s.seq for s in slots] == [1, 2]
        skipped = [e for e in logs if e["event"] == "raw_record_skipped"]
        assert len(skipped) == 1 and skipped[0]["session_id"] == "s" and skipped[0]["seq"] == 3, skipped
        # what is wrong, cut to 120 characters (the op is stored text of any length)
        assert skipped[0]["problem"] == f"malformed ctxlife_event record (op {'x' * 200!r}, target 2)"[:120]
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


def test_with_a_ttl_every_read_returns_a_live_sessions_rows_and_its_last_activity(url: str) -> None:
    # A TTL adds a condition to every read (the session, named through the read's own table, is alive):
    # a session written a moment ago is read in full, as without one.
    with open_store(f"{url}&ttl=1h") as store:
        store.append("s", [msg("a"), msg("b")])
        store.append("s", [msg("lane one")], view="lane")
        store.save_snapshot(Snapshot(session_id="s", messages=[msg("a")], raw_length=1, updated_at=5.0))
        store.save_snapshot(
            Snapshot(session_id="s", view="lane", messages=[msg("lane one")], raw_length=3, updated_at=7.0)
        )
        store.put_blob("s", "k", "v")
        assert store.head("s") == 3
        assert [r.message["content"] for r in store.read_records("s")] == ["a", "b", "lane one"]
        assert [r.seq for r in store.read_records("s", 1, view="lane")] == [3]
        assert [s.seq for s in store.read_slots("s")] == [1, 2, 3]
        lane = store.load_snapshot("s", "lane")
        assert lane is not None and lane.messages == [msg("lane one")]
        assert store.get_blob("s", "k") == "v"
        [info] = store.list_sessions()
    # the newest snapshot of any view; the last activity is the server's clock at the last write
    assert (info.session_id, info.message_count, info.updated_at) == ("s", 3, 7.0)
    [(touched,)] = pg_sql(url, "SELECT touched_at FROM {s}.ctxlife_sessions")
    assert isinstance(touched, float) and info.last_active == touched


def test_a_read_returns_each_record_as_its_append_returned_it(url: str) -> None:
    # every field: the token count and its encoding, the time, the quarantine, the view, the edit
    with open_store(url) as store:
        written = store.append("s", [msg("a"), {"role": "user", "content": b"raw bytes"}, msg("c", "assistant")])
        written += store.append("s", [msg("lane one")], view="lane")
        written += store.append_events("s", [Event(REPLACE, msg("c, edited"), 3)])
        # the precondition: counted records, a quarantined one and an edit are among them
        assert all(isinstance(r.tokens, int) and r.tokens > 0 and r.token_encoding for r in written[:4])
        assert written[1].quarantined and written[4].op == REPLACE
        assert store.read_records("s") == written
        assert store.read_records("s", 2, view="lane") == [written[3]]


def test_a_read_of_more_records_than_one_decoding_chunk_names_or_skips_each_corrupt_one(url: str) -> None:
    import structlog

    from ctxlife.sessions.postgres import _DECODE_CHUNK

    n = _DECODE_CHUNK + 2  # two chunks: the second holds the last two records
    with open_store(url) as store:
        store.append("s", [msg(str(i)) for i in range(1, n + 1)])
        pg_sql(url, "UPDATE {s}.ctxlife_raw SET json = 'not json' WHERE seq = 5")
        pg_sql(url, "UPDATE {s}.ctxlife_raw SET json = '1, 2' WHERE seq = %s", (n - 1,))  # two values in one
        with pytest.raises(StoreError) as info:
            store.read_records("s")  # a strict read names the first
        with structlog.testing.capture_logs() as logs:
            records = store.read_records("s", strict=False)
    assert str(info.value) == f"raw record seq=5 of session 's' in {store.url} is corrupt: not a JSON object"
    assert [r.seq for r in records] == [i for i in range(1, n + 1) if i not in (5, n - 1)]
    assert all(r.message == msg(str(r.seq)) for r in records)
    skipped = [(e["store"], e["seq"], e["problem"]) for e in logs if e["event"] == "raw_record_skipped"]
    assert skipped == [("postgres", 5, "not a JSON object"), ("postgres", n - 1, "not a JSON object")]


def test_a_corrupt_snapshot_is_named_by_its_view_its_session_and_the_store(url: str) -> None:
    with open_store(url) as store:
        for view in ("", "lane"):
            store.save_snapshot(Snapshot(session_id="s", view=view, messages=[msg("a")], raw_length=0))
        pg_sql(url, "UPDATE {s}.ctxlife_snapshots SET json = 'not json'")
        with pytest.raises(StoreError) as lane:
            store.load_snapshot("s", "lane")
        with pytest.raises(StoreError) as default:
            store.load_snapshot("s")
    assert str(lane.value).startswith(f"snapshot of view 'lane' of session 's' in {store.url} is not valid JSON")
    assert str(default.value).startswith(f"snapshot of session 's' in {store.url} is not valid JSON")


def test_the_first_write_creates_the_schema_once_and_says_which(url: str) -> None:
    import structlog

    schema = url.rsplit("schema=", 1)[1]
    with structlog.testing.capture_logs() as logs:
        with open_store(url) as store:
            store.append("s", [msg("a")])
            store.append("t", [msg("b")])
        with open_store(url) as other:
            other.append("u", [msg("c")])
    steps = [
        (e["event"], e["store"], e["schema"], e["version"]) for e in logs if e["event"].startswith("postgres_schema")
    ]
    assert steps == [
        ("postgres_schema_created", "postgres", schema, 1),
        ("postgres_schema_migrated", "postgres", schema, 2),
    ]


def test_migrating_indexes_each_sessions_history_with_its_counts_and_skips_a_corrupt_record(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import structlog

    from ctxlife.sessions import pg_connect

    with open_store(url) as store:
        store.append("a", [msg("the harbour ferry leaves at nine"), msg("noted", "assistant")])
        store.append("b", [msg("the gate code is 1234"), msg("a broken record")])
    # back to what schema version 1 wrote (no recall rows), with one record damaged since
    pg_sql(url, "DROP TABLE {s}.ctxlife_recall_docs, {s}.ctxlife_recall")
    pg_sql(url, "ALTER TABLE {s}.ctxlife_sessions DROP COLUMN recall_docs, DROP COLUMN recall_len")
    pg_sql(url, "DELETE FROM {s}.ctxlife_schema_version WHERE version > 1")
    pg_sql(url, "UPDATE {s}.ctxlife_raw SET json = 'not json' WHERE session_id = 'b' AND seq = 2")
    monkeypatch.setattr(pg_connect.SharedPool, "_pools", {})  # a new process: nothing known ready
    with structlog.testing.capture_logs() as logs, open_store(url) as store:
        assert store.migrate() == (1, 2)  # type: ignore[attr-defined]
    assert pg_sql(url, "SELECT session_id, slot, text FROM {s}.ctxlife_recall ORDER BY 1, 2") == [
        ("a", 1, "the harbour ferry leaves at nine"),
        ("a", 2, "noted"),
        ("b", 1, "the gate code is 1234"),
    ]
    counts = "SELECT session_id, recall_docs, recall_len FROM {s}.ctxlife_sessions ORDER BY 1"
    assert pg_sql(url, counts) == pg_sql(
        url, "SELECT session_id, count(*), sum(len) FROM {s}.ctxlife_recall_docs GROUP BY 1 ORDER BY 1"
    )
    assert [(e["event"], e.get("session_id"), e.get("seq")) for e in logs] == [
        ("raw_record_skipped", "b", 2),
        ("postgres_schema_migrated", None, None),
    ]


def expired(url: str, names: str, count: int) -> None:
    """``count`` sessions ``names1``, ``names2``, ... last written at the epoch (long expired)."""
    pg_sql(
        url,
        "INSERT INTO {s}.ctxlife_sessions (session_id, head, touched_at) "
        "SELECT %s || g, 0, 0 FROM generate_series(1, %s) g",
        (names, count),
    )


def sessions(url: str) -> list[str]:
    return [str(r[0]) for r in pg_sql(url, "SELECT session_id FROM {s}.ctxlife_sessions ORDER BY 1")]


def test_a_sweep_deletes_every_expired_session_batch_after_batch_and_says_how_many(url: str) -> None:
    import structlog

    from ctxlife.sessions.postgres import _SWEEP_BATCH

    n = 2 * _SWEEP_BATCH + 1  # three batches, the last one short
    with open_store(f"{url}&ttl=60") as store:
        assert store.sweep() == 0  # no tables yet: nothing to sweep, nothing created
        store.append("fresh", [msg("x")])
        expired(url, "old", n)
        pg_sql(url, "UPDATE {s}.ctxlife_sessions SET touched_at = touched_at - 30 WHERE session_id = 'fresh'")
        with open_store(url) as forever:  # no ttl: nothing expires
            assert forever.sweep() == 0 and len(sessions(url)) == n + 1
        with structlog.testing.capture_logs() as logs:
            assert store.sweep() == n
            assert store.sweep() == 0
    assert sessions(url) == ["fresh"]  # idle 30 s of its 60
    swept = [(e["store"], e["count"], e["ttl_seconds"]) for e in logs if e["event"] == "sessions_swept"]
    assert swept == [("postgres", n, 60.0)]


def test_a_sweep_without_a_free_connection_names_itself(url: str) -> None:
    with open_store(f"{url}&ttl=60&pool_max=1&pool_min=0&pool_timeout=0.2") as store:
        store.append("s", [msg("a")])
        with store.lock("other"):
            for call in (store.sweep, store.list_sessions):  # a listing sweeps first
                with pytest.raises(StoreError) as info:
                    call()
                assert str(info.value).startswith(
                    f"postgres store {store.url}: sweep failed: couldn't get a connection"
                )


def test_a_write_sweeps_the_expired_sessions_once_per_sweep_interval_and_a_listing_always(url: str) -> None:
    with open_store(url) as forever:
        forever.append("kept", [msg("x")])  # the tables exist
    expired(url, "first", 2)
    with open_store(f"{url}&ttl=60") as store:
        assert store.head("kept") == 1 and len(sessions(url)) == 3  # a read sweeps nothing
        store.append("s", [msg("a")])  # the first write of the process sweeps
        assert sessions(url) == ["kept", "s"]
        expired(url, "second", 2)
        store.append("s", [msg("b")])  # the next write, within SWEEP_EVERY (300 s) of it, does not
        assert sessions(url) == ["kept", "s", "second1", "second2"]
        assert [i.session_id for i in store.list_sessions()] == ["kept", "s"]  # a listing sweeps
    assert sessions(url) == ["kept", "s"]


def pool_settings(store: Any) -> tuple[Any, ...]:
    pool = store._shared.pool
    return (pool.min_size, pool.max_size, pool.max_idle, pool.max_lifetime, pool.timeout)


def test_a_store_opens_its_pool_with_the_documented_defaults_or_the_urls_options(url: str) -> None:
    from urllib.parse import parse_qsl, urlsplit

    with open_store(url) as store:
        pool = store._shared.pool  # type: ignore[attr-defined]
        assert pool_settings(store) == (1, 10, 60.0, 1800.0, 10.0) and store.pool_timeout == 10.0  # type: ignore[attr-defined]
        # (one pool per database and settings, shared by the stores of every schema: named after the first one's URL)
        assert pool.kwargs == {"autocommit": True} and pool.name.split("?")[0] == f"ctxlife {store.url}".split("?")[0]
        # ctxlife's options are taken out; an unreachable database fails a call after 5 s, never hangs it
        assert dict(parse_qsl(urlsplit(pool.conninfo).query)) == {"connect_timeout": "5"}
        assert urlsplit(pool.conninfo).scheme == "postgresql" and store.ttl is None  # type: ignore[attr-defined]
    options = "pool_min=0&pool_max=3&pool_idle=5&pool_lifetime=90.5&pool_timeout=2&pgbouncer=on&connect_timeout=9"
    with open_store(f"{url}&{options}&ttl=1h") as store:
        pool = store._shared.pool  # type: ignore[attr-defined]
        assert pool_settings(store) == (0, 3, 5.0, 90.5, 2.0) and store.ttl == 3600.0  # type: ignore[attr-defined]
        # behind PgBouncer (transaction mode): no server-side prepared statements
        assert pool.kwargs == {"autocommit": True, "prepare_threshold": None}
        assert dict(parse_qsl(urlsplit(pool.conninfo).query)) == {"connect_timeout": "9"}
        store.append("s", [msg("a")])
        assert [r.seq for r in store.read_records("s")] == [1]
    with open_store(f"{url}&pool_max=1&pool_idle=0&pgbouncer=off&pool_timeout=") as store:  # the limits allowed
        assert pool_settings(store) == (1, 1, 0.0, 1800.0, 10.0)
        assert store._shared.pool.kwargs == {"autocommit": True}  # type: ignore[attr-defined]


def test_a_bad_url_option_is_refused_saying_what_it_must_be(url: str) -> None:
    from ctxlife.events import redact_url

    base = url.split("?", 1)[0]
    cases = {
        "schema=Bad-Name": "schema='Bad-Name' must be 1-63 lowercase letters, digits or '_', not starting with a digit",
        "schema=pg_mine": "schema='pg_mine': names starting with 'pg_' are reserved",
        "pool_max=0": "need 0 <= pool_min <= pool_max and pool_max >= 1",
        "pool_min=3&pool_max=2": "need 0 <= pool_min <= pool_max and pool_max >= 1",
        "pool_max=2.5": "pool_max='2.5' must be a whole number >= 0",
        "pool_min=-1": "pool_min='-1' must be a whole number >= 0",
        "pool_idle=-0.5": "pool_idle='-0.5' must be a number of seconds >= 0",
        "pool_lifetime=soon": "pool_lifetime='soon' must be a number of seconds >= 0",
        "pool_timeout=inf": "pool_timeout='inf' must be a number of seconds >= 0",
    }
    for option, text in cases.items():
        with pytest.raises(StoreError) as info:
            open_store(f"{base}?{option}")
        assert str(info.value) == f"postgres store {redact_url(f'{base}?{option}')}: {text}"
    with pytest.raises(StoreError) as info:
        open_store(f"{base}?pgbouncer=maybe")
    assert (
        str(info.value)
        == f"store URL {redact_url(f'{base}?pgbouncer=maybe')!r}: option pgbouncer='maybe' must be true or false"
    )


def test_a_connection_the_server_dropped_while_idle_is_replaced_not_handed_out(url: str) -> None:
    name = f"ctxlife-drop-{uuid.uuid4().hex[:8]}"
    with open_store(f"{url}&pool_min=1&pool_max=1&application_name={name}") as store:
        store.append("s", [msg("a")])
        dropped = pg_sql(
            url, "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE application_name = %s", (name,)
        )
        assert dropped == [(True,)]  # the precondition: the pool's one connection is gone
        assert [r.message for r in store.read_records("s")] == [msg("a")]


def test_a_first_write_waits_for_a_worker_creating_the_schema_and_then_creates_nothing(url: str) -> None:
    # Workers starting together: the first write of each takes the advisory lock `ctxlife store migrate`
    # takes, and looks again once it has it: the schema another worker created meanwhile is used as it is.
    import structlog

    with open_store(url) as store, open_store(url) as creator:
        with (
            structlog.testing.capture_logs() as logs,
            _waiting_for_the_migrate_lock(url, lambda: store.append("s", [msg("a")])) as (holder, done),
            holder.transaction(),  # the other worker creates the schema meanwhile
        ):
            creator._create_v1(holder)  # type: ignore[attr-defined]
            creator._upgrade(holder, 1)  # type: ignore[attr-defined]
    assert [[r.seq for r in records] for records in done] == [[1]], done
    assert pg_sql(url, "SELECT version FROM {s}.ctxlife_schema_version ORDER BY version") == [(1,), (2,)]
    # the schema was created once: by the other worker (on the holder's connection), not by the write
    assert [e["event"] for e in logs if e["event"].startswith("postgres_schema")] == [
        "postgres_schema_created",
        "postgres_schema_migrated",
    ]


def test_a_blob_that_is_not_text_is_refused_naming_the_blob_and_its_session(url: str) -> None:
    with open_store(url) as store:
        with pytest.raises(StoreError) as info:
            store.put_blob("s", "out-1", b"bytes")  # type: ignore[arg-type]
        assert str(info.value) == "blob 'out-1' of session 's' must be a str, got bytes"
        with pytest.raises(StoreError) as info:
            store.put_blob("s", "out-1", "\ud800")
        assert str(info.value).startswith("blob 'out-1' of session 's' is not valid Unicode text (lone surrogates)")
        assert store.get_blob("s", "out-1") is None


def test_a_damaged_token_count_is_not_used(url: str) -> None:
    # a count without its encoding, or below 0, is read as no count (the message is counted when used)
    with open_store(url) as store:
        written = store.append("s", [msg("a"), msg("b"), msg("c")])
        assert all(r.tokens for r in written)  # the precondition: every record was counted
        pg_sql(url, "UPDATE {s}.ctxlife_raw SET token_encoding = NULL WHERE seq = 1")
        pg_sql(url, "UPDATE {s}.ctxlife_raw SET tokens = -1 WHERE seq = 2")
        read = store.read_records("s")
    assert [(r.tokens, r.token_encoding) for r in read] == [
        (None, None),
        (None, None),
        (written[2].tokens, written[2].token_encoding),
    ]
