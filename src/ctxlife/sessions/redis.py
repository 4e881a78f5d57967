"""Redis session store: for fleets of workers on several machines serving the same sessions.

URL options, keys (one Redis Cluster hash tag per session), the compare-and-append Lua script, TTL,
durability: docs/sessions.md, "Redis". ``redis`` (redis-py) is imported only when a store is opened.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlencode, urlunsplit

from ctxlife.errors import SessionIdError, StoreError
from ctxlife.events import Logger, redact_url
from ctxlife.sessions.base import (
    SessionInfo,
    SessionStore,
    check_after_seq,
    check_blob_text,
    check_lock_args,
    conflict,
    decode_calls,
    erased_call,
    erased_doc,
    poll_until,
)
from ctxlife.sessions.durations import parse_duration
from ctxlife.sessions.ids import validate_blob_key, validate_session_id, validate_view
from ctxlife.sessions.records import (
    CallRecord,
    RawRecord,
    appended_records,
    decode_record,
    json_text,
    record_json,
)
from ctxlife.sessions.snapshot import Snapshot
from ctxlife.sessions.urls import split_query

__all__ = ["DEFAULT_PREFIX", "RedisStore"]

log = Logger("ctxlife.sessions")

DEFAULT_PREFIX = "ctxlife:"

#: Seconds to wait on Redis (connect, and each command) unless the URL says otherwise.
DEFAULT_SOCKET_TIMEOUT = 2.0

_T = TypeVar("_T")

# Push a batch numbered from ARGV[1] + 1 only if the list still has ARGV[1] elements; refresh the TTL
# (ARGV[2] seconds, 0 = none) of every key of the session. Returns the new length, or -1 - length.
_APPEND_LUA = """
local n = redis.call('llen', KEYS[1])
if n ~= tonumber(ARGV[1]) then
    return -1 - n
end
for i = 3, #ARGV do
    redis.call('rpush', KEYS[1], ARGV[i])
end
local ttl = tonumber(ARGV[2])
if ttl > 0 then
    for i = 1, #KEYS do
        redis.call('expire', KEYS[i], ttl)
    end
end
return n + #ARGV - 2
"""

_SESSION_KINDS = ("ctx", "views", "raw", "blobs", "calls")


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class RedisStore(SessionStore):
    """Sessions in Redis (keys and guarantees: docs/sessions.md, "Redis").

    Args:
        url: a ``redis://`` or ``rediss://`` URL (may carry ``prefix`` and ``ttl`` options).
        prefix: key prefix; overrides the URL's ``prefix``.
        ttl: seconds of idle life per session; overrides the URL's ``ttl``. ``None``: keep forever.
        client: an existing ``redis.Redis`` client to use instead of connecting to ``url``.
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str | None = None,
        ttl: int | None = None,
        client: Any = None,
    ) -> None:
        try:
            import redis  # lazy: only users of this store need redis-py
        except ImportError:
            raise StoreError("the redis session store needs the 'redis' package: pip install redis") from None
        self._redis = redis
        self.url = redact_url(url)
        parts, rest, opts = split_query(url, ("prefix", "ttl"), "redis")
        clean_url = urlunsplit(parts._replace(query=urlencode(rest)))
        if prefix is None:
            prefix = opts.get("prefix", DEFAULT_PREFIX)
        if not isinstance(prefix, str) or not prefix:
            raise StoreError(f"redis store {self.url}: the key prefix must be a non-empty string")
        self.prefix = prefix
        if ttl is None and opts.get("ttl"):
            try:
                ttl = math.ceil(parse_duration(opts["ttl"]))  # Redis expires keys in whole seconds
            except ValueError as exc:
                raise StoreError(f"redis store {self.url}: ttl={opts['ttl']!r}: {exc}") from None
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0):
            raise StoreError(f"redis store {self.url}: ttl must be a whole number of seconds > 0")
        self.ttl = ttl
        self._closed = False
        if client is None:
            # A frozen or partitioned Redis must not block the agent's call forever: default
            # timeouts, unless the URL sets its own (?socket_timeout=..., ?socket_connect_timeout=...).
            query = clean_url.partition("?")[2]
            timeouts = {
                key: DEFAULT_SOCKET_TIMEOUT
                for key in ("socket_timeout", "socket_connect_timeout")
                if f"{key}=" not in query
            }
            try:
                client = redis.Redis.from_url(clean_url, **timeouts)
            except (ValueError, TypeError) as exc:
                raise StoreError(f"invalid redis store URL {self.url!r}: {exc}") from None
            self._owns_client = True
        else:
            self._owns_client = False
        self._client = client
        self._append_script = client.register_script(_APPEND_LUA)
        try:
            self._call("connect", client.ping)
        except StoreError:
            self.close()
            raise

    @classmethod
    def from_url(cls, url: str) -> RedisStore:
        return cls(url)

    # -- helpers ---------------------------------------------------------------------------------

    def _call(self, what: str, fn: Callable[[], _T]) -> _T:
        if self._closed:
            raise StoreError(f"session store {self.url} is closed")
        try:
            return fn()
        except self._redis.RedisError as exc:
            raise StoreError(f"redis store {self.url}: {what} failed: {exc}") from None

    def _key(self, session_id: str, kind: str) -> str:
        validate_session_id(session_id)
        return f"{self.prefix}{{{session_id}}}:{kind}"

    def _refresh_ttl(self, pipe: Any, session_id: str) -> None:
        if self.ttl is not None:
            for kind in _SESSION_KINDS:
                pipe.expire(self._key(session_id, kind), self.ttl)

    def _write(self, what: str, session_id: str, write: Callable[[Any], object]) -> list[Any]:
        """``write(pipe)`` and the session's TTL refresh in one ``MULTI/EXEC``; the replies."""

        def run() -> list[Any]:
            pipe = self._client.pipeline(transaction=True)
            write(pipe)
            self._refresh_ttl(pipe, session_id)
            return list(pipe.execute())

        return self._call(what, run)

    # -- snapshot -------------------------------------------------------------------------------

    def load_snapshot(self, session_id: str, view: str = "") -> Snapshot | None:
        validate_view(view)
        if view:
            key = self._key(session_id, "views")
            data = self._call("load_snapshot", lambda: self._client.hget(key, view))
            source = f"snapshot of view {view!r} ({key!r} in {self.url})"
        else:
            key = self._key(session_id, "ctx")
            data = self._call("load_snapshot", lambda: self._client.get(key))
            source = f"snapshot key {key!r} in {self.url}"
        if data is None:
            return None
        return Snapshot.from_json(data, source=source)

    def save_snapshot(self, snapshot: Snapshot) -> None:
        sid, view = snapshot.session_id, snapshot.view
        data = snapshot.to_json().encode("utf-8")
        key = self._key(sid, "views" if view else "ctx")
        self._write("save_snapshot", sid, lambda pipe: pipe.hset(key, view, data) if view else pipe.set(key, data))

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
        key = self._key(session_id, "raw")
        prepared = self._prepare_append(session_id, messages, view, if_head, fingerprints)
        if not prepared:
            return []
        keys = [key] + [self._key(session_id, kind) for kind in _SESSION_KINDS if kind != "raw"]
        head = if_head if if_head is not None else self.head(session_id)
        while True:
            now = time.time()
            payloads = [record_json(head + 1 + i, view, now, p).encode("utf-8") for i, p in enumerate(prepared)]
            args = [head, self.ttl or 0, *payloads]
            result = int(self._call("append", functools.partial(self._append_script, keys=keys, args=args)))
            if result >= 0:
                break
            actual = -1 - result
            if if_head is not None:
                raise conflict(session_id, if_head, actual)
            head = actual  # another writer appended meanwhile: renumber and retry
        return appended_records(head + 1, messages, prepared, view, now)

    def _decode(self, session_id: str, key: str, item: Any, position: int, strict: bool) -> RawRecord | None:
        try:
            return decode_record(json.loads(item))
        except (ValueError, UnicodeDecodeError) as exc:
            problem = str(exc) if not isinstance(exc, json.JSONDecodeError) else "invalid JSON"
            error = f"raw record {position} of session {session_id!r} (key {key!r} in {self.url}) is corrupt: {problem}"
            self._corrupt(strict, error, store="redis", session_id=session_id, seq=position, problem=problem[:120])
            return None

    def read_records(
        self, session_id: str, after_seq: int = 0, *, view: str | None = None, strict: bool = True
    ) -> list[RawRecord]:
        key = self._key(session_id, "raw")
        check_after_seq(after_seq)
        if view is not None:
            validate_view(view)
        items = self._call("read_records", lambda: self._client.lrange(key, after_seq, -1))
        out = []
        for i, item in enumerate(items, after_seq + 1):
            record = self._decode(session_id, key, item, i, strict)
            if record is not None and (view is None or record.view == view):
                out.append(record)
        return out

    def _rewrite_records(self, session_id: str, values: dict[int, dict[str, Any]]) -> int:
        return self._rewrite_list(self._key(session_id, "raw"), values, lambda item, v: erased_doc(json.loads(item), v))

    def _rewrite_list(self, key: str, edits: dict[int, Any], rewrite: Callable[[bytes, Any], str]) -> int:
        """Replace the items numbered by ``edits`` (from 1) of the list ``key`` by ``rewrite(item,
        edit)``, atomically (retried while another client changes the list); how many were there."""
        if not edits:
            return 0

        def run() -> int:
            with self._client.pipeline(transaction=True) as pipe:
                while True:
                    try:
                        pipe.watch(key)
                        items = {n: pipe.lindex(key, n - 1) for n in edits}
                        pipe.multi()
                        found = {n: item for n, item in items.items() if item is not None}
                        for n, item in found.items():
                            pipe.lset(key, n - 1, rewrite(item, edits[n]).encode("utf-8"))
                        pipe.execute()
                        return len(found)
                    except self._redis.WatchError:
                        continue

        return self._call("erase", run)

    # -- call records ------------------------------------------------------------------------------

    def append_call(self, session_id: str, view: str, doc: dict[str, Any]) -> int:
        """One ``RPUSH`` onto ``...:calls`` (its number: the list's new length), TTLs refreshed."""
        key = self._key(session_id, "calls")
        validate_view(view)
        data = json_text({"view": view, "doc": doc}, what=f"call record of session {session_id!r}").encode("utf-8")
        return int(self._write("append_call", session_id, lambda pipe: pipe.rpush(key, data))[0])

    def read_calls(self, session_id: str, view: str | None = None) -> list[CallRecord]:
        key = self._key(session_id, "calls")
        if view is not None:
            validate_view(view)
        items = self._call("read_calls", lambda: self._client.lrange(key, 0, -1))
        return decode_calls(session_id, items, view)

    def _rewrite_calls(self, session_id: str, docs: dict[int, dict[str, Any]]) -> int:
        return self._rewrite_list(self._key(session_id, "calls"), docs, erased_call)

    def head(self, session_id: str) -> int:
        key = self._key(session_id, "raw")
        return int(self._call("head", lambda: self._client.llen(key)))

    # -- sessions --------------------------------------------------------------------------------

    def _read_mark_key(self, create: bool) -> bytes | None:
        key = f"{self.prefix}mark_key"  # not a session's key: those are {prefix}{{id}}:kind

        def read() -> bytes | None:
            if create:  # NX: a key another worker stored first stays
                self._client.set(key, secrets.token_bytes(32).hex(), nx=True)
            value = self._client.get(key)
            return None if value is None else bytes.fromhex(_text(value))

        try:
            return self._call("mark_key", read)
        except ValueError:
            raise StoreError(f"redis store {self.url}: the stored mark key {key!r} is not hex") from None

    def list_sessions(self) -> list[SessionInfo]:
        pattern = _glob_escape(self.prefix) + "*"
        plen = len(self.prefix)

        def scan() -> set[str]:
            ids: set[str] = set()
            for raw_key in self._client.scan_iter(match=pattern, count=1000):
                tagged, sep, kind = _text(raw_key)[plen:].rpartition(":")
                if sep and kind in ("ctx", "raw", "views") and tagged[:1] == "{" and tagged[-1:] == "}":
                    with contextlib.suppress(SessionIdError):  # someone else's key under our prefix
                        ids.add(validate_session_id(tagged[1:-1]))
            return ids

        sids = sorted(self._call("list_sessions", scan))

        def fetch() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            for sid in sids:
                pipe.llen(self._key(sid, "raw"))
                pipe.get(self._key(sid, "ctx"))
                pipe.hvals(self._key(sid, "views"))
            return list(pipe.execute())

        results = self._call("list_sessions", fetch) if sids else []
        infos = []
        for i, sid in enumerate(sids):
            count, ctx, views = results[3 * i], results[3 * i + 1], results[3 * i + 2]
            snapshots = ([ctx] if ctx is not None else []) + list(views or [])
            updated = []
            for data in snapshots:
                try:
                    updated.append(Snapshot.from_json(data, source=f"snapshot of {sid!r}").updated_at)
                except StoreError as exc:
                    log.warning("snapshot_unreadable", store="redis", session_id=sid, error=str(exc))
            if count or snapshots:  # a key may have expired between SCAN and now
                infos.append(SessionInfo(sid, int(count), max(updated) if updated else None))
        return infos

    def delete(self, session_id: str) -> bool:
        keys = [self._key(session_id, kind) for kind in _SESSION_KINDS]
        removed = int(self._call("delete", lambda: self._client.delete(*keys)))
        return removed > 0

    # -- lock ------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self, session_id: str, ttl_seconds: float = 30.0, timeout: float | None = 10.0) -> Iterator[None]:
        """redis-py's ``Lock`` on ``...:lock``: a token with an expiry, released only by its owner."""
        key = self._key(session_id, "lock")
        check_lock_args(ttl_seconds, timeout)
        lock = self._client.lock(key, timeout=ttl_seconds, thread_local=False)
        # The same polling as the other stores (capped back-off, waits the whole timeout).
        poll_until(
            lambda: bool(self._call("lock", lambda: lock.acquire(blocking=False))),
            timeout,
            f"the lock of session {session_id!r} ({key!r} in {self.url})",
        )
        acquired = time.monotonic()
        try:
            yield
        finally:
            try:
                lock.release()
            except self._redis.exceptions.LockNotOwnedError:
                log.warning(
                    "session_lock_expired",
                    store="redis",
                    session_id=session_id,
                    ttl_seconds=ttl_seconds,
                    held_seconds=round(time.monotonic() - acquired, 3),
                    hint="the lock expired while held; another worker may have taken it",
                )
            except self._redis.RedisError as exc:
                raise StoreError(f"redis store {self.url}: unlock failed: {exc}") from None

    # -- blobs -----------------------------------------------------------------------------------

    def put_blob(self, session_id: str, key: str, text: str) -> None:
        hkey = self._key(session_id, "blobs")
        validate_blob_key(key)
        data = check_blob_text(session_id, key, text)
        self._write("put_blob", session_id, lambda pipe: pipe.hset(hkey, key, data))

    def get_blob(self, session_id: str, key: str) -> str | None:
        hkey = self._key(session_id, "blobs")
        validate_blob_key(key)
        value = self._call("get_blob", lambda: self._client.hget(hkey, key))
        return None if value is None else _text(value)

    def _delete_blob(self, session_id: str, key: str) -> None:
        hkey = self._key(session_id, "blobs")
        validate_blob_key(key)
        self._call("delete_blob", lambda: self._client.hdel(hkey, key))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            with contextlib.suppress(Exception):
                self._client.close()
