"""The one message model of ctxlife: formats, units, rounds, pairing, validity, inserted messages.

**Formats.** A message list is in one of two formats, and one list uses one:

* **OpenAI chat** (:data:`OPENAI`): roles ``system``, ``developer``, ``user``, ``assistant``,
  ``tool`` and the legacy ``function``; ``content`` a string, ``None`` or a list of parts
  (``text``, ``image_url``, ``input_audio``, ``file``, ``refusal``). An assistant message's
  ``tool_calls`` are answered by the run of ``tool`` messages right after it, paired by
  ``tool_call_id`` in any order (parallel calls finish in any order); a legacy
  ``function_call`` is answered by the ``function`` message right after it.
* **Anthropic Messages** (:data:`ANTHROPIC`): roles ``user`` and ``assistant``; ``content`` a
  string or a list of blocks (``text``, ``image``, ``document``, ``tool_use``, ``tool_result``,
  ``thinking``, ``redacted_thinking``, ``search_result`` and the server-tool blocks). Every
  ``tool_use`` block of an assistant message is answered by a ``tool_result`` block of the very
  next (user) message. The system prompt is a separate request parameter: leading ``system``
  messages stand for it (ctxlife counts and pins them; :func:`split_system` hands them back as
  the ``system`` argument), and ctxlife never adds one to a list that has none (bootstrap text
  then goes into the first user message, summaries are user messages).

A list of plain ``{"role": ..., "content": "text"}`` messages is valid in both and treated as
OpenAI chat. Anything else -- Amazon Bedrock Converse / Strands blocks (``toolUse``,
``toolResult``), Google Gemini ``parts``, OpenAI Responses API items, LangChain message
objects, unknown roles, content of another type, a tool call whose ``function`` is not an
object -- is refused by :func:`check_shape` with :class:`~ctxlife.errors.InvalidMessagesError`
naming the message index and the format it looks like.

**Units and rounds.** An assistant message with tool calls together with the messages that
answer it is ONE *unit*: strategies cut between units, never inside one. A *round* starts at
each user turn (a user message that is not a carrier of tool results). ``system`` and
``developer`` messages are pinned wherever ctxlife pins system messages.

**Pairing.** Real traces reuse ids across turns and sometimes inside one message, or leave them
out: a result whose id is missing, or names no unanswered call, goes to the first unanswered
call (by position), so ids are only trusted within one turn (:func:`pair_tool_results`).

**Messages ctxlife inserts** (summaries, recall blocks, a system message made for bootstrap
text) are recognised by :func:`inserted_kind` / :func:`is_inserted`: ctxlife registers each one
it writes (:func:`mark_inserted`), so a user or tool message with the same visible prefix is
never taken for one; a restored snapshot re-registers its inserted messages from its meta
(:func:`inserted_meta` / :func:`restore_inserted`). The bootstrap text is one marked section
(:data:`BOOTSTRAP_START` ... :data:`BOOTSTRAP_END`) that a new rendering replaces.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import marshal
import operator
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ctxlife.errors import InvalidMessagesError

Message = dict[str, Any]

OPENAI = "openai"
ANTHROPIC = "anthropic"
FORMAT_NAMES = {OPENAI: "OpenAI chat", ANTHROPIC: "Anthropic Messages"}

SYSTEM_ROLES = frozenset({"system", "developer"})
"""Roles pinned like a system prompt (``developer`` is OpenAI's newer name for it)."""

SUMMARY_PREFIX = "History summary:"
"""How a summary message written by ctxlife starts (for the model; ctxlife recognises its summaries
by registration, see :func:`is_summary`, so user or tool content starting like this is not one)."""

RECALL_PREFIX = "Recalled from earlier in this conversation"
"""How the ``recall`` strategy's block of passages from the raw history starts (for the model; the
block is recognised by registration, see :func:`is_recall_block`).

Inserted by ctxlife before each model call and replaced on the next: never recorded into the raw
history, never summarized, never recalled again.
"""

BOOTSTRAP_START = "<!-- ctxlife:bootstrap -->"
BOOTSTRAP_END = "<!-- /ctxlife:bootstrap -->"

# Token estimates for what is not text (documented in docs/concepts.md, "Message formats").
IMAGE_TOKENS = 765  # an OpenAI image at "high"/"auto" detail, 1024x1024 (4 tiles x 170 + 85)
IMAGE_TOKENS_LOW = 85  # an OpenAI image at "low" detail
ANTHROPIC_IMAGE_TOKENS = 1600  # the most an Anthropic image costs before it is resized (~1.15 MP / 750)
FILE_TOKENS = 1000  # an audio clip, a file or a document given as data, not text
TOKENS_PER_TOOL_CALL = 3

_OPENAI_ONLY_ROLES = frozenset({"developer", "tool", "function"})
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_OPENAI_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
_ANTHROPIC_SERVER_BLOCKS = frozenset(
    {
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
    }
)
_ANTHROPIC_BLOCKS = (
    frozenset({"image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking", "search_result"})
    | _ANTHROPIC_SERVER_BLOCKS
)
_BEDROCK_KEYS = frozenset(
    {"toolUse", "toolResult", "reasoningContent", "cachePoint", "guardContent", "citationsContent", "video"}
)
_RESPONSES_ITEMS = frozenset(
    {"function_call", "function_call_output", "reasoning", "message", "computer_call", "computer_call_output"}
)


@dataclass(frozen=True, slots=True)
class Unit:
    """A half-open slice ``[start, end)`` of a message list that must stay whole."""

    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason a message list would be rejected by a provider."""

    index: int
    code: str
    detail: str

    def __str__(self) -> str:
        return f"message {self.index}: {self.code}: {self.detail}"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call in any format: its id (None for a legacy ``function_call``), name and arguments text."""

    id: Any
    name: str
    arguments: str


# -- format detection ----------------------------------------------------------------------


class _Refusal(Exception):
    def __init__(self, index: int, detail: str) -> None:
        super().__init__(detail)
        self.index = index
        self.detail = detail


def _looks_like(message: Any) -> str | None:
    """What a message that is not OpenAI chat or Anthropic Messages looks like, if recognisable."""
    if not isinstance(message, dict):
        kind = type(message)
        module = getattr(kind, "__module__", "") or ""
        if module.startswith("langchain") or (hasattr(message, "type") and hasattr(message, "content")):
            return (
                f"a LangChain message object ({kind.__name__}); convert the list with "
                "langchain_core.messages.convert_to_openai_messages(...) or use the LangChain adapter"
            )
        if hasattr(message, "model_dump") and hasattr(message, "role"):
            return f"an SDK object ({kind.__name__}); pass message.model_dump(exclude_none=True) instead"
        return None
    if "parts" in message or message.get("role") == "model":
        return "Google Gemini contents (role/parts); convert to OpenAI chat messages first"
    if (
        message.get("type") in _RESPONSES_ITEMS
        and "role" not in message
        or (message.get("type") == "message" and isinstance(message.get("content"), list))
    ):
        return "OpenAI Responses API input items; send OpenAI chat messages (role/content) to ctxlife"
    if message.get("type") in ("human", "ai", "system", "tool", "chat") and "data" in message:
        return "a serialized LangChain message; load it with langchain_core.messages.messages_from_dict and convert"
    if message.get("role") in ("human", "ai", "bot"):
        return f"a {message['role']!r} role (LangChain-style); ctxlife's roles are user and assistant"
    if message.get("role") in ("USER", "CHATBOT", "SYSTEM", "TOOL"):
        return "Cohere chat history; convert to OpenAI chat messages first"
    return None


def _bedrock(part: Any) -> bool:
    return isinstance(part, dict) and "type" not in part and bool(_BEDROCK_KEYS.intersection(part) or "text" in part)


def _classify(message: Any, i: int) -> str | None:
    """The format a message forces (None when it is valid in both); raises :class:`_Refusal`."""
    if type(message) is not dict:
        looks = _looks_like(message)
        raise _Refusal(
            i,
            f"is not a message dict (got {type(message).__name__}: {_preview(message)})"
            + (f"; it looks like {looks}" if looks else "; every message needs at least a 'role' key"),
        )
    role_ = message.get("role")
    looks = _looks_like(message)
    if looks is not None:
        raise _Refusal(i, f"is not an OpenAI chat or Anthropic Messages message: it looks like {looks}")
    if not isinstance(role_, str):
        what = "has no 'role'" if role_ is None else f"has {_a(role_)} 'role' ({_preview(role_)})"
        raise _Refusal(i, f"{what}; every message needs a string 'role' such as 'user' (got {_preview(message)})")
    if role_ not in _ROLES:
        raise _Refusal(
            i,
            f"has the unknown role {role_!r}; ctxlife understands system, developer, user, assistant, tool and "
            "function (OpenAI chat) and user and assistant (Anthropic Messages)",
        )
    found = OPENAI if role_ in _OPENAI_ONLY_ROLES else None
    content = message.get("content")
    if content is None or type(content) is str:
        pass
    elif type(content) is list:
        found = _classify_parts(content, i, role_, found)
    else:
        raise _Refusal(
            i,
            f"has {type(content).__name__} content ({_preview(content)}); content must be a string, null or a "
            "list of parts/blocks",
        )
    if role_ == "assistant":
        calls = message.get("tool_calls")
        if calls is not None:
            if type(calls) is not list:
                raise _Refusal(i, f"has tool_calls of type {type(calls).__name__}; it must be a list of tool calls")
            for k, call in enumerate(calls):
                _check_call(call, i, f"tool_calls[{k}]")
            if calls:
                found = _agree(found, OPENAI, i)
        legacy = message.get("function_call")
        if legacy is not None:
            _check_function(legacy, i, "function_call")
            found = _agree(found, OPENAI, i)
    elif role_ == "tool":
        call_id = message.get("tool_call_id")
        if call_id is not None and not isinstance(call_id, str):
            raise _Refusal(i, f"has {_a(call_id)} tool_call_id ({_preview(call_id)}); it must be a string")
    elif role_ == "function":
        name = message.get("name")
        if not isinstance(name, str):
            raise _Refusal(i, "is a legacy function result without a string 'name' (the function it answers)")
    return found


def _agree(found: str | None, fmt: str, i: int) -> str:
    if found is not None and found != fmt:
        raise _Refusal(i, f"mixes {FORMAT_NAMES[found]} and {FORMAT_NAMES[fmt]} fields in one message")
    return fmt


def _classify_parts(content: list[Any], i: int, role_: str, found: str | None) -> str | None:
    for k, part in enumerate(content):
        if type(part) is not dict:
            raise _Refusal(
                i, f"content[{k}] is {_a(part)} ({_preview(part)}); every part must be an object with a 'type'"
            )
        kind = part.get("type")
        if kind is None:
            if _bedrock(part):
                raise _Refusal(
                    i,
                    f"content[{k}] has no 'type' but {sorted(part)[:3]} keys: it looks like Amazon Bedrock Converse / "
                    "Strands Agents content blocks (toolUse/toolResult), which ctxlife does not handle; convert the "
                    "list to Anthropic Messages (type: tool_use/tool_result) or OpenAI chat first",
                )
            raise _Refusal(i, f"content[{k}] has no 'type' (got keys {sorted(part)[:5]})")
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise _Refusal(
                    i, f"content[{k}] is a text part whose 'text' is not a string ({_preview(part.get('text'))})"
                )
            continue
        if kind in _OPENAI_PARTS:
            found = _agree(found, OPENAI, i)
        elif kind in _ANTHROPIC_BLOCKS:
            found = _agree(found, ANTHROPIC, i)
            if kind == "tool_use":
                _check_tool_use(part, i, k)
            elif kind == "tool_result":
                _check_tool_result(part, i, k)
        elif kind in ("input_text", "output_text", "input_image", "input_file"):
            raise _Refusal(
                i,
                f"content[{k}] has type {kind!r}: it looks like OpenAI Responses API content; use chat parts "
                "(text, image_url, input_audio, file)",
            )
        else:
            raise _Refusal(
                i,
                f"content[{k}] has the unknown type {kind!r}; OpenAI chat parts are text, image_url, input_audio, "
                "file and refusal, Anthropic blocks text, image, document, tool_use, tool_result, thinking, "
                "redacted_thinking and search_result",
            )
    return found


def _check_call(call: Any, i: int, where: str) -> None:
    if type(call) is not dict:
        raise _Refusal(
            i, f"{where} is {_a(call)} ({_preview(call)}); a tool call is an object with 'id' and 'function'"
        )
    call_id = call.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise _Refusal(i, f"{where}.id is {_a(call_id)} ({_preview(call_id)}); it must be a string")
    _check_function(call.get("function"), i, f"{where}.function")


def _check_function(function: Any, i: int, where: str) -> None:
    if type(function) is not dict:
        raise _Refusal(
            i,
            f"{where} is {_a(function)} ({_preview(function)}); it must be an object "
            '{"name": "...", "arguments": "<JSON text>"}',
        )
    name = function.get("name")
    if not isinstance(name, str):
        raise _Refusal(i, f"{where}.name is {_a(name)} ({_preview(name)}); it must be the tool's name as a string")
    arguments = function.get("arguments")
    if arguments is not None and not isinstance(arguments, (str, dict)):
        raise _Refusal(i, f"{where}.arguments is {_a(arguments)}; it must be the arguments as JSON text")


def _check_tool_use(block: dict[str, Any], i: int, k: int) -> None:
    if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
        raise _Refusal(i, f"content[{k}] is a tool_use block without a string 'id' and 'name'")


def _check_tool_result(block: dict[str, Any], i: int, k: int) -> None:
    if not isinstance(block.get("tool_use_id"), str):
        raise _Refusal(i, f"content[{k}] is a tool_result block without a string 'tool_use_id'")
    inner = block.get("content")
    if inner is None or isinstance(inner, str):
        return
    if not isinstance(inner, list) or not all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in inner):
        raise _Refusal(i, f"content[{k}] is a tool_result whose 'content' is neither a string nor a list of blocks")


def _a(value: Any) -> str:
    """``"a str"``, ``"an int"``: the type of ``value`` with its article."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _preview(value: Any, limit: int = 60) -> str:
    """A short description of a value for an error message: its type and size, never its content."""
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, dict):
        return f"an object with keys {sorted(map(str, value))[:6]}"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)} items"
    if value is None or isinstance(value, (bool, int, float)):
        text = repr(value)
        return text if len(text) <= limit else text[:limit] + "..."
    return f"a {type(value).__name__} object"  # its repr could quote message content


def detect_format(messages: Sequence[Any], where: str = "messages") -> str:
    """The format of a message list: :data:`OPENAI` or :data:`ANTHROPIC`.

    Raises :class:`InvalidMessagesError` naming the index and what the message looks like when a
    message is in neither format, or when the list mixes them. A list of plain text messages
    (valid in both) is OpenAI chat.
    """
    return _detect(messages, where)[0] or OPENAI


def _detect(messages: Sequence[Any], where: str, memo: ShapeMemo | None = None) -> tuple[str | None, int]:
    found: str | None = None
    first = -1
    known: dict[int, _Checked] = {}
    if memo is not None:
        known, older = memo.known, memo.older
        memo.known, memo.older = {}, known  # what this list holds now, and the list before it
    for i, message in enumerate(messages):
        if type(message) is dict and type(message.get("content")) is str and "parts" not in message:
            r = message.get("role")
            if (
                r == "user"
                or r == "system"
                or (r == "assistant" and "tool_calls" not in message and "function_call" not in message)
            ):
                continue  # the common case: plain text, valid in both formats
        if memo is not None and type(message) is dict:
            values = tuple(message.values())
            hit = known.get(id(message)) or older.get(id(message))
            if (
                hit is not None
                and hit[0] is message
                and hit[1] == values
                and (hit[2] is None or hit[2] == restamp(values))
            ):
                fmt = hit[3]  # checked before and not edited since: not classified again
            else:
                try:
                    fmt = _classify(message, i)
                except _Refusal as refusal:
                    raise InvalidMessagesError(f"{where}[{refusal.index}] {refusal.detail}") from None
                hit = (message, values, nested_stamp(values), fmt)
            memo.known[id(message)] = hit
        else:
            try:
                fmt = _classify(message, i)
            except _Refusal as refusal:
                raise InvalidMessagesError(f"{where}[{refusal.index}] {refusal.detail}") from None
        if fmt is None:
            continue
        if found is None:
            found, first = fmt, i
        elif fmt != found:
            raise InvalidMessagesError(
                f"{where}[{i}] is an {FORMAT_NAMES[fmt]} message but {where}[{first}] is an {FORMAT_NAMES[found]} "
                "one; one list must use one format (convert the list, or manage each separately)"
            )
    return found, first


_Checked = tuple[Message, tuple[Any, ...], Any, str | None]


def nested_stamp(values: tuple[Any, ...]) -> Any:
    """A cheap stamp of a message's nested values (``tuple(message.values())``): None when it has none.

    Changes when a list or dict inside (tool calls, content parts) is edited in place; together
    with the values themselves (compared by identity first) it tells an unchanged message from an
    edited one without looking at its content again. A hash of the values' ``marshal`` bytes (C
    speed, version 2: by value only), or a frozen copy when they hold something marshal cannot write.
    """
    for value in values:
        kind = type(value)
        if kind is list or kind is dict:
            return restamp(values)
    return None


def restamp(values: tuple[Any, ...]) -> Any:
    """:func:`nested_stamp` of values known to hold a list or dict (skips looking for one)."""
    try:
        return hash(marshal.dumps(values, 2))
    except ValueError:
        return tuple(map(_freeze, values))


def _freeze(value: Any) -> Any:
    kind = type(value)
    if kind is list:
        return tuple([_freeze(v) for v in value])
    if kind is dict:
        return tuple([(k, _freeze(v)) for k, v in value.items()])
    return value


class ShapeMemo:
    """What :func:`check_shape` classified in the last two lists it checked (the host keeps one).

    Handed to :func:`check_shape`, it makes a call on a list that grew since the last one cost a
    classification of the new messages only: a message checked before (the same dict, none of its
    fields replaced, nothing inside edited, see :func:`nested_stamp`) is not classified again.
    Plain text messages are always re-checked (that costs less than remembering them).
    """

    __slots__ = ("known", "older")

    def __init__(self) -> None:
        self.known: dict[int, _Checked] = {}
        self.older: dict[int, _Checked] = {}


def check_shape(
    messages: Any, where: str = "messages", expected: str | None = None, memo: ShapeMemo | None = None
) -> str:
    """Raise :class:`InvalidMessagesError` unless ``messages`` is a list in one known format; return the format.

    ``expected``: the format the caller configured (``message_format``); a list that is clearly
    in the other one is refused. ``memo``: what earlier calls checked (:class:`ShapeMemo`), so only
    new or edited messages are classified.
    """
    if not isinstance(messages, list):
        raise InvalidMessagesError(
            f"{where} must be a list of message dicts, got {type(messages).__name__}; "
            "pass OpenAI chat or Anthropic Messages messages such as [{'role': 'user', 'content': 'hi'}]"
        )
    found, first = _detect(messages, where, memo)
    if expected is not None and found is not None and found != expected:
        raise InvalidMessagesError(
            f"{where}[{first}] is an {FORMAT_NAMES[found]} message but message_format is {expected!r}; "
            f'set message_format = "{found}" (or "auto") or convert the list'
        )
    return found or expected or OPENAI


def list_format(messages: Sequence[Message]) -> str:
    """The format of a list already checked by :func:`check_shape` (OpenAI chat for anything unclear)."""
    for message in messages:
        if type(message) is not dict:
            continue
        r = message.get("role")
        if r in _OPENAI_ONLY_ROLES or message.get("tool_calls") or message.get("function_call"):
            return OPENAI
        content = message.get("content")
        if type(content) is list:
            for part in content:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind in _ANTHROPIC_BLOCKS:
                    return ANTHROPIC
                if kind in _OPENAI_PARTS:
                    return OPENAI
    return OPENAI


# -- reading a message ---------------------------------------------------------------------


def role(message: Message) -> str | None:
    return message.get("role") if isinstance(message, dict) else None


def is_system(message: Message) -> bool:
    """Whether a message is a system prompt (``system`` or ``developer``): pinned, never evicted."""
    return role(message) in SYSTEM_ROLES


def _blocks(message: Message) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _has_block(message: Message, kind: str) -> bool:
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == kind for b in content)


def is_tool_result(message: Message) -> bool:
    """Whether a message answers tool calls: an OpenAI ``tool``/``function`` message, or an Anthropic user
    message carrying ``tool_result`` blocks."""
    r = role(message)
    return r in ("tool", "function") or (r == "user" and _has_block(message, "tool_result"))


def is_user_turn(message: Message) -> bool:
    """Whether a message is a user turn: a user message that carries no tool results and that
    ctxlife did not insert (a summary is a user message in Anthropic lists, but no turn)."""
    return role(message) == "user" and not _has_block(message, "tool_result") and not is_inserted(message)


def tool_calls(message: Message) -> list[dict[str, Any]]:
    """The OpenAI ``tool_calls`` of an assistant message (empty for any other message)."""
    if role(message) != "assistant":
        return []
    calls = message.get("tool_calls")
    return calls if isinstance(calls, list) else []


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return ""
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


def calls_of(message: Message) -> list[ToolCall]:
    """The tool calls of an assistant message in any format (OpenAI ``tool_calls``, a legacy
    ``function_call``, Anthropic ``tool_use`` blocks); empty for any other message."""
    if role(message) != "assistant":
        return []
    out: list[ToolCall] = []
    for call in tool_calls(message):
        function = call.get("function") if isinstance(call, dict) else None
        function = function if isinstance(function, dict) else {}
        out.append(
            ToolCall(
                call.get("id") if isinstance(call, dict) else None,
                str(function.get("name") or ""),
                _arguments_text(function.get("arguments")),
            )
        )
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        out.append(ToolCall(None, str(legacy.get("name") or ""), _arguments_text(legacy.get("arguments"))))
    for block in _blocks(message):
        if block.get("type") == "tool_use":
            out.append(ToolCall(block.get("id"), str(block.get("name") or ""), _arguments_text(block.get("input"))))
    return out


def has_calls(message: Message) -> bool:
    """Whether a message makes tool calls that other messages must answer."""
    if role(message) != "assistant":
        return False
    return (
        bool(tool_calls(message)) or isinstance(message.get("function_call"), dict) or _has_block(message, "tool_use")
    )


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
    if kind == "text":
        text = block.get("text")
        return text if isinstance(text, str) else ""
    if kind == "refusal":
        text = block.get("refusal")
        return text if isinstance(text, str) else ""
    if kind == "thinking":
        text = block.get("thinking")
        return text if isinstance(text, str) else ""
    if kind == "tool_result":
        return _result_text(block.get("content"))
    if kind == "tool_use":
        return f"{block.get('name') or ''} {_arguments_text(block.get('input'))}".strip()
    if kind == "search_result":
        return _result_text(block.get("content"))
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
    """All the text a model reads in a message: its content text plus its tool calls (name and arguments)."""
    parts = [content_text(message)]
    for call in tool_calls(message):
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            parts.append(f"{function.get('name') or ''} {_arguments_text(function.get('arguments'))}")
    legacy = message.get("function_call") if role(message) == "assistant" else None
    if isinstance(legacy, dict):
        parts.append(f"{legacy.get('name') or ''} {_arguments_text(legacy.get('arguments'))}")
    for block in _blocks(message):
        if block.get("type") == "tool_use":
            parts.append(_block_text(block))
    return "\n".join(p for p in parts if p)


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
        texts.append(_arguments_text(function.get("arguments")))
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        extra += TOKENS_PER_TOOL_CALL
        texts.append(str(legacy.get("name") or ""))
        texts.append(_arguments_text(legacy.get("arguments")))
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
        texts.append(_arguments_text(block.get("input")))
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
    if kind in _ANTHROPIC_SERVER_BLOCKS:
        texts.append(json.dumps({k: v for k, v in block.items() if k != "type"}, ensure_ascii=False, sort_keys=True))
        return 0
    text = _block_text(block)
    if text:
        texts.append(text)
    return 0


# -- pairing, units, rounds ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolPairing:
    """How the messages after one call-making assistant message answer its calls.

    ``results[j]`` is the call position (index into :func:`calls_of`) that the ``j``-th result
    answers, or None when it answers nothing (more results than calls); ``result_at[j]`` is where
    that result is: ``(message index, block index)`` (block index None for a whole ``tool`` or
    ``function`` message). ``mismatched`` holds the result positions whose id names no unanswered
    call while the call they were given by position has a different id (a provider rejects those).
    ``unanswered`` holds the call positions without a result. ``end`` is the end of the unit.
    """

    call_index: int
    end: int
    results: tuple[int | None, ...]
    mismatched: tuple[int, ...]
    unanswered: tuple[int, ...]
    result_at: tuple[tuple[int, int | None], ...] = ()


def _answers(messages: Sequence[Message], index: int) -> tuple[list[tuple[Any, int, int | None]], int]:
    """The results that may answer ``messages[index]``'s calls, as (id, message index, block index),
    and the unit's end."""
    n = len(messages)
    message = messages[index]
    found: list[tuple[Any, int, int | None]]
    if _has_block(message, "tool_use"):  # Anthropic: tool_result blocks of the very next message
        if index + 1 < n and role(messages[index + 1]) == "user" and _has_block(messages[index + 1], "tool_result"):
            nxt = messages[index + 1]
            found = [
                (b.get("tool_use_id"), index + 1, k)
                for k, b in enumerate(nxt["content"])
                if isinstance(b, dict) and b.get("type") == "tool_result"
            ]
            return found, index + 2
        return [], index + 1
    found = []
    j = index + 1
    while j < n and role(messages[j]) in ("tool", "function"):
        found.append((messages[j].get("tool_call_id") if role(messages[j]) == "tool" else None, j, None))
        j += 1
    return found, j


def pair_tool_results(messages: Sequence[Message], index: int) -> ToolPairing:
    """Pair the tool calls of ``messages[index]`` with the results that follow it.

    A result goes to the first unanswered call with its id; a result without an id, or whose id
    names no unanswered call, goes to the first unanswered call by position (real traces reuse ids
    and omit them), and is marked mismatched when both ids are known and differ.
    """
    ids = [c.id for c in calls_of(messages[index])]
    open_calls = list(range(len(ids)))
    answers, end = _answers(messages, index)
    results: list[int | None] = []
    mismatched: list[int] = []
    for position, (answer, _, _) in enumerate(answers):
        target = None
        if answer is not None:
            target = next((k for k in open_calls if ids[k] == answer), None)
        if target is None and open_calls:
            target = open_calls[0]
            if answer is not None and ids[target] is not None:
                mismatched.append(position)
        if target is not None:
            open_calls.remove(target)
        results.append(target)
    return ToolPairing(
        index, end, tuple(results), tuple(mismatched), tuple(open_calls), tuple((j, k) for _, j, k in answers)
    )


def split_units(messages: Sequence[Message]) -> list[Unit]:
    """Split a message list into units.

    Every message is its own unit, except a message making tool calls, which forms one unit with
    the messages that answer it (OpenAI: the run of ``tool``/``function`` messages right after it;
    Anthropic: the next user message when it carries ``tool_result`` blocks).
    """
    units: list[Unit] = []
    i, n = 0, len(messages)
    while i < n:
        end = _answers(messages, i)[1] if has_calls(messages[i]) else i + 1
        units.append(Unit(i, end))
        i = end
    return units


def round_starts(messages: Sequence[Message]) -> list[int]:
    """Indices of the user turns; each one starts a round.

    A round is a user turn and everything after it up to the next one. Cutting at a round start
    never splits a unit: tool results are ``tool`` messages or user messages that carry
    ``tool_result`` blocks, neither of which is a user turn.
    """
    return [i for i, m in enumerate(messages) if is_user_turn(m)]


def last_user_index(messages: Sequence[Message]) -> int | None:
    """Index of the latest user turn (None if there is none)."""
    for i in range(len(messages) - 1, -1, -1):
        if is_user_turn(messages[i]):
            return i
    return None


def _turn_key(message: Message) -> Any:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return content_text(message)
    return ("media", id(content))


def current_turn_index(messages: Sequence[Message]) -> int | None:
    """Index of the user turn being worked on: the last one that is not a repeated prompt.

    Frameworks add boilerplate user messages inside a turn (CrewAI's ReAct mode appends
    "Analyze the tool result..." after every tool step). A user message whose exact text
    occurs more than once is such a prompt; the question is the last user message that does
    not repeat (the last user message if every one repeats).
    """
    indices: list[int] = [i for i, m in enumerate(messages) if is_user_turn(m)]
    if not indices:
        return None
    keys = [_turn_key(messages[i]) for i in indices]
    counts: dict[Any, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    for index, key in zip(reversed(indices), reversed(keys), strict=True):
        if counts[key] == 1:
            return index
    return indices[-1]


# -- validity ------------------------------------------------------------------------------


def validate(messages: Sequence[Message], fmt: str | None = None) -> list[Problem]:
    """Return the reasons a provider would reject this sequence (empty if valid).

    Checks, in the list's format: system prompts come before any other message; every result
    answers a call of the message it follows (OpenAI: in the run of ``tool`` messages right
    after the call, in any order; Anthropic: in the next user message), and every call has its
    result; Anthropic ``tool_use`` blocks only in assistant messages and ``tool_result`` blocks
    only in user messages, and the conversation opens with a user message. A list in no known
    format gets one ``unknown_format`` problem.
    """
    if fmt is None:
        try:
            fmt = detect_format(messages)
        except InvalidMessagesError as exc:
            return [Problem(_refused_index(str(exc)), "unknown_format", str(exc))]
    problems: list[Problem] = []
    seen_non_system = False
    i, n = 0, len(messages)
    answered_by_previous: set[int] = set()
    while i < n:
        message = messages[i]
        r = role(message)
        if r in SYSTEM_ROLES:
            if seen_non_system:
                problems.append(
                    Problem(i, "system_after_conversation", "system message after the conversation started")
                )
            i += 1
            continue
        if not seen_non_system and fmt == ANTHROPIC and r != "user":
            problems.append(
                Problem(i, "first_message_not_user", "an Anthropic conversation must open with a user message")
            )
        seen_non_system = True
        if fmt == ANTHROPIC:
            if r == "user" and _has_block(message, "tool_use"):
                problems.append(Problem(i, "tool_use_in_user_message", "tool_use blocks belong in assistant messages"))
            if r == "assistant" and _has_block(message, "tool_result"):
                problems.append(
                    Problem(i, "tool_result_in_assistant_message", "tool_result blocks belong in user messages")
                )
        if is_tool_result(message) and i not in answered_by_previous:
            problems.append(Problem(i, "orphan_tool_result", "tool result without a preceding assistant tool call"))
            i += 1
            continue
        if not has_calls(message):
            i += 1
            continue
        pairing = pair_tool_results(messages, i)
        calls = calls_of(message)
        for position, answered in enumerate(pairing.results):
            j = pairing.result_at[position][0]
            if answered is None:
                problems.append(
                    Problem(j, "orphan_tool_result", f"more tool results than the {len(calls)} call(s) at message {i}")
                )
            elif position in pairing.mismatched:
                answer = _answer_id(messages, pairing.result_at[position])
                open_ids = [calls[k].id for k in sorted({answered, *pairing.unanswered})]
                problems.append(
                    Problem(
                        j,
                        "tool_result_id_mismatch",
                        f"answers {answer!r} but no unanswered call of message {i} has that id "
                        f"(unanswered: {open_ids!r})",
                    )
                )
        if pairing.unanswered:
            missing = [calls[k].id for k in pairing.unanswered]
            problems.append(
                Problem(
                    i,
                    "tool_call_without_result",
                    f"{len(missing)} of {len(calls)} tool call(s) have no result (ids {missing!r})",
                )
            )
        if fmt == ANTHROPIC and pairing.end == i + 2:
            answered_by_previous = {i + 1}  # the next message: its tool_result blocks were paired above
            i += 1
        else:
            i = pairing.end
    return problems


def _answer_id(messages: Sequence[Message], at: tuple[int, int | None]) -> Any:
    j, k = at
    if k is None:
        return messages[j].get("tool_call_id")
    return messages[j]["content"][k].get("tool_use_id")


_INDEX_RE = re.compile(r"\[(\d+)\]")


def _refused_index(text: str) -> int:
    match = _INDEX_RE.search(text)
    return int(match.group(1)) if match else 0


def same_messages(a: Sequence[Message], b: Sequence[Message]) -> bool:
    """Whether two lists hold the very same message objects in the same order (a fast C-level check)."""
    return len(a) == len(b) and all(map(operator.is_, a, b))


def is_valid(messages: Sequence[Message]) -> bool:
    return not validate(messages)


def split_system(messages: Sequence[Message]) -> tuple[str | list[dict[str, Any]] | None, list[Message]]:
    """Split a list into ``(system, conversation)`` for an API that takes the system prompt apart
    (Anthropic's ``system=``): the leading system messages' contents joined (text blocks if any of
    them is a list), or None when there are none; and the rest of the list.
    """
    k = 0
    while k < len(messages) and is_system(messages[k]):
        k += 1
    head, rest = messages[:k], list(messages[k:])
    if not head:
        return None, rest
    contents = [m.get("content") for m in head]
    if all(isinstance(c, str) or c is None for c in contents):
        return "\n\n".join(c for c in contents if c), rest
    blocks: list[dict[str, Any]] = []
    for c in contents:
        if isinstance(c, str) and c:
            blocks.append({"type": "text", "text": c})
        elif isinstance(c, list):
            blocks.extend(b for b in c if isinstance(b, dict))
    return blocks, rest


# -- messages ctxlife inserts --------------------------------------------------------------

INSERTED_KINDS = ("summary", "recall", "bootstrap")


def _inserted_key(message: Message) -> tuple[str, str] | None:
    if not isinstance(message, dict):
        return None
    r = message.get("role")
    content = message.get("content")
    if not isinstance(r, str):
        return None
    if isinstance(content, str):
        return r, content
    if isinstance(content, list) and content and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return r, content_text(message)
    return None


# A message ctxlife inserts carries its kind in a last line ``<!-- ctxlife:KIND CHECK -->``, where
# CHECK is a keyed hash of the role, the kind and the text before the line: recognition needs no
# registry (it survives restarts, other processes and busy ones), a copy (a JSON round trip) is
# still recognised, and a message that merely looks like one (a tool result pasting the line under
# other text, an edited summary) is not.
_TAG_RE = re.compile(r"\n<!-- ctxlife:(summary|recall|bootstrap) ([0-9a-f]{12}) -->\Z")
_TAG_KEY = b"ctxlife/inserted/1"


def _tag_check(role_: str, kind: str, body: str) -> str:
    data = f"{role_}\0{kind}\0{body}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=6, key=_TAG_KEY).hexdigest()


def _tagged(role_: str, kind: str, text: str) -> str:
    found = _TAG_RE.search(text)
    body = text[: found.start()] if found is not None else text
    return f"{body}\n<!-- ctxlife:{kind} {_tag_check(role_, kind, body)} -->"


def _tag_kind(role_: str, text: str) -> str | None:
    if not text.endswith(" -->"):
        return None
    found = _TAG_RE.search(text)
    if found is None:
        return None
    kind, check = found.group(1), found.group(2)
    return kind if hmac.compare_digest(check, _tag_check(role_, kind, text[: found.start()])) else None


def _is_section(content: Any) -> bool:
    """Whether ``content`` is exactly one bootstrap section (a system message ctxlife made for it)."""
    return (
        isinstance(content, str)
        and content.startswith(BOOTSTRAP_START)
        and content.endswith(BOOTSTRAP_END)
        and _SECTION_RE.fullmatch(content) is not None
    )


def inserted_text(text: str) -> str:
    """``text`` without the line that marks an inserted message (the same text when it has none)."""
    found = _TAG_RE.search(text) if text.endswith(" -->") else None
    return text[: found.start()] if found is not None else text


def mark_inserted(message: Message, kind: str) -> Message:
    """Mark ``message`` (in place) as one ctxlife inserted (``kind``: "summary", "recall" or "bootstrap"); return it.

    The mark is a last line of the message's text, ``<!-- ctxlife:KIND CHECK -->``, whose check
    covers the role, the kind and the text: recognition (:func:`inserted_kind`) needs nothing but
    the message, so a copy (a JSON round trip, a stateless caller sending the list back, a
    restored snapshot, another process) is still recognised, and a message that merely starts
    like one, or whose text was changed after marking, is not. Marking again (after the text
    changed) replaces the line.
    """
    if kind not in INSERTED_KINDS:
        raise ValueError(f"kind must be one of {INSERTED_KINDS}, got {kind!r}")
    key = _inserted_key(message)
    if key is None:
        raise ValueError("only a message with a string role and text content can be registered as inserted")
    content = message["content"]
    if kind == "bootstrap" and key[0] == "system" and _is_section(content):
        return message  # a system message that is exactly ctxlife's section is marked by it
    if isinstance(content, str):
        message["content"] = _tagged(key[0], kind, content)
    else:
        last = content[-1]
        text = last.get("text") if isinstance(last.get("text"), str) else ""
        content[-1] = {**last, "text": _tagged(key[0], kind, text)}
    return message


def inserted_kind(message: Message) -> str | None:
    """What ctxlife inserted this message as ("summary", "recall", "bootstrap"), or None for any other message."""
    if not isinstance(message, dict):
        return None
    r = message.get("role")
    content = message.get("content")
    if not isinstance(r, str):
        return None
    if r == "system" and _is_section(content):
        return "bootstrap"
    if isinstance(content, str):
        return _tag_kind(r, content)
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        last = content[-1].get("text")
        if isinstance(last, str) and last.endswith(" -->"):
            return _tag_kind(r, last)  # the check covers the last block (where the mark line is)
    return None


def is_inserted(message: Message) -> bool:
    """Whether ctxlife inserted this message (a summary, a recall block, a system message made for bootstrap).

    The raw-history recorder never records these, and strategies never summarise or recall them again.
    """
    return inserted_kind(message) is not None


def is_summary(message: Message) -> bool:
    """Whether a message is a history summary ctxlife wrote (registered by :func:`mark_inserted`)."""
    return inserted_kind(message) == "summary"


def is_recall_block(message: Message) -> bool:
    """Whether a message is a ``recall`` block ctxlife inserted (registered by :func:`mark_inserted`
    with kind ``"recall"``; a user message that starts like one is not)."""
    return inserted_kind(message) == "recall"


def inserted_meta(messages: Sequence[Message]) -> list[list[Any]]:
    """``[[index, kind], ...]`` of the inserted messages of a list (kept in a snapshot's meta for tools)."""
    return [[i, kind] for i, kind in ((i, inserted_kind(m)) for i, m in enumerate(messages)) if kind is not None]


def restore_inserted(messages: Sequence[Message], meta: Any) -> None:
    """Re-mark the inserted messages of a list restored from a snapshot written before messages
    carried their mark (:func:`mark_inserted`); messages that carry it need nothing."""
    if not isinstance(meta, list):
        return
    for entry in meta:
        if (
            isinstance(entry, list)
            and len(entry) == 2
            and isinstance(entry[0], int)
            and 0 <= entry[0] < len(messages)
            and entry[1] in INSERTED_KINDS
            and _inserted_key(messages[entry[0]]) is not None
            and inserted_kind(messages[entry[0]]) is None
        ):
            mark_inserted(messages[entry[0]], entry[1])


def summary_message(messages: Sequence[Message], text: str, role_: str = "system", fmt: str | None = None) -> Message:
    """A registered summary message for ``messages``' format, with ``text`` after :data:`SUMMARY_PREFIX`.

    ``role_`` is the wanted role; in Anthropic Messages the summary is always a user message (the
    system prompt is passed apart, and the conversation must open with the user).
    """
    if (fmt or list_format(messages)) == ANTHROPIC:
        role_ = "user"
    return mark_inserted({"role": role_, "content": f"{SUMMARY_PREFIX} {text}"}, "summary")


def system_role_allowed(messages: Sequence[Message]) -> bool:
    """Whether ctxlife may add a system message to this list (never to an Anthropic list without one)."""
    return list_format(messages) == OPENAI or (bool(messages) and is_system(messages[0]))


# -- the bootstrap section -----------------------------------------------------------------

_SECTION_RE = re.compile(re.escape(BOOTSTRAP_START) + r".*?" + re.escape(BOOTSTRAP_END), re.DOTALL)


def bootstrap_section(text: str) -> str:
    """The marked section holding bootstrap ``text``."""
    return f"{BOOTSTRAP_START}\n{text}\n{BOOTSTRAP_END}"


def _with_section(content: Any, section: str, *, prepend: bool) -> tuple[Any, bool]:
    """``content`` with its bootstrap section replaced by ``section`` (added if it has none)."""
    if isinstance(content, list):
        for k, part in enumerate(content):
            if (
                isinstance(part, dict)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
                and BOOTSTRAP_START in part["text"]
            ):
                new, changed = _with_section(part["text"], section, prepend=prepend)
                if not changed:
                    return content, False
                out = list(content)
                out[k] = {**part, "text": new}
                return out, True
        new_part = {"type": "text", "text": section}
        return ([new_part, *content] if prepend else [*content, new_part]), True
    text = content if isinstance(content, str) else ""
    if BOOTSTRAP_START in text and BOOTSTRAP_END in text:
        replaced = _SECTION_RE.sub(lambda _: section, text, count=1)
        return replaced, replaced != text
    if not text:
        return section, True
    return (f"{section}\n\n{text}" if prepend else f"{text}\n\n{section}"), True


def apply_bootstrap(messages: list[Message], text: str, *, system_prompt: bool = True, fmt: str | None = None) -> bool:
    """Put ``text`` into the list as one marked section; a new rendering replaces the old one.

    The section goes at the end of the first system message. Without one, it goes into a new
    system message at the top -- unless the list must not get one (``system_prompt=False``, e.g.
    CrewAI's ``use_system_prompt=False``, or an Anthropic list whose system prompt is passed
    apart), in which case it opens the first user turn. ``fmt`` is the list's format when the
    caller knows it (a list of plain text messages is OpenAI chat otherwise). Returns True if the
    list changed.
    """
    if not text:
        return False
    section = bootstrap_section(text)
    if messages and is_system(messages[0]):
        first = messages[0]
        content = first.get("content")
        if text in content_text(first) and BOOTSTRAP_START not in content_text(first):
            return False  # the prompt already holds the text itself
        new, changed = _with_section(content, section, prepend=False)
        if changed:
            messages[0] = {**first, "content": new}
            if inserted_kind(first) == "bootstrap":
                mark_inserted(messages[0], "bootstrap")
        return changed
    allowed = (
        system_role_allowed(messages) if fmt is None else (fmt == OPENAI or bool(messages) and is_system(messages[0]))
    )
    if system_prompt and allowed:
        messages.insert(0, mark_inserted({"role": "system", "content": section}, "bootstrap"))
        return True
    for index, message in enumerate(messages):
        if is_user_turn(message) and not is_inserted(message):  # not a summary made a user message
            if text in content_text(message) and BOOTSTRAP_START not in content_text(message):
                return _strip_other_sections(messages, index)
            new, changed = _with_section(message.get("content"), section, prepend=True)
            if changed:
                messages[index] = {**message, "content": new}
            return _strip_other_sections(messages, index) or changed
    return False


def _strip_other_sections(messages: list[Message], keep: int) -> bool:
    """Remove the bootstrap section from every user message but ``messages[keep]``: a restored
    conversation brings its own first user turn, and the section belongs in the first one only."""
    changed = False
    for index in range(keep + 1, len(messages)):
        message = messages[index]
        if role(message) == "user" and has_bootstrap_section(message):
            messages[index] = strip_bootstrap(message)
            changed = True
    return changed


def has_bootstrap_section(message: Message) -> bool:
    return BOOTSTRAP_START in content_text(message)


def strip_bootstrap(message: Message) -> Message:
    """``message`` without ctxlife's bootstrap section (the same object when it has none)."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        if BOOTSTRAP_START not in content:
            return message
        match = _SECTION_RE.search(content)
        if match is None:
            return message
        start, end = match.span()
        # undo exactly what apply_bootstrap added: the section and the blank line joining it
        if content.startswith("\n\n", end):
            end += 2
        elif content.endswith("\n\n", 0, start):
            start -= 2
        return {**message, "content": content[:start] + content[end:]}
    if isinstance(content, list):
        parts = [
            p
            for p in content
            if not (isinstance(p, dict) and p.get("type") == "text" and BOOTSTRAP_START in str(p.get("text")))
        ]
        if len(parts) == len(content):
            return message
        return {**message, "content": parts}
    return message


# -- text hygiene ----------------------------------------------------------------------------

#: Scripts written without spaces between words (Han, kana, hangul, bopomofo), as a regex class body:
#: a Latin code or a number right next to one of their characters still stands on its own.
CJK = (
    r"\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3031-\u3035\u3038-\u303c\u3040-\u30ff\u3100-\u312f"
    r"\u3131-\u318f\u31a0-\u31bf\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af"
    r"\ud7b0-\ud7ff\uf900-\ufaff\U00020000-\U0003134f"
)
#: CJK punctuation and the full-width forms (a regex class body): they end a word like a space does.
CJK_PUNCTUATION = r"\u3000-\u303f\uff00-\uffef"
_CJK_RE = re.compile(f"[{CJK}]")


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


_JOINERS = frozenset("\u200d\u034f\u2060")  # zero-width joiner, combining grapheme joiner, word joiner
_BREAKS = frozenset(" \t\n\r\f\v\u3000。！？；，、：）】」』》…")
_ASCII_BREAKS = frozenset(",.;:!?)]}")  # a break only when no word goes on after it (not in 1,299.00 or a@b.com)


def _attached(char: str) -> bool:
    """Whether ``char`` belongs to the character before it (a combining mark, a joiner, a variation
    selector, a skin tone)."""
    code = ord(char)
    return (
        unicodedata.combining(char) != 0
        or char in _JOINERS
        or 0xFE00 <= code <= 0xFE0F
        or 0xE0100 <= code <= 0xE01EF
        or 0x1F3FB <= code <= 0x1F3FF
        or 0xDC00 <= code <= 0xDFFF  # the low half of a surrogate pair kept as two code points
        or unicodedata.category(char) in ("Mn", "Me")
    )


def safe_cut(text: str, index: int, *, backward: bool = True, reach: int = 40) -> int:
    """A cut point near ``index`` that splits no word, character or emoji sequence.

    Looks ``reach`` characters back (or forward) for a space, a line break or punctuation
    (Chinese and Japanese included) to cut after; in text without any (CJK runs, long
    tokens), cuts between two characters but never inside a combining sequence, a ZWJ emoji,
    a flag or a surrogate pair.
    """
    n = len(text)
    index = max(0, min(index, n))
    if index in (0, n):
        return index
    span = range(index, max(index - reach, 0), -1) if backward else range(index, min(index + reach, n))
    for i in span:
        before = text[i - 1]
        if (before in _BREAKS or (before in _ASCII_BREAKS and not _in_word(text[i]))) and not _attached(text[i]):
            return i
    step = -1 if backward else 1
    # Inside a run of letters and digits of an alphabetic script (an id such as ORD-88231 inside
    # Chinese text), cut at the run's edge; between two CJK characters is a fine place.
    i = index
    while 0 < i < n and _in_word(text[i - 1]) and _in_word(text[i]) and abs(i - index) < reach:
        i += step
    if not (0 < i < n and _in_word(text[i - 1]) and _in_word(text[i])):
        index = i
    i = index
    while 0 < i < n and (
        _attached(text[i]) or text[i - 1] in _JOINERS or _regional_pair(text, i) or _high_surrogate(text[i - 1])
    ):
        i += step
    return i


_WORD_PUNCT = frozenset("-_.@/'")


def _in_word(char: str) -> bool:
    """A character of a word in a script that separates words with spaces (Latin, Cyrillic, digits, ...)."""
    if char in _WORD_PUNCT:
        return True
    if not char.isalnum():
        return False
    return not _is_cjk(char)


def _is_cjk(char: str) -> bool:
    return _CJK_RE.match(char) is not None


def _regional_pair(text: str, i: int) -> bool:
    """Whether ``i`` falls between the two regional indicators of a flag."""
    if not (0x1F1E6 <= ord(text[i]) <= 0x1F1FF and 0x1F1E6 <= ord(text[i - 1]) <= 0x1F1FF):
        return False
    run = 0
    j = i - 1
    while j >= 0 and 0x1F1E6 <= ord(text[j]) <= 0x1F1FF:
        run += 1
        j -= 1
    return run % 2 == 1


def _high_surrogate(char: str) -> bool:
    return 0xD800 <= ord(char) <= 0xDBFF


def iter_texts(messages: Iterable[Message]) -> Iterator[str]:
    """The text of each message (see :func:`text_of`)."""
    for message in messages:
        yield text_of(message)


# -- helpers shared by ctxlife.facts and ctxlife.summarizers ---------------------------------------
# (moved here from their private functions by the architecture step; pairing now goes through the
# one model above, so Anthropic tool_use/tool_result and legacy function calls pair too.)

_SUMMARY_WORDS = re.escape(SUMMARY_PREFIX.removesuffix(":"))
# The marker as a model may echo it back: any case, after a markdown heading or bold, space before ":".
_SUMMARY_MARKER_AT_START_RE = re.compile(r"\s*(?:#+\s*)?\**\s*" + _SUMMARY_WORDS + r"\s*:\**\s*", re.IGNORECASE)
_SUMMARY_MARKER_ANYWHERE_RE = re.compile(_SUMMARY_WORDS + r"\s*:", re.IGNORECASE)


def json_payload(text: str) -> Any:
    """The JSON object or array that ``text`` holds (tool-call arguments, a tool result), else ``None``."""
    s = text.strip()
    if not s or s[0] not in "[{" or s[-1] not in "]}":
        return None
    try:
        return json.loads(s)
    except (ValueError, RecursionError):
        return None


def tool_call_name(call: Mapping[str, Any]) -> str:
    """The function name of an OpenAI-format tool call, or of an Anthropic ``tool_use`` block
    (``"tool"`` when it has none)."""
    if isinstance(call, Mapping) and call.get("type") == "tool_use":
        return str(call.get("name") or "tool")
    fn = call.get("function") if isinstance(call, Mapping) else None
    name = fn.get("name") if isinstance(fn, Mapping) else None
    return str(name) if name else "tool"


def tool_call_arguments(call: Mapping[str, Any]) -> Any:
    """The arguments of a tool call as stored (OpenAI: a JSON string, usually; Anthropic: the
    ``input`` object), or ``None``."""
    if isinstance(call, Mapping) and call.get("type") == "tool_use":
        return call.get("input")
    fn = call.get("function") if isinstance(call, Mapping) else None
    return fn.get("arguments") if isinstance(fn, Mapping) else None


def pair_tool_calls(messages: Sequence[Mapping[str, Any]]) -> tuple[dict[tuple[int, int], int], set[int]]:
    """Pair each tool call with the message holding its result (by id within one turn, else by position).

    Returns ``(pairs, orphans)``: ``pairs[(assistant_index, call_index)] = result message index``
    for answered calls (``call_index`` into :func:`calls_of`; for Anthropic lists several calls
    share the user message holding their ``tool_result`` blocks), and the indices of result
    messages that answer nothing. See :func:`pair_tool_results`.
    """
    pairs: dict[tuple[int, int], int] = {}
    orphans: set[int] = set()
    answered: set[int] = set()
    n = len(messages)
    i = 0
    while i < n:
        message = messages[i]
        if isinstance(message, dict) and has_calls(message):
            pairing = pair_tool_results(cast(Sequence[Message], messages), i)
            for position, call in enumerate(pairing.results):
                j = pairing.result_at[position][0]
                if call is None:
                    orphans.add(j)
                else:
                    pairs[(i, call)] = j
                answered.add(j)
            i = max(pairing.end, i + 1)
            continue
        if isinstance(message, dict) and is_tool_result(message) and i not in answered:
            orphans.add(i)
        i += 1
    return pairs, orphans


def raw_calls(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The tool calls of an assistant message as written, in :func:`calls_of`'s order: OpenAI
    ``tool_calls`` entries, a legacy ``function_call`` (as ``{"function": ...}``), Anthropic
    ``tool_use`` blocks. :func:`tool_call_name` and :func:`tool_call_arguments` read each."""
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return []
    calls = message.get("tool_calls")
    out: list[Mapping[str, Any]] = (
        [c if isinstance(c, Mapping) else {} for c in calls] if isinstance(calls, list) else []
    )
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping):
        out.append({"id": None, "type": "function", "function": legacy})
    content = message.get("content")
    if isinstance(content, list):
        out.extend(b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_use")
    return out


def tool_results_by_call(messages: Sequence[Mapping[str, Any]]) -> dict[tuple[int, int], Any]:
    """``(assistant index, call index) -> the result`` (a ``tool`` message's content, or an Anthropic
    ``tool_result`` block's; text when it is a list of parts) for every answered call (see
    :func:`pair_tool_results`)."""
    out: dict[tuple[int, int], Any] = {}
    for i, message in enumerate(messages):
        if not (isinstance(message, dict) and has_calls(message)):
            continue
        pairing = pair_tool_results(cast(Sequence[Message], messages), i)
        for position, call in enumerate(pairing.results):
            if call is None:
                continue
            j, k = pairing.result_at[position]
            content = messages[j].get("content") if k is None else messages[j]["content"][k].get("content")
            out[(i, call)] = content_text(content) if isinstance(content, list) else content
    return out


def own_text(message: Mapping[str, Any]) -> str:
    """The text a message says itself: its content without tool calls or tool results
    (an Anthropic user message that only carries ``tool_result`` blocks says nothing)."""
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, list):
        return content_text(
            [b for b in content if not (isinstance(b, Mapping) and b.get("type") in ("tool_use", "tool_result"))]
        )
    return content_text(content)


def starts_with_summary_marker(message: Mapping[str, Any]) -> bool:
    """A system/user/assistant message whose text starts with the ``History summary:`` marker.

    More tolerant than :func:`is_summary` (which recognises the messages ctxlife wrote): any case,
    leading whitespace, markdown heading or bold, and content given as parts. Summarizers use it to
    fold a summary found inside a span instead of summarizing it again.
    """
    if message.get("role") not in ("system", "user", "assistant"):
        return False
    return _SUMMARY_MARKER_AT_START_RE.match(content_text(message.get("content"))) is not None


def strip_summary_marker(text: str | None) -> str:
    """Remove every ``History summary:`` marker (leading or nested) from ``text``,
    so that folding a previous summary never nests one summary inside another."""
    if not text:
        return ""
    s = text
    while (m := _SUMMARY_MARKER_AT_START_RE.match(s)) is not None:
        s = s[m.end() :]
    s = _SUMMARY_MARKER_ANYWHERE_RE.sub("", s)
    return s.strip()
