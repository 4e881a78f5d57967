"""A delegating, fault-injecting wrapper around a real session store (file, SQLite, Redis).

Every method the recorder, the restore and the strategies call goes through :class:`FaultyStore`,
which forwards it to the real store unless the shared :class:`FaultPlan` says the method is broken:

* ``"refused"`` -- the call raises before the real store sees it (a full disk, a refused connection);
* ``"landed"`` -- the real store does the write, then the call raises as if the reply was lost (a
  connection dropped after the server wrote; an fsync error after the rename). The caller is told
  "failed" for a write that is in the store.

The plan counts every call and every failure it injected per method, so a test can assert the
faults really happened (a wrapper that overrides the wrong method fails nothing, silently).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from ctxlife import sessions
from ctxlife.errors import StoreError
from ctxlife.sessions.base import SessionStore
from ctxlife.sessions.records import Event, RawRecord
from ctxlife.sessions.snapshot import Snapshot
from delegating_store import DelegatingStore

#: The store methods the recorder, snapshot_restore, llm_summary, tool_output and task_scope call.
METHODS = ("append", "read_records", "head", "load_snapshot", "save_snapshot", "put_blob", "get_blob", "lock")
WRITES = ("append", "save_snapshot", "put_blob")
CAUSE = os.strerror(errno.ENOSPC)  # "No space left on device": the error text the tests look for


class FaultPlan:
    """Which methods fail, how, and what happened (shared by every wrapper a test opens)."""

    def __init__(self) -> None:
        self.broken: dict[str, str] = {}
        self.calls: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.landed: Counter[str] = Counter()  # writes that reached the store but were reported failed

    def break_(self, *methods: str, mode: str = "refused") -> None:
        assert mode in ("refused", "landed"), mode
        for method in methods:
            assert method in METHODS, method
            self.broken[method] = mode

    def heal(self) -> None:
        self.broken.clear()

    @contextlib.contextmanager
    def outage(self, *methods: str, mode: str = "refused") -> Iterator[None]:
        self.break_(*methods, mode=mode)
        try:
            yield
        finally:
            self.heal()

    def _enter(self, method: str, store: SessionStore) -> str | None:
        self.calls[method] += 1
        return self.broken.get(method)

    def _fail(self, method: str, store: SessionStore, *, landed: bool = False) -> StoreError:
        self.failed[method] += 1
        if landed:
            self.landed[method] += 1
            return StoreError(f"{store.url}: {method}: connection lost after the write was sent ({CAUSE}?)")
        return StoreError(f"{store.url}: {method}: cannot write: {CAUSE}")


class FaultyStore(DelegatingStore):
    """Forwards to ``inner`` (a real store), failing the methods ``plan`` marks as broken."""

    def __init__(self, inner: SessionStore, plan: FaultPlan) -> None:
        super().__init__(inner)
        self.plan = plan
        self.url = f"faulty+{inner.url}"

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        mode = self.plan._enter(method, self)
        if mode == "refused":
            raise self.plan._fail(method, self)
        result = getattr(self.inner, method)(*args, **kwargs)
        if mode == "landed":
            raise self.plan._fail(method, self, landed=method in WRITES)
        return result

    def load_snapshot(self, session_id: str, view: str = "") -> Snapshot | None:
        return self._call("load_snapshot", session_id, view)  # type: ignore[no-any-return]

    def save_snapshot(self, snapshot: Snapshot) -> None:
        self._call("save_snapshot", snapshot)

    def append(
        self,
        session_id: str,
        messages: list[dict[str, Any]],
        *,
        view: str = "",
        if_head: int | None = None,
        fingerprints: list[str] | None = None,
    ) -> list[RawRecord]:
        return self._call(  # type: ignore[no-any-return]
            "append", session_id, messages, view=view, if_head=if_head, fingerprints=fingerprints
        )

    def read_records(
        self, session_id: str, after_seq: int = 0, *, view: str | None = None, strict: bool = True
    ) -> list[RawRecord]:
        return self._call("read_records", session_id, after_seq, view=view, strict=strict)  # type: ignore[no-any-return]

    def head(self, session_id: str) -> int:
        return self._call("head", session_id)  # type: ignore[no-any-return]

    def append_events(
        self, session_id: str, events: list[Event], *, view: str = "", if_head: int | None = None
    ) -> list[RawRecord]:
        return self.inner.append_events(session_id, events, view=view, if_head=if_head)

    def erase(self, session_id: str, slots: Iterable[int]) -> list[int]:
        return self.inner.erase(session_id, slots)

    def erase_matching(self, session_id: str, pattern: str | re.Pattern[str]) -> list[int]:
        return self.inner.erase_matching(session_id, pattern)

    @contextlib.contextmanager
    def lock(self, session_id: str, ttl_seconds: float = 30.0, timeout: float | None = 10.0) -> Iterator[None]:
        if self.plan._enter("lock", self):
            raise self.plan._fail("lock", self)
        with self.inner.lock(session_id, ttl_seconds=ttl_seconds, timeout=timeout):
            yield

    def put_blob(self, session_id: str, key: str, text: str) -> None:
        self._call("put_blob", session_id, key, text)

    def get_blob(self, session_id: str, key: str) -> str | None:
        return self._call("get_blob", session_id, key)  # type: ignore[no-any-return]


_ids = itertools.count()


@contextlib.contextmanager
def faulty_scheme(inner_url: str, plan: FaultPlan) -> Iterator[str]:
    """A store URL that opens ``FaultyStore(open_store(inner_url), plan)`` (a new wrapper and a new
    real store per open, like a new process would)."""
    scheme = f"faulty{next(_ids)}"
    with sessions.REGISTRY.registered(scheme, lambda url: FaultyStore(sessions.open_store(inner_url), plan)):
        yield f"{scheme}://{inner_url}"
