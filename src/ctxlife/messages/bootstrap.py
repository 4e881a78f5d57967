"""The bootstrap section: bootstrap text put into a list as one marked section a new rendering replaces.

It goes at the end of the first system message, into a new system message when the list may get
one (:func:`system_role_allowed`), or else at the start of the first user turn
(:func:`apply_bootstrap`); :func:`strip_bootstrap` takes it out again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxlife.messages.formats import OPENAI, Message, is_system, list_format, role
from ctxlife.messages.inserted import (
    BOOTSTRAP_END,
    BOOTSTRAP_SECTION_RE,
    BOOTSTRAP_START,
    inserted_kind,
    is_inserted,
    mark_inserted,
)
from ctxlife.messages.text import content_text
from ctxlife.messages.turns import is_user_turn


def system_role_allowed(messages: Sequence[Message]) -> bool:
    """Whether ctxlife may add a system message to this list (never to an Anthropic list without one)."""
    return list_format(messages) == OPENAI or (bool(messages) and is_system(messages[0]))


def bootstrap_section(text: str) -> str:
    """The marked section holding bootstrap ``text``."""
    return f"{BOOTSTRAP_START}\n{text}\n{BOOTSTRAP_END}"


def _with_section(content: Any, section: str, *, prepend: bool) -> tuple[Any, bool]:
    """``content`` with its bootstrap section replaced by ``section`` (added if it has none)."""
    if isinstance(content, list):
        for k, part in enumerate(content):
            if (
                isinstance(part, dict)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
                and BOOTSTRAP_START in part["text"]
            ):
                new, changed = _with_section(part["text"], section, prepend=prepend)
                if not changed:
                    return content, False
                out = list(content)
                out[k] = {**part, "text": new}
                return out, True
        new_part = {"type": "text", "text": section}
        return ([new_part, *content] if prepend else [*content, new_part]), True
    text = content if isinstance(content, str) else ""
    if BOOTSTRAP_START in text and BOOTSTRAP_END in text:
        replaced = BOOTSTRAP_SECTION_RE.sub(lambda _: section, text, count=1)
        return replaced, replaced != text
    if not text:
        return section, True
    return (f"{section}\n\n{text}" if prepend else f"{text}\n\n{section}"), True


def apply_bootstrap(messages: list[Message], text: str, *, system_prompt: bool = True, fmt: str | None = None) -> bool:
    """Put ``text`` into the list as one marked section; a new rendering replaces the old one.

    The section goes at the end of the first system message. Without one, it goes into a new
    system message at the top -- unless the list must not get one (``system_prompt=False``, e.g.
    CrewAI's ``use_system_prompt=False``, or an Anthropic list whose system prompt is passed
    apart), in which case it opens the first user turn. ``fmt`` is the list's format when the
    caller knows it (a list of plain text messages is OpenAI chat otherwise). Returns True if the
    list changed.
    """
    if not text:
        return False
    section = bootstrap_section(text)
    if messages and is_system(messages[0]):
        first = messages[0]
        content = first.get("content")
        if text in content_text(first) and BOOTSTRAP_START not in content_text(first):
            return False  # the prompt already holds the text itself
        new, changed = _with_section(content, section, prepend=False)
        if changed:
            messages[0] = {**first, "content": new}
            if inserted_kind(first) == "bootstrap":
                mark_inserted(messages[0], "bootstrap")
        return changed
    # No system message first here: a new one is allowed in an OpenAI list only (system_role_allowed).
    allowed = (list_format(messages) if fmt is None else fmt) == OPENAI
    if system_prompt and allowed:
        messages.insert(0, mark_inserted({"role": "system", "content": section}, "bootstrap"))
        return True
    for index, message in enumerate(messages):
        if is_user_turn(message) and not is_inserted(message):  # not a summary made a user message
            if text in content_text(message) and BOOTSTRAP_START not in content_text(message):
                return _strip_other_sections(messages, index)
            new, changed = _with_section(message.get("content"), section, prepend=True)
            if changed:
                messages[index] = {**message, "content": new}
            return _strip_other_sections(messages, index) or changed
    return False


def _strip_other_sections(messages: list[Message], keep: int) -> bool:
    """Remove the bootstrap section from every user message but ``messages[keep]``: a restored
    conversation brings its own first user turn, and the section belongs in the first one only."""
    changed = False
    for index in range(keep + 1, len(messages)):
        message = messages[index]
        if role(message) == "user" and has_bootstrap_section(message):
            messages[index] = strip_bootstrap(message)
            changed = True
    return changed


def has_bootstrap_section(message: Message) -> bool:
    return BOOTSTRAP_START in content_text(message)


def strip_bootstrap(message: Message) -> Message:
    """``message`` without ctxlife's bootstrap section (the same object when it has none)."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        if BOOTSTRAP_START not in content:
            return message
        match = BOOTSTRAP_SECTION_RE.search(content)
        if match is None:
            return message
        start, end = match.span()
        # undo exactly what apply_bootstrap added: the section and the blank line joining it
        if content.startswith("\n\n", end):
            end += 2
        elif content.endswith("\n\n", 0, start):
            start -= 2
        return {**message, "content": content[:start] + content[end:]}
    if isinstance(content, list):
        parts = [
            p
            for p in content
            if not (isinstance(p, dict) and p.get("type") == "text" and BOOTSTRAP_START in str(p.get("text")))
        ]
        if len(parts) == len(content):
            return message
        return {**message, "content": parts}
    return message
