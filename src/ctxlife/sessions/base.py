"""The session store interface, the snapshot record, and helpers for store implementers.

A *session* is identified by a session id (see :mod:`ctxlife.sessions.ids`) and has two records:

* the **snapshot** (:class:`Snapshot`): the working context the agent should see next, replaced as a
  whole on every save;
* the **raw history**: every message ever produced, append-only, one record per message, never
  rewritten.

Plus small per-session **blobs** (named texts, e.g. full tool outputs that were cut from the context)
and a per-session **lock** (mutual exclusion between processes or machines, e.g. so two workers never
compact the same session at once).

Writing a store
---------------
Subclass :class:`SessionStore`, implement every abstract method, and register a factory for your URL
scheme with :func:`ctxlife.sessions.register_store_scheme` (or the ``ctxlife.session_stores``
entry-point group). The docstrings below are the contract. Rules shared by all methods:

* Every method that takes a session id calls :func:`validate_session_id` on it *before* touching
  storage, so an unsafe id raises :class:`~ctxlife.errors.SessionIdError` and never creates anything.
* Storage failures raise :class:`~ctxlife.errors.StoreError` (or a subclass) naming the store and the
  session; never leak a driver exception or a password.
* Messages are JSON values (``dict`` with ``str`` keys, lists, str, int, float, bool, None); they must
  round-trip exactly: what ``read_raw`` returns compares equal to what ``append_raw`` received.
  Encode with :func:`json_bytes` / :func:`json_text` so every store writes the same bytes.
* Stores are safe to share between threads of one process. Log with
  ``ctxlife.events.Logger("ctxlife.sessions")`` (structlog, routed as ctxlife routes its events): counts
  and names only, never message contents.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import json
import math
import time
from collections.abc import Callable
from typing import Any, Self

from ctxlife.errors import CtxlifeError, StoreError
from ctxlife.sessions.ids import validate_session_id

__all__ = [
    "FORMAT_VERSION",
    "LockTimeoutError",
    "SessionInfo",
    "SessionStore",
    "Snapshot",
    "json_bytes",
    "json_text",
    "register_snapshot_migration",
    "validate_messages",
]

#: The snapshot format this version of ctxlife writes.
FORMAT_VERSION = 1

#: ``{from_version: fn}``; ``fn(doc)`` takes a decoded snapshot document of ``from_version`` and returns
#: one of ``from_version + 1``. Filled by :func:`register_snapshot_migration`.
_MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}

_SNAPSHOT_KEYS = ("format_version", "session_id", "raw_length", "updated_at", "meta", "messages")


class LockTimeoutError(StoreError):
    """:meth:`SessionStore.lock` could not get the session lock within its ``timeout``."""


def register_snapshot_migration(from_version: int, fn: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Register ``fn`` to upgrade a decoded snapshot document from ``from_version`` to the next one.

    :meth:`Snapshot.from_json` chains migrations until it reaches :data:`FORMAT_VERSION`. The function
    receives the whole decoded JSON object (with ``format_version == from_version``) and must return
    the upgraded object; it need not set ``format_version`` (the caller does).
    """
    if not isinstance(from_version, int) or from_version < 0:
        raise ValueError(f"from_version must be a non-negative int, got {from_version!r}")
    _MIGRATIONS[from_version] = fn


def _dumps(obj: Any, ascii_only: bool) -> str:
    return json.dumps(obj, ensure_ascii=ascii_only, allow_nan=False, separators=(",", ":"))


def json_text(obj: Any, *, what: str = "value") -> str:
    """Encode ``obj`` as compact JSON text that is always valid UTF-8 (single line, no raw newline).

    Non-ASCII text is kept as is (``ensure_ascii=False``) unless the value holds lone surrogates,
    which UTF-8 cannot carry; then the value falls back to ``\\u`` escapes, which decode to the same
    string. NaN/Infinity and non-JSON types raise :class:`StoreError` naming ``what``.
    """
    try:
        text = _dumps(obj, False)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} is not JSON-serializable: {exc}") from None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _dumps(obj, True)
    return text


def json_bytes(obj: Any, *, what: str = "value") -> bytes:
    """:func:`json_text` encoded as UTF-8 bytes."""
    try:
        return _dumps(obj, False).encode("utf-8")
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError: retry ASCII-only
        if isinstance(exc, UnicodeEncodeError):
            return _dumps(obj, True).encode("ascii")
        raise StoreError(f"{what} is not JSON-serializable: {exc}") from None


def validate_messages(session_id: str, messages: object) -> list[dict[str, Any]]:
    """Check that ``messages`` is a list of dicts (as :meth:`SessionStore.append_raw` requires)."""
    if not isinstance(messages, list):
        raise StoreError(f"messages for session {session_id!r} must be a list of dicts, got {type(messages).__name__}")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise StoreError(
                f"message {i} for session {session_id!r} must be a dict (an OpenAI-format "
                f"message), got {type(m).__name__}"
            )
    return messages


@dataclasses.dataclass(frozen=True, kw_only=True)
class Snapshot:
    """The saved working context of one session.

    Attributes:
        session_id: the session it belongs to (validated).
        messages: the OpenAI-format message dicts the agent should see next; JSON round-trips exactly.
        raw_length: how many raw-history messages existed when the snapshot was taken. Raw messages
            at index ``raw_length`` and later were produced after it.
        updated_at: when it was taken, seconds since the epoch (``time.time()``).
        meta: free-form JSON object for strategies (summary text, task summaries, ...).
        format_version: the format of the serialized record; :data:`FORMAT_VERSION` when created.

    Frozen: make a new snapshot (``dataclasses.replace``) rather than editing one. The lists and
    dicts inside are not copied; don't mutate them after saving if you compare later.
    """

    session_id: str
    messages: list[dict[str, Any]]
    raw_length: int
    updated_at: float = dataclasses.field(default_factory=time.time)
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        validate_session_id(self.session_id)
        validate_messages(self.session_id, self.messages)
        if isinstance(self.raw_length, bool) or not isinstance(self.raw_length, int) or (self.raw_length < 0):
            raise StoreError(
                f"snapshot of session {self.session_id!r}: raw_length must be an int >= 0, got {self.raw_length!r}"
            )
        if (
            isinstance(self.updated_at, bool)
            or not isinstance(self.updated_at, (int, float))
            or (not math.isfinite(self.updated_at))
        ):
            raise StoreError(
                f"snapshot of session {self.session_id!r}: updated_at must be a finite number "
                f"(time.time()), got {self.updated_at!r}"
            )
        if not isinstance(self.meta, dict):
            raise StoreError(
                f"snapshot of session {self.session_id!r}: meta must be a dict, got {type(self.meta).__name__}"
            )
        if self.format_version != FORMAT_VERSION:
            raise StoreError(
                f"snapshot of session {self.session_id!r}: format_version {self.format_version!r} "
                f"cannot be created by this ctxlife (it writes version {FORMAT_VERSION}); "
                f"use Snapshot.from_json to read and migrate older records"
            )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object that :meth:`to_json` writes (shares the message dicts, no copy)."""
        return {
            "format_version": self.format_version,
            "session_id": self.session_id,
            "raw_length": self.raw_length,
            "updated_at": self.updated_at,
            "meta": self.meta,
            "messages": self.messages,
        }

    def to_json(self) -> str:
        """Serialize to one line of compact UTF-8-safe JSON (see :func:`json_text`)."""
        return json_text(self.to_dict(), what=f"snapshot of session {self.session_id!r}")

    @classmethod
    def from_json(cls, data: str | bytes, *, source: str = "snapshot") -> Snapshot:
        """Parse a record written by :meth:`to_json`, migrating older format versions.

        Raises :class:`StoreError` (naming ``source``) for malformed JSON, missing or unknown fields,
        a version written by a newer ctxlife, or an old version with no registered migration.
        """
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise StoreError(f"{source} is not valid JSON ({exc}); the record is corrupt") from None
        return cls.from_dict(doc, source=source)

    @classmethod
    def from_dict(cls, doc: object, *, source: str = "snapshot") -> Snapshot:
        """Like :meth:`from_json` for an already decoded object."""
        if not isinstance(doc, dict):
            raise StoreError(f"{source} must be a JSON object, got {type(doc).__name__}")
        version = doc.get("format_version")
        if isinstance(version, bool) or not isinstance(version, int):
            raise StoreError(f"{source} has no integer 'format_version' field; the record is corrupt")
        current = FORMAT_VERSION  # read at call time (tests and future versions patch it)
        if version > current:
            raise StoreError(
                f"{source} has format_version {version}, but this ctxlife reads versions up to "
                f"{current}; it was written by a newer ctxlife. Upgrade ctxlife to read it"
            )
        while version < current:
            migrate = _MIGRATIONS.get(version)
            if migrate is None:
                raise StoreError(
                    f"{source} has format_version {version} and there is no migration from it to "
                    f"{version + 1} (this ctxlife writes {current}); the record cannot be read"
                )
            try:
                doc = dict(migrate(dict(doc)))
            except StoreError:
                raise
            except Exception as exc:  # a migration bug must not look like a driver error
                raise StoreError(f"migrating {source} from format_version {version} failed: {exc!r}") from exc
            version += 1
            doc["format_version"] = version
        missing = [k for k in _SNAPSHOT_KEYS if k not in doc]
        extra = sorted(k for k in doc if k not in _SNAPSHOT_KEYS)
        if missing or extra:
            raise StoreError(
                f"{source} (format_version {version}) has missing fields {missing} / unknown "
                f"fields {extra}; the record is corrupt"
            )
        try:
            return cls(**{k: doc[k] for k in _SNAPSHOT_KEYS})
        except (CtxlifeError, TypeError, ValueError) as exc:  # e.g. a tampered session id
            raise StoreError(f"{source} is invalid: {exc}") from None


@dataclasses.dataclass(frozen=True)
class SessionInfo:
    """One row of :meth:`SessionStore.list_sessions`.

    Attributes:
        session_id: the session id.
        message_count: number of readable raw-history messages.
        updated_at: the snapshot's ``updated_at``, or ``None`` if the session has no snapshot.
    """

    session_id: str
    message_count: int
    updated_at: float | None


class SessionStore(abc.ABC):
    """A place where sessions live. Implementations: file (default), sqlite, redis.

    Instances are safe to use from several threads; use one per process (or per thread pool) and
    :meth:`close` it when done (or use it as a context manager). Every method validates the session
    id first (:func:`validate_session_id`).
    """

    #: The URL the store was opened with, passwords removed (for messages and logs).
    url: str = ""

    # -- snapshot -------------------------------------------------------------------------------

    @abc.abstractmethod
    def load_snapshot(self, session_id: str) -> Snapshot | None:
        """Return the session's snapshot, or ``None`` if it has none.

        A stored record that cannot be parsed raises :class:`StoreError` (never returns ``None`` for
        a corrupt record: that would silently start the session over). Records of older format
        versions are migrated (:meth:`Snapshot.from_json`).
        """

    @abc.abstractmethod
    def save_snapshot(self, snapshot: Snapshot) -> None:
        """Replace the session's snapshot atomically.

        After a crash at any moment, :meth:`load_snapshot` returns either the old snapshot or the new
        one, never a mix or a partial record.
        """

    # -- raw history -----------------------------------------------------------------------------

    @abc.abstractmethod
    def append_raw(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Append ``messages`` (one record each) to the session's raw history.

        The batch is atomic with respect to other writers: records of two concurrent calls never
        interleave and none is lost. An empty list is a no-op. Appending never rewrites or reorders
        earlier records.
        """

    @abc.abstractmethod
    def read_raw(self, session_id: str, start: int = 0) -> list[dict[str, Any]]:
        """Return the raw-history messages from index ``start`` on (``[]`` for an unknown session).

        A torn last record (the process died in the middle of writing it) is skipped with a
        ``raw_torn_record_skipped`` warning; it never raises. Corruption anywhere else raises
        :class:`StoreError`.
        """

    @abc.abstractmethod
    def raw_length(self, session_id: str) -> int:
        """Return the number of messages :meth:`read_raw` would return with ``start=0``."""

    # -- sessions ----------------------------------------------------------------------------------

    @abc.abstractmethod
    def list_sessions(self) -> list[SessionInfo]:
        """Return every session that has a snapshot or raw history, sorted by session id."""

    @abc.abstractmethod
    def delete(self, session_id: str) -> bool:
        """Delete the session's snapshot, raw history and blobs; return whether anything existed.

        Deleting an unknown session is not an error. A lock currently held on the session is not
        broken.
        """

    @abc.abstractmethod
    def lock(
        self, session_id: str, ttl_seconds: float = 30.0, timeout: float | None = 10.0
    ) -> contextlib.AbstractContextManager[None]:
        """Return a context manager holding the session's exclusive lock while inside it.

        The lock excludes every other holder of the same session lock in any thread, process or (for
        networked stores) machine sharing the store. It is not re-entrant: taking it again while
        holding it waits (and times out).

        Args:
            ttl_seconds: the lock expires this long after it was taken, so a holder that died
                cannot block the session forever. A holder that runs longer than this may lose the
                lock to another (stores log ``session_lock_expired`` on release when that happened):
                pick a TTL longer than the work. Stores whose lock dies with its holder (the file
                store's ``flock``) may ignore it.
            timeout: seconds to wait for the lock; ``0`` tries once, ``None`` waits forever.

        Raises:
            LockTimeoutError: the lock was not free within ``timeout``.
        """

    # -- blobs ---------------------------------------------------------------------------------

    @abc.abstractmethod
    def put_blob(self, session_id: str, key: str, text: str) -> None:
        """Store ``text`` under ``key`` in the session (atomic replace).

        ``key`` follows the session-id rule (:func:`~ctxlife.sessions.ids.validate_blob_key`).
        """

    @abc.abstractmethod
    def get_blob(self, session_id: str, key: str) -> str | None:
        """Return the text stored under ``key`` in the session, or ``None``."""

    # -- lifecycle ---------------------------------------------------------------------------------

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections and file handles. Idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


def check_start(start: object) -> int:
    """Validate :meth:`SessionStore.read_raw`'s ``start`` argument."""
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise StoreError(f"read_raw start must be an int >= 0, got {start!r}")
    return start


def check_blob_text(session_id: str, key: str, text: object) -> bytes:
    """Validate a blob's text for :meth:`SessionStore.put_blob`; return it encoded as UTF-8."""
    if not isinstance(text, str):
        raise StoreError(f"blob {key!r} of session {session_id!r} must be a str, got {type(text).__name__}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise StoreError(
            f"blob {key!r} of session {session_id!r} is not valid Unicode text (lone surrogates); "
            f"encode binary data (e.g. base64) before storing it"
        ) from None


def check_lock_args(ttl_seconds: object, timeout: object) -> None:
    """Validate :meth:`SessionStore.lock`'s numeric arguments."""
    if (
        isinstance(ttl_seconds, bool)
        or not isinstance(ttl_seconds, (int, float))
        or not (ttl_seconds > 0 and math.isfinite(ttl_seconds))
    ):
        raise StoreError(f"lock ttl_seconds must be a finite number > 0, got {ttl_seconds!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0):
        raise StoreError(f"lock timeout must be a number >= 0 or None, got {timeout!r}")


def poll_until(try_once: Callable[[], bool], timeout: float | None, describe: str) -> None:
    """Call ``try_once`` with capped exponential back-off until it returns True or ``timeout`` ends.

    Raises :class:`LockTimeoutError` with ``describe`` in the message on timeout.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.002
    while True:
        if try_once():
            return
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            raise LockTimeoutError(
                f"could not take {describe} within {timeout} s: another worker holds it. "
                f"Retry later, raise the timeout, or check for a stuck worker"
            )
        sleep = delay if deadline is None else min(delay, max(0.0, deadline - now))
        time.sleep(sleep)
        delay = min(delay * 2, 0.05)


def parse_bool(value: str, name: str, url: str) -> bool:
    """Parse a URL query flag (``1/0/true/false/yes/no/on/off``)."""
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise StoreError(f"store URL {url!r}: option {name}={value!r} must be true or false")


def redact_url(url: str) -> str:
    """Return ``url`` with any password replaced by ``***`` (for messages and logs)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{user}:***@{host}" + (f":{port}" if port is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def parse_query(url: str, query: str, allowed: tuple[str, ...]) -> dict[str, str]:
    """Parse a store URL's query string, rejecting options not in ``allowed`` by name."""
    from urllib.parse import parse_qsl

    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise StoreError(f"store URL {redact_url(url)!r} has a malformed query string {query!r}") from None
    opts: dict[str, str] = {}
    for k, v in pairs:
        if k not in allowed:
            known = ", ".join(allowed) or "none"
            raise StoreError(f"store URL {redact_url(url)!r}: unknown option {k!r} (known options: {known})")
        opts[k] = v
    return opts
