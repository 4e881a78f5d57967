"""Session id validation, and the map from any string to a store key (:func:`session_key`).

Session ids become file names (file store), primary keys (SQLite) and key fragments (Redis), so every
store validates them before touching storage. The rule is deliberately strict and the same for every
store, so an id that works with one store works with all of them; its alphabet holds no path
separator, NUL, control character, whitespace, ``:`` (the Redis key separator) or glob metacharacter.
The rule, the key encoding, :class:`SessionKey` and the keys of the earlier version: docs/sessions.md,
"What a session holds" and "Session ids from anywhere".

Why the map is injective for every str: plain keys never start with :data:`KEY_PREFIX` (``"_-"``),
encoded keys always do, and the byte encoding is injective (lone surrogates go through
``surrogatepass``). No map can be both injective and idempotent on strings (a key that is its own key
would share it with the id it encodes), so a string is always taken as an id, and code that already
holds a key says so with :class:`SessionKey`.
"""

from __future__ import annotations

import hashlib
import re

from ctxlife.errors import SessionIdError

__all__ = [
    "KEY_PREFIX",
    "SessionKey",
    "MAX_SESSION_ID_LENGTH",
    "original_session_id",
    "session_key",
    "validate_blob_key",
    "validate_session_id",
    "validate_view",
    "view_id",
]

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
    """Return ``sid`` unchanged if it is a safe session id, else raise :class:`SessionIdError` (naming the fix)."""
    return _check(sid, "session id")


#: What starts the key of an id that is not a valid key itself (see :func:`session_key`).
KEY_PREFIX = "_-"
_KEPT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_ESCAPED = re.compile(r"(?:[A-Za-z0-9-]|_[0-9A-F]{2})*")


class SessionKey(str):
    """A store key, as :func:`session_key` returns it: passed where an id is taken, it is used as it is.

    Wrap a key read from a store (``SessionKey(info.session_id)``) to open that session with an API
    that maps ids (:class:`ctxlife.Session`); a plain ``str`` is always an id and is mapped.
    """

    __slots__ = ()

    def __new__(cls, key: str) -> SessionKey:
        return super().__new__(cls, validate_session_id(key))


def session_key(session_id: object) -> SessionKey:
    """The store key for a session id from anywhere (a framework's thread id, a user name, an e-mail).

    A valid id (see :func:`validate_session_id`) that does not start with ``_-`` is returned unchanged;
    any other non-empty string is encoded reversibly into the id alphabet (the module doc says how;
    :func:`original_session_id` decodes it). Two different strings never share a key. A
    :class:`SessionKey` (a key already made) is returned as it is. Raises :class:`SessionIdError` for a
    non-string, an empty string, or a string whose key would be longer than
    :data:`MAX_SESSION_ID_LENGTH` characters.
    """
    if isinstance(session_id, SessionKey):
        return session_id
    if not isinstance(session_id, str):
        raise SessionIdError(
            f"session id must be a str, got {type(session_id).__name__} {session_id!r}; pass the id as a string"
        )
    if not session_id:
        raise SessionIdError(f"session id is empty; pass a non-empty id ({_FIX})")
    if _is_plain(session_id):
        return SessionKey(session_id)
    key = _encoded(session_id)
    if len(key) > MAX_SESSION_ID_LENGTH:
        shown = session_id if len(session_id) <= 40 else session_id[:40] + "..."
        raise SessionIdError(
            f"session id {shown!r} ({len(session_id)} characters) needs a store key of {len(key)} characters "
            f"(characters other than letters, digits and '-' take 3 characters each, more outside ASCII); "
            f"the limit is {MAX_SESSION_ID_LENGTH}. Use a shorter id (a hash of a long name works)"
        )
    return SessionKey(key)


def original_session_id(key: str) -> str:
    """The session id a store key was made from by :func:`session_key` (``key`` itself for a plain id)."""
    decoded = _decoded(key) if key.startswith(KEY_PREFIX) else None
    return key if decoded is None else decoded


def _encoded(text: str) -> str:
    data = text.encode("utf-8", "surrogatepass")
    return KEY_PREFIX + "".join(chr(b) if chr(b) in _KEPT else f"_{b:02X}" for b in data)


def _decoded(key: str) -> str | None:
    """The text whose key ``key`` is, or None when :func:`session_key` gives no such key."""
    body = key[len(KEY_PREFIX) :]
    if _ESCAPED.fullmatch(body) is None:
        return None
    data = bytearray()
    i = 0
    while i < len(body):
        if body[i] == "_":
            data.append(int(body[i + 1 : i + 3], 16))
            i += 3
        else:
            data.append(ord(body[i]))
            i += 1
    try:
        text = data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None
    if not text or _encoded(text) != key or _is_plain(text):
        return None
    return text


def _is_plain(value: str) -> bool:
    """Whether ``value`` is its own key: a valid id that cannot be mistaken for an encoded one."""
    if value.startswith(KEY_PREFIX):
        return False
    try:
        _check(value, "session id")
    except SessionIdError:
        return False
    return True


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
