"""Summarize with a language model the caller provides (``complete(messages, max_tokens) -> str``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ctxlife.errors import ConfigError
from ctxlife.facts import FACT_LIST_HEADER, extract_facts, format_fact_list
from ctxlife.messages import strip_summary_marker
from ctxlife.summarizers.base import SummarizerError, SummaryRequest, running_summary_and_span
from ctxlife.summarizers.extractive import ExtractiveSummarizer
from ctxlife.summarizers.rendering import render_messages

DEFAULT_SYSTEM_PROMPT = (
    "You summarize an AI agent's conversation for the agent's own later use. Your summary replaces "
    "the messages you are shown in the agent's context, so write what the agent needs to carry on:\n"
    "- the user's requests, goals and preferences;\n"
    "- what was decided and done, and each tool call as what was called, with which arguments, "
    "and what came back;\n"
    "- open tasks, pending tool calls and unanswered questions.\n"
    "Keep every identifier, code, number, amount, date, time, email address, URL and file path "
    "exactly as written. If a previous summary is given, fold it and the new messages into one "
    "updated summary and keep its facts. Be concise and factual; do not invent anything. "
    "Reply with the summary text only: no preamble, no title, no code fences."
)


class LLMSummarizer:
    """Summarize with a language model.

    ``complete(messages, max_tokens) -> str`` sends OpenAI-format ``messages`` to
    a model and returns its reply; the caller wires it to a real LLM (the
    strategy uses the agent's own LLM or a configured model). The prompt is a
    system message (:data:`DEFAULT_SYSTEM_PROMPT`, replaceable) and a user
    message with the previous summary, the new messages rendered by
    :func:`render_messages`, and the ledger facts that must survive.

    ``max_input_tokens`` (optional, needs ``count_tokens`` of the request): if the
    rendered span is larger, it is first condensed with
    :class:`ExtractiveSummarizer` to that size.

    The reply is stripped of code fences and of any ``History summary:`` marker;
    it is *not* truncated: the caller decides what to do with an empty or
    oversized reply (the strategy falls back to truncation).
    """

    name = "llm"

    def __init__(
        self,
        complete: Callable[[list[dict[str, Any]], int], str],
        *,
        system_prompt: str | None = None,
        max_input_tokens: int | None = None,
    ) -> None:
        if not callable(complete):
            raise ConfigError("LLMSummarizer: 'complete' must be a callable (messages, max_tokens) -> str")
        if max_input_tokens is not None and (not isinstance(max_input_tokens, int) or max_input_tokens < 1):
            raise ConfigError(f"LLMSummarizer: max_input_tokens must be a positive int, got {max_input_tokens!r}")
        self.complete = complete
        self.system_prompt = system_prompt or DEFAULT_SYSTEM_PROMPT
        self.max_input_tokens = max_input_tokens

    def __repr__(self) -> str:  # pragma: no cover - trivial
        return f"LLMSummarizer(complete={self.complete!r})"

    def build_messages(self, request: SummaryRequest) -> list[dict[str, Any]]:
        """The prompt sent to ``complete`` (exposed for tests and debugging)."""
        prev, msgs = running_summary_and_span(request)
        transcript = render_messages(msgs)
        if self.max_input_tokens is not None and request.count_tokens(transcript) > self.max_input_tokens:
            transcript = ExtractiveSummarizer(fact_list=False).summarize(
                SummaryRequest(msgs, None, self.max_input_tokens, request.count_tokens, request.facts)
            )
        facts = list(request.facts) if request.facts is not None else extract_facts(msgs)
        parts = []
        if prev:
            parts.append("Previous summary:\n" + prev)
        parts.append("New messages:\n" + (transcript or "(none)"))
        if facts:
            fact_block = format_fact_list(facts, 10**9, len)
            parts.append("Facts to keep exactly as written:\n" + fact_block[len(FACT_LIST_HEADER) :].strip())
        parts.append(f"Write the updated summary in at most {request.max_tokens} tokens. Reply with the summary only.")
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": "\n\n".join(parts)},
        ]

    def summarize(self, request: SummaryRequest) -> str:
        if request.max_tokens <= 0:
            return ""
        reply = self.complete(self.build_messages(request), request.max_tokens)
        if not isinstance(reply, str):
            raise SummarizerError(f"LLMSummarizer: complete() must return a str, got {type(reply).__name__}")
        return _clean_reply(reply)


def _clean_reply(reply: str) -> str:
    s = reply.strip()
    fence = re.fullmatch(r"```[\w-]*\s*\n?(.*?)\n?```", s, re.DOTALL)
    if fence:
        s = fence.group(1).strip()
    s = re.sub(r"^(?:summary|updated summary)\s*:\s*", "", s, flags=re.IGNORECASE)
    return strip_summary_marker(s)
