"""Session id validation.

Session ids become file names (file store), primary keys (SQLite) and key fragments (Redis), so every
store validates them before touching storage. The rule is deliberately strict and the same for every
store, so an id that works with one store works with all of them:

* a non-empty ``str`` of at most :data:`MAX_SESSION_ID_LENGTH` characters,
* only ASCII letters, digits, ``.``, ``_`` and ``-``,
* no ``..`` anywhere and no leading ``.`` (no hidden files, no parent-directory tricks).

With that alphabet an id can contain no path separator, no NUL or control character, no whitespace,
no ``:`` (the Redis key separator) and no glob metacharacter.
"""

from __future__ import annotations

import re

from ctxlife.errors import SessionIdError

__all__ = ["MAX_SESSION_ID_LENGTH", "validate_blob_key", "validate_session_id", "validate_view", "view_id"]

MAX_SESSION_ID_LENGTH = 128

_ALLOWED = re.compile(r"[A-Za-z0-9._-]+")
_FIX = "use only letters, digits, '.', '_' and '-' (for example 'user-42' or 'u42.chat_1')"


def _check(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise SessionIdError(f"{what} must be a str, got {type(value).__name__} {value!r}; pass the id as a string")
    shown = value if len(value) <= 40 else value[:40] + "..."
    if not value:
        raise SessionIdError(f"{what} is empty; pass a non-empty id ({_FIX})")
    if len(value) > MAX_SESSION_ID_LENGTH:
        raise SessionIdError(
            f"{what} {shown!r} is {len(value)} characters long; the limit is "
            f"{MAX_SESSION_ID_LENGTH}. Use a shorter id (a hash of a long name works)"
        )
    if _ALLOWED.fullmatch(value) is None:
        bad = sorted({c for c in value if _ALLOWED.fullmatch(c) is None})
        raise SessionIdError(
            f"{what} {shown!r} contains the character(s) {''.join(bad)!r}, which are not allowed "
            f"(ids must be safe as file names and key parts); {_FIX}"
        )
    if ".." in value:
        raise SessionIdError(
            f"{what} {shown!r} contains '..', which could name a parent directory; remove the '..' ({_FIX})"
        )
    if value.startswith("."):
        raise SessionIdError(
            f"{what} {shown!r} starts with '.', which would make a hidden file; "
            f"start it with a letter or digit ({_FIX})"
        )
    return value


def validate_session_id(sid: object) -> str:
    """Return ``sid`` unchanged if it is a safe session id, else raise :class:`SessionIdError`.

    The error message names the offending id, the rule it breaks and how to fix it.
    """
    return _check(sid, "session id")


def validate_blob_key(key: object) -> str:
    """Validate a blob key (see :meth:`SessionStore.put_blob`); same rule as session ids."""
    return _check(key, "blob key")


def validate_view(view: object) -> str:
    """Validate a view name (an agent's or task's lane inside a session); ``""`` is the default view.

    A non-empty view follows the session-id rule, so it can be part of a file name or key.
    """
    if view == "":
        return ""
    return _check(view, "view")


_SLUG_BAD = re.compile(r"[^A-Za-z0-9._-]+")


def view_id(*parts: object) -> str:
    """A safe view name for free-form parts (an agent role, a task index): ``view_id("Senior Researcher", 2)``.

    Characters outside the id alphabet become ``-``; when that loses information (spaces, CJK
    roles), a short hash of the original parts keeps distinct roles distinct. ``None`` and empty
    parts are left out; no part at all gives the default view ``""``.
    """
    import hashlib

    texts = [str(p) for p in parts if p is not None and str(p) != ""]
    if not texts:
        return ""
    joined = ".".join(texts)
    slug = _SLUG_BAD.sub("-", joined).strip("-.")
    while ".." in slug:
        slug = slug.replace("..", ".")
    if slug != joined or not slug:
        digest = hashlib.blake2b(joined.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
        slug = f"{slug[:80]}-{digest}" if slug else f"v-{digest}"
    return slug[:MAX_SESSION_ID_LENGTH]
