"""The base class every strategy plugin subclasses."""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

if TYPE_CHECKING:
    from ctxlife.config import Settings


def _scalar_kinds(annotation: Any) -> set[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or (origin is not None and getattr(origin, "__name__", "") == "UnionType"):
        return set().union(*(_scalar_kinds(a) for a in typing.get_args(annotation)))
    if origin is typing.Literal:
        return {type(a) for a in typing.get_args(annotation)}
    if origin is typing.Annotated:
        return _scalar_kinds(typing.get_args(annotation)[0])
    if isinstance(annotation, type) and origin is None:
        return {annotation}
    return {object}  # a container or anything else: pydantic's own checks apply


def strict_scalar(annotation: Any, value: Any) -> Any:
    """``value`` if it has the kind ``annotation`` asks for; raises ValueError for the usual TOML slips.

    A boolean is not a number (``rounds = true`` is not 1), a number is not a boolean, and text is
    not a number or a boolean (``context_window = "128000"``): write the value without quotes.
    """
    kinds = _scalar_kinds(annotation)
    if object in kinds:
        return value
    numeric = bool(kinds & {int, float})
    if isinstance(value, bool):
        if bool not in kinds and numeric:
            raise ValueError(f"expected a number, got the boolean {str(value).lower()}")
    elif isinstance(value, (int, float)):
        if bool in kinds and not numeric:
            raise ValueError(f"expected true or false, got the number {value!r}")
    elif isinstance(value, str) and str not in kinds and (numeric or bool in kinds):
        kind = "a number" if numeric else "true or false"
        raise ValueError(f"expected {kind}, got the text {value[:40]!r}")
    return value


class Options(BaseModel):
    """Base of a strategy's options: the TOML table named after the strategy.

    Unknown keys are rejected, so a typo in a config is an error, not a silent
    default. Subclass it and declare fields with types and defaults; the field
    docstrings (``Field(description=...)``) are the option reference.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_lax_scalars(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        return strict_scalar(field.annotation, value) if field is not None else value


@dataclass(frozen=True)
class ToolSpec:
    """A tool a strategy offers to the agent (for example, to recall an offloaded result).

    Framework-neutral: the adapter turns it into a tool of the framework (under
    CrewAI, a tool added to every agent of the wrapped crew). ``function`` is
    called with keyword arguments named in ``parameters`` (all strings) and
    returns the text the model sees.
    """

    name: str
    description: str
    function: Callable[..., str]
    parameters: dict[str, str] = field(default_factory=dict)  # argument name -> description


class Strategy:
    """A context-management strategy: a plugin with a name, options and hooks.

    Subclass it, set ``name`` (the one name used everywhere: entry point, TOML
    table, module, this attribute), declare ``Options``, and implement any of the
    six hooks as methods decorated with :data:`ctxlife.hookimpl`::

        class Shout(ctxlife.Strategy):
            name = "shout"

            class Options(ctxlife.Options):
                suffix: str = "!"

            @ctxlife.hookimpl
            def ctxlife_after_tool_call(self, ctx):
                ctx.result = ctx.result.upper() + self.options.suffix

    One instance is created per wrapped crew (or :func:`ctxlife.manage` host):
    do expensive set-up in ``__init__``, keep hooks cheap. Per-session data
    belongs in ``ctx.state``.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type[Options]] = Options

    def __init__(self, options: Options | None = None, settings: Settings | None = None) -> None:
        self.options = options if options is not None else self.Options()
        self.settings = settings

    def provided_tools(self) -> list[ToolSpec]:
        """Tools this strategy offers to agents (none by default)."""
        return []

    def session_store(self) -> Any:
        """The session store this strategy manages, if any (offered to all strategies as ``ctx.store``)."""
        return None

    def close(self) -> None:
        """Release resources (connections, files). Called when the host closes."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def describe_options(strategy_cls: type[Strategy]) -> list[dict[str, Any]]:
    """One dict per option of a strategy: name, type, default, description."""
    rows = []
    for key, info in strategy_cls.Options.model_fields.items():
        annotation = info.annotation
        if typing.get_origin(annotation) is None and isinstance(annotation, type):
            type_name = annotation.__name__
        else:
            type_name = str(annotation).replace("typing.", "")
        rows.append(
            {
                "name": key,
                "type": type_name,
                "default": None if info.is_required() else info.get_default(call_default_factory=True),
                "required": info.is_required(),
                "description": info.description or "",
            }
        )
    return rows
