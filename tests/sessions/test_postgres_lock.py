"""The postgres store's session lock and write transaction as a user meets them: the lock is its
schema's and its session's (seen in pg_locks), a lock without a free connection names itself, a lock
lost past its TTL is logged with what was lost, a write to an expired session starts it over and logs
it: the cases scope `stores-postgres` of `make mutate` found no test for
(docs/mutation/stores-postgres.md).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import structlog
from pg_sql import pg_sql

from ctxlife.errors import StoreError
from ctxlife.sessions import open_store
from ctxlife.sessions.postgres import _key

pytestmark = pytest.mark.usefixtures("postgres_url")


@pytest.fixture
def url(postgres_url: str) -> str:
    return f"{postgres_url}?schema=t_lock_{uuid.uuid4().hex[:12]}"


def test_a_session_lock_is_the_advisory_lock_of_its_schema_and_session(url: str) -> None:
    schema = url.rsplit("schema=", 1)[1]
    elsewhere = f"{url.split('?', 1)[0]}?schema=t_lock_{uuid.uuid4().hex[:12]}"
    with open_store(url) as store, open_store(elsewhere) as other:
        with store.lock("s", timeout=0):
            key = _key("lock", schema, "s") & (2**64 - 1)  # pg_locks shows a bigint key as two oids
            held = pg_sql(url, "SELECT classid::bigint, objid::bigint FROM pg_locks WHERE locktype = 'advisory'")
            assert (key >> 32, key & 0xFFFFFFFF) in held
            with other.lock("s", timeout=0):  # the same session id in another schema: another lock
                pass


def test_a_lock_without_a_free_connection_names_itself_and_its_session(url: str) -> None:
    with open_store(f"{url}&pool_max=1&pool_min=0&pool_timeout=0.2") as store:
        with store.lock("a", timeout=0):  # holds the pool's one connection
            with pytest.raises(StoreError) as info, store.lock("b", timeout=0):
                pass
        text = str(info.value)
        assert text.startswith(f"postgres store {store.url}: lock of session 'b' failed: "), text  # type: ignore[attr-defined]
        assert text.endswith("; is the database reachable, and are pool_max connections enough?"), text


def test_a_lock_held_past_its_ttl_is_lost_and_its_release_says_what_was_lost(url: str) -> None:
    with open_store(url) as store, open_store(url) as other, structlog.testing.capture_logs() as logs:
        with store.lock("L", ttl_seconds=0.2, timeout=0):
            # the server ends the idle holder's transaction after 0.2 s: the other worker gets the lock then
            with other.lock("L", ttl_seconds=10, timeout=10):
                pass
    expired = [e for e in logs if e["event"] == "session_lock_expired"]
    assert [
        {k: e.get(k, "missing") for k in ("log_level", "store", "session_id", "ttl_seconds", "hint")} for e in expired
    ] == [
        {
            "log_level": "warning",
            "store": "postgres",
            "session_id": "L",
            "ttl_seconds": 0.2,
            "hint": "the lock expired while held; another worker may have taken it",
        }
    ]


def test_a_write_to_an_expired_session_starts_it_over_and_logs_it(url: str) -> None:
    with open_store(f"{url}&ttl=60") as store:
        store.append("s", [{"role": "user", "content": "old"}])
        pg_sql(url, "UPDATE {s}.ctxlife_sessions SET touched_at = touched_at - 3600")  # idle for an hour
        with structlog.testing.capture_logs() as logs:
            store.append("s", [{"role": "user", "content": "new"}])
        assert [(r.seq, r.message["content"]) for r in store.read_records("s")] == [(1, "new")]
    expired: list[dict[str, Any]] = [e for e in logs if e["event"] == "session_expired"]
    assert [{k: e.get(k, "missing") for k in ("log_level", "store", "session_id", "ttl_seconds")} for e in expired] == [
        {"log_level": "info", "store": "postgres", "session_id": "s", "ttl_seconds": 60.0}
    ]
