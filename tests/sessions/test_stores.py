"""The behaviour every session store must have, run against file, sqlite and a real Redis."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxlife.errors import CtxlifeError, SessionIdError, StoreError
from ctxlife.sessions import (
    LockTimeoutError,
    SessionInfo,
    SessionStore,
    Snapshot,
    open_store,
    register_store_scheme,
    validate_session_id,
)
from ctxlife.sessions import snapshot as sessions_snapshot
from ctxlife.sessions.file import FileStore

TOOL_CALL_TRACE: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a helpful airline agent.", "cache_breakpoint": True},
    {"role": "user", "content": "Réservation pour Zoë ✈️ — 東京 → Paris, 2 bags 🧳🧳", "cache_breakpoint": True},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_abc123",
                "type": "function",
                "function": {"name": "get_user", "arguments": '{"user_id": "zoë_42", "n": 1e3}'},
            },
            {
                "id": "call_abc124",
                "type": "function",
                "function": {"name": "search", "arguments": '{"from":"NRT","to":"CDG"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_abc123", "content": '{"name": "Zoë", "tier": "gold"}'},
    {"role": "tool", "tool_call_id": "call_abc124", "content": 'line1\nline2\ttab "quoted" \\ back\u2028sep'},
    {
        "role": "assistant",
        "content": "Done 👍 price: 1234.5 EUR",
        "extra": {"z": 1, "a": [1, 2.5, -0.0, 10**30, True, None, {}], "m": "\u0000nul"},
    },
    {"role": "user", "content": "lone surrogate \ud83d survives"},
]


def canonical(value: Any) -> str:
    """Key-order-preserving JSON: equal strings mean an exact JSON round trip (order included)."""
    return json.dumps(value, ensure_ascii=True)


def snap(sid: str = "s1", messages: list[dict[str, Any]] | None = None, **kw: Any) -> Snapshot:
    return Snapshot(
        session_id=sid,
        messages=TOOL_CALL_TRACE if messages is None else messages,
        raw_length=kw.pop("raw_length", 7),
        updated_at=kw.pop("updated_at", 1_700_000_000.123456),
        meta=kw.pop("meta", {"summary": "Zoë wants NRT→CDG 🛫", "tasks": [{"id": 1, "summary": "x"}]}),
        **kw,
    )


# -- snapshots ----------------------------------------------------------------------------------


def test_snapshot_round_trip_is_exact(store: SessionStore) -> None:
    original = snap()
    store.save_snapshot(original)
    loaded = store.load_snapshot("s1")
    assert loaded is not None
    assert loaded == original
    assert canonical(loaded.to_dict()) == canonical(original.to_dict())
    assert loaded.updated_at == 1_700_000_000.123456
    assert isinstance(loaded.messages[5]["extra"]["a"][3], int)
    assert loaded.format_version == sessions_snapshot.FORMAT_VERSION == 2
    assert loaded.view == ""


def test_snapshot_missing_is_none_and_save_replaces(store: SessionStore) -> None:
    assert store.load_snapshot("nobody") is None
    store.save_snapshot(snap(messages=[{"role": "user", "content": "v1"}], raw_length=1))
    store.save_snapshot(snap(messages=[{"role": "user", "content": "v2"}], raw_length=2, meta={}))
    loaded = store.load_snapshot("s1")
    assert loaded is not None
    assert loaded.messages == [{"role": "user", "content": "v2"}]
    assert (loaded.raw_length, loaded.meta) == (2, {})


def test_snapshot_validates_its_fields() -> None:
    with pytest.raises(SessionIdError):
        Snapshot(session_id="../x", messages=[], raw_length=0)
    with pytest.raises(StoreError, match="raw_length"):
        Snapshot(session_id="a", messages=[], raw_length=-1)
    with pytest.raises(StoreError, match="message 0"):
        Snapshot(session_id="a", messages=["hi"], raw_length=0)  # type: ignore[list-item]
    with pytest.raises(StoreError, match="meta"):
        Snapshot(session_id="a", messages=[], raw_length=0, meta=[])  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="message 0 must be a message dict with a 'role'"):
        Snapshot(session_id="a", messages=[{"content": "no role"}], raw_length=0)
    with pytest.raises(StoreError, match="raw_length"):
        Snapshot(session_id="a", messages=[], raw_length=True)  # strict: a bool is not a count
    with pytest.raises(SessionIdError, match="view"):
        Snapshot(session_id="a", view="../x", messages=[], raw_length=0)
    with pytest.raises(StoreError, match="not JSON-serializable"):
        Snapshot(session_id="a", messages=[{"role": "user", "x": object()}], raw_length=0).to_json()
    with pytest.raises(StoreError, match="not JSON-serializable"):
        Snapshot(session_id="a", messages=[{"role": "user", "x": float("nan")}], raw_length=0).to_json()


def test_snapshot_from_json_rejects_corrupt_records() -> None:
    good = json.loads(snap().to_json())
    for bad, needle in [
        ("{not json", "not valid JSON"),
        ("[]", "JSON object"),
        (json.dumps({**good, "format_version": "1"}), "format_version"),
        (json.dumps({k: v for k, v in good.items() if k != "messages"}), "missing fields"),
        (json.dumps({**good, "surprise": 1}), "unknown"),
        (json.dumps({**good, "session_id": "../etc"}), "invalid"),
    ]:
        with pytest.raises(StoreError, match=needle):
            Snapshot.from_json(bad)


def test_future_snapshot_version_is_a_clear_error(store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # Write a version-3 record as a newer ctxlife would, then read it with this one (version 2).
    monkeypatch.setattr(sessions_snapshot, "FORMAT_VERSION", 3)
    store.save_snapshot(snap(format_version=3))
    monkeypatch.setattr(sessions_snapshot, "FORMAT_VERSION", 2)
    with pytest.raises(StoreError, match=r"format_version 3.*newer ctxlife.*Upgrade"):
        store.load_snapshot("s1")


def test_version_1_snapshots_of_ctxlife_0_1_are_refused() -> None:
    """0.1 (one snapshot per session, never released) wrote version 1: no migration reads it."""
    v1 = json.dumps(
        {
            "format_version": 1,
            "session_id": "old",
            "raw_length": 2,
            "updated_at": 1.5,
            "meta": {},
            "messages": TOOL_CALL_TRACE[:2],
        }
    )
    with pytest.raises(StoreError, match="format_version 1 and there is no migration from it to 2"):
        Snapshot.from_json(v1)


def test_old_snapshot_versions_are_migrated(store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessions_snapshot, "FORMAT_VERSION", 1)
    store.save_snapshot(snap(meta={"summary": "old"}))  # a version-1 record
    # Pretend this ctxlife writes version 3 and knows how to migrate 1 -> 2 -> 3.
    monkeypatch.setattr(sessions_snapshot, "FORMAT_VERSION", 3)
    monkeypatch.setattr(sessions_snapshot, "_MIGRATIONS", {})
    seen: list[int] = []

    def one_to_two(doc: dict[str, Any]) -> dict[str, Any]:
        seen.append(doc["format_version"])
        doc["meta"] = {"summary_v2": doc["meta"].pop("summary")}
        return doc

    def two_to_three(doc: dict[str, Any]) -> dict[str, Any]:
        seen.append(doc["format_version"])
        doc["meta"]["migrated"] = True
        return doc

    sessions_snapshot.register_snapshot_migration(1, one_to_two)
    with pytest.raises(StoreError, match="no migration from it to 3"):
        store.load_snapshot("s1")
    sessions_snapshot.register_snapshot_migration(2, two_to_three)
    loaded = store.load_snapshot("s1")
    assert loaded is not None
    assert seen == [1, 1, 2]
    assert loaded.format_version == 3
    assert loaded.meta == {"summary_v2": "old", "migrated": True}
    assert loaded.messages == TOOL_CALL_TRACE


def test_a_failing_migration_is_a_store_error(monkeypatch: pytest.MonkeyPatch) -> None:
    record = snap().to_json()
    monkeypatch.setattr(sessions_snapshot, "FORMAT_VERSION", 3)
    monkeypatch.setattr(sessions_snapshot, "_MIGRATIONS", {2: lambda doc: 1 / 0})
    with pytest.raises(StoreError, match="migrating .* from format_version 2 failed"):
        Snapshot.from_json(record)


# -- raw history -----------------------------------------------------------------------------


def test_append_and_read_records(store: SessionStore) -> None:
    def messages(after_seq: int = 0) -> list[dict[str, Any]]:
        return [r.message for r in store.read_records("r", after_seq)]

    assert messages() == []
    assert store.head("r") == 0
    store.append("r", TOOL_CALL_TRACE[:3])
    assert store.append("r", []) == []  # no-op
    store.append("r", TOOL_CALL_TRACE[3:])
    assert canonical(messages()) == canonical(TOOL_CALL_TRACE)
    assert store.head("r") == len(TOOL_CALL_TRACE)
    assert canonical(messages(3)) == canonical(TOOL_CALL_TRACE[3:])
    assert messages(len(TOOL_CALL_TRACE)) == []
    assert messages(100) == []


def test_append_rejects_a_batch_that_is_not_a_list_of_dicts_whole(store: SessionStore) -> None:
    store.append("r", [{"role": "user", "content": "first"}])
    with pytest.raises(StoreError, match="list of dicts"):
        store.append("r", {"role": "user"})  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="message 1"):
        store.append("r", [{"ok": 1}, "not a dict"])  # type: ignore[list-item]
    assert [r.message for r in store.read_records("r")] == [{"role": "user", "content": "first"}]


def test_sessions_are_independent(store: SessionStore) -> None:
    store.append("a", [{"n": 1}])
    store.append("a.b", [{"n": 2}, {"n": 3}])
    store.append("a_b-c", [{"n": 4}])
    assert [r.message for r in store.read_records("a")] == [{"n": 1}]
    assert [r.message for r in store.read_records("a.b")] == [{"n": 2}, {"n": 3}]
    assert [r.message for r in store.read_records("a_b-c")] == [{"n": 4}]


def test_one_store_shared_by_threads(store: SessionStore) -> None:
    def work(t: int) -> None:
        for i in range(25):
            store.append("shared", [{"t": t, "i": i}, {"t": t, "i": i, "second": True}])

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    got = [r.message for r in store.read_records("shared")]
    assert len(got) == 200
    for first, second in zip(got[::2], got[1::2], strict=True):  # each batch stayed together
        assert second == {**first, "second": True}
    for t in range(4):
        assert [m["i"] for m in got[::2] if m["t"] == t] == list(range(25))


# -- listing and deleting ----------------------------------------------------------------------


def test_list_sessions(store: SessionStore) -> None:
    assert store.list_sessions() == []
    store.append("only-raw", [{"n": 1}, {"n": 2}])
    store.save_snapshot(snap("only-snap", raw_length=0, updated_at=100.5))
    store.append("both", [{"n": 1}])
    store.save_snapshot(snap("both", raw_length=1, updated_at=200.25))
    assert store.list_sessions() == [
        SessionInfo("both", 1, 200.25),
        SessionInfo("only-raw", 2, None),
        SessionInfo("only-snap", 0, 100.5),
    ]


def test_delete(store: SessionStore) -> None:
    store.append("gone", [{"n": 1}])
    store.save_snapshot(snap("gone"))
    store.put_blob("gone", "out-1", "big output")
    store.append("kept", [{"n": 2}])
    assert store.delete("gone") is True
    assert store.delete("gone") is False
    assert store.delete("never-existed") is False
    assert store.load_snapshot("gone") is None
    assert [r.message for r in store.read_records("gone")] == []
    assert store.get_blob("gone", "out-1") is None
    assert [i.session_id for i in store.list_sessions()] == ["kept"]
    store.append("gone", [{"n": 3}])  # a deleted session can start over
    assert [r.message for r in store.read_records("gone")] == [{"n": 3}]


# -- blobs -------------------------------------------------------------------------------------


def test_blobs(store: SessionStore) -> None:
    assert store.get_blob("b", "k") is None
    big = "résultat 🧾 " * 20_000 + "\n\x00end"
    store.put_blob("b", "tool-output.1", big)
    store.put_blob("b", "other", "")
    assert store.get_blob("b", "tool-output.1") == big
    assert store.get_blob("b", "other") == ""
    store.put_blob("b", "other", "replaced")
    assert store.get_blob("b", "other") == "replaced"
    assert store.get_blob("elsewhere", "other") is None
    for bad_key in ["", "../x", "a/b", "a:b", ".hidden"]:
        with pytest.raises(SessionIdError, match="blob key"):
            store.put_blob("b", bad_key, "x")
        with pytest.raises(SessionIdError, match="blob key"):
            store.get_blob("b", bad_key)
    with pytest.raises(StoreError, match="must be a str"):
        store.put_blob("b", "k", b"bytes")  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="lone surrogates"):
        store.put_blob("b", "k", "\ud800")


# -- locks -------------------------------------------------------------------------------------


def test_lock_excludes_other_holders_until_released(store: SessionStore, store_url: str) -> None:
    other = open_store(store_url)
    try:
        with store.lock("L", ttl_seconds=10, timeout=1):
            with pytest.raises(LockTimeoutError, match="'L'"), other.lock("L", timeout=0):
                pass
            t0 = time.monotonic()
            with pytest.raises(LockTimeoutError), other.lock("L", timeout=0.2):
                pass
            assert time.monotonic() - t0 >= 0.2
            with other.lock("other-session", timeout=0):  # locks are per session
                pass
        with other.lock("L", timeout=0):
            pass
    finally:
        other.close()
    with pytest.raises(StoreError, match="ttl_seconds"), store.lock("L", ttl_seconds=0):
        pass
    with pytest.raises(StoreError, match="timeout"), store.lock("L", timeout=-1):
        pass


def test_lock_released_when_the_body_raises(store: SessionStore) -> None:
    with pytest.raises(RuntimeError), store.lock("L", timeout=1):
        raise RuntimeError("boom")
    with store.lock("L", timeout=0):
        pass


@pytest.mark.parametrize("store_kind", ["sqlite", "redis", "postgres"])
def test_expired_lock_is_taken_over_and_not_deleted_by_its_old_holder(store: SessionStore, store_url: str) -> None:
    other = open_store(store_url)
    try:
        with structlog.testing.capture_logs() as logs, store.lock("L", ttl_seconds=0.2, timeout=0):
            time.sleep(0.35)  # outlive the TTL while "working"
            taken = other.lock("L", ttl_seconds=10, timeout=0)
            taken.__enter__()  # expired, so another worker may take it
            # our release must notice and must not delete the other worker's lock
        assert [e["event"] for e in logs] == ["session_lock_expired"]
        assert logs[0]["log_level"] == "warning"
        with pytest.raises(LockTimeoutError), store.lock("L", timeout=0):
            pass
        taken.__exit__(None, None, None)
        with store.lock("L", timeout=0):
            pass
    finally:
        other.close()


# -- session ids -------------------------------------------------------------------------------

BAD_IDS = [
    "../x",
    "a/b",
    "..",
    "",
    "x" * 200,
    ".hidden",
    "a\\b",
    "a b",
    "a:b",
    "a*",
    "\x00",
    "é",
    "a\nb",
    "/abs",
    "a..b",
]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_validate_session_id_rejects(bad: str) -> None:
    with pytest.raises(SessionIdError) as info:
        validate_session_id(bad)
    msg = str(info.value)
    assert "session id" in msg
    if bad and len(bad) <= 40:
        assert repr(bad) in msg  # names the bad id
    assert any(w in msg.lower() for w in ("use ", "remove", "start it", "pass ")), msg  # says the fix
    assert isinstance(info.value, CtxlifeError)


@pytest.mark.parametrize("good", ["a", "u42", "A-b_c.d", "x" * 128, "1.2.3", "a-"])
def test_validate_session_id_accepts(good: str) -> None:
    assert validate_session_id(good) == good


def test_validate_session_id_rejects_non_strings() -> None:
    for bad in [None, 42, b"abc", ["a"]]:
        with pytest.raises(SessionIdError, match="must be a str"):
            validate_session_id(bad)


def _forged_snapshot(sid: str) -> Snapshot:
    """A Snapshot whose session id skipped validation (as a buggy caller could build)."""
    return Snapshot.model_construct(
        session_id=sid,
        view="",
        messages=[{"role": "user", "content": "x"}],
        raw_length=1,
        updated_at=1.0,
        meta={},
        format_version=2,
    )


def _snapshot_of_storage(store_kind: str, tmp_path: Path, redis_client: Any) -> Any:
    if store_kind == "redis":
        return sorted(redis_client.keys("*"))
    return sorted((str(p.relative_to(tmp_path)), p.stat().st_size if p.is_file() else -1) for p in tmp_path.rglob("*"))


@pytest.mark.parametrize(
    "bad", ["../x", "a/b", "..", "", "x" * 200, "../../etc/passwd", "/tmp/abs", "x/../../y", "a:raw", "*"]
)
def test_bad_ids_never_touch_storage(
    store_kind: str, make_url: Any, tmp_path: Path, request: pytest.FixtureRequest, bad: str
) -> None:
    redis_client = request.getfixturevalue("redis_client") if store_kind == "redis" else None
    store = open_store(make_url(store_kind))
    try:
        store.append("ok", [{"n": 1}])  # make sure the folder / db / prefix exist
        before = _snapshot_of_storage(store_kind, tmp_path, redis_client)
        operations = [
            lambda: store.load_snapshot(bad),
            lambda: store.save_snapshot(_forged_snapshot(bad)),
            lambda: store.append(bad, [{"role": "user", "content": "x"}]),
            lambda: [r.message for r in store.read_records(bad)],
            lambda: store.head(bad),
            lambda: store.delete(bad),
            lambda: store.lock(bad, timeout=0).__enter__(),
            lambda: store.put_blob(bad, "k", "text"),
            lambda: store.get_blob(bad, "k"),
            lambda: store.put_blob("ok", bad, "text"),
            lambda: store.get_blob("ok", bad),
        ]
        for op in operations:
            with pytest.raises(SessionIdError):
                op()
        assert _snapshot_of_storage(store_kind, tmp_path, redis_client) == before
        assert [i.session_id for i in store.list_sessions()] == ["ok"]
    finally:
        store.close()


# -- store-specific behaviour -----------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_file_store_layout_and_permissions(tmp_path: Path) -> None:
    folder = tmp_path / "ws" / "sessions"
    store = open_store(f"file://{folder}")
    assert not folder.exists()  # nothing is created before the first write
    assert store.list_sessions() == []
    store.append("u42", [{"role": "user", "content": "hi"}])
    store.save_snapshot(snap("u42"))
    store.put_blob("u42", "out", "text")
    with store.lock("u42"):
        pass
    assert sorted(p.name for p in folder.iterdir()) == ["u42.lock", "u42_blobs", "u42_ctx.json", "u42_raw.jsonl"]
    assert _mode(tmp_path / "ws") == 0o700
    assert _mode(folder) == 0o700
    assert _mode(folder / "u42_blobs") == 0o700
    for name in ["u42_ctx.json", "u42_raw.jsonl", "u42.lock", "u42_blobs/out"]:
        assert _mode(folder / name) == 0o600, name
    record = json.loads((folder / "u42_raw.jsonl").read_bytes())
    assert record["seq"] == 1 and record["view"] == "" and record["msg"] == {"role": "user", "content": "hi"}
    assert json.loads((folder / "u42_ctx.json").read_text("utf-8"))["format_version"] == 2
    assert store.delete("u42")
    assert list(folder.iterdir()) == []


def test_file_store_relative_url_resolves_against_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("file://workspace/sessions?fsync=false")
    monkeypatch.chdir("/")  # a later chdir must not move the store
    store.append("s", [{"n": 1}])
    assert (tmp_path / "workspace" / "sessions" / "s_raw.jsonl").is_file()
    with pytest.raises(StoreError, match="unknown option 'fsnyc'"):
        open_store("file://x?fsnyc=0")
    with pytest.raises(StoreError, match="no path"):
        open_store("file://")


def test_sqlite_store_file_permissions_and_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    rel = open_store("sqlite:///data/rel.db?synchronous=normal&busy_timeout=2")
    rel.append("s", [{"n": 1}])
    assert _mode(tmp_path / "data") == 0o700
    assert _mode(tmp_path / "data" / "rel.db") == 0o600
    assert _mode(tmp_path / "data" / "rel.db-wal") == 0o600
    rel.close()
    absolute = open_store(f"sqlite:///{tmp_path}/abs.db")  # sqlite:////tmp/... = absolute
    assert f"sqlite:///{tmp_path}/abs.db".startswith("sqlite:////")
    assert (
        absolute.list_sessions() == []
        and [r.message for r in absolute.read_records("s")] == []
        and absolute.load_snapshot("s") is None
    )
    assert not (tmp_path / "abs.db").exists()  # opening and reading never create the database
    absolute.put_blob("s", "k", "v")
    absolute.close()
    assert (tmp_path / "abs.db").is_file()
    for url, needle in [
        ("sqlite:///:memory:", "database file path"),
        ("sqlite:///x.db?synchronous=OFF", "FULL or NORMAL"),
        ("sqlite:///x.db?busy_timeout=soon", "busy_timeout"),
        ("sqlite://x.db", "not a sqlite store URL"),
    ]:
        with pytest.raises(StoreError, match=needle):
            open_store(url)
    import sqlite3

    with sqlite3.connect(tmp_path / "data" / "rel.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_sqlite_store_refuses_a_newer_schema(tmp_path: Path) -> None:
    import sqlite3

    store = open_store(f"sqlite:///{tmp_path}/s.db")
    store.append("s", [{"n": 1}])
    store.close()
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute("UPDATE ctxlife_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 99"):
        open_store(f"sqlite:///{tmp_path}/s.db")


def test_redis_url_options_ttl_and_prefix(redis_url: str, redis_client: Any) -> None:
    store = open_store(f"{redis_url}?prefix=ttltest:&ttl=100&socket_timeout=5")
    try:
        store.append("t", [{"n": 1}])
        assert 90 < redis_client.ttl("ttltest:{t}:raw") <= 100
        redis_client.expire("ttltest:{t}:raw", 5)
        store.save_snapshot(snap("t"))  # any write refreshes the whole session
        assert 90 < redis_client.ttl("ttltest:{t}:raw") <= 100
        assert 90 < redis_client.ttl("ttltest:{t}:ctx") <= 100
        store.put_blob("t", "k", "v")
        assert 90 < redis_client.ttl("ttltest:{t}:blobs") <= 100
        assert sorted(redis_client.keys("ttltest:*")) == [b"ttltest:{t}:blobs", b"ttltest:{t}:ctx", b"ttltest:{t}:raw"]
        assert redis_client.type("ttltest:{t}:raw") == b"list"
        assert store.delete("t")
    finally:
        store.close()
    no_ttl = open_store(f"{redis_url}?prefix=nottl:")
    try:
        no_ttl.append("t", [{"n": 1}])
        assert redis_client.ttl("nottl:{t}:raw") == -1
        no_ttl.delete("t")
    finally:
        no_ttl.close()
    with pytest.raises(StoreError, match="ttl"):
        open_store(f"{redis_url}?ttl=soon")


def test_redis_prefix_with_glob_characters_lists_only_its_own_sessions(redis_url: str) -> None:
    a = open_store(f"{redis_url}?prefix=glob[1]*:")
    b = open_store(f"{redis_url}?prefix=glob1x:")
    try:
        a.append("mine", [{"n": 1}])
        b.append("theirs", [{"n": 1}])
        assert [i.session_id for i in a.list_sessions()] == ["mine"]
        assert [i.session_id for i in b.list_sessions()] == ["theirs"]
    finally:
        a.delete("mine")
        b.delete("theirs")
        a.close()
        b.close()


def test_redis_credentials_pass_through_and_are_never_shown(redis_url: str, redis_client: Any) -> None:
    # An ACL user that may only touch keys under its prefix: the whole suite of operations working
    # proves both that user:password reached redis-py and that no key outside the prefix is used.
    redis_client.execute_command("ACL", "SETUSER", "ctxtest", "on", ">s3cr3t-pw", "~acl-prefix:*", "+@all")
    try:
        url = redis_url.replace("redis://", "redis://ctxtest:s3cr3t-pw@") + "?prefix=acl-prefix:"
        store = open_store(url)
        assert "s3cr3t-pw" not in repr(store) and "***" in store.url
        try:
            store.append("s", [{"n": 1}])
            store.save_snapshot(snap("s"))
            store.put_blob("s", "k", "v")
            with store.lock("s", timeout=1):
                pass
            assert [r.message for r in store.read_records("s")] == [{"n": 1}]
            assert [i.session_id for i in store.list_sessions()] == ["s"]
            assert store.delete("s")
        finally:
            store.close()
        wrong = redis_url.replace("redis://", "redis://ctxtest:wr0ng-pw@")
        with pytest.raises(StoreError) as info:
            open_store(wrong)
        assert "wr0ng-pw" not in str(info.value)
        assert "ctxtest:***@" in str(info.value)
    finally:
        redis_client.execute_command("ACL", "DELUSER", "ctxtest")


def test_rediss_url_reaches_redis_py_as_tls(redis_url: str) -> None:
    # The test server speaks plain TCP, so a TLS handshake against it must fail: proof that the
    # rediss:// scheme reached redis-py (a plain connection would succeed).
    url = redis_url.replace("redis://", "rediss://") + "?socket_connect_timeout=2&socket_timeout=2"
    with pytest.raises(StoreError, match="connect failed"):
        open_store(url)


def test_redis_unreachable_server_is_a_store_error() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    with pytest.raises(StoreError, match="connect failed"):
        open_store(f"redis://127.0.0.1:{port}/0?socket_connect_timeout=1")


# -- the file store's torn-record handling -----------------------------------------------------


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_a_file_stores_own_reader_is_a_separate_handle_of_its_class_that_reads_what_the_store_appends(
    tmp_path: Path,
) -> None:
    """The recall index reads through one: a handle sharing the store's read positions was moved by
    every append, and each of its reads parsed the whole history again (83 ms a call at 10k)."""

    class Dated(FileStore):  # a subclass's reads stay (a replay's scratch copy gives records their times)
        def read_records(self, session_id: str, after_seq: int = 0, **kw: Any) -> list[Any]:
            return [r for r in super().read_records(session_id, after_seq, **kw) if r.seq != 2]

    store = Dated(tmp_path / "s")
    store.append("a", [{"role": "user", "content": f"m{i}"} for i in range(3)])
    reader = store.own_reader()
    assert reader is not store and type(reader) is Dated and reader.directory == store.directory
    assert [r.seq for r in reader.read_records("a")] == [1, 3]
    store.append("a", [{"role": "assistant", "content": "m3"}])
    assert [r.seq for r in reader.read_records("a", 3)] == [4]
    assert [r.seq for r in store.read_records("a", 2)] == [3, 4]
    reader.close()
    store.close()


def test_file_torn_last_line_is_skipped_then_repaired(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    store.append("t", [{"n": 0}, {"n": 1}])
    raw = tmp_path / "t_raw.jsonl"
    with open(raw, "ab") as f:
        f.write(b'{"seq":3,"view":"","at":1.0,"fp":"x","msg":{"n": 2, "content": "half a rec')  # a crash mid-write
    with structlog.testing.capture_logs() as logs:
        assert [r.message for r in store.read_records("t")] == [{"n": 0}, {"n": 1}]
        assert store.head("t") == 2
    skipped = [e for e in logs if e["event"] == "raw_torn_record_skipped"]
    assert skipped and skipped[0]["log_level"] == "warning"
    assert skipped[0]["session_id"] == "t" and "half" not in repr(skipped[0])  # no contents
    with structlog.testing.capture_logs() as logs:
        store.append("t", [{"n": 2}, {"n": 3}])
    assert [e["event"] for e in logs] == ["raw_torn_record_repaired"]
    assert logs[0]["bytes_removed"] == len(
        b'{"seq":3,"view":"","at":1.0,"fp":"x","msg":{"n": 2, "content": "half a rec'
    )
    assert [(r["seq"], r["msg"]) for r in _lines(raw)] == [(i + 1, {"n": i}) for i in range(4)]
    with structlog.testing.capture_logs() as logs:
        assert [r.message for r in store.read_records("t")] == [{"n": i} for i in range(4)]
    assert logs == []


def test_file_torn_first_line_and_invalid_last_line(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    raw = tmp_path / "t_raw.jsonl"
    raw.write_bytes(b'{"n":')
    assert [r.message for r in store.read_records("t")] == []
    store.append("t", [{"n": 0}])
    assert [r["msg"] for r in _lines(raw)] == [{"n": 0}]
    with open(raw, "ab") as f:
        f.write(b'{"n":1,\x00\x00\n')  # newline-terminated garbage as the last line
    with structlog.testing.capture_logs() as logs:
        assert [r.message for r in store.read_records("t")] == [{"n": 0}]
        assert store.head("t") == 1
    assert {e["reason"] for e in logs} == {"invalid JSON in the last line"}


@pytest.mark.parametrize(
    "garbage", [b"\n", b"   \n", b"[1,2]\n", b'"text"\n', b"{\n", b'{"seq":"x","view":"","at":1,"fp":"","msg":{}}\n']
)
def test_file_invalid_complete_last_lines_are_cut_before_the_next_append(tmp_path: Path, garbage: bytes) -> None:
    """Bug: an invalid but newline-terminated last line was skipped by readers but kept by the repair,
    so the next append glued valid records after garbage and the whole history became unreadable."""
    store = open_store(f"file://{tmp_path}")
    store.append("t", [{"role": "user", "content": "q0"}])
    raw = tmp_path / "t_raw.jsonl"
    with open(raw, "ab") as f:
        f.write(garbage + garbage)  # two invalid lines at the end
    assert [r.message for r in store.read_records("t")] == [{"role": "user", "content": "q0"}]
    with structlog.testing.capture_logs() as logs:
        store.append("t", [{"role": "assistant", "content": "a0"}])
    assert "raw_torn_record_repaired" in [e["event"] for e in logs]
    assert [r.seq for r in store.read_records("t")] == [1, 2]  # strict read: no StoreError
    assert [r.message for r in store.read_records("t")] == [
        {"role": "user", "content": "q0"},
        {"role": "assistant", "content": "a0"},
    ]
    fresh = open_store(f"file://{tmp_path}")  # another process, no cached state
    assert [r.message["content"] for r in fresh.read_records("t")] == ["q0", "a0"]


def _record_lines(*lines: bytes) -> bytes:
    """Raw-file lines: ``b"n"`` is the stored record of message ``{"n": n}`` (seq n + 1), anything else as it is."""
    record = {"seq": 0, "view": "", "at": 1.0, "fp": "x", "msg": {}}
    return b"".join(
        (json.dumps({**record, "seq": int(line) + 1, "msg": {"n": int(line)}}).encode() if line.isdigit() else line)
        + b"\n"
        for line in lines
    )


def test_file_corruption_before_the_last_line_raises(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    (tmp_path / "t_raw.jsonl").write_bytes(_record_lines(b"0", b"GARBAGE", b"2"))
    with pytest.raises(StoreError, match="corrupt at line 2"):
        [r.message for r in store.read_records("t")]
    (tmp_path / "u_raw.jsonl").write_bytes(_record_lines(b"0", b"[1, 2]", b"2"))
    with pytest.raises(StoreError, match="line 2"):
        [r.message for r in store.read_records("u")]


def test_file_line_holding_two_documents_is_corruption_not_two_records(tmp_path: Path) -> None:
    # A whole file is decoded in one go when every line is valid; a line "a,b" must not pass for two.
    store = open_store(f"file://{tmp_path}")
    two = _record_lines(b"1", b"2").replace(b"}\n{", b"},{").rstrip(b"\n")
    (tmp_path / "t_raw.jsonl").write_bytes(_record_lines(b"0", two, b"3"))
    with pytest.raises(StoreError, match="corrupt at line 2"):
        [r.message for r in store.read_records("t")]
    (tmp_path / "u_raw.jsonl").write_bytes(_record_lines(b"0", b"1"))
    assert [r.message for r in store.read_records("u")] == [{"n": 0}, {"n": 1}]


def test_file_corrupt_snapshot_raises_but_listing_survives(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    store.append("ok", [{"n": 1}])
    (tmp_path / "bad_ctx.json").write_text('{"format_version": 1, "sess')
    with pytest.raises(StoreError, match="bad_ctx.json"):
        store.load_snapshot("bad")
    with structlog.testing.capture_logs() as logs:
        assert store.list_sessions() == [SessionInfo("bad", 0, None), SessionInfo("ok", 1, None)]
    assert [e["event"] for e in logs] == ["snapshot_unreadable"]


def test_file_store_refuses_to_follow_symlinks(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    store = open_store(f"file://{folder}")
    store.append("real", [{"n": 1}])
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(b'{"secret":1}\n')
    (folder / "evil_raw.jsonl").symlink_to(outside)
    (folder / "evil_ctx.json").symlink_to(outside)
    with pytest.raises(StoreError):
        store.append("evil", [{"n": 2}])
    with pytest.raises(StoreError):
        [r.message for r in store.read_records("evil")]
    with pytest.raises(StoreError):
        store.load_snapshot("evil")
    assert outside.read_bytes() == b'{"secret":1}\n'


def test_file_store_ignores_foreign_files(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / ".hidden_ctx.json").write_text("x")
    (tmp_path / "a b_raw.jsonl").write_text("x")  # not a valid id
    (tmp_path / "dir_raw.jsonl").mkdir()
    assert store.list_sessions() == []


# -- open_store and the scheme registry ----------------------------------------------------------


def test_open_store_errors_name_the_fix() -> None:
    with pytest.raises(StoreError, match="no scheme.*file://workspace/sessions"):
        open_store("workspace/sessions")
    with pytest.raises(
        StoreError, match=r"unknown session store scheme 'nope'.*file, (postgres, postgresql, )?redis, rediss, sqlite"
    ):
        open_store("nope://x")


def test_register_store_scheme(tmp_path: Path) -> None:
    from ctxlife import sessions
    from ctxlife.errors import PluginConflictError
    from ctxlife.sessions.file import FileStore

    opened: list[str] = []

    def factory(url: str) -> SessionStore:
        opened.append(url)
        return FileStore(tmp_path / url.split("://", 1)[1])

    try:
        register_store_scheme("mem-test", factory)
        store = open_store("mem-test://x")
        store.append("s", [{"n": 1}])
        assert opened == ["mem-test://x"]
        assert (tmp_path / "x" / "s_raw.jsonl").exists()
        assert "mem-test" in sessions.store_schemes()
        with pytest.raises(PluginConflictError, match="already offered by ctxlife"):
            register_store_scheme("file", factory)
        register_store_scheme("file", factory, replace=True)
        assert [r.message for r in open_store("file://y").read_records("s")] == []
        for bad in ["", "UPPER", "1abc", "a b"]:
            with pytest.raises(StoreError, match="invalid session store scheme name"):
                register_store_scheme(bad, factory)
        register_store_scheme("not-a-store", lambda url: object())  # type: ignore[arg-type,return-value]
        with pytest.raises(StoreError, match="not a SessionStore"):
            open_store("not-a-store://x")
    finally:
        for scheme in ("mem-test", "file", "not-a-store"):
            sessions.REGISTRY.unregister(scheme)
    assert isinstance(open_store(f"file://{tmp_path / 'z'}"), FileStore)


def test_closed_store_refuses_work(store: SessionStore) -> None:
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.append("s", [{"n": 1}])


def test_importing_sessions_has_no_side_effects(tmp_path: Path) -> None:
    import subprocess
    import sys

    # Whatever the package root imports is not this module's doing: compare against it.
    code = (
        "import sys, ctxlife; before = set(sys.modules);"
        "import ctxlife.sessions, ctxlife.cli.session;"
        "new = set(sys.modules) - before;"
        "print(','.join(sorted(m for m in new if m.split('.')[0] in ('redis', 'rich', 'sqlite3'))))"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""
    assert list(tmp_path.iterdir()) == []


# -- property: any JSON messages round-trip exactly ----------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
messages_strategy = st.lists(
    st.builds(
        lambda role, rest: {"role": role, **rest},
        st.sampled_from(["user", "assistant", "tool", "system"]),
        st.dictionaries(st.text(max_size=10).filter(lambda k: k != "role"), json_values, max_size=5),
    ),
    max_size=6,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=messages_strategy)
def test_any_json_messages_round_trip(store: SessionStore, messages: list[dict[str, Any]]) -> None:
    sid = "prop"
    store.delete(sid)
    store.append(sid, messages)
    store.save_snapshot(Snapshot(session_id=sid, messages=messages, raw_length=len(messages), meta={"m": messages}))
    assert canonical([r.message for r in store.read_records(sid)]) == canonical(messages)
    loaded = store.load_snapshot(sid)
    assert loaded is not None
    assert canonical(loaded.messages) == canonical(messages)
    assert canonical(loaded.meta) == canonical({"m": messages})


@pytest.mark.parametrize(("count", "corrupt"), [(4, 2), (5000, 2), (5000, 4500)])
def test_sqlite_record_that_is_not_one_json_object_is_named_not_misread(
    tmp_path: Path, count: int, corrupt: int
) -> None:
    # A read decodes records in large batches; a record whose text is corrupt (or holds two
    # documents) must still be reported as that record, never shift the others, in any batch.
    import sqlite3

    url = f"sqlite:///{tmp_path / 's.db'}"
    store = open_store(url)
    store.append("t", [{"role": "user", "content": f"m{i}"} for i in range(count)])
    store.close()
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute(f'UPDATE ctxlife_raw SET json = \'{{"role":"user"}},{{"role":"x"}}\' WHERE seq = {corrupt}')
    conn.close()
    store = open_store(url)
    with pytest.raises(StoreError, match=f"seq={corrupt}"):
        store.read_records("t")
    read = [r.message["content"] for r in store.read_records("t", strict=False)]
    assert read == [f"m{i}" for i in range(count) if i != corrupt - 1]
    store.close()
