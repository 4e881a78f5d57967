"""Does a text still carry a fact? Surface strings on token boundaries, or the same value written another way.

:class:`TextIndex` answers it for many facts against one text; :class:`FactMatcher` for many texts
against one ledger (a cheap anchor pre-filter first, then a :class:`TextIndex` only when needed).
"""

from __future__ import annotations

from collections.abc import Iterable

from ctxlife.facts.fact import Fact
from ctxlife.facts.normalise import canonical_number
from ctxlife.facts.patterns import compile_cjk_aware
from ctxlife.facts.scanner import scan_text
from ctxlife.facts.vocabulary import SCALE_WORDS

_ASCII_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_BARE_NUMBER_RE = compile_cjk_aware(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w]|[.,]\d)")
_SCALED_NUMBER_RE = compile_cjk_aware(r"\d\s?(?:" + SCALE_WORDS + r")\b")


def _surface_in(text: str, hay: str) -> bool:
    """``text`` in ``hay`` on token boundaries: ``BX447`` is not inside ``BX4471``, nor ``25`` inside ``2.50``.

    No ASCII letter or digit touches it; a text starting with a digit is not the decimals of a number
    (``5.25``: ``25``), nor one ending with a digit the integer part of one (``2.50``: ``2``). Every
    occurrence is tried (plain ``str.find``, no regex to compile per fact)."""
    if not text:
        return True  # as an empty pattern would
    check_left = text[0].isalnum()
    check_right = text[-1].isalnum()
    digit_left = text[0].isdigit()
    digit_right = text[-1].isdigit()
    n = len(text)
    last = len(hay)
    start = hay.find(text)
    while start >= 0:
        end = start + n
        if not (
            (check_left and start > 0 and hay[start - 1] in _ASCII_ALNUM)
            or (digit_left and start > 1 and hay[start - 1] in ".," and hay[start - 2].isdecimal())
            or (check_right and end < last and hay[end] in _ASCII_ALNUM)
            or (digit_right and end + 1 < last and hay[end] in ".," and hay[end + 1].isdecimal())
        ):
            return True
        start = hay.find(text, start + 1)
    return False


class TextIndex:
    """Answers "does this text carry that fact?" for many facts against one text.

    The surface string is looked for first (on token boundaries); normalized
    forms need a scan of the text, which is done lazily, once, and only for a
    fact whose tell-tale digits/letters appear in the text at all.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._lower: str | None = None
        self._without_commas: str | None = None
        self._forms: set[tuple[str, str]] | None = None
        self._numbers: set[str] | None = None
        self._scaled: bool | None = None

    @property
    def lower(self) -> str:
        if self._lower is None:
            self._lower = self.text.lower()
        return self._lower

    @property
    def without_commas(self) -> str:
        if self._without_commas is None:
            self._without_commas = self.text.replace(",", "")
        return self._without_commas

    @property
    def forms(self) -> set[tuple[str, str]]:
        """The keys of every fact the text holds, plus the shorter forms a full date or code also answers to."""
        if self._forms is None:
            forms: set[tuple[str, str]] = set()
            for found in scan_text(self.text):
                f = found.fact
                forms.add(f.key)
                if f.kind == "date" and f.normalized and len(f.normalized) >= 10 and f.normalized[4] == "-":
                    forms.add(("date", "--" + f.normalized[5:10]))  # month-day
                    forms.add(("date", f.normalized[:10]))
                if f.kind == "code" and f.normalized:
                    forms.add(("code", f.normalized.upper()))
            self._forms = forms
        return self._forms

    @property
    def has_scaled_number(self) -> bool:
        """Whether the text writes a number with a scale word (``1.2M``, ``3 billion``)."""
        if self._scaled is None:
            self._scaled = _SCALED_NUMBER_RE.search(self.text) is not None
        return self._scaled

    @property
    def numbers(self) -> set[str]:
        """Every plain number of the text, in canonical form."""
        if self._numbers is None:
            numbers: set[str] = set()
            for m in _BARE_NUMBER_RE.finditer(self.text):
                n = canonical_number(m.group(0).lstrip("-"))
                if n is not None:
                    numbers.add(n)
                    if m.group(0).startswith("-"):
                        numbers.add("-" + n)
            self._numbers = numbers
        return self._numbers

    def contains(self, fact: Fact) -> bool:
        t = fact.text
        if _surface_in(t, self.text):
            return True
        n = fact.normalized
        if not n:
            return False
        kind = fact.kind
        if kind in ("id", "email", "url", "path"):
            nl = n.lower()
            return _surface_in(nl, self.lower)
        if kind == "code":
            if n.lower() not in self.lower:
                return False
            return _surface_in(n, self.text) or fact.key in self.forms
        if kind == "amount":
            whole = n.lstrip("-").split(".")[0]
            if whole not in self.without_commas and not self.has_scaled_number:
                return False
            return n in self.numbers or fact.key in self.forms
        if kind == "number":
            if n.isdigit():
                if n[-4:] not in self.without_commas:
                    return False
                return n in self.numbers or fact.key in self.forms
            whole = n.split(" ")[0].rstrip("%").split(".")[0]
            if whole not in self.without_commas:
                return False
            return fact.key in self.forms
        if kind == "date":
            try:
                if n.startswith("--"):
                    core = str(int(n[5:7]))
                elif len(n) == 7:
                    core = n[:4]
                else:
                    core = str(int(n[8:10]))
            except ValueError:
                return fact.key in self.forms
            if core not in self.text:
                return False
            return fact.key in self.forms
        if kind == "time":
            hh, _, mm = n.partition(":")
            try:
                h = int(hh)
            except ValueError:
                return fact.key in self.forms
            cores = [mm] if mm != "00" else [str(h), str(h % 12 or 12)]
            if not any(c in self.text for c in cores):
                return False
            return fact.key in self.forms
        return fact.key in self.forms


def _anchors(fact: Fact) -> tuple[str, ...]:
    """Strings of which at least one appears in ``text.lower().replace(",", "")``
    whenever ``text`` carries ``fact`` (surface or normalized): a cheap pre-filter
    before :meth:`TextIndex.contains`. An empty tuple means "always check"."""
    n = fact.normalized
    kind = fact.kind
    if not n:
        return (fact.text.lower().replace(",", ""),)
    try:
        if kind in ("id", "email", "url", "path", "code"):
            return (n.lower().replace(",", ""),)
        if kind == "amount":
            # none: the text may write it with a scale word ("$2M" for "$2,000,000"), which holds no digits of
            # it that a substring could name; contains' own check (its whole part, or any scaled number) is cheap
            return ()
        if kind == "number":
            if n.isdigit():
                return (n[-4:],)
            return (n.split(" ")[0].rstrip("%").split(".")[0],)
        if kind == "date":
            if n.startswith("--"):
                return (str(int(n[5:7])),)
            if len(n) == 7:
                return (n[:4],)
            day = int(n[8:10])
            return (str(day),) if day >= 10 else (n[:4],)  # every full form writes the year
        if kind == "time":
            hh, _, mm = n.partition(":")
            h = int(hh)
            return (mm,) if mm != "00" else (str(h), str(h % 12 or 12))
    except (ValueError, IndexError):
        return ()
    return ()


class FactMatcher:
    """Which of many facts a text carries (built once per ledger, used for many texts)."""

    def __init__(self, facts: Iterable[Fact]) -> None:
        self.facts = list(facts)
        self._by_anchor: dict[str, list[int]] = {}
        self._always: list[int] = []
        for i, f in enumerate(self.facts):
            anchors = _anchors(f)
            if not anchors:
                self._always.append(i)
            for a in anchors:
                self._by_anchor.setdefault(a, []).append(i)

    def present(self, text: str) -> list[Fact]:
        """The facts ``text`` carries, in ledger order."""
        if not text or not self.facts:
            return []
        hay = text.lower().replace(",", "")
        candidates = set(self._always)
        for anchor, idxs in self._by_anchor.items():
            if anchor in hay:
                candidates.update(idxs)
        if not candidates:
            return []
        index = TextIndex(text)
        return [self.facts[i] for i in sorted(candidates) if index.contains(self.facts[i])]


def fact_in_text(fact: Fact, text: str) -> bool:
    """Whether ``text`` still carries ``fact`` (its surface string, or its normalized
    form: ``$1,234.50`` is found as ``1234.5``, ``March 14th`` in ``2031-03-14``)."""
    return TextIndex(text or "").contains(fact)


def facts_missing_from(facts: Iterable[Fact], text: str) -> list[Fact]:
    """The facts whose surface string (or normalized form) does not appear in ``text``.

    Surface strings match on token boundaries: ``BX447`` is not found inside
    ``BX4471``, nor ``25`` inside ``250``. Order of ``facts`` is kept.
    """
    facts = list(facts)
    present = {id(f) for f in FactMatcher(facts).present(text or "")}
    return [f for f in facts if id(f) not in present]
