"""Adapters that map a framework's interception points onto ctxlife's hookspecs.

``ctxlife.integrations.crewai`` (``pip install 'ctxlife[crewai]'``),
``ctxlife.integrations.langchain`` (``pip install 'ctxlife[langchain]'``) and
``ctxlife.integrations.openai_agents`` (``pip install 'ctxlife[agents]'``); the core
(:func:`ctxlife.manage`, :class:`ctxlife.Host`) needs none of them.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

from ctxlife.errors import MissingDependencyError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ctxlife.strategy import ToolSpec


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


def tool_arguments_model(spec: ToolSpec) -> type[BaseModel]:
    """The pydantic model of a :class:`~ctxlife.strategy.ToolSpec`'s arguments (all strings), for a framework's tool."""
    # lazy: the test kit (a pytest plugin, loaded in every run) imports this package without pydantic
    from pydantic import Field, create_model

    fields: dict[str, Any] = {arg: (str, Field(..., description=text)) for arg, text in spec.parameters.items()}
    return create_model(f"{spec.name}_args", **fields)
