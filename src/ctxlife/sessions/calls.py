"""Call records: exactly what each model call of a session was sent.

After every strategy ran on a call (``before_llm_call``), the host writes one small record of the list
it hands back (:meth:`CallLog.record`, through :meth:`SessionStore.append_call`), so
``ctxlife session show --context``, ``ctxlife replay --session`` and ``ctxlife report`` show what the
model saw (:func:`sent_calls`), not a re-run of the strategies with another summarizer.

A record (version 1) is a JSON object::

    {"v": 1, "at": 1733475600.0, "head": 42, "base": 7, "keep": 40,
     "m": [17, "9f3c...", [3, "a1b2..."], 18, ...],
     "t": {"9f3c...": {"role": "system", "content": "..."}},
     "tokens": [5200, 1900], "window": 8000, "budget": 4000, "model": "gpt-4o",
     "actions": [{"strategy": "llm_summary", "what": "summarized", ...}],
     "failures": [{"strategy": "recall", "node": "before_llm_call", "error": "StoreError: ..."}]}

``m`` holds one entry per message sent, in order:

* an int: the message is the recorded message of that slot (the ``seq`` that added it) as it stood
  at ``head`` (a later edit of the slot does not change what this call was sent);
* a string: a text key, for a message without a slot (a summary, a recall block, the system prompt,
  the bootstrap message): the message is ``t[key]`` of this or of an earlier record of the view;
* ``[slot, key]``: a recorded message sent in another form (the bootstrap section inside the first
  user turn): the form sent is ``t[key]``.

``base``/``keep``: the list starts with the first ``keep`` entries of record ``base`` (the writer's
previous record of the view), and ``m`` holds the rest: the usual call (the last list plus new
messages) writes its new entries only, so a record costs O(new), not O(conversation).

A text key is a hash of the message's canonical JSON, and ``t`` holds only the texts the writer has
not written to the view's log before: a summary repeated by 1,000 calls is stored once (once more by
each process that writes to the session after a restart). Messages are exact up to key order.
"""

from __future__ import annotations

import bisect
import hashlib
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxlife.messages import has_bootstrap_section
from ctxlife.sessions.base import SessionStore
from ctxlife.sessions.records import REMOVE, CallRecord, canonical_json

__all__ = ["CALL_FORMAT", "CallLog", "SentCall", "calls_for", "sent_calls", "text_key"]

#: The call-record format this version writes (the ``"v"`` field).
CALL_FORMAT = 1
#: Text keys a writer remembers per view (a text it forgot is written once more: harmless).
_KEYS_PER_VIEW = 256
#: Views a writer remembers keys for.
_VIEWS = 1024
#: What stands for a text no record holds (a log deleted under a writer that still knew its keys).
MISSING_TEXT = "[not in the call records]"


def text_key(message: Any) -> str:
    """The key of a message stored by text: BLAKE2b-64 of its canonical JSON (every key counted)."""
    return hashlib.blake2b(canonical_json(message).encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


@dataclass
class _Known:
    """What a writer knows of a view's log: the texts it wrote (keys), its last record and entries."""

    keys: OrderedDict[str, None] = field(default_factory=OrderedDict)
    last: int | None = None
    entries: list[Any] | None = None


def _common_prefix(a: list[Any], b: list[Any]) -> int:
    """How many leading entries two lists share (a binary search of C-level slice comparisons)."""
    low, high = 0, min(len(a), len(b))
    if a[:high] == b[:high]:
        return high
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


class CallLog:
    """Writes the call records of one store (get it with :func:`calls_for`); thread-safe."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._known: OrderedDict[tuple[str, str], _Known] = OrderedDict()

    def record(
        self,
        session_id: str,
        view: str,
        messages: Sequence[dict[str, Any]],
        slots: Sequence[int | None],
        *,
        head: int,
        details: dict[str, Any],
    ) -> int:
        """Write the record of one call: ``messages`` as sent, ``slots`` their recorded slots (None: not
        raw history), ``head`` the session's last sequence number the call saw, ``details`` the other
        fields (tokens, window, actions, failures). Returns the record's number.

        Costs one write and, per message, C-level list work only: the entries are the slots, with a
        text key where a message has none (found with ``list.index``), and only what differs from this
        writer's previous record of the view is written (``base``/``keep``).
        """
        with self._lock:
            known = self._known.get((session_id, view))
            written = set(known.keys) if known is not None else set()
            previous = (known.last, known.entries) if known is not None else (None, None)
        entries: list[Any] = list(slots)
        named: dict[str, Any] = {}  # every text the record names
        at = -1
        while True:
            try:
                at = entries.index(None, at + 1)
            except ValueError:
                break
            key = text_key(messages[at])
            named[key] = messages[at]
            entries[at] = key
        # The bootstrap section opens the first user turn of a list without a system prompt: that
        # recorded message was sent in another form (the raw history keeps it without the section).
        first = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
        if first is not None and isinstance(entries[first], int) and has_bootstrap_section(messages[first]):
            key = text_key(messages[first])
            named[key] = messages[first]
            entries[first] = [entries[first], key]
        texts = {key: m for key, m in named.items() if key not in written}
        doc: dict[str, Any] = {"v": CALL_FORMAT, "at": time.time(), "head": head}
        base, before = previous
        keep = _common_prefix(entries, before) if base is not None and before is not None else 0
        if keep:
            doc.update(base=base, keep=keep)
        doc["m"] = entries[keep:]
        if texts:
            doc["t"] = texts
        doc.update(details)
        n = self.store.append_call(session_id, view, doc)
        with self._lock:
            known = self._known.pop((session_id, view), None) or _Known()
            reset = known.last is not None and n <= known.last
            if reset:
                known.keys.clear()  # the log was deleted and started over: what it held is gone
            known.last, known.entries = n, entries
            for key in named:  # what it wrote, and what it names again, are the newest
                if key in texts or key in known.keys:
                    known.keys[key] = None
                    known.keys.move_to_end(key)
            while len(known.keys) > _KEYS_PER_VIEW:
                known.keys.popitem(last=False)
            self._known[(session_id, view)] = known
            while len(self._known) > _VIEWS:
                self._known.popitem(last=False)
        if reset and (keep or len(texts) < len(named)):
            # It named a record or texts of the deleted log: write the whole call into the record itself.
            whole = {k: v for k, v in doc.items() if k not in ("base", "keep")}
            self.store._rewrite_calls(session_id, {n: {**whole, "m": entries, "t": named}})
        return n

    def forget(self, session_id: str | None = None) -> None:
        """Forget which texts a session's log holds (every session: None): the next record of each
        view writes its texts again (after the session was deleted or erased)."""
        with self._lock:
            for key in [k for k in self._known if session_id is None or k[0] == session_id]:
                del self._known[key]


_LOGS: weakref.WeakKeyDictionary[SessionStore, CallLog] = weakref.WeakKeyDictionary()
_LOGS_LOCK = threading.Lock()


def calls_for(store: SessionStore) -> CallLog:
    """The :class:`CallLog` of ``store`` (one per store object, shared by its hosts)."""
    with _LOGS_LOCK:
        found = _LOGS.get(store)
        if found is None:
            found = _LOGS[store] = CallLog(store)
        return found


# -- reading ----------------------------------------------------------------------------------------


@dataclass
class SentCall:
    """One recorded model call, resolved (:func:`sent_calls`).

    Attributes:
        number: its place among the view's calls (1, 2, 3, ...).
        record: the stored record (its ``n`` in the session's log, its view and document).
        messages: exactly the list the model was sent (up to key order).
        slots: the recorded slot of each message (None: not raw history: a summary, a recall block,
            the system prompt).
        missing: how many messages no record holds the text of (shown as :data:`MISSING_TEXT`).
    """

    number: int
    record: CallRecord
    messages: list[dict[str, Any]]
    slots: list[int | None]
    missing: int = 0

    @property
    def doc(self) -> dict[str, Any]:
        return self.record.doc

    @property
    def head(self) -> int:
        return int(self.doc.get("head") or 0)

    @property
    def actions(self) -> list[dict[str, Any]]:
        return [a for a in self.doc.get("actions") or () if isinstance(a, dict)]

    @property
    def failures(self) -> list[dict[str, Any]]:
        return [f for f in self.doc.get("failures") or () if isinstance(f, dict)]

    @property
    def tokens(self) -> tuple[int, int]:
        found = self.doc.get("tokens")
        if isinstance(found, list) and len(found) == 2 and all(type(t) is int for t in found):
            return found[0], found[1]
        return 0, 0


def sent_calls(store: SessionStore, session_id: str, view: str = "") -> list[SentCall]:
    """The recorded calls of a session's view, each with the exact list it sent ([] when the session
    has no call records: recorded before ctxlife kept them, or by a caller that records nothing)."""
    calls = store.read_calls(session_id, view)
    if not calls:
        return []
    versions: dict[int, tuple[list[int], list[dict[str, Any]]]] = {}
    for r in store.read_records(session_id, strict=False):
        if r.op == REMOVE:
            continue
        seqs, held = versions.setdefault(r.slot, ([], []))
        seqs.append(r.seq)
        held.append(r.message)
    texts: dict[str, Any] = {}
    for call in calls:  # keys are content hashes: any record's copy is the text
        found = call.doc.get("t")
        if isinstance(found, dict):
            texts.update(found)
    out = []
    resolved: dict[int, list[Any]] = {}  # the entries of each record read, by its number
    for number, call in enumerate(calls, 1):
        head = int(call.doc.get("head") or 0)
        entries = list(call.doc.get("m") or ())
        base, keep = call.doc.get("base"), call.doc.get("keep")
        if type(base) is int and type(keep) is int and keep > 0:
            prior = resolved.get(base, [])
            entries = prior[:keep] + [None] * (keep - len(prior)) + entries  # None: a record not found
        resolved[call.n] = entries
        messages: list[dict[str, Any]] = []
        slots: list[int | None] = []
        missing = 0
        for entry in entries:
            slot, key = (entry, None) if isinstance(entry, int) else (None, entry)
            if isinstance(entry, list) and len(entry) == 2:
                slot, key = entry
            message = None
            if key is not None:
                message = texts.get(key)
            elif slot is not None and slot in versions:
                seqs, kept = versions[slot]
                at = bisect.bisect_right(seqs, head) - 1 if head else len(seqs) - 1
                message = kept[max(at, 0)]
            if not isinstance(message, dict):
                missing += 1
                message = {"role": "user", "content": MISSING_TEXT}
            messages.append(message)
            slots.append(slot if isinstance(slot, int) else None)
        out.append(SentCall(number, call, messages, slots, missing))
    return out
