"""Session stores: where ctxlife keeps each session's snapshot, raw history, blobs and lock.

Open a store by URL::

    from ctxlife.sessions import open_store

    with open_store("file://workspace/sessions") as store:       # default, embedded
        snap = store.load_snapshot("u42")

Built-in schemes: ``file`` (:mod:`ctxlife.sessions.file`), ``sqlite``
(:mod:`ctxlife.sessions.sqlite`), ``redis`` and ``rediss`` (:mod:`ctxlife.sessions.redis`). A third
party adds a scheme with :func:`register_store_scheme`, or without any code in the host program
through the ``ctxlife.session_stores`` entry-point group (entry point name = scheme, value = a
factory ``f(url) -> SessionStore``, usually the store class's ``from_url``).

Reading the raw history incrementally (for an index, a dashboard, an export)::

    with open_store(url) as store:
        seen = 0
        for record in store.read_records("u42", after_seq=seen):   # RawRecord(seq, message, ...)
            index(record.seq, record.view, record.message)
            seen = record.seq

Implementing a store: subclass :class:`SessionStore`; its docstrings are the contract.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

from ctxlife.errors import StoreError
from ctxlife.sessions.base import (
    FORMAT_VERSION,
    AppendConflictError,
    LockTimeoutError,
    RawRecord,
    SessionInfo,
    SessionStore,
    Snapshot,
    canonical_json,
    fingerprint,
    register_snapshot_migration,
)
from ctxlife.sessions.ids import MAX_SESSION_ID_LENGTH, validate_session_id, validate_view, view_id

__all__ = [
    "DEFAULT_STORE_URL",
    "ENTRY_POINT_GROUP",
    "FORMAT_VERSION",
    "MAX_SESSION_ID_LENGTH",
    "AppendConflictError",
    "LockTimeoutError",
    "RawRecord",
    "SessionInfo",
    "SessionStore",
    "Snapshot",
    "StoreFactory",
    "canonical_json",
    "fingerprint",
    "open_store",
    "register_snapshot_migration",
    "register_store_scheme",
    "store_schemes",
    "validate_session_id",
    "validate_view",
    "view_id",
]

#: The store used when neither the command line nor the config names one.
DEFAULT_STORE_URL = "file://workspace/sessions"

#: Entry-point group through which installed packages provide store schemes.
ENTRY_POINT_GROUP = "ctxlife.session_stores"

StoreFactory = Callable[[str], SessionStore]

_SCHEME_RE = re.compile(r"[a-z][a-z0-9+.-]*")


def _file_factory(url: str) -> SessionStore:
    from ctxlife.sessions.file import FileStore

    return FileStore.from_url(url)


def _sqlite_factory(url: str) -> SessionStore:
    from ctxlife.sessions.sqlite import SQLiteStore

    return SQLiteStore.from_url(url)


def _redis_factory(url: str) -> SessionStore:
    from ctxlife.sessions.redis import RedisStore

    return RedisStore.from_url(url)


_factories: dict[str, StoreFactory] = {
    "file": _file_factory,
    "sqlite": _sqlite_factory,
    "redis": _redis_factory,
    "rediss": _redis_factory,
}
_factories_lock = threading.Lock()


def register_store_scheme(scheme: str, factory: StoreFactory, *, replace: bool = False) -> None:
    """Make :func:`open_store` open URLs of ``scheme`` with ``factory(url)``.

    ``factory`` receives the whole URL and returns a :class:`SessionStore`. Registering a scheme that
    is already registered (built-in ones included) raises :class:`StoreError` unless ``replace`` is
    true, so two packages cannot silently take over each other's scheme.
    """
    if not isinstance(scheme, str) or _SCHEME_RE.fullmatch(scheme) is None:
        raise StoreError(
            f"invalid store scheme {scheme!r}: use lowercase letters, digits, '+', '-' or '.', "
            f"starting with a letter (e.g. 's3' or 'my-store')"
        )
    if not callable(factory):
        raise StoreError(f"the factory for store scheme {scheme!r} must be callable, got {factory!r}")
    with _factories_lock:
        if scheme in _factories and not replace:
            raise StoreError(f"store scheme {scheme!r} is already registered; pass replace=True to override it")
        _factories[scheme] = factory


def _entry_point_factory(scheme: str) -> StoreFactory | None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == scheme:
            try:
                factory: StoreFactory = ep.load()
            except Exception as exc:
                raise StoreError(f"store scheme {scheme!r}: loading entry point {ep.value!r} failed: {exc!r}") from exc
            with _factories_lock:
                _factories.setdefault(scheme, factory)
            return factory
    return None


def store_schemes() -> list[str]:
    """The registered store schemes (built-in, registered, and installed entry points)."""
    from importlib.metadata import entry_points

    names = set(_factories)
    names.update(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
    return sorted(names)


def open_store(url: str) -> SessionStore:
    """Open the session store named by ``url`` (``scheme://...``).

    Raises :class:`StoreError` for a URL without a scheme or with an unknown one (the message lists
    the known schemes), and whatever the store raises when it cannot be opened.
    """
    if not isinstance(url, str) or "://" not in url:
        raise StoreError(
            f"session store URL {url!r} has no scheme; use e.g. {DEFAULT_STORE_URL!r}, "
            f"'sqlite:///sessions.db' or 'redis://127.0.0.1:6379/0'"
        )
    scheme = url.split("://", 1)[0].lower()
    with _factories_lock:
        factory = _factories.get(scheme)
    if factory is None:
        factory = _entry_point_factory(scheme)
    if factory is None:
        raise StoreError(
            f"unknown session store scheme {scheme!r} in {url.split('://', 1)[0]}://...; known "
            f"schemes: {', '.join(store_schemes())}. Install a package that provides it (entry-point "
            f"group {ENTRY_POINT_GROUP!r}) or call register_store_scheme()"
        )
    store = factory(url)
    if not isinstance(store, SessionStore):
        raise StoreError(f"the factory for store scheme {scheme!r} returned {type(store).__name__}, not a SessionStore")
    return store
