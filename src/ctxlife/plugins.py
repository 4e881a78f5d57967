"""Finding installed strategies.

Every strategy, first-party or third-party, is found the same way: an entry
point in the ``ctxlife.strategies`` group whose name is the strategy's name and
whose value is its :class:`~ctxlife.Strategy` subclass::

    [project.entry-points."ctxlife.strategies"]
    redact = "ctxlife_redact:Redact"

Installed is not active: a strategy runs only when a config names it.
"""

from __future__ import annotations

import importlib.metadata
import threading
from dataclasses import dataclass
from typing import Any

from ctxlife.errors import PluginConflictError, PluginError, UnknownStrategyError
from ctxlife.hookspecs import HOOK_NAMES
from ctxlife.strategy import Strategy

ENTRY_POINT_GROUP = "ctxlife.strategies"


@dataclass(frozen=True)
class StrategyEntry:
    """An installed strategy: where it comes from, not yet imported."""

    name: str
    value: str  # "module:Class"
    package: str  # distribution name
    version: str

    @property
    def source(self) -> str:
        return f"{self.package} {self.version}"

    def load(self) -> type[Strategy]:
        module_name, _, attr = self.value.partition(":")
        try:
            module = importlib.import_module(module_name)
            obj: Any = module
            for part in attr.split(".") if attr else []:
                obj = getattr(obj, part)
        except Exception as exc:  # noqa: BLE001 - any import failure is a broken plugin
            raise PluginError(
                f"strategy {self.name!r} from {self.source} could not be loaded "
                f"from {self.value!r}: {type(exc).__name__}: {exc}; "
                f"reinstall {self.package} or remove it"
            ) from exc
        if not (isinstance(obj, type) and issubclass(obj, Strategy)):
            raise PluginError(
                f"entry point {self.name!r} of {self.source} points to {self.value!r}, "
                "which is not a ctxlife.Strategy subclass; point it at the strategy class"
            )
        if obj.name != self.name:
            raise PluginError(
                f"entry point {self.name!r} of {self.source} loads {obj.__qualname__} whose "
                f"name is {obj.name!r}; use one name everywhere (entry point, TOML table, "
                "Strategy.name)"
            )
        return obj


class Registry:
    """The installed strategies, read from entry points once."""

    def __init__(self, entries: dict[str, StrategyEntry]) -> None:
        self.entries = entries
        self._classes: dict[str, type[Strategy]] = {}

    @classmethod
    def from_entry_points(cls) -> Registry:
        by_name: dict[str, StrategyEntry] = {}
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = getattr(ep, "dist", None)
            entry = StrategyEntry(
                name=ep.name,
                value=ep.value,
                package=dist.metadata["Name"] if dist is not None else "?",
                version=dist.version if dist is not None else "?",
            )
            other = by_name.get(ep.name)
            if other is not None and (other.package, other.value) != (entry.package, entry.value):
                raise PluginConflictError(
                    f"two installed packages offer a strategy named {ep.name!r}: "
                    f"{other.source} ({other.value}) and {entry.source} ({entry.value}); "
                    "uninstall one of them"
                )
            by_name[ep.name] = entry
        return cls(by_name)

    def names(self) -> list[str]:
        return sorted(self.entries)

    def get(self, name: str) -> type[Strategy]:
        cls = self._classes.get(name)
        if cls is None:
            entry = self.entries.get(name)
            if entry is None:
                raise UnknownStrategyError(f"unknown strategy {name!r}; {self.available()}")
            cls = self._classes[name] = entry.load()
        return cls

    def available(self) -> str:
        if not self.entries:
            return "no strategies are installed (is ctxlife installed with pip?)"
        listing = ", ".join(f"{e.name} ({e.source})" for e in sorted(self.entries.values(), key=lambda e: e.name))
        return f"available: {listing}"

    def describe(self) -> list[dict[str, Any]]:
        """One row per installed strategy: name, hooks implemented, package, version."""
        rows = []
        for name in self.names():
            entry = self.entries[name]
            cls = self.get(name)
            hooks = [h for h in HOOK_NAMES if hasattr(getattr(cls, h, None), "ctxlife_impl")]
            rows.append({"name": name, "hooks": hooks, "package": entry.package, "version": entry.version, "class": entry.value})
        return rows


_registry: Registry | None = None
_registry_lock = threading.Lock()


def registry(*, refresh: bool = False) -> Registry:
    """The process-wide view of installed strategies (entry points are read once)."""
    global _registry
    with _registry_lock:
        if _registry is None or refresh:
            _registry = Registry.from_entry_points()
        return _registry
