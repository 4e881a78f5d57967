"""What only the postgres store has: its schema versions and `ctxlife store migrate`, compare-and-append
between processes, the advisory lock dying with its holder, the TTL sweeper run by several workers,
one pool per process and database, and its password kept out of every message.

The store contract itself runs on postgres through the store parametrisation (tests/sessions/conftest.py).
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from pg_sql import pg_sql

from ctxlife.cli import main
from ctxlife.errors import StoreError
from ctxlife.sessions import AppendConflictError, LockTimeoutError, Snapshot, open_store

pytestmark = pytest.mark.usefixtures("postgres_url")


@pytest.fixture
def url(postgres_url: str) -> str:
    return f"{postgres_url}?schema=t_pg_{uuid.uuid4().hex[:12]}"


def msg(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def tables(url: str) -> list[str]:
    schema = url.rsplit("schema=", 1)[1]
    rows = pg_sql(url, "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", (schema,))
    return [str(r[0]) for r in rows]


# -- schema versions and migrations ----------------------------------------------------------------------


def test_opening_and_reading_create_nothing_and_the_first_write_creates_the_current_version(url: str) -> None:
    with open_store(url) as store:
        assert store.list_sessions() == [] and store.read_records("s") == [] and store.head("s") == 0
        assert store.load_snapshot("s") is None and store.get_blob("s", "k") is None
        assert store.read_slots("s") == [] and store.delete("s") is False
        assert tables(url) == []
        store.append("s", [msg("hi")])
    assert tables(url) == [
        "ctxlife_blobs",
        "ctxlife_meta",
        "ctxlife_raw",
        "ctxlife_recall",
        "ctxlife_recall_docs",
        "ctxlife_schema_version",
        "ctxlife_sessions",
        "ctxlife_snapshots",
    ]
    assert pg_sql(url, "SELECT version FROM {s}.ctxlife_schema_version ORDER BY version") == [(1,), (2,)]


def test_store_migrate_is_a_deploy_step_that_runs_once(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["store", "migrate", url]) == 0
    out = capsys.readouterr().out
    assert "migrated from none to version 2" in out and "pg-secret" not in out
    assert main(["store", "migrate", url]) == 0
    assert "at version 2, nothing to do" in capsys.readouterr().out
    assert pg_sql(url, "SELECT version FROM {s}.ctxlife_schema_version ORDER BY version") == [(1,), (2,)]
    with open_store(url) as store:
        assert store.append("s", [msg("x")])[0].seq == 1


def test_workers_migrating_at_once_migrate_once(url: str, spawn: Any) -> None:
    code = (
        "import sys\nfrom ctxlife.sessions import open_store\n"
        "with open_store(sys.argv[1]) as s:\n    print(s.migrate())\n"
    )
    procs = [spawn(code, url) for _ in range(4)]
    results = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in results]
    assert sorted(out.strip() for out, _ in results) == ["(2, 2)"] * 3 + ["(None, 2)"]
    assert pg_sql(url, "SELECT version FROM {s}.ctxlife_schema_version ORDER BY version") == [(1,), (2,)]


def test_a_newer_schema_is_refused_when_the_store_opens(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = open_store(url)  # stays open: its pool knows the schema was fine when it wrote
    before.append("s", [msg("x")])
    pg_sql(url, "INSERT INTO {s}.ctxlife_schema_version (version) VALUES (7)")
    with pytest.raises(StoreError, match=r"schema .* is version 7, newer than this ctxlife understands \(2\)") as info:
        open_store(url)
    before.close()
    assert "pg-secret" not in str(info.value)
    assert main(["store", "migrate", url]) == 1  # migrate refuses it too: nothing is changed
    assert "upgrade ctxlife" in capsys.readouterr().err
    assert pg_sql(url, "SELECT max(version) FROM {s}.ctxlife_schema_version") == [(7,)]


def as_version_1(url: str) -> None:
    """Turn the database back into what ctxlife's schema version 1 wrote (its history kept)."""
    pg_sql(url, "DROP TABLE {s}.ctxlife_recall_docs, {s}.ctxlife_recall")
    pg_sql(url, "ALTER TABLE {s}.ctxlife_sessions DROP COLUMN recall_docs, DROP COLUMN recall_len")
    pg_sql(url, "DELETE FROM {s}.ctxlife_schema_version WHERE version > 1")


def test_an_older_schema_is_refused_until_migrated_and_migrating_indexes_its_history(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxlife.recall import HistorySearch
    from ctxlife.sessions import pg_connect

    with open_store(url) as store:
        store.append("s", [msg("the harbour ferry leaves at nine"), msg("我想订一家酒店")])
    as_version_1(url)
    monkeypatch.setattr(pg_connect.SharedPool, "_pools", {})  # a new process: nothing known ready
    store = open_store(url)  # opening still works (so that `ctxlife store migrate` can run) ...
    try:
        with pytest.raises(StoreError, match="is version 1, this ctxlife needs 2; run `ctxlife store migrate URL`"):
            store.read_records("s")  # ... but every call refuses: no DDL past version 1 on its own
        with pytest.raises(StoreError, match="ctxlife store migrate"):
            store.append("s", [msg("y")])
        assert "ctxlife_raw" in tables(url) and "ctxlife_recall" not in tables(url)
        assert store.migrate() == (1, 2)  # type: ignore[attr-defined]
        assert [r.message["content"] for r in store.read_records("s")] == [
            "the harbour ferry leaves at nine",
            "我想订一家酒店",
        ]
        assert store.append("s", [msg("y")])[0].seq == 3
        search = HistorySearch(store)
        # the history recorded before the migration is searchable: the migration indexed it
        assert [p.hit.seq for p in search.passages("s", "when does the ferry leave?")] == [1]
        assert [p.hit.seq for p in search.passages("s", "酒店")] == [2]
    finally:
        store.close()
    assert pg_sql(url, "SELECT version FROM {s}.ctxlife_schema_version ORDER BY version") == [(1,), (2,)]


# -- compare-and-append between processes ----------------------------------------------------------------

CAS_WORKER = r"""
import os, sys, time
from ctxlife.sessions import AppendConflictError, open_store

url, name, turns, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
store = open_store(url)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
conflicts = 0
for i in range(turns):
    while True:
        head = store.head("cas")
        try:
            store.append("cas", [{"role": "user", "content": f"{name}-{i}", "after": head}], if_head=head)
            break
        except AppendConflictError as exc:
            assert exc.head > head, (exc.head, head)
            conflicts += 1
print("conflicts", conflicts, flush=True)
store.close()
"""


def test_two_processes_compare_and_append_each_record_once_after_the_head_it_saw(
    url: str, spawn: Any, tmp_path: Path
) -> None:
    turns = 60
    go = tmp_path / "go"
    procs = [spawn(CAS_WORKER, url, name, str(turns), str(go)) for name in ("A", "B")]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().startswith("ready"), p.stderr.read() if p.stderr else ""
    go.touch()
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    with open_store(url) as store:
        records = store.read_records("cas")
    assert [r.seq for r in records] == list(range(1, 2 * turns + 1))
    # each append landed right after the head its writer had read: nobody wrote in between
    assert all(r.message["after"] == r.seq - 1 for r in records)
    for name in "AB":
        assert [r.message["content"] for r in records if r.message["content"][0] == name] == [
            f"{name}-{i}" for i in range(turns)
        ]


def test_a_stale_if_head_writes_nothing_and_names_the_head(url: str) -> None:
    with open_store(url) as a, open_store(url) as b:
        a.append("s", [msg("1"), msg("2")])
        with pytest.raises(AppendConflictError) as info:
            b.append("s", [msg("late")], if_head=1)
        assert info.value.head == 2
        assert [r.message["content"] for r in a.read_records("s")] == ["1", "2"]
        with pytest.raises(AppendConflictError):
            b.append("s", [], if_head=0)


# -- the lock ---------------------------------------------------------------------------------------------

HOLDER = r"""
import sys, time
from ctxlife.sessions import open_store

store = open_store(sys.argv[1])
with store.lock("held", ttl_seconds=600, timeout=5):
    print("locked", flush=True)
    time.sleep(600)
"""


def test_the_lock_dies_with_its_holders_connection(url: str, spawn: Any) -> None:
    holder = spawn(HOLDER, url)
    assert holder.stdout is not None and holder.stdout.readline().startswith("locked"), holder.stderr
    with open_store(url) as store:
        with pytest.raises(LockTimeoutError, match="'held'"), store.lock("held", timeout=0.2):
            pass
        holder.kill()
        holder.wait(timeout=10)
        # the server ends the dead client's session, and with it the transaction-scoped lock
        with store.lock("held", timeout=10):
            pass


def test_the_lock_needs_no_session_state_and_excludes_threads_of_one_process(url: str) -> None:
    with open_store(url) as store:
        inside: list[int] = []
        overlap: list[bool] = []

        def work() -> None:
            for _ in range(10):
                with store.lock("t", timeout=30):
                    inside.append(1)
                    overlap.append(len(inside) > 1)
                    time.sleep(0.002)
                    inside.pop()

        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(overlap) == 30 and not any(overlap)


# -- TTL and the sweeper -------------------------------------------------------------------------------


def test_ttl_expires_idle_sessions_as_a_whole(url: str) -> None:
    with open_store(f"{url}&ttl=1h") as store:
        store.append("idle", [msg("q0")])
        store.save_snapshot(Snapshot(session_id="idle", messages=[msg("q0")], raw_length=1))
        store.put_blob("idle", "k", "v")
        store.append("busy", [msg("b0")])
        pg_sql(url, "UPDATE {s}.ctxlife_sessions SET touched_at = touched_at - 7200 WHERE session_id = 'idle'")
        assert store.read_records("idle") == [] and store.head("idle") == 0
        assert store.load_snapshot("idle") is None and store.get_blob("idle", "k") is None
        assert store.read_slots("idle") == []
        assert [i.session_id for i in store.list_sessions()] == ["busy"]  # listed: swept
        for table in ("ctxlife_raw", "ctxlife_snapshots", "ctxlife_blobs", "ctxlife_sessions"):
            assert pg_sql(url, f"SELECT count(*) FROM {{s}}.{table} WHERE session_id = 'idle'") == [(0,)]
        store.append("busy", [msg("b1")])
        pg_sql(url, "UPDATE {s}.ctxlife_sessions SET touched_at = touched_at - 7200 WHERE session_id = 'busy'")
        assert store.append("busy", [msg("again")])[0].seq == 1  # a write after expiry starts over
    with pytest.raises(StoreError, match="ttl"):
        open_store(f"{url}&ttl=soon")


def test_sweepers_on_many_workers_delete_each_expired_session_once(url: str, spawn: Any) -> None:
    with open_store(url) as store:
        for i in range(1200):
            store.put_blob(f"s{i}", "k", "v")
        store.append("fresh", [msg("x")])
    pg_sql(url, "UPDATE {s}.ctxlife_sessions SET touched_at = touched_at - 100 WHERE session_id <> 'fresh'")
    code = (
        "import sys\nfrom ctxlife.sessions import open_store\n"
        "with open_store(sys.argv[1] + '&ttl=60') as s:\n    print(s.sweep())\n"
    )
    procs = [spawn(code, url) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    assert sum(int(out) for out, _ in outs) == 1200
    assert pg_sql(url, "SELECT session_id FROM {s}.ctxlife_sessions") == [("fresh",)]
    assert pg_sql(url, "SELECT count(*) FROM {s}.ctxlife_blobs") == [(0,)]


# -- pool, URL options, passwords ----------------------------------------------------------------------


def test_stores_on_one_database_share_one_pool(postgres_url: str) -> None:
    from ctxlife.sessions.pg_connect import SharedPool

    # pool settings of this test's own: a pool that other tests' stores use is not this test's to close
    a = open_store(f"{postgres_url}?schema=pool_a&pool_max=3")
    b = open_store(f"{postgres_url}?schema=pool_b&pool_max=3")
    try:
        assert a._shared is b._shared  # type: ignore[attr-defined]
        pool = a._shared.pool  # type: ignore[attr-defined]
        a.close()
        b.append("s", [msg("x")])  # the pool lives while a store uses it
    finally:
        b.close()
    assert pool.closed and not any(p.pool is pool for p in SharedPool._pools.values())


def test_errors_and_reprs_never_show_the_password(url: str, postgres_url: str) -> None:
    password = urlsplit(postgres_url).password
    assert password
    with open_store(url) as store:
        assert password not in repr(store) and password not in store.url and "***" in store.url
    port = urlsplit(postgres_url).port
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    for bad_url in (
        postgres_url.replace(f":{port}/", f":{closed}/") + "?pool_timeout=1&connect_timeout=1",
        postgres_url.replace(password, "wrong-" + password) + "?pool_timeout=1",
    ):
        with pytest.raises(StoreError) as info:
            open_store(bad_url)
        text = str(info.value)
        assert password not in text and "postgres store postgresql://ctxlife:***@" in text, text
        assert ": schema check failed: " in text, text  # opening checks the schema version first


def test_url_options_are_checked_by_name(url: str) -> None:
    for bad, match in (
        ("schema=Bad-Name", "schema="),
        ("schema=pg_mine", "reserved"),
        ("pool_max=0", "pool_max"),
        ("pool_idle=soon", "pool_idle"),
        ("pgbouncer=maybe", "pgbouncer"),
    ):
        base = url.split("?", 1)[0]
        with pytest.raises(StoreError, match=match) as info:
            open_store(f"{base}?{bad}")
        assert "pg-secret" not in str(info.value)
    with open_store(f"{url}&pgbouncer=true&pool_min=0&pool_max=2&application_name=ctxlife-test") as store:
        store.append("s", [msg("x")])
        assert [r.seq for r in store.read_records("s")] == [1]


def test_a_forked_child_uses_a_pool_of_its_own(url: str) -> None:
    import os

    with open_store(url) as store:
        store.append("f", [msg("parent")])
        with warnings.catch_warnings():  # Python 3.12+ warns about fork() beside threads (the pool's)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the child: write through the store object it inherited, then leave at once
            code = 0
            try:
                store.append("f", [msg("child")])
            except BaseException:
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        store.append("f", [msg("parent again")])  # the parent's connections still work
        assert [r.message["content"] for r in store.read_records("f")] == ["parent", "child", "parent again"]


# -- through PgBouncer (transaction pooling) ---------------------------------------------------------------


def test_recall_searches_the_database_through_pgbouncer(pgbouncer_url: str) -> None:
    # Each search statement runs in a transaction of its own with SET LOCAL, sent in one pipeline.
    from ctxlife.recall import HistorySearch

    url = f"{pgbouncer_url}?schema=t_pgb_{uuid.uuid4().hex[:12]}&pgbouncer=true"
    with open_store(url) as store:
        store.append("s", [msg(f"day {i}: small talk about the weather") for i in range(50)])
        store.append("s", [msg("the harbour ferry leaves at nine"), msg("我想订一家酒店")])
        search = HistorySearch(store)
        try:
            for _ in range(3):  # more than one statement per pooled server connection
                assert [p.hit.seq for p in search.passages("s", "when does the ferry leave?")][:1] == [51]
                assert [p.hit.seq for p in search.passages("s", "酒店")][:1] == [52]
            assert store.erase("s", [51]) == [51]
            assert search.passages("s", "when does the ferry leave?") == []
        finally:
            search.close()
