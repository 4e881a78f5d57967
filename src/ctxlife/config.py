"""Configuration: a TOML file, ``[tool.ctxlife]`` in pyproject.toml, and ``CTXLIFE_*`` variables.

Every setting, the file's shape and the precedence (environment, then the file, then the defaults):
docs/configuration.md. Everything is validated at load: an unknown strategy, option or type is a
:class:`ConfigError` naming the file, the strategy, the key and the expected type.
"""

from __future__ import annotations

import contextvars
import difflib
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from pydantic import Field, PrivateAttr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from ctxlife.errors import ConfigError, StrategyOptionsError, UnknownStrategyError
from ctxlife.plugins import registry
from ctxlife.strategy import ModelSettings, Options, SharedSettings, scalar_kinds, strict_scalar

ENV_PREFIX = "CTXLIFE_"
#: Top-level settings that are tables: their keys come from ``CTXLIFE_<TABLE>__<KEY>`` like a strategy's.
_TABLES = frozenset({"model"})
#: The session store used when the config sets none (relative: against the config file's folder).
DEFAULT_STORE_URL = "file://workspace/sessions"
DEFAULT_FILE = "ctxlife.toml"
_LINE_RE = re.compile(r"\(at line (\d+), column (\d+)\)")
# Where the settings being built come from; validation runs inside the constructor.
_current_source: contextvars.ContextVar[str] = contextvars.ContextVar(
    "ctxlife_config_source", default="built-in defaults"
)


class Settings(BaseSettings):
    """Resolved ctxlife settings. Build with :func:`load_settings` (or directly, for tests)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="allow",
        frozen=True,
    )

    strategies: list[str] = Field(
        default_factory=lambda: ["truncate_last_n"],
        description="Active strategies, called in this order at every node.",
    )
    threshold: float = Field(0.4, gt=0, le=1, description='Share of the context window that counts as "too full".')
    context_window: int | None = Field(
        None, gt=0, description="Context window in tokens; overrides what the framework reports."
    )
    agent_model: str | None = Field(
        None, description="The agent's model name; picks the tokenizer when the framework does not say."
    )
    model: ModelSettings = Field(
        default_factory=ModelSettings,
        description="The [model] table: the model ctxlife calls for summaries, shared by every strategy that "
        "calls one (see its keys below).",
    )
    session_id: str | None = Field(None, description="Default session id for wrap() and manage().")
    message_format: Literal["auto", "openai", "anthropic"] = Field(
        "auto",
        description='Format of the message lists: "openai" (OpenAI chat), "anthropic" (Anthropic Messages, system '
        'prompt passed apart) or "auto" (detected; a list of plain text messages counts as OpenAI chat).',
    )
    log_content: bool = Field(
        False, description="Put message contents into log events (off: events carry counts and names only)."
    )
    store: str | None = Field(
        None,
        description="Where sessions live (snapshots, raw history, blobs, locks): one store, opened by the host and "
        'used by every strategy (ctx.store). "file://DIR", "sqlite:///PATH.db", "redis://HOST:PORT/DB", '
        '"rediss://..." or "postgres://USER@HOST:PORT/DB" (?ttl=SECONDS for expiry); relative paths resolve '
        "against the config file's folder. Unset: "
        f'"{DEFAULT_STORE_URL}", opened only when an active strategy keeps sessions (snapshot_restore).',
    )

    _source: str = PrivateAttr(default="built-in defaults")
    _options: dict[str, Options] = PrivateAttr(default_factory=dict)

    @field_validator("*", mode="before")
    @classmethod
    def _no_lax_scalars(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        return strict_scalar(field.annotation, value) if field is not None else value

    @field_validator("model", mode="before")
    @classmethod
    def _model_table(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError(
                f"expected the [model] table (the model ctxlife calls), got the text {value!r}: for the agent's "
                f"model (the tokenizer) write agent_model = {value!r}; for the model that writes summaries, "
                f"[model] name = {value!r}"
            )
        return value

    @field_validator("context_window", mode="before")
    @classmethod
    def _whole_number(cls, value: Any) -> Any:
        if isinstance(value, float) and value == value and value.is_integer():
            raise ValueError(f"expected a whole number of tokens, got {value!r}; write {int(value)}")
        return value

    @field_validator("store")
    @classmethod
    def _store_url(cls, value: str | None) -> str | None:
        if value is not None and "://" not in value:
            raise ValueError(
                f"expected a store URL such as {DEFAULT_STORE_URL!r}, 'sqlite:///sessions.db' or "
                f"'redis://127.0.0.1:6379/0', got {value!r}"
            )
        return value

    @field_validator("strategies")
    @classmethod
    def _no_duplicates(cls, value: list[str]) -> list[str]:
        seen: set[str] = set()
        for name in value:
            if name in seen:
                raise ValueError(f"strategy {name!r} is listed twice")
            seen.add(name)
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment beats the file (passed as init data by load_settings).
        return (_StrategyEnvSource(settings_cls), _EnvSource(settings_cls), init_settings)

    def model_post_init(self, __context: Any) -> None:
        self._source = _current_source.get()
        self._validate_strategies()

    def source_of(self, section: str | None, key: str) -> str:
        """Where one value came from, for error messages: the environment variable, the file's table
        and key, or the default (``section`` None for a top-level setting)."""
        variable = f"{ENV_PREFIX}{section.upper()}__{key.upper()}" if section else f"{ENV_PREFIX}{key.upper()}"
        if variable in os.environ:
            return f"from the environment variable {variable}"
        if section == "model":
            if key in self.model.model_fields_set and self._source != "built-in defaults":
                return f"in {self._source}, table [model], key {key!r}"
            return f"the default of [model] {key!r}"
        if section is not None:
            if key in self.strategy_tables().get(section, {}):
                return f"in {self._source}, table [{section}], key {key!r}"
            return f"the default of [{section}] {key!r}"
        if key in self.model_fields_set and self._source != "built-in defaults":
            return f"in {self._source}, key {key!r}"
        return f"the default of {key!r}"

    @property
    def source(self) -> str:
        """Where these settings were read from (a file path or "built-in defaults")."""
        return self._source

    def config_dir(self) -> Path | None:
        """The folder of the config file these settings were read from (None: no file)."""
        path = Path(self._source)
        return path.resolve().parent if self._source != "built-in defaults" and path.is_file() else None

    def shared(self) -> SharedSettings:
        """The top-level settings every strategy receives (it gets its own table as its options)."""
        return SharedSettings(
            threshold=self.threshold,
            agent_model=self.agent_model,
            model=self.model,
            context_window=self.context_window,
            source=self._source,
            config_dir=self.config_dir(),
            log_content=self.log_content,
            origins=self._origins(),
        )

    def store_url(self) -> str:
        """The session store URL in effect, relative paths resolved against the config file's folder.

        The top-level ``store`` setting (or ``CTXLIFE_STORE``); else :data:`DEFAULT_STORE_URL`.
        """
        return resolve_store_url(self.store or DEFAULT_STORE_URL, self.config_dir())

    @property
    def store_configured(self) -> bool:
        """Whether the config or the environment names a store (``store``): then the host opens it
        whatever the strategies."""
        return self.store is not None

    def store_origin(self) -> str:
        """Which setting names the store and where it was set, for error messages."""
        return f"setting 'store' ({self.source_of(None, 'store')})"

    def _origins(self) -> dict[str, str]:
        """Where each value set by the file or the environment came from (see :meth:`source_of`)."""
        out = {key: self.source_of(None, key) for key in self.model_fields_set if key in type(self).model_fields}
        for key in self.model.model_fields_set:
            out[f"model.{key}"] = self.source_of("model", key)
        for section, table in self.strategy_tables().items():
            for key in table:
                out[f"{section}.{key}"] = self.source_of(section, key)
        return out

    def options_for(self, name: str) -> Options:
        """The validated options of one strategy (defaults when the config has no table)."""
        options = self._options.get(name)
        if options is None:
            cls = registry().get(name)
            options = self._options[name] = cls.Options()
        return options

    def strategy_tables(self) -> dict[str, dict[str, Any]]:
        """The raw ``[name]`` tables of the config."""
        return {k: v for k, v in (self.model_extra or {}).items() if isinstance(v, dict)}

    def resolved(self) -> dict[str, Any]:
        """Everything in effect, with every option of every active strategy filled in."""
        data = self.model_dump(exclude=set(self.model_extra or {}))
        for name in self.strategies:
            data[name] = self.options_for(name).model_dump(mode="json")
        return data

    def _validate_strategies(self) -> None:
        """Every unknown strategy, setting, table and bad option of the config, raised at once (the
        first one's error type; each misspelled name with its closest known names)."""
        reg = registry()
        where = f" (in {self._source})" if self._source != "built-in defaults" else ""
        problems: list[tuple[type[ConfigError], str]] = []
        for name in self.strategies:
            if name not in reg:
                from_env = f"{ENV_PREFIX}STRATEGIES" in os.environ
                listed = f" ({self.source_of(None, 'strategies')})" if from_env else where
                hint = did_you_mean(name, reg.names())
                problems.append(
                    (
                        UnknownStrategyError,
                        f"unknown strategy {name!r} in 'strategies'{listed}{hint}; {reg.available()}",
                    )
                )
        for key, value in (self.model_extra or {}).items():
            if not isinstance(value, dict):
                hint = did_you_mean(key, [*type(self).model_fields, *reg.names()])
                problems.append(
                    (
                        ConfigError,
                        f"unknown setting {key!r}{where}{hint}; top-level settings are "
                        f"{', '.join(type(self).model_fields)}, and strategy options go in a "
                        f"[strategy_name] table",
                    )
                )
                continue
            if key not in reg:
                variables = sorted(v for v in os.environ if v.startswith(f"{ENV_PREFIX}{key.upper()}__"))
                plural = "s" if len(variables) > 1 else ""
                origin = f" (from the environment variable{plural} {', '.join(variables)})" if variables else where
                hint = did_you_mean(key, reg.names())
                problems.append(
                    (
                        UnknownStrategyError,
                        f"options table [{key}]{origin} names no installed strategy{hint}; {reg.available()}",
                    )
                )
                continue
            cls = reg.get(key)
            try:
                self._options[key] = cls.Options.model_validate(value)
            except ValidationError as exc:
                problems.append(
                    (
                        StrategyOptionsError,
                        _explain_option_errors(
                            key, exc, self._source, list(cls.Options.model_fields), cls.Options.retired
                        ),
                    )
                )
        if len(problems) == 1:
            raise problems[0][0](problems[0][1])
        if problems:
            listed = "\n".join(f"  - {message}" for _, message in problems)
            raise problems[0][0](f"{len(problems)} problems in the config{where}:\n{listed}")


def did_you_mean(name: str, known: list[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``known`` to a misspelled ``name`` (difflib), else ``""``."""
    close = difflib.get_close_matches(name, known, n=2, cutoff=0.75)
    if not close:
        return ""
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)"


class _StrategyEnvSource(PydanticBaseSettingsSource):
    """``CTXLIFE_<STRATEGY>__<OPTION>=value``: override one option of one strategy.

    JSON when it looks like JSON (numbers, booleans, lists), else a string; the strategy's Options model does the rest.
    """

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover - unused
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        tables: dict[str, dict[str, Any]] = {}
        fields = set(self.settings_cls.model_fields)
        for key, raw in os.environ.items():
            if not key.startswith(ENV_PREFIX) or "__" not in key:
                continue
            section, _, option = key[len(ENV_PREFIX) :].lower().partition("__")
            if (section in fields and section not in _TABLES) or not section or not option:
                continue
            tables.setdefault(section, {})[option] = _parse_env_value(raw)
        return tables


def _parse_env_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _explain_option_errors(
    strategy: str,
    exc: ValidationError,
    source: str,
    options: list[str] | None = None,
    retired: dict[str, str] | None = None,
) -> str:
    # "strategy 'x' option 'k' (in FILE)" names the file, the table ([x]) and the key (k).
    where = f" (in {source})" if source != "built-in defaults" else ""
    lines = []
    for error in exc.errors():
        key = ".".join(str(p) for p in error["loc"]) or "(table)"
        variable = f"{ENV_PREFIX}{strategy.upper()}__{str(error['loc'][0]).upper()}" if error["loc"] else ""
        from_env = variable in os.environ
        origin = f" (from the environment variable {variable})" if from_env else where
        message = _message(error, in_file=not from_env and bool(where))
        if error["type"] == "extra_forbidden" and key in (retired or {}):
            lines.append(f"strategy {strategy!r} has no option {key!r}{origin}: {(retired or {})[key]}")
        elif error["type"] == "extra_forbidden":
            lines.append(f"strategy {strategy!r} has no option {key!r}{origin}{did_you_mean(key, options or [])}")
        else:
            lines.append(f"strategy {strategy!r} option {key!r}{origin}: {message}")
    return "; ".join(lines)


def _message(error: Any, *, in_file: bool) -> str:
    """pydantic's message for one error, with what was given (once) and, in a file, how to write it."""
    message = str(error["msg"])
    if not message.startswith(("Value error, expected", "expected")):  # strict_scalar's say what they got
        message += f" (got {_shown(error.get('input'))})"
    given = error.get("input")
    if in_file and isinstance(given, str) and "expected" in message and _looks_scalar(given):
        message += "; write it without quotes"
    return message


def _looks_scalar(text: str) -> bool:
    try:
        return isinstance(json.loads(text), (bool, int, float))
    except ValueError:
        return False


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _explain_settings_errors(exc: ValidationError, where: str) -> str:
    lines = []
    for error in exc.errors():
        loc = error["loc"]
        if len(loc) > 1 and loc[0] in _TABLES:
            lines.append(_explain_table_error(str(loc[0]), error, where))
            continue
        key = ".".join(str(p) for p in loc) or "(top level)"
        variable = ENV_PREFIX + str(loc[0]).upper() if loc else ""
        from_env = variable in os.environ
        source = f" (from the environment variable {variable})" if from_env else where
        message = _message(error, in_file=not from_env and where != " (in built-in defaults)")
        lines.append(f"setting {key!r}{source}: {message}")
    return "; ".join(lines)


def _explain_table_error(table: str, error: Any, where: str) -> str:
    """One error in a top-level table (``[model]``): its key, where it was set, and the fix."""
    key = ".".join(str(p) for p in error["loc"][1:])
    variable = f"{ENV_PREFIX}{table.upper()}__{str(error['loc'][1]).upper()}"
    from_env = variable in os.environ
    origin = f" (from the environment variable {variable})" if from_env else where
    if error["type"] == "extra_forbidden":
        known = list(ModelSettings.model_fields)
        hint = did_you_mean(key, known) or f"; its keys are {', '.join(known)}"
        return f"table [{table}] has no key {key!r}{origin}{hint}"
    message = _message(error, in_file=not from_env and where != " (in built-in defaults)")
    return f"table [{table}] key {key!r}{origin}: {message}"


class _EnvSource(EnvSettingsSource):
    """``CTXLIFE_<SETTING>=value``: JSON for lists, numbers and booleans; text for text settings.

    ``CTXLIFE_STRATEGIES`` must be a JSON list; anything else is a :class:`ConfigError` saying so
    (not pydantic-settings' traceback).
    """

    def prepare_field_value(self, field_name: str, field: Any, value: Any, value_is_complex: bool) -> Any:
        if field_name in _TABLES:
            if isinstance(value, str):
                raise ConfigError(
                    f"environment variable {ENV_PREFIX}{field_name.upper()}={value!r}: [{field_name}] is a table; "
                    f"set one key (e.g. {ENV_PREFIX}MODEL__NAME) or, for the agent's model (the tokenizer), "
                    f"{ENV_PREFIX}AGENT_MODEL"
                )
            return None  # its keys (CTXLIFE_MODEL__NAME) come from _StrategyEnvSource, typed as JSON
        if not isinstance(value, str):
            return super().prepare_field_value(field_name, field, value, value_is_complex)
        variable = f"{ENV_PREFIX}{field_name.upper()}"
        is_complex, _ = self._field_is_complex(field)
        if is_complex or value_is_complex:
            try:
                decoded = json.loads(value)
            except ValueError:
                decoded = None
            if not isinstance(decoded, list):
                example = json.dumps([w.strip() for w in value.split(",") if w.strip()] or ["truncate_last_n"])
                raise ConfigError(
                    f"environment variable {variable}={value!r}: the value must be a JSON list, "
                    f"e.g. {variable}='{example}'"
                )
            return decoded
        if str in scalar_kinds(field.annotation):
            return value
        try:
            return json.loads(value)
        except ValueError:
            return value  # validation names the variable and what was expected


def resolve_store_url(url: str, base: Path | None) -> str:
    """``url`` with a relative ``file://`` or ``sqlite:///`` path made absolute against ``base``.

    ``base`` is a folder on disk; it is percent-encoded into the URL (``Q%20A`` -> ``Q%2520A``,
    ``C#bank`` -> ``C%23bank``), as the store URL parsers decode the path once.

    Other schemes (and ``base`` None: the current directory decides) come back unchanged.
    """
    if base is None:
        return url
    scheme, sep, rest = url.partition("://")
    lowered = scheme.lower()
    if lowered == "file":
        prefix, body = "file://", rest
    elif lowered == "sqlite" and rest.startswith("/"):
        prefix, body = "sqlite:///", rest[1:]
    else:
        return url
    path, q, query = body.partition("?")
    if not path or path.startswith("/") or path.startswith(":memory:") or path.startswith("~"):
        return url
    # The folder is a path, the rest is URL text: percent-encode the folder (a '%', '#', '?' or space
    # in its name) so the store's URL parser, which decodes once, gets the folder back exactly.
    folder = quote(base.as_posix().rstrip("/"), safe="/")
    return f"{prefix}{folder}/{path}{q}{query}"


def local_store_url(scheme: Literal["file", "sqlite"], path: str | os.PathLike[str]) -> str:
    """The store URL of a folder (``file``) or database file (``sqlite``) on disk, percent-encoded.

    Build store URLs from paths with this, not by pasting the path into an f-string: a ``%``,
    ``#``, ``?`` or space in a folder's name would otherwise be read as URL syntax.
    ``local_store_url("file", "/srv/Q&A #1")`` -> ``"file:///srv/Q%26A%20%231"``.
    """
    absolute = Path(os.path.abspath(os.path.expanduser(os.fspath(path)))).as_posix()
    return f"{scheme}://{'/' if scheme == 'sqlite' else ''}{quote(absolute, safe='/')}"


def validate_context_window(value: Any, where: str = "context_window") -> int | None:
    """``value`` if it is None or a positive whole number of tokens; else a :class:`ConfigError` saying so."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        hint = ""
        if isinstance(value, str) and value.strip().isdigit():
            hint = f"; pass the number itself: {where.split('=')[0]}={int(value.strip())}"
        elif isinstance(value, float) and value == value and value.is_integer() and value > 0:
            hint = f"; pass {int(value)}"
        shown = f"the text {value[:40]!r}" if isinstance(value, str) else f"{_shown(value)} ({type(value).__name__})"
        raise ConfigError(f"{where} must be a positive whole number of tokens, got {shown}{hint}")
    if value <= 0:
        raise ConfigError(f"{where} must be a positive number of tokens, got {value}")
    return value


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file; errors name the file and the line.

    Not pydantic-settings' TomlConfigSettingsSource / PyprojectTomlConfigSettingsSource: on a
    malformed file they raise tomllib's bare "Invalid value (at line 2, column 13)" without the
    file's name, and they silently skip a missing file or a pyproject.toml without [tool.ctxlife],
    where a user who named a config wants to hear about it.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _LINE_RE.search(str(exc))
        at = f" line {match.group(1)}, column {match.group(2)}:" if match else ""
        message = _LINE_RE.sub("", str(exc)).strip()
        raise ConfigError(f"malformed TOML in {path}:{at} {message}") from None


def _file_data(path: Path) -> dict[str, Any]:
    data = read_toml(path)
    if path.name == "pyproject.toml":
        section = data.get("tool", {}).get("ctxlife")
        if section is None:
            raise ConfigError(f"{path} has no [tool.ctxlife] table; add one or point to a ctxlife TOML file")
        if not isinstance(section, dict):
            raise ConfigError(f"[tool.ctxlife] in {path} must be a table")
        return section
    return data


def find_default_config(cwd: Path | None = None) -> Path | None:
    """``./ctxlife.toml``, else ``./pyproject.toml`` if it has ``[tool.ctxlife]``, else None."""
    cwd = cwd or Path.cwd()
    candidate = cwd / DEFAULT_FILE
    if candidate.is_file():
        return candidate
    pyproject = cwd / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            return None
        if isinstance(data.get("tool", {}).get("ctxlife"), dict):
            return pyproject
    return None


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Load and validate settings.

    ``path``: a ctxlife TOML file or a ``pyproject.toml`` (its ``[tool.ctxlife]``
    table). None looks for ``./ctxlife.toml``, then ``[tool.ctxlife]`` in
    ``./pyproject.toml``, and otherwise uses the built-in defaults.
    """
    file = Path(path) if path is not None else find_default_config()
    if file is not None and not file.is_file():
        raise ConfigError(f"config file {file} does not exist; check the path or omit it to use the defaults")
    data = _file_data(file) if file is not None else {}
    source = str(file) if file is not None else "built-in defaults"
    return settings_from_dict(data, source=source)


def settings_from_dict(data: dict[str, Any], *, source: str = "a dict") -> Settings:
    """Build settings from already-parsed TOML data (environment overrides still apply)."""
    where = f" (in {source})"
    token = _current_source.set(source)
    try:
        return Settings(**data)
    except ValidationError as exc:
        raise ConfigError(_explain_settings_errors(exc, where)) from None
    finally:
        _current_source.reset(token)
