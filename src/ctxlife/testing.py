"""A kit for strategy authors' tests: message builders, a hook recorder, a scripted offline LLM.

It is for tests of strategies only; ctxlife's own code never imports it. Everything here is
importable without CrewAI except :func:`scripted_llm` (from :mod:`ctxlife.integrations.scripted`),
which builds a real ``crewai.llms.base_llm.BaseLLM`` subclass on first use; CrewAI's telemetry must
be off before it is imported (:func:`offline_environment`). How to use it: docs/writing-a-strategy.md.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import ctxlife
from ctxlife.contexts import HookContext
from ctxlife.integrations.scripted import (
    OFFLINE_ENV,
    Reply,
    offline_environment,
    react_action,
    react_final,
    scripted_llm,
)

__all__ = [
    "OFFLINE_ENV",
    "HookCall",
    "HookRecorder",
    "Reply",
    "assistant",
    "conversation",
    "installed_strategy",
    "offline_environment",
    "react_action",
    "react_final",
    "scripted_llm",
    "system",
    "tool_call",
    "tool_result",
    "user",
]

# -- message builders -------------------------------------------------------------------


def system(content: str) -> dict[str, Any]:
    return {"role": "system", "content": content}


def user(content: str) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: str | None = None, tool_calls: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    return message


def tool_call(name: str, arguments: dict[str, Any] | None = None, call_id: str | None = None) -> dict[str, Any]:
    """An OpenAI-format tool call (also what the scripted LLM returns in native mode)."""
    return {
        "id": call_id or f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments or {})},
    }


def tool_result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def conversation(
    rounds: int, *, tools_per_round: int = 0, system_prompt: str = "You are a helpful agent.", result_size: int = 40
) -> list[dict[str, Any]]:
    """A synthetic valid conversation: ``rounds`` user turns, each with tool units and an answer."""
    messages = [system(system_prompt)]
    for r in range(rounds):
        messages.append(user(f"Request {r}: please look up item R{r:04d}."))
        for t in range(tools_per_round):
            call = tool_call("lookup", {"item": f"R{r:04d}", "n": t}, call_id=f"call_{r}_{t}")
            messages.append(assistant(None, [call]))
            messages.append(tool_result(call["id"], f"item R{r:04d} part {t}: " + "data " * result_size))
        messages.append(assistant(f"Item R{r:04d} is in stock."))
    return messages


# -- hook recorder ----------------------------------------------------------------------


@dataclass
class HookCall:
    """One recorded hook call: which hook, and a snapshot of the context's public fields."""

    hook: str
    ctx: HookContext
    snapshot: dict[str, Any] = field(default_factory=dict)


class HookRecorder:
    """A plugin implementing all six hooks that records every call (pass it in ``plugins=``)."""

    name = "recorder"

    def __init__(self) -> None:
        self.calls: list[HookCall] = []
        self._lock = threading.Lock()

    def _record(self, hook: str, ctx: HookContext) -> None:
        snapshot = {
            k: copy.deepcopy(v)
            for k, v in vars(ctx).items()
            if not k.startswith("_") and k not in {"tokens", "complete", "actions", "state"}
        }
        with self._lock:
            self.calls.append(HookCall(hook, ctx, snapshot))

    def hooks(self) -> list[str]:
        """The hook names called, in order."""
        return [c.hook for c in self.calls]

    def of(self, hook: str) -> list[HookCall]:
        return [c for c in self.calls if c.hook == hook]

    @ctxlife.hookimpl
    def ctxlife_bootstrap(self, ctx: Any) -> None:
        self._record("ctxlife_bootstrap", ctx)

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: Any) -> None:
        self._record("ctxlife_before_llm_call", ctx)

    @ctxlife.hookimpl
    def ctxlife_before_tool_call(self, ctx: Any) -> None:
        self._record("ctxlife_before_tool_call", ctx)

    @ctxlife.hookimpl
    def ctxlife_after_tool_call(self, ctx: Any) -> None:
        self._record("ctxlife_after_tool_call", ctx)

    @ctxlife.hookimpl
    def ctxlife_task_start(self, ctx: Any) -> None:
        self._record("ctxlife_task_start", ctx)

    @ctxlife.hookimpl
    def ctxlife_task_end(self, ctx: Any) -> None:
        self._record("ctxlife_task_end", ctx)


@contextmanager
def installed_strategy(strategy_cls: type[ctxlife.Strategy[Any]]) -> Iterator[type[ctxlife.Strategy[Any]]]:
    """Make ``strategy_cls`` findable by name in configs for the duration of a block.

    It is registered in the process-wide strategy registry ahead of installed packages,
    and what was there before is restored afterwards, so a test can write
    ``strategies = ["mine"]`` in a config.
    """
    from ctxlife.plugins import registry  # lazy: pytest loads the test kit in every run; pydantic only when used

    with registry().registered(strategy_cls.name, strategy_cls):
        yield strategy_cls
