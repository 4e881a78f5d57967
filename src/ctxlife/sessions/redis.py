"""Redis session store: for fleets of workers on several machines serving the same sessions.

URL: ``redis://[[user]:password@]host:port/db`` or ``rediss://...`` (TLS). The URL goes to redis-py's
``Redis.from_url`` unchanged (passwords, TLS and redis-py's own query options such as
``socket_timeout`` pass through), except two ctxlife options which are removed from it first:

* ``prefix`` -- key prefix (default ``ctxlife:``).
* ``ttl`` -- seconds; when set, every write to a session sets all its keys to expire ``ttl`` seconds
  later (so an idle session disappears as a whole, never half of it).

Keys, for a session id ``SID`` (session ids cannot contain ``:``, ``{`` or ``}``, so no key of one
session can name another session's key or escape the prefix)::

    ctxlife:{SID}:ctx     STRING  the snapshot JSON, replaced with SET (atomic)
    ctxlife:{SID}:raw     LIST    one JSON message per element, appended with one RPUSH per batch
    ctxlife:{SID}:blobs   HASH    blob key -> text
    ctxlife:{SID}:lock    STRING  lock token, SET NX PX; released by a compare-and-delete Lua script

The braces are literal: they are a Redis Cluster *hash tag*, so all keys of one session live in one
slot and the multi-key ``MULTI/EXEC`` below also works with a ``redis.cluster.RedisCluster`` client
passed as ``client=``.

Writes that touch several keys (a write plus the TTL refresh) run in one ``MULTI/EXEC``. ``redis``
(redis-py) is imported only when this store is opened. Durability is Redis's own: configure AOF or
RDB persistence on the server if sessions must survive a Redis restart.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ctxlife.events import Logger

from ctxlife.errors import SessionIdError, StoreError
from ctxlife.sessions.base import (
    SessionInfo,
    SessionStore,
    Snapshot,
    check_blob_text,
    check_lock_args,
    check_start,
    json_bytes,
    poll_until,
    redact_url,
    validate_messages,
)
from ctxlife.sessions.ids import validate_blob_key, validate_session_id

__all__ = ["DEFAULT_PREFIX", "RedisStore"]

log = Logger("ctxlife.sessions")

DEFAULT_PREFIX = "ctxlife:"

#: Seconds to wait on Redis (connect, and each command) unless the URL says otherwise.
DEFAULT_SOCKET_TIMEOUT = 2.0

_T = TypeVar("_T")

# Delete the lock only if it still holds our token (another worker may own it after expiry).
_RELEASE_LUA = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""

_SESSION_KINDS = ("ctx", "raw", "blobs")


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _split_options(url: str) -> tuple[str, dict[str, str]]:
    """Remove ctxlife's own query options from ``url``; return the redis-py URL and them."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise StoreError(f"malformed redis store URL {redact_url(url)!r}: {exc}") from None
    ours: dict[str, str] = {}
    rest: list[tuple[str, str]] = []
    for k, v in parse_qsl(parts.query, keep_blank_values=True):
        if k in ("prefix", "ttl"):
            ours[k] = v
        else:
            rest.append((k, v))
    clean = urlunsplit(parts._replace(query=urlencode(rest)))
    return clean, ours


class RedisStore(SessionStore):
    """Sessions in Redis (see the module docstring for keys and guarantees).

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
        clean_url, opts = _split_options(url)
        if prefix is None:
            prefix = opts.get("prefix", DEFAULT_PREFIX)
        if not isinstance(prefix, str) or not prefix:
            raise StoreError(f"redis store {self.url}: the key prefix must be a non-empty string")
        self.prefix = prefix
        if ttl is None and opts.get("ttl"):
            try:
                ttl = int(opts["ttl"])
            except ValueError:
                raise StoreError(
                    f"redis store {self.url}: ttl={opts['ttl']!r} must be a whole number of seconds"
                ) from None
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0):
            raise StoreError(f"redis store {self.url}: ttl must be a whole number of seconds > 0")
        self.ttl = ttl
        self._closed = False
        if client is None:
            # A frozen or partitioned Redis must not block the agent's call forever: default
            # timeouts, unless the URL sets its own (?socket_timeout=..., ?socket_connect_timeout=...).
            query = clean_url.partition("?")[2]
            timeouts = {key: DEFAULT_SOCKET_TIMEOUT for key in ("socket_timeout", "socket_connect_timeout") if f"{key}=" not in query}
            try:
                client = redis.Redis.from_url(clean_url, **timeouts)
            except (ValueError, TypeError) as exc:
                raise StoreError(f"invalid redis store URL {self.url!r}: {exc}") from None
            self._owns_client = True
        else:
            self._owns_client = False
        self._client = client
        self._release = client.register_script(_RELEASE_LUA)
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

    # -- snapshot -------------------------------------------------------------------------------

    def load_snapshot(self, session_id: str) -> Snapshot | None:
        key = self._key(session_id, "ctx")
        data = self._call("load_snapshot", lambda: self._client.get(key))
        if data is None:
            return None
        return Snapshot.from_json(data, source=f"snapshot key {key!r} in {self.url}")

    def save_snapshot(self, snapshot: Snapshot) -> None:
        sid = snapshot.session_id
        key = self._key(sid, "ctx")
        data = snapshot.to_json().encode("utf-8")

        def run() -> None:
            pipe = self._client.pipeline(transaction=True)
            pipe.set(key, data)
            self._refresh_ttl(pipe, sid)
            pipe.execute()

        self._call("save_snapshot", run)

    # -- raw history -----------------------------------------------------------------------------

    def append_raw(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        key = self._key(session_id, "raw")
        validate_messages(session_id, messages)
        if not messages:
            return
        payloads = [json_bytes(m, what=f"message {i} for session {session_id!r}") for i, m in enumerate(messages)]

        def run() -> None:
            pipe = self._client.pipeline(transaction=True)
            pipe.rpush(key, *payloads)
            self._refresh_ttl(pipe, session_id)
            pipe.execute()

        self._call("append_raw", run)

    def read_raw(self, session_id: str, start: int = 0) -> list[dict[str, Any]]:
        key = self._key(session_id, "raw")
        check_start(start)
        items = self._call("read_raw", lambda: self._client.lrange(key, start, -1))
        out = []
        for i, item in enumerate(items, start):
            try:
                value = json.loads(item)
            except (ValueError, UnicodeDecodeError):
                value = None
            if not isinstance(value, dict):
                raise StoreError(
                    f"raw message {i} of session {session_id!r} (key {key!r} in {self.url}) is "
                    f"corrupt (not a JSON object)"
                )
            out.append(value)
        return out

    def raw_length(self, session_id: str) -> int:
        key = self._key(session_id, "raw")
        return int(self._call("raw_length", lambda: self._client.llen(key)))

    # -- sessions --------------------------------------------------------------------------------

    def list_sessions(self) -> list[SessionInfo]:
        pattern = _glob_escape(self.prefix) + "*"
        plen = len(self.prefix)

        def scan() -> set[str]:
            ids: set[str] = set()
            for raw_key in self._client.scan_iter(match=pattern, count=1000):
                tagged, sep, kind = _text(raw_key)[plen:].rpartition(":")
                if sep and kind in ("ctx", "raw") and tagged[:1] == "{" and tagged[-1:] == "}":
                    with contextlib.suppress(SessionIdError):  # someone else's key under our prefix
                        ids.add(validate_session_id(tagged[1:-1]))
            return ids

        sids = sorted(self._call("list_sessions", scan))

        def fetch() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            for sid in sids:
                pipe.llen(self._key(sid, "raw"))
                pipe.get(self._key(sid, "ctx"))
            return list(pipe.execute())

        results = self._call("list_sessions", fetch) if sids else []
        infos = []
        for i, sid in enumerate(sids):
            count, ctx = results[2 * i], results[2 * i + 1]
            updated_at = None
            if ctx is not None:
                try:
                    updated_at = Snapshot.from_json(ctx, source=f"snapshot of {sid!r}").updated_at
                except StoreError as exc:
                    log.warning("snapshot_unreadable", store="redis", session_id=sid, error=str(exc))
            if count or ctx is not None:  # a key may have expired between SCAN and now
                infos.append(SessionInfo(sid, int(count), updated_at))
        return infos

    def delete(self, session_id: str) -> bool:
        keys = [self._key(session_id, kind) for kind in _SESSION_KINDS]
        removed = int(self._call("delete", lambda: self._client.delete(*keys)))
        return removed > 0

    # -- lock ------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self, session_id: str, ttl_seconds: float = 30.0, timeout: float | None = 10.0) -> Iterator[None]:
        """``SET key token NX PX ttl``; released only by the token's owner (Lua compare-and-delete)."""
        key = self._key(session_id, "lock")
        check_lock_args(ttl_seconds, timeout)
        token = uuid.uuid4().hex
        ttl_ms = max(1, int(ttl_seconds * 1000))

        def try_once() -> bool:
            return bool(self._call("lock", lambda: self._client.set(key, token, nx=True, px=ttl_ms)))

        poll_until(try_once, timeout, f"the lock of session {session_id!r} ({key!r} in {self.url})")
        acquired = time.monotonic()
        try:
            yield
        finally:
            released = self._call("unlock", lambda: self._release(keys=[key], args=[token]))
            if not released:
                log.warning(
                    "session_lock_expired",
                    store="redis",
                    session_id=session_id,
                    ttl_seconds=ttl_seconds,
                    held_seconds=round(time.monotonic() - acquired, 3),
                    hint="the lock expired while held; another worker may have taken it",
                )

    # -- blobs -----------------------------------------------------------------------------------

    def put_blob(self, session_id: str, key: str, text: str) -> None:
        hkey = self._key(session_id, "blobs")
        validate_blob_key(key)
        data = check_blob_text(session_id, key, text)

        def run() -> None:
            pipe = self._client.pipeline(transaction=True)
            pipe.hset(hkey, key, data)
            self._refresh_ttl(pipe, session_id)
            pipe.execute()

        self._call("put_blob", run)

    def get_blob(self, session_id: str, key: str) -> str | None:
        hkey = self._key(session_id, "blobs")
        validate_blob_key(key)
        value = self._call("get_blob", lambda: self._client.hget(hkey, key))
        return None if value is None else _text(value)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            with contextlib.suppress(Exception):
                self._client.close()
