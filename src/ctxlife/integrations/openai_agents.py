"""The OpenAI Agents SDK adapter: the only module of ctxlife that knows the ``agents`` package.

:class:`AgentsSession` is a session for ``Runner.run(session=...)`` (the SDK's ``Session`` protocol)
whose conversation ctxlife manages: each model call's input passes the config's strategies through
:meth:`~AgentsSession.input_filter`, the run's ``call_model_input_filter``. What each SDK call does, and
how Responses items become chat messages and back: docs/integrations.md, "The OpenAI Agents SDK".

:func:`to_messages` keeps each message's items under :data:`ITEMS_KEY`, so :func:`from_messages` gives
back exactly what the SDK stored, unless ctxlife changed the message: then it is converted from its
chat fields, and its reasoning, which described the old text, is dropped. A plain
``{"role", "content": str}`` item is already a chat message and is kept as it is.
Needs ``pip install 'ctxlife[agents]'``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import os
import threading
import warnings
from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Self, cast

import ctxlife
from ctxlife.integrations import require

if TYPE_CHECKING:
    from agents import RunConfig
    from agents.run_config import CallModelData, ModelInputData

    from ctxlife import Host, Session, Settings

__all__ = ["ITEMS_KEY", "AgentsSession", "from_messages", "to_messages"]

#: The key under which a converted message keeps the Responses items it stands for.
ITEMS_KEY = "ctxlife_items"

Item = dict[str, Any]
Message = dict[str, Any]

_CHAT_ROLES = ("system", "developer", "user", "assistant")
#: How many of the latest recorded items a session remembers to find where the SDK's list is new.
_KNOWN = 64
#: How many items before the newest recorded one must agree for the SDK's list to continue it.
_AGREE = 4


# -- items <-> messages -------------------------------------------------------------------------


def _kind(item: Item) -> str:
    """``plain`` (already a chat message), ``message``, ``call``, ``output`` or ``extra`` (anything else)."""
    kind = item.get("type")
    if kind is None and isinstance(item.get("role"), str):
        plain = (
            item["role"] in _CHAT_ROLES and isinstance(item.get("content"), str) and set(item) <= {"role", "content"}
        )
        return "plain" if plain else "message"
    if kind == "message":
        return "message"
    if kind == "function_call":
        return "call"
    if kind == "function_call_output":
        return "output"
    return "extra"


def _parts_text(content: Any) -> str:
    """The text of a content value: a string, or its parts' text (``input_text``, ``output_text``, ``refusal``)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            text = part.get("text", part.get("refusal"))
            if isinstance(text, str):
                texts.append(text)
    return "\n".join(texts)


def _group_message(group: Sequence[Item]) -> Message:
    """The chat message a group of items stands for (without :data:`ITEMS_KEY`)."""
    kinds = [_kind(item) for item in group]
    if "output" in kinds:
        output = group[kinds.index("output")]
        return {
            "role": "tool",
            "tool_call_id": str(output.get("call_id", "")),
            "content": _parts_text(output.get("output")),
        }
    texts = [
        _parts_text(item.get("content"))
        for item, kind in zip(group, kinds, strict=True)
        if kind in ("plain", "message")
    ]
    first = next((item for item, kind in zip(group, kinds, strict=True) if kind in ("plain", "message")), None)
    if "call" in kinds:
        calls = [
            {
                "id": str(item.get("call_id", "")),
                "type": "function",
                "function": {"name": str(item.get("name", "")), "arguments": str(item.get("arguments", ""))},
            }
            for item, kind in zip(group, kinds, strict=True)
            if kind == "call"
        ]
        return {"role": "assistant", "content": "\n".join(texts) or None, "tool_calls": calls}
    if first is not None:
        return {"role": str(first.get("role", "user")), "content": "\n".join(texts)}
    return {"role": "assistant", "content": ""}  # only items chat messages cannot show (reasoning)


def _with_items(group: list[Item]) -> Message:
    if len(group) == 1 and _kind(group[0]) == "plain":
        return dict(group[0])  # already a chat message: stored as it is
    return {**_group_message(group), ITEMS_KEY: [dict(item) for item in group]}


def to_messages(items: Iterable[Item]) -> list[Message]:
    """Responses items as ctxlife chat messages, each keeping its items under :data:`ITEMS_KEY`.

    Consecutive ``function_call`` items (and the assistant message before them) are one assistant
    message with ``tool_calls``; ``reasoning`` and other items ride with the next message (else
    the previous one). :func:`from_messages` reverses it exactly.
    """
    groups: list[list[Item]] = []
    pending: list[Item] = []
    open_assistant = False  # the last group can take more function calls
    for item in items:
        kind = _kind(item)
        if kind == "extra":
            pending.append(item)
            continue
        if kind == "call" and open_assistant:
            groups[-1] += [*pending, item]
        else:
            groups.append([*pending, item])
        pending = []
        open_assistant = kind == "call" or (kind in ("plain", "message") and item.get("role") == "assistant")
    if pending:
        if groups:
            groups[-1] += pending
        else:
            groups.append(pending)
    return [_with_items(group) for group in groups]


def _chat_items(message: Message) -> list[Item]:
    """Responses items for a chat message ctxlife wrote or changed (from its chat fields)."""
    role = message.get("role")
    text = _parts_text(message.get("content"))
    if role == "tool":
        return [{"type": "function_call_output", "call_id": str(message.get("tool_call_id", "")), "output": text}]
    items: list[Item] = []
    calls = message.get("tool_calls") or []
    if role == "assistant" and not text and not calls:
        return []  # an empty carrier whose reasoning went stale
    if not (role == "assistant" and calls and not text):
        items.append({"role": role if role in _CHAT_ROLES else "user", "content": text})
    for call in calls:
        function = call.get("function") or {}
        items.append(
            {
                "type": "function_call",
                "call_id": str(call.get("id", "")),
                "name": str(function.get("name", "")),
                "arguments": str(function.get("arguments", "")),
            }
        )
    return items


def _items_of(message: Message) -> list[Item]:
    carried = message.get(ITEMS_KEY)
    chat = {key: value for key, value in message.items() if key != ITEMS_KEY}
    if isinstance(carried, list) and carried and all(isinstance(item, dict) for item in carried):
        if _group_message(carried) == chat:
            return [dict(item) for item in carried]  # unchanged: exactly what the SDK stored
        # Changed by ctxlife: its chat fields say what it is now; reasoning about the old text is stale.
        kept = [dict(item) for item in carried if _kind(item) == "extra" and item.get("type") != "reasoning"]
        return kept + _chat_items(chat)
    return _chat_items(chat)


def from_messages(messages: Iterable[Message]) -> list[Item]:
    """ctxlife chat messages back as Responses items: the items a message carries when it is
    unchanged, else items converted from its chat fields (see the module docs)."""
    return [item for message in messages for item in _items_of(message)]


def _match_key(item: Item) -> str:
    """What two items must share to be the same item of the conversation (ids and the SDK's own
    metadata left out: the SDK may drop or rewrite them between saving and sending)."""
    payload = {k: v for k, v in item.items() if k not in ("id", "status", "provider_data") and not k.startswith("_")}
    return json.dumps(payload, sort_keys=True, default=str)


def _sendable(item: Item) -> Item:
    """An item without the SDK's session-only metadata (``_agents_...`` keys), as the model takes it."""
    if any(key.startswith("_") for key in item):
        return {key: value for key, value in item.items() if not key.startswith("_")}
    return item


# -- the session --------------------------------------------------------------------------------


class AgentsSession:
    """A ctxlife session for the OpenAI Agents SDK: ``Runner.run(agent, input, session=s, run_config=s.run_config())``.

    Implements the SDK's ``Session`` protocol over a :class:`ctxlife.Session` (the config's
    ``store``: file, sqlite or redis), and :meth:`input_filter`, the ``call_model_input_filter``
    that manages every model call's input. Without the filter the conversation is stored exactly
    but never compacted.

    Args:
        session_id: the SDK's session id; any string (mapped to a store key as ctxlife does).
        config: a config path, :class:`~ctxlife.config.Settings` or None (``./ctxlife.toml``, then
            ``[tool.ctxlife]``, then the defaults).
        view: the lane inside the session (one agent's, ``""``: the default view).
        context_window, model, plugins, summary_model, host: as for :class:`ctxlife.Session`.

    The SDK's ``session_settings.limit`` and ``session_input_callback`` trim the history the SDK
    reads; the filter sends the managed conversation instead (ctxlife's strategies decide what
    fits), so leave them unset.
    """

    session_settings: Any = None  # the SDK's SessionSettings: None means its defaults

    def __init__(
        self,
        session_id: str,
        config: str | os.PathLike[str] | Settings | None = None,
        *,
        view: str = "",
        context_window: int | None = None,
        model: str | None = None,
        plugins: Sequence[object] = (),
        summary_model: object | None = None,
        host: Host | None = None,
    ) -> None:
        require("agents", "agents", "ctxlife.integrations.openai_agents")
        self.session_id = session_id
        self.view = view
        self._config = config
        self._options: dict[str, Any] = {
            "view": view,
            "context_window": context_window,
            "model": model,
            "plugins": plugins,
            "summary_model": summary_model,
            "host": host,
        }
        self._session: Session | None = None
        self._lock = threading.Lock()  # the SDK awaits one call at a time; this guards the worker threads
        # Match keys of the latest items known to be recorded, oldest first: where the SDK's list
        # continues them, the rest is what it has not saved yet.
        self._known: deque[str] = deque(maxlen=_KNOWN)
        # Items the filter recorded before the SDK saved them (a streamed run saves its input after
        # the first call): the SDK's add_items of them records nothing.
        self._recorded_early: deque[str] = deque()
        self._filtered = False  # whether input_filter ran since the run started (get_items)
        self._warned = False

    # -- the SDK's Session protocol ---------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The conversation as Responses items: the view's snapshot (compacted) and the records after it.

        With ``limit``, the latest ``limit`` items, oldest first.
        """
        return await asyncio.to_thread(self._get_items, limit)

    async def add_items(self, items: list[Any]) -> None:
        """Record ``items`` in the view's raw history (what the filter already recorded is skipped)."""
        await asyncio.to_thread(self._add_items, [dict(item) for item in items])

    async def pop_item(self) -> Any | None:
        """Remove and return the latest item (None when the view is empty)."""
        return await asyncio.to_thread(self._pop_item)

    async def clear_session(self) -> None:
        """Delete the whole session (every view's snapshot and records, and its blobs)."""
        await asyncio.to_thread(self._clear)

    # -- the model input filter ----------------------------------------------------------------------

    async def input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig.call_model_input_filter``: the call's input managed by the config's strategies.

        What the SDK has not saved to the session yet is recorded first; the instructions are the
        system prompt the window is counted with, and come back as the instructions (a strategy may
        have added to them, as ``bootstrap`` does).
        """
        from agents.run_config import ModelInputData  # lazy: openai-agents is an optional extra

        given = data.model_data
        items = [dict(cast("dict[str, Any]", item)) for item in given.input]
        managed, instructions = await asyncio.to_thread(self._filter, items, given.instructions)
        return ModelInputData(input=cast("list[Any]", managed), instructions=instructions)

    def run_config(self, run_config: RunConfig | None = None) -> RunConfig:
        """``run_config`` (or a new ``RunConfig``) with :meth:`input_filter` as its ``call_model_input_filter``.

        A filter the config already has runs after this session's, on the managed input.
        """
        from agents import RunConfig  # lazy: openai-agents is an optional extra

        base = run_config if run_config is not None else RunConfig()
        theirs = base.call_model_input_filter
        if theirs is None:
            return dataclasses.replace(base, call_model_input_filter=self.input_filter)

        async def both(data: CallModelData[Any]) -> ModelInputData:
            data = dataclasses.replace(data, model_data=await self.input_filter(data))
            result = theirs(data)
            return await result if inspect.isawaitable(result) else result

        return dataclasses.replace(base, call_model_input_filter=both)

    # -- lifetime ---------------------------------------------------------------------------------

    async def session(self) -> Session:
        """The underlying :class:`ctxlife.Session` (built in a worker thread on first use)."""
        return await asyncio.to_thread(self._ctxlife_session)

    async def close(self) -> None:
        """Close the session's host (and store) if it made them. Idempotent."""
        if self._session is not None:
            await asyncio.to_thread(self._session.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        view = f", view={self.view!r}" if self.view else ""
        return f"{type(self).__name__}({self.session_id!r}{view})"

    # -- in a worker thread -------------------------------------------------------------------------

    def _ctxlife_session(self) -> Session:
        with self._lock:
            return self._opened()

    def _opened(self) -> Session:
        if self._session is None:
            self._session = ctxlife.Session(self.session_id, self._config, **self._options)
        return self._session

    def _get_items(self, limit: int | None) -> list[Item]:
        with self._lock:
            items = from_messages(self._opened().get_items())
            if limit is None:
                # A run starts from these: its list continues them.
                self._known.clear()
                self._known.extend(_match_key(item) for item in items)
                self._recorded_early.clear()
                self._filtered = False
                return items
            return items[-limit:] if limit > 0 else []

    def _add_items(self, items: list[Item]) -> None:
        with self._lock:
            fresh = list(items)
            while fresh and self._recorded_early and self._recorded_early[0] == _match_key(fresh[0]):
                self._recorded_early.popleft()
                fresh.pop(0)
            if fresh:
                self._check_filtered(fresh)
                self._recorded_early.clear()  # the SDK saved something else: what the filter noted is stale
                self._opened().add(*to_messages(fresh))
                self._known.extend(_match_key(item) for item in fresh)

    def _check_filtered(self, items: list[Item]) -> None:
        """Warn once when a run's model output arrives but no model call went through the filter."""
        replied = any(
            _kind(item) in ("call", "message") and item.get("role", "assistant") == "assistant" for item in items
        )
        if replied and not self._filtered and not self._warned:
            self._warned = True
            warnings.warn(
                f"AgentsSession {self.session_id!r}: the run's model calls did not go through the session's "
                "input filter, so the conversation is stored but never compacted or recalled; pass "
                "run_config=session.run_config() (or call_model_input_filter=session.input_filter) to Runner.run",
                ctxlife.CtxlifeWarning,
                stacklevel=2,
            )

    def _pop_item(self) -> Item | None:
        with self._lock:
            session = self._opened()
            message = session.pop()
            if message is None:
                return None
            items = _items_of(message)
            if len(items) > 1:
                session.add(*to_messages(items[:-1]))  # the message held several items: one is popped
            last = items[-1] if items else None
            if last is not None and self._known and self._known[-1] == _match_key(last):
                self._known.pop()
            return last

    def _clear(self) -> None:
        with self._lock:
            self._opened().clear()
            self._known.clear()
            self._recorded_early.clear()

    def _unsaved(self, items: list[Item]) -> list[Item]:
        """The end of the SDK's list that the session does not hold yet (after the newest recorded item)."""
        if not self._known:
            return items
        keys = [_match_key(item) for item in items]
        known = list(self._known)
        candidates = [j for j in range(len(keys), 0, -1) if keys[j - 1] == known[-1]]
        for j in candidates:
            depth = min(j, len(known), _AGREE)
            if keys[j - depth : j] == known[-depth:]:
                return items[j:]
        return items[candidates[0] :] if candidates else []

    def _filter(self, items: list[Item], instructions: str | None) -> tuple[list[Item], str | None]:
        with self._lock:
            session = self._opened()
            self._filtered = True
            unsaved = self._unsaved(items)
            session.system = instructions  # counted with the window, never recorded
            managed = session.messages(*to_messages(unsaved))
            keys = [_match_key(item) for item in unsaved]
            self._known.extend(keys)
            self._recorded_early.extend(keys)
            if instructions and managed and managed[0].get("role") == "system":  # Session put it first
                instructions = _parts_text(managed[0].get("content"))
                managed = managed[1:]
            return [_sendable(item) for item in from_messages(managed)], instructions
