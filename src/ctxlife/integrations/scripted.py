"""An offline CrewAI LLM that replies from a script, for the demo and for tests of crews.

``scripted_llm(replies)`` builds a real ``crewai.llms.base_llm.BaseLLM`` subclass (on first use, so
importing this module does not import CrewAI) that answers from ``replies`` and records every
message list it receives in ``.calls`` (an example: docs/writing-a-strategy.md). CrewAI's telemetry,
tracing and version check must be off before it is imported (no network): :func:`offline_environment`
sets the variables. :mod:`ctxlife.testing` re-exports all of this for strategy authors.
"""

from __future__ import annotations

import copy
import json
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

OFFLINE_ENV = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "OTEL_SDK_DISABLED": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_DISABLE_VERSION_CHECK": "true",
}


def offline_environment() -> None:
    """Switch off CrewAI's telemetry, tracing and version check (call before importing crewai)."""
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)


# -- ReAct text builders ----------------------------------------------------------------


def react_action(tool: str, arguments: dict[str, Any], thought: str = "I should use a tool.") -> str:
    """A ReAct step asking CrewAI to run ``tool``."""
    return f"Thought: {thought}\nAction: {tool}\nAction Input: {json.dumps(arguments)}"


def react_final(answer: str, thought: str = "I now know the final answer.") -> str:
    """A ReAct final answer."""
    return f"Thought: {thought}\nFinal Answer: {answer}"


# -- the scripted LLM -------------------------------------------------------------------

Reply = str | list[dict[str, Any]] | Callable[[list[dict[str, Any]]], Any]

_llm_class: type | None = None


def _build_llm_class() -> type:
    offline_environment()
    # lazy: crewai reads the environment set just above (and importing this module does not import it)
    from crewai.llms.base_llm import BaseLLM
    from pydantic import PrivateAttr

    class ScriptedLLM(BaseLLM):
        """An offline CrewAI LLM that replies from a script and records what it receives.

        ``replies`` are consumed in order, across agents and tasks: a string (ReAct
        text or a final answer), a list of :func:`tool_call` dicts (native tool
        calling), or a callable ``f(messages) -> reply``. When the script runs out,
        ``default`` is returned.
        """

        context_window: int = 8192
        native_tools: bool = False
        default: str = react_final("Done.")
        _script: list[Any] = PrivateAttr(default_factory=list)
        _calls: list[list[dict[str, Any]]] = PrivateAttr(default_factory=list)
        _lock: Any = PrivateAttr(default_factory=threading.Lock)

        def set_script(self, replies: Iterable[Reply]) -> None:
            self._script = list(replies)

        @property
        def calls(self) -> list[list[dict[str, Any]]]:
            """Deep copies of the message lists received, one per call."""
            return self._calls

        def call(
            self,
            messages: Any,
            tools: Any = None,
            callbacks: Any = None,
            available_functions: Any = None,
            from_task: Any = None,
            from_agent: Any = None,
            response_model: Any = None,
        ) -> Any:
            if isinstance(messages, str):
                messages = [{"role": "user", "content": messages}]
            with self._lock:
                self._calls.append(copy.deepcopy(list(messages)))
                reply: Any = self._script.pop(0) if self._script else self.default
            if callable(reply):
                reply = reply(messages)
            return copy.deepcopy(reply) if isinstance(reply, list) else reply

        async def acall(self, *args: Any, **kwargs: Any) -> Any:
            return self.call(*args, **kwargs)

        def supports_function_calling(self) -> bool:
            return self.native_tools

        def supports_stop_words(self) -> bool:
            return not self.native_tools

        def get_context_window_size(self) -> int:
            return self.context_window

        def get_input_tokens_count(self, messages: Any, tools: Any = None, response_model: Any = None) -> int:
            # CrewAI's own preflight estimate (four characters a token), without its per-call warning.
            if isinstance(messages, str):
                return (len(messages) + 3) // 4
            return (sum(len(str(m.get("content") or "")) for m in messages) + 3) // 4

    return ScriptedLLM


def scripted_llm(
    replies: Iterable[Reply] = (),
    *,
    model: str = "scripted-offline",
    context_window: int = 8192,
    native_tools: bool = False,
    default: str | None = None,
) -> Any:
    """A CrewAI LLM that answers from ``replies`` offline and records every call in ``.calls``."""
    global _llm_class
    if _llm_class is None:
        _llm_class = _build_llm_class()
    kwargs: dict[str, Any] = {"model": model, "context_window": context_window, "native_tools": native_tools}
    if default is not None:
        kwargs["default"] = default
    llm = _llm_class(**kwargs)
    llm.set_script(replies)
    return llm
