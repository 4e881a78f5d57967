"""``ctxlife.manage``: the framework-neutral entry point."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import sys
import threading
import warnings
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxlife.config import Settings, find_default_config, load_settings, validate_context_window
from ctxlife.errors import ConfigError, InvalidMessagesError
from ctxlife.host import Host
from ctxlife.host_report import Report
from ctxlife.models import as_completion
from ctxlife.sessions.ids import session_key

if TYPE_CHECKING:
    from ctxlife.sessions.records import RawRecord

_MAX_HOSTS = 32
#: Threads :func:`amanage` runs pipelines in: its own pool, not the event loop's default executor
#: (which the app's other ``to_thread`` calls share), so calls abandoned mid-pipeline (a timeout, a
#: client gone) can hold at most these; more calls at once queue. A call cancelled while queued never
#: runs; one cancelled while it waits behind another call of its session gives its thread back
#: within :data:`_POLL_SECONDS`.
_ASYNC_WORKERS = 32
_POLL_SECONDS = 0.05
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


@dataclass(eq=False)
class _Shared:
    """One host shared by the :func:`manage` calls with the same key, and how many calls are using it.

    A shared host is closed only when it has left the cache (evicted, or :func:`clear_hosts`) *and*
    its last user released it: a host, and its store, are never closed under a call that is using it.
    """

    key: tuple[Any, ...]
    keep: tuple[Any, ...]  # the config and plugins, alive with the host so their ids are not reused
    host: Host | None = None
    users: int = 0
    cached: bool = True
    building: threading.Lock = field(default_factory=threading.Lock)  # one thread builds the host
    calls: threading.RLock = field(default_factory=threading.RLock)  # one manage() call at a time


_hosts: OrderedDict[tuple[Any, ...], _Shared] = OrderedDict()
_hosts_lock = threading.Lock()


def resolve_settings(config: str | os.PathLike[str] | Settings | None) -> Settings:
    """Settings for a ``config`` argument: a Settings object, a path, or None (the defaults search)."""
    return config if isinstance(config, Settings) else load_settings(config)


def as_message(reply: object, *, role: str = "assistant") -> dict[str, Any]:
    """A model's reply as a message dict: a ``str`` (an assistant text), a mapping, or an SDK object.

    SDK objects with ``model_dump`` (the OpenAI client's ``ChatCompletionMessage``, the Anthropic
    client's ``Message``) are dumped without ``None`` fields, so what is stored is what the API
    accepts back. Anything else raises :class:`~ctxlife.errors.InvalidMessagesError`.
    """
    if isinstance(reply, str):
        return {"role": role, "content": reply}
    if isinstance(reply, Mapping):
        return dict(reply)
    dump = getattr(reply, "model_dump", None)
    if callable(dump):
        dumped = dump(exclude_none=True)
        if isinstance(dumped, dict):
            if "role" not in dumped and role:
                dumped["role"] = role
            return dumped
    raise InvalidMessagesError(
        f"cannot record a reply of type {type(reply).__name__}: pass the reply text (str), a message dict "
        f"or the SDK's message object (with model_dump())"
    )


def _session_key(session_id: str | None) -> str | None:
    """The store key of a session id a caller passes (any string; see :func:`ctxlife.sessions.session_key`)."""
    if session_id is None:
        return None
    return session_key(session_id)


def _acquire(
    config: str | os.PathLike[str] | Settings | None,
    context_window: int | None,
    model: str | None,
    session_id: str | None,
    plugins: Sequence[object],
) -> _Shared:
    """The shared host for these arguments, built on first use, with one more user (see :func:`_release`).

    The summary model is not one of them: it is given per call, so a model object made per request
    does not build a host per request.
    """
    to_close: list[Host] = []
    with _hosts_lock:
        key = (
            _settings_key(config),
            context_window,
            model,
            session_id,
            tuple(id(p) for p in plugins),
        )
        shared = _hosts.get(key)
        if shared is None:
            shared = _hosts[key] = _Shared(key, (config, tuple(plugins)))
        else:
            _hosts.move_to_end(key)
        shared.users += 1
        _evict(to_close)
    _close(to_close)
    try:
        with shared.building:
            if shared.host is None:
                host = Host(
                    resolve_settings(config),
                    context_window=context_window,
                    model=model,
                    session_id=session_id,
                    plugins=plugins,
                )
                warn_unreachable_nodes(host)
                shared.host = host
    except BaseException:
        _release(shared)
        raise
    return shared


def _release(shared: _Shared) -> None:
    """One user fewer; the host is closed if it left the cache and this was its last user."""
    to_close: list[Host] = []
    with _hosts_lock:
        shared.users -= 1
        if shared.users == 0:
            if shared.host is None and shared.cached:  # its construction failed: nothing to keep
                _hosts.pop(shared.key, None)
                shared.cached = False
            elif not shared.cached and shared.host is not None:
                to_close.append(shared.host)
        _evict(to_close)
    _close(to_close)


def _evict(to_close: list[Host]) -> None:
    """Over the cache's size: drop the least recently used hosts nobody is using (call with the lock held).

    Hosts in use stay until they are released, so the cache may hold more than ``_MAX_HOSTS`` while
    more calls than that run at once.
    """
    excess = len(_hosts) - _MAX_HOSTS
    if excess <= 0:
        return
    for key, shared in list(_hosts.items()):
        if excess <= 0:
            break
        if shared.users == 0:
            del _hosts[key]
            shared.cached = False
            if shared.host is not None:
                to_close.append(shared.host)
            excess -= 1


def _close(hosts: list[Host]) -> None:
    for host in hosts:
        host.close()


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
    :class:`~ctxlife.host_report.Report` with ``tokens_before``, ``tokens_after``,
    ``actions`` and ``failures``.

    ``config`` is a path, a :class:`Settings` or None (``./ctxlife.toml``, then
    ``[tool.ctxlife]`` in ``./pyproject.toml``, then built-in defaults). Calls with
    the same config, window, model, session and plugins share one host, so
    strategies keep their state and token counts stay cached between calls; use
    :class:`ctxlife.Host` directly to control that lifetime yourself. ``session_id``
    is any non-empty string (a framework's thread id, an e-mail address): ids outside
    the store-key alphabet are mapped to a key reversibly (:func:`ctxlife.sessions.session_key`).
    Any number of threads may call it at once; a host is never closed while a call uses it.
    ``summary_model`` is the model ``llm_summary`` summarizes with (a function
    ``(messages, max_tokens) -> str``, sync or async, or a chat model; see :class:`ctxlife.Host`).
    """
    report = _managed(messages, config, context_window, model, session_id, plugins, None, summary_model)
    assert report is not None  # only a cancelled amanage() gets None
    return report


def _managed(
    messages: list[dict[str, Any]],
    config: str | os.PathLike[str] | Settings | None,
    context_window: int | None,
    model: str | None,
    session_id: str | None,
    plugins: Sequence[object],
    cancelled: threading.Event | None,
    summary_model: object | None = None,
) -> Report | None:
    """:func:`manage` on a shared host; with ``cancelled`` set before the call starts, nothing is run (None)."""
    validate_context_window(context_window, "context_window")  # before it becomes part of a cache key
    key = _session_key(session_id)  # before it becomes part of a cache key
    complete = as_completion(summary_model) if summary_model is not None else None
    if cancelled is not None and cancelled.is_set():
        return None
    shared = _acquire(config, context_window, model, key, plugins)
    try:
        # A host serves one session: its calls run one at a time, and one given up while waiting
        # for its turn runs nothing.
        if not _take_turn(shared.calls, cancelled):
            return None
        try:
            assert shared.host is not None
            return shared.host.manage(messages, context_window=context_window, model=model, complete=complete)
        finally:
            shared.calls.release()
    finally:
        _release(shared)


def _take_turn(lock: threading.RLock, cancelled: threading.Event | None) -> bool:
    """Acquire ``lock``; False, without it, once ``cancelled`` is set (checked while waiting)."""
    if cancelled is None:
        return lock.acquire()
    while not lock.acquire(timeout=_POLL_SECONDS):
        if cancelled.is_set():
            return False
    if cancelled.is_set():
        lock.release()
        return False
    return True


def _async_executor() -> ThreadPoolExecutor:
    """The pool :func:`amanage` runs in (created on first use; see :data:`_ASYNC_WORKERS`)."""
    global _executor  # noqa: PLW0603 - one pool per process, created lazily (no import-time threads)
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(_ASYNC_WORKERS, thread_name_prefix="ctxlife-amanage")
        return _executor


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
    payload = reply if isinstance(reply, list) else as_message(reply)
    key = _session_key(session_id)
    found: _Shared | None = None
    with _hosts_lock:
        settings_key = _settings_key(config)
        plugin_ids = tuple(id(p) for p in plugins)
        for k, shared in reversed(_hosts.items()):
            if (k[0], k[3], k[4]) == (settings_key, key, plugin_ids) and shared.host is not None:
                found = shared
                found.users += 1
                break
    if found is not None:
        try:
            assert found.host is not None
            return found.host.record_reply(payload, session_id=key, view=view)
        finally:
            _release(found)
    host = Host(resolve_settings(config), session_id=key, plugins=plugins)
    try:
        return host.record_reply(payload, session_id=key, view=view)
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
    if isinstance(config, Settings):
        return ("settings", id(config))  # built already: the environment no longer changes it
    # os.environ decodes each item it yields: keys first, values only of ctxlife's (every call reads this)
    env = tuple(sorted((k, os.environ[k]) for k in os.environ if k.startswith("CTXLIFE_")))
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
    """Close and forget every host ``manage()`` created (for tests and long-lived processes).

    A host a call is still using is forgotten now and closed when that call returns.
    """
    to_close: list[Host] = []
    with _hosts_lock:
        for shared in _hosts.values():
            shared.cached = False
            if shared.users == 0 and shared.host is not None:
                to_close.append(shared.host)
        _hosts.clear()
    _close(to_close)


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
    sessions run in parallel, in ctxlife's own pool of threads (not the event loop's default executor).

    The pipeline works on a copy of ``messages``, written back into your list when the call
    returns. A cancelled call (``task.cancel()``, a timeout) leaves your list exactly as it was, and
    a call cancelled before its pipeline started (waiting behind another call of the same session)
    runs nothing, records nothing and gives its thread back; one cancelled while its pipeline runs
    finishes on its copy (a thread cannot be stopped midway), and what it made is dropped.
    """
    work = list(messages)
    cancelled = threading.Event()
    call = functools.partial(
        _managed, work, config, context_window, model, session_id, tuple(plugins), cancelled, summary_model
    )
    try:
        loop = asyncio.get_running_loop()
        report = await loop.run_in_executor(_async_executor(), contextvars.copy_context().run, call)
    except asyncio.CancelledError:
        cancelled.set()
        raise
    assert report is not None  # None only after a cancellation
    messages[:] = work
    return report


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
    warnings.warn(text, CtxlifeWarning, stacklevel=_callers_level())


def _callers_level() -> int:
    """The ``stacklevel`` of the first frame outside ctxlife: the app's ``manage()`` call (a fixed number
    pointed at ctxlife's own ``_managed``). From ``amanage()``'s worker thread, the thread's first frame."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(2), 2  # (2: the frame that called warn_unreachable_nodes, for warn)
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    return level
