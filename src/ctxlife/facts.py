"""The key-fact ledger: the exact strings an agent typically needs again later.

Before a span of messages is summarized or cut, :func:`extract_facts` pulls out
identifiers, codes, amounts, numbers with units, dates, times, emails, URLs and
file paths. After summarizing, :func:`facts_missing_from` tells which of them the
summary lost, and :func:`format_fact_list` renders those as a compact
``Key facts: ...`` block that fits a token budget.

Everything here is pure Python (stdlib ``re``/``json``), framework neutral, and
has no import-time side effects.

Kinds of facts (``Fact.kind``):

========  ==================================================================
``id``    snake/kebab identifiers with digits (``mia_li_3668``,
          ``credit_card_4421486``), UUIDs, long random tokens, values of
          id-like JSON keys (``"user_id"``), call ids of pending tool calls
``code``  upper-case codes with a digit (``NO6JO3``, ``HAT136``, ``ORD-12345``,
          ``#W2378156``); letters-only codes only when announced by a word such
          as "reservation"/"confirmation"/"code" or an id-like JSON key
          (``HATHAT``)
``amount``  money (``$1,234.50``, ``EUR 20``, ``30 dollars``) and numbers under
          money-like JSON keys (``"price": 121``)
``number``  numbers with a unit (``120 kg``, ``15%``, ``3 bags``), numbers of 4+
          digits that are not years (``7447``, ``78750``), phone numbers
``date``  ``2024-05-15``, ``2024-05-15T10:00:00Z``, ``May 15, 2024``,
          ``May 20th``, ``15 May 2024``, ``15/05/2024``, ``2024/05/15``
``time``  ``14:30``, ``06:00:00``, ``11am``, ``2:30 PM``
``email`` ``name@example.com``
``url``   ``https://...``, ``www....``
``path``  ``/tmp/x.csv``, ``./data/report.md``, ``~/notes.txt``,
          ``data/report.md``, ``C:\\x\\y.txt``
========  ==================================================================

Plain small numbers, years on their own, list numbering and upper-case words
(``THE``, ``JSON``, ``JFK``) are deliberately not facts.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from ctxlife.errors import CtxlifeError

__all__ = [
    "FACT_KINDS",
    "FACT_LIST_HEADER",
    "KIND_PRIORITY",
    "Fact",
    "FactError",
    "extract_facts",
    "fact_in_text",
    "facts_missing_from",
    "format_fact_list",
]

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
)

#: Priority of kinds in :func:`format_fact_list`, highest first. When the block
#: does not fit, facts are dropped from the *lowest*-priority kind first, and
#: within a kind the most recently found fact first (last in, first out).
#: Identifiers and codes come first because an agent cannot re-derive them and
#: passes them verbatim to tools; paths, URLs and emails are exact strings of the
#: same sort; amounts and dates are next; times and bare numbers are most often
#: recoverable or incidental.
KIND_PRIORITY: tuple[str, ...] = (
    "id",
    "code",
    "path",
    "url",
    "email",
    "amount",
    "date",
    "time",
    "number",
)

_KIND_LABELS = {
    "id": "ids",
    "code": "codes",
    "number": "numbers",
    "amount": "amounts",
    "date": "dates",
    "time": "times",
    "email": "emails",
    "url": "urls",
    "path": "paths",
}

FACT_LIST_HEADER = "Key facts:"


class FactError(CtxlifeError, ValueError):
    """A :class:`Fact` was built with an unknown kind or an empty text."""


@dataclass(frozen=True)
class Fact:
    """One fact of the ledger.

    ``text`` is the exact surface string as it first appeared; ``normalized`` a
    canonical form used to recognise the same fact written differently
    (``$1,234.50`` -> ``1234.5``, ``May 15, 2024`` -> ``2024-05-15``,
    ``2:30 PM`` -> ``14:30``, ``#W2378156`` -> ``W2378156``). Facts compare equal
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


# --------------------------------------------------------------------------------------
# patterns
# --------------------------------------------------------------------------------------

_MONTHS = {
    "jan": 1,
    "january": 1,
    "feb": 2,
    "february": 2,
    "mar": 3,
    "march": 3,
    "apr": 4,
    "april": 4,
    "may": 5,
    "jun": 6,
    "june": 6,
    "jul": 7,
    "july": 7,
    "aug": 8,
    "august": 8,
    "sep": 9,
    "sept": 9,
    "september": 9,
    "oct": 10,
    "october": 10,
    "nov": 11,
    "november": 11,
    "dec": 12,
    "december": 12,
}
_MONTH_RE = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_B = r"(?<![\w])"  # left boundary: not after a word character
_E = r"(?![\w])"  # right boundary

_URL_RE = re.compile(r"(?:\b(?:https?|ftp|file|s3|gs)://|\bwww\.)[^\s<>\"'`]+", re.IGNORECASE)
_EMAIL_RE = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_WIN_PATH_RE = re.compile(r"(?<![\w])(?:[A-Za-z]:[\\/]|\\\\[\w.$-]+\\)(?:[^\\/\s:*?\"<>|,;]+[\\/])*[^\\/\s:*?\"<>|,;]*")
_UNIX_PATH_RE = re.compile(r"(?<![\w:/.~\\-])(?:~|\.{1,2})?/(?:[\w.@+-]+/)*[\w.@+-]+/?")
_REL_PATH_RE = re.compile(r"(?<![\w/.:\\-])[A-Za-z_][\w.-]*(?:/[\w.-]+)+\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/])")
_ISO_DT_RE = re.compile(_B + r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?" + _E)
_ISO_DATE_RE = re.compile(r"(?<![\w.-])(\d{4})([-/])(\d{1,2})\2(\d{1,2})(?![\w]|[-/.]\d)")
_NUM_DATE_RE = re.compile(r"(?<![\w./-])(\d{1,2})([/.-])(\d{1,2})\2(\d{4}|\d{2})(?![\w]|[/.-]\d)")
_MDY_RE = re.compile(_B + r"(" + _MONTH_RE + r")\.?\s+(\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(\d{4}))?" + _E)
_DMY_RE = re.compile(_B + r"(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(" + _MONTH_RE + r")\.?(?:,?\s+(\d{4}))?" + _E)
_CJK_DATE_RE = re.compile(r"(\d{4})\s?年\s?(\d{1,2})\s?月(?:\s?(\d{1,2})\s?[日号])?")
_MONTH_YEAR_RE = re.compile(_B + r"(" + _MONTH_RE + r")\.?,?\s+(\d{4})" + _E)
_TIME_RE = re.compile(
    r"(?<![\w:.])(\d{1,2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:\s?([AaPp])\.?[Mm]\.?(?![A-Za-z]))?(?![\d:]|\.\d)"
)
_AMPM_RE = re.compile(r"(?<![\w:.])(\d{1,2})\s?([AaPp])\.?[Mm]\b\.?")

_CURRENCY_SYMBOLS = "$€£¥₹"
_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_SCALE = r"(?:\s?(?:k|K|M|bn|million|billion|thousand)\b)?"
_AMOUNT_PRE_RE = re.compile(
    r"(?<![\w])(-)?(?:([$€£¥₹])\s?|(USD|EUR|GBP|JPY|CNY|RMB|INR|CAD|AUD|CHF)\s?)(-)?("
    + _NUM
    + r")(?!\d)"
    + _SCALE
    + r"(?![.,]?\d)"
)
_AMOUNT_POST_RE = re.compile(
    _B
    + r"("
    + _NUM
    + r")"
    + r"\s?(?:USD|EUR|GBP|JPY|CNY|RMB|INR|CAD|AUD|CHF|dollars?|euros?|pounds|cents|yuan|yen|rupees)\b"
)
_UNITS = (
    # measures
    "kg|kgs|g|mg|t|lb|lbs|oz|km|m|cm|mm|mi|ft|mph|kmh|km/h|l|ml|gb|mb|kb|tb|gib|mib|kib|ms|sec|secs|"
    "seconds?|mins?|minutes?|hrs?|hours?|days?|weeks?|months?|years?|nights?|°c|°f|"
    "kilograms?|grams?|pounds?|kilometers?|kilometres?|meters?|metres?|miles?|feet|inches|liters?|litres?|"
    "bytes|tokens?|"
    # countable things that agents book/order/process
    "bags?|baggages?|suitcases?|luggage|pieces?|items?|units?|passengers?|people|persons?|adults?|children|"
    "kids?|infants?|tickets?|seats?|rooms?|guests?|orders?|packages?|boxes|pallets?|users?|"
    "calls?|requests?|files?|rows?|records?|lines?|pages?|points?|stops?|stopovers?|legs?|flights?|"
    "certificates?|vouchers?|cards?|reservations?|bookings?|copies|times"
)
_UNIT_RE = re.compile(
    r"(?<![\w.,$€£¥₹])(" + _NUM + r")(?:(\s?%)|\s?(percent)\b|(\s?(?:" + _UNITS + r"))(?![\w/]))",
    re.IGNORECASE,
)
_PHONE_RE = re.compile(r"(?<![\w+])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[\s.-]\d{4}(?![\w])")
_BIGNUM_RE = re.compile(r"(?<![\w.,$€£¥₹#-])(\d{1,3}(?:,\d{3})+|\d{4,})(?![\w]|[.,]\d)")

_UUID_RE = re.compile(r"(?<![\w-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])")
# ORD-12345, INV-2024-001, HAT-123, AB_12
_DASHED_CODE_RE = re.compile(r"(?<![\w-])[A-Z][A-Z0-9]*(?:[-_][A-Z0-9]+)+(?![\w-])")
# #W2378156, #12345
_HASH_CODE_RE = re.compile(r"(?<![\w#&])#[A-Za-z0-9][A-Za-z0-9_-]{2,}(?![\w])")
# NO6JO3, HAT136, 60RX9E
_UPPER_CODE_RE = re.compile(r"(?<![\w-])[A-Z0-9]{4,}(?![\w-])")
# mia_li_3668, credit_card_4421486, user-12345
_SNAKE_ID_RE = re.compile(r"(?<![\w-])[a-z][a-z0-9]*(?:[_-][a-z0-9]+)+(?![\w-])")
# user12345
_LOWER_ALNUM_ID_RE = re.compile(r"(?<![\w-])[a-z]{2,}\d{3,}[a-z0-9]*(?![\w-])")
# long random tokens: call_oIHazX6yQrB8hUwl4cRilFKj, sk-abc..., hashes
_TOKEN_ID_RE = re.compile(r"(?<![\w-])[A-Za-z0-9][A-Za-z0-9_-]{11,}(?![\w-])")
_HEX_ID_RE = re.compile(r"(?<![\w-])[0-9a-f]{7,64}(?![\w-])")
# letters-only codes announced by a word: "reservation ID: HATHAT", "code ABCXYZ"
_CONTEXT_CODE_RE = re.compile(
    r"\b(?:reservations?|confirmations?|bookings?|orders?|tickets?|codes?|PNR|IDs?|refs?|references?|locators?)"
    r"(?:\s+(?:id|ids|ID|IDs|code|codes|number|numbers|no\.?|is|was|are|were|of|#|\*\*|:)){0,3}[\s:*#]*"
    r"((?:[A-Z0-9]{5,8})(?:(?:,\s*|\s*,?\s*(?:and|or|&)\s+)[A-Z0-9]{5,8}(?![\w-]))*)(?![\w-])",
)
_CONTEXT_CODE_ITEM_RE = re.compile(r"[A-Z0-9]{5,8}")

#: Upper-case alnum tokens that look like codes but are common technical words.
_CODE_STOPWORDS = frozenset(
    [
        "UTF8",
        "UTF16",
        "UTF32",
        "SHA1",
        "SHA224",
        "SHA256",
        "SHA384",
        "SHA512",
        "MD5",
        "ISO8601",
        "ISO9001",
        "MP3",
        "MP4",
        "H264",
        "H265",
        "GPT3",
        "GPT4",
        "GPT4O",
        "GPT35",
        "COVID19",
        "IPV4",
        "IPV6",
        "OAUTH2",
        "HTTP2",
        "HTTP3",
        "X86",
        "X64",
        "ARM64",
        "AMD64",
        "WIN32",
        "WIN64",
        "B2B",
        "B2C",
        "P2P",
        "I18N",
        "L10N",
        "A11Y",
        "K8S",
        "S3",
        "EC2",
        "Y2K",
        "2FA",
        "MFA2",
        "PS4",
        "PS5",
        "4K",
        "8K",
        "1080P",
        "720P",
        "3D",
        "2D",
    ]
)
_UNIT_SUFFIXES = frozenset(
    [
        "ST",
        "ND",
        "RD",
        "TH",
        "AM",
        "PM",
        "K",
        "M",
        "B",
        "KG",
        "KM",
        "MB",
        "GB",
        "KB",
        "TB",
        "MS",
        "PX",
        "PT",
        "HZ",
        "KHZ",
        "MHZ",
        "GHZ",
        "MM",
        "CM",
        "LB",
        "LBS",
        "OZ",
        "MPH",
        "X",
        "D",
        "H",
        "S",
        "W",
        "V",
        "A",
    ]
)
#: Upper-case words (not codes) that the context rule must not take.
_CONTEXT_STOPWORDS = frozenset(
    [
        "THE",
        "AND",
        "FOR",
        "WITH",
        "FROM",
        "THIS",
        "THAT",
        "YOUR",
        "YOURS",
        "HAVE",
        "WILL",
        "BEEN",
        "WERE",
        "THEIR",
        "THERE",
        "WHICH",
        "ABOUT",
        "AFTER",
        "BEFORE",
        "NUMBER",
        "NUMBERS",
        "CODE",
        "CODES",
        "JSON",
        "HTML",
        "HTTP",
        "HTTPS",
        "NONE",
        "NULL",
        "TRUE",
        "FALSE",
        "PLEASE",
        "THANK",
        "THANKS",
        "ERROR",
        "ERRORS",
        "TOTAL",
        "ORDER",
        "ORDERS",
        "BOOKING",
        "DETAILS",
        "STATUS",
        "PENDING",
        "ACTIVE",
        "CANCELLED",
        "CANCELED",
        "CONFIRMED",
        "UNKNOWN",
        "EMPTY",
        "VALID",
        "INVALID",
        "EXAMPLE",
    ]
)

#: JSON keys whose (short, single-token) string values are identifiers/codes.
_ID_KEY_RE = re.compile(
    r"(?:^|_)(?:id|ids|uuid|guid|code|codes|number|no|num|ref|reference|locator|pnr|sku|"
    r"reservation|reservations|confirmation|order|orders|booking|bookings|ticket|tickets|"
    r"invoice|account|last_four|last4)$",
    re.IGNORECASE,
)
#: JSON keys whose numeric values are money.
_AMOUNT_KEY_RE = re.compile(
    r"(?:^|_)(?:amount|amounts|price|prices|cost|costs|fee|fees|total|balance|refund|refunds|paid|"
    r"charge|charges|subtotal|tax|fare|fares|payment|payments)(?:$|_)",
    re.IGNORECASE,
)
_COUNT_KEY_RE = re.compile(r"bag|count|num|seat|quantity|qty|passenger|night|item|pieces", re.IGNORECASE)

# --------------------------------------------------------------------------------------
# normalisation helpers
# --------------------------------------------------------------------------------------


_PLAIN_NUMBER_RE = re.compile(r"(-?)(\d*)(?:\.(\d*))?")


def _canon_number(raw: str) -> str | None:
    """``"1,234.50"`` -> ``"1234.5"``; ``"250.0"`` -> ``"250"``; any length of digits."""
    m = _PLAIN_NUMBER_RE.fullmatch(raw.replace(",", "").strip())
    if m is None or not (m.group(2) or m.group(3)):
        return None
    whole = m.group(2).lstrip("0") or "0"
    frac = (m.group(3) or "").rstrip("0")
    out = whole + ("." + frac if frac else "")
    return ("-" + out) if m.group(1) and out != "0" else out


_SCALES = {
    "k": 1_000,
    "K": 1_000,
    "thousand": 1_000,
    "M": 1_000_000,
    "million": 1_000_000,
    "bn": 1_000_000_000,
    "billion": 1_000_000_000,
}


def _valid_day(month: int, day: int) -> bool:
    return 1 <= month <= 12 and 1 <= day <= 31


def _date_norm(year: int | None, month: int, day: int | None) -> str:
    if day is None:
        return f"{year:04d}-{month:02d}"
    if year is None:
        return f"--{month:02d}-{day:02d}"
    return f"{year:04d}-{month:02d}-{day:02d}"


def _year4(y: str) -> int:
    n = int(y)
    if len(y) == 2:
        n += 2000 if n < 70 else 1900
    return n


def _time_norm(hour: int, minute: int, ampm: str | None) -> str | None:
    if ampm:
        if not 1 <= hour <= 12:
            return None
        if ampm.lower() == "p" and hour != 12:
            hour += 12
        elif ampm.lower() == "a" and hour == 12:
            hour = 0
    if not (0 <= hour <= 24 and 0 <= minute <= 59):
        return None
    return f"{hour:02d}:{minute:02d}"


def _strip_trailing_punct(s: str) -> str:
    # balance brackets: keep a closing bracket only if it has an opener inside
    while s:
        last = s[-1]
        if last in ".,;:!?'\"`*_":
            s = s[:-1]
            continue
        if last in ")]}>":
            opener = {")": "(", "]": "[", "}": "{", ">": "<"}[last]
            if s.count(opener) < s.count(last):
                s = s[:-1]
                continue
        break
    return s


# --------------------------------------------------------------------------------------
# the scanner: patterns in priority order, accepted spans mask later patterns
# --------------------------------------------------------------------------------------

_Match = tuple[int, int, Fact]
_DIGIT = re.compile(r"\d")
_UPPER = re.compile(r"[A-Z]")
_LOWER = re.compile(r"[a-z]")
_HEXLETTER = re.compile(r"[a-f]")
_SPACE = re.compile(r"\s")
_ALNUM = re.compile(r"[A-Za-z0-9]")


class _Scanner:
    """Finds facts in one string. Matches are accepted in pattern priority order;
    an accepted span hides the text under it from lower-priority patterns."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._starts: list[int] = []  # accepted spans, sorted, never overlapping
        self._ends: list[int] = []
        self.found: list[_Match] = []

    def _free(self, start: int, end: int) -> bool:
        i = bisect.bisect_right(self._starts, start)
        if i > 0 and self._ends[i - 1] > start:
            return False
        return not (i < len(self._starts) and self._starts[i] < end)

    def add(self, start: int, end: int, kind: str, text: str, norm: str | None = None) -> bool:
        if not text or end <= start or not self._free(start, end):
            return False
        i = bisect.bisect_right(self._starts, start)
        self._starts.insert(i, start)
        self._ends.insert(i, end)
        self.found.append((start, end, Fact(kind, text, norm)))
        return True

    def scan(self) -> list[_Match]:
        t = self.text
        if not t or not t.strip():
            return []
        self._urls(t)
        self._emails(t)
        self._paths(t)
        self._uuids(t)
        self._dates(t)
        self._times(t)
        self._amounts(t)
        self._phones(t)
        self._units(t)
        self._codes(t)
        self._ids(t)
        self._bignums(t)
        self.found.sort(key=lambda m: m[0])
        return self.found

    # ---- individual kinds -------------------------------------------------------------

    def _urls(self, t: str) -> None:
        if "://" not in t and "www." not in t.lower():
            return
        for m in _URL_RE.finditer(t):
            s = _strip_trailing_punct(m.group(0))
            if len(s) > 10 or ("." in s and len(s) > 6):
                self.add(m.start(), m.start() + len(s), "url", s, s.rstrip("/"))

    def _emails(self, t: str) -> None:
        if "@" not in t:
            return
        for m in _EMAIL_RE.finditer(t):
            self.add(m.start(), m.end(), "email", m.group(0), m.group(0).lower())

    def _paths(self, t: str) -> None:
        if ":" in t or "\\" in t:
            for m in _WIN_PATH_RE.finditer(t):
                s = _strip_trailing_punct(m.group(0))
                if len(s) >= 4:
                    self.add(m.start(), m.start() + len(s), "path", s, s)
        if "/" not in t:
            return
        for m in _UNIX_PATH_RE.finditer(t):
            s = _strip_trailing_punct(m.group(0))
            body = s.lstrip("~.")
            segments = [p for p in body.split("/") if p]
            has_ext = bool(re.search(r"\.[A-Za-z][A-Za-z0-9]{0,7}$", segments[-1])) if segments else False
            if not segments:
                continue
            if s.startswith(("./", "../", "~/")) or len(segments) >= 2 or has_ext:
                # "/24" or "/s" alone are not paths
                if len(segments) == 1 and not has_ext and not s.startswith(("./", "../", "~/")):
                    continue
                if all(seg.isdigit() for seg in segments):
                    continue
                self.add(m.start(), m.start() + len(s), "path", s, s)
        for m in _REL_PATH_RE.finditer(t):
            s = _strip_trailing_punct(m.group(0))
            self.add(m.start(), m.start() + len(s), "path", s, s)

    def _uuids(self, t: str) -> None:
        if "-" not in t:
            return
        for m in _UUID_RE.finditer(t):
            self.add(m.start(), m.end(), "id", m.group(0), m.group(0).lower())

    def _dates(self, t: str) -> None:
        if not _DIGIT.search(t):
            return
        for m in _ISO_DT_RE.finditer(t):
            self.add(m.start(), m.end(), "date", m.group(0), m.group(0))
        for m in _ISO_DATE_RE.finditer(t):
            y, mo, d = int(m.group(1)), int(m.group(3)), int(m.group(4))
            if 1000 <= y <= 2999 and _valid_day(mo, d):
                self.add(m.start(), m.end(), "date", m.group(0), _date_norm(y, mo, d))
        for m in _NUM_DATE_RE.finditer(t):
            a, b, y = int(m.group(1)), int(m.group(3)), _year4(m.group(4))
            if m.group(2) == "-" and len(m.group(4)) == 2:
                continue  # 12-34-56 is more likely a code or phone fragment
            if a > 12 and _valid_day(b, a):
                norm = _date_norm(y, b, a)  # day first
            elif b > 12 and _valid_day(a, b):
                norm = _date_norm(y, a, b)  # month first (US)
            elif _valid_day(a, b):
                norm = None  # ambiguous: keep only the surface form
            else:
                continue
            self.add(m.start(), m.end(), "date", m.group(0), norm)
        for m in _MDY_RE.finditer(t):
            mo = _MONTHS[m.group(1).lower().rstrip(".")]
            d = int(m.group(2))
            y = int(m.group(3)) if m.group(3) else None
            if _valid_day(mo, d):
                self.add(m.start(), m.end(), "date", m.group(0), _date_norm(y, mo, d))
        for m in _DMY_RE.finditer(t):
            mo = _MONTHS[m.group(2).lower().rstrip(".")]
            d = int(m.group(1))
            y = int(m.group(3)) if m.group(3) else None
            if _valid_day(mo, d):
                self.add(m.start(), m.end(), "date", m.group(0), _date_norm(y, mo, d))
        for m in _CJK_DATE_RE.finditer(t):
            y, mo = int(m.group(1)), int(m.group(2))
            d = int(m.group(3)) if m.group(3) else None
            if _valid_day(mo, d or 1):
                self.add(m.start(), m.end(), "date", m.group(0), _date_norm(y, mo, d))
        for m in _MONTH_YEAR_RE.finditer(t):
            mo = _MONTHS[m.group(1).lower().rstrip(".")]
            y = int(m.group(2))
            if 1000 <= y <= 2999:
                self.add(m.start(), m.end(), "date", m.group(0), _date_norm(y, mo, None))

    def _times(self, t: str) -> None:
        if ":" in t:
            for m in _TIME_RE.finditer(t):
                norm = _time_norm(int(m.group(1)), int(m.group(2)), m.group(4))
                if norm is not None:
                    self.add(m.start(), m.end(), "time", m.group(0), norm)
        for m in _AMPM_RE.finditer(t):
            norm = _time_norm(int(m.group(1)), 0, m.group(2))
            if norm is not None:
                self.add(m.start(), m.end(), "time", m.group(0).rstrip("."), norm)

    def _amounts(self, t: str) -> None:
        for m in _AMOUNT_PRE_RE.finditer(t):
            raw = m.group(5)
            value = _canon_number(raw)
            if value is None:
                continue
            text = m.group(0)
            scale = re.search(r"(k|K|M|bn|million|billion|thousand)$", text.strip())
            if scale:
                try:
                    value = _canon_number(format(Decimal(raw.replace(",", "")) * _SCALES[scale.group(1)], "f"))
                except (InvalidOperation, KeyError):  # pragma: no cover - defensive
                    pass
            if m.group(1) or m.group(4):
                value = "-" + value if value else value
            self.add(m.start(), m.end(), "amount", text, value)
        for m in _AMOUNT_POST_RE.finditer(t):
            value = _canon_number(m.group(1))
            if value is not None:
                self.add(m.start(), m.end(), "amount", m.group(0), value)

    def _phones(self, t: str) -> None:
        for m in _PHONE_RE.finditer(t):
            digits = re.sub(r"\D", "", m.group(0))
            if 10 <= len(digits) <= 15:
                self.add(m.start(), m.end(), "number", m.group(0), digits)

    def _units(self, t: str) -> None:
        for m in _UNIT_RE.finditer(t):
            value = _canon_number(m.group(1))
            if value is None:
                continue
            if m.group(2) is not None or m.group(3) is not None:
                self.add(m.start(), m.end(), "number", m.group(0), f"{value}%")
                continue
            else:
                unit = m.group(4).strip().lower()
                unit = _singular_unit(unit)
            self.add(m.start(), m.end(), "number", m.group(0), f"{value} {unit}")

    def _codes(self, t: str) -> None:
        if "#" in t:
            for m in _HASH_CODE_RE.finditer(t):
                body = m.group(0)[1:]
                if _DIGIT.search(body):
                    self.add(m.start(), m.end(), "code", m.group(0), body.upper())
        for m in _DASHED_CODE_RE.finditer(t):
            s = m.group(0)
            if _DIGIT.search(s) and _UPPER.search(s) and len(s) >= 4:
                self.add(m.start(), m.end(), "code", s, s)
        for m in _UPPER_CODE_RE.finditer(t):
            s = m.group(0)
            if _looks_like_code(s):
                self.add(m.start(), m.end(), "code", s, s)
        for m in _CONTEXT_CODE_RE.finditer(t):
            base = m.start(1)
            for item in _CONTEXT_CODE_ITEM_RE.finditer(m.group(1)):
                s = item.group(0)
                if s in _CONTEXT_STOPWORDS or s.isdigit():
                    continue
                if not _UPPER.search(s):
                    continue
                self.add(base + item.start(), base + item.end(), "code", s, s)

    def _ids(self, t: str) -> None:
        for m in _SNAKE_ID_RE.finditer(t):
            s = m.group(0)
            if sum(c.isdigit() for c in s) >= 3 and _LOWER.search(s):
                self.add(m.start(), m.end(), "id", s, s)
        for m in _LOWER_ALNUM_ID_RE.finditer(t):
            s = m.group(0)
            if s.upper() not in _CODE_STOPWORDS:
                self.add(m.start(), m.end(), "id", s, s)
        for m in _TOKEN_ID_RE.finditer(t):
            s = m.group(0)
            if _DIGIT.search(s) and _LOWER.search(s) and _UPPER.search(s) and sum(c.isdigit() for c in s) >= 2:
                self.add(m.start(), m.end(), "id", s, s)
        for m in _HEX_ID_RE.finditer(t):
            s = m.group(0)
            if _DIGIT.search(s) and _HEXLETTER.search(s) and sum(c.isdigit() for c in s) >= 3:
                self.add(m.start(), m.end(), "id", s, s)

    def _bignums(self, t: str) -> None:
        for m in _BIGNUM_RE.finditer(t):
            s = m.group(0)
            digits = s.replace(",", "")
            if len(digits) == 4 and "," not in s and 1900 <= int(digits) <= 2099:
                continue  # a year on its own
            self.add(m.start(), m.end(), "number", s, digits.lstrip("0") or "0")


def _singular_unit(unit: str) -> str:
    unit = re.sub(r"\s+", "", unit)
    irregular = {
        "people": "person",
        "children": "child",
        "feet": "ft",
        "inches": "in",
        "lbs": "lb",
        "kgs": "kg",
        "secs": "sec",
        "mins": "min",
        "hrs": "hr",
        "boxes": "box",
        "copies": "copy",
        "luggage": "bag",
        "baggage": "bag",
        "baggages": "bag",
        "suitcases": "bag",
        "suitcase": "bag",
        "bags": "bag",
    }
    if unit in irregular:
        return irregular[unit]
    if len(unit) > 3 and unit.endswith("s") and not unit.endswith("ss"):
        return unit[:-1]
    return unit


def _looks_like_code(s: str) -> bool:
    if s in _CODE_STOPWORDS:
        return False
    if not _DIGIT.search(s) or not _UPPER.search(s):
        return False
    m = re.fullmatch(r"(\d+)([A-Z]+)", s)
    return not (m and (m.group(2) in _UNIT_SUFFIXES or len(m.group(2)) <= 1))


# --------------------------------------------------------------------------------------
# message walking
# --------------------------------------------------------------------------------------


def _content_text(content: Any) -> str:
    """Text of a message ``content``: a string, ``None`` or a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif isinstance(part.get("content"), str):
                    parts.append(part["content"])
        return "\n".join(parts)
    return str(content)


def _parse_json(text: str) -> Any:
    s = text.strip()
    if not s or s[0] not in "[{" or s[-1] not in "]}":
        return None
    try:
        return json.loads(s)
    except (ValueError, RecursionError):
        return None


def _pair_tool_calls(messages: Sequence[Mapping[str, Any]]) -> tuple[dict[tuple[int, int], int], set[int]]:
    """Pair each tool call with its result, by position.

    Returns ``(pairs, orphans)``: ``pairs[(assistant_index, call_index)] = tool_index``
    for answered calls, and the indices of ``tool`` messages that answer nothing.
    Results are looked for in the run of ``tool`` messages directly after the
    assistant message; inside that run a result goes to the first unanswered
    call with its ``tool_call_id``, else to the first unanswered call (real
    traces reuse ids across turns, so ids are only trusted within one turn).
    """
    pairs: dict[tuple[int, int], int] = {}
    orphans: set[int] = set()
    n = len(messages)
    i = 0
    while i < n:
        msg = messages[i]
        role = msg.get("role") if isinstance(msg, Mapping) else None
        calls = msg.get("tool_calls") if isinstance(msg, Mapping) else None
        if role == "assistant" and calls:
            ids = [(c.get("id") if isinstance(c, Mapping) else None) for c in calls]
            open_calls = list(range(len(calls)))
            j = i + 1
            while j < n and isinstance(messages[j], Mapping) and messages[j].get("role") == "tool":
                tid = messages[j].get("tool_call_id")
                target = next((k for k in open_calls if tid is not None and ids[k] == tid), None)
                if target is None and open_calls:
                    target = open_calls[0]
                if target is None:
                    orphans.add(j)
                else:
                    open_calls.remove(target)
                    pairs[(i, target)] = j
                j += 1
            i = j
            continue
        if role == "tool":
            orphans.add(i)
        i += 1
    return pairs, orphans


class _Collector:
    def __init__(self) -> None:
        self.facts: list[Fact] = []
        self._keys: set[tuple[str, str]] = set()
        self._texts: set[str] = set()

    def add(self, fact: Fact) -> None:
        if fact.key in self._keys or fact.text in self._texts:
            return
        self._keys.add(fact.key)
        self._texts.add(fact.text)
        self.facts.append(fact)

    def text(self, s: str) -> None:
        if not s:
            return
        data = _parse_json(s) if s.lstrip()[:1] in ("{", "[") else None
        if data is not None and isinstance(data, (dict, list)):
            self.json(data, None, None)
            return
        if FACT_LIST_HEADER in s:
            # a "Key facts:" block written by format_fact_list: read it back with its kinds
            pos = 0
            for m in _FACT_BLOCK_RE.finditer(s):
                self._scan(s[pos : m.start()])
                for fact in _parse_fact_block(m.group(1)):
                    self.add(fact)
                pos = m.end()
            self._scan(s[pos:])
            return
        self._scan(s)

    def _scan(self, s: str) -> None:
        if s:
            for _, _, fact in _Scanner(s).scan():
                self.add(fact)

    def json(self, value: Any, key: str | None, parent: str | None, depth: int = 0) -> None:
        if depth > 50:
            return
        if isinstance(value, Mapping):
            for k, v in value.items():
                ks = str(k)
                # keys can be ids themselves ({"credit_card_4421486": {...}})
                for _, _, fact in _Scanner(ks).scan():
                    self.add(fact)
                self.json(v, ks, key, depth + 1)
        elif isinstance(value, list):
            for v in value:
                self.json(v, key, parent, depth + 1)
        elif isinstance(value, bool) or value is None:
            return
        elif isinstance(value, (int, float)):
            self._json_number(value, key, parent)
        elif isinstance(value, str):
            self._json_string(value, key)

    def _json_string(self, value: str, key: str | None) -> None:
        v = value.strip()
        if (
            key
            and _ID_KEY_RE.search(key)
            and 3 <= len(v) <= 64
            and not _SPACE.search(v)
            and _ALNUM.search(v)
            and not _is_plain_word(v)
        ):
            if re.fullmatch(r"#?[A-Z0-9][A-Z0-9_-]*", v) and _UPPER.search(v):
                self.add(Fact("code", v, v.lstrip("#").upper()))
            else:
                scanned = _Scanner(v).scan()
                if len(scanned) == 1 and scanned[0][0] == 0 and scanned[0][1] == len(v):
                    self.add(scanned[0][2])
                elif not scanned:
                    self.add(Fact("id", v, v))
        self.text(value)

    def _json_number(self, value: float, key: str | None, parent: str | None) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            return
        text = json.dumps(value)
        norm = _canon_number(text) or text
        keys = [k for k in (key, parent) if k]
        if any(_AMOUNT_KEY_RE.search(k) for k in keys) and not (key and _COUNT_KEY_RE.search(key)):
            self.add(Fact("amount", text, norm))
        elif key and _ID_KEY_RE.search(key) and isinstance(value, int) and abs(value) >= 100:
            self.add(Fact("id", text, norm))
        elif isinstance(value, int) and abs(value) >= 10000:
            self.add(Fact("number", text, norm))


_FACT_BLOCK_RE = re.compile(re.escape(FACT_LIST_HEADER) + r"([^\n]*)")
_LABEL_KIND = {label: kind for kind, label in _KIND_LABELS.items()}


def _parse_fact_block(block: str) -> list[Fact]:
    """Facts of a rendered block ``ids: a, b; codes: C1; amounts: 250`` (after the header)."""
    out: list[Fact] = []
    for group in block.split("; "):
        label, sep, items = group.partition(":")
        kind = _LABEL_KIND.get(label.strip().lower())
        if not sep or kind is None:
            out.extend(extract_facts(group))
            continue
        merged: list[str] = []
        for p in (p.strip() for p in items.split(", ")):
            if merged and kind == "date" and re.fullmatch(r"\d{4}", p):
                merged[-1] += ", " + p  # "May 15, 2024" was split at its comma
            elif p:
                merged.append(p)
        for p in merged:
            found = extract_facts(p)
            if len(found) == 1 and found[0].text == p and found[0].kind == kind:
                out.append(found[0])
            elif kind == "amount":
                out.append(Fact(kind, p, _canon_number(p.lstrip("-$€£¥₹ ")) or p))
            else:
                out.append(Fact(kind, p, found[0].normalized if len(found) == 1 and found[0].text == p else p))
    return out


def _is_plain_word(v: str) -> bool:
    """A lower-case or capitalised dictionary-like word ("available", "Business")."""
    return bool(re.fullmatch(r"[A-Za-z][a-z]+", v))


def _iter_messages(messages: Iterable[Any]) -> Iterator[Mapping[str, Any]]:
    for m in messages:
        if isinstance(m, Mapping):
            yield m


def extract_facts(messages_or_text: str | Sequence[Mapping[str, Any]] | None) -> list[Fact]:
    """Extract the key facts of a message span (or of a string).

    From messages it reads every ``content`` (strings or lists of text parts),
    the arguments of each tool call (JSON is parsed and walked, so values under
    id-like keys such as ``"reservation_id"`` and money-like keys such as
    ``"price"`` are recognised), and tool results (JSON results are walked the
    same way). Tool calls whose result is not among ``messages`` (pending work)
    contribute their call id as an ``id`` fact.

    Returns facts de-duplicated by :attr:`Fact.key` and by surface text, in order
    of first appearance.
    """
    col = _Collector()
    if messages_or_text is None:
        return []
    if isinstance(messages_or_text, str):
        col.text(messages_or_text)
        return col.facts
    if isinstance(messages_or_text, Mapping):
        messages_or_text = [messages_or_text]
    msgs = list(_iter_messages(messages_or_text))
    pairs, _ = _pair_tool_calls(msgs)
    for i, msg in enumerate(msgs):
        col.text(_content_text(msg.get("content")))
        for ci, call in enumerate(msg.get("tool_calls") or []):
            if not isinstance(call, Mapping):
                continue
            fn = call.get("function") or {}
            args = fn.get("arguments") if isinstance(fn, Mapping) else None
            if isinstance(args, (dict, list)):
                col.json(args, None, None)
            elif isinstance(args, str):
                col.text(args)
            if msg.get("role") == "assistant" and (i, ci) not in pairs:
                cid = call.get("id")
                if isinstance(cid, str) and cid:
                    col.add(Fact("id", cid, cid))
    return col.facts


# --------------------------------------------------------------------------------------
# presence checks
# --------------------------------------------------------------------------------------

_SURFACE_CACHE: dict[str, re.Pattern[str]] = {}


def _surface_re(text: str) -> re.Pattern[str]:
    pat = _SURFACE_CACHE.get(text)
    if pat is None:
        left = r"(?<![A-Za-z0-9])" if text[:1].isalnum() else ""
        right = r"(?![A-Za-z0-9])" if text[-1:].isalnum() else ""
        if text[-1:].isdigit():
            right = r"(?![A-Za-z0-9]|[.,]\d)"
        if text[:1].isdigit():
            left = r"(?<![A-Za-z0-9])(?<!\d[.,])"
        pat = re.compile(left + re.escape(text) + right)
        if len(_SURFACE_CACHE) > 20000:
            _SURFACE_CACHE.clear()
        _SURFACE_CACHE[text] = pat
    return pat


_BARE_NUMBER_RE = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w]|[.,]\d)")


_SCALE_WORD_RE = re.compile(r"\d\s?(?:k|K|M|bn|million|billion|thousand)\b")


class _TextIndex:
    """Answers "does this text carry that fact?" for many facts against one text.

    The surface string is looked for first (on token boundaries); normalized
    forms need a scan of the text, which is done lazily, once, and only for a
    fact whose tell-tale digits/letters appear in the text at all.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._lower: str | None = None
        self._flat: str | None = None
        self._forms: set[tuple[str, str]] | None = None
        self._numbers: set[str] | None = None

    @property
    def lower(self) -> str:
        if self._lower is None:
            self._lower = self.text.lower()
        return self._lower

    @property
    def flat(self) -> str:
        if self._flat is None:
            self._flat = self.text.replace(",", "")
        return self._flat

    @property
    def forms(self) -> set[tuple[str, str]]:
        if self._forms is None:
            forms: set[tuple[str, str]] = set()
            for _, _, f in _Scanner(self.text).scan():
                forms.add(f.key)
                if f.kind == "date" and f.normalized and len(f.normalized) >= 10 and f.normalized[4] == "-":
                    forms.add(("date", "--" + f.normalized[5:10]))  # month-day
                    forms.add(("date", f.normalized[:10]))
                if f.kind == "code" and f.normalized:
                    forms.add(("code", f.normalized.upper()))
            self._forms = forms
        return self._forms

    @property
    def numbers(self) -> set[str]:
        if self._numbers is None:
            numbers: set[str] = set()
            for m in _BARE_NUMBER_RE.finditer(self.text):
                n = _canon_number(m.group(0).lstrip("-"))
                if n is not None:
                    numbers.add(n)
                    if m.group(0).startswith("-"):
                        numbers.add("-" + n)
            self._numbers = numbers
        return self._numbers

    def contains(self, fact: Fact) -> bool:
        t = fact.text
        if t in self.text and _surface_re(t).search(self.text):
            return True
        n = fact.normalized
        if not n:
            return False
        kind = fact.kind
        if kind in ("id", "email", "url", "path"):
            nl = n.lower()
            return nl in self.lower and _surface_re(nl).search(self.lower) is not None
        if kind == "code":
            if n.lower() not in self.lower:
                return False
            return _surface_re(n).search(self.text) is not None or fact.key in self.forms
        if kind == "amount":
            whole = n.lstrip("-").split(".")[0]
            if whole not in self.flat and not _SCALE_WORD_RE.search(self.text):
                return False
            return n in self.numbers or fact.key in self.forms
        if kind == "number":
            if n.isdigit():
                if n[-4:] not in self.flat:
                    return False
                return n in self.numbers or fact.key in self.forms
            whole = n.split(" ")[0].rstrip("%").split(".")[0]
            if whole not in self.flat:
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
    before :meth:`_TextIndex.contains`. An empty tuple means "always check"."""
    n = fact.normalized
    kind = fact.kind
    if not n:
        return (fact.text.lower().replace(",", ""),)
    try:
        if kind in ("id", "email", "url", "path", "code"):
            return (n.lower().replace(",", ""),)
        if kind == "amount":
            whole = n.lstrip("-").split(".")[0]
            return (whole,) if not any(c in fact.text for c in "kKMmbBt") else ()
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


class _Matcher:
    """Which of many facts a text carries (used for many texts against one ledger)."""

    def __init__(self, facts: Iterable[Fact]) -> None:
        self.facts = list(facts)
        self.by_anchor: dict[str, list[int]] = {}
        self.always: list[int] = []
        for i, f in enumerate(self.facts):
            anchors = _anchors(f)
            if not anchors:
                self.always.append(i)
            for a in anchors:
                self.by_anchor.setdefault(a, []).append(i)

    def present(self, text: str) -> list[Fact]:
        if not text or not self.facts:
            return []
        hay = text.lower().replace(",", "")
        candidates = set(self.always)
        for anchor, idxs in self.by_anchor.items():
            if anchor in hay:
                candidates.update(idxs)
        if not candidates:
            return []
        index = _TextIndex(text)
        return [self.facts[i] for i in sorted(candidates) if index.contains(self.facts[i])]


def fact_in_text(fact: Fact, text: str) -> bool:
    """Whether ``text`` still carries ``fact`` (its surface string, or its normalized
    form: ``$1,234.50`` is found as ``1234.5``, ``May 20th`` in ``2024-05-20``)."""
    return _TextIndex(text or "").contains(fact)


def facts_missing_from(facts: Iterable[Fact], text: str) -> list[Fact]:
    """The facts whose surface string (or normalized form) does not appear in ``text``.

    Surface strings match on token boundaries: ``HAT13`` is not found inside
    ``HAT136``, nor ``25`` inside ``250``. Order of ``facts`` is kept.
    """
    facts = list(facts)
    present = {id(f) for f in _Matcher(facts).present(text or "")}
    return [f for f in facts if id(f) not in present]


# --------------------------------------------------------------------------------------
# rendering
# --------------------------------------------------------------------------------------


def _render_fact_list(groups: list[tuple[str, list[Fact]]]) -> str:
    parts = [f"{_KIND_LABELS[kind]}: {', '.join(f.text for f in items)}" for kind, items in groups if items]
    if not parts:
        return ""
    return FACT_LIST_HEADER + " " + "; ".join(parts)


def format_fact_list(
    facts: Iterable[Fact],
    max_tokens: int,
    count_tokens: Callable[[str], int],
) -> str:
    """Render facts as one compact block that fits ``max_tokens``.

    Example: ``Key facts: ids: mia_li_3668; codes: NO6JO3, HAT136; amounts: $1,234``.

    Facts are grouped by kind in :data:`KIND_PRIORITY` order (ids, codes, paths,
    urls, emails, amounts, dates, times, numbers), each group in order of first
    appearance, duplicates removed. If the block is over budget, facts are
    dropped from the lowest-priority kind first, the last-added fact of that kind
    first, until it fits (checked with ``count_tokens``). Returns ``""`` when no
    fact fits or there is none.
    """
    seen: set[tuple[str, str]] = set()
    by_kind: dict[str, list[Fact]] = {k: [] for k in KIND_PRIORITY}
    for f in facts:
        if f.key in seen or f.kind not in by_kind:
            continue
        seen.add(f.key)
        by_kind[f.kind].append(f)
    order = [f for k in KIND_PRIORITY for f in by_kind[k]]  # keep order: drop from the end
    if not order or max_tokens <= 0:
        return ""

    def render(n: int) -> str:
        kept = order[:n]
        groups: dict[str, list[Fact]] = {k: [] for k in KIND_PRIORITY}
        for f in kept:
            groups[f.kind].append(f)
        return _render_fact_list([(k, groups[k]) for k in KIND_PRIORITY])

    full = render(len(order))
    if count_tokens(full) <= max_tokens:
        return full
    # binary search the largest prefix (in drop order) that fits, then verify
    lo, hi = 0, len(order) - 1  # render(lo) fits (empty), render(hi+1) does not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(render(mid)) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    n = lo
    while n > 0 and count_tokens(render(n)) > max_tokens:
        n -= 1
    return render(n) if n > 0 else ""
