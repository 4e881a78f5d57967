"""``redact``: remove secrets from tool results and messages before the model sees them.

A third-party ctxlife strategy, written only against the public ``ctxlife`` API. It acts at
two nodes:

* after a tool returns (node 4): the result the model will see is redacted;
* before each model call (node 2): every message is redacted, so secrets typed by the user
  or restored from a session never reach the provider either;
* whenever text leaves the session store (``ctxlife_filter_text``): a restored conversation,
  passages the ``recall`` strategy and the recall tools bring back, and what ``ctxlife session
  show/export/search``, ``ctxlife report`` and ``ctxlife replay --session`` print, so a secret
  written to the history before redaction ran never comes back by another way.

Each secret becomes ``[REDACTED:<kind>]``. Actions record counts per kind, never the secrets.
"""

from __future__ import annotations

import re
from collections import Counter

from pydantic import Field, field_validator

import ctxlife

BUILTIN_PATTERNS: dict[str, str] = {
    "openai_key": r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}",
    "anthropic_key": r"\bsk-ant-[A-Za-z0-9_-]{20,}",
    "aws_access_key": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "github_token": r"\bgh[pousr]_[A-Za-z0-9]{36,}\b",
    "slack_token": r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
    "bearer_token": r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}=*",
    "private_key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    "password_assignment": r"(?i)\b(?:password|passwd|secret|api[_-]?key)\s*[:=]\s*['\"]?[^\s'\"]{6,}",
}


class Redact(ctxlife.Strategy):
    name = "redact"

    class Options(ctxlife.Options):
        kinds: list[str] = Field(
            default_factory=lambda: list(BUILTIN_PATTERNS),
            description=f"Built-in secret kinds to redact: {', '.join(BUILTIN_PATTERNS)}.",
        )
        patterns: dict[str, str] = Field(
            default_factory=dict, description="Extra kinds: a table of kind = regular expression."
        )
        replacement: str = Field("[REDACTED:{kind}]", description="What a secret becomes; {kind} names the kind.")

        @field_validator("kinds")
        @classmethod
        def _known_kinds(cls, kinds: list[str]) -> list[str]:
            unknown = sorted(set(kinds) - set(BUILTIN_PATTERNS))
            if unknown:
                raise ValueError(f"unknown kinds {unknown}; built-in kinds are {sorted(BUILTIN_PATTERNS)}")
            return kinds

        @field_validator("patterns")
        @classmethod
        def _compiles(cls, patterns: dict[str, str]) -> dict[str, str]:
            for kind, pattern in patterns.items():
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"pattern {kind!r} is not a valid regular expression: {exc}") from None
            return patterns

    options: Options  # so that type checkers know self.options is a Redact.Options

    def __init__(self, options: Redact.Options | None = None, settings: ctxlife.SharedSettings | None = None) -> None:
        super().__init__(options, settings)
        # Compile once; the hooks run on every call.
        chosen = {kind: BUILTIN_PATTERNS[kind] for kind in self.options.kinds}
        chosen.update(self.options.patterns)
        self._patterns = [(kind, re.compile(pattern)) for kind, pattern in chosen.items()]

    def redact(self, text: str) -> tuple[str, Counter[str]]:
        """``text`` with every secret replaced, and how many of each kind were found."""
        found: Counter[str] = Counter()
        for kind, pattern in self._patterns:
            replacement = self.options.replacement.format(kind=kind)
            text, n = pattern.subn(replacement, text)
            if n:
                found[kind] += n
        return text, found

    @ctxlife.hookimpl
    def ctxlife_after_tool_call(self, ctx: ctxlife.ToolCallContext) -> None:
        if not ctx.result:
            return
        clean, found = self.redact(ctx.result)
        if found:
            ctx.result = clean
            ctx.record("redacted", where="tool_result", tool=ctx.tool_name, **found)

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: ctxlife.LLMCallContext) -> None:
        total: Counter[str] = Counter()
        for i, message in enumerate(ctx.messages):
            content = message.get("content")
            if not isinstance(content, str) or not content:
                continue
            clean, found = self.redact(content)
            if found:
                ctx.messages[i] = {**message, "content": clean}  # replace the dict, never edit it
                total.update(found)
        if total:
            ctx.record("redacted", where="messages", **total)

    @ctxlife.hookimpl
    def ctxlife_filter_text(self, ctx: ctxlife.TextContext) -> None:
        clean, found = self.redact(ctx.text)
        if found:
            ctx.text = clean
            ctx.record("redacted", where=ctx.where, **found)
