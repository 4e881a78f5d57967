"""Summarizers by name: the builtins, those registered at run time, and entry-point plugins."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from ctxlife.errors import ConfigError, PluginConflictError, PluginError
from ctxlife.summarizers.base import Summarizer
from ctxlife.summarizers.extractive import ExtractiveSummarizer
from ctxlife.summarizers.llm import LLMSummarizer

#: Entry-point group where third-party packages publish summarizer factories.
ENTRY_POINT_GROUP = "ctxlife.summarizers"

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_BUILTINS: dict[str, Callable[..., Summarizer]] = {
    "extractive": ExtractiveSummarizer,
    "llm": LLMSummarizer,
}
_registry: dict[str, Callable[..., Summarizer]] = {}
_lock = threading.RLock()


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ConfigError(f"invalid summarizer name {name!r}: use letters, digits, '_', '-' or '.' (e.g. 'extractive')")
    return name


def register_summarizer(name: str, factory: Callable[..., Summarizer], *, replace: bool = False) -> None:
    """Make ``factory(**options)`` available as summarizer ``name``.

    ``factory`` is usually a class with a ``summarize(request)`` method. A name
    that is already taken (builtin or registered) raises
    :class:`ctxlife.errors.PluginConflictError` unless ``replace=True``.
    """
    _check_name(name)
    if not callable(factory):
        raise ConfigError(f"summarizer {name!r}: factory must be callable, got {type(factory).__name__}")
    with _lock:
        if not replace and (name in _registry or name in _BUILTINS):
            raise PluginConflictError(
                f"a summarizer named {name!r} is already registered; pass replace=True to override it"
            )
        _registry[name] = factory


def unregister_summarizer(name: str) -> None:
    """Remove a summarizer added with :func:`register_summarizer` (no error if absent)."""
    with _lock:
        _registry.pop(name, None)


def _entry_points() -> list[Any]:
    from importlib.metadata import entry_points

    try:
        return list(entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # noqa: BLE001  # pragma: no cover - broken metadata must not break lookups
        return []


def available_summarizers() -> list[str]:
    """Names of every summarizer: builtin, registered, and published by installed
    packages under the ``ctxlife.summarizers`` entry-point group (not loaded)."""
    with _lock:
        names = set(_BUILTINS) | set(_registry)
    names |= {ep.name for ep in _entry_points()}
    return sorted(names)


def get_summarizer(name: str, **options: Any) -> Summarizer:
    """Build the summarizer called ``name`` with ``options`` as keyword arguments.

    Looks in the registered summarizers, then the builtins (``extractive``,
    ``llm``), then -- only for a name still unknown -- the ``ctxlife.summarizers``
    entry points (the matching one is loaded and registered). An unknown name
    raises :class:`ctxlife.errors.ConfigError` listing the available names; a
    factory that rejects the options raises ``ConfigError`` naming them; a broken
    plugin raises :class:`ctxlife.errors.PluginError`.
    """
    _check_name(name)
    with _lock:
        factory = _registry.get(name) or _BUILTINS.get(name)
    if factory is None:
        for ep in _entry_points():
            if ep.name != name:
                continue
            try:
                factory = ep.load()
            except Exception as exc:
                raise PluginError(
                    f"summarizer {name!r} from entry point {ep.value!r} ({ENTRY_POINT_GROUP}) failed to load: {exc}"
                ) from exc
            if not callable(factory):
                raise PluginError(f"summarizer {name!r} from entry point {ep.value!r} is not callable")
            with _lock:
                _registry.setdefault(name, factory)
            break
    if factory is None:
        raise ConfigError(f"unknown summarizer {name!r}; available: {', '.join(available_summarizers())}")
    try:
        summarizer = factory(**options)
    except TypeError as exc:
        raise ConfigError(f"summarizer {name!r} does not accept options {sorted(options)}: {exc}") from exc
    if not callable(getattr(summarizer, "summarize", None)):
        raise PluginError(f"summarizer {name!r}: {summarizer!r} has no summarize(request) method")
    return summarizer
