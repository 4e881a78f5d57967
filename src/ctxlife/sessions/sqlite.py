"""SQLite session store: one database file shared by several processes on one machine.

URL: ``sqlite:///relative/path/sessions.db`` or ``sqlite:////abs/path/sessions.db`` (three slashes
then the path, as in SQLAlchemy). Query options:

* ``busy_timeout`` -- seconds a statement waits for another process's write lock (default ``30``).
* ``synchronous`` -- ``FULL`` (default: a committed append survives a power cut) or ``NORMAL``
  (faster; WAL still never corrupts, but the last commits may be lost on power loss, not on a
  process crash).

Design: WAL journal mode (readers never block the writer), every write is one transaction
(``BEGIN IMMEDIATE`` for read-modify-write such as appends), one connection per thread, reopened
after ``fork``. Tables (prefixed ``ctxlife_`` so the file can be shared with other data)::

    ctxlife_snapshots(session_id PK, updated_at, json)
    ctxlife_raw(session_id, seq, json, UNIQUE(session_id, seq))   seq = 0, 1, 2, ... per session
    ctxlife_blobs(session_id, key, text, PK(session_id, key))
    ctxlife_locks(session_id PK, token, expires_at)               lock rows with expiry
    ctxlife_meta(key PK, value)                                   schema_version

A new database file (and folders it needs) is created owner-only (``0600`` / ``0700``); SQLite gives
its ``-wal`` and ``-shm`` files the same mode. Locks expire by the wall clock (``time.time()``) of the
processes sharing the file. Do not put the database on a network file system (SQLite's WAL needs
shared memory on one machine); use the Redis store for several machines.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ctxlife.events import Logger

from ctxlife.errors import StoreError
from ctxlife.sessions.base import (
    SessionInfo,
    SessionStore,
    Snapshot,
    check_blob_text,
    check_lock_args,
    check_start,
    json_text,
    parse_query,
    poll_until,
    validate_messages,
)
from ctxlife.sessions.ids import validate_blob_key, validate_session_id

__all__ = ["SQLiteStore"]

log = Logger("ctxlife.sessions")

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ctxlife_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ctxlife_snapshots (
    session_id TEXT PRIMARY KEY,
    updated_at REAL NOT NULL,
    json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS ctxlife_raw (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    json TEXT NOT NULL,
    UNIQUE (session_id, seq)
);
CREATE TABLE IF NOT EXISTS ctxlife_blobs (
    session_id TEXT NOT NULL,
    key TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
);
CREATE TABLE IF NOT EXISTS ctxlife_locks (
    session_id TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    expires_at REAL NOT NULL
);
"""


class SQLiteStore(SessionStore):
    """Sessions in one SQLite database file (see the module docstring).

    Args:
        path: the database file; created with its folders if missing.
        busy_timeout: seconds to wait for another connection's write lock.
        synchronous: ``"FULL"`` or ``"NORMAL"`` (see the module docstring).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        synchronous: str = "FULL",
    ) -> None:
        raw_path = os.fspath(path)
        if raw_path in ("", ":memory:") or raw_path.startswith("file:"):
            raise StoreError(
                f"sqlite store needs a database file path, got {raw_path!r} (an in-memory database "
                f"would not be shared between threads or processes); e.g. sqlite:///sessions.db"
            )
        self.path = Path(os.path.abspath(os.path.expanduser(raw_path)))
        if synchronous.upper() not in ("FULL", "NORMAL"):
            raise StoreError(f"sqlite store: synchronous must be FULL or NORMAL, got {synchronous!r}")
        if not busy_timeout >= 0:
            raise StoreError(f"sqlite store: busy_timeout must be >= 0 seconds, got {busy_timeout!r}")
        self.busy_timeout = float(busy_timeout)
        self.synchronous = synchronous.upper()
        self.url = f"sqlite:///{self.path}"
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False
        self._schema_ready = False
        self._prepare_file()
        # Open the first connection now so a bad path or a newer schema fails at open time.
        self._conn()

    @classmethod
    def from_url(cls, url: str) -> SQLiteStore:
        """Open ``sqlite:///rel/path.db`` or ``sqlite:////abs/path.db`` (options in the module doc)."""
        if not url.lower().startswith("sqlite:///"):
            raise StoreError(
                f"not a sqlite store URL: {url!r} (expected sqlite:///relative/path.db or sqlite:////absolute/path.db)"
            )
        rest = url[len("sqlite:///") :]
        path_part, _, query = rest.partition("?")
        path = unquote(path_part)
        if not path:
            raise StoreError(f"store URL {url!r} has no database path; e.g. sqlite:///sessions.db")
        opts = parse_query(url, query, ("busy_timeout", "synchronous"))
        kwargs: dict[str, Any] = {}
        if "busy_timeout" in opts:
            try:
                kwargs["busy_timeout"] = float(opts["busy_timeout"])
            except ValueError:
                raise StoreError(
                    f"store URL {url!r}: busy_timeout={opts['busy_timeout']!r} must be a number of seconds"
                ) from None
        if "synchronous" in opts:
            kwargs["synchronous"] = opts["synchronous"]
        return cls(path, **kwargs)

    # -- connections -------------------------------------------------------------------------------

    def _prepare_file(self) -> None:
        """Create missing folders (0700) and an empty database file (0600) before SQLite opens it."""
        missing = []
        p = self.path.parent
        while not p.exists():
            missing.append(p)
            p = p.parent
        try:
            for d in reversed(missing):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(d, 0o700)
                    os.chmod(d, 0o700)
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            os.close(fd)
        except FileExistsError:
            pass
        except OSError as exc:
            raise StoreError(f"cannot create sqlite database {self.path}: {exc.strerror}") from None

    def _conn(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"session store {self.url} is closed")
        if os.getpid() != self._pid:
            # Connections must not cross fork(): abandon the parent's without closing them.
            self._local = threading.local()
            with self._conns_lock:
                self._conns = []
            self._pid = os.getpid()
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._conns_lock:
                self._conns.append(conn)
        return conn

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout,
                isolation_level=None,  # autocommit; transactions are explicit
                check_same_thread=False,  # only so close() may close other threads' connections
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open sqlite database {self.path}: {exc}") from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            self._retry_busy(lambda: self._enable_wal(conn))
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            if not self._schema_ready:
                self._retry_busy(lambda: self._create_schema(conn))
                self._schema_ready = True
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"cannot use sqlite database {self.path}: {exc}") from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(
                f"sqlite database {self.path} cannot use WAL mode (got {mode!r}); put it on a local file system"
            )

    def _retry_busy(self, fn: Any) -> None:
        """Run ``fn``, retrying while SQLite reports the database locked (setup can skip the busy handler)."""
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                fn()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _create_schema(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # statement by statement: executescript() would COMMIT the transaction on its own
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            row = conn.execute("SELECT value FROM ctxlife_meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO ctxlife_meta (key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
            elif int(row[0]) > SCHEMA_VERSION:
                raise StoreError(
                    f"sqlite database {self.path} has ctxlife schema version {row[0]}, newer than "
                    f"this ctxlife understands ({SCHEMA_VERSION}); upgrade ctxlife"
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def _tx(self, what: str) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``) that maps driver errors to StoreError."""
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"sqlite store {self.path}: {what} failed: {exc}") from None

    def _query(self, what: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._conn().execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"sqlite store {self.path}: {what} failed: {exc}") from None

    # -- snapshot -------------------------------------------------------------------------------

    def load_snapshot(self, session_id: str) -> Snapshot | None:
        validate_session_id(session_id)
        rows = self._query(
            "load_snapshot",
            "SELECT json FROM ctxlife_snapshots WHERE session_id = ?",
            (session_id,),
        )
        if not rows:
            return None
        return Snapshot.from_json(rows[0][0], source=f"snapshot of session {session_id!r} in {self.path}")

    def save_snapshot(self, snapshot: Snapshot) -> None:
        validate_session_id(snapshot.session_id)
        text = snapshot.to_json()
        with self._tx("save_snapshot") as conn:
            conn.execute(
                "INSERT INTO ctxlife_snapshots (session_id, updated_at, json) VALUES (?, ?, ?) "
                "ON CONFLICT (session_id) DO UPDATE SET updated_at = excluded.updated_at, "
                "json = excluded.json",
                (snapshot.session_id, float(snapshot.updated_at), text),
            )

    # -- raw history -----------------------------------------------------------------------------

    def append_raw(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        validate_session_id(session_id)
        validate_messages(session_id, messages)
        if not messages:
            return
        texts = [json_text(m, what=f"message {i} for session {session_id!r}") for i, m in enumerate(messages)]
        with self._tx("append_raw") as conn:
            (nxt,) = conn.execute(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM ctxlife_raw WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            conn.executemany(
                "INSERT INTO ctxlife_raw (session_id, seq, json) VALUES (?, ?, ?)",
                [(session_id, nxt + i, t) for i, t in enumerate(texts)],
            )

    def read_raw(self, session_id: str, start: int = 0) -> list[dict[str, Any]]:
        validate_session_id(session_id)
        check_start(start)
        # One statement = one consistent read snapshot in WAL mode; OFFSET keeps the index
        # meaning "position in the history" even if rows were removed by hand.
        rows = self._query(
            "read_raw",
            "SELECT seq, json FROM ctxlife_raw WHERE session_id = ? ORDER BY seq LIMIT -1 OFFSET ?",
            (session_id, start),
        )
        out = []
        for seq, text in rows:
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            if not isinstance(value, dict):
                raise StoreError(
                    f"raw message seq={seq} of session {session_id!r} in {self.path} is corrupt (not a JSON object)"
                )
            out.append(value)
        return out

    def raw_length(self, session_id: str) -> int:
        validate_session_id(session_id)
        rows = self._query(
            "raw_length",
            "SELECT COUNT(*) FROM ctxlife_raw WHERE session_id = ?",
            (session_id,),
        )
        return int(rows[0][0])

    # -- sessions --------------------------------------------------------------------------------

    def list_sessions(self) -> list[SessionInfo]:
        rows = self._query(
            "list_sessions",
            "SELECT ids.session_id, COALESCE(r.n, 0), s.updated_at FROM "
            "(SELECT session_id FROM ctxlife_snapshots UNION SELECT session_id FROM ctxlife_raw) ids "
            "LEFT JOIN (SELECT session_id, COUNT(*) AS n FROM ctxlife_raw GROUP BY session_id) r "
            "ON r.session_id = ids.session_id "
            "LEFT JOIN ctxlife_snapshots s ON s.session_id = ids.session_id "
            "ORDER BY ids.session_id",
        )
        return [SessionInfo(sid, int(n), upd) for sid, n, upd in rows]

    def delete(self, session_id: str) -> bool:
        validate_session_id(session_id)
        changed = 0
        with self._tx("delete") as conn:
            for table in ("ctxlife_snapshots", "ctxlife_raw", "ctxlife_blobs"):
                changed += conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,)).rowcount
        return changed > 0

    # -- lock ------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self, session_id: str, ttl_seconds: float = 30.0, timeout: float | None = 10.0) -> Iterator[None]:
        """A lock row with an expiry time; an expired row (dead holder) is taken over."""
        validate_session_id(session_id)
        check_lock_args(ttl_seconds, timeout)
        token = uuid.uuid4().hex

        def try_once() -> bool:
            with self._tx("lock") as conn:
                now = time.time()
                conn.execute(
                    "DELETE FROM ctxlife_locks WHERE session_id = ? AND expires_at <= ?",
                    (session_id, now),
                )
                cur = conn.execute(
                    "INSERT OR IGNORE INTO ctxlife_locks (session_id, token, expires_at) VALUES (?, ?, ?)",
                    (session_id, token, now + ttl_seconds),
                )
                return cur.rowcount == 1

        poll_until(try_once, timeout, f"the lock of session {session_id!r} in {self.path}")
        try:
            yield
        finally:
            with self._tx("unlock") as conn:
                released = conn.execute(
                    "DELETE FROM ctxlife_locks WHERE session_id = ? AND token = ?",
                    (session_id, token),
                ).rowcount
            if not released:
                log.warning(
                    "session_lock_expired",
                    store="sqlite",
                    session_id=session_id,
                    ttl_seconds=ttl_seconds,
                    hint="the lock expired while held; another worker may have taken it",
                )

    # -- blobs -----------------------------------------------------------------------------------

    def put_blob(self, session_id: str, key: str, text: str) -> None:
        validate_session_id(session_id)
        validate_blob_key(key)
        check_blob_text(session_id, key, text)
        with self._tx("put_blob") as conn:
            conn.execute(
                "INSERT INTO ctxlife_blobs (session_id, key, text) VALUES (?, ?, ?) "
                "ON CONFLICT (session_id, key) DO UPDATE SET text = excluded.text",
                (session_id, key, text),
            )

    def get_blob(self, session_id: str, key: str) -> str | None:
        validate_session_id(session_id)
        validate_blob_key(key)
        rows = self._query(
            "get_blob",
            "SELECT text FROM ctxlife_blobs WHERE session_id = ? AND key = ?",
            (session_id, key),
        )
        return rows[0][0] if rows else None

    def close(self) -> None:
        self._closed = True
        with self._conns_lock:
            conns, self._conns = self._conns, []
        if os.getpid() != self._pid:
            return  # inherited from the parent: not ours to close
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
