"""Connecting the PostgreSQL store: its URL's options, and one connection pool per process and database.

A store URL is libpq's (``postgres://user@host:port/dbname``) plus ctxlife's options (:data:`OPTIONS`),
which :func:`split_options` takes out. Store objects of one process on one database share a pool
(:class:`SharedPool`, refcounted, dropped in a forked child).
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode, urlunsplit

from ctxlife.errors import StoreError
from ctxlife.sessions.urls import split_query

__all__ = ["OPTIONS", "SCHEMA_NAME", "SharedPool", "number_option", "split_options"]

OPTIONS = ("schema", "ttl", "pool_min", "pool_max", "pool_idle", "pool_lifetime", "pool_timeout", "pgbouncer")
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


# -- one pool per process and database -------------------------------------------------------------


class SharedPool:
    """A ``ConnectionPool`` shared by the store objects of one process on one database (refcounted)."""

    _lock = threading.Lock()
    _pools: dict[tuple[int, str, tuple[Any, ...]], SharedPool] = {}

    def __init__(self, pool: Any, key: tuple[int, str, tuple[Any, ...]]) -> None:
        self.pool = pool
        self.key = key
        self.users = 0
        self.ready: set[str] = set()  # schemas known to be at SCHEMA_VERSION (checked or created)
        self.last_sweep: dict[str, float] = {}

    @classmethod
    def acquire(cls, conninfo: str, settings: tuple[Any, ...], make: Callable[[], Any]) -> SharedPool:
        key = (os.getpid(), conninfo, settings)
        with cls._lock:
            for k in [k for k in cls._pools if k[0] != key[0]]:
                del cls._pools[k]  # a parent's pools (after fork): its threads are not in this process
            shared = cls._pools.get(key)
            if shared is None:
                shared = cls._pools[key] = cls(make(), key)
            shared.users += 1
            return shared

    def release(self) -> None:
        with self._lock:
            self.users -= 1
            if self.users > 0 or self._pools.get(self.key) is not self:
                return
            del self._pools[self.key]
        if self.key[0] == os.getpid():
            self.pool.close()


def split_options(url: str, shown: str) -> tuple[str, dict[str, str]]:
    """Remove ctxlife's options from ``url``; return the libpq URL and them."""
    parts, rest, ours = split_query(url, OPTIONS, "postgres")
    if parts.scheme.lower() not in ("postgres", "postgresql"):
        raise StoreError(f"not a postgres store URL: {shown!r} (expected postgres://user@host:port/dbname)")
    if not any(k == "connect_timeout" for k, _ in rest):
        rest.append(("connect_timeout", "5"))  # an unreachable database fails a call, never hangs it
    query = urlencode(rest, quote_via=quote)  # a space as %20: libpq reads "+" as a plus
    return urlunsplit(parts._replace(scheme="postgresql", query=query)), ours


def number_option(opts: dict[str, str], name: str, default: float, shown: str, *, whole: bool = False) -> float:
    raw = opts.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        value = -1
    if not (value >= 0 and math.isfinite(value)):
        kind = "a whole number >= 0" if whole else "a number of seconds >= 0"
        raise StoreError(f"postgres store {shown}: {name}={raw!r} must be {kind}")
    return value
