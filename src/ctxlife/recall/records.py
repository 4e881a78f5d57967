"""What the history index reads: raw records, and the searchable text of a message.

A :class:`Record` is one message of a session's raw history with its place in it (``seq``, assigned
by the store), when it was recorded and which view (agent/task) it belongs to. The index turns each
record into one or more *documents*: the text of a chat message, or of a tool call, or one chunk of
a long tool result (each chunk can be found and recalled on its own).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

#: Tool results and other long texts are split into chunks of about this many characters.
CHUNK_CHARS = 1_200

#: Later chunks of a long text are indexed with its first characters, which usually say what it is
#: about (a record's id and name, a report's subject), so a chunk is found by them too.
HEAD_CHARS = 160


@dataclass(frozen=True, slots=True)
class Record:
    """One raw-history message and where it sits.

    Attributes:
        seq: its sequence number in the session's raw history (1, 2, 3, ... assigned by the store).
        message: the message dict as recorded.
        recorded_at: when it was recorded (seconds since the epoch), if the store says.
        view: the agent/task view it belongs to, if the store says.
        op: what the record does to its view (the session event log): ``"add"`` a message,
            ``"replace"`` the message of slot ``target``, ``"remove"`` slot ``target``.
        target: the slot (the seq of the record that first added it) a replace/remove acts on.
        fingerprint: the store's fingerprint of the message, if it gives one (to tell that a
            session was deleted and written again under the same sequence numbers).
    """

    seq: int
    message: dict[str, Any]
    recorded_at: float | None = None
    view: str | None = None
    op: str = "add"
    target: int | None = None
    fingerprint: str | None = None


class IndexableRecord(Protocol):
    """What the index reads of a record: a :class:`Record`, or a store's ``RawRecord`` as it is."""

    @property
    def seq(self) -> int: ...
    @property
    def message(self) -> dict[str, Any]: ...
    @property
    def recorded_at(self) -> float | None: ...
    @property
    def view(self) -> str | None: ...
    @property
    def op(self) -> str: ...
    @property
    def target(self) -> int | None: ...
    @property
    def fingerprint(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Document:
    """A searchable piece of a record: the whole message, or one chunk of it (``part``).

    ``head`` is the start of the record, for chunks after the first (empty otherwise): it is indexed
    with the chunk and shown before it.
    """

    seq: int
    part: int
    role: str
    text: str
    head: str = ""


def message_text(message: dict[str, Any]) -> str:
    """The readable text of a message: its content (text parts joined) and its tool calls.

    OpenAI chat messages (string content or content parts, ``tool_calls``, legacy
    ``function_call``) and Anthropic content blocks (``text``, ``tool_use``, ``tool_result``).
    """
    content = message.get("content")
    if (
        isinstance(content, str)
        and not message.get("tool_calls")
        and not isinstance(message.get("function_call"), dict)
    ):
        return content  # the usual chat message (the general path below gives the same)
    pieces: list[str] = []
    _content_text(message.get("content"), pieces)
    for call in message.get("tool_calls") or ():
        if isinstance(call, dict):
            inner = call.get("function")
            function = inner if isinstance(inner, dict) else call
            pieces.append(_call_text(function.get("name"), function.get("arguments")))
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        pieces.append(_call_text(legacy.get("name"), legacy.get("arguments")))
    return "\n".join(p for p in pieces if p)


def _content_text(content: Any, out: list[str]) -> None:
    if isinstance(content, str):
        out.append(content)
        return
    if not isinstance(content, list):
        return
    for part in content:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            kind = part.get("type")
            if isinstance(part.get("text"), str):
                out.append(part["text"])
            elif kind == "tool_use":
                out.append(_call_text(part.get("name"), part.get("input")))
            elif kind == "tool_result":
                _content_text(part.get("content"), out)


def _call_text(name: Any, arguments: Any) -> str:
    if not isinstance(arguments, str):
        try:
            arguments = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError):
            arguments = str(arguments)
    return f"{name or 'tool'}({arguments})"


def chunks(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """Split a long text into pieces of about ``size`` characters, at line ends or spaces where possible.

    Consecutive pieces overlap by about a tenth of ``size``, so a line cut at a boundary is whole in
    one of them.
    """
    if len(text) <= size:
        return [text]
    overlap = size // 10
    out: list[str] = []
    start, n = 0, len(text)
    while start < n:
        end = min(n, start + size)
        if end < n:
            end = _break_before(text, start + size // 2, end)
        out.append(text[start:end])
        if end >= n:
            break
        start = max(_break_after(text, end - overlap, end), start + 1) if overlap else end
    return out


def _break_after(text: str, low: int, high: int) -> int:
    """The position just after the first line end (else space) in ``text[low:high]``; ``low`` if none."""
    for mark in ("\n", " "):
        cut = text.find(mark, low, high)
        if cut != -1:
            return cut + 1
    return low


def _break_before(text: str, low: int, high: int) -> int:
    """The position just after the last line end (else space) in ``text[low:high]``; ``high`` if none."""
    for mark in ("\n", " "):
        cut = text.rfind(mark, low, high)
        if cut != -1:
            return cut + 1
    return high


def documents(record: Record, chunk_chars: int = CHUNK_CHARS) -> list[Document]:
    """The documents of a record: one per chunk of its text (none if it has no text)."""
    role = str(record.message.get("role") or "")
    return text_documents(record.seq, role, message_text(record.message).strip(), chunk_chars)


def text_documents(seq: int, role: str, text: str, chunk_chars: int = CHUNK_CHARS) -> list[Document]:
    """The documents of a record's (stripped) text, as :func:`documents` makes them: the index stores
    the text once and derives its chunks again from it (to show or to delete them)."""
    if not text:
        return []
    if len(text) <= chunk_chars:
        return [Document(seq, 0, role, text)]
    pieces = chunks(text, chunk_chars)
    head = head_of(text)
    return [Document(seq, part, role, piece, head if part else "") for part, piece in enumerate(pieces)]


def head_of(text: str, size: int = HEAD_CHARS) -> str:
    """The first ``size`` characters of a text, cut at a space."""
    if len(text) <= size:
        return text
    cut = text.rfind(" ", size // 2, size)
    return text[: cut if cut != -1 else size]
