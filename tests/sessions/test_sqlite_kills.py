"""The SQLite store's own behaviour outside the core's mutation scope (scope `stores-sqlite`,
docs/mutation/stores-sqlite.md): what the database holds after a write, an erase, a delete or a
migration, what a read returns, and the error a user sees. The database is read back with Python's
own ``sqlite3``, not through the store under test."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from ctxlife.errors import StoreError
from ctxlife.sessions import open_store
from ctxlife.sessions.snapshot import Snapshot
from ctxlife.testing import user

TABLES = ("ctxlife_snapshots", "ctxlife_raw", "ctxlife_sessions", "ctxlife_blobs", "ctxlife_calls", "ctxlife_locks")


def rows(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """``sql`` over the database file, read by another connection (as another program would)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def run(path: Path, *statements: str) -> None:
    """Statements another program runs on the database file (autocommitted)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def held(path: Path, session_id: str) -> dict[str, int]:
    """How many rows of each of the store's tables belong to ``session_id``."""
    return {t: rows(path, f"SELECT COUNT(*) FROM {t} WHERE session_id = ?", (session_id,))[0][0] for t in TABLES}


def a_full_session(store: Any, session_id: str) -> None:
    """Records in two views, a snapshot of each, a blob and a call record."""
    store.append(session_id, [user("a"), user("b")])
    store.append(session_id, [user("c")], view="w")
    store.save_snapshot(Snapshot(session_id=session_id, messages=[user("a")], raw_length=1))
    store.save_snapshot(Snapshot(session_id=session_id, view="w", messages=[user("c")], raw_length=3))
    store.put_blob(session_id, "k", "text")
    store.append_call(session_id, "", {"sent": 1})


# -- the error a user sees ---------------------------------------------------------------------------


def test_every_operation_names_itself_when_another_program_broke_the_database(tmp_path: Path) -> None:
    """Each failing statement's error says which operation failed and on which file (the store's tables
    dropped by another program; the schema version kept, so opening the file again does not remake them)."""
    path = tmp_path / "sessions.db"
    with open_store(f"sqlite:///{path}") as store:
        a_full_session(store, "s")
    run(path, *(f"DROP TABLE {t}" for t in TABLES))
    store = open_store(f"sqlite:///{path}?ttl=1h")
    plain = open_store(f"sqlite:///{path}")
    calls = [
        ("ttl check", lambda: store.head("s")),
        ("save_snapshot", lambda: plain.save_snapshot(Snapshot(session_id="s", messages=[], raw_length=0))),
        ("read_view", lambda: plain.read_view("s")),
        ("read_view", lambda: plain.read_view("s", messages_only=True)),
        ("read_slots", lambda: plain.read_slots("s")),
        ("head", lambda: plain.head("s")),
        ("append_call", lambda: plain.append_call("s", "", {"sent": 2})),
        ("read_calls", lambda: plain.read_calls("s")),
        ("list_sessions", lambda: plain.list_sessions()),
        ("delete", lambda: plain.delete("s")),
        ("put_blob", lambda: plain.put_blob("s", "k", "v")),
        ("get_blob", lambda: plain.get_blob("s", "k")),
    ]
    for what, call in calls:
        with pytest.raises(StoreError) as caught:
            call()
        assert str(caught.value).startswith(f"sqlite store {path}: {what} failed: no such table: ctxlife_"), what
    with pytest.raises(StoreError, match=rf"^sqlite store {path}: lock failed: no such table: ctxlife_locks$"):
        with plain.lock("s", timeout=1):
            pass
    store.close()
    plain.close()


def test_a_damaged_call_record_is_skipped_and_the_others_read(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with open_store(f"sqlite:///{path}") as store:
        assert [store.append_call("s", v, {"n": i}) for i, v in enumerate(["", "w", "", "w"])] == [1, 2, 3, 4]
        assert store.append_call("t", "", {"n": 9}) == 1  # numbered per session
        run(
            path,
            "UPDATE ctxlife_calls SET json = '{broken' WHERE n = 2",
            "UPDATE ctxlife_calls SET json = '[1]' WHERE n = 3",
        )
        with capture_logs() as logs:
            assert [(c.n, c.view, c.doc) for c in store.read_calls("s")] == [(1, "", {"n": 0}), (4, "w", {"n": 3})]
        broken = "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
        assert logs == [
            {
                "event": "call_record_skipped",
                "store": "sqlite",
                "session_id": "s",
                "call": n,
                "error": error,
                "log_level": "error",
            }
            for n, error in [(2, broken), (3, "not a JSON object but list")]
        ]
        assert [(c.n, c.doc) for c in store.read_calls("s", view="w")] == [(4, {"n": 3})]
        assert [(c.n, c.doc) for c in store.read_calls("s", view="")] == [(1, {"n": 0})]
        assert [(c.n, c.doc) for c in store.read_calls("t")] == [(1, {"n": 9})]
        assert store.read_calls("nobody") == []
        with pytest.raises(StoreError) as caught:
            store.append_call("s", "", {"x": float("nan")})
        assert str(caught.value) == (
            "call record of session 's' is not JSON-serializable: Out of range float values are not JSON compliant"
        )
        assert rows(path, "SELECT MAX(n) FROM ctxlife_calls WHERE session_id = 's'") == [(4,)]


# -- delete and the ttl --------------------------------------------------------------------------------


def test_delete_removes_every_row_of_the_session_and_its_derived_folder_only(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with open_store(f"sqlite:///{path}") as store:
        a_full_session(store, "s")
        a_full_session(store, "other")
        folder = store.derived_dir("s")
        assert folder == tmp_path / "sessions.db.derived" / "s"
        (folder / "index").mkdir(parents=True)
        (folder / "index" / "data").write_text("derived")
        before = held(path, "other")
        assert held(path, "s") == before and all(before[t] for t in TABLES if t != "ctxlife_locks")
        assert store.delete("s") is True
        assert held(path, "s") == dict.fromkeys(TABLES, 0)
        assert held(path, "other") == before
        assert not folder.exists() and (tmp_path / "sessions.db.derived").is_dir()
        assert store.delete("s") is False  # nothing left
        folder.mkdir(parents=True)  # only derived data left: still something deleted
        assert store.delete("s") is True and not folder.exists()
    fresh = tmp_path / "fresh.db"
    with open_store(f"sqlite:///{fresh}") as store:  # no database yet: only the derived folder
        folder = store.derived_dir("s")
        assert folder is not None
        assert store.delete("s") is False
        folder.mkdir(parents=True)
        assert store.delete("s") is True and not folder.exists() and not fresh.exists()


def test_a_write_to_an_expired_session_starts_it_over_in_every_table(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with open_store(f"sqlite:///{path}?ttl=1h") as store:
        a_full_session(store, "s")
        a_full_session(store, "other")
        folder = store.derived_dir("s")
        assert folder is not None
        folder.mkdir(parents=True)
        run(path, "UPDATE ctxlife_sessions SET touched_at = 0 WHERE session_id = 's'")
        assert store.head("s") == 0 and store.get_blob("s", "k") is None and store.read_calls("s") == []
        assert store.read_view("s") is None or store.read_view("s").messages == []  # type: ignore[union-attr]
        assert store.read_slots("s") == []
        assert held(path, "s")["ctxlife_raw"] == 3  # reads delete nothing
        with capture_logs() as logs:
            assert store.append_call("s", "", {"again": 1}) == 1  # the write starts the session over
        assert logs == [
            {
                "event": "session_expired",
                "store": "sqlite",
                "session_id": "s",
                "ttl_seconds": 3600.0,
                "log_level": "info",
            }
        ]
        counts = held(path, "s")
        assert counts == {**dict.fromkeys(TABLES, 0), "ctxlife_calls": 1, "ctxlife_sessions": 1}
        assert not folder.exists()
        assert held(path, "other")["ctxlife_raw"] == 3
        touched = rows(path, "SELECT touched_at FROM ctxlife_sessions WHERE session_id = 's'")[0][0]
        assert touched > 1_000_000_000  # marked active now


def test_a_listing_reports_each_sessions_head_snapshot_and_last_write_and_drops_the_expired(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.db"
    with open_store(f"sqlite:///{path}?ttl=1h") as store:
        a_full_session(store, "b")
        store.save_snapshot(Snapshot(session_id="a", messages=[], raw_length=0, updated_at=5.0))
        store.save_snapshot(Snapshot(session_id="a", view="w", messages=[], raw_length=0, updated_at=7.0))
        store.append("c", [user("x")])
        store.append("a-gone", [user("x")])  # listed after "a", before "b"
        run(path, "UPDATE ctxlife_sessions SET touched_at = 0 WHERE session_id = 'a-gone'")
        run(path, "UPDATE ctxlife_sessions SET touched_at = 1e12 WHERE session_id = 'a'")
        with capture_logs() as logs:
            infos = store.list_sessions()
        assert [i.session_id for i in infos] == ["a", "b", "c"]
        a, b, c = infos
        assert (a.message_count, a.updated_at, a.last_active) == (0, 7.0, 1e12)
        assert b.message_count == 3 and b.updated_at is not None and b.last_active is not None
        assert (c.message_count, c.updated_at) == (1, None)
        assert held(path, "a-gone") == dict.fromkeys(TABLES, 0)  # the listing deleted it
        assert logs == [
            {
                "event": "session_expired",
                "store": "sqlite",
                "session_id": "a-gone",
                "ttl_seconds": 3600.0,
                "log_level": "info",
            }
        ]


# -- opening a database --------------------------------------------------------------------------------


def test_a_url_opens_the_file_it_names_with_its_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("SQLite:///two%20words/s.db?busy_timeout=2.5&synchronous=normal&ttl=2h")
    assert (store.path, store.busy_timeout, store.synchronous, store.ttl) == (
        tmp_path / "two words" / "s.db",
        2.5,
        "NORMAL",
        7200.0,
    )
    assert store.url == f"sqlite:///{tmp_path / 'two words' / 's.db'}"
    store.append("s", [user("a")])
    assert rows(tmp_path / "two words" / "s.db", "SELECT seq FROM ctxlife_raw") == [(1,)]
    store.close()
    with open_store(f"sqlite:///{tmp_path}/z.db?busy_timeout=0") as never_waits:  # 0: fail at once when locked
        assert never_waits.busy_timeout == 0.0
    default = open_store(f"sqlite:///{tmp_path}/d.db")
    assert (default.busy_timeout, default.synchronous, default.ttl) == (30.0, "FULL", None)
    default.close()
    for url, error in [
        ("sqlite:///", "store URL 'sqlite:///' has no database path; e.g. sqlite:///sessions.db"),
        ("sqlite:///?ttl=1", "store URL 'sqlite:///?ttl=1' has no database path; e.g. sqlite:///sessions.db"),
        (
            "sqlite:///x.db?busy_timeout=soon",
            "store URL 'sqlite:///x.db?busy_timeout=soon': busy_timeout='soon' must be a number of seconds",
        ),
        (
            "sqlite:///x.db?busy_timeout=-1",
            "sqlite store: busy_timeout must be >= 0 seconds, got -1.0",
        ),
        ("sqlite:///x.db?synchronous=off", "sqlite store: synchronous must be FULL or NORMAL, got 'off'"),
        (
            "sqlite:///x.db?ttl=soon",
            "store URL 'sqlite:///x.db?ttl=soon': ttl='soon': 'soon' is not a duration; write a number of seconds "
            "or a number with a unit: s (seconds), m (minutes), h (hours), d (days), w (weeks), e.g. '30d' or '12h'",
        ),
        (
            "sqlite:///x.db?bogus=1",
            "store URL 'sqlite:///x.db?bogus=1': unknown option 'bogus' "
            "(known options: busy_timeout, synchronous, ttl)",
        ),
        (
            "sqlite:///file:x.db",
            "sqlite store needs a database file path, got 'file:x.db' (an in-memory database would not be "
            "shared between threads or processes); e.g. sqlite:///sessions.db",
        ),
    ]:
        with pytest.raises(StoreError) as caught:
            open_store(url)
        assert str(caught.value) == error, url
    assert not list(tmp_path.glob("x.db*"))
    from ctxlife.sessions.sqlite import SQLiteStore

    for path in ("", ":memory:"):
        with pytest.raises(StoreError) as caught:
            SQLiteStore(path)
        assert str(caught.value).startswith(f"sqlite store needs a database file path, got {path!r}")


def test_a_store_in_a_home_relative_path_opens_it_under_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with open_store("sqlite:///~/db/s.db") as store:
        store.append("s", [user("a")])
        assert store.path == tmp_path / "db" / "s.db"
    assert rows(tmp_path / "db" / "s.db", "SELECT COUNT(*) FROM ctxlife_raw") == [(1,)]


def test_the_first_write_makes_every_missing_folder_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "c" / "s.db"
    with open_store(f"sqlite:///{path}") as store:
        assert not (tmp_path / "a").exists()  # opening creates nothing
        store.put_blob("s", "k", "v")
    for folder in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"):
        assert folder.stat().st_mode & 0o777 == 0o700, folder
    assert path.stat().st_mode & 0o777 == 0o600
    (tmp_path / "blocked").write_text("a file where a folder should be")
    with open_store(f"sqlite:///{tmp_path / 'blocked' / 's.db'}") as store:
        with pytest.raises(StoreError) as caught:
            store.append("s", [user("a")])
    assert str(caught.value) == f"cannot create sqlite database {tmp_path / 'blocked' / 's.db'}: Not a directory"


def test_a_file_that_is_not_a_database_is_refused_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(b"not a database, " * 256)
    with pytest.raises(StoreError) as caught:
        open_store(f"sqlite:///{path}")
    assert str(caught.value) == f"cannot use sqlite database {path}: file is not a database"
    folder = tmp_path / "folder.db"
    folder.mkdir()
    with pytest.raises(StoreError) as caught:
        open_store(f"sqlite:///{folder}")
    assert str(caught.value) == f"cannot open sqlite database {folder}: unable to open database file"


def test_the_connection_waits_syncs_and_zeroes_freed_pages_as_configured(tmp_path: Path) -> None:
    """The settings the module docstring promises, as SQLite reports them on the store's connection."""
    for query, expected in [("?busy_timeout=2.5", (2500, 2)), ("?synchronous=NORMAL", (30000, 1))]:
        with open_store(f"sqlite:///{tmp_path / 's.db'}{query}") as store:
            store.append("s", [user("a")])
            conn = store._conn()  # the store's own connection: what its statements run with
            assert conn is not None
            got = (conn.execute("PRAGMA busy_timeout").fetchone()[0], conn.execute("PRAGMA synchronous").fetchone()[0])
            assert got == expected, query
            assert conn.execute("PRAGMA secure_delete").fetchone()[0] == 1
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# -- the schema ------------------------------------------------------------------------------------------


def test_a_schema_2_database_is_upgraded_once_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with open_store(f"sqlite:///{path}") as store:
        store.append("s", [user("q0")])
    run(
        path,
        "ALTER TABLE ctxlife_raw DROP COLUMN tokens",
        "ALTER TABLE ctxlife_raw DROP COLUMN token_encoding",
        "DROP TABLE ctxlife_locks",  # a table schema 2 may lack: made by the upgrade
        "UPDATE ctxlife_meta SET value = '2' WHERE key = 'schema_version'",
    )
    with capture_logs() as logs, open_store(f"sqlite:///{path}") as store:
        assert [r.tokens for r in store.read_records("s")] == [None]
        with store.lock("s", timeout=1):
            pass
    assert logs == [
        {
            "event": "sqlite_schema_upgraded",
            "store": "sqlite",
            "path": str(path),
            "from_version": 2,
            "to_version": 3,
            "log_level": "info",
        }
    ]
    assert rows(path, "SELECT value FROM ctxlife_meta WHERE key = 'schema_version'") == [("3",)]
    columns = [c[1] for c in rows(path, "PRAGMA table_info(ctxlife_raw)")]
    assert columns[-2:] == ["tokens", "token_encoding"]
    with capture_logs() as again, open_store(f"sqlite:///{path}") as store:
        assert store.head("s") == 1
    assert again == []


@pytest.mark.parametrize(
    ("version", "advice"), [("1", "start a new database (ctxlife 0.1's)"), ("4", "upgrade ctxlife")]
)
def test_a_database_of_another_schema_is_refused_and_left_as_it_was(tmp_path: Path, version: str, advice: str) -> None:
    path = tmp_path / "s.db"
    run(
        path,
        "CREATE TABLE ctxlife_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"INSERT INTO ctxlife_meta VALUES ('schema_version', '{version}')",
    )
    with pytest.raises(StoreError) as caught:
        open_store(f"sqlite:///{path}")
    assert str(caught.value) == (
        f"sqlite database {path} has ctxlife schema version {version}; this ctxlife reads versions 2 to 3: {advice}"
    )
    assert rows(path, "SELECT name FROM sqlite_master WHERE type = 'table'") == [("ctxlife_meta",)]
    assert rows(path, "SELECT key, value FROM ctxlife_meta") == [("schema_version", version)]


def test_a_database_shared_with_other_data_gets_the_tables_and_keeps_the_data(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    run(path, "CREATE TABLE app_users (name TEXT)", "INSERT INTO app_users VALUES ('ann')")
    run(path, "CREATE TABLE ctxlife_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")  # made, never versioned
    with open_store(f"sqlite:///{path}") as store:
        store.append("s", [user("a")])
    assert rows(path, "SELECT name FROM app_users") == [("ann",)]
    assert rows(path, "SELECT value FROM ctxlife_meta WHERE key = 'schema_version'") == [("3",)]
    names = {n for (n,) in rows(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert names == {"app_users", "ctxlife_meta", *TABLES}


# -- the mark key ------------------------------------------------------------------------------------------


def test_the_mark_key_is_made_once_kept_in_the_database_and_shared(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with open_store(f"sqlite:///{path}") as first:
        assert first.mark_key() is None and not path.exists()  # reading makes nothing
        key = first.mark_key(create=True)
    assert key is not None and len(key) == 32
    assert rows(path, "SELECT value FROM ctxlife_meta WHERE key = 'mark_key'") == [(key.hex(),)]
    with open_store(f"sqlite:///{path}") as second:
        assert second.mark_key() == key and second.mark_key(create=True) == key
    run(path, "UPDATE ctxlife_meta SET value = 'zz' WHERE key = 'mark_key'")
    with open_store(f"sqlite:///{path}") as damaged, pytest.raises(StoreError) as caught:
        damaged.mark_key()
    assert str(caught.value) == f"sqlite store {path}: the stored mark key is not hex"
    run(path, "DELETE FROM ctxlife_meta WHERE key = 'mark_key'")
    run(path, "CREATE TRIGGER keep BEFORE INSERT ON ctxlife_meta BEGIN SELECT RAISE(ABORT, 'refused'); END")
    with open_store(f"sqlite:///{path}") as refused, pytest.raises(StoreError) as caught:
        refused.mark_key(create=True)
    assert str(caught.value) == f"sqlite store {path}: mark_key failed: refused"
    with open_store(f"sqlite:///{path}") as broken:
        run(path, "DROP TABLE ctxlife_meta")  # after the store opened (a new one would make the tables again)
        with pytest.raises(StoreError) as caught:
            broken.mark_key()
    assert str(caught.value) == f"sqlite store {path}: mark_key failed: no such table: ctxlife_meta"


# -- reads ---------------------------------------------------------------------------------------------


def insert_row(path: Path, seq: int, text: str, *, view: str = "", fp: str | None = "f") -> None:
    """A raw row written by another program (or a damaged file), as the table holds it."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(
            "INSERT INTO ctxlife_raw (session_id, seq, view, fp, recorded_at, json) VALUES ('s', ?, ?, ?, 0, ?)",
            (seq, view, fp, text),
        )
    finally:
        conn.close()


def test_slots_read_each_records_place_and_what_an_event_did_skipping_what_is_not_a_record(
    tmp_path: Path,
) -> None:
    from ctxlife.sessions.records import REMOVE, REPLACE, Event, RecordSlot

    path = tmp_path / "s.db"
    with open_store(f"sqlite:///{path}") as store:
        added = store.append("s", [user("a"), user("b")])
        added += store.append("s", [user("c")], view="w")
        added += store.append_events("s", [Event(REPLACE, user("B"), 2), Event(REMOVE, {}, 1)])
        insert_row(path, 6, "not json")  # skipped by read_records(strict=False) too
        insert_row(path, 7, "[1, 2]")  # not an object
        op = "r" * 150
        insert_row(path, 8, f'{{"ctxlife_event": "{op}", "message": {{}}, "target": 1}}')  # a malformed event
        added += store.append("s", [user("d")])
        fa, fb, fc, fe, fr, fd = (r.fingerprint for r in added)  # as the store wrote them
        slots = [
            RecordSlot(1, fa),
            RecordSlot(2, fb),
            RecordSlot(3, fc),
            RecordSlot(4, fe, REPLACE, 2),
            RecordSlot(5, fr, REMOVE, 1),
            RecordSlot(9, fd),
        ]
        with capture_logs() as logs:
            assert store.read_slots("s") == slots
        problem = f"malformed ctxlife_event record (op {op!r}, target 1)"[:120]
        assert logs == [
            {
                "event": "raw_record_skipped",
                "store": "sqlite",
                "session_id": "s",
                "seq": 8,
                "problem": problem,
                "log_level": "error",
            }
        ]
        assert store.read_slots("s", view="") == [s for s in slots if s.seq != 3]
        assert store.read_slots("s", view="w") == [slots[2]]
        assert store.read_slots("s", 1) == slots[1:]
        assert store.read_slots("s", 4, view="") == [slots[4], slots[5]]
        run(path, "UPDATE ctxlife_raw SET fp = NULL WHERE seq = 2")  # written before fingerprints were kept
        with capture_logs():
            assert store.read_slots("s", 0, view="") == [s for s in slots if s.seq != 3]
            assert store.read_slots("s", 1, view="") == [s for s in slots[1:] if s.seq != 3]
            assert store.read_slots("s", view="w") == [slots[2]]
        assert store.read_slots("nobody") == []


def test_a_view_of_plain_messages_is_read_in_columns_and_anything_else_is_left_to_the_records(
    tmp_path: Path,
) -> None:
    from ctxlife.sessions.records import REPLACE, Event

    path = tmp_path / "s.db"
    with open_store(f"sqlite:///{path}") as store:
        added = store.append("s", [user("a"), user("b")])
        store.append("s", [user("c")], view="w")
        store.append("s", [user("d")])
        whole = store.read_view("s")
        assert whole is not None
        assert (whole.seqs, whole.messages) == ([1, 2, 4], [user("a"), user("b"), user("d")])
        assert whole.fingerprints[:2] == [added[0].fingerprint, added[1].fingerprint]
        assert whole.tokens[:2] == [
            (added[0].tokens, added[0].token_encoding),
            (added[1].tokens, added[1].token_encoding),
        ]
        assert all(t is not None for t, _ in whole.tokens)
        other = store.read_view("s", "w")
        assert other is not None and (other.seqs, other.messages) == ([3], [user("c")])
        light = store.read_view("s", messages_only=True)
        assert light is not None
        assert (light.seqs, light.fingerprints, light.messages, light.tokens) == ([1, 2, 4], [], whole.messages, [])
        light_w = store.read_view("s", "w", messages_only=True)
        assert light_w is not None and (light_w.seqs, light_w.messages) == ([3], [user("c")])
        empty = store.read_view("s", "nobody")
        assert empty is not None and (empty.seqs, empty.messages) == ([], [])
        run(path, "UPDATE ctxlife_raw SET bad = 'quarantined' WHERE seq = 2")
        assert store.read_view("s") is None  # a quarantined record: read_records
        light = store.read_view("s", messages_only=True)
        assert light is not None and light.messages[1] == user("b")  # its stored form
        run(path, "UPDATE ctxlife_raw SET bad = NULL, fp = NULL WHERE seq = 2")
        assert store.read_view("s") is None  # written before fingerprints: read_records
        run(path, "UPDATE ctxlife_raw SET fp = 'f' WHERE seq = 2")
        store.append_events("s", [Event(REPLACE, user("B"), 2)])
        assert store.read_view("s") is None and store.read_view("s", messages_only=True) is None  # an event
        other = store.read_view("s", "w", messages_only=True)
        assert other is not None and other.messages == [user("c")]


# -- erase -------------------------------------------------------------------------------------------------


def test_an_erase_overwrites_the_rows_in_place_and_leaves_no_intent_nor_log_behind(tmp_path: Path) -> None:
    from ctxlife.sessions.records import ERASED_KEY, erased_message, fingerprint

    path = tmp_path / "s.db"
    secret = "IBAN DE02 1203 0000 0000 2020 51"
    with open_store(f"sqlite:///{path}") as store:
        store.append("s", [user("hello"), user(f"my {secret}"), user("bye")])
        store.append("s", [user(f"again {secret}")], view="w")
        store.append_call("s", "w", {"t": {"k1": user(f"my {secret}")}})  # a sent text kept in a call record
        store.append_call("s", "", {"t": {"k2": user("hello")}})
        run(path, "UPDATE ctxlife_raw SET bad = 'quarantined' WHERE seq = 4")
        folder = store.derived_dir("s")
        assert folder is not None
        folder.mkdir(parents=True)
        (folder / "index").write_text(secret)
        assert store.erase_matching("s", "IBAN DE02") == [2, 4]
        tombstone = erased_message(user("x"))
        assert tombstone[ERASED_KEY] is True
        got = {
            seq: (json.loads(text), fp, bad, tokens, encoding)
            for seq, text, fp, bad, tokens, encoding in rows(
                path, "SELECT seq, json, fp, bad, tokens, token_encoding FROM ctxlife_raw WHERE seq IN (2, 4)"
            )
        }
        assert got == {
            2: (tombstone, fingerprint(tombstone), None, None, None),
            4: (tombstone, fingerprint(tombstone), None, None, None),
        }
        assert rows(path, "SELECT tokens IS NOT NULL FROM ctxlife_raw WHERE seq IN (1, 3)") == [(1,), (1,)]
        stored = rows(path, "SELECT n, view, json FROM ctxlife_calls ORDER BY n")
        calls = [(n, v, json.loads(t)) for n, v, t in stored]
        assert calls == [
            (1, "w", {"t": {"k1": user("my [erased] 1203 0000 0000 2020 51")}}),
            (2, "", {"t": {"k2": user("hello")}}),
        ]
        blobs = rows(path, "SELECT key FROM ctxlife_blobs WHERE session_id = 's'")
        assert blobs == [("ctxlife_erased",)]  # the erase's intent deleted, not left empty
        assert not folder.exists()
        wal = path.with_name(path.name + "-wal")
        assert not wal.exists() or wal.stat().st_size == 0  # the log's old pages copied back and dropped
        assert b"IBAN DE02" not in path.read_bytes()
        assert [r.message for r in store.read_records("s") if r.seq in (2, 4)] == [tombstone, tombstone]


# -- the lock and blobs ------------------------------------------------------------------------------------


def test_a_held_lock_is_one_row_with_its_expiry_and_a_release_deletes_only_its_own(tmp_path: Path) -> None:
    import time

    from ctxlife.sessions.base import LockTimeoutError

    path = tmp_path / "s.db"
    with open_store(f"sqlite:///{path}") as store, open_store(f"sqlite:///{path}") as other:
        store.put_blob("s", "k", "v")
        before = time.time()
        with store.lock("s", ttl_seconds=100, timeout=0):
            [(token, expires)] = rows(path, "SELECT token, expires_at FROM ctxlife_locks WHERE session_id = 's'")
            assert len(token) == 32 and before + 100 <= expires <= time.time() + 100
            with (
                pytest.raises(LockTimeoutError, match=f"the lock of session 's' in {path}"),
                other.lock("s", timeout=0),
            ):
                pass
            with other.lock("t", timeout=0):  # another session's lock is another row
                assert len(rows(path, "SELECT 1 FROM ctxlife_locks")) == 2
        assert rows(path, "SELECT COUNT(*) FROM ctxlife_locks") == [(0,)]
        before = time.time()
        with store.lock("s"):  # the default ttl: 30 s
            [(expires,)] = rows(path, "SELECT expires_at FROM ctxlife_locks")
            assert before + 30 <= expires <= time.time() + 30
        with capture_logs() as logs:
            with store.lock("s", ttl_seconds=30, timeout=0):
                run(path, "UPDATE ctxlife_locks SET expires_at = 0")  # it expired while held
                with other.lock("s", ttl_seconds=30, timeout=0):  # taken over, and released by its holder
                    [(taken,)] = rows(path, "SELECT token FROM ctxlife_locks")
                run(path, f"INSERT INTO ctxlife_locks VALUES ('s', '{taken}', 1e12)")  # say the new holder keeps it
        assert logs == [
            {
                "event": "session_lock_expired",
                "store": "sqlite",
                "session_id": "s",
                "ttl_seconds": 30,
                "hint": "the lock expired while held; another worker may have taken it",
                "log_level": "warning",
            }
        ]
        assert rows(path, "SELECT token FROM ctxlife_locks") == [(taken,)]  # ours did not delete theirs
        run(path, f"UPDATE ctxlife_locks SET expires_at = {time.time()}")  # expires exactly now: free
        with pytest.raises(StoreError) as caught, store.lock("s", timeout=0):  # a release SQLite refuses
            run(path, "CREATE TRIGGER keep BEFORE DELETE ON ctxlife_locks BEGIN SELECT RAISE(ABORT, 'refused'); END")
        assert str(caught.value) == f"sqlite store {path}: unlock failed: refused"
        run(path, "DROP TRIGGER keep", "DELETE FROM ctxlife_locks")
        with store.lock("s", timeout=0):
            pass


def test_blobs_are_kept_per_session_and_key_and_replaced_whole(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with open_store(f"sqlite:///{path}") as store:
        assert store.get_blob("s", "k") is None and not path.exists()
        store.put_blob("s", "k", "first")
        store.put_blob("s", "k", "second")
        store.put_blob("s", "k2", "other key")
        store.put_blob("t", "k", "other session")
        assert (store.get_blob("s", "k"), store.get_blob("s", "k2"), store.get_blob("t", "k")) == (
            "second",
            "other key",
            "other session",
        )
        assert store.get_blob("s", "missing") is None
        assert rows(path, "SELECT session_id, key, text FROM ctxlife_blobs ORDER BY session_id, key") == [
            ("s", "k", "second"),
            ("s", "k2", "other key"),
            ("t", "k", "other session"),
        ]
        assert [s for (s,) in rows(path, "SELECT session_id FROM ctxlife_sessions ORDER BY 1")] == ["s", "t"]
        with pytest.raises(StoreError) as caught:
            store.put_blob("s", "k", b"bytes")  # type: ignore[arg-type]
        assert str(caught.value) == "blob 'k' of session 's' must be a str, got bytes"
        # a statement that ends the transaction itself (RAISE(ROLLBACK), SQLITE_FULL): the error is still the store's
        run(path, "CREATE TRIGGER keep BEFORE UPDATE ON ctxlife_blobs BEGIN SELECT RAISE(ROLLBACK, 'refused'); END")
        with pytest.raises(StoreError) as caught:
            store.put_blob("s", "k", "third")
        assert str(caught.value) == f"sqlite store {path}: put_blob failed: refused"
        run(path, "DROP TRIGGER keep")
        store._delete_blob("s", "k")  # what an erase does with its intent once done
        assert rows(path, "SELECT key FROM ctxlife_blobs WHERE session_id = 's'") == [("k2",)]
        assert store.get_blob("t", "k") == "other session"
        wal = path.with_name(path.name + "-wal")
        assert wal.stat().st_size == 0  # the deleted text is not left in the write-ahead log


# -- writes, transactions, closing -------------------------------------------------------------------------


def test_a_refused_write_leaves_nothing_and_every_write_marks_its_session_active(tmp_path: Path) -> None:
    from ctxlife.sessions.base import AppendConflictError

    path = tmp_path / "s.db"
    with open_store(f"sqlite:///{path}") as store:  # no ttl: the time of the last write is kept all the same
        store.append("s", [user("a")])
        run(path, "UPDATE ctxlife_sessions SET touched_at = 5")
        with pytest.raises(AppendConflictError):
            store.append("s", [user("b")], if_head=0)
        assert rows(path, "SELECT touched_at FROM ctxlife_sessions") == [(5,)]  # rolled back with the append
        assert rows(path, "SELECT seq FROM ctxlife_raw") == [(1,)]
        for write in (
            lambda: store.append("s", [user("b")]),
            lambda: store.save_snapshot(Snapshot(session_id="s", messages=[], raw_length=0)),
            lambda: store.put_blob("s", "k", "v"),
            lambda: store.append_call("s", "", {"n": 1}),
        ):
            run(path, "UPDATE ctxlife_sessions SET touched_at = 5")
            write()
            [(touched,)] = rows(path, "SELECT touched_at FROM ctxlife_sessions")
            assert touched > 1_000_000_000
        store.append("s", [user("c")])  # the write lock released: another write goes through
        assert store.head("s") == 3


def test_a_snapshot_is_one_row_per_view_replaced_whole(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with open_store(f"sqlite:///{path}") as store:
        store.save_snapshot(Snapshot(session_id="s", messages=[user("a")], raw_length=1, updated_at=10.0))
        store.save_snapshot(Snapshot(session_id="s", view="w", messages=[user("w")], raw_length=2, updated_at=11.0))
        store.save_snapshot(Snapshot(session_id="s", messages=[user("b")], raw_length=3, updated_at=12.0))
        got = rows(path, "SELECT view, updated_at, json FROM ctxlife_snapshots ORDER BY view")
        assert [(v, at, json.loads(text)["messages"]) for v, at, text in got] == [
            ("", 12.0, [user("b")]),
            ("w", 11.0, [user("w")]),
        ]
        loaded = store.load_snapshot("s")
        assert loaded is not None and (loaded.messages, loaded.raw_length) == ([user("b")], 3)


def test_a_closed_store_refuses_work_and_closes_its_connections(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "s.db"
    store = open_store(f"sqlite:///{path}")
    store.append("s", [user("a")])
    conns = [store._conn()]
    thread = threading.Thread(target=lambda: conns.append(store._conn()))  # one connection per thread
    thread.start()
    thread.join()
    assert conns[0] is not conns[1]
    store.close()
    errors: list[str] = []

    def use(conn: Any) -> None:  # in the thread that made it: the only error can be that it is closed
        try:
            conn.execute("SELECT 1")
        except sqlite3.ProgrammingError as exc:
            errors.append(str(exc))

    use(conns[0])
    thread = threading.Thread(target=use, args=(conns[1],))
    thread.start()
    thread.join()
    assert errors == ["Cannot operate on a closed database."] * 2
    with pytest.raises(StoreError) as caught:
        store.head("s")
    assert str(caught.value) == f"session store sqlite:///{path} is closed"


def test_a_forked_child_uses_connections_of_its_own_and_leaves_the_parents_open(tmp_path: Path) -> None:
    import os

    path = tmp_path / "s.db"
    store = open_store(f"sqlite:///{path}")
    store.append("s", [user("parent")])
    parents = store._conn()
    pid = os.fork()
    if pid == 0:  # the child: write through the inherited store, then close it
        code = 1
        try:
            mine = store._conn()
            store.append("s", [user("child")])
            kept = store._conn() is mine  # one new connection, kept for the child's next calls
            store.close()
            code = 0 if mine is not parents and kept else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store._conn() is parents
    assert parents is not None and parents.execute("SELECT 1").fetchone() == (1,)  # not closed by the child
    assert [r.message["content"] for r in store.read_records("s")] == ["parent", "child"]
    store.close()


def test_an_erase_whose_rewrite_fails_names_the_erase_and_changes_nothing(tmp_path: Path) -> None:
    """A rewrite SQLite refuses (here another program's trigger; a full disk in life) fails the erase, named,
    and its transaction is rolled back: the records and call records keep what they held, the erase's intent
    stays for the next use to finish it."""
    path = tmp_path / "s.db"
    with open_store(f"sqlite:///{path}") as store:
        store.append("s", [user("hello"), user("my secret")])
        store.append_call("s", "", {"t": {"k": user("my secret")}})
        for table in ("ctxlife_calls", "ctxlife_raw"):  # the call records are scrubbed first
            run(path, f"CREATE TRIGGER no_{table} BEFORE UPDATE ON {table} BEGIN SELECT RAISE(ABORT, 'refused'); END")
            with pytest.raises(StoreError) as caught:
                store.erase_matching("s", "secret")
            assert str(caught.value) == f"sqlite store {path}: erase failed: refused", table
            run(path, f"DROP TRIGGER no_{table}")
        assert [json.loads(t) for (t,) in rows(path, "SELECT json FROM ctxlife_raw WHERE seq = 2")] == [
            user("my secret")
        ]
        assert store.get_blob("s", "ctxlife_erase")  # the intent, for the next use to finish
        run(path, "CREATE TRIGGER keep BEFORE DELETE ON ctxlife_blobs BEGIN SELECT RAISE(ABORT, 'refused'); END")
        with pytest.raises(StoreError) as caught:
            store.erase_matching("s", "secret")  # finishes the interrupted one first, then fails to drop its intent
        assert str(caught.value) == f"sqlite store {path}: delete_blob failed: refused"
        run(path, "DROP TRIGGER keep")
        store.erase_matching("s", "secret")
        assert b"my secret" not in path.read_bytes() and not store.get_blob("s", "ctxlife_erase")


def test_a_bulk_read_gives_each_row_its_fingerprint_view_and_count_or_decodes_it_alone(tmp_path: Path) -> None:
    """Rows read in one json.loads per chunk: a row written before fingerprints gets its message's, an event
    or an erased record its op and flag, a count only when it is one (else None, counted again)."""
    from ctxlife.sessions.records import ADD, REPLACE, Event

    path = tmp_path / "s.db"
    with open_store(f"sqlite:///{path}") as store:
        written = store.append("s", [user("a"), user("b"), user("c")])
        written += store.append_events("s", [Event(REPLACE, user("B"), 2)], view="w")
        run(
            path,
            "UPDATE ctxlife_raw SET fp = NULL WHERE seq = 2",
            "UPDATE ctxlife_raw SET tokens = -1 WHERE seq = 3",
            "UPDATE ctxlife_raw SET recorded_at = 7.5, bad = 'why' WHERE seq = 1",
        )
        got = store.read_records("s")
        assert [(r.seq, r.message, r.fingerprint, r.view, r.op, r.target) for r in got] == [
            (1, user("a"), written[0].fingerprint, "", ADD, None),
            (2, user("b"), written[1].fingerprint, "", ADD, None),  # the row kept none: its message's
            (3, user("c"), written[2].fingerprint, "", ADD, None),
            (4, user("B"), written[3].fingerprint, "w", REPLACE, 2),
        ]
        assert (got[0].recorded_at, got[0].quarantined, got[0].erased) == (7.5, "why", False)
        assert (got[0].tokens, got[0].token_encoding) == (written[0].tokens, written[0].token_encoding)
        assert got[0].tokens is not None and (got[2].tokens, got[2].token_encoding) == (None, None)
        assert [r.seq for r in store.read_records("s", 2)] == [3, 4]


@pytest.mark.parametrize(("option", "toggled"), [("", True), ("?synchronous=NORMAL", False)])
def test_a_call_record_is_committed_without_waiting_for_the_disk_and_the_appends_are_not(
    tmp_path: Path, option: str, toggled: bool
) -> None:
    """The module docstring's promise: a call record is committed with ``synchronous = NORMAL``, and a store set
    to ``FULL`` is back to ``FULL`` for the next append (the statements SQLite ran on the store's connection)."""
    with open_store(f"sqlite:///{tmp_path / 's.db'}{option}") as store:
        store.append("s", [user("a")])
        conn = store._conn()
        assert conn is not None
        ran: list[str] = []
        conn.set_trace_callback(ran.append)
        store.append_call("s", "", {"n": 1})
        conn.set_trace_callback(None)
        ran = [" ".join(s.upper().split()) for s in ran]  # SQL's case and spacing are not the point
        pragmas = [s for s in ran if s.startswith("PRAGMA SYNCHRONOUS")]
        assert pragmas == (["PRAGMA SYNCHRONOUS = NORMAL", "PRAGMA SYNCHRONOUS = FULL"] if toggled else [])
        if toggled:
            assert ran.index(pragmas[0]) < ran.index("COMMIT") < ran.index(pragmas[1])
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == (2 if toggled else 1)
