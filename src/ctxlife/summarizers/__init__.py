"""Summarizers: turn an evicted span of messages into a short running summary.

Shared by the ``llm_summary`` compaction strategy and by task-boundary strategies; framework neutral,
no import-time side effects. The summarizers a config picks and how a package adds one (the
``ctxlife.summarizers`` entry-point group, looked up only when an unknown name is asked for):
docs/strategies/llm_summary.md, "Summarizers". A summary is a *running* one: the
``previous_summary`` is folded together with the new messages (old messages are never re-read,
summaries never nested). Summarizers return the summary *body* only; the caller adds the
``History summary:`` marker (:data:`SUMMARY_PREFIX`) when it builds the message.

Modules: :mod:`~ctxlife.summarizers.base` (:class:`SummaryRequest`, the :class:`Summarizer`
protocol, errors), :mod:`~ctxlife.summarizers.rendering` (transcripts, compact JSON, token budgets),
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
