"""Model calls ctxlife makes itself through a CrewAI LLM (a summary), told apart from the agent's own.

ctxlife's CrewAI hooks skip such a call (it is not managed again), and CrewAI's terminal output for
it stays quiet: ctxlife handles its failure (a fallback summary) and reports it as one event, so
CrewAI's "LLM Error" panel and its providers' ``logging.error`` lines would only alarm. The agent's
own calls print as CrewAI always does. No ctxlife imports: the CrewAI adapter and
:mod:`ctxlife.models` (a CrewAI LLM given as ``summary_model=``) both use it.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import threading
from collections.abc import Callable, Iterator

# Set while ctxlife itself calls a model (a summarizer, see own_model_call).
_own_call: contextvars.ContextVar[bool] = contextvars.ContextVar("ctxlife_own_model_call", default=False)


def in_own_model_call() -> bool:
    """Whether the current context is inside :func:`own_model_call`."""
    return _own_call.get()


@contextlib.contextmanager
def own_model_call() -> Iterator[None]:
    """Around a CrewAI model call that ctxlife makes and handles itself (a summary).

    ctxlife's hooks skip the call, and CrewAI's terminal output for it is held back: the "LLM Error"
    panel (and any other panel) its console formatter prints for a verbose crew, and the root-logger
    ``logging.error`` lines of its LLM providers. Only this context is quiet: the event bus still
    sees the call (tracing, listeners), and calls in other threads and contexts print as usual.
    """
    _install_log_filter()
    own = _own_call.set(True)
    quiet = _ConsoleQuiet()
    try:
        yield
    finally:
        quiet.restore()
        _own_call.reset(own)


class _ConsoleQuiet:
    """CrewAI's console suppression switched on for the current context, restorable.

    ``set_suppress_console_output``/``should_suppress_console_output`` (crewai 1.15,
    ``crewai.events.utils.console_formatter``; a context variable its ``ConsoleFormatter.print``
    reads, and the event bus copies the emitting context into its handler threads) are not in
    CrewAI's documentation. When a CrewAI version lacks them, nothing is suppressed: a verbose
    crew prints the panel again, and ctxlife works as before.
    """

    def __init__(self) -> None:
        self._set: Callable[[bool], object] | None = None
        self._previous = False
        try:
            from crewai.events.utils import console_formatter  # lazy: crewai is an optional extra
        except ImportError:
            return
        set_suppress = getattr(console_formatter, "set_suppress_console_output", None)
        is_suppressed = getattr(console_formatter, "should_suppress_console_output", None)
        if not (callable(set_suppress) and callable(is_suppressed)):
            return
        self._previous = bool(is_suppressed())
        set_suppress(True)
        self._set = set_suppress

    def restore(self) -> None:
        if self._set is not None:
            self._set(self._previous)


class _OwnCallLogFilter(logging.Filter):
    """Drops records CrewAI's code logs through the root logger during :func:`own_model_call`.

    CrewAI's providers report a failed call with module-level ``logging.error(...)`` before raising
    it; everything else (other loggers, other contexts, ctxlife's own events) passes untouched.
    """

    _crewai_dir = f"{os.sep}crewai{os.sep}"

    def filter(self, record: logging.LogRecord) -> bool:
        return not (in_own_model_call() and self._crewai_dir in record.pathname)


_log_filter_lock = threading.Lock()


def _install_log_filter() -> None:
    """Put :class:`_OwnCallLogFilter` on the root logger, once (at the first own call, not at import)."""
    root = logging.getLogger()
    if any(isinstance(f, _OwnCallLogFilter) for f in root.filters):
        return
    with _log_filter_lock:
        if not any(isinstance(f, _OwnCallLogFilter) for f in root.filters):
            root.addFilter(_OwnCallLogFilter())
