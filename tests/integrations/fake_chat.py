"""A LangChain chat model for tests: replies from a script, calls tools, records what it receives."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

Reply = AIMessage | str | Callable[[list[BaseMessage]], AIMessage | str]


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    """An AI message asking for one tool call."""
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


class ScriptedChatModel(BaseChatModel):
    """Replies from ``script`` in order (then ``default``); ctxlife's own summary requests get ``summary``.

    ``calls`` holds a copy of every message list received from the agent, ``summary_calls``
    those of ctxlife's own summary requests; ``on_summary`` is called before each summary reply
    (a test's slow step, e.g. ``LoopWitness.wait_for_the_loop``).
    """

    script: list[Any] = []
    default: str = "Done."
    window: int = 8000
    summary: str = "The user asked for several lookups; all were answered."
    on_summary: Any = None
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _summary_calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "ctxlife-scripted"

    @property
    def calls(self) -> list[list[BaseMessage]]:
        return self._calls

    @property
    def summary_calls(self) -> list[list[BaseMessage]]:
        return self._summary_calls

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        self.profile = {"max_input_tokens": self.window}

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        from ctxlife.integrations.langchain import _own_call

        if _own_call.get():  # ctxlife's own summary request, not an agent step
            with self._lock:
                self._summary_calls.append(copy.deepcopy(messages))
            if self.on_summary is not None:
                self.on_summary()
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.summary))])
        with self._lock:
            self._calls.append(copy.deepcopy(messages))
            reply: Any = self.script.pop(0) if self.script else self.default
        if callable(reply):
            reply = reply(messages)
        message = reply if isinstance(reply, AIMessage) else AIMessage(content=reply)
        return ChatResult(generations=[ChatGeneration(message=copy.deepcopy(message))])
