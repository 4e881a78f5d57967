"""The base class every strategy plugin subclasses, its options, and the settings the host hands it."""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Generic

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from typing_extensions import TypeVar

from ctxlife.errors import PluginError


def scalar_kinds(annotation: Any) -> set[Any]:
    """The scalar types an annotation accepts (``{int}``, ``{str, NoneType}``; ``{object}`` for anything else)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or (origin is not None and getattr(origin, "__name__", "") == "UnionType"):
        return set().union(*(scalar_kinds(a) for a in typing.get_args(annotation)))
    if origin is typing.Literal:
        return {type(a) for a in typing.get_args(annotation)}
    if origin is typing.Annotated:
        return scalar_kinds(typing.get_args(annotation)[0])
    if isinstance(annotation, type) and origin is None:
        return {annotation}
    return {object}  # a container or anything else: pydantic's own checks apply


def strict_scalar(annotation: Any, value: Any) -> Any:
    """``value`` if it has the kind ``annotation`` asks for; raises ValueError for the usual TOML slips.

    A boolean is not a number (``rounds = true`` is not 1), a number is not a boolean, and text is
    not a number or a boolean (``context_window = "128000"``): write the value without quotes.
    """
    kinds = scalar_kinds(annotation)
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

    #: Former options and what became of them (``{"key": "moved to the [model] table as name"}``): a config
    #: that still sets one gets this in its error instead of a bare "no option" (0.x keeps no shims).
    retired: ClassVar[dict[str, str]] = {}

    @field_validator("*", mode="before")
    @classmethod
    def _no_lax_scalars(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        return strict_scalar(field.annotation, value) if field is not None else value


class ModelSettings(Options):
    """The ``[model]`` table: the model ctxlife itself calls (summaries), shared by every strategy that
    calls a model (``llm_summary``, ``task_scope``'s ``"llm"`` summarizer), as ``settings.model``.

    Unset ``name``: the model the host was given (``summary_model=``) or the framework's own.
    """

    name: str | None = Field(
        default=None,
        description="The model ctxlife calls for summaries: with base_url, its name on that OpenAI-compatible "
        "endpoint (openai client, pip install 'ctxlife[openai]'); else any name crewai.LLM accepts (e.g. "
        '"gpt-4o-mini"). Unset: the summary_model given to the host, else the agent\'s own model.',
    )
    base_url: str | None = Field(
        default=None, description='An OpenAI-compatible endpoint for name (e.g. "http://127.0.0.1:8080/v1").'
    )
    api_key_env: str = Field(
        default="OPENAI_API_KEY",
        description="The environment variable holding the endpoint's key (none needed locally).",
    )
    timeout_seconds: float = Field(
        default=60.0,
        gt=0,
        description="Give up on a model call after this long; the strategy falls back (the extractive summary). "
        "Also bounds a call to the agent's own model made for a summary.",
    )
    context_window: int | None = Field(
        default=None,
        ge=256,
        description="The called model's own window in tokens: every prompt fits it (a long span is summarized in "
        "pieces). Default: the agent's window.",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra arguments for the model: crewai.LLM's, or for the openai client temperature and "
        "extra_body (sent as they are).",
    )


#: The options type of a strategy. Unparameterized (``class X(ctxlife.Strategy)``) it is ``Any``,
#: so strategies written before ``Strategy`` was generic type-check as they did.
def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must be a non-empty string")
    return value


#: A string option (or list item, or table key) that must not be empty or only whitespace:
#: ``files: list[ctxlife.NonBlankStr]``.
NonBlankStr = Annotated[str, AfterValidator(_not_blank)]


OptionsT = TypeVar("OptionsT", bound=Options, default=Any)
_BaseOptions = Options  # the name "Options" is shadowed inside Strategy's body


@dataclass(frozen=True)
class SharedSettings:
    """The top-level settings a strategy may need besides its own options (resolved by the host).

    A strategy gets these, not the whole configuration: its own table is ``self.options``.
    """

    threshold: float = 0.4
    """Share of the context window that counts as "too full" (the config's ``threshold``)."""
    agent_model: str | None = None
    """The config's ``agent_model`` (the agent's model, for the tokenizer), if it names one."""
    model: ModelSettings = field(default_factory=ModelSettings)
    """The config's ``[model]`` table: the model ctxlife calls (see :class:`ModelSettings`)."""
    context_window: int | None = None
    """The config's ``context_window``, if it overrides the framework's."""
    source: str = "built-in defaults"
    """Where the settings were read from: a file path, or a description."""
    config_dir: Path | None = None
    """The folder of the config file: relative paths written in it resolve against this folder."""
    log_content: bool = False
    """Whether log events may carry message contents (the config's ``log_content``)."""
    origins: Mapping[str, str] = field(default_factory=dict)
    """Where each value the configuration sets came from (``"key"`` or ``"table.key"`` -> ``"in FILE,
    table [t], key 'k'"`` or ``"from the environment variable X"``): see :meth:`origin`."""

    def origin(self, section: str | None, key: str) -> str:
        """Where the value of ``key`` (in the ``section`` table, or top-level) came from, for error messages."""
        found = self.origins.get(f"{section}.{key}" if section else key)
        if found:
            return found
        return f"the default of [{section}] {key!r}" if section else f"the default of {key!r}"

    def __getattr__(self, name: str) -> Any:
        # Strategies written when they were handed the whole Settings get a clear message.
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"strategies receive ctxlife.SharedSettings ({', '.join(f.name for f in dataclasses.fields(self))}), "
            f"not the whole configuration, so there is no settings.{name}; a strategy's own values "
            "belong in its Options"
        )


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


class Strategy(Generic[OptionsT]):
    """A context-management strategy: a plugin with a name, options and hooks.

    Subclass it, set ``name`` (the one name used everywhere: entry point, TOML table, module, this
    attribute), declare its ``Options`` (the config table is validated against them; ``options:
    Options`` or ``Strategy[MyOptions]`` types ``self.options``) and implement any of the six hooks
    as methods decorated with :data:`ctxlife.hookimpl`. One instance is created per wrapped crew (or
    :func:`ctxlife.manage` host): expensive set-up goes in ``__init__``, per-session data in
    ``ctx.state``. A whole example, and why: docs/writing-a-strategy.md.
    """

    name: ClassVar[str] = ""
    #: True for a strategy that keeps sessions: the host then opens its session store (the top-level
    #: ``store`` setting) even when the config does not name one, and offers it as ``ctx.store``.
    needs_store: ClassVar[bool] = False
    Options: ClassVar[type[_BaseOptions]]
    options: OptionsT
    settings: SharedSettings

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = cls.__dict__.get("Options")
        for base in cls.__dict__.get("__orig_bases__", ()):
            if typing.get_origin(base) is not Strategy:
                continue
            (argument,) = typing.get_args(base)
            if not (isinstance(argument, type) and issubclass(argument, _BaseOptions)):
                continue  # a forward reference ("Shout.Options"): the nested class is the options
            if declared is not None and declared is not argument:
                raise PluginError(
                    f"{cls.__qualname__} is a Strategy[{argument.__qualname__}] but also defines "
                    f"Options = {declared.__qualname__}; keep one of them"
                )
            cls.Options = argument

    def __init__(self, options: OptionsT | None = None, settings: SharedSettings | None = None) -> None:
        self.options = options if options is not None else typing.cast(OptionsT, self.Options())
        self.settings = settings if settings is not None else SharedSettings()

    def provided_tools(self) -> list[ToolSpec]:
        """Tools this strategy offers to agents (none by default)."""
        return []

    def close(self) -> None:
        """Release resources (connections, files). Called when the host closes."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


Strategy.Options = Options


def create_strategy(cls: type[Strategy[Any]], options: _BaseOptions, settings: SharedSettings) -> Strategy[Any]:
    """Instantiate a strategy class as the host does: ``cls(options, settings)``.

    A class whose ``__init__`` cannot take ``(options, settings)``, or that does not
    call ``super().__init__``, gets a :class:`PluginError` saying how to fix it.
    """
    where = f"strategy {cls.name!r} ({cls.__module__}.{cls.__qualname__})"
    try:
        inspect.signature(cls).bind(options, settings)
    except TypeError:
        raise PluginError(
            f"{where}: __init__ must accept (options=None, settings=None) and call super().__init__(options, settings)"
        ) from None
    strategy = cls(options, settings)
    if not isinstance(getattr(strategy, "options", None), cls.Options):
        raise PluginError(
            f"{where}: after __init__, self.options is not a {cls.Options.__qualname__}; "
            "call super().__init__(options, settings) first in __init__"
        )
    return strategy


def describe_options(strategy_cls: type[Strategy[Any]] | type[Options]) -> list[dict[str, Any]]:
    """One dict per option of a strategy (or of an options table such as :class:`ModelSettings`): name,
    type, default, description."""
    options_cls = strategy_cls if issubclass(strategy_cls, Options) else strategy_cls.Options
    rows = []
    for key, info in options_cls.model_fields.items():
        annotation = _without_metadata(info.annotation)
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


def _without_metadata(annotation: Any) -> Any:
    """``list[Annotated[str, ...]]`` -> ``list[str]``: validators are not part of an option's type name."""
    if typing.get_origin(annotation) is Annotated:
        return _without_metadata(typing.get_args(annotation)[0])
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (list, dict, set, frozenset, tuple) and args:
        return types.GenericAlias(origin, tuple(_without_metadata(a) for a in args))
    return annotation
