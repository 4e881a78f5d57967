"""Session stores: where ctxlife keeps each session's snapshot, raw history, blobs and lock.

Opening a store by URL (:func:`open_store`), the built-in schemes and their options, reading the raw
history incrementally, adding a scheme (:func:`register_store_scheme` or the ``ctxlife.session_stores``
entry-point group): docs/sessions.md, "Stores" and "Writing a store".
"""

from __future__ import annotations

from collections.abc import Callable

from ctxlife.errors import StoreError
from ctxlife.messages.inserted import MARK_KEYS
from ctxlife.registry import Registry
from ctxlife.sessions.base import AppendConflictError, LockTimeoutError, SessionInfo, SessionStore
from ctxlife.sessions.ids import (
    MAX_SESSION_ID_LENGTH,
    SessionKey,
    original_session_id,
    session_key,
    validate_session_id,
    validate_view,
    view_id,
)
from ctxlife.sessions.records import (
    ADD,
    REMOVE,
    REPLACE,
    Event,
    RawRecord,
    RecordSlot,
    canonical_json,
    fingerprint,
    materialize,
)
from ctxlife.sessions.snapshot import FORMAT_VERSION, Snapshot, register_snapshot_migration

__all__ = [
    "ADD",
    "REMOVE",
    "REPLACE",
    "DEFAULT_STORE_URL",
    "ENTRY_POINT_GROUP",
    "FORMAT_VERSION",
    "MAX_SESSION_ID_LENGTH",
    "AppendConflictError",
    "Event",
    "LockTimeoutError",
    "RawRecord",
    "RecordSlot",
    "SessionInfo",
    "SessionKey",
    "SessionStore",
    "Snapshot",
    "StoreFactory",
    "canonical_json",
    "fingerprint",
    "materialize",
    "open_store",
    "original_session_id",
    "register_snapshot_migration",
    "register_store_scheme",
    "session_key",
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


def _check_factory(scheme: str, factory: object) -> str | None:
    return None if callable(factory) else f"the factory must be callable, got {factory!r}"


#: The store schemes: ctxlife's own (``file``, ``sqlite``, ``redis``, ``rediss``, ``postgres``) and installed
#: packages' are entry points of ``ctxlife.session_stores``; see :mod:`ctxlife.registry`.
REGISTRY: Registry[StoreFactory] = Registry(
    "session store scheme",
    ENTRY_POINT_GROUP,
    check=_check_factory,
    unknown_error=StoreError,
    name_pattern=r"[a-z][a-z0-9+.-]*",
    name_rule="lowercase letters, digits, '+', '-' or '.', starting with a letter (e.g. 's3' or 'my-store')",
)


def register_store_scheme(scheme: str, factory: StoreFactory, *, replace: bool = False) -> None:
    """Make :func:`open_store` open URLs of ``scheme`` with ``factory(url)``.

    ``factory`` receives the whole URL and returns a :class:`SessionStore`. Registering a scheme that
    is already taken (built-in ones included) raises :class:`~ctxlife.errors.PluginConflictError` unless
    ``replace`` is true, so two packages cannot silently take over each other's scheme.
    """
    REGISTRY.register(scheme, factory, replace=replace)


def store_schemes() -> list[str]:
    """The registered store schemes (built-in, registered, and installed entry points)."""
    return REGISTRY.names()


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
    if scheme not in REGISTRY:
        REGISTRY.refresh()  # a package installed since the entry points were read?
    if scheme not in REGISTRY:
        raise StoreError(
            f"unknown session store scheme {scheme!r} in {url.split('://', 1)[0]}://...; known "
            f"schemes: {', '.join(store_schemes())}. Install a package that provides it (entry-point "
            f"group {ENTRY_POINT_GROUP!r}) or call register_store_scheme()"
        )
    store = REGISTRY.get(scheme)(url)
    if not isinstance(store, SessionStore):
        raise StoreError(f"the factory for store scheme {scheme!r} returned {type(store).__name__}, not a SessionStore")
    MARK_KEYS.add_source(store)  # marks keyed with its secret are recognised in this process
    return store
