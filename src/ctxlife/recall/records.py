"""What the index makes of a raw record: its documents.

The index reads a session's :class:`~ctxlife.sessions.RawRecord` and turns its message's text
(:func:`ctxlife.messages.text_of`, the one text walk replay and ``session show`` print too) into
one or more *documents*: the whole text, or one chunk of a long tool result each (a chunk can be
found and recalled on its own).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Tool results and other long texts are split into chunks of about this many characters.
CHUNK_CHARS = 1_200

#: Later chunks of a long text are indexed with its first characters, which usually say what it is
#: about (a record's id and name, a report's subject), so a chunk is found by them too.
HEAD_CHARS = 160


@dataclass(frozen=True, slots=True)
class Document:
    """A searchable piece of a record: the whole message, or one chunk of it (``part``).

    ``head`` is the start of the record, for chunks after the first (empty otherwise): it is indexed
    with the chunk. The recall block cuts its excerpt from the whole record, around the chunk.
    """

    seq: int
    part: int
    role: str
    text: str
    head: str = ""


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


def text_documents(seq: int, role: str, text: str, chunk_chars: int = CHUNK_CHARS) -> list[Document]:
    """The documents of a record's text (:func:`ctxlife.messages.text_of`, stripped): one, or one per
    chunk of a long text. The index stores the text once and derives its chunks again from it."""
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
