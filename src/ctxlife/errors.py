"""Every error ctxlife raises. All subclass :class:`CtxlifeError`.

Messages name what failed, where, and how to fix it.
"""

from __future__ import annotations


class CtxlifeError(Exception):
    """Base class of every error raised by ctxlife."""


class ConfigError(CtxlifeError):
    """A config file or setting is malformed or names something that does not exist."""


class UnknownStrategyError(ConfigError):
    """A config names a strategy that no installed package provides."""


class StrategyOptionsError(ConfigError):
    """A strategy's options in the config have the wrong key or type."""


class PluginError(CtxlifeError):
    """A strategy plugin is broken or clashes with another one."""


class PluginConflictError(PluginError):
    """Two installed packages offer a strategy under the same name."""


class InvalidMessagesError(CtxlifeError):
    """A message list is not a list of OpenAI-format message dicts."""


class SessionIdError(CtxlifeError):
    """A session id is unsafe (path separators, ``..``, control characters) or too long."""


class StoreError(CtxlifeError):
    """A session store could not be opened, read or written."""


class MissingDependencyError(CtxlifeError, ImportError):
    """An optional framework or library is not installed; the message names the pip extra that adds it."""
