"""Message formats: the two ctxlife reads, telling them apart, refusing everything else, and roles.

Roles, content, tool calls and what is pinned in OpenAI chat (:data:`OPENAI`) and Anthropic Messages
(:data:`ANTHROPIC`), and what is refused: docs/concepts.md, "Message formats". :func:`check_shape`
refuses with :class:`~ctxlife.errors.InvalidMessagesError` naming the message index and the format it
looks like; :class:`ShapeMemo` lets a host re-check a growing list at the cost of its new messages only.
"""

from __future__ import annotations

import marshal
from collections.abc import Iterable, Sequence
from typing import Any

from ctxlife.errors import InvalidMessagesError
from ctxlife.messages.previous import Agreement

Message = dict[str, Any]

#: What a list's shape check found: the format of its first format-specific message and its index
#: (``(None, -1)``: plain text only).
Shape = tuple[str | None, int]

#: How a list compares with one checked before, and what that check found.
Unchanged = tuple[Agreement, Shape]


OPENAI = "openai"


ANTHROPIC = "anthropic"


FORMAT_NAMES = {OPENAI: "OpenAI chat", ANTHROPIC: "Anthropic Messages"}


SYSTEM_ROLES = frozenset({"system", "developer"})
"""Roles pinned like a system prompt (``developer`` is OpenAI's newer name for it)."""


_OPENAI_ONLY_ROLES = frozenset({"developer", "tool", "function"})


_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


_OPENAI_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})


ANTHROPIC_SERVER_BLOCKS = frozenset(
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
    | ANTHROPIC_SERVER_BLOCKS
)


_BEDROCK_KEYS = frozenset(
    {"toolUse", "toolResult", "reasoningContent", "cachePoint", "guardContent", "citationsContent", "video"}
)


_RESPONSES_ITEMS = frozenset(
    {"function_call", "function_call_output", "reasoning", "message", "computer_call", "computer_call_output"}
)


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


def _detect(
    messages: Sequence[Any], where: str, memo: ShapeMemo | None = None, unchanged: Unchanged | None = None
) -> tuple[str | None, int]:
    found: str | None = None
    first = -1
    positions: Iterable[int] = range(len(messages))
    if unchanged is not None:
        agreement, (found_before, first_before) = unchanged
        if found_before is None or agreement.same(first_before):
            # Messages equal to the ones of a list already checked (and handed back) are not looked at.
            found, first = found_before, first_before
            positions = agreement.unknown(len(messages))
    known: dict[int, _Checked] = {}
    if memo is not None:
        known, older = memo.known, memo.older
        memo.known, memo.older = {}, known  # what this list holds now, and the list before it
    for i in positions:
        message = messages[i]
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
    if memo is not None:
        memo.found = (found, first)
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

    __slots__ = ("found", "known", "older")

    def __init__(self) -> None:
        self.known: dict[int, _Checked] = {}
        self.older: dict[int, _Checked] = {}
        self.found: Shape = (None, -1)  # what the last check found (see check_shape's ``unchanged``)


def check_shape(
    messages: Any,
    where: str = "messages",
    expected: str | None = None,
    memo: ShapeMemo | None = None,
    unchanged: Unchanged | None = None,
) -> str:
    """Raise :class:`InvalidMessagesError` unless ``messages`` is a list in one known format; return the format.

    ``expected``: the format the caller configured (``message_format``); a list that is clearly
    in the other one is refused. ``memo``: what earlier calls checked (:class:`ShapeMemo`), so only
    new or edited messages are classified. ``unchanged``: how the list compares with one checked
    before (:class:`~ctxlife.messages.previous.Agreement`) and what that check found
    (:attr:`ShapeMemo.found`); positions holding the same message are not looked at.
    """
    if not isinstance(messages, list):
        raise InvalidMessagesError(
            f"{where} must be a list of message dicts, got {type(messages).__name__}; "
            "pass OpenAI chat or Anthropic Messages messages such as [{'role': 'user', 'content': 'hi'}]"
        )
    found, first = _detect(messages, where, memo, unchanged)
    if expected is not None and found is not None and found != expected:
        raise InvalidMessagesError(
            f"{where}[{first}] is an {FORMAT_NAMES[found]} message but message_format is {expected!r}; "
            f'set message_format = "{found}" (or "auto") or convert the list'
        )
    return found or expected or OPENAI


def clear_format(messages: Sequence[Any]) -> tuple[str | None, int]:
    """The format a list of known shape is clearly in, and the first message that shows it (an Anthropic
    block; an OpenAI tool call or ``tool`` role); ``(None, -1)`` when every message is valid in both
    (plain text). Raises as :func:`check_shape` for a list that mixes the two."""
    return _detect(messages, "messages")


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


def role(message: Message) -> str | None:
    return message.get("role") if isinstance(message, dict) else None


def is_system(message: Message) -> bool:
    """Whether a message is a system prompt (``system`` or ``developer``): pinned, never evicted."""
    return role(message) in SYSTEM_ROLES


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
