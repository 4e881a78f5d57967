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
