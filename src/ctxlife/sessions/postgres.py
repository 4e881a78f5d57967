"""PostgreSQL session store: one database shared by a fleet of workers on any number of machines.

URL options, pools, schema, writes and locks, TTL sweep, migrations, PgBouncer: docs/sessions.md,
"PostgreSQL". The URL and shared pools: :mod:`ctxlife.sessions.pg_connect`; the tables and migrations:
:mod:`ctxlife.sessions.pg_schema`. ``psycopg`` is imported only when a store is opened.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import secrets
import time
from collections.abc import Iterator
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ctxlife.errors import StoreError
from ctxlife.events import Logger, redact_url
from ctxlife.sessions.base import (
    SessionInfo,
    SessionStore,
    check_after_seq,
    check_blob_text,
    check_lock_args,
    conflict,
    poll_until,
)
from ctxlife.sessions.ids import validate_blob_key, validate_session_id, validate_view
from ctxlife.sessions.pg_connect import SCHEMA_NAME, SharedPool, number_option, split_options
from ctxlife.sessions.pg_schema import MIGRATIONS, SCHEMA_VERSION, V1
from ctxlife.sessions.records import (
    EVENT_KEY,
    RawRecord,
    RecordSlot,
    appended_records,
    fingerprint,
    json_text,
    unwrap_event,
)
from ctxlife.sessions.snapshot import Snapshot
from ctxlife.sessions.urls import parse_bool, parse_ttl

__all__ = ["SCHEMA_VERSION", "PostgresStore"]

log = Logger("ctxlife.sessions")

_RAW_COLUMNS = "seq, view, fp, recorded_at, bad, json, tokens, token_encoding"
#: The server's clock in epoch seconds (one clock for every worker's TTL decisions).
_NOW = "extract(epoch from clock_timestamp())::double precision"
# Rows decoded per json.loads (as the SQLite store: the per-call cost is spread, the joined copy small).
_DECODE_CHUNK = 2048
#: Seconds between two sweeps started by writes of one process (a listing always sweeps).
SWEEP_EVERY = 300.0
#: Sessions deleted per sweep statement (short transactions; the sweep loops).
_SWEEP_BATCH = 500

_T = TypeVar("_T")


def _key(*parts: str) -> int:
    """A signed 64-bit advisory-lock key for ``parts`` (BLAKE2b: collisions are negligible)."""
    digest = hashlib.blake2b("\0".join(("ctxlife",) + parts).encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


class PostgresStore(SessionStore):
    """Sessions in a PostgreSQL database (the schema and guarantees: docs/sessions.md, "PostgreSQL").

    Args:
        url: a ``postgres://`` or ``postgresql://`` URL (with the options above).
    """

    def __init__(self, url: str) -> None:
        try:
            # lazy: the optional driver (ctxlife[postgres]) loads only when a postgres store is opened
            import psycopg
            import psycopg_pool
        except ImportError:
            raise StoreError(
                "the postgres session store needs psycopg 3 and psycopg-pool: pip install 'ctxlife[postgres]'"
            ) from None
        self._pg = psycopg
        self.url = redact_url(url)
        conninfo, opts = split_options(url, self.url)
        self._password = urlsplit(url).password or ""
        schema = opts.get("schema", "public")
        if not SCHEMA_NAME.fullmatch(schema):
            raise StoreError(
                f"postgres store {self.url}: schema={schema!r} must be 1-63 lowercase letters, digits or '_', "
                f"not starting with a digit"
            )
        if schema.startswith("pg_"):
            raise StoreError(f"postgres store {self.url}: schema={schema!r}: names starting with 'pg_' are reserved")
        self.schema = schema
        self._s = f'"{schema}"'
        self.ttl = parse_ttl(opts, url)
        pool_min = number_option(opts, "pool_min", 1, self.url, whole=True)
        pool_max = number_option(opts, "pool_max", 10, self.url, whole=True)
        if pool_max < 1 or pool_min > pool_max:
            raise StoreError(f"postgres store {self.url}: need 0 <= pool_min <= pool_max and pool_max >= 1")
        idle = number_option(opts, "pool_idle", 60.0, self.url)
        lifetime = number_option(opts, "pool_lifetime", 1800.0, self.url)
        self.pool_timeout = number_option(opts, "pool_timeout", 10.0, self.url)
        pgbouncer = parse_bool(opts["pgbouncer"], "pgbouncer", self.url) if "pgbouncer" in opts else False
        kwargs: dict[str, Any] = {"autocommit": True}
        if pgbouncer:
            kwargs["prepare_threshold"] = None
        settings = (int(pool_min), int(pool_max), idle, lifetime, self.pool_timeout, pgbouncer)

        def make() -> Any:
            return psycopg_pool.ConnectionPool(
                conninfo,
                kwargs=kwargs,
                min_size=int(pool_min),
                max_size=int(pool_max),
                max_idle=idle,
                max_lifetime=lifetime,
                timeout=self.pool_timeout,
                check=psycopg_pool.ConnectionPool.check_connection,
                name=f"ctxlife {self.url}",
                open=True,
            )

        self._closed = False
        self._outdated: int | None = None  # the database's older schema version, until migrated
        self._pool_args = (conninfo, settings, make)
        self._shared = SharedPool.acquire(conninfo, settings, make)
        try:
            self._check_version(create=False)
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_url(cls, url: str) -> PostgresStore:
        return cls(url)

    # -- connections -------------------------------------------------------------------------------

    def _error(self, what: str, exc: BaseException, session_id: str | None = None) -> StoreError:
        """A StoreError naming the store, the operation and the session; never the password."""
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        where = f" of session {session_id!r}" if session_id is not None else ""
        hint = ""
        if isinstance(exc, self._pg.OperationalError) or type(exc).__name__ == "PoolTimeout":
            hint = "; is the database reachable, and are pool_max connections enough?"
        if type(exc).__name__ == "PoolTimeout":
            cause = self._direct_connect_error()
            if cause:  # the pool only says it waited; a connection of its own says why it could not
                text += f" (a new connection fails: {cause})"
        if self._password:
            text = text.replace(self._password, "***")
        return StoreError(f"postgres store {self.url}: {what}{where} failed: {text}{hint}")

    def _direct_connect_error(self) -> str | None:
        """Why a new connection to the database fails now (its first line), or None when one opens."""
        try:
            self._pg.connect(self._pool_args[0], autocommit=True).close()
        except self._pg.Error as exc:
            return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return None

    @contextlib.contextmanager
    def _connection(self, what: str, session_id: str | None = None) -> Iterator[Any]:
        """A pooled connection (autocommit) for one call; driver and pool errors become StoreError."""
        if self._closed:
            raise StoreError(f"session store {self.url} is closed")
        if self._outdated is not None and what not in ("schema check", "migrate"):
            self._refuse(self._outdated)
        if self._shared.key[0] != os.getpid():
            # forked: the parent's pool (its threads, its sockets) is not this process's to use
            self._shared = SharedPool.acquire(*self._pool_args)
        # lazy: the optional driver (ctxlife[postgres]), imported when the store was opened
        import psycopg_pool

        try:
            with self._shared.pool.connection() as conn:
                yield conn
        except (self._pg.Error, psycopg_pool.PoolTimeout, psycopg_pool.PoolClosed) as exc:
            raise self._error(what, exc, session_id) from None

    def _query(
        self, what: str, sql: str, params: tuple[Any, ...] = (), session_id: str | None = None
    ) -> list[tuple[Any, ...]]:
        """A read (one statement); ``[]`` while the database has no ctxlife tables yet."""
        with self._connection(what, session_id) as conn:
            try:
                return list(conn.execute(sql.replace("{s}", self._s), params).fetchall())
            except (self._pg.errors.UndefinedTable, self._pg.errors.InvalidSchemaName):
                return []

    @contextlib.contextmanager
    def _write(self, what: str, session_id: str) -> Iterator[tuple[Any, int]]:
        """A transaction holding the session's row (its write lock): yields ``(conn, head)``.

        Creates the tables on the first write (version 1 only), starts an expired session over and
        marks the session active now.
        """
        self._ensure_schema()
        s = self._s
        with self._connection(what, session_id) as conn, conn.transaction():
            row = conn.execute(
                f"SELECT head, touched_at, {_NOW} FROM {s}.ctxlife_sessions WHERE session_id = %s FOR UPDATE",
                (session_id,),
            ).fetchone()
            if row is not None and self.ttl is not None and row[2] - row[1] > self.ttl:
                conn.execute(f"DELETE FROM {s}.ctxlife_sessions WHERE session_id = %s", (session_id,))
                log.info("session_expired", store="postgres", session_id=session_id, ttl_seconds=self.ttl)
                row = None
            if row is None:
                # ON CONFLICT: a concurrent first write inserted it; wait for it and lock that row
                conn.execute(
                    f"INSERT INTO {s}.ctxlife_sessions (session_id, head, touched_at) VALUES (%s, 0, {_NOW}) "
                    "ON CONFLICT (session_id) DO NOTHING",
                    (session_id,),
                )
                row = conn.execute(
                    f"SELECT head FROM {s}.ctxlife_sessions WHERE session_id = %s FOR UPDATE", (session_id,)
                ).fetchone()
            else:
                conn.execute(
                    f"UPDATE {s}.ctxlife_sessions SET touched_at = {_NOW} WHERE session_id = %s", (session_id,)
                )
            yield conn, int(row[0])
        self._maybe_sweep()

    def _alive(self, alias: str) -> tuple[str, tuple[Any, ...]]:
        """A WHERE clause (and its parameter) keeping only the rows of ``alias`` (a table alias in the
        query: an unqualified column would name the subquery's own) whose session has not expired."""
        if self.ttl is None:
            return "", ()
        return (
            f" AND EXISTS (SELECT 1 FROM {self._s}.ctxlife_sessions t WHERE t.session_id = {alias}.session_id "
            f"AND t.touched_at >= {_NOW} - %s)",
            (self.ttl,),
        )

    # -- schema and migrations ---------------------------------------------------------------------

    def _version(self, conn: Any) -> int | None:
        """The database's ctxlife schema version (None: no ctxlife tables in the schema)."""
        # The catalog read with the statement's snapshot, not to_regclass: after waiting for an advisory
        # lock, a session's catalog cache may not show what the lock's last holder created yet.
        exists = conn.execute(
            "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = 'ctxlife_schema_version'",
            (self.schema,),
        ).fetchone()
        if exists is None:
            return None
        row = conn.execute(f"SELECT max(version) FROM {self._s}.ctxlife_schema_version").fetchone()
        return None if row[0] is None else int(row[0])

    def _refuse(self, version: int | None) -> None:
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(
                f"postgres store {self.url}: the database's ctxlife schema (in {self.schema!r}) is version "
                f"{version}, newer than this ctxlife understands ({SCHEMA_VERSION}); upgrade ctxlife on this "
                f"worker (a newer ctxlife migrated it)"
            )
        if version is not None and version < SCHEMA_VERSION:
            raise StoreError(
                f"postgres store {self.url}: the database's ctxlife schema (in {self.schema!r}) is version "
                f"{version}, this ctxlife needs {SCHEMA_VERSION}; run `ctxlife store migrate URL` once "
                f"(a deploy step) before starting workers of this version"
            )

    def _check_version(self, create: bool) -> None:
        """Refuse a database at another schema version; with ``create``, create version 1 if absent.

        Opening a store always checks (one query): a worker started after a newer ctxlife migrated
        the database refuses it at once, even if the process opened stores on it before.
        """
        if create and self.schema in self._shared.ready:
            return
        with self._connection("schema check") as conn:
            version = self._version(conn)
            if version is not None and version < SCHEMA_VERSION and not create:
                self._outdated = version  # opened (for `ctxlife store migrate`); every call refuses
                self._shared.ready.discard(self.schema)
                return
            self._refuse(version)
            if version is None and create:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_key("migrate", self.schema),))
                    version = self._version(conn)  # another worker may have created it meanwhile
                    self._refuse(version)
                    if version is None:
                        self._create_v1(conn)
                        version = self._upgrade(conn, 1)
        if version == SCHEMA_VERSION:
            self._shared.ready.add(self.schema)

    def _ensure_schema(self) -> None:
        if self.schema not in self._shared.ready:
            self._check_version(create=True)

    def _create_v1(self, conn: Any) -> None:
        s = self._s
        if self.schema != "public":
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {s}.ctxlife_schema_version ("
            " version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for stmt in V1:
            conn.execute(stmt.replace("{s}", s))
        conn.execute(f"INSERT INTO {s}.ctxlife_schema_version (version) VALUES (1) ON CONFLICT DO NOTHING")
        log.info("postgres_schema_created", store="postgres", schema=self.schema, version=1)

    def migrate(self) -> tuple[int | None, int]:
        """Bring the database to :data:`SCHEMA_VERSION` (a deploy step: ``ctxlife store migrate URL``).

        Runs under an advisory lock in one transaction, so several deploys at once migrate once and
        a failed step changes nothing. Returns ``(version before, version after)``; a database at a
        newer version is refused.
        """
        with self._connection("migrate") as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_key("migrate", self.schema),))
            before = self._version(conn)
            if before is not None and before > SCHEMA_VERSION:
                self._refuse(before)
            if before is None:
                self._create_v1(conn)
            version = self._upgrade(conn, before or 1)
        self._shared.ready.add(self.schema)
        self._outdated = None
        return before, version

    def _upgrade(self, conn: Any, version: int) -> int:
        """Run the steps from ``version`` to :data:`SCHEMA_VERSION` on ``conn`` (in its transaction)."""
        while version < SCHEMA_VERSION:
            version += 1
            for stmt in MIGRATIONS[version]:
                conn.execute(stmt.replace("{s}", self._s))
            if version == 2:
                self._index_history(conn)
            conn.execute(f"INSERT INTO {self._s}.ctxlife_schema_version (version) VALUES (%s)", (version,))
            log.info("postgres_schema_migrated", store="postgres", schema=self.schema, version=version)
        return version

    def _index_history(self, conn: Any) -> None:
        """Version 2: recall's rows for the history recorded before it (one session at a time)."""
        # lazy: recall's tokenizer, for the stores that search (and for this step)
        from ctxlife.recall.pg import index_records

        s = self._s
        for (session_id,) in conn.execute(f"SELECT session_id FROM {s}.ctxlife_sessions").fetchall():
            rows = conn.execute(
                f"SELECT {_RAW_COLUMNS} FROM {s}.ctxlife_raw WHERE session_id = %s ORDER BY seq", (session_id,)
            ).fetchall()
            records = [r for row in rows if (r := self._decode(session_id, row, _loads(row[5]), False)) is not None]
            docs, length = index_records(conn, s, session_id, records)
            conn.execute(
                f"UPDATE {s}.ctxlife_sessions SET recall_docs = %s, recall_len = %s WHERE session_id = %s",
                (docs, length, session_id),
            )

    # -- TTL sweeper -------------------------------------------------------------------------------

    def sweep(self) -> int:
        """Delete the sessions idle longer than ``ttl`` (with every row of theirs); return how many.

        Safe from any number of workers at once: each batch takes the expired rows with
        ``FOR UPDATE SKIP LOCKED``, so sweepers never wait for each other nor for a session being
        written (whose write makes it alive again anyway).
        """
        if self.ttl is None:
            return 0
        self._shared.last_sweep[self.schema] = time.monotonic()
        s = self._s
        total = 0
        while True:
            with self._connection("sweep") as conn:
                try:
                    cur = conn.execute(
                        f"DELETE FROM {s}.ctxlife_sessions WHERE session_id IN ("
                        f"SELECT session_id FROM {s}.ctxlife_sessions WHERE touched_at < {_NOW} - %s "
                        f"LIMIT {_SWEEP_BATCH} FOR UPDATE SKIP LOCKED)",
                        (self.ttl,),
                    )
                except (self._pg.errors.UndefinedTable, self._pg.errors.InvalidSchemaName):
                    return total
            total += int(cur.rowcount)
            if cur.rowcount < _SWEEP_BATCH:
                break
        if total:
            log.info("sessions_swept", store="postgres", count=total, ttl_seconds=self.ttl)
        return total

    def _maybe_sweep(self) -> None:
        if self.ttl is None:
            return
        last = self._shared.last_sweep.get(self.schema)
        if last is None or time.monotonic() - last > SWEEP_EVERY:
            self.sweep()

    # -- snapshot -------------------------------------------------------------------------------

    def load_snapshot(self, session_id: str, view: str = "") -> Snapshot | None:
        validate_session_id(session_id)
        validate_view(view)
        alive, extra = self._alive("n")
        rows = self._query(
            "load_snapshot",
            "SELECT json FROM {s}.ctxlife_snapshots n WHERE n.session_id = %s AND n.view = %s" + alive,
            (session_id, view, *extra),
            session_id,
        )
        if not rows:
            return None
        where = f"view {view!r} of " if view else ""
        return Snapshot.from_json(rows[0][0], source=f"snapshot of {where}session {session_id!r} in {self.url}")

    def save_snapshot(self, snapshot: Snapshot) -> None:
        validate_session_id(snapshot.session_id)
        text = snapshot.to_json()
        with self._write("save_snapshot", snapshot.session_id) as (conn, _):
            conn.execute(
                f"INSERT INTO {self._s}.ctxlife_snapshots (session_id, view, updated_at, json) "
                "VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (session_id, view) DO UPDATE SET updated_at = excluded.updated_at, json = excluded.json",
                (snapshot.session_id, snapshot.view, float(snapshot.updated_at), text),
            )

    # -- raw history -----------------------------------------------------------------------------

    def append(
        self,
        session_id: str,
        messages: list[dict[str, Any]],
        *,
        view: str = "",
        if_head: int | None = None,
        fingerprints: list[str] | None = None,
    ) -> list[RawRecord]:
        prepared = self._prepare_append(session_id, messages, view, if_head, fingerprints)
        if not prepared:
            return []
        now = time.time()
        # lazy: recall's tokenizer (its rows are written with the records, see ctxlife.recall.pg)
        from ctxlife.recall.pg import index_records

        with self._write("append", session_id) as (conn, head):
            if if_head is not None and head != if_head:
                raise conflict(session_id, if_head, head)
            records = appended_records(head + 1, messages, prepared, view, now)
            with conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {self._s}.ctxlife_raw "
                    "(session_id, seq, view, fp, recorded_at, bad, json, tokens, token_encoding) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    [
                        (
                            session_id,
                            head + 1 + i,
                            view,
                            p.fingerprint,
                            now,
                            None if p.quarantined is None else json.dumps(p.quarantined),
                            p.text,
                            p.tokens,
                            p.token_encoding,
                        )
                        for i, p in enumerate(prepared)
                    ],
                )
            docs, length = index_records(conn, self._s, session_id, records)
            conn.execute(
                f"UPDATE {self._s}.ctxlife_sessions SET head = %s, recall_docs = recall_docs + %s, "
                "recall_len = recall_len + %s WHERE session_id = %s",
                (head + len(prepared), docs, length, session_id),
            )
        return records

    def _raw_rows(
        self, what: str, columns: str, session_id: str, after_seq: int, view: str | None
    ) -> list[tuple[Any, ...]]:
        validate_session_id(session_id)
        check_after_seq(after_seq)
        if view is not None:
            validate_view(view)
        lane = "" if view is None else " AND r.view = %s"
        alive, extra = self._alive("r")
        params = (session_id, after_seq) if view is None else (session_id, after_seq, view)
        return self._query(
            what,
            f"SELECT {columns} FROM {{s}}.ctxlife_raw r "
            f"WHERE r.session_id = %s AND r.seq > %s{lane}{alive} ORDER BY seq",
            (*params, *extra),
            session_id,
        )

    def read_records(
        self, session_id: str, after_seq: int = 0, *, view: str | None = None, strict: bool = True
    ) -> list[RawRecord]:
        rows = self._raw_rows("read_records", _RAW_COLUMNS, session_id, after_seq, view)
        records: list[RawRecord] = []
        for start in range(0, len(rows), _DECODE_CHUNK):
            chunk = rows[start : start + _DECODE_CHUNK]
            try:
                values = json.loads("[" + ",".join(row[5] for row in chunk) + "]")
            except ValueError:
                values = None
            if not isinstance(values, list) or len(values) != len(chunk):
                values = [_loads(row[5]) for row in chunk]
            for row, value in zip(chunk, values, strict=True):
                record = self._decode(session_id, row, value, strict)
                if record is not None:
                    records.append(record)
        return records

    def _decode(self, session_id: str, row: tuple[Any, ...], value: Any, strict: bool) -> RawRecord | None:
        seq, view, fp, recorded_at, bad, _, tokens, token_encoding = row
        event = self._event(session_id, seq, value, strict)
        if event is None:
            return None
        message, op, target, erased = event
        counted = type(tokens) is int and tokens >= 0 and isinstance(token_encoding, str)
        return RawRecord(
            int(seq),
            message,
            fp,
            view,
            recorded_at,
            None if bad is None else str(json.loads(bad)),
            op,
            target,
            erased,
            tokens if counted else None,
            token_encoding if counted else None,
        )

    def read_slots(self, session_id: str, after_seq: int = 0, *, view: str | None = None) -> list[RecordSlot]:
        # Only an event's JSON comes back (a plain message never holds the event key's text).
        rows = self._raw_rows(
            "read_slots",
            f"seq, fp, CASE WHEN strpos(json, '\"{EVENT_KEY}\"') > 0 THEN json END",
            session_id,
            after_seq,
            view,
        )
        slots = []
        for seq, fp, event in rows:
            if event is None:
                slots.append(RecordSlot(int(seq), fp))
                continue
            found = self._event(session_id, seq, _loads(event), strict=False)
            if found is not None:
                slots.append(RecordSlot(int(seq), fp, found[1], found[2]))
        return slots

    def _event(
        self, session_id: str, seq: int, value: Any, strict: bool
    ) -> tuple[dict[str, Any], str, int | None, bool] | None:
        """:func:`unwrap_event` of a stored value; an unreadable one raises (``strict``) or is
        skipped (None) with a ``raw_record_skipped`` error event."""
        try:
            if not isinstance(value, dict):
                raise ValueError("not a JSON object")
            return unwrap_event(value)
        except ValueError as exc:
            error = f"raw record seq={seq} of session {session_id!r} in {self.url} is corrupt: {exc}"
            self._corrupt(strict, error, store="postgres", session_id=session_id, seq=seq, problem=str(exc)[:120])
            return None

    def head(self, session_id: str) -> int:
        validate_session_id(session_id)
        alive, extra = self._alive("h")
        rows = self._query(
            "head",
            "SELECT head FROM {s}.ctxlife_sessions h WHERE h.session_id = %s" + alive,
            (session_id, *extra),
            session_id,
        )
        return int(rows[0][0]) if rows else 0

    def _rewrite_records(self, session_id: str, values: dict[int, dict[str, Any]]) -> int:
        validate_session_id(session_id)
        if not values:
            return 0
        # lazy: as in append
        from ctxlife.recall.pg import drop_slots

        rows = []
        slots = set()
        for seq, value in values.items():
            message, op, target, _ = unwrap_event(value)
            rows.append((json_text(value, what="erased record"), fingerprint(message), session_id, seq))
            slots.add(target if op != "add" and target is not None else seq)
        with self._write("erase", session_id) as (conn, _):
            # one transaction: every record of the erase and recall's rows of its slots, or none
            with conn.cursor() as cur:
                cur.executemany(
                    f"UPDATE {self._s}.ctxlife_raw SET json = %s, fp = %s, bad = NULL, tokens = NULL, "
                    "token_encoding = NULL WHERE session_id = %s AND seq = %s",
                    rows,
                    returning=False,
                )
                changed = int(cur.rowcount)
            docs, length = drop_slots(conn, self._s, session_id, slots)
            conn.execute(
                f"UPDATE {self._s}.ctxlife_sessions SET recall_docs = recall_docs - %s, recall_len = recall_len - %s "
                "WHERE session_id = %s",
                (docs, length, session_id),
            )
        return max(changed, 0)

    # -- sessions --------------------------------------------------------------------------------

    def list_sessions(self) -> list[SessionInfo]:
        self.sweep()
        alive, extra = self._alive("s")
        rows = self._query(
            "list_sessions",
            "SELECT s.session_id, s.head, "
            "(SELECT max(updated_at) FROM {s}.ctxlife_snapshots n WHERE n.session_id = s.session_id), s.touched_at "
            "FROM {s}.ctxlife_sessions s WHERE (s.head > 0 OR EXISTS "
            "(SELECT 1 FROM {s}.ctxlife_snapshots n WHERE n.session_id = s.session_id))" + alive,
            extra,
        )
        return sorted(
            (SessionInfo(sid, int(n), upd, touched) for sid, n, upd, touched in rows), key=lambda i: i.session_id
        )

    def delete(self, session_id: str) -> bool:
        validate_session_id(session_id)
        with self._connection("delete", session_id) as conn:
            try:
                # one statement: the cascade deletes the records, snapshots and blobs with the row
                cur = conn.execute(f"DELETE FROM {self._s}.ctxlife_sessions WHERE session_id = %s", (session_id,))
            except (self._pg.errors.UndefinedTable, self._pg.errors.InvalidSchemaName):
                return False
            return bool(cur.rowcount > 0)

    # -- recall ----------------------------------------------------------------------------------

    def search_index(self, session_id: str) -> Any:
        """The session's recall index: its rows in the database, written with the history (see
        :mod:`ctxlife.recall.pg`); :class:`ctxlife.recall.HistorySearch` searches it instead of an
        index of its own. One object per call: it keeps nothing across calls."""
        validate_session_id(session_id)
        from ctxlife.recall.pg import PostgresIndex  # lazy: as in append

        return PostgresIndex(self, session_id)

    # -- lock ------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self, session_id: str, ttl_seconds: float = 30.0, timeout: float | None = 10.0) -> Iterator[None]:
        """A transaction-scoped advisory lock on one pooled connection, ended by the server after
        ``ttl_seconds`` idle (docs/sessions.md, "PostgreSQL")."""
        validate_session_id(session_id)
        check_lock_args(ttl_seconds, timeout)
        key = _key("lock", self.schema, session_id)
        with self._connection("lock", session_id) as conn:
            tx = conn.transaction()
            tx.__enter__()
            try:
                conn.execute(
                    "SELECT set_config('idle_in_transaction_session_timeout', %s, true)",
                    (str(max(1, math.ceil(ttl_seconds * 1000))),),
                )
                poll_until(
                    lambda: bool(conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (key,)).fetchone()[0]),
                    timeout,
                    f"the lock of session {session_id!r} in {self.url}",
                )
            except BaseException as exc:
                with contextlib.suppress(self._pg.Error):
                    tx.__exit__(type(exc), exc, exc.__traceback__)
                raise
            try:
                yield
            finally:
                try:
                    tx.__exit__(None, None, None)  # COMMIT: releases the lock
                except self._pg.Error:
                    log.warning(
                        "session_lock_expired",
                        store="postgres",
                        session_id=session_id,
                        ttl_seconds=ttl_seconds,
                        hint="the lock expired while held; another worker may have taken it",
                    )

    # -- blobs -----------------------------------------------------------------------------------

    def put_blob(self, session_id: str, key: str, text: str) -> None:
        validate_session_id(session_id)
        validate_blob_key(key)
        data = check_blob_text(session_id, key, text)
        with self._write("put_blob", session_id) as (conn, _):
            conn.execute(
                f"INSERT INTO {self._s}.ctxlife_blobs (session_id, key, data) VALUES (%s, %s, %s) "
                "ON CONFLICT (session_id, key) DO UPDATE SET data = excluded.data",
                (session_id, key, data),
            )

    def _delete_blob(self, session_id: str, key: str) -> None:
        validate_session_id(session_id)
        validate_blob_key(key)
        with self._write("delete_blob", session_id) as (conn, _):
            conn.execute(f"DELETE FROM {self._s}.ctxlife_blobs WHERE session_id = %s AND key = %s", (session_id, key))

    def get_blob(self, session_id: str, key: str) -> str | None:
        validate_session_id(session_id)
        validate_blob_key(key)
        alive, extra = self._alive("b")
        rows = self._query(
            "get_blob",
            "SELECT data FROM {s}.ctxlife_blobs b WHERE b.session_id = %s AND b.key = %s" + alive,
            (session_id, key, *extra),
            session_id,
        )
        return bytes(rows[0][0]).decode("utf-8") if rows else None

    def _read_mark_key(self, create: bool) -> bytes | None:
        read = "SELECT value FROM {s}.ctxlife_meta WHERE key = 'mark_key'"
        rows = self._query("mark_key", read)
        if not rows and create:
            self._ensure_schema()
            with self._connection("mark_key", None) as conn, conn.transaction():
                # ON CONFLICT: a key another worker stored first stays
                conn.execute(
                    f"INSERT INTO {self._s}.ctxlife_meta (key, value) VALUES ('mark_key', %s) ON CONFLICT DO NOTHING",
                    (secrets.token_bytes(32).hex(),),
                )
            rows = self._query("mark_key", read)
        try:
            return bytes.fromhex(rows[0][0]) if rows else None
        except (TypeError, ValueError):
            raise StoreError(f"postgres store {redact_url(self.url)}: the stored mark key is not hex") from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        shared = getattr(self, "_shared", None)
        if shared is not None:
            shared.release()


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
