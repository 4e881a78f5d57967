"""SQLite session store: one database file shared by several processes on one machine.

URL options, design (WAL, one transaction per write, ``BEGIN IMMEDIATE`` as the session's write lock),
tables, file modes, limits: docs/sessions.md, "SQLite".
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from operator import itemgetter
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ctxlife.errors import StoreError
from ctxlife.events import Logger
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
from ctxlife.sessions.records import (
    ADD,
    ERASED_KEY,
    EVENT_KEY,
    CallRecord,
    RawRecord,
    RecordSlot,
    ViewRows,
    appended_records,
    decode_plain,
    fingerprint,
    json_text,
    no_collection,
    token_pairs,
    unwrap_event,
)
from ctxlife.sessions.snapshot import Snapshot
from ctxlife.sessions.urls import parse_query, parse_ttl

__all__ = ["SQLiteStore"]

log = Logger("ctxlife.sessions")

SCHEMA_VERSION = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ctxlife_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ctxlife_snapshots (
    session_id TEXT NOT NULL,
    view TEXT NOT NULL DEFAULT '',
    updated_at REAL NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (session_id, view)
);
CREATE TABLE IF NOT EXISTS ctxlife_raw (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    json TEXT NOT NULL,
    view TEXT NOT NULL DEFAULT '',
    fp TEXT,
    recorded_at REAL,
    bad TEXT,
    tokens INTEGER,
    token_encoding TEXT,
    UNIQUE (session_id, seq)
);
CREATE INDEX IF NOT EXISTS ctxlife_raw_by_view ON ctxlife_raw (session_id, view, seq);
CREATE TABLE IF NOT EXISTS ctxlife_sessions (session_id TEXT PRIMARY KEY, touched_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS ctxlife_blobs (
    session_id TEXT NOT NULL,
    key TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
);
CREATE TABLE IF NOT EXISTS ctxlife_calls (
    session_id TEXT NOT NULL,
    n INTEGER NOT NULL,
    view TEXT NOT NULL DEFAULT '',
    json TEXT NOT NULL,
    PRIMARY KEY (session_id, n)
);
CREATE TABLE IF NOT EXISTS ctxlife_locks (
    session_id TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    expires_at REAL NOT NULL
);
"""

# Schema 2 -> 3: each record's token count, written once at append (older records have none).
_MIGRATE_2_TO_3 = [
    "ALTER TABLE ctxlife_raw ADD COLUMN tokens INTEGER",
    "ALTER TABLE ctxlife_raw ADD COLUMN token_encoding TEXT",
]

_RAW_COLUMNS = "seq, view, fp, recorded_at, bad, json, tokens, token_encoding"
_VIEW_COLUMNS = "seq, fp, bad, json, tokens, token_encoding"  # read_view's
# Rows decoded per json.loads: the per-call cost is spread, and the joined copy of the texts a call
# needs stays small (one copy of a 100k-message history's JSON would add ~45 MB to a read's peak).
_DECODE_CHUNK = 2048


_UNREAD: Any = object()  # _decode: the row's JSON is still to be read


class SQLiteStore(SessionStore):
    """Sessions in one SQLite database file (docs/sessions.md, "SQLite").

    Args:
        path: the database file; created with its folders on the first write.
        busy_timeout: seconds to wait for another connection's write lock.
        synchronous: ``"FULL"`` or ``"NORMAL"`` (docs/sessions.md, "SQLite").
        ttl: seconds of idle life per session (None: keep forever).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        synchronous: str = "FULL",
        ttl: float | None = None,
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
        self.ttl = ttl
        self.url = f"sqlite:///{self.path}"
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False
        self._schema_ready = False
        if self.path.exists():
            # An existing database: a bad file or a newer schema fails now, not at the first call.
            self._conn(create=False)

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
        opts = parse_query(url, query, ("busy_timeout", "synchronous", "ttl"))
        kwargs: dict[str, Any] = {"ttl": parse_ttl(opts, url)}
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

    def _conn(self, create: bool = True) -> sqlite3.Connection | None:
        """This thread's connection; None when the database does not exist and ``create`` is false."""
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
            if not self.path.exists():
                if not create:
                    return None
                self._prepare_file()
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
            # Freed space (a replaced snapshot, an erased record or blob) is overwritten with zeros,
            # so old text does not linger in the file's free pages.
            conn.execute("PRAGMA secure_delete = ON")
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
        if _schema_version(conn) == SCHEMA_VERSION:
            return  # every table is there (made with the version): no write transaction to open a store
        conn.execute("BEGIN IMMEDIATE")
        try:
            has_meta = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ctxlife_meta'"
            ).fetchone()
            row = (
                conn.execute("SELECT value FROM ctxlife_meta WHERE key = 'schema_version'").fetchone()
                if has_meta
                else None
            )
            version = int(row[0]) if row is not None else None
            if version is not None and not 2 <= version <= SCHEMA_VERSION:
                raise StoreError(
                    f"sqlite database {self.path} has ctxlife schema version {version}; this ctxlife reads "
                    f"versions 2 to {SCHEMA_VERSION}: "
                    + ("upgrade ctxlife" if version > SCHEMA_VERSION else "start a new database (ctxlife 0.1's)")
                )
            if version == 2:
                for stmt in _MIGRATE_2_TO_3:
                    conn.execute(stmt)
                log.info("sqlite_schema_upgraded", store="sqlite", path=str(self.path), from_version=2, to_version=3)
            # statement by statement: executescript() would COMMIT the transaction on its own
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.execute(
                "INSERT INTO ctxlife_meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def _tx(self, what: str) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``) that maps driver errors to StoreError."""
        conn = self._conn()
        assert conn is not None
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
        """A read; ``[]`` when the database does not exist yet (reading never creates it)."""
        try:
            conn = self._conn(create=False)
            return [] if conn is None else conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"sqlite store {self.path}: {what} failed: {exc}") from None

    # -- expiry ------------------------------------------------------------------------------------

    def _expired(self, session_id: str) -> bool:
        if self.ttl is None:
            return False
        rows = self._query("ttl check", "SELECT touched_at FROM ctxlife_sessions WHERE session_id = ?", (session_id,))
        return bool(rows) and time.time() - rows[0][0] > self.ttl

    def _touch(self, conn: sqlite3.Connection, session_id: str) -> None:
        """In a write transaction: start an expired session over, then mark it active now."""
        now = time.time()
        if self.ttl is not None:
            row = conn.execute("SELECT touched_at FROM ctxlife_sessions WHERE session_id = ?", (session_id,)).fetchone()
            if row is not None and now - row[0] > self.ttl:
                self._delete_rows(conn, session_id)
                log.info("session_expired", store="sqlite", session_id=session_id, ttl_seconds=self.ttl)
        conn.execute(
            "INSERT INTO ctxlife_sessions (session_id, touched_at) VALUES (?, ?) "
            "ON CONFLICT (session_id) DO UPDATE SET touched_at = excluded.touched_at",
            (session_id, now),
        )

    # -- snapshot -------------------------------------------------------------------------------

    def load_snapshot(self, session_id: str, view: str = "") -> Snapshot | None:
        validate_session_id(session_id)
        validate_view(view)
        if self._expired(session_id):
            return None
        rows = self._query(
            "load_snapshot",
            "SELECT json FROM ctxlife_snapshots WHERE session_id = ? AND view = ?",
            (session_id, view),
        )
        if not rows:
            return None
        where = f"view {view!r} of " if view else ""
        return Snapshot.from_json(rows[0][0], source=f"snapshot of {where}session {session_id!r} in {self.path}")

    def save_snapshot(self, snapshot: Snapshot) -> None:
        validate_session_id(snapshot.session_id)
        text = snapshot.to_json()
        with self._tx("save_snapshot") as conn:
            self._touch(conn, snapshot.session_id)
            conn.execute(
                "INSERT INTO ctxlife_snapshots (session_id, view, updated_at, json) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (session_id, view) DO UPDATE SET updated_at = excluded.updated_at, "
                "json = excluded.json",
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
        with self._tx("append") as conn:
            self._touch(conn, session_id)
            (head,) = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM ctxlife_raw WHERE session_id = ?", (session_id,)
            ).fetchone()
            if if_head is not None and head != if_head:
                raise conflict(session_id, if_head, head)
            conn.executemany(
                "INSERT INTO ctxlife_raw (session_id, seq, view, fp, recorded_at, bad, json, tokens, token_encoding) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        session_id,
                        head + 1 + i,
                        view,
                        p.fingerprint,
                        now,
                        p.quarantined,
                        p.text,
                        p.tokens,
                        p.token_encoding,
                    )
                    for i, p in enumerate(prepared)
                ],
            )
        return appended_records(head + 1, messages, prepared, view, now)

    def _decode_all(self, session_id: str, rows: list[tuple[Any, ...]], strict: bool) -> list[RawRecord]:
        """The records of ``rows``, decoded :data:`_DECODE_CHUNK` rows per ``json.loads``."""
        records: list[RawRecord] = []
        for start in range(0, len(rows), _DECODE_CHUNK):
            records += self._decode_chunk(session_id, rows[start : start + _DECODE_CHUNK], strict)
        return records

    def _decode_chunk(self, session_id: str, rows: list[tuple[Any, ...]], strict: bool) -> list[RawRecord]:
        """The records of ``rows``; their JSON texts decoded in one ``json.loads`` (row by row when
        one is not a JSON document, which then says which)."""
        texts = [row[5] for row in rows]
        try:
            # Each text one object (as written): no text can end inside another's document.
            whole = all(t[:1] == "{" and t[-1:] == "}" for t in texts)
            values = json.loads("[" + ",".join(texts) + "]") if whole else None
        except (ValueError, TypeError):
            values = None
        if not isinstance(values, list) or len(values) != len(rows):  # a text holding two documents
            decoded = (self._decode(session_id, row, strict) for row in rows)
            return [r for r in decoded if r is not None]
        out: list[RawRecord] = []
        for row, value in zip(rows, values, strict=True):
            # A plain addition with its fingerprint (nearly every row): the record at once, one pass per
            # row; anything else (an event, an erased or unreadable record, an old row) through _decode.
            if type(value) is dict and row[2] and EVENT_KEY not in value and ERASED_KEY not in value:
                seq, view, fp, recorded_at, bad, _, tokens, token_encoding = row
                counted = type(tokens) is int and tokens >= 0 and type(token_encoding) is str
                out.append(
                    RawRecord(
                        seq,
                        value,
                        fp,
                        view or "",
                        recorded_at,
                        bad,
                        ADD,
                        None,
                        False,
                        tokens if counted else None,
                        token_encoding if counted else None,
                    )
                )
            elif (record := self._decode(session_id, row, strict, value)) is not None:
                out.append(record)
        return out

    def _decode(self, session_id: str, row: tuple[Any, ...], strict: bool, value: Any = _UNREAD) -> RawRecord | None:
        seq, view, fp, recorded_at, bad, text, tokens, token_encoding = row
        if value is _UNREAD:
            try:
                value = json.loads(text)
            except (ValueError, TypeError):
                value = None
        if not isinstance(value, dict):
            problem = "not a JSON object" if value is not None else "invalid JSON"
            error = f"raw record seq={seq} of session {session_id!r} in {self.path} is corrupt: {problem}"
            self._corrupt(strict, error, store="sqlite", session_id=session_id, seq=seq, problem="not a JSON object")
            return None
        try:
            message, op, target, erased = unwrap_event(value)
        except ValueError as exc:
            error = f"raw record seq={seq} of session {session_id!r} in {self.path} is corrupt: {exc}"
            self._corrupt(strict, error, store="sqlite", session_id=session_id, seq=seq, problem=str(exc)[:120])
            return None
        counted = type(tokens) is int and tokens >= 0 and isinstance(token_encoding, str)
        return RawRecord(
            int(seq),
            message,
            fp if fp else fingerprint(message),
            view or "",
            recorded_at,
            bad,
            op,
            target,
            erased,
            tokens if counted else None,
            token_encoding if counted else None,
        )

    def _rewrite_records(self, session_id: str, values: dict[int, dict[str, Any]]) -> int:
        validate_session_id(session_id)
        if not values or self._conn(create=False) is None:
            return 0
        with self._tx("erase") as conn:
            changed = 0
            for seq, value in values.items():
                message, _, _, _ = unwrap_event(value)
                changed += conn.execute(
                    "UPDATE ctxlife_raw SET json = ?, fp = ?, bad = NULL, tokens = NULL, token_encoding = NULL "
                    "WHERE session_id = ? AND seq = ?",
                    (json_text(value, what="erased record"), fingerprint(message), session_id, seq),
                ).rowcount
        return changed

    def _erased(self, session_id: str) -> None:
        super()._erased(session_id)
        after = self._conn(create=False)
        if after is not None:
            # Copy the erase's writes (records, snapshots, blobs) into the database file, where they
            # overwrite the old text, and empty the write-ahead log, which still holds old pages
            # (best effort: a reader in another process may delay it).
            with contextlib.suppress(sqlite3.Error):
                after.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def derived_dir(self, session_id: str) -> Path | None:
        validate_session_id(session_id)
        return self.path.with_name(self.path.name + ".derived") / session_id

    def read_records(
        self, session_id: str, after_seq: int = 0, *, view: str | None = None, strict: bool = True
    ) -> list[RawRecord]:
        rows = self._raw_rows("read_records", _RAW_COLUMNS, session_id, after_seq, view)
        return self._decode_all(session_id, rows, strict)

    def read_view(self, session_id: str, view: str = "", *, messages_only: bool = False) -> ViewRows | None:
        # One read of the columns a restore needs and one json.loads per chunk of rows: no
        # record object per row. Any row that is not a plain, counted-or-not add: None (read_records).
        if messages_only:  # (two columns: each further one costs ~10% of the read)
            return self._read_messages(session_id, view)
        with no_collection():
            rows = self._raw_rows("read_view", _VIEW_COLUMNS, session_id, 0, view)
            seqs, fps, bads, texts, tokens, encodings = (list(map(itemgetter(i), rows)) for i in range(6))
            del rows
            if bads.count(None) != len(bads) or None in fps:  # quarantined, or written before fingerprints
                return None
            messages = decode_plain(texts, _DECODE_CHUNK)
            if messages is None:
                return None
            pairs = token_pairs(tokens, encodings)
        return ViewRows(seqs, fps, messages, pairs)

    def _read_messages(self, session_id: str, view: str) -> ViewRows | None:
        """:meth:`read_view` with ``messages_only``: the sequence numbers and the messages. A
        quarantined record is its stored form here too, so only an event or an erased record (which
        :func:`decode_plain` refuses) sends the read to :meth:`read_records`."""
        with no_collection():
            rows = self._raw_rows("read_view", "seq, json", session_id, 0, view)
            seqs, texts = list(map(itemgetter(0), rows)), list(map(itemgetter(1), rows))
            del rows
            messages = decode_plain(texts, _DECODE_CHUNK)
        return None if messages is None else ViewRows(seqs, [], messages, [])

    def _raw_rows(
        self, what: str, columns: str, session_id: str, after_seq: int, view: str | None, where: str = ""
    ) -> list[tuple[Any, ...]]:
        """``columns`` of the session's raw rows after ``after_seq`` (of ``view``, None: all), in order."""
        validate_session_id(session_id)
        check_after_seq(after_seq)
        if view is not None:
            validate_view(view)
        if self._expired(session_id):
            return []
        lane = "" if view is None else " AND view = ?"
        params = (session_id, after_seq) if view is None else (session_id, after_seq, view)
        # One statement = one consistent read snapshot in WAL mode.
        return self._query(
            what,
            f"SELECT {columns} FROM ctxlife_raw WHERE session_id = ? AND seq > ?{lane}{where} ORDER BY seq",
            params,
        )

    def read_slots(self, session_id: str, after_seq: int = 0, *, view: str | None = None) -> list[RecordSlot]:
        # Only an event (an edit, a removal, an insertion) needs its JSON in Python; a row that is not
        # a JSON object is left out, as read_records(strict=False) skips it.
        rows = self._raw_rows(
            "read_slots",
            f"seq, fp, CASE WHEN json_extract(json, '$.{EVENT_KEY}') IS NOT NULL THEN json END",
            session_id,
            after_seq,
            view,
            " AND json_valid(json) AND json_type(json) = 'object'",
        )
        if any(fp is None for _, fp, _ in rows):  # rows written before fingerprints were stored
            return super().read_slots(session_id, after_seq, view=view)
        slots = []
        for seq, fp, event in rows:
            if event is None:
                slots.append(RecordSlot(int(seq), fp))
                continue
            try:
                _, op, target, _ = unwrap_event(json.loads(event))
            except ValueError as exc:
                log.error("raw_record_skipped", store="sqlite", session_id=session_id, seq=seq, problem=str(exc)[:120])
                continue
            slots.append(RecordSlot(int(seq), fp, op, target))
        return slots

    def head(self, session_id: str) -> int:
        validate_session_id(session_id)
        if self._expired(session_id):
            return 0
        rows = self._query("head", "SELECT COALESCE(MAX(seq), 0) FROM ctxlife_raw WHERE session_id = ?", (session_id,))
        return int(rows[0][0]) if rows else 0

    # -- call records ------------------------------------------------------------------------------

    def append_call(self, session_id: str, view: str, doc: dict[str, Any]) -> int:
        validate_session_id(session_id)
        validate_view(view)
        text = json_text(doc, what=f"call record of session {session_id!r}")
        with self._relaxed("append_call"), self._tx("append_call") as conn:
            self._touch(conn, session_id)
            row = conn.execute("SELECT MAX(n) FROM ctxlife_calls WHERE session_id = ?", (session_id,)).fetchone()
            n = int(row[0] or 0) + 1
            conn.execute(
                "INSERT INTO ctxlife_calls (session_id, n, view, json) VALUES (?, ?, ?, ?)", (session_id, n, view, text)
            )
        return n

    @contextlib.contextmanager
    def _relaxed(self, what: str) -> Iterator[None]:
        """Commit without waiting for the disk (``synchronous = NORMAL``) inside: for a call record, a
        log the raw history does not depend on. In WAL mode the commit survives a process crash at
        once and a power cut with the next ``FULL`` commit (the next append syncs the log up to it):
        one disk flush per model call instead of two."""
        if self.synchronous != "FULL":
            yield
            return
        conn = self._conn()
        assert conn is not None
        try:
            conn.execute("PRAGMA synchronous = NORMAL")
            try:
                yield
            finally:
                conn.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as exc:
            raise StoreError(f"sqlite store {self.path}: {what} failed: {exc}") from None

    def read_calls(self, session_id: str, view: str | None = None) -> list[CallRecord]:
        validate_session_id(session_id)
        if view is not None:
            validate_view(view)
        if self._expired(session_id):
            return []
        sql = "SELECT n, view, json FROM ctxlife_calls WHERE session_id = ?"
        params: tuple[Any, ...] = (session_id,)
        if view is not None:
            sql, params = sql + " AND view = ?", (session_id, view)
        out = []
        for n, lane, text in self._query("read_calls", sql + " ORDER BY n", params):
            try:
                doc = json.loads(text)
                if not isinstance(doc, dict):
                    raise ValueError(f"not a JSON object but {type(doc).__name__}")
            except ValueError as exc:
                log.error("call_record_skipped", store="sqlite", session_id=session_id, call=n, error=str(exc)[:200])
                continue
            out.append(CallRecord(int(n), lane, doc))
        return out

    def _rewrite_calls(self, session_id: str, docs: dict[int, dict[str, Any]]) -> int:
        if not docs:
            return 0
        changed = 0
        with self._tx("erase") as conn:
            conn.execute("PRAGMA secure_delete = ON")  # as _rewrite_records: freed pages are zeroed
            for n, doc in docs.items():
                text = json_text(doc, what=f"call record of session {session_id!r}")
                changed += conn.execute(
                    "UPDATE ctxlife_calls SET json = ? WHERE session_id = ? AND n = ?", (text, session_id, n)
                ).rowcount
        after = self._conn()
        if after is not None:
            with contextlib.suppress(sqlite3.Error):  # the write-ahead log still holds the old pages
                after.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return changed

    # -- sessions --------------------------------------------------------------------------------

    def list_sessions(self) -> list[SessionInfo]:
        rows = self._query(
            "list_sessions",
            "SELECT ids.session_id, COALESCE(r.n, 0), s.updated_at, t.touched_at FROM "
            "(SELECT session_id FROM ctxlife_snapshots UNION SELECT session_id FROM ctxlife_raw) ids "
            "LEFT JOIN (SELECT session_id, MAX(seq) AS n FROM ctxlife_raw GROUP BY session_id) r "
            "ON r.session_id = ids.session_id "
            "LEFT JOIN (SELECT session_id, MAX(updated_at) AS updated_at FROM ctxlife_snapshots GROUP BY session_id) s "
            "ON s.session_id = ids.session_id "
            "LEFT JOIN ctxlife_sessions t ON t.session_id = ids.session_id "
            "ORDER BY ids.session_id",
        )
        infos = []
        now = time.time()
        for sid, n, upd, touched in rows:
            if self.ttl is not None and touched is not None and now - touched > self.ttl:
                self.delete(sid)
                log.info("session_expired", store="sqlite", session_id=sid, ttl_seconds=self.ttl)
                continue
            infos.append(SessionInfo(sid, int(n), upd, touched))
        return infos

    def _delete_rows(self, conn: sqlite3.Connection, session_id: str) -> int:
        self._delete_derived(session_id)
        changed = 0
        for table in ("ctxlife_snapshots", "ctxlife_raw", "ctxlife_blobs", "ctxlife_calls", "ctxlife_sessions"):
            changed += conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,)).rowcount
        return changed

    def _delete_derived(self, session_id: str) -> bool:
        folder = self.derived_dir(session_id)
        if folder is None or not folder.is_dir():
            return False
        shutil.rmtree(folder, ignore_errors=True)
        return True

    def delete(self, session_id: str) -> bool:
        validate_session_id(session_id)
        if self._conn(create=False) is None:
            return self._delete_derived(session_id)
        derived = self._delete_derived(session_id)
        with self._tx("delete") as conn:
            changed = int(derived)
            for table in ("ctxlife_snapshots", "ctxlife_raw", "ctxlife_blobs", "ctxlife_calls"):
                changed += conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,)).rowcount
            conn.execute("DELETE FROM ctxlife_sessions WHERE session_id = ?", (session_id,))
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
            self._touch(conn, session_id)
            conn.execute(
                "INSERT INTO ctxlife_blobs (session_id, key, text) VALUES (?, ?, ?) "
                "ON CONFLICT (session_id, key) DO UPDATE SET text = excluded.text",
                (session_id, key, text),
            )

    def get_blob(self, session_id: str, key: str) -> str | None:
        validate_session_id(session_id)
        validate_blob_key(key)
        if self._expired(session_id):
            return None
        rows = self._query(
            "get_blob",
            "SELECT text FROM ctxlife_blobs WHERE session_id = ? AND key = ?",
            (session_id, key),
        )
        return rows[0][0] if rows else None

    def _delete_blob(self, session_id: str, key: str) -> None:
        validate_session_id(session_id)
        validate_blob_key(key)
        if self._conn(create=False) is None:
            return
        with self._tx("delete_blob") as conn:
            conn.execute("DELETE FROM ctxlife_blobs WHERE session_id = ? AND key = ?", (session_id, key))
        after = self._conn()
        if after is not None:
            with contextlib.suppress(sqlite3.Error):  # the write-ahead log still holds the blob's page
                after.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _read_mark_key(self, create: bool) -> bytes | None:
        read = "SELECT value FROM ctxlife_meta WHERE key = 'mark_key'"
        rows = self._query("mark_key", read)
        if not rows and create:
            with self._tx("mark_key") as conn:  # OR IGNORE: a key another process stored first stays
                conn.execute(
                    "INSERT OR IGNORE INTO ctxlife_meta (key, value) VALUES ('mark_key', ?)",
                    (secrets.token_bytes(32).hex(),),
                )
            rows = self._query("mark_key", read)
        try:
            return bytes.fromhex(rows[0][0]) if rows else None
        except (TypeError, ValueError):
            raise StoreError(f"sqlite store {self.path}: the stored mark key is not hex") from None

    def close(self) -> None:
        self._closed = True
        with self._conns_lock:
            conns, self._conns = self._conns, []
        if os.getpid() != self._pid:
            return  # inherited from the parent: not ours to close
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()


def _schema_version(conn: sqlite3.Connection) -> int | None:
    """The database's ``schema_version`` as a plain read (None: no ctxlife tables yet, or unreadable)."""
    try:
        row = conn.execute("SELECT value FROM ctxlife_meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row is not None else None
    except (sqlite3.Error, ValueError):
        return None
