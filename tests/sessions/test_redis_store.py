"""What the Redis store keeps where (mutation scope stores-redis, issue 44): each view's snapshot in its own
field, every write refreshing the whole session's TTL, a corrupt element named by its key and position, the
listing's keys, the mark key stored once, each failing operation named, and a client that decodes replies."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

from ctxlife.errors import StoreError
from ctxlife.sessions import Snapshot, open_store
from ctxlife.sessions.redis import RedisStore


@pytest.fixture
def prefix() -> str:
    return f"rs-{uuid.uuid4().hex[:10]}:"


@pytest.fixture
def store(redis_url: str, prefix: str) -> Iterator[Any]:
    opened = open_store(f"{redis_url}?prefix={prefix}&ttl=100")
    yield opened
    opened.close()


def snap(view: str = "", updated_at: float = 1_700_000_000.5, text: str = "hi") -> Snapshot:
    return Snapshot(
        session_id="s", messages=[{"role": "user", "content": text}], raw_length=1, updated_at=updated_at, view=view
    )


def _ttls(redis_client: Any, prefix: str) -> dict[str, int]:
    return {k.decode(): redis_client.ttl(k) for k in redis_client.keys(f"{prefix}*")}


def test_each_views_snapshot_is_a_field_of_the_sessions_views_hash(store: Any, redis_client: Any, prefix: str) -> None:
    store.save_snapshot(snap("Writer.task0", text="w"))
    store.save_snapshot(snap("Editor.task1", text="e"))
    store.save_snapshot(snap("", text="default"))
    assert redis_client.type(f"{prefix}{{s}}:views") == b"hash"
    assert sorted(redis_client.hkeys(f"{prefix}{{s}}:views")) == [b"Editor.task1", b"Writer.task0"]
    stored = json.loads(redis_client.hget(f"{prefix}{{s}}:views", "Writer.task0").decode("utf-8"))
    assert stored["messages"] == [{"role": "user", "content": "w"}]
    assert json.loads(redis_client.get(f"{prefix}{{s}}:ctx"))["messages"][0]["content"] == "default"
    for view, text in (("Writer.task0", "w"), ("Editor.task1", "e"), ("", "default")):
        loaded = store.load_snapshot("s", view)
        assert loaded is not None and loaded.view == view and loaded.messages[0]["content"] == text
    assert store.load_snapshot("s", "Other.task2") is None and store.load_snapshot("t", "Writer.task0") is None


def test_every_kind_of_write_refreshes_the_whole_sessions_ttl(store: Any, redis_client: Any, prefix: str) -> None:
    store.append("s", [{"role": "user", "content": "a"}])
    store.save_snapshot(snap("Writer.task0"))
    store.save_snapshot(snap(""))
    store.put_blob("s", "k", "v")
    writes = {
        "append_call": lambda: store.append_call("s", "Writer.task0", {"messages": []}),
        "save_snapshot of a view": lambda: store.save_snapshot(snap("Writer.task0")),
        "save_snapshot": lambda: store.save_snapshot(snap("")),
        "put_blob": lambda: store.put_blob("s", "k2", "v"),
        "append": lambda: store.append("s", [{"role": "user", "content": "b"}]),
    }
    for what, write in writes.items():
        for key in redis_client.keys(f"{prefix}*"):
            redis_client.expire(key, 5)
        write()
        ttls = _ttls(redis_client, prefix)
        assert set(ttls) == {f"{prefix}{{s}}:{kind}" for kind in ("ctx", "views", "raw", "blobs", "calls")}, what
        assert all(90 < t <= 100 for t in ttls.values()), (what, ttls)


def test_a_call_record_is_one_element_holding_its_view_and_document(store: Any, redis_client: Any, prefix: str) -> None:
    assert store.append_call("s", "Writer.task0", {"messages": [{"role": "user", "content": "é"}]}) == 1
    assert store.append_call("s", "", {"messages": []}) == 2
    elements = redis_client.lrange(f"{prefix}{{s}}:calls", 0, -1)
    assert [json.loads(e.decode("utf-8")) for e in elements] == [
        {"view": "Writer.task0", "doc": {"messages": [{"role": "user", "content": "é"}]}},
        {"view": "", "doc": {"messages": []}},
    ]
    assert [c.view for c in store.read_calls("s")] == ["Writer.task0", ""]
    assert [c.view for c in store.read_calls("s", "Writer.task0")] == ["Writer.task0"]


def test_a_call_record_that_is_not_json_names_its_session(store: Any) -> None:
    with pytest.raises(StoreError, match="call record of session 's'"):
        store.append_call("s", "", {"bad": float("nan")})


def test_a_corrupt_raw_element_is_named_by_its_key_and_position_or_skipped_and_logged(
    store: Any, redis_client: Any, prefix: str
) -> None:
    store.append("s", [{"role": "user", "content": "a"}])
    redis_client.rpush(f"{prefix}{{s}}:raw", b"{not json", b"[1, 2]")
    store.append("s", [{"role": "user", "content": "d"}])
    key = f"{prefix}{{s}}:raw"
    with pytest.raises(StoreError) as caught:
        store.read_records("s")
    assert str(caught.value) == f"raw record 2 of session 's' (key {key!r} in {store.url}) is corrupt: invalid JSON"
    with pytest.raises(StoreError, match=r"raw record 3 of session 's' .* is corrupt: (?!invalid JSON).+"):
        store.read_records("s", 2)
    with capture_logs() as logs:
        lenient = store.read_records("s", strict=False)
    assert [(r.seq, r.message["content"]) for r in lenient] == [(1, "a"), (4, "d")]
    assert [(e["event"], e["log_level"], e["store"], e["session_id"], e["seq"]) for e in logs] == [
        ("raw_record_skipped", "error", "redis", "s", 2),
        ("raw_record_skipped", "error", "redis", "s", 3),
    ]
    assert logs[0]["problem"] == "invalid JSON" and logs[1]["problem"] != "invalid JSON" and logs[1]["problem"]
    redis_client.rpush(key, b"{" + b"x" * 500)
    with capture_logs() as logs:
        store.read_records("s", 4, strict=False)
    assert logs[0]["problem"] == "invalid JSON"


def test_a_corrupt_snapshot_is_named_by_its_key_or_view(store: Any, redis_client: Any, prefix: str) -> None:
    redis_client.set(f"{prefix}{{s}}:ctx", b"{not json")
    redis_client.hset(f"{prefix}{{s}}:views", "Writer.task0", b"{not json")
    with pytest.raises(StoreError) as caught:
        store.load_snapshot("s")
    assert str(caught.value).startswith(f"snapshot key '{prefix}{{s}}:ctx' in {store.url} is not valid JSON")
    with pytest.raises(StoreError) as caught:
        store.load_snapshot("s", "Writer.task0")
    assert str(caught.value).startswith(
        f"snapshot of view 'Writer.task0' ('{prefix}{{s}}:views' in {store.url}) is not valid JSON"
    )


def test_the_listing_reads_only_the_stores_own_session_keys(store: Any, redis_client: Any, prefix: str) -> None:
    store.append("plain", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    store.save_snapshot(Snapshot(session_id="viewed", messages=[], raw_length=0, updated_at=5.0, view="W.task0"))
    store.save_snapshot(Snapshot(session_id="both", messages=[], raw_length=0, updated_at=7.0, view="W.task0"))
    store.save_snapshot(Snapshot(session_id="both", messages=[], raw_length=0, updated_at=3.0))
    store.put_blob("blob_only", "k", "v")  # a blob alone is no session
    store.append_call("calls_only", "", {"messages": []})
    for foreign in ("{bad id!}:raw", "nobraces:raw", "{x}:other", "{x}", "{x:raw", "x}:raw"):
        redis_client.set(f"{prefix}{foreign}", b"1")
    redis_client.set(f"{prefix}{{corrupt}}:ctx", b"{not json")
    with capture_logs() as logs:
        listed = {i.session_id: (i.message_count, i.updated_at) for i in store.list_sessions()}
    assert listed == {"plain": (2, None), "viewed": (0, 5.0), "both": (0, 7.0), "corrupt": (0, None)}
    assert [(e["event"], e["log_level"], e["store"], e["session_id"]) for e in logs] == [
        ("snapshot_unreadable", "warning", "redis", "corrupt")
    ]
    assert "snapshot of 'corrupt' is not valid JSON" in logs[0]["error"]


def test_an_empty_store_lists_nothing(store: Any) -> None:
    assert store.list_sessions() == []


def test_the_mark_key_is_made_once_and_a_stored_one_is_kept(
    redis_url: str, store: Any, redis_client: Any, prefix: str
) -> None:
    assert store.mark_key() is None and redis_client.get(f"{prefix}mark_key") is None  # reading makes none
    redis_client.set(f"{prefix}mark_key", ("ab" * 32).encode())  # another worker stored one first
    assert store.mark_key(create=True) == bytes.fromhex("ab" * 32)
    other = open_store(f"{redis_url}?prefix=mk-{uuid.uuid4().hex[:8]}:")
    try:
        made = other.mark_key(create=True)
        assert made is not None and len(made) == 32
        assert redis_client.get(f"{other.prefix}mark_key") == made.hex().encode()
    finally:
        other.close()


def test_a_mark_key_that_is_not_hex_is_an_error_naming_it(redis_url: str, redis_client: Any, prefix: str) -> None:
    redis_client.set(f"{prefix}mark_key", b"not hex")
    store = open_store(f"{redis_url}?prefix={prefix}")
    try:
        with pytest.raises(StoreError) as caught:
            store.mark_key()
        assert str(caught.value) == f"redis store {store.url}: the stored mark key '{prefix}mark_key' is not hex"
    finally:
        store.close()


def test_delete_says_whether_the_session_was_there_and_removes_every_key(
    store: Any, redis_client: Any, prefix: str
) -> None:
    store.put_blob("s", "k", "v")  # a blob alone is part of the session
    store.append_call("s", "", {"messages": []})
    assert store.delete("s") is True
    assert redis_client.keys(f"{prefix}*") == []
    assert store.delete("s") is False


def test_blobs_keep_any_text_and_deleting_one_keeps_the_others(store: Any) -> None:
    store.put_blob("s", "a", "Zoë 中文 \x00 end")
    store.put_blob("s", "b", "kept")
    assert store.get_blob("s", "a") == "Zoë 中文 \x00 end"
    store._delete_blob("s", "a")
    assert store.get_blob("s", "a") is None and store.get_blob("s", "b") == "kept"
    assert store.get_blob("t", "b") is None


def test_an_erase_rewrites_the_raw_element_in_place(store: Any, redis_client: Any, prefix: str) -> None:
    # (a value no record's time can hold: "4111" alone is in the clock's 1796641110)
    store.append("s", [{"role": "user", "content": "secret card-4111"}, {"role": "assistant", "content": "ok"}])
    assert store.erase_matching("s", "card-4111") == [1]
    raw = [e.decode("utf-8") for e in redis_client.lrange(f"{prefix}{{s}}:raw", 0, -1)]
    assert "card-4111" not in "".join(raw)
    assert "ok" in raw[1] and len(raw) == 3  # the other record kept, one remove event appended
    assert store._rewrite_records("s", {}) == 0 and store._rewrite_records("s", {99: {}}) == 0  # nothing there


def test_each_failing_operation_is_named(redis_url: str, redis_client: Any, prefix: str) -> None:
    """A user whose ACL allows only PING (the store opens, every command is refused): the error names
    the operation that failed, never a Redis traceback."""
    user = f"ping-only-{uuid.uuid4().hex[:6]}"
    redis_client.execute_command("ACL", "SETUSER", user, "on", ">pw", "~*", "-@all", "+ping")
    store = open_store(redis_url.replace("redis://", f"redis://{user}:pw@") + f"?prefix={prefix}")
    try:
        operations = {
            "load_snapshot": [lambda: store.load_snapshot("s"), lambda: store.load_snapshot("s", "W.task0")],
            "save_snapshot": [lambda: store.save_snapshot(snap(""))],
            "read_records": [lambda: store.read_records("s")],
            "append_call": [lambda: store.append_call("s", "", {})],
            "read_calls": [lambda: store.read_calls("s")],
            "mark_key": [lambda: store._read_mark_key(False)],
            "list_sessions": [store.list_sessions],
            "put_blob": [lambda: store.put_blob("s", "k", "v")],
            "get_blob": [lambda: store.get_blob("s", "k")],
            "delete_blob": [lambda: store._delete_blob("s", "k")],
            "delete": [lambda: store.delete("s")],
            "head": [lambda: store.head("s")],
            "erase": [lambda: store._rewrite_records("s", {1: {}})],
        }
        for what, calls in operations.items():
            for call in calls:
                with pytest.raises(StoreError) as caught:
                    call()
                assert str(caught.value).startswith(f"redis store {store.url}: {what} failed: "), str(caught.value)
    finally:
        store.close()
        redis_client.execute_command("ACL", "DELUSER", user)


def test_a_client_that_decodes_replies_works_as_well(redis_url: str, prefix: str) -> None:
    """``client=``: a redis-py client of the caller's, here one made with ``decode_responses=True``."""
    import redis

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    store = RedisStore(redis_url, prefix=prefix, client=client)
    try:
        store.put_blob("s", "k", "Zoë")
        assert store.get_blob("s", "k") == "Zoë"
        key = store.mark_key(create=True)
        assert key is not None and len(key) == 32
        store.save_snapshot(snap(""))
        assert [i.session_id for i in store.list_sessions()] == ["s"]
    finally:
        store.close()
        client.close()


def test_the_url_options_reach_redis_py_and_the_timeouts_default_to_2_s(redis_url: str, prefix: str) -> None:
    store = open_store(f"{redis_url}?prefix={prefix}&socket_timeout=7&client_name=ctxlife-test")
    try:
        settings = store._client.get_connection_kwargs()
        assert settings["socket_timeout"] == 7.0 and settings["socket_connect_timeout"] == 2.0
        assert settings["client_name"] == "ctxlife-test"
    finally:
        store.close()
    store = open_store(f"{redis_url}?socket_connect_timeout=3&prefix={prefix}")
    try:
        settings = store._client.get_connection_kwargs()
        assert settings["socket_timeout"] == 2.0 and settings["socket_connect_timeout"] == 3.0
        assert store.prefix == prefix  # ctxlife's own options are not redis-py's
    finally:
        store.close()


def test_close_releases_the_stores_connection_but_not_a_callers_client(redis_url: str, redis_client: Any) -> None:
    import redis

    def named(name: str) -> int:
        return sum(1 for c in redis_client.client_list() if c.get("name") == name)

    own = open_store(f"{redis_url}?client_name=ctxlife-own")
    assert named("ctxlife-own") == 1
    own.close()
    assert named("ctxlife-own") == 0
    client = redis.Redis.from_url(f"{redis_url}?client_name=ctxlife-callers")
    given = RedisStore(redis_url, client=client)
    given.close()
    assert named("ctxlife-callers") == 1  # the caller's to close
    client.close()


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"prefix": ""}, "the key prefix must be a non-empty string"),
        ({"prefix": 5}, "the key prefix must be a non-empty string"),
        ({"ttl": 0}, "ttl must be a whole number of seconds > 0"),
        ({"ttl": -1}, "ttl must be a whole number of seconds > 0"),
        ({"ttl": True}, "ttl must be a whole number of seconds > 0"),
        ({"ttl": 1.5}, "ttl must be a whole number of seconds > 0"),
    ],
)
def test_a_bad_prefix_or_ttl_is_refused_by_name(redis_url: str, options: dict[str, Any], error: str) -> None:
    with pytest.raises(StoreError) as caught:
        RedisStore(redis_url, **options)
    assert str(caught.value) == f"redis store {redis_url}: {error}"


def test_a_ttl_of_1_s_is_allowed(redis_url: str, prefix: str) -> None:
    RedisStore(redis_url, prefix=prefix, ttl=1).close()


def test_a_malformed_url_is_named(redis_url: str) -> None:
    with pytest.raises(StoreError, match=r"^malformed redis store URL '<unparseable URL>': "):
        RedisStore("redis://[bad/0")
    with pytest.raises(StoreError, match=r"^invalid redis store URL 'redis://127.0.0.1:6379/0\?db=x'"):
        RedisStore("redis://127.0.0.1:6379/0?db=x")


def test_without_the_redis_package_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(StoreError) as caught:
        RedisStore("redis://127.0.0.1:1/0")
    assert str(caught.value) == "the redis session store needs the 'redis' package: pip install redis"


def test_an_append_after_a_stale_head_writes_nothing_and_names_the_head(store: Any) -> None:
    from ctxlife.sessions import AppendConflictError

    written = store.append("s", [{"role": "user", "content": "a"}], view="W.task0")
    assert [(r.seq, r.view) for r in written] == [(1, "W.task0")]
    assert abs(written[0].recorded_at - time.time()) < 60
    for batch in ([{"role": "user", "content": "b"}], []):
        with pytest.raises(AppendConflictError) as caught:
            store.append("s", batch, if_head=0)
        assert str(caught.value).startswith("session 's' moved on: its last sequence number is 1, not 0;")
    with pytest.raises(StoreError, match="if_head must be an int >= 0"):
        store.append("s", [{"role": "user", "content": "b"}], if_head=-1)
    assert store.head("s") == 1
    assert [r.seq for r in store.append("s", [{"role": "user", "content": "b"}], if_head=1)] == [2]


def test_an_element_written_by_ctxlife_0_1_is_refused_as_corrupt_naming_its_key(
    store: Any, redis_client: Any, prefix: str
) -> None:
    # 0.1 (never released) stored plain messages; they are no records, and say so rather than read as one.
    store.append("s", [{"role": "user", "content": "a"}])
    redis_client.rpush(f"{prefix}{{s}}:raw", json.dumps({"role": "assistant", "content": "old"}))
    with pytest.raises(StoreError, match=r"is corrupt: not a record"):
        store.read_records("s")
    assert [(r.seq, r.message["content"]) for r in store.read_records("s", strict=False)] == [(1, "a")]


def test_a_long_problem_is_logged_cut_at_120_characters(store: Any, redis_client: Any, prefix: str) -> None:
    envelope = {"seq": "x" * 200, "view": "", "at": 0, "fp": "", "msg": {}}
    redis_client.rpush(f"{prefix}{{s}}:raw", json.dumps(envelope))
    with pytest.raises(StoreError) as caught:
        store.read_records("s")
    problem = str(caught.value).partition("is corrupt: ")[2]
    assert len(problem) > 120 and problem.startswith("sequence number 'xxx")
    with capture_logs() as logs:
        assert store.read_records("s", strict=False) == []
    assert logs[0]["problem"] == problem[:120]


def test_a_corrupt_call_record_is_skipped_naming_its_session(store: Any, redis_client: Any, prefix: str) -> None:
    store.append_call("s", "", {"messages": []})
    redis_client.rpush(f"{prefix}{{s}}:calls", b"{not json")
    with capture_logs() as logs:
        assert len(store.read_calls("s")) == 1
    assert [(e["session_id"], e["call"]) for e in logs] == [("s", 2)]


def test_a_blob_that_is_not_text_is_refused_naming_it(store: Any) -> None:
    with pytest.raises(StoreError) as caught:
        store.put_blob("s", "k", b"bytes")
    assert str(caught.value) == "blob 'k' of session 's' must be a str, got bytes"


def test_a_session_of_one_key_is_deleted_as_there(store: Any) -> None:
    store.append("s", [{"role": "user", "content": "a"}])
    assert store.delete("s") is True


def test_the_listing_never_shows_another_prefixs_sessions(redis_url: str, store: Any, prefix: str) -> None:
    other = open_store(f"{redis_url}?prefix={prefix[:-2]}x:")  # as long as ours
    try:
        other.append("theirs", [{"role": "user", "content": "a"}])
        store.append("mine", [{"role": "user", "content": "a"}])
        assert [i.session_id for i in store.list_sessions()] == ["mine"]
    finally:
        other.delete("theirs")
        other.close()


def test_a_listing_that_fails_after_the_scan_is_named(redis_url: str, redis_client: Any, store: Any) -> None:
    store.append("s", [{"role": "user", "content": "a"}])
    user = f"scan-only-{uuid.uuid4().hex[:6]}"
    redis_client.execute_command("ACL", "SETUSER", user, "on", ">pw", "~*", "-@all", "+ping", "+scan")
    limited = RedisStore(redis_url.replace("redis://", f"redis://{user}:pw@"), prefix=store.prefix)
    try:
        with pytest.raises(StoreError) as caught:
            limited.list_sessions()
        assert str(caught.value).startswith(f"redis store {limited.url}: list_sessions failed: ")
        with pytest.raises(StoreError) as caught:
            limited.append("s", [{"role": "user", "content": "b"}], if_head=1)
        assert str(caught.value).startswith(f"redis store {limited.url}: append failed: ")
    finally:
        limited.close()
        redis_client.execute_command("ACL", "DELUSER", user)
