"""Opening the postgres store: what its URL decides (the schema, ctxlife's options taken out of libpq's,
the pool's settings and which stores share a pool), each bad option refused by name, the advisory-lock
keys every version agrees on, and closing releasing the pool: the cases scope `stores-postgres` of
`make mutate` found no test for (docs/mutation/stores-postgres.md). The errors of a bad option come
before any connection: those tests need no server.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pg_sql import pg_sql

from ctxlife.errors import StoreError
from ctxlife.events import redact_url
from ctxlife.sessions import open_store
from ctxlife.sessions.pg_connect import SharedPool, split_options
from ctxlife.sessions.postgres import PostgresStore, _key

# nothing listens there: every URL below is refused before a connection is tried
NOWHERE = "postgres://ctxlife:pg-secret@127.0.0.1:1/db"


def msg(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_a_database_that_cannot_be_reached_is_named_with_the_reason(caplog: pytest.LogCaptureFixture) -> None:
    # The pool only says it waited; the error says why a connection fails (here: no such host).
    url = "postgresql://ctxlife:pg-secret@nohost.invalid:5432/db?pool_timeout=0.2"
    with caplog.at_level("CRITICAL", logger="psycopg.pool"), pytest.raises(StoreError) as info:
        open_store(url)
    text = str(info.value)
    waited, _, cause = text.partition(" (a new connection fails: ")
    assert waited.endswith("couldn't get a connection after 0.20 sec") and "nohost.invalid" in cause, text
    assert "pg-secret" not in text


def test_without_psycopg_the_store_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` raises ImportError
    with pytest.raises(StoreError) as info:
        PostgresStore(NOWHERE)
    assert str(info.value) == (
        "the postgres session store needs psycopg 3 and psycopg-pool: pip install 'ctxlife[postgres]'"
    )


def test_ctxlife_options_are_taken_out_and_libpqs_pass_through() -> None:
    conninfo, ours = split_options(
        "postgres://u:pw@db.example:5433/app?schema=team_a&sslmode=require&pool_max=3&ttl=&application_name=w 1",
        "shown",
    )
    assert conninfo == "postgresql://u:pw@db.example:5433/app?sslmode=require&application_name=w%201&connect_timeout=5"
    assert ours == {"schema": "team_a", "pool_max": "3", "ttl": ""}
    # postgresql:// too; a connect_timeout of the URL's own is kept, not doubled
    assert split_options("postgresql://h/app?connect_timeout=2", "shown") == (
        "postgresql://h/app?connect_timeout=2",
        {},
    )


def test_a_url_of_another_kind_or_malformed_is_refused_naming_it_without_its_password() -> None:
    for url in ("redis://h/0", "mysql://u:pg-secret@h/app", "file:///tmp/x"):
        with pytest.raises(StoreError) as info:
            PostgresStore(url)
        assert str(info.value) == (
            f"not a postgres store URL: {redact_url(url)!r} (expected postgres://user@host:port/dbname)"
        )
        assert "pg-secret" not in str(info.value)
    with pytest.raises(StoreError) as info:
        PostgresStore("postgres://u:pg-secret@[::1/app")
    # (a URL urlsplit cannot read is never shown: its password could be anywhere in it)
    assert str(info.value) == "malformed postgres store URL '<unparseable URL>': Invalid IPv6 URL"


def test_a_bad_option_is_refused_before_connecting_naming_the_url_without_its_password() -> None:
    cases = {
        "schema=ok-name": "schema='ok-name' must be 1-63 lowercase letters, digits or '_', not starting with a digit",
        f"schema={'a' * 64}": f"schema='{'a' * 64}' must be 1-63 lowercase letters, digits or '_', not starting "
        "with a digit",
        "pool_min=0.5": "pool_min='0.5' must be a whole number >= 0",
        "pool_max=3.0": "pool_max='3.0' must be a whole number >= 0",
        "pool_idle=nan": "pool_idle='nan' must be a number of seconds >= 0",
        "pool_timeout=-inf": "pool_timeout='-inf' must be a number of seconds >= 0",
        "pool_min=2&pool_max=1": "need 0 <= pool_min <= pool_max and pool_max >= 1",
    }
    for option, text in cases.items():
        url = f"{NOWHERE}?{option}"
        with pytest.raises(StoreError) as info:
            PostgresStore(url)
        assert str(info.value) == f"postgres store {redact_url(url)}: {text}"
        assert "pg-secret" not in str(info.value)
    url = f"{NOWHERE}?ttl=soon"
    with pytest.raises(StoreError) as info:
        PostgresStore(url)
    assert str(info.value).startswith(f"store URL {redact_url(url)!r}: ttl='soon': ")


def test_the_advisory_lock_keys_are_the_same_in_every_version() -> None:
    # Workers of two ctxlife versions (a rolling deploy) take the same locks: the migrate lock of a
    # schema, a session's lock. Signed 64-bit: PostgreSQL's bigint.
    assert _key("migrate", "public") == -2891058638380938007
    assert _key("migrate", "t_x") == -336403948599209499
    assert _key("lock", "public", "s") == -2115553818796664469
    assert _key("lock", "sch", "session-1") == 4904661503684125789


@pytest.fixture
def database(postgres_url: str) -> Iterator[str]:
    """A database of this test's own (its public schema is nobody else's), dropped at the end."""
    name = f"ctxlife_public_{uuid.uuid4().hex[:12]}"
    pg_sql(postgres_url, f'CREATE DATABASE "{name}"')
    base, _, query = postgres_url.partition("?")
    yield base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")
    pg_sql(postgres_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_without_a_schema_option_the_tables_are_in_public(database: str) -> None:
    with open_store(database) as store:
        assert store.schema == "public"  # type: ignore[attr-defined]
        store.append("s", [msg("a")])
        assert [r.message for r in store.read_records("s")] == [msg("a")]
    tables = pg_sql(
        database,
        "SELECT table_schema, table_name FROM information_schema.tables WHERE table_name = 'ctxlife_raw'",
    )
    assert tables == [("public", "ctxlife_raw")]


def _pools_of(marker: float) -> list[SharedPool]:
    """The process's shared pools whose pool_lifetime is ``marker`` (this test's own settings)."""
    return [shared for key, shared in SharedPool._pools.items() if key[2][3] == marker]


def test_stores_share_a_pool_only_when_every_pool_setting_is_the_same(postgres_url: str) -> None:
    marker = 1000 + uuid.uuid4().int % 1000  # pool_lifetime: this test's pools, not another test's
    base = f"{postgres_url}?schema=t_opt_{uuid.uuid4().hex[:12]}&pool_lifetime={marker}"
    variants = ["pool_min=0", "pool_max=9", "pool_idle=7", "pool_timeout=3", "pgbouncer=true"]
    first = open_store(f"{base}&ttl=60")
    stores = [open_store(f"{base}&{v}") for v in variants]
    try:
        same = open_store(base)  # another ttl, the same pool settings
        try:
            assert same._shared is first._shared  # type: ignore[attr-defined]
        finally:
            same.close()
        shared = [s._shared for s in stores]  # type: ignore[attr-defined]
        assert len({id(s) for s in [first._shared, *shared]}) == len(variants) + 1  # type: ignore[attr-defined]
        pools = [s.pool for s in shared]
        assert (pools[0].min_size, pools[1].max_size, pools[2].max_idle, pools[3].timeout) == (0, 9, 7.0, 3.0)
        assert pools[4].kwargs == {"autocommit": True, "prepare_threshold": None}
    finally:
        for store in [first, *stores]:
            store.close()
    assert _pools_of(marker) == []


def test_closing_a_store_twice_leaves_the_pool_another_store_uses(postgres_url: str) -> None:
    marker = 2000 + uuid.uuid4().int % 1000
    url = f"{postgres_url}?schema=t_opt_{uuid.uuid4().hex[:12]}&pool_lifetime={marker}"
    a, b = open_store(url), open_store(url)
    pool = b._shared.pool  # type: ignore[attr-defined]
    a.close()
    a.close()
    with pytest.raises(StoreError, match="is closed"):
        a.append("s", [msg("a")])
    b.append("s", [msg("b")])  # the pool b shares is still open
    assert [r.message for r in b.read_records("s")] == [msg("b")]
    b.close()
    assert pool.closed and _pools_of(marker) == []


def test_a_store_refused_when_it_opens_releases_its_pool(postgres_url: str) -> None:
    marker = 3000 + uuid.uuid4().int % 1000
    url = f"{postgres_url}?schema=t_opt_{uuid.uuid4().hex[:12]}&pool_lifetime={marker}"
    with open_store(url) as store:
        store.append("s", [msg("a")])  # the schema exists
    pg_sql(url, "INSERT INTO {s}.ctxlife_schema_version (version) VALUES (99)")  # a newer ctxlife's
    assert _pools_of(marker) == []  # the precondition: no store holds a pool of these settings
    with pytest.raises(StoreError, match="version 99"):
        open_store(url)
    assert _pools_of(marker) == []


def test_a_store_on_another_database_gets_a_pool_of_its_own(postgres_url: str, database: str) -> None:
    # the same pool settings, two databases: each store writes to its own
    here = f"{postgres_url}?schema=t_opt_{uuid.uuid4().hex[:12]}"
    with open_store(here) as a, open_store(database) as b:
        assert a._shared is not b._shared  # type: ignore[attr-defined]
        b.append("s", [msg("in the other database")])
        assert a.read_records("s") == []
    assert pg_sql(database, "SELECT json FROM {s}.ctxlife_raw") == [
        ('{"role":"user","content":"in the other database"}',)
    ]
