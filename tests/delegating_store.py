"""One delegating test store: forwards the store contract's abstract methods to a real store.

Tests subclass it and override only what they change (fail, count, refuse); every other method of
:class:`SessionStore` keeps its default (built on the abstract ones), as in a third party's store.
Importable from every test folder: ``tests/`` is on ``sys.path`` through its ``conftest.py``.
"""

from __future__ import annotations

from typing import Any

from ctxlife.sessions.base import SessionInfo, SessionStore
from ctxlife.sessions.records import RawRecord
from ctxlife.sessions.snapshot import Snapshot


class DelegatingStore(SessionStore):
    """Forwards the abstract methods (and ``close``) to ``inner``, a real store."""

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner
        self.url = inner.url

    def load_snapshot(self, session_id: str, view: str = "") -> Snapshot | None:
        return self.inner.load_snapshot(session_id, view)

    def save_snapshot(self, snapshot: Snapshot) -> None:
        self.inner.save_snapshot(snapshot)

    def append(self, session_id: str, messages: list[dict[str, Any]], **kwargs: Any) -> list[RawRecord]:
        return self.inner.append(session_id, messages, **kwargs)

    def read_records(self, session_id: str, after_seq: int = 0, **kwargs: Any) -> list[RawRecord]:
        return self.inner.read_records(session_id, after_seq, **kwargs)

    def head(self, session_id: str) -> int:
        return self.inner.head(session_id)

    def list_sessions(self) -> list[SessionInfo]:
        return self.inner.list_sessions()

    def delete(self, session_id: str) -> bool:
        return self.inner.delete(session_id)

    def lock(self, session_id: str, ttl_seconds: float = 30.0, timeout: float | None = 10.0) -> Any:
        return self.inner.lock(session_id, ttl_seconds, timeout)

    def put_blob(self, session_id: str, key: str, text: str) -> None:
        self.inner.put_blob(session_id, key, text)

    def get_blob(self, session_id: str, key: str) -> str | None:
        return self.inner.get_blob(session_id, key)

    def close(self) -> None:
        self.inner.close()
