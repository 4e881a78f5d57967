"""Messages ctxlife inserts (summaries, recall blocks, bootstrap text), recognised by a mark they carry.

Each one ctxlife writes is marked (:func:`mark_inserted`) with a last line whose check covers its
role, kind and text, so :func:`inserted_kind` / :func:`is_inserted` recognise a copy and never a
user or tool message with the same visible prefix; a restored snapshot re-marks its inserted
messages from its meta (:func:`inserted_meta` / :func:`restore_inserted`). A system message that is
exactly one bootstrap section (:data:`BOOTSTRAP_START` ... :data:`BOOTSTRAP_END`) is inserted
bootstrap text. Also the tolerant ``History summary:`` marker helpers summarizers use.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ctxlife.messages.formats import ANTHROPIC, Message, list_format
from ctxlife.messages.text import content_text

SUMMARY_PREFIX = "History summary:"
"""How a summary message written by ctxlife starts (for the model; ctxlife recognises its summaries
by registration, see :func:`is_summary`, so user or tool content starting like this is not one)."""


RECALL_PREFIX = "Recalled from earlier in this conversation"
"""How the ``recall`` strategy's block of passages from the raw history starts (for the model; the
block is recognised by registration, see :func:`is_recall_block`).

Inserted by ctxlife before each model call and replaced on the next: never recorded into the raw
history, never summarized, never recalled again.
"""


BOOTSTRAP_START = "<!-- ctxlife:bootstrap -->"


BOOTSTRAP_END = "<!-- /ctxlife:bootstrap -->"


BOOTSTRAP_SECTION_RE = re.compile(re.escape(BOOTSTRAP_START) + r".*?" + re.escape(BOOTSTRAP_END), re.DOTALL)


INSERTED_KINDS = ("summary", "recall", "bootstrap")


def _inserted_key(message: Message) -> tuple[str, str] | None:
    if not isinstance(message, dict):
        return None
    r = message.get("role")
    content = message.get("content")
    if not isinstance(r, str):
        return None
    if isinstance(content, str):
        return r, content
    if isinstance(content, list) and content and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return r, content_text(message)
    return None


# A message ctxlife inserts carries its kind in a last line ``<!-- ctxlife:KIND CHECK -->``, where
# CHECK is a keyed hash of the role, the kind and the text before the line: recognition needs no
# registry (it survives restarts, other processes and busy ones), a copy (a JSON round trip) is
# still recognised, and a message that merely looks like one (a tool result pasting the line under
# other text, an edited summary) is not.
_TAG_RE = re.compile(r"\n<!-- ctxlife:(summary|recall|bootstrap) ([0-9a-f]{12}) -->\Z")


_TAG_KEY = b"ctxlife/inserted/1"


def _tag_check(role_: str, kind: str, body: str) -> str:
    data = f"{role_}\0{kind}\0{body}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=6, key=_TAG_KEY).hexdigest()


def _tagged(role_: str, kind: str, text: str) -> str:
    found = _TAG_RE.search(text)
    body = text[: found.start()] if found is not None else text
    return f"{body}\n<!-- ctxlife:{kind} {_tag_check(role_, kind, body)} -->"


def _tag_kind(role_: str, text: str) -> str | None:
    if not text.endswith(" -->"):
        return None
    found = _TAG_RE.search(text)
    if found is None:
        return None
    kind, check = found.group(1), found.group(2)
    return kind if hmac.compare_digest(check, _tag_check(role_, kind, text[: found.start()])) else None


def _is_section(content: Any) -> bool:
    """Whether ``content`` is exactly one bootstrap section (a system message ctxlife made for it)."""
    return (
        isinstance(content, str)
        and content.startswith(BOOTSTRAP_START)
        and content.endswith(BOOTSTRAP_END)
        and BOOTSTRAP_SECTION_RE.fullmatch(content) is not None
    )


def inserted_text(text: str) -> str:
    """``text`` without the line that marks an inserted message (the same text when it has none)."""
    found = _TAG_RE.search(text) if text.endswith(" -->") else None
    return text[: found.start()] if found is not None else text


def mark_inserted(message: Message, kind: str) -> Message:
    """Mark ``message`` (in place) as one ctxlife inserted (``kind``: "summary", "recall" or "bootstrap"); return it.

    The mark is a last line of the message's text, ``<!-- ctxlife:KIND CHECK -->``, whose check
    covers the role, the kind and the text: recognition (:func:`inserted_kind`) needs nothing but
    the message, so a copy (a JSON round trip, a stateless caller sending the list back, a
    restored snapshot, another process) is still recognised, and a message that merely starts
    like one, or whose text was changed after marking, is not. Marking again (after the text
    changed) replaces the line.
    """
    if kind not in INSERTED_KINDS:
        raise ValueError(f"kind must be one of {INSERTED_KINDS}, got {kind!r}")
    key = _inserted_key(message)
    if key is None:
        raise ValueError("only a message with a string role and text content can be registered as inserted")
    content = message["content"]
    if kind == "bootstrap" and key[0] == "system" and _is_section(content):
        return message  # a system message that is exactly ctxlife's section is marked by it
    if isinstance(content, str):
        message["content"] = _tagged(key[0], kind, content)
    else:
        last = content[-1]
        text = last.get("text") if isinstance(last.get("text"), str) else ""
        content[-1] = {**last, "text": _tagged(key[0], kind, text)}
    return message


def inserted_kind(message: Message) -> str | None:
    """What ctxlife inserted this message as ("summary", "recall", "bootstrap"), or None for any other message."""
    if not isinstance(message, dict):
        return None
    r = message.get("role")
    content = message.get("content")
    if not isinstance(r, str):
        return None
    if r == "system" and _is_section(content):
        return "bootstrap"
    if isinstance(content, str):
        return _tag_kind(r, content)
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        last = content[-1].get("text")
        if isinstance(last, str) and last.endswith(" -->"):
            return _tag_kind(r, last)  # the check covers the last block (where the mark line is)
    return None


def is_inserted(message: Message) -> bool:
    """Whether ctxlife inserted this message (a summary, a recall block, a system message made for bootstrap).

    The raw-history recorder never records these, and strategies never summarise or recall them again.
    """
    return inserted_kind(message) is not None


def is_summary(message: Message) -> bool:
    """Whether a message is a history summary ctxlife wrote (registered by :func:`mark_inserted`)."""
    return inserted_kind(message) == "summary"


def is_recall_block(message: Message) -> bool:
    """Whether a message is a ``recall`` block ctxlife inserted (registered by :func:`mark_inserted`
    with kind ``"recall"``; a user message that starts like one is not)."""
    return inserted_kind(message) == "recall"


def inserted_meta(messages: Sequence[Message]) -> list[list[Any]]:
    """``[[index, kind], ...]`` of the inserted messages of a list (kept in a snapshot's meta for tools)."""
    return [[i, kind] for i, kind in ((i, inserted_kind(m)) for i, m in enumerate(messages)) if kind is not None]


def restore_inserted(messages: Sequence[Message], meta: Any) -> None:
    """Re-mark the inserted messages of a list restored from a snapshot written before messages
    carried their mark (:func:`mark_inserted`); messages that carry it need nothing."""
    if not isinstance(meta, list):
        return
    for entry in meta:
        if (
            isinstance(entry, list)
            and len(entry) == 2
            and isinstance(entry[0], int)
            and 0 <= entry[0] < len(messages)
            and entry[1] in INSERTED_KINDS
            and _inserted_key(messages[entry[0]]) is not None
            and inserted_kind(messages[entry[0]]) is None
        ):
            mark_inserted(messages[entry[0]], entry[1])


def summary_message(messages: Sequence[Message], text: str, role_: str = "system", fmt: str | None = None) -> Message:
    """A registered summary message for ``messages``' format, with ``text`` after :data:`SUMMARY_PREFIX`.

    ``role_`` is the wanted role; in Anthropic Messages the summary is always a user message (the
    system prompt is passed apart, and the conversation must open with the user).
    """
    if (fmt or list_format(messages)) == ANTHROPIC:
        role_ = "user"
    return mark_inserted({"role": role_, "content": f"{SUMMARY_PREFIX} {text}"}, "summary")


_SUMMARY_WORDS = re.escape(SUMMARY_PREFIX.removesuffix(":"))


# The marker as a model may echo it back: any case, after a markdown heading or bold, space before ":".
_SUMMARY_MARKER_AT_START_RE = re.compile(r"\s*(?:#+\s*)?\**\s*" + _SUMMARY_WORDS + r"\s*:\**\s*", re.IGNORECASE)


_SUMMARY_MARKER_ANYWHERE_RE = re.compile(_SUMMARY_WORDS + r"\s*:", re.IGNORECASE)


def starts_with_summary_marker(message: Mapping[str, Any]) -> bool:
    """A system/user/assistant message whose text starts with the ``History summary:`` marker.

    More tolerant than :func:`is_summary` (which recognises the messages ctxlife wrote): any case,
    leading whitespace, markdown heading or bold, and content given as parts. Summarizers use it to
    fold a summary found inside a span instead of summarizing it again.
    """
    if message.get("role") not in ("system", "user", "assistant"):
        return False
    return _SUMMARY_MARKER_AT_START_RE.match(content_text(message.get("content"))) is not None


# A mark line anywhere in a text: where an inserted message's text was quoted or folded into another.
_MARK_LINE_RE = re.compile(r"\n?[ \t]*<!-- /?ctxlife:(?:summary|recall|bootstrap)(?: [0-9a-f]{12})? -->[ \t]*")


def strip_inserted_marks(text: str) -> str:
    """``text`` without any of ctxlife's mark lines (``<!-- ctxlife:KIND CHECK -->``, the bootstrap
    section's delimiters), wherever they are: ctxlife's notes to itself are never a fact, nor
    something a summary should quote."""
    return _MARK_LINE_RE.sub("", text) if "ctxlife:" in text else text


def strip_summary_marker(text: str | None) -> str:
    """Remove every ``History summary:`` marker (leading or nested) and every mark line
    (:func:`strip_inserted_marks`) from ``text``, so that folding a previous summary never nests
    one summary inside another nor carries its mark."""
    if not text:
        return ""
    s = strip_inserted_marks(text)
    while (m := _SUMMARY_MARKER_AT_START_RE.match(s)) is not None:
        s = s[m.end() :]
    s = _SUMMARY_MARKER_ANYWHERE_RE.sub("", s)
    return s.strip()
