"""``tool_cache``: answer a repeated identical tool call from the session's cache.

What it does, its options and why: docs/strategies/tool_cache.md.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from typing import Any, ClassVar

from pydantic import Field

import ctxlife
from ctxlife.messages import tool_name_key

#: Most results cached per session (least recently used dropped first): a bound on memory, not a tuning knob.
MAX_ENTRIES = 256
# Results starting like this are framework or tool failures; they are not cached.
_FAILURE_PREFIXES = (
    "error",
    "i encountered an error",
    "i tried reusing the same input",
    "tool execution blocked",
    "you tried to use the tool",
)


def cache_key(tool_name: str, tool_input: Any) -> str:
    """The tool's name (NFC, case-folded, JSON-quoted) and its arguments as canonical JSON (sorted keys, no spaces)."""
    arguments = json.dumps(tool_input, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return f"{json.dumps(tool_name_key(tool_name), ensure_ascii=False)}:{arguments}"


class ToolCache(ctxlife.Strategy):
    """Return the earlier result of an identical call to an allow-listed tool instead of running it."""

    name = "tool_cache"

    class Options(ctxlife.Options):
        tools: list[ctxlife.NonBlankStr] = Field(
            default_factory=list,
            description=(
                "The tools whose results may be reused (read-only, deterministic ones). Empty: nothing is cached."
            ),
        )
        ttl_seconds: float | None = Field(
            None,
            gt=0,
            description="Forget a cached result after this many seconds (default: keep it for the session).",
        )
        retired: ClassVar[dict[str, str]] = {
            "max_entries": f"the cache holds at most {MAX_ENTRIES} results per session (ctxlife_strategies.tool_cache"
            ".MAX_ENTRIES), least recently used dropped first"
        }

    options: Options

    def __init__(
        self, options: ToolCache.Options | None = None, settings: ctxlife.SharedSettings | None = None
    ) -> None:
        super().__init__(options, settings)
        opts = self.options
        self._tools = frozenset(tool_name_key(t) for t in opts.tools)
        self._ttl = opts.ttl_seconds
        self._max = MAX_ENTRIES
        self.clock = time.monotonic  # replaceable in tests

    def _entries(self, state: dict[str, Any]) -> OrderedDict[str, tuple[str, int, float]]:
        entries = state.get("entries")
        if entries is None:
            entries = state["entries"] = OrderedDict()
        return entries

    @ctxlife.hookimpl
    def ctxlife_before_tool_call(self, ctx: ctxlife.ToolCallContext) -> None:
        state = ctx.state
        call_no = state["calls"] = state.get("calls", 0) + 1
        name = tool_name_key(ctx.tool_name)
        if name not in self._tools:
            return
        key = cache_key(name, ctx.tool_input)
        entries = self._entries(state)
        found = entries.get(key)
        if found is not None:
            result, first_call, stored_at = found
            if self._ttl is not None and self.clock() - stored_at > self._ttl:
                del entries[key]
                ctx.record("expired", tool=ctx.tool_name, call=first_call)
            else:
                entries.move_to_end(key)
                ctx.result = f"[cached result from call {first_call}]\n{result}"
                ctx.record("hit", tool=ctx.tool_name, call=first_call)
                return
        state.setdefault("pending", {})[key] = call_no

    @ctxlife.hookimpl
    def ctxlife_after_tool_call(self, ctx: ctxlife.ToolCallContext) -> None:
        name = tool_name_key(ctx.tool_name)
        if name not in self._tools:
            return
        key = cache_key(name, ctx.tool_input)
        pending: dict[str, int] = ctx.state.setdefault("pending", {})
        call_no = pending.pop(key, None)
        if ctx.skipped_by is not None or call_no is None:
            return  # answered without running (by this cache or another strategy): nothing new to store
        result = _result_text(ctx.raw_result, ctx.result)
        if result is None or _looks_failed(result):
            return
        entries = self._entries(ctx.state)
        entries[key] = (result, call_no, self.clock())
        entries.move_to_end(key)
        evicted = 0
        while len(entries) > self._max:
            entries.popitem(last=False)
            evicted += 1
        ctx.record("stored", tool=ctx.tool_name, call=call_no, entries=len(entries), evicted=evicted)


def _result_text(raw: Any, shown: str | None) -> str | None:
    """The tool's own result as text (before other strategies reshaped what the model sees)."""
    if raw is None:
        return shown
    return raw if isinstance(raw, str) else str(raw)


def _looks_failed(result: str) -> bool:
    return result.lstrip().lower().startswith(_FAILURE_PREFIXES)
