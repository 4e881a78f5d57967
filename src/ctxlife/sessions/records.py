"""A session's raw history as every store keeps it: the records, the event log, their stored form.

The history is an append-only event log, one :class:`RawRecord` per record: ``add`` (a new message),
``replace`` (a slot's message changed) and ``remove`` (a slot dropped); :func:`materialize` turns a
view's records into its current messages. A record's identity for alignment is its
:func:`fingerprint` (a hash of the message's canonical JSON). Every store encodes messages with
:func:`prepare_messages` / :func:`record_json` and decodes them with :func:`decode_record`, so all
stores write the same bytes and read the same records. Erased messages leave a tombstone
(:func:`erased_message`) and a keyed mark (:class:`ErasedMessages`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import hashlib
import hmac
import json
import math
from collections.abc import Iterable, Iterator
from itertools import repeat
from typing import Any, NamedTuple

from ctxlife.errors import StoreError
from ctxlife.messages import has_calls, is_tool_result, split_units

__all__ = [
    "ADD",
    "ERASED_KEY",
    "ERASED_TEXT",
    "EVENT_KEY",
    "ErasedMessages",
    "REMOVE",
    "REPLACE",
    "Event",
    "materialize",
    "TRANSPORT_KEYS",
    "CallRecord",
    "PreparedMessage",
    "RawRecord",
    "RecordSlot",
    "ViewRows",
    "canonical_json",
    "decode_plain",
    "decode_record",
    "fingerprint",
    "json_bytes",
    "json_safe",
    "json_text",
    "prepare_messages",
    "record_json",
    "token_count",
    "token_pairs",
    "validate_messages",
]

# -- JSON ------------------------------------------------------------------------------------------


# Built once: json.dumps with any argument builds a new encoder per call (2-6 us of a store's append).
_COMPACT = {
    ascii_only: json.JSONEncoder(ensure_ascii=ascii_only, allow_nan=False, separators=(",", ":"))
    for ascii_only in (False, True)
}
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _dumps(obj: Any, ascii_only: bool) -> str:
    return _COMPACT[ascii_only].encode(obj)


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
    if text.isascii():  # (no copy to make: only a non-ASCII text can hold a lone surrogate)
        return text
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


def json_safe(value: Any, problems: list[str] | None = None, path: str = "$") -> Any:
    """A JSON-encodable copy of ``value``; what had to change is appended to ``problems``.

    NaN and infinities become the strings ``"NaN"``/``"Infinity"``/``"-Infinity"``, bytes are decoded
    as UTF-8 (invalid bytes replaced), non-string keys become strings, tuples become lists and any
    other object becomes ``str(obj)``. Values that are already JSON come back unchanged (equal).
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        if problems is not None:
            problems.append(f"{path}: non-finite number {value!r}")
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = k if isinstance(k, str) else str(k)
            if key is not k and problems is not None:
                problems.append(f"{path}: non-string key {type(k).__name__}")
            out[key] = json_safe(v, problems, f"{path}.{key}")
        return out
    if isinstance(value, (list, tuple)):
        if isinstance(value, tuple) and problems is not None:
            problems.append(f"{path}: tuple")
        return [json_safe(v, problems, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, (bytes, bytearray, memoryview)):
        if problems is not None:
            problems.append(f"{path}: bytes")
        return bytes(value).decode("utf-8", "replace")
    if problems is not None:
        problems.append(f"{path}: {type(value).__name__} object")
    return str(value)


def canonical_json(message: Any) -> str:
    """The canonical JSON of a message: sorted keys, compact, non-ASCII kept; never raises.

    A value that is not JSON (NaN, bytes, objects) is encoded as its :func:`json_safe` form, so a
    message and the safe form a store recorded for it have the same canonical JSON.
    """
    try:
        return _CANONICAL.encode(message)
    except (TypeError, ValueError):
        return json.dumps(json_safe(message), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


#: Keys that annotate a message for one request (prompt-cache markers), not part of what was said:
#: a fingerprint ignores them at the message's top level and in its content blocks.
TRANSPORT_KEYS = frozenset(("cache_control", "cache_breakpoint"))


def _without_transport_keys(message: Any) -> Any:
    if not isinstance(message, dict):
        return message
    content = message.get("content")
    has_blocks = isinstance(content, list) and any(
        isinstance(b, dict) and not TRANSPORT_KEYS.isdisjoint(b) for b in content
    )
    if TRANSPORT_KEYS.isdisjoint(message) and not has_blocks:
        return message
    out = {k: v for k, v in message.items() if k not in TRANSPORT_KEYS}
    if has_blocks:
        assert isinstance(content, list)
        out["content"] = [
            {k: v for k, v in b.items() if k not in TRANSPORT_KEYS} if isinstance(b, dict) else b for b in content
        ]
    return out


def fingerprint(message: Any) -> str:
    """A message's identity: the BLAKE2b-128 hex digest of its :func:`canonical_json`.

    Equal messages (same keys and values, in any key order) have equal fingerprints; two equal
    messages at different places in a conversation are still two records (their sequence numbers
    differ). Prompt-cache markers (:data:`TRANSPORT_KEYS`, e.g. CrewAI's ``cache_breakpoint``,
    Anthropic's ``cache_control``) are not part of a message's identity: frameworks move them from
    message to message between calls.
    """
    data = canonical_json(_without_transport_keys(message)).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def validate_messages(session_id: str, messages: object) -> list[dict[str, Any]]:
    """Check that ``messages`` is a list of dicts (as :meth:`SessionStore.append` requires)."""
    if not isinstance(messages, list):
        raise StoreError(f"messages for session {session_id!r} must be a list of dicts, got {type(messages).__name__}")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise StoreError(
                f"message {i} for session {session_id!r} must be a dict (an OpenAI-format "
                f"message), got {type(m).__name__}"
            )
    return messages


# -- raw records -------------------------------------------------------------------------------------

#: Record operations of the event log (see :class:`RawRecord` and :class:`Event`).
ADD, REPLACE, REMOVE = "add", "replace", "remove"
_OPS = frozenset((ADD, REPLACE, REMOVE))
#: The key of the stored form of an event other than a plain ``add`` at the end: the record's JSON
#: value is ``{EVENT_KEY: op, "target": N, "message": {...}}``, so every store keeps events in the
#: same column or line as messages and no store schema changes.
EVENT_KEY = "ctxlife_event"
#: What an erased message's text becomes (:meth:`SessionStore.erase`).
ERASED_TEXT = "[erased]"


def event_value(event: Event) -> dict[str, Any]:
    """The JSON value a store keeps for ``event`` (a plain add at the end is the message itself)."""
    if event.op not in _OPS:
        raise StoreError(f"unknown event op {event.op!r} (expected one of {sorted(_OPS)})")
    if event.op == ADD and event.target is None:
        return event.message
    if isinstance(event.target, bool) or not isinstance(event.target, int) or event.target < 1:
        raise StoreError(f"a {event.op!r} event needs a target slot (an int >= 1), got {event.target!r}")
    return {EVENT_KEY: event.op, "target": event.target, "message": {} if event.op == REMOVE else event.message}


def unwrap_event(value: dict[str, Any]) -> tuple[dict[str, Any], str, int | None, bool]:
    """``(message, op, target, erased)`` of a stored record value (see :data:`EVENT_KEY`)."""
    op = value.get(EVENT_KEY)
    if op is None:
        return value, ADD, None, bool(value.get(ERASED_KEY))
    message, target = value.get("message"), value.get("target")
    if op not in _OPS or not isinstance(message, dict) or isinstance(target, bool) or not isinstance(target, int):
        raise ValueError(f"malformed {EVENT_KEY} record (op {op!r}, target {target!r})")
    return message, op, target, bool(message.get(ERASED_KEY))


#: Marks an erased message (its text replaced by :data:`ERASED_TEXT`).
ERASED_KEY = "ctxlife_erased"


def erased_message(message: dict[str, Any]) -> dict[str, Any]:
    """The tombstone that replaces an erased message: its role (and tool-call id) only."""
    out: dict[str, Any] = {"role": message.get("role", "user"), "content": ERASED_TEXT, ERASED_KEY: True}
    if "tool_call_id" in message:
        out["tool_call_id"] = message["tool_call_id"]
    return out


def whole_units(records: list[RawRecord], slots: set[int]) -> set[int]:
    """``slots`` with the rest of every tool call/result unit they touch, in each view's current list.

    Erasing half of a unit (the call without its results, or one result) leaves a list providers
    reject; results left alone right after an erased unit go with it too.
    """
    if not slots:
        return slots
    by_view: dict[str, list[RawRecord]] = {}
    for r in records:
        by_view.setdefault(r.view, []).append(r)
    out = set(slots)
    for mine in by_view.values():
        live = materialize(mine)
        messages = [r.message for r in live]
        dropped = False
        for unit in split_units(messages):
            members = {live[i].seq for i in range(unit.start, unit.end)}
            orphan = not has_calls(messages[unit.start]) and is_tool_result(messages[unit.start])
            if members & out or (dropped and orphan):
                out |= members
                dropped = True
            else:
                dropped = False
    return out


def materialize(records: Iterable[RawRecord]) -> list[RawRecord]:
    """The current state of a view from its records (in ``seq`` order): one record per live slot, in
    conversation order, each carrying the slot's latest message (``seq`` = the slot).

    ``add`` appends (or inserts right after its target slot), ``replace`` swaps a slot's message,
    ``remove`` drops the slot. Superseded and removed messages are not in the result. An event whose
    slot is unknown (it was added before the records given) is ignored for ``replace``/``remove``
    and appended for ``add``.
    """
    order: list[int] = []
    current: dict[int, RawRecord] = {}
    after: dict[int, int] = {}  # slot -> the slot it was inserted after
    inserted = False
    for record in records:
        if record.op == ADD:
            current[record.seq] = record
            if record.target is not None and record.target in current:
                # after the target and after what was inserted after it before (adds keep their order)
                at = order.index(record.target) + 1
                while at < len(order) and after.get(order[at]) == record.target:
                    at += 1
                order.insert(at, record.seq)
                after[record.seq] = record.target
                inserted = True
            else:
                order.append(record.seq)
        elif record.op == REPLACE:
            if record.target in current:
                current[record.target] = dataclasses.replace(record, seq=record.target, op=ADD, target=None)
        elif record.op == REMOVE:
            if record.target is not None and current.pop(record.target, None) is not None:
                inserted = True  # order holds a removed slot now: filtered below
    if inserted:
        return [current[s] for s in order if s in current]
    return [current[s] for s in order]


@dataclasses.dataclass(frozen=True, slots=True)
class RawRecord:
    """One message of a session's raw history, as the store keeps it.

    Attributes:
        seq: the sequence number the store assigned (1, 2, 3, ... per session, no gaps).
        message: the message dict (for a quarantined message, its JSON-safe form).
        fingerprint: :func:`fingerprint` of the message (``""`` in a record no store wrote).
        view: the view (agent/task lane) it belongs to; ``""`` is the default view.
        recorded_at: when it was recorded (``time.time()``), or None when its source did not say.
        quarantined: why the message could not be stored as it was (e.g. ``"$.content: bytes"``), or
            None. A quarantined message is stored in its :func:`json_safe` form.
        tokens: the message's tokens as :meth:`ctxlife.TokenCounter.count_message` counts them in
            ``token_encoding``, written once at append (:func:`prepare_messages`), so a restore does
            not tokenize the history again; None for records without a count (a ``remove``, an erased
            record, one written before counts were kept, or by a store that does not keep them).
        token_encoding: the tiktoken encoding ``tokens`` was counted in (a counter in another
            encoding counts the message itself).
    """

    seq: int
    message: dict[str, Any]
    fingerprint: str = ""
    view: str = ""
    recorded_at: float | None = None
    quarantined: str | None = None
    op: str = ADD
    target: int | None = None
    erased: bool = False
    tokens: int | None = None
    token_encoding: str | None = None

    @property
    def slot(self) -> int:
        """The slot this record is about: its own ``seq`` for an ``add``, else the slot it edits."""
        return self.seq if self.op == ADD or self.target is None else self.target


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    """One change to a view's conversation, for :meth:`SessionStore.append_events`.

    Attributes:
        op: :data:`ADD` (a new message; ``target`` None = at the end, N = right after slot N),
            :data:`REPLACE` (slot ``target`` now holds ``message``: an edit, a cleared tool result, a
            regenerated reply) or :data:`REMOVE` (slot ``target`` is gone: a pop, a deletion, a
            turn discarded by a regenerate; ``message`` is ignored).
        message: the message (for ``add`` and ``replace``).
        target: the slot (the ``seq`` of the record that added the message), see ``op``.
        fingerprint: :func:`fingerprint` of ``message`` when the caller has it.
    """

    op: str
    message: dict[str, Any]
    target: int | None = None
    fingerprint: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class CallRecord:
    """One model call of a session as the store keeps it (:meth:`SessionStore.read_calls`).

    Attributes:
        n: its number in the session's call log (1, 2, 3, ... in the order written, every view).
        view: the view the call belongs to.
        doc: the JSON object the host wrote (:mod:`ctxlife.sessions.calls` says what it holds).
    """

    n: int
    view: str
    doc: dict[str, Any]


def erased_mark(key: bytes, fp: str) -> str:
    """What :meth:`SessionStore.erased` keeps of an erased message: an HMAC of its fingerprint
    keyed with the store's secret (128 bits, hex), so the store never holds the fingerprint."""
    return hmac.new(key, fp.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


@dataclasses.dataclass(frozen=True)
class ErasedMessages:
    """The messages erased from a session, as :meth:`SessionStore.erased` reads them."""

    key: bytes | None
    marks: frozenset[str]

    def __contains__(self, fp: object) -> bool:
        return (
            bool(self.marks)
            and isinstance(fp, str)
            and self.key is not None
            and erased_mark(self.key, fp) in self.marks
        )

    def __bool__(self) -> bool:
        return bool(self.marks)


class RecordSlot(NamedTuple):
    """What a recorder keeps of a record (:meth:`SessionStore.read_slots`): no message."""

    seq: int
    fingerprint: str
    op: str = ADD
    target: int | None = None


@dataclasses.dataclass(slots=True)
class ViewRows:
    """A view whose every record is a plain ``add`` of a message stored as it was (no edit,
    insertion, removal, erase or quarantine), as columns: what a restore needs, without a
    :class:`RawRecord` per row (:meth:`SessionStore.read_view`).

    Attributes:
        seqs: each message's sequence number (its slot), ascending.
        fingerprints: each record's fingerprint (empty for a ``messages_only`` read).
        messages: the messages, decoded by this read (referenced by nothing else).
        tokens: ``(tokens, encoding)`` per message, as :attr:`RawRecord.tokens`; equal pairs share one
            tuple (empty for a ``messages_only`` read).
    """

    seqs: list[int]
    fingerprints: list[str]
    messages: list[dict[str, Any]]
    tokens: list[tuple[int | None, str | None]]


def decode_plain(texts: list[str], chunk: int = 2048) -> list[dict[str, Any]] | None:
    """The messages stored as ``texts`` (one JSON object each), one ``json.loads`` per ``chunk`` of
    them; None when one is not exactly one JSON object, or is an event or an erased record (then
    decode record by record)."""
    messages: list[dict[str, Any]] = []
    for start in range(0, len(texts), chunk):
        values = _decode_plain_chunk(texts[start : start + chunk])
        if values is None:
            return None
        messages += values
    return messages


def _decode_plain_chunk(texts: list[str]) -> list[dict[str, Any]] | None:
    if not texts:
        return []
    # Each text one object, as written (no text can end inside another's document), and as many
    # values as texts; none an event or an erased record. Checked in C passes over the list.
    if not (all(map(str.startswith, texts, repeat("{"))) and all(map(str.endswith, texts, repeat("}")))):
        return None
    # One copy of the texts: the brackets go on the first and the last (an f-string around the
    # joined text would copy it all again).
    wrapped = ["[" + texts[0], *texts[1:-1], texts[-1] + "]"] if len(texts) > 1 else ["[" + texts[0] + "]"]
    try:
        values = json.loads(",".join(wrapped))
    except (ValueError, TypeError):
        return None
    if len(values) != len(texts) or set(map(type, values)) != {dict}:
        return None
    return values if _NOT_PLAIN.isdisjoint(set().union(*values)) else None


_NOT_PLAIN = frozenset((EVENT_KEY, ERASED_KEY))


@contextlib.contextmanager
def no_collection() -> Iterator[None]:
    """No cyclic garbage collection inside: for a bulk read that makes only acyclic objects (rows,
    decoded JSON), where a collection would find no garbage and only walk every object made so far
    (a third of a 10k-message read's time). Reference counting still frees what is dropped."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


@dataclasses.dataclass(frozen=True, slots=True)
class PreparedMessage:
    """A message encoded for storage by :func:`prepare_messages` (JSON text, fingerprint, problems,
    token count and its encoding)."""

    text: str
    fingerprint: str
    quarantined: str | None
    tokens: int | None = None
    token_encoding: str | None = None


def prepare_messages(
    session_id: str,
    messages: list[dict[str, Any]],
    fingerprints: Iterable[str] | None = None,
    *,
    strict: bool = False,
) -> list[PreparedMessage]:
    """Encode a batch of messages for :meth:`SessionStore.append` (before taking any lock).

    A message that is not JSON (NaN, bytes, objects) is stored in its :func:`json_safe` form with a
    ``quarantined`` reason, unless ``strict`` (then :class:`StoreError` names it and nothing of the
    batch is written). ``fingerprints`` are the messages' :func:`fingerprint` when the caller has
    them already. Each message is counted once here (``PreparedMessage.tokens``, in the default
    encoding of :class:`~ctxlife.TokenCounter`): a store that writes the count with the record
    spares every later restore from tokenizing the history again.
    """
    validate_messages(session_id, messages)
    for i, m in enumerate(messages):
        if EVENT_KEY in m:  # read back as an edit, so it must be one: checked before anything is written
            try:
                unwrap_event(m)
            except ValueError as exc:
                raise StoreError(
                    f"append to session {session_id!r}: message {i} is a {exc}; the {EVENT_KEY!r} key is "
                    "ctxlife's own: record edits with SessionStore.append_events (or Session.edit/remove)"
                ) from None
    fps = list(fingerprints) if fingerprints is not None else None
    if fps is not None and len(fps) != len(messages):
        raise StoreError(f"append to session {session_id!r}: {len(fps)} fingerprints for {len(messages)} messages")
    counter = _store_counter()
    out = []
    for i, m in enumerate(messages):
        bad = None
        stored = m
        try:
            text = json_text(m, what=f"message {i} for session {session_id!r}")
        except StoreError:
            if strict:
                raise
            problems: list[str] = []
            stored = json_safe(m, problems)
            text = json_text(stored, what=f"message {i} for session {session_id!r}")
            bad = "; ".join(problems)[:500] or "not JSON-serializable"
        tokens = _tokens_of(counter, stored)
        fp = fps[i] if fps is not None else fingerprint(m)
        out.append(PreparedMessage(text, fp, bad, tokens, None if tokens is None else counter.encoding_name))
    return out


@functools.cache
def _store_counter() -> Any:
    """The process's counter of new records (its caches hold only roles and names: see
    :meth:`~ctxlife.TokenCounter.count_once`), made on first use."""
    # lazy: ctxlife.tokens brings structlog (and rich), which importing the store layer does not need
    from ctxlife.tokens import FALLBACK_ENCODING, TokenCounter

    return TokenCounter(encoding=FALLBACK_ENCODING)


def _tokens_of(counter: Any, value: dict[str, Any]) -> int | None:
    """The tokens of a stored value's message, a message or an event checked already (None for a removal)."""
    message, op, _, _ = unwrap_event(value)
    return None if op == REMOVE else int(counter.count_once(message))


def appended_records(
    first_seq: int,
    messages: list[dict[str, Any]],
    prepared: list[PreparedMessage],
    view: str,
    recorded_at: float,
) -> list[RawRecord]:
    """The records an append just wrote, numbered from ``first_seq`` (a quarantined message as stored)."""
    out = []
    for i, (m, p) in enumerate(zip(messages, prepared, strict=True)):
        value = m if p.quarantined is None else json.loads(p.text)
        message, op, target, erased = unwrap_event(value) if EVENT_KEY in value else (value, ADD, None, False)
        out.append(
            RawRecord(
                first_seq + i,
                message,
                p.fingerprint,
                view,
                recorded_at,
                p.quarantined,
                op,
                target,
                erased,
                p.tokens,
                p.token_encoding,
            )
        )
    return out


def record_json(seq: int, view: str, recorded_at: float, prepared: PreparedMessage) -> str:
    """One stored record (one line): ``{"seq":..,"view":..,"at":..,"fp":..,["bad":..,]["tk":[tokens,
    encoding],]"msg":{...}}``."""
    bad = f',"bad":{json.dumps(prepared.quarantined)}' if prepared.quarantined else ""
    if prepared.tokens is not None and prepared.token_encoding is not None:
        bad += f',"tk":[{prepared.tokens},{json.dumps(prepared.token_encoding)}]'
    head = f'"seq":{seq},"view":{json.dumps(view)},"at":{recorded_at!r},"fp":"{prepared.fingerprint}"'
    return f'{{{head}{bad},"msg":{prepared.text}}}'


def token_count(value: Any) -> tuple[int | None, str | None]:
    """``(tokens, encoding)`` of a stored ``"tk"`` field; ``(None, None)`` when it is missing or not
    ``[int >= 0, str]`` (a count is a cache: without a valid one, the message is counted again)."""
    if (
        isinstance(value, list)
        and len(value) == 2
        and type(value[0]) is int
        and value[0] >= 0
        and isinstance(value[1], str)
    ):
        return value[0], value[1]
    return None, None


def token_pairs(tokens: list[Any], encodings: list[Any]) -> list[tuple[int | None, str | None]]:
    """``(tokens, encoding)`` per record from a store's two columns, as :func:`token_count` takes a
    stored pair; equal pairs share one tuple (a 100k-message history holds a few thousand distinct
    ones, and one encoding name instead of one per record)."""
    shared = {pair: token_count(list(pair)) for pair in set(zip(tokens, encodings, strict=True))}
    return list(map(shared.__getitem__, zip(tokens, encodings, strict=True)))


_ENVELOPE_REQUIRED = frozenset(("seq", "view", "at", "fp", "msg"))


def decode_record(value: Any) -> RawRecord:
    """Turn a decoded stored record into a :class:`RawRecord`; raise ``ValueError`` naming the problem.

    Envelope fields this version does not know (a later version's) are ignored, so an older worker
    reads what a newer one wrote during a rolling upgrade.
    """
    if not isinstance(value, dict):
        raise ValueError(f"not a JSON object but {type(value).__name__}")
    if not _ENVELOPE_REQUIRED <= value.keys():
        raise ValueError(f"not a record: no {', '.join(sorted(_ENVELOPE_REQUIRED - value.keys()))}")
    seq, view, at, fp, msg = value["seq"], value["view"], value["at"], value["fp"], value["msg"]
    bad = value.get("bad")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        raise ValueError(f"sequence number {seq!r} is not an int >= 1")
    if not isinstance(view, str) or not isinstance(fp, str) or not isinstance(msg, dict):
        raise ValueError("record fields have the wrong types")
    if isinstance(at, bool) or not isinstance(at, (int, float)):
        raise ValueError(f"record time {at!r} is not a number")
    if bad is not None and not isinstance(bad, str):
        raise ValueError("quarantine reason is not a string")
    message, op, target, erased = unwrap_event(msg)
    tokens, encoding = token_count(value.get("tk"))
    return RawRecord(seq, message, fp, view, float(at), bad, op, target, erased, tokens, encoding)
