"""Finding installed strategies, and the plugin manager a host registers them with.

Every strategy, first-party or third-party, is an entry point in the ``ctxlife.strategies`` group
(docs/writing-a-strategy.md); installed is not active, and two packages offering one name fail only
the configs that use it (:mod:`ctxlife.registry`).
"""

from __future__ import annotations

import threading
import weakref
from types import ModuleType
from typing import Any, ClassVar

import pluggy

from ctxlife.errors import UnknownStrategyError
from ctxlife.hookspecs import HOOK_NAMES
from ctxlife.registry import PluginOffer, Registry
from ctxlife.strategy import Strategy

ENTRY_POINT_GROUP = "ctxlife.strategies"

StrategyClass = type[Strategy[Any]]


def _check_strategy(name: str, obj: Any) -> str | None:
    if not (isinstance(obj, type) and issubclass(obj, Strategy)):
        return "is not a ctxlife.Strategy subclass; point the entry point at the strategy class"
    if obj.name != name:
        return (
            f"loads {obj.__qualname__} whose name is {obj.name!r}; use one name everywhere "
            "(entry point, TOML table, Strategy.name)"
        )
    return None


class StrategyRegistry(Registry[StrategyClass]):
    """The installed strategies (entry points of ``ctxlife.strategies``)."""

    def __init__(self) -> None:
        super().__init__(
            "strategy",
            ENTRY_POINT_GROUP,
            check=_check_strategy,
            unknown_error=UnknownStrategyError,
            name_pattern=r"[A-Za-z_][A-Za-z0-9_]*",
            name_rule="letters, digits and '_' (a TOML table name)",
        )

    @property
    def entries(self) -> dict[str, PluginOffer]:
        """The first offer of every name (a contested name has more: see :meth:`offers`)."""
        return {name: self.offers(name)[0] for name in self.names()}

    def describe(self) -> list[dict[str, Any]]:
        """One row per offer: name, hooks implemented, package, version, and the packages it clashes with."""
        rows = []
        for row in self.listing():
            offer = row.offer
            try:
                cls = self.load(offer)
                marked = [getattr(cls, attr) for attr in dir(cls)]
                implemented = {
                    m.ctxlife_impl.get("specname") or m.__name__ for m in marked if hasattr(m, "ctxlife_impl")
                }
                hooks = [h for h in HOOK_NAMES if h in implemented]
                broken = None
            except Exception as exc:  # noqa: BLE001 - a broken plugin is listed, not fatal
                hooks, broken = [], str(exc)
            rows.append(
                {
                    "name": offer.name,
                    "hooks": hooks,
                    "package": offer.package,
                    "version": offer.version,
                    "class": offer.value,
                    "clashes_with": [o.source for o in row.clashes_with],
                    "broken": broken,
                }
            )
        return rows


_registry: StrategyRegistry | None = None
_registry_lock = threading.Lock()


def registry(*, refresh: bool = False) -> StrategyRegistry:
    """The process-wide view of installed strategies (entry points are read once)."""
    global _registry
    with _registry_lock:
        if _registry is None:
            _registry = StrategyRegistry()
        if refresh:
            _registry.refresh()
        return _registry


class PluginManager(pluggy.PluginManager):
    """pluggy's manager, reading the hook markers of a plugin class's attributes once per process.

    pluggy looks every attribute of a plugin up with ``inspect.getattr_static`` at ``register``
    (about 3 of a Host's 4.5 ms). A strategy's markers live on its class: each (class, name) is
    read the first time and reused while the class holds the same attribute (a method replaced
    later is read again). Modules, classes and attributes of the instance itself are read each
    time, as pluggy does.
    """

    _markers: ClassVar[weakref.WeakKeyDictionary[type, dict[str, tuple[object, Any]]]] = weakref.WeakKeyDictionary()

    def parse_hookimpl_opts(self, plugin: object, name: str) -> Any:
        if isinstance(plugin, type | ModuleType) or name in getattr(plugin, "__dict__", ()):
            return super().parse_hookimpl_opts(plugin, name)
        cls = type(plugin)
        attribute = next((klass.__dict__[name] for klass in cls.__mro__ if name in klass.__dict__), None)
        known = self._markers.get(cls)
        if known is None:
            known = self._markers.setdefault(cls, {})
        found = known.get(name)
        if found is None or found[0] is not attribute:
            found = known[name] = (attribute, super().parse_hookimpl_opts(plugin, name))
        return found[1]
