"""Summarizers: turn an evicted span of messages into a short running summary.

Shared by the ``llm_summary`` compaction strategy and by task-boundary
strategies. Framework neutral, pure Python, no import-time side effects.

* :class:`SummaryRequest` -- what to summarize: the evicted ``messages``, the
  ``previous_summary`` (a *running* summary: it is folded together with the new
  messages; old messages are never re-read, summaries are never nested), the
  token budget and the ledger ``facts`` the summary should keep.
* :class:`Summarizer` -- the protocol: ``summarize(request) -> str``.
* :class:`ExtractiveSummarizer` (``"extractive"``) -- offline, no model.
* :class:`LLMSummarizer` (``"llm"``) -- builds a prompt and calls a
  ``complete(messages, max_tokens) -> str`` function supplied by the caller.
* A registry: :func:`register_summarizer`, :func:`get_summarizer`,
  :func:`available_summarizers`; third-party packages can also publish a factory
  under the entry-point group ``ctxlife.summarizers`` (looked up lazily, only
  when an unknown name is asked for)::

      # pyproject.toml of a third-party package
      [project.entry-points."ctxlife.summarizers"]
      bullet = "my_pkg.summaries:BulletSummarizer"

* :func:`render_messages` -- a readable transcript of a span, tool calls paired
  with their results by position.

Summarizers return the summary *body* only; the caller adds the
``History summary:`` marker (:data:`SUMMARY_PREFIX`) when it builds the message.

Modules: :mod:`~ctxlife.summarizers.base` (request, protocol, errors),
:mod:`~ctxlife.summarizers.rendering` (transcripts, compact JSON, token budgets),
:mod:`~ctxlife.summarizers.candidates` and :mod:`~ctxlife.summarizers.extractive` (the offline
summarizer), :mod:`~ctxlife.summarizers.llm`, :mod:`~ctxlife.summarizers.registry`.
"""

from __future__ import annotations

from ctxlife.messages import SUMMARY_PREFIX, strip_summary_marker
from ctxlife.summarizers.base import Summarizer, SummarizerError, SummaryRequest
from ctxlife.summarizers.extractive import ExtractiveSummarizer
from ctxlife.summarizers.llm import (
    CHINESE_SYSTEM_PROMPT,
    DEFAULT_SYSTEM_PROMPT,
    LLMSummarizer,
    conversation_language,
    cut_at_lines,
)
from ctxlife.summarizers.registry import (
    ENTRY_POINT_GROUP,
    available_summarizers,
    get_summarizer,
    register_summarizer,
    unregister_summarizer,
)
from ctxlife.summarizers.rendering import render_messages, truncate_to_tokens

__all__ = [
    "CHINESE_SYSTEM_PROMPT",
    "DEFAULT_SYSTEM_PROMPT",
    "ENTRY_POINT_GROUP",
    "SUMMARY_PREFIX",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "Summarizer",
    "SummarizerError",
    "SummaryRequest",
    "available_summarizers",
    "conversation_language",
    "cut_at_lines",
    "get_summarizer",
    "register_summarizer",
    "render_messages",
    "strip_summary_marker",
    "truncate_to_tokens",
    "unregister_summarizer",
]
