"""Summarizers by name: ctxlife's own and third parties', all entry points of ``ctxlife.summarizers``.

ctxlife's ``extractive`` and ``llm`` are entry points of the ``ctxlife`` distribution, found like
any other package's (see :mod:`ctxlife.registry` for the one rule when two packages clash).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxlife.errors import ConfigError, PluginError
from ctxlife.registry import Registry
from ctxlife.summarizers.base import Summarizer

#: Entry-point group where packages publish summarizer factories.
ENTRY_POINT_GROUP = "ctxlife.summarizers"

SummarizerFactory = Callable[..., Summarizer]


def _check_factory(name: str, factory: Any) -> str | None:
    return None if callable(factory) else f"factory must be callable, got {type(factory).__name__}"


REGISTRY: Registry[SummarizerFactory] = Registry("summarizer", ENTRY_POINT_GROUP, check=_check_factory)


def register_summarizer(name: str, factory: SummarizerFactory, *, replace: bool = False) -> None:
    """Make ``factory(**options)`` available as summarizer ``name`` in this process.

    ``factory`` is usually a class with a ``summarize(request)`` method. A name
    that is already taken (by ctxlife, an installed package or an earlier call) raises
    :class:`ctxlife.errors.PluginConflictError` unless ``replace=True``.
    """
    REGISTRY.register(name, factory, replace=replace)


def unregister_summarizer(name: str) -> None:
    """Remove a summarizer added with :func:`register_summarizer` (no error if absent)."""
    REGISTRY.unregister(name)


def available_summarizers() -> list[str]:
    """Names of every summarizer: ctxlife's, installed packages' (``ctxlife.summarizers`` entry
    points, read again now, not imported) and those registered in this process."""
    REGISTRY.refresh()
    return REGISTRY.names()


def get_summarizer(name: str, **options: Any) -> Summarizer:
    """Build the summarizer called ``name`` with ``options`` as keyword arguments.

    An unknown name raises :class:`ctxlife.errors.ConfigError` listing the available names;
    a name two installed packages offer, :class:`ctxlife.errors.PluginConflictError` naming
    both; a factory that rejects the options, ``ConfigError`` naming them; a broken plugin,
    :class:`ctxlife.errors.PluginError`. Only the package that provides ``name`` is imported.
    """
    factory = REGISTRY.get(name)
    try:
        summarizer = factory(**options)
    except TypeError as exc:
        raise ConfigError(f"summarizer {name!r} does not accept options {sorted(options)}: {exc}") from exc
    if not callable(getattr(summarizer, "summarize", None)):
        raise PluginError(f"summarizer {name!r}: {summarizer!r} has no summarize(request) method")
    return summarizer
