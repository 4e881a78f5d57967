"""One registry type for every kind of plugin: strategies, summarizers, session stores.

Each kind is a :class:`Registry` over one entry-point group; the kinds, and the rule for two packages
offering one name: docs/architecture.md, "Extension points". Entry points are read once (and again
when a name is not found, so a package installed since is seen) and a plugin is imported only when
it is used. Registering a name at run time (:meth:`Registry.register`) that is already taken is
refused unless ``replace=True``; :meth:`Registry.registered` does it for the length of a block (tests).

Why not one pluggy plugin manager with register-hooks (as simonw/llm does)? Asking every plugin
what it registers means importing them all, and ctxlife promises that installed is not active: a
strategy is imported only when a config names it. Entry-point names are known without an import.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ctxlife.errors import ConfigError, CtxlifeError, PluginConflictError, PluginError

T = TypeVar("T")

#: Where a registration made at run time says it comes from.
RUN_TIME = "(registered at run time)"


@dataclass(frozen=True)
class PluginOffer:
    """One package's offer of a plugin under a name: an entry point, or a run-time registration."""

    name: str
    value: str  # "module:attribute" (attribute may be dotted)
    package: str  # distribution name, or RUN_TIME
    version: str
    obj: Any = field(default=None, compare=False, repr=False)  # set for run-time registrations

    @property
    def source(self) -> str:
        return self.package if self.package == RUN_TIME else f"{self.package} {self.version}"

    def import_target(self) -> Any:
        """Import what the offer points to (no checks)."""
        if self.package == RUN_TIME:
            return self.obj
        module_name, _, attr = self.value.partition(":")
        obj: Any = importlib.import_module(module_name)
        for part in attr.split(".") if attr else []:
            obj = getattr(obj, part)
        return obj


@dataclass(frozen=True)
class Listing:
    """A row of :meth:`Registry.listing`: an offer and the offers it clashes with."""

    offer: PluginOffer
    clashes_with: tuple[PluginOffer, ...] = ()


class Registry(Generic[T]):
    """The plugins of one kind, by name.

    Args:
        kind: what a plugin is, for messages (``"strategy"``, ``"summarizer"``).
        group: the entry-point group (``"ctxlife.strategies"``).
        check: ``check(name, obj) -> problem`` after import; a problem string makes the plugin
            broken (:class:`PluginError` naming it and the package).
        unknown_error: the error class for a name nothing offers (its message lists what is).
        name_pattern: what a valid name looks like (invalid names raise ``unknown_error``).
        name_rule: how ``name_pattern`` reads in an error message.
    """

    def __init__(
        self,
        kind: str,
        group: str,
        *,
        check: Callable[[str, Any], str | None] | None = None,
        unknown_error: type[CtxlifeError] = ConfigError,
        name_pattern: str = r"[A-Za-z0-9][A-Za-z0-9_.-]*",
        name_rule: str = "letters, digits, '_', '-' or '.'",
    ) -> None:
        self.kind = kind
        self.group = group
        self._check = check
        self._unknown_error = unknown_error
        self._name_re = re.compile(name_pattern)
        self._name_rule = name_rule
        self._lock = threading.RLock()
        self._installed: dict[str, list[PluginOffer]] | None = None
        self._registered: dict[str, PluginOffer] = {}
        self._loaded: dict[PluginOffer, T] = {}

    # -- what is there ----------------------------------------------------------------------

    def refresh(self) -> None:
        """Read the entry points again (a package was installed or removed since)."""
        offers: dict[str, list[PluginOffer]] = {}
        for ep in importlib.metadata.entry_points(group=self.group):
            dist = getattr(ep, "dist", None)
            offer = PluginOffer(
                name=ep.name,
                value=ep.value,
                package=dist.metadata["Name"] if dist is not None else "?",
                version=dist.version if dist is not None else "?",
            )
            same_name = offers.setdefault(ep.name, [])
            if offer not in same_name:  # one distribution seen twice on sys.path is not a clash
                same_name.append(offer)
        with self._lock:
            self._installed = offers

    def _offers(self) -> dict[str, list[PluginOffer]]:
        with self._lock:
            if self._installed is None:
                self.refresh()
            assert self._installed is not None
            return self._installed

    def names(self) -> list[str]:
        """Every name offered, installed or registered, contested ones included."""
        with self._lock:
            return sorted(set(self._offers()) | set(self._registered))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._registered or name in self._offers())

    def offers(self, name: str) -> list[PluginOffer]:
        """What is offered under ``name``: the run-time registration, else every installed offer."""
        with self._lock:
            registered = self._registered.get(name)
            return [registered] if registered is not None else list(self._offers().get(name, ()))

    def listing(self) -> list[Listing]:
        """One row per offer, by name; offers of a contested name name each other."""
        rows = []
        for name in self.names():
            offers = self.offers(name)
            for offer in offers:
                rows.append(Listing(offer, tuple(o for o in offers if o is not offer)))
        return rows

    def available(self) -> str:
        """``available: a (pkg 1.0), b (pkg 1.0)`` for error messages."""
        names = self.names()
        if not names:
            return f"no {self.kind} plugins are installed (is ctxlife installed with pip?)"
        return "available: " + ", ".join(f"{n} ({', '.join(o.source for o in self.offers(n))})" for n in names)

    # -- using one ------------------------------------------------------------------------

    def check_name(self, name: object) -> str:
        if not isinstance(name, str) or not self._name_re.fullmatch(name):
            raise self._unknown_error(f"invalid {self.kind} name {name!r}: use {self._name_rule}")
        return name

    def offer(self, name: str) -> PluginOffer:
        """The one offer ``name`` resolves to, or the error a user of that name should see."""
        self.check_name(name)
        offers = self.offers(name)
        if not offers:
            self.refresh()  # installed since the entry points were read?
            offers = self.offers(name)
        if not offers:
            raise self._unknown_error(f"unknown {self.kind} {name!r}; {self.available()}")
        if len(offers) > 1:
            listed = " and ".join(f"{o.source} ({o.value})" for o in offers)
            raise PluginConflictError(
                f"two installed packages offer a {self.kind} named {name!r}: {listed}; "
                "uninstall one of them (configs that do not use this name are not affected)"
            )
        return offers[0]

    def get(self, name: str) -> T:
        """The plugin called ``name``, imported and checked (once)."""
        offer = self.offer(name)
        if offer.package == RUN_TIME:
            return offer.obj  # type: ignore[no-any-return]
        with self._lock:
            found = self._loaded.get(offer)
        if found is None:
            found = self.load(offer)
            with self._lock:
                self._loaded[offer] = found
        return found

    def load(self, offer: PluginOffer) -> T:
        """Import one offer and check it (any offer, also one of a contested name)."""
        try:
            obj = offer.import_target()
        except Exception as exc:  # noqa: BLE001 - any import failure is a broken plugin
            raise PluginError(
                f"{self.kind} {offer.name!r} from {offer.source} could not be loaded from {offer.value!r} "
                f"(entry-point group {self.group}): {type(exc).__name__}: {exc}; reinstall {offer.package} "
                "or remove it"
            ) from exc
        problem = self._check(offer.name, obj) if self._check is not None else None
        if problem is not None:
            raise PluginError(f"{self.kind} {offer.name!r} from {offer.source} ({offer.value}): {problem}")
        return obj  # type: ignore[no-any-return]

    # -- registering at run time ------------------------------------------------------------

    def register(self, name: str, obj: T, *, replace: bool = False) -> None:
        """Offer ``obj`` under ``name`` in this process, ahead of installed packages.

        A name that is taken (installed or registered) raises :class:`PluginConflictError`
        unless ``replace`` is true.
        """
        self.check_name(name)
        problem = self._check(name, obj) if self._check is not None else None
        if problem is not None:
            raise self._unknown_error(f"{self.kind} {name!r}: {problem}")
        module = getattr(obj, "__module__", None) or type(obj).__module__
        qualname = getattr(obj, "__qualname__", None) or type(obj).__qualname__
        offer = PluginOffer(name, f"{module}:{qualname}", RUN_TIME, "", obj)
        with self._lock:
            if not replace and name in self:
                taken_by = ", ".join(o.source for o in self.offers(name))
                raise PluginConflictError(
                    f"a {self.kind} named {name!r} is already offered by {taken_by}; pass replace=True to override it"
                )
            self._registered[name] = offer

    def unregister(self, name: str) -> None:
        """Remove a run-time registration (installed packages stay); no error if there is none."""
        with self._lock:
            self._registered.pop(name, None)

    @contextmanager
    def registered(self, name: str, obj: T) -> Iterator[T]:
        """Register ``obj`` under ``name`` for a block, then restore what was there (tests)."""
        with self._lock:
            previous = self._registered.get(name)
            self.register(name, obj, replace=True)
        try:
            yield obj
        finally:
            with self._lock:
                self.unregister(name)
                if previous is not None:
                    self._registered[name] = previous
