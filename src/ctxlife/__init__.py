"""ctxlife: manage an LLM agent's context over its whole lifecycle.

``wrap(crew)`` (CrewAI), ``manage(messages)`` / ``amanage`` (any framework), ``Session`` (a conversation
that outlives the process), ``Host`` (every node from your own loop), the LangChain middleware and the
Agents SDK session: README.md and docs/integrations.md; writing a strategy: docs/writing-a-strategy.md.

Heavy modules (pydantic, the config loader, tiktoken, CrewAI) are imported on first
use of the name that needs them, so ``import ctxlife`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ctxlife.contexts import (
    Action,
    BootstrapContext,
    HookContext,
    LLMCallContext,
    TaskContext,
    TextContext,
    ToolCallContext,
)
from ctxlife.errors import (
    ConfigError,
    CtxlifeError,
    InvalidMessagesError,
    MissingDependencyError,
    PluginConflictError,
    PluginError,
    SessionIdError,
    StoreError,
    StrategyOptionsError,
    UnknownStrategyError,
)
from ctxlife.hookspecs import hookimpl

if TYPE_CHECKING:
    from ctxlife.api import CtxlifeWarning, amanage, arecord_reply, manage, record_reply
    from ctxlife.config import Settings, load_settings
    from ctxlife.host import Host
    from ctxlife.host_report import Report
    from ctxlife.integrations.crewai import completion_for_model, host_of, unwrap, wrap
    from ctxlife.session import AsyncSession, Session
    from ctxlife.strategy import NonBlankStr, Options, SharedSettings, Strategy, ToolSpec
    from ctxlife.tokens import TokenCounter

__version__ = "0.1.0"

__all__ = [
    "Action",
    "AsyncSession",
    "BootstrapContext",
    "ConfigError",
    "CtxlifeError",
    "CtxlifeWarning",
    "HookContext",
    "Host",
    "InvalidMessagesError",
    "LLMCallContext",
    "MissingDependencyError",
    "NonBlankStr",
    "Options",
    "PluginConflictError",
    "PluginError",
    "Report",
    "Session",
    "SessionIdError",
    "Settings",
    "SharedSettings",
    "StoreError",
    "Strategy",
    "StrategyOptionsError",
    "TaskContext",
    "TextContext",
    "TokenCounter",
    "ToolCallContext",
    "ToolSpec",
    "UnknownStrategyError",
    "amanage",
    "arecord_reply",
    "completion_for_model",
    "hookimpl",
    "host_of",
    "load_settings",
    "manage",
    "record_reply",
    "unwrap",
    "wrap",
]

_LAZY = {
    "Strategy": "ctxlife.strategy",
    "Options": "ctxlife.strategy",
    "ToolSpec": "ctxlife.strategy",
    "SharedSettings": "ctxlife.strategy",
    "NonBlankStr": "ctxlife.strategy",
    "manage": "ctxlife.api",
    "amanage": "ctxlife.api",
    "record_reply": "ctxlife.api",
    "arecord_reply": "ctxlife.api",
    "CtxlifeWarning": "ctxlife.api",
    "load_settings": "ctxlife.config",
    "Settings": "ctxlife.config",
    "Host": "ctxlife.host",
    "Report": "ctxlife.host_report",
    "TokenCounter": "ctxlife.tokens",
    "completion_for_model": "ctxlife.integrations.crewai",
    "wrap": "ctxlife.integrations.crewai",
    "unwrap": "ctxlife.integrations.crewai",
    "host_of": "ctxlife.integrations.crewai",
    "Session": "ctxlife.session",
    "AsyncSession": "ctxlife.session",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'ctxlife' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
