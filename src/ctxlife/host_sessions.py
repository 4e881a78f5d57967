"""What a host keeps per session between calls, the per-session locks its calls take, and their LRU.

Calls for one session (every view of it) run one at a time under the session's lock; calls for
different sessions run at once, each on its own :class:`SessionState`. A shared host (the LangChain
middleware, one per process) serves every conversation: past :data:`SESSIONS`, the least recently
used idle session is dropped, and its next call reads the store as a fresh host would.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ctxlife import messages as message_model
from ctxlife.contexts import Action

__all__ = ["PREVIOUS_LISTS", "SESSIONS", "Held", "SessionState", "SessionTable"]

#: Views of a session whose last list a host keeps: a session has one view, or one per agent and
#: task of a crew; a view it forgot costs one full check on its next call.
PREVIOUS_LISTS = 64
#: Sessions a host keeps state for (see :class:`SessionState`; the recorder's views go with them). A
#: shared host (the LangChain middleware, one per process) serves every conversation: the least
#: recently used idle one past this bound is dropped, and its next call reads the store as a fresh
#: host would (one read of its records). A finished session of six calls costs about 25 kB when
#: kept (benchmarks/bench_host_memory.py --unbounded: +45 MB of RSS over 1,800 sessions), so the
#: bound keeps that under ~7 MB (with it: +0.5 MB over the last 1,600 of 2,000 sessions), while
#: 256 conversations active at once all stay warm.
SESSIONS = 256


@dataclass(eq=False)
class SessionState:
    """What a host keeps for one session between calls, and the lock its calls take.

    Calls for one session (every view of it) run one at a time under ``lock``; calls for different
    sessions run at once, each on its own state. The whole of it is dropped when the session
    leaves the host's LRU (:data:`SESSIONS`), never while ``users`` > 0.
    """

    lock: threading.RLock = field(default_factory=threading.RLock)
    users: int = 0  # calls holding or waiting for the lock (and an eviction in progress)
    calls: int = 0  # model calls since the run started (the next call's ctx.call_index)
    views_in_run: set[str] = field(default_factory=set)  # views called since the run started
    anthropic: bool = False  # the session showed Anthropic blocks (see format_of)
    state: dict[str, dict[str, Any]] = field(default_factory=dict)  # each strategy's ctx.state
    bootstrap: dict[str | None, str] = field(default_factory=dict)  # the bootstrap text per agent role
    bootstrap_actions: dict[str | None, list[Action]] = field(default_factory=dict)
    task_started: set[str | None] = field(default_factory=set)  # tasks whose first model call is next
    # The list handed back at the end of the last call of each view, most recent last: the next
    # list is compared with it once, and only what differs is checked, counted, diffed.
    previous: OrderedDict[str, message_model.PreviousList] = field(default_factory=OrderedDict)

    def format_of(self, messages: list[dict[str, Any]]) -> str:
        """The detected format of the session's ``messages`` (``ctx.message_format``), with the lock held:
        once the session showed Anthropic blocks, its plain lists are taken as Anthropic too."""
        found = message_model.list_format(messages)
        if found == message_model.ANTHROPIC:
            self.anthropic = True
            return found
        openai_only = any(m.get("role") in ("tool", "function", "developer") or m.get("tool_calls") for m in messages)
        return message_model.ANTHROPIC if self.anthropic and not openai_only else found

    def previous_list(self, view: str) -> message_model.PreviousList:
        """The list handed back at the end of the last call of this view of the session (kept for
        its :data:`PREVIOUS_LISTS` most recent views; call with the session's lock held)."""
        kept = self.previous
        found = kept.pop(view, None)
        if found is None:
            found = message_model.PreviousList()
            if len(kept) >= PREVIOUS_LISTS:
                kept.popitem(last=False)
        kept[view] = found
        return found


class Held:
    """A session's lock held, with its state (see :meth:`SessionTable.locked`); a class, not a
    generator: it is taken on every call."""

    __slots__ = ("entry", "session", "table")

    def __init__(self, table: SessionTable, session: str | None) -> None:
        self.table = table
        self.session = session

    def __enter__(self) -> SessionState:
        table, session = self.table, self.session
        with table.lock:
            entry = table.sessions.get(session)
            if entry is None:
                entry = table.sessions[session] = SessionState()
            else:
                table.sessions.move_to_end(session)
            entry.users += 1
        try:
            entry.lock.acquire()
        except BaseException:
            with table.lock:
                entry.users -= 1
            raise
        self.entry = entry
        return entry

    def __exit__(self, *exc_info: object) -> None:
        table, entry = self.table, self.entry
        entry.lock.release()
        with table.lock:
            entry.users -= 1
            victim = table.idle_session()
        if victim is not None:
            table.evict(*victim)


class SessionTable:
    """A host's sessions: their state and their locks, least recently used first.

    ``drop_idle(session)`` forgets what else is kept of a session dropped from the table (the store
    recorder's views of it); it runs with the session's lock held.
    """

    def __init__(self, drop_idle: Callable[[str], None]) -> None:
        self.sessions: OrderedDict[str | None, SessionState] = OrderedDict()
        self.lock = threading.Lock()  # guards the table only: held for a lookup, never a call
        self._drop_idle = drop_idle

    def __len__(self) -> int:
        return len(self.sessions)

    def locked(self, session: str | None) -> Held:
        """``with table.locked(session) as state``: hold the session's lock (re-entrant) and get its
        state; the other sessions' calls go on. On the way out, a session past the LRU's bound that
        nobody uses is dropped."""
        return Held(self, session)

    def states(self) -> list[SessionState]:
        """Every session's state, now (their locks not held)."""
        with self.lock:
            return list(self.sessions.values())

    def forget_lists(self, session: str | None) -> None:
        """Drop the copies kept of a session's last lists (every session's: None)."""
        if session is not None:
            with self.locked(session) as state:
                state.previous.clear()
            return
        for state in self.states():
            with state.lock:
                state.previous.clear()

    def idle_session(self) -> tuple[str | None, SessionState] | None:
        """Over :data:`SESSIONS`: the least recently used session nobody uses, reserved for
        :meth:`evict` (call with the table's lock held)."""
        if len(self.sessions) <= SESSIONS:
            return None
        for key, entry in self.sessions.items():
            if entry.users == 0:
                entry.users += 1  # a call arriving meanwhile waits for the drop, then starts fresh
                return key, entry
        return None

    def evict(self, session: str | None, entry: SessionState) -> None:
        """Drop what the host and the store's recorder keep of an idle session: its next call
        reads the store as a fresh host would. Messages still waiting for the store are kept."""
        try:
            with entry.lock:
                if session is not None:
                    self._drop_idle(session)
                fresh = SessionState()
                for kept in dataclasses.fields(SessionState):
                    if kept.name not in ("lock", "users"):  # a call arriving meanwhile starts fresh
                        setattr(entry, kept.name, getattr(fresh, kept.name))
        finally:
            with self.lock:
                entry.users -= 1
                if entry.users == 0 and self.sessions.get(session) is entry:
                    del self.sessions[session]
