"""Helpers for a store's URL: its query options (flags, a TTL), checked and named in errors.

Passwords never appear in an error: URLs are shown through :func:`ctxlife.events.redact_url`.
"""

from __future__ import annotations

from urllib.parse import SplitResult, parse_qsl, urlsplit

from ctxlife.errors import StoreError
from ctxlife.events import redact_url
from ctxlife.sessions.durations import parse_duration

__all__ = [
    "parse_bool",
    "parse_query",
    "parse_ttl",
    "split_query",
]


def parse_bool(value: str, name: str, url: str) -> bool:
    """Parse a URL query flag (``1/0/true/false/yes/no/on/off``)."""
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise StoreError(f"store URL {url!r}: option {name}={value!r} must be true or false")


def parse_query(url: str, query: str, allowed: tuple[str, ...]) -> dict[str, str]:
    """Parse a store URL's query string, rejecting options not in ``allowed`` by name."""

    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise StoreError(f"store URL {redact_url(url)!r} has a malformed query string") from None
    opts: dict[str, str] = {}
    for k, v in pairs:
        if k not in allowed:
            known = ", ".join(allowed) or "none"
            raise StoreError(f"store URL {redact_url(url)!r}: unknown option {k!r} (known options: {known})")
        opts[k] = v
    return opts


def parse_ttl(opts: dict[str, str], url: str) -> float | None:
    """The ``ttl`` option of a store URL in seconds of idle life per session, None when absent (its forms:
    :func:`ctxlife.sessions.durations.parse_duration`)."""

    raw = opts.get("ttl")
    if raw is None or raw == "":
        return None
    try:
        return parse_duration(raw)
    except ValueError as exc:
        raise StoreError(f"store URL {redact_url(url)!r}: ttl={raw!r}: {exc}") from None


def split_query(
    url: str, names: tuple[str, ...], kind: str
) -> tuple[SplitResult, list[tuple[str, str]], dict[str, str]]:
    """Take ctxlife's options ``names`` out of a server store's URL: its parts, the query pairs left
    (the driver's own) and ctxlife's."""
    try:
        parts = urlsplit(url)
        pairs = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError as exc:
        raise StoreError(f"malformed {kind} store URL {redact_url(url)!r}: {exc}") from None
    return parts, [(k, v) for k, v in pairs if k not in names], {k: v for k, v in pairs if k in names}
