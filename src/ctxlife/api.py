"""``ctxlife.manage``: the framework-neutral entry point."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxlife.config import Settings, find_default_config, load_settings, validate_context_window
from ctxlife.host import Host, Report

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
    :class:`ctxlife.Host` directly to control that lifetime yourself.
    """
    validate_context_window(context_window, "context_window")  # before it becomes part of a cache key
    if session_id is not None:
        from ctxlife.sessions.ids import validate_session_id

        validate_session_id(session_id)  # before it becomes part of a cache key
    with _hosts_lock:
        settings_key = _settings_key(config)
        key = (settings_key, context_window, model, session_id, tuple(id(p) for p in plugins))
        found = _hosts.get(key)
        if found is not None:
            _hosts.move_to_end(key)
    if found is None:
        settings = resolve_settings(config)
        host = Host(settings, context_window=context_window, model=model, session_id=session_id, plugins=plugins)
        with _hosts_lock:
            # Keep the config/plugins alive with the host so their ids are not reused.
            _hosts[key] = (host, (config, tuple(plugins)))
            while len(_hosts) > _MAX_HOSTS:
                _, (old, _) = _hosts.popitem(last=False)
                old.close()
    else:
        host = found[0]
    return host.manage(messages, context_window=context_window, model=model)


def _settings_key(config: str | os.PathLike[str] | Settings | None) -> tuple[Any, ...]:
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("CTXLIFE_")))
    if isinstance(config, Settings):
        return ("settings", id(config))
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
