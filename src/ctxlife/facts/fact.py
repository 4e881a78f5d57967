"""The :class:`Fact` value: one exact string an agent may need again, with its kind."""

from __future__ import annotations

from dataclasses import dataclass

from ctxlife.errors import CtxlifeError

#: Every value ``Fact.kind`` can take.
FACT_KINDS: tuple[str, ...] = (
    "id",
    "code",
    "number",
    "amount",
    "date",
    "time",
    "email",
    "url",
    "path",
    "name",
)


class FactError(CtxlifeError, ValueError):
    """A :class:`Fact` was built with an unknown kind or an empty text."""


@dataclass(frozen=True)
class Fact:
    """One fact of the ledger.

    ``text`` is the exact surface string as it first appeared; ``normalized`` a
    canonical form used to recognise the same fact written differently
    (``$1,234.50`` -> ``1234.5``, ``May 15, 2024`` -> ``2024-05-15``,
    ``2:30 PM`` -> ``14:30``, ``#K5520913`` -> ``K5520913``). Facts compare equal
    by all three fields.
    """

    kind: str
    text: str
    normalized: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in FACT_KINDS:
            raise FactError(f"Fact.kind must be one of {FACT_KINDS}, got {self.kind!r}")
        if not isinstance(self.text, str) or not self.text:
            raise FactError("Fact.text must be a non-empty string")

    @property
    def key(self) -> tuple[str, str]:
        """The identity used for de-duplication: ``(kind, normalized or text)``."""
        return (self.kind, self.normalized if self.normalized is not None else self.text)

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.text
