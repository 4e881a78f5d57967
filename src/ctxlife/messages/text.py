"""The text of a message: what a model reads in it, what it is charged for, and text normalisation.

:func:`content_text` and :func:`text_of` read content in any format (strings, parts, blocks, tool
results); :func:`countable` gives the token counter its inputs (strings to tokenize plus fixed
estimates for images and files); :func:`tool_name_key` and :func:`escape_surrogates` normalise
names and text. :func:`content_blocks`, :func:`has_block` and :func:`arguments_text` are shared
with the other modules of :mod:`ctxlife.messages`.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

from ctxlife.messages.formats import ANTHROPIC_SERVER_BLOCKS, Message, role

# Token estimates for what is not text (documented in docs/concepts.md, "Message formats").
IMAGE_TOKENS = 765  # an OpenAI image at "high"/"auto" detail, 1024x1024 (4 tiles x 170 + 85)


IMAGE_TOKENS_LOW = 85  # an OpenAI image at "low" detail


ANTHROPIC_IMAGE_TOKENS = 1600  # the most an Anthropic image costs before it is resized (~1.15 MP / 750)


FILE_TOKENS = 1000  # an audio clip, a file or a document given as data, not text


TOKENS_PER_TOOL_CALL = 3


def content_blocks(message: Message) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def has_block(message: Message, kind: str) -> bool:
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == kind for b in content)


def tool_calls(message: Message) -> list[dict[str, Any]]:
    """The OpenAI ``tool_calls`` of an assistant message (empty for any other message)."""
    if role(message) != "assistant":
        return []
    calls = message.get("tool_calls")
    return calls if isinstance(calls, list) else []


def arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return ""
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (_block_text(b) for b in content if isinstance(b, dict)) if t)
    return ""


def _block_text(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind is None:  # an untyped part, as some frameworks write them
        for key in ("text", "content"):
            value = block.get(key)
            if isinstance(value, str):
                return value
        return ""
    if kind in ("text", "refusal", "thinking"):  # the text is under the block's type
        text = block.get(kind)
        return text if isinstance(text, str) else ""
    if kind in ("tool_result", "search_result"):
        return _result_text(block.get("content"))
    if kind == "tool_use":
        return f"{block.get('name') or ''} {arguments_text(block.get('input'))}".strip()
    if kind == "document":
        source = block.get("source")
        data = source.get("data") if isinstance(source, dict) else None
        if isinstance(source, dict) and source.get("type") == "text" and isinstance(data, str):
            return data
        if isinstance(source, dict) and source.get("type") == "content":
            return _result_text(source.get("content"))
    return ""


def content_text(message_or_content: Any) -> str:
    """The text of a message's content (pass the message, or its ``content``): the string, or its
    text parts/blocks, tool results' text included."""
    content = message_or_content.get("content") if isinstance(message_or_content, Mapping) else message_or_content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and part.get("type") != "tool_use":
                text = _block_text(part)
                if text:
                    texts.append(text)
        return "\n".join(texts)
    return str(content)


def text_of(message: Message) -> str:
    """All the text a model reads in a message, in order: its content (text parts and blocks, tool
    results) and its tool calls as ``name(arguments)`` (OpenAI ``tool_calls`` and legacy
    ``function_call``, Anthropic ``tool_use``). The one text walk: the recall index searches this
    text, and replay and ``session show`` print it."""
    content = message.get("content")
    calls, legacy = message.get("tool_calls"), message.get("function_call")
    if isinstance(content, str) and not calls and not isinstance(legacy, dict):
        return content  # the usual chat message (the general path below gives the same)
    pieces: list[str] = []
    _walk(content, pieces)
    for call in calls if isinstance(calls, list) else ():
        if isinstance(call, dict):
            inner = call.get("function")
            function = inner if isinstance(inner, dict) else call
            pieces.append(_call_text(function.get("name"), function.get("arguments")))
    if isinstance(legacy, dict):
        pieces.append(_call_text(legacy.get("name"), legacy.get("arguments")))
    return "\n".join(p for p in pieces if p)


def _walk(content: Any, out: list[str]) -> None:
    if isinstance(content, str):
        out.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):  # any part with a text: input_text, output_text too
                    out.append(part["text"])
                elif part.get("type") == "tool_use":
                    out.append(_call_text(part.get("name"), part.get("input")))
                elif part.get("type") == "tool_result":
                    _walk(part.get("content"), out)
                else:
                    out.append(_block_text(part))


def _call_text(name: Any, arguments: Any) -> str:
    if not isinstance(arguments, str):
        try:
            arguments = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError):
            arguments = str(arguments)
    return f"{name or 'tool'}({arguments})"


def countable(message: Message) -> tuple[list[str], int]:
    """What a model is charged for in one message, the per-message overhead aside.

    Returns the strings to tokenize (role, content text, names, tool call names and arguments,
    tool call ids) and a fixed number of tokens for what is not text (images and files at the
    documented estimates, the overhead of each tool call). Base64 data is never tokenized as text.
    """
    texts: list[str] = []
    extra = 0
    r = message.get("role")
    if isinstance(r, str):
        texts.append(r)
    content = message.get("content")
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict):
                extra += _count_block(block, texts)
    elif content is not None:
        texts.append(str(content))
    for call in tool_calls(message):
        function = call.get("function") if isinstance(call, dict) else None
        function = function if isinstance(function, dict) else {}
        extra += TOKENS_PER_TOOL_CALL
        texts.append(str(function.get("name") or ""))
        texts.append(arguments_text(function.get("arguments")))
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        extra += TOKENS_PER_TOOL_CALL
        texts.append(str(legacy.get("name") or ""))
        texts.append(arguments_text(legacy.get("arguments")))
    call_id = message.get("tool_call_id")
    if call_id:
        texts.append(str(call_id))
    return texts, extra


def _count_block(block: dict[str, Any], texts: list[str]) -> int:
    kind = block.get("type")
    if kind == "image_url":
        image = block.get("image_url")
        detail = image.get("detail") if isinstance(image, dict) else None
        return IMAGE_TOKENS_LOW if detail == "low" else IMAGE_TOKENS
    if kind == "image":
        return ANTHROPIC_IMAGE_TOKENS
    if kind in ("input_audio", "file"):
        return FILE_TOKENS
    if kind == "tool_use":
        texts.append(str(block.get("name") or ""))
        texts.append(arguments_text(block.get("input")))
        return TOKENS_PER_TOOL_CALL
    if kind == "tool_result":
        inner = block.get("content")
        if isinstance(inner, list):
            return sum(_count_block(b, texts) for b in inner if isinstance(b, dict)) + TOKENS_PER_TOOL_CALL
        if isinstance(inner, str):
            texts.append(inner)
        return TOKENS_PER_TOOL_CALL
    if kind == "document":
        text = _block_text(block)
        if text:
            texts.append(text)
            return 0
        return FILE_TOKENS
    if kind == "redacted_thinking":
        return FILE_TOKENS // 4
    if kind in ANTHROPIC_SERVER_BLOCKS:
        texts.append(json.dumps({k: v for k, v in block.items() if k != "type"}, ensure_ascii=False, sort_keys=True))
        return 0
    text = _block_text(block)
    if text:
        texts.append(text)
    return 0


def tool_name_key(name: str) -> str:
    """How tool names are compared: Unicode NFC and case-folded, nothing else (never cut to ASCII,
    so ``查询订单`` and ``取消订单`` stay two tools)."""
    return unicodedata.normalize("NFC", str(name)).strip().casefold()


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def escape_surrogates(text: str) -> str:
    """``text`` with every lone surrogate written as the escape ``\\udXXX`` (UTF-8 cannot carry them)."""
    if not _SURROGATE_RE.search(text):
        return text
    return _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


#: The keys of a message (and of its parts and tool calls) that hold text a model or a person reads.
TEXT_KEYS = frozenset({"content", "text", "tool_calls", "function", "function_call", "arguments", "input"})


def map_texts(message: Message, text: Callable[[str], str]) -> Any:
    """``message`` with ``text`` applied to every text a model or a person reads: the string content,
    text parts, tool-result text, tool-call arguments (OpenAI ``tool_calls``/``function_call``) and
    ``tool_use`` inputs (Anthropic); ids, names and roles are left as they are. Returns the same dict
    when nothing changed, else a new one (the original is never edited)."""

    def clean(value: Any, every_key: bool = False) -> Any:
        if isinstance(value, str):
            return text(value)
        if isinstance(value, list):
            out = [clean(part, every_key) for part in value]
            return value if all(a is b for a, b in zip(out, value, strict=True)) else out
        if isinstance(value, dict):
            # a tool_use block's input is the model's arguments: every value in it is text
            changed = {k: clean(v, every_key or k == "input") for k, v in value.items() if every_key or k in TEXT_KEYS}
            if all(changed[k] is value[k] for k in changed):
                return value
            return {**value, **changed}
        return value

    return clean(message)


def json_payload(text: str) -> Any:
    """The JSON object or array that ``text`` holds (tool-call arguments, a tool result), else ``None``."""
    s = text.strip()
    if not s or s[0] not in "[{" or s[-1] not in "]}":
        return None
    try:
        return json.loads(s)
    except (ValueError, RecursionError):
        return None


def own_text(message: Mapping[str, Any]) -> str:
    """The text a message says itself: its content without tool calls or tool results
    (an Anthropic user message that only carries ``tool_result`` blocks says nothing)."""
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, list):
        return content_text(
            [b for b in content if not (isinstance(b, Mapping) and b.get("type") in ("tool_use", "tool_result"))]
        )
    return content_text(content)
