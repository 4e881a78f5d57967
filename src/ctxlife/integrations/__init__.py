"""Adapters that map a framework's interception points onto ctxlife's hookspecs.

``ctxlife.integrations.crewai`` (``pip install 'ctxlife[crewai]'``) and
``ctxlife.integrations.langchain`` (``pip install 'ctxlife[langchain]'``); the core
(:func:`ctxlife.manage`, :class:`ctxlife.Host`) needs neither.
"""

from __future__ import annotations

import importlib.util

from ctxlife.errors import MissingDependencyError


def require(module: str, extra: str, feature: str) -> None:
    """Raise :class:`MissingDependencyError` naming the extra to install when ``module`` is missing."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise MissingDependencyError(
            f"{feature} needs {module}, which is not installed: pip install 'ctxlife[{extra}]' "
            f"(the core ctxlife package is framework-neutral; ctxlife.manage() works without it)"
        )
