"""What a summarizer is asked (:class:`SummaryRequest`) and what it must be (:class:`Summarizer`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ctxlife.errors import CtxlifeError, InvalidMessagesError
from ctxlife.facts import Fact
from ctxlife.messages import content_text, starts_with_summary_marker, strip_summary_marker


class SummarizerError(CtxlifeError):
    """A summarizer was given a bad request or produced an unusable result."""


@dataclass
class SummaryRequest:
    """What a summarizer is asked to do.

    ``messages``
        the evicted span (OpenAI-format message dicts), oldest first.
    ``previous_summary``
        the running summary so far (with or without the ``History summary:``
        marker), or ``None``. It is folded in; the messages it summarized are
        not part of ``messages``.
    ``max_tokens``
        the budget for the returned text, measured with ``count_tokens``.
    ``count_tokens``
        ``str -> int``, the caller's token counter.
    ``facts``
        the ledger facts of the span (from :func:`ctxlife.facts.extract_facts`);
        ``None`` lets the summarizer extract them itself.
    """

    messages: Sequence[Mapping[str, Any]]
    previous_summary: str | None
    max_tokens: int
    count_tokens: Callable[[str], int]
    facts: Sequence[Fact] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.messages, (str, bytes)) or not isinstance(self.messages, Sequence):
            raise InvalidMessagesError(
                f"SummaryRequest.messages must be a list of message dicts, got {type(self.messages).__name__}"
            )
        for i, m in enumerate(self.messages):
            if not isinstance(m, Mapping):
                raise InvalidMessagesError(
                    f"SummaryRequest.messages[{i}] must be a message dict, got {type(m).__name__}"
                )
        if self.previous_summary is not None and not isinstance(self.previous_summary, str):
            raise SummarizerError("SummaryRequest.previous_summary must be a string or None")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 0:
            raise SummarizerError(f"SummaryRequest.max_tokens must be an int >= 0, got {self.max_tokens!r}")
        if not callable(self.count_tokens):
            raise SummarizerError("SummaryRequest.count_tokens must be a callable str -> int")


@runtime_checkable
class Summarizer(Protocol):
    """Anything with ``summarize(request) -> str``.

    The result is the summary body (no ``History summary:`` marker). Callers
    must treat an empty result, an exception or a result over
    ``request.max_tokens`` as a failed summary.
    """

    def summarize(self, request: SummaryRequest) -> str: ...


def running_summary_and_span(request: SummaryRequest) -> tuple[str, list[Mapping[str, Any]]]:
    """Split a request into the running summary to fold and the messages to summarize.

    The running summary is ``previous_summary`` plus any summary message found inside the span
    (one summary is never summarized as if it were conversation, nor nested in another), every
    ``History summary:`` marker removed.
    """
    previous = strip_summary_marker(request.previous_summary)
    span: list[Mapping[str, Any]] = []
    for m in request.messages:
        if starts_with_summary_marker(m):
            extra = strip_summary_marker(content_text(m.get("content")))
            previous = (previous + "\n" + extra).strip() if previous else extra
        else:
            span.append(m)
    return previous, span
