"""``ctxlife.manage``: the framework-neutral entry point."""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxlife.config import Settings, find_default_config, load_settings, validate_context_window
from ctxlife.errors import ConfigError
from ctxlife.host import Host, Report

if TYPE_CHECKING:
    from ctxlife.sessions.base import RawRecord

_MAX_HOSTS = 32
_hosts: OrderedDict[tuple[Any, ...], tuple[Host, Any]] = OrderedDict()
_hosts_lock = threading.Lock()


def resolve_settings(config: str | os.PathLike[str] | Settings | None) -> Settings:
    """Settings for a ``config`` argument: a Settings object, a path, or None (the defaults search)."""
    return config if isinstance(config, Settings) else load_settings(config)


def manage(
    messages: list[dict[str, Any]],
    *,
    config: str | os.PathLike[str] | Settings | None = None,
    context_window: int | None = None,
    model: str | None = None,
    session_id: str | None = None,
    plugins: Sequence[object] = (),
    summary_model: object | None = None,
) -> Report:
    """Run the ``before_llm_call`` pipeline on a list of messages (OpenAI chat or Anthropic Messages), in place.

    For any framework (LangGraph, the OpenAI Agents SDK, your own loop): call it
    right before each model call with the list you are about to send. Returns a
    :class:`~ctxlife.host.Report` with ``tokens_before``, ``tokens_after``,
    ``actions`` and ``failures``.

    ``config`` is a path, a :class:`Settings` or None (``./ctxlife.toml``, then
    ``[tool.ctxlife]`` in ``./pyproject.toml``, then built-in defaults). Calls with
    the same config, window, model, session and plugins share one host, so
    strategies keep their state and token counts stay cached between calls; use
    :class:`ctxlife.Host` directly to control that lifetime yourself. ``summary_model`` is the
    model ``llm_summary`` summarizes with (a function ``(messages, max_tokens) -> str``, sync or
    async, or a chat model; see :class:`ctxlife.Host`).
    """
    validate_context_window(context_window, "context_window")  # before it becomes part of a cache key
    if session_id is not None:
        from ctxlife.sessions.ids import validate_session_id

        validate_session_id(session_id)  # before it becomes part of a cache key
    with _hosts_lock:
        settings_key = _settings_key(config)
        key = (settings_key, context_window, model, session_id, tuple(id(p) for p in plugins), id(summary_model))
        found = _hosts.get(key)
        if found is not None:
            _hosts.move_to_end(key)
    if found is None:
        settings = resolve_settings(config)
        host = Host(
            settings,
            context_window=context_window,
            model=model,
            session_id=session_id,
            plugins=plugins,
            summary_model=summary_model,
        )
        warn_unreachable_nodes(host)
        with _hosts_lock:
            # Keep the config/plugins/model alive with the host so their ids are not reused.
            _hosts[key] = (host, (config, tuple(plugins), summary_model))
            while len(_hosts) > _MAX_HOSTS:
                _, (old, _) = _hosts.popitem(last=False)
                old.close()
    else:
        host = found[0]
    return host.manage(messages, context_window=context_window, model=model)


def record_reply(
    reply: object,
    *,
    config: str | os.PathLike[str] | Settings | None = None,
    session_id: str | None = None,
    view: str = "",
    plugins: Sequence[object] = (),
) -> list[RawRecord]:
    """After a model call on a list you passed to :func:`manage`: record the model's reply in the session.

    ``reply`` is the reply (text, a message dict, an SDK message object with ``model_dump()``) or,
    better, the whole list with the reply appended (recorded by alignment: nothing twice). Call it
    after every model call, or at least after the last one of a process: :func:`manage` records a
    reply only when it sees it in the next call's list, and a process's last reply has no next
    call. Use the ``config``, ``session_id`` and ``plugins`` you gave :func:`manage` (they pick
    its host). Returns the new records (``[]`` without a session).
    """
    from ctxlife.sessions.ids import validate_session_id
    from ctxlife.sessions.session import as_message

    payload = reply if isinstance(reply, list) else as_message(reply)
    if session_id is not None:
        validate_session_id(session_id)
    with _hosts_lock:
        settings_key = _settings_key(config)
        plugin_ids = tuple(id(p) for p in plugins)
        found = next(
            (
                h
                for k, (h, _) in reversed(_hosts.items())
                if (k[0], k[3], k[4]) == (settings_key, session_id, plugin_ids)
            ),
            None,
        )
    if found is not None:
        return found.record_reply(payload, session_id=session_id, view=view)
    host = Host(resolve_settings(config), session_id=session_id, plugins=plugins)
    try:
        return host.record_reply(payload, session_id=session_id, view=view)
    finally:
        host.close()


async def arecord_reply(
    reply: object,
    *,
    config: str | os.PathLike[str] | Settings | None = None,
    session_id: str | None = None,
    view: str = "",
    plugins: Sequence[object] = (),
) -> list[RawRecord]:
    """:func:`record_reply` for asyncio apps (in a worker thread, like :func:`amanage`)."""
    return await asyncio.to_thread(
        functools.partial(record_reply, reply, config=config, session_id=session_id, view=view, plugins=plugins)
    )


def _settings_key(config: str | os.PathLike[str] | Settings | None) -> tuple[Any, ...]:
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("CTXLIFE_")))
    if isinstance(config, Settings):
        return ("settings", id(config))
    if config is not None and not isinstance(config, (str, os.PathLike)):
        raise ConfigError(
            f"config= takes a path to a TOML file or a ctxlife.Settings, got {type(config).__name__}; "
            "for a dict, build the settings once with ctxlife.config.settings_from_dict(...) and pass those"
        )
    path = Path(config) if config is not None else find_default_config()
    if path is None:
        return ("defaults", env)
    try:
        return ("file", str(path.resolve()), path.stat().st_mtime_ns, env)
    except OSError:
        return ("file", str(path), None, env)


def clear_hosts() -> None:
    """Close and forget every host ``manage()`` created (for tests and long-lived processes)."""
    with _hosts_lock:
        for host, _ in _hosts.values():
            host.close()
        _hosts.clear()


async def amanage(
    messages: list[dict[str, Any]],
    *,
    config: str | os.PathLike[str] | Settings | None = None,
    context_window: int | None = None,
    model: str | None = None,
    session_id: str | None = None,
    plugins: Sequence[object] = (),
    summary_model: object | None = None,
) -> Report:
    """:func:`manage` for asyncio apps: the same pipeline in a worker thread, so the event loop keeps
    running while a strategy works (an LLM summary can take seconds). Concurrent calls for different
    sessions run in parallel; do not touch ``messages`` until it returns."""
    return await asyncio.to_thread(
        manage,
        messages,
        config=config,
        context_window=context_window,
        model=model,
        session_id=session_id,
        plugins=plugins,
        summary_model=summary_model,
    )


class CtxlifeWarning(UserWarning):
    """A configuration that does not do what it seems to (e.g. strategies ``manage()`` never calls)."""


_NODE_API = {
    "ctxlife_before_tool_call": "host.before_tool_call(ctx)",
    "ctxlife_after_tool_call": "host.after_tool_call(ctx)",
    "ctxlife_task_start": "host.task_start(ctx)",
    "ctxlife_task_end": "host.task_end(ctx)",
}
_warned: set[tuple[str, ...]] = set()


def warn_unreachable_nodes(host: Host) -> None:
    """Warn once per process and strategy set when active strategies act at nodes ``manage()`` never calls."""
    missed: dict[str, list[str]] = {}
    for hook, api in _NODE_API.items():
        for name in host.implementers(hook):
            missed.setdefault(name, []).append(api)
    tools = [s.name for s in host.strategies if s.provided_tools()]
    key = tuple(sorted(missed)) + tuple(sorted(tools))
    if not key or key in _warned:
        return
    _warned.add(key)
    parts = [f"{name} ({', '.join(apis)})" for name, apis in missed.items()]
    text = (
        "ctxlife.manage() runs only the before-model-call node (and bootstrap); "
        + (
            f"these strategies also act at other nodes and do nothing there unless you call them: {'; '.join(parts)}. "
            if parts
            else ""
        )
        + (
            f"{', '.join(tools)} offer tools to the agent: register host.provided_tools() with your framework. "
            if tools
            else ""
        )
        + "Use a ctxlife.Host and call its node methods from your loop (docs/integrations.md), "
        "or an adapter: ctxlife.wrap(crew) for CrewAI, ctxlife.integrations.langchain.CtxlifeMiddleware for LangChain."
    )
    warnings.warn(text, CtxlifeWarning, stacklevel=3)
