"""Structured events, without configuring logging.

If the application configured structlog, ctxlife's events go through that
configuration. Otherwise they go to the standard-library logger ``ctxlife``
(so, with no logging set up, only warnings and errors reach stderr, and an
application turns the rest on with ``logging.getLogger("ctxlife").setLevel``).
Events carry counts and names, never message contents, unless the settings turn
``log_content`` on, and never a secret: a URL's password (``redis://:pw@host``, ``?password=pw``) is
replaced by ``***`` in every string field (:func:`redact_url`), and :func:`redacted` does the same
for settings printed whole (``ctxlife check``), with the value of any key that names a secret
(``api_key``, ``password``, ``token``, ...).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["describe_error", "emit"]

_stdlib_loggers: dict[str, Any] = {}


def get_logger(name: str = "ctxlife") -> Any:
    """A structlog logger for ``name``, resolved now (call it per event, it is cheap)."""
    # lazy: the store layer and the CLI import this module for redact_url; structlog loads at the first event
    import structlog

    if structlog.is_configured():
        return structlog.get_logger(name)
    logger = _stdlib_loggers.get(name)
    if logger is None:
        logger = structlog.wrap_logger(
            logging.getLogger(name),
            processors=[
                structlog.stdlib.filter_by_level,
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso"),
                structlog.processors.format_exc_info,
                structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True),
            ],
            wrapper_class=structlog.stdlib.BoundLogger,
        )
        _stdlib_loggers[name] = logger
    return logger


def emit(level: str, event: str, *, logger: str = "ctxlife", **fields: Any) -> None:
    """Emit one structured event at ``level`` ("debug", "info", "warning", "error"); a URL's password
    in a string field is replaced by ``***``."""
    getattr(get_logger(logger), level)(event, **_safe(fields))


#: Keys whose value is a secret: names ending in ``password``, ``secret``, ``token``, ``api_key``,
#: ``auth``, ... (``client_secret``, ``auth_token``); not ``max_tokens`` or ``api_key_env`` (a name).
SECRET_KEY = re.compile(
    r"(?:^|[_-])(?:pass|passwd|password|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key"
    r"|credentials?|auth)$",
    re.I,
)
REDACTED = "***"
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def redact_url(url: str) -> str:
    """``url`` with its password (in the user part or a query option that names a secret) as ``***``."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc
    if password is not None:
        user = parts.username or ""
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        try:
            port = parts.port
        except ValueError:
            port = None
        netloc = f"{user}:{REDACTED}@{host}" + (f":{port}" if port is not None else "")
    query = parts.query
    pairs = parse_qsl(query, keep_blank_values=True) if "=" in query else []
    if any(SECRET_KEY.search(k) for k, _ in pairs):
        query = urlencode([(k, REDACTED if SECRET_KEY.search(k) else v) for k, v in pairs], safe="*:/")
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str) -> str:
    """``text`` with the password of every URL in it replaced (see :func:`redact_url`)."""
    if "://" not in text:
        return text
    return _URL.sub(lambda m: redact_url(m.group(0)), text)


def redacted(value: Any) -> Any:
    """A copy of ``value`` (dicts, lists, strings) safe to print: URL passwords and the values of
    keys that name a secret (:data:`SECRET_KEY`) replaced by ``***``."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {
            k: (REDACTED if isinstance(k, str) and SECRET_KEY.search(k) and v not in (None, "") else redacted(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redacted(v) for v in value]
    return value


def _safe(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with URL passwords redacted from its strings (cheap: most fields hold no ``://``)."""
    for key, value in fields.items():
        if isinstance(value, str) and "://" in value:
            fields[key] = redact_text(value)
    return fields


class Logger:
    """A module-level logger that resolves :func:`get_logger` at each event (safe to create at import)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def debug(self, event: str, **fields: Any) -> None:
        get_logger(self.name).debug(event, **_safe(fields))

    def info(self, event: str, **fields: Any) -> None:
        get_logger(self.name).info(event, **_safe(fields))

    def warning(self, event: str, **fields: Any) -> None:
        get_logger(self.name).warning(event, **_safe(fields))

    def error(self, event: str, **fields: Any) -> None:
        get_logger(self.name).error(event, **_safe(fields))


QUOTE_RUN = 24
"""An exception text sharing a run of this many characters with message contents is taken to quote them."""


SHORT_QUOTE = 8


def quotes(text: str, haystacks: Iterable[str], run: int = QUOTE_RUN) -> bool:
    """Whether ``text`` shares a run of ``run`` or more characters with any of ``haystacks``.

    A shared run of ``run`` characters always covers one of the aligned blocks
    ``text[k*h:(k+1)*h]`` (``h = run // 2``), so only those blocks are searched for (with
    ``str.find``, in C); a hit is confirmed on the ``run``-character windows around it. A
    shorter text of at least :data:`SHORT_QUOTE` characters counts when it is quoted whole.
    """
    half = max(1, run // 2)
    haystacks = [h for h in haystacks if isinstance(h, str)]
    # A short content (a card number, an id as a tool argument) quoted whole counts too.
    if any(SHORT_QUOTE <= len(h) < run and h in text for h in haystacks):
        return True
    if len(text) < run:
        return False
    hays = [h for h in haystacks if len(h) >= run]
    if not hays:
        return False
    for start in range(0, len(text) - half + 1, half):
        block = text[start : start + half]
        for hay in hays:
            if block not in hay:
                continue
            for offset in range(max(0, start - (run - half)), min(start, len(text) - run) + 1):
                if text[offset : offset + run] in hay:
                    return True
    return False


def _with_escaped(contents: Iterable[str]) -> list[str]:
    """``contents`` and the forms an error text quotes them in: JSON-escaped (a provider error echoing
    the request body: ``\\n``, ``\\"``, ``\\u00e9``) and as Python reprs."""
    out: list[str] = []
    for text in contents:
        if not isinstance(text, str):
            continue
        out.append(text)
        for form in (json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1], repr(text)[1:-1]):
            if form != text:
                out.append(form)
    return out


def describe_error(exc: BaseException, contents: Iterable[str], *, log_content: bool) -> tuple[str, bool]:
    """``("Type: message", safe)`` for an error event.

    With ``log_content`` off, an exception whose text quotes message contents (pydantic's
    ``ValidationError`` echoing its input, a provider error echoing the prompt) is logged as its
    type and the length of its text only; ``safe`` is False then, and the caller must not attach
    the traceback (``exc_info``), which would carry the same text.
    """
    text = redact_text(str(exc))
    name = type(exc).__name__
    if log_content or not text:
        return (f"{name}: {text}" if text else name), True
    if quotes(text, _with_escaped(contents)):
        return (
            f"{name}: (message of {len(text)} characters withheld: it quotes message content; "
            "set log_content = true to see it)"
        ), False
    return f"{name}: {text}", True
