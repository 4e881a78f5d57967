"""Structured events, without configuring logging.

If the application configured structlog, ctxlife's events go through that
configuration. Otherwise they go to the standard-library logger ``ctxlife``
(so, with no logging set up, only warnings and errors reach stderr, and an
application turns the rest on with ``logging.getLogger("ctxlife").setLevel``).
Events carry counts and names, never message contents, unless the settings turn
``log_content`` on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import structlog

_stdlib_loggers: dict[str, Any] = {}


def get_logger(name: str = "ctxlife") -> Any:
    """A structlog logger for ``name``, resolved now (call it per event, it is cheap)."""
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
    """Emit one structured event at ``level`` ("debug", "info", "warning", "error")."""
    getattr(get_logger(logger), level)(event, **fields)


class Logger:
    """A module-level logger that resolves :func:`get_logger` at each event (safe to create at import)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def debug(self, event: str, **fields: Any) -> None:
        get_logger(self.name).debug(event, **fields)

    def info(self, event: str, **fields: Any) -> None:
        get_logger(self.name).info(event, **fields)

    def warning(self, event: str, **fields: Any) -> None:
        get_logger(self.name).warning(event, **fields)

    def error(self, event: str, **fields: Any) -> None:
        get_logger(self.name).error(event, **fields)


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


def describe_error(exc: BaseException, contents: Iterable[str], *, log_content: bool) -> tuple[str, bool]:
    """``("Type: message", safe)`` for an error event.

    With ``log_content`` off, an exception whose text quotes message contents (pydantic's
    ``ValidationError`` echoing its input, a provider error echoing the prompt) is logged as its
    type and the length of its text only; ``safe`` is False then, and the caller must not attach
    the traceback (``exc_info``), which would carry the same text.
    """
    text = str(exc)
    name = type(exc).__name__
    if log_content or not text:
        return (f"{name}: {text}" if text else name), True
    if quotes(text, contents):
        return (
            f"{name}: (message of {len(text)} characters withheld: it quotes message content; "
            "set log_content = true to see it)"
        ), False
    return f"{name}: {text}", True
