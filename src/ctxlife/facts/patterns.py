"""What a fact looks like: a table of (kind, regex, normaliser), in priority order.

:data:`PATTERNS` is read top to bottom by the scanner (:mod:`ctxlife.facts.scanner`): a span
accepted by an earlier row hides that text from later rows, so a URL is never also read as a path,
nor a date as a number. Each normaliser turns one regex match into zero or more :data:`Hit` tuples
``(start, end, text, normalized)``: zero when the match is not a fact after all (``"/24"`` is not a
path), more than one when a match lists several (``"reservations ABC123 and DEF456"``).

The vocabulary the regexes use (month names, units, stopwords) is in :mod:`ctxlife.facts.vocabulary`,
the canonical forms in :mod:`ctxlife.facts.normalise`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from ctxlife.facts.normalise import (
    canonical_date,
    canonical_number,
    canonical_time,
    four_digit_year,
    is_valid_day,
    looks_like_code,
    singular_unit,
    strip_trailing_punctuation,
)
from ctxlife.facts.vocabulary import (
    CJK_NAME_CUES,
    CODE_ANNOUNCING_FILLERS,
    CODE_ANNOUNCING_WORDS,
    CODE_STOPWORDS,
    CONTEXT_STOPWORDS,
    CURRENCY_CODES,
    CURRENCY_SYMBOLS,
    CURRENCY_WORDS,
    MONTH_NAME,
    MONTH_NUMBERS,
    NAME_CUES,
    NAME_TITLES,
    NOT_NAME_WORDS,
    SCALE_FACTORS,
    SCALE_WORDS,
    SIGNATURE_CLOSINGS,
    UNITS,
)
from ctxlife.messages import CJK, CJK_PUNCTUATION

#: One fact found by a normaliser: ``(start, end, text, normalized)``. ``[start, end)`` is the
#: span hidden from later patterns; ``text`` the fact's surface string (usually the whole span).
Hit = tuple[int, int, str, str | None]
Normaliser = Callable[[re.Match[str]], list[Hit]]


@dataclass(frozen=True, slots=True)
class FactPattern:
    """One row of the table: matches of ``regex`` are facts of ``kind`` as ``normalise`` reads them.

    ``applies`` is a cheap check on the whole text (a character every match needs) that skips the
    regex when it cannot match; ``None`` means always run it.
    """

    kind: str
    regex: re.Pattern[str]
    normalise: Normaliser
    applies: Callable[[str], bool] | None = None


def _group_end(source: str, start: int) -> int:
    """Index of the ``)`` closing the group that opens at ``source[start]``."""
    depth = 0
    i = start
    while i < len(source):
        c = source[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = _class_end(source, i) + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"unbalanced group in {source!r}")


def _class_end(source: str, start: int) -> int:
    """Index of the ``]`` closing the character class that opens at ``source[start]``."""
    i = start + 1
    if i < len(source) and source[i] == "^":
        i += 1
    if i < len(source) and source[i] == "]":
        i += 1
    while i < len(source):
        if source[i] == "\\":
            i += 2
            continue
        if source[i] == "]":
            return i
        i += 1
    raise ValueError(f"unbalanced character class in {source!r}")


#: A word character of a script that separates words with spaces (Latin, Greek, Cyrillic, Armenian,
#: Hebrew, Arabic, Devanagari): a positive class, as fast to test as ``\\w``.
_LATIN_WORD = (
    "[0-9A-Za-z_\u00aa\u00b5\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02af\u0370-\u03ff\u0400-\u052f"
    "\u0530-\u058f\u0590-\u05ff\u0600-\u06ff\u0900-\u097f\u1e00-\u1fff]"
)


def _pieces(source: str, *, lookarounds: bool) -> Iterator[tuple[str, str]]:
    """A regex source as ``(kind, text)`` pieces: ``"look"`` (a whole lookaround group, when
    ``lookarounds``), ``"class"`` (``[...]``), ``"escape"`` (``\\x``) or ``"char"``."""
    i = 0
    while i < len(source):
        if lookarounds and source.startswith(("(?<!", "(?!", "(?<=", "(?="), i):
            end = _group_end(source, i)
            yield "look", source[i : end + 1]
        elif source[i] == "\\":
            end = i + 1
            yield "escape", source[i : end + 1]
        elif source[i] == "[":
            end = _class_end(source, i)
            yield "class", source[i : end + 1]
        else:
            end = i
            yield "char", source[i]
        i = end + 1


def _widen(group: str) -> str:
    """A lookaround ``group`` in which ``\\w`` stands for a word character that is not CJK."""
    head = "(?<!" if group.startswith("(?<!") else "(?!" if group.startswith("(?!") else ""
    body = group[len(head) : -1] if head else ""
    if head and body.startswith("[") and not body.startswith("[^") and _class_end(body, 0) == len(body) - 1:
        # (?<![\w.-]) -> (?<![0-9A-Za-z...])(?<![.-]): two single-class checks, as fast as the original
        inner = body[1:-1]
        if "\\w" not in inner:
            return group
        rest = inner.replace("\\w", "")
        return f"{head}{_LATIN_WORD})" + (f"{head}[{rest}])" if rest else "")
    out: list[str] = []
    for kind, text in _pieces(group, lookarounds=False):
        if kind == "escape" and text == "\\w":
            text = _LATIN_WORD
        elif kind == "class" and "\\w" in text and not text.startswith("[^"):
            rest = text[1:-1].replace("\\w", "")
            text = f"(?:{_LATIN_WORD}|[{rest}])" if rest else _LATIN_WORD
        out.append(text)
    return "".join(out)


def cjk_aware(source: str) -> str:
    """``source`` with its word boundaries made to hold next to CJK text.

    ``\\w`` (and so ``\\b``) matches Han, kana and hangul, so ``(?<![\\w-])BX4471`` never matches in
    ``预订BX4471改期``. In every lookaround, ``\\w`` is narrowed to the word characters of scripts
    that separate words with spaces, and ``\\b`` becomes "not after / not before" such a character
    (every ``\\b`` of the table opens or closes a word). Latin, Cyrillic, Greek ... words keep their
    boundaries, and the bodies of patterns are left alone (a path may have Chinese folder names).
    """
    out: list[str] = []
    previous = ""
    for kind, text in _pieces(source, lookarounds=True):
        if kind == "look":
            text = _widen(text)
        elif kind == "escape" and text == "\\b":
            # at the start of a word: not after a Latin word character; at its end: not before one
            text = f"(?<!{_LATIN_WORD})" if previous in ("", "(", "|", ":") else f"(?!{_LATIN_WORD})"
        out.append(text)
        previous = text[-1:] if kind == "char" else "x"
    return "".join(out)


def compile_cjk_aware(source: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(cjk_aware(source), flags)``."""
    return re.compile(cjk_aware(source), flags)


_DIGIT_RE = re.compile(r"\d")
_UPPER_RE = re.compile(r"[A-Z]")
_LOWER_RE = re.compile(r"[a-z]")
_HEX_LETTER_RE = re.compile(r"[a-f]")
_EXTENSION_RE = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_TRAILING_SCALE_RE = re.compile(r"(" + SCALE_WORDS + r")$")
_NOT_AFTER_WORD = r"(?<![\w])"
_NOT_BEFORE_WORD = r"(?![\w])"
#: A number with optional thousands separators and decimals: ``1,234.50``, ``8123``.
NUMBER = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"


def _whole(m: re.Match[str], normalized: str | None) -> list[Hit]:
    return [(m.start(), m.end(), m.group(0), normalized)]


def _stripped(m: re.Match[str]) -> str:
    return strip_trailing_punctuation(m.group(0))


# ---- urls, emails, paths ------------------------------------------------------------------------

URL_RE = compile_cjk_aware(
    r"(?:\b(?:https?|ftp|file|s3|gs)://|\bwww\.)[^\s<>\"'`" + CJK + CJK_PUNCTUATION + r"]+", re.IGNORECASE
)
EMAIL_RE = compile_cjk_aware(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
WINDOWS_PATH_RE = compile_cjk_aware(
    r"(?<![\w])(?:[A-Za-z]:[\\/]|\\\\[\w.$-]+\\)(?:[^\\/\s:*?\"<>|,;]+[\\/])*[^\\/\s:*?\"<>|,;]*"
)
UNIX_PATH_RE = compile_cjk_aware(r"(?<![\w:/.~\\-])(?:~|\.{1,2})?/(?:[\w.@+-]+/)*[\w.@+-]+/?")
RELATIVE_PATH_RE = compile_cjk_aware(r"(?<![\w/.:\\-])[A-Za-z_][\w.-]*(?:/[\w.-]+)+\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/])")


def _url(m: re.Match[str]) -> list[Hit]:
    s = _stripped(m)
    if len(s) > 10 or ("." in s and len(s) > 6):
        return [(m.start(), m.start() + len(s), s, s.rstrip("/"))]
    return []


def _email(m: re.Match[str]) -> list[Hit]:
    return _whole(m, m.group(0).lower())


def _windows_path(m: re.Match[str]) -> list[Hit]:
    s = _stripped(m)
    if len(s) >= 4:
        return [(m.start(), m.start() + len(s), s, s)]
    return []


_CJK_TAIL_RE = re.compile("[" + CJK + "]+$")


def _unix_path(m: re.Match[str]) -> list[Hit]:
    s = _stripped(m)
    tail = _CJK_TAIL_RE.search(s)
    if tail and _EXTENSION_RE.search(s[: tail.start()]):
        s = s[: tail.start()]  # "/data/a.pdf里": the path ends at its extension, the sentence goes on
    segments = [p for p in s.lstrip("~.").split("/") if p]
    if not segments:
        return []
    has_extension = bool(_EXTENSION_RE.search(segments[-1]))
    explicit = s.startswith(("./", "../", "~/"))
    if not (explicit or len(segments) >= 2 or has_extension):
        return []  # "/24" or "/s" alone are not paths
    if all(seg.isdigit() for seg in segments):
        return []
    return [(m.start(), m.start() + len(s), s, s)]


def _relative_path(m: re.Match[str]) -> list[Hit]:
    s = _stripped(m)
    return [(m.start(), m.start() + len(s), s, s)]


# ---- dates and times ----------------------------------------------------------------------------

ISO_DATETIME_RE = compile_cjk_aware(
    _NOT_AFTER_WORD + r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?" + _NOT_BEFORE_WORD
)
ISO_DATE_RE = compile_cjk_aware(r"(?<![\w.-])(\d{4})([-/])(\d{1,2})\2(\d{1,2})(?![\w]|[-/.]\d)")
NUMERIC_DATE_RE = compile_cjk_aware(r"(?<![\w./-])(\d{1,2})([/.-])(\d{1,2})\2(\d{4}|\d{2})(?![\w]|[/.-]\d)")
MONTH_DAY_YEAR_RE = compile_cjk_aware(
    _NOT_AFTER_WORD + r"(" + MONTH_NAME + r")\.?\s+(\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(\d{4}))?" + _NOT_BEFORE_WORD
)
DAY_MONTH_YEAR_RE = compile_cjk_aware(
    _NOT_AFTER_WORD
    + r"(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?("
    + MONTH_NAME
    + r")\.?(?:,?\s+(\d{4}))?"
    + _NOT_BEFORE_WORD
)
CJK_DATE_RE = compile_cjk_aware(r"(\d{4})\s?年\s?(\d{1,2})\s?月(?:\s?(\d{1,2})\s?[日号])?")
MONTH_YEAR_RE = compile_cjk_aware(_NOT_AFTER_WORD + r"(" + MONTH_NAME + r")\.?,?\s+(\d{4})" + _NOT_BEFORE_WORD)
CLOCK_TIME_RE = compile_cjk_aware(
    r"(?<![\w:.])(\d{1,2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:\s?([AaPp])\.?[Mm]\.?(?![A-Za-z]))?(?![\d:]|\.\d)"
)
HOUR_AM_PM_RE = compile_cjk_aware(r"(?<![\w:.])(\d{1,2})\s?([AaPp])\.?[Mm]\b\.?")


def _iso_datetime(m: re.Match[str]) -> list[Hit]:
    return _whole(m, m.group(0))


def _iso_date(m: re.Match[str]) -> list[Hit]:
    year, month, day = int(m.group(1)), int(m.group(3)), int(m.group(4))
    if 1000 <= year <= 2999 and is_valid_day(month, day):
        return _whole(m, canonical_date(year, month, day))
    return []


def _numeric_date(m: re.Match[str]) -> list[Hit]:
    a, b, year = int(m.group(1)), int(m.group(3)), four_digit_year(m.group(4))
    if m.group(2) == "-" and len(m.group(4)) == 2:
        return []  # 12-34-56 is more likely a code or phone fragment
    if a > 12 and is_valid_day(b, a):
        normalized: str | None = canonical_date(year, b, a)  # day first
    elif b > 12 and is_valid_day(a, b):
        normalized = canonical_date(year, a, b)  # month first (US)
    elif is_valid_day(a, b):
        normalized = None  # ambiguous: keep only the surface form
    else:
        return []
    return _whole(m, normalized)


def _named_month_date(month_group: int, day_group: int) -> Normaliser:
    """The normaliser of a date with a month name (``May 15, 2024``, ``15 May``): the year is group 3."""

    def normalise(m: re.Match[str]) -> list[Hit]:
        month = MONTH_NUMBERS[m.group(month_group).lower().rstrip(".")]
        day = int(m.group(day_group))
        if is_valid_day(month, day):
            return _whole(m, canonical_date(int(m.group(3)) if m.group(3) else None, month, day))
        return []

    return normalise


def _cjk_date(m: re.Match[str]) -> list[Hit]:
    year, month = int(m.group(1)), int(m.group(2))
    day = int(m.group(3)) if m.group(3) else None
    if is_valid_day(month, day or 1):
        return _whole(m, canonical_date(year, month, day))
    return []


def _month_year(m: re.Match[str]) -> list[Hit]:
    month = MONTH_NUMBERS[m.group(1).lower().rstrip(".")]
    year = int(m.group(2))
    if 1000 <= year <= 2999:
        return _whole(m, canonical_date(year, month, None))
    return []


def _clock_time(m: re.Match[str]) -> list[Hit]:
    normalized = canonical_time(int(m.group(1)), int(m.group(2)), m.group(4))
    if normalized is not None:
        return _whole(m, normalized)
    return []


def _hour_am_pm(m: re.Match[str]) -> list[Hit]:
    normalized = canonical_time(int(m.group(1)), 0, m.group(2))
    if normalized is not None:
        return [(m.start(), m.end(), m.group(0).rstrip("."), normalized)]  # "11am." hides its dot
    return []


# ---- money and numbers --------------------------------------------------------------------------

AMOUNT_BEFORE_RE = compile_cjk_aware(
    r"(?<![\w])(-)?(?:(["
    + CURRENCY_SYMBOLS
    + r"])\s?|("
    + CURRENCY_CODES
    + r")\s?)(-)?("
    + NUMBER
    + r")(?!\d)"
    + r"(?:\s?(?:"
    + SCALE_WORDS
    + r")\b)?"
    + r"(?![.,]?\d)"
)
AMOUNT_AFTER_RE = compile_cjk_aware(
    _NOT_AFTER_WORD + r"(" + NUMBER + r")" + r"\s?(?:" + CURRENCY_CODES + "|" + CURRENCY_WORDS + r")\b"
)
NUMBER_WITH_UNIT_RE = compile_cjk_aware(
    r"(?<![\w.," + CURRENCY_SYMBOLS + r"])(" + NUMBER + r")(?:(\s?%)|\s?(percent)\b|(\s?(?:" + UNITS + r"))(?![\w/]))",
    re.IGNORECASE,
)
PHONE_RE = compile_cjk_aware(r"(?<![\w+])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[\s.-]\d{4}(?![\w])")
BIG_NUMBER_RE = compile_cjk_aware(r"(?<![\w.," + CURRENCY_SYMBOLS + r"#-])(\d{1,3}(?:,\d{3})+|\d{4,})(?![\w]|[.,]\d)")


def _amount_before(m: re.Match[str]) -> list[Hit]:
    raw = m.group(5)
    value = canonical_number(raw)
    if value is None:
        return []
    text = m.group(0)
    scale = _TRAILING_SCALE_RE.search(text.strip())
    if scale:
        try:
            value = canonical_number(format(Decimal(raw.replace(",", "")) * SCALE_FACTORS[scale.group(1)], "f"))
        except (InvalidOperation, KeyError):  # pragma: no cover - defensive
            pass
    if m.group(1) or m.group(4):
        value = "-" + value if value else value
    return [(m.start(), m.end(), text, value)]


def _amount_after(m: re.Match[str]) -> list[Hit]:
    value = canonical_number(m.group(1))
    if value is not None:
        return _whole(m, value)
    return []


def _phone(m: re.Match[str]) -> list[Hit]:
    digits = re.sub(r"\D", "", m.group(0))
    if 10 <= len(digits) <= 15:
        return _whole(m, digits)
    return []


def _number_with_unit(m: re.Match[str]) -> list[Hit]:
    value = canonical_number(m.group(1))
    if value is None:
        return []
    if m.group(2) is not None or m.group(3) is not None:
        return _whole(m, f"{value}%")
    return _whole(m, f"{value} {singular_unit(m.group(4).strip().lower())}")


def _big_number(m: re.Match[str]) -> list[Hit]:
    s = m.group(0)
    digits = s.replace(",", "")
    if len(digits) == 4 and "," not in s and 1900 <= int(digits) <= 2099:
        return []  # a year on its own
    return _whole(m, digits.lstrip("0") or "0")


# ---- codes and identifiers ----------------------------------------------------------------------

UUID_RE = compile_cjk_aware(
    r"(?<![\w-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])"
)
#: ``#K5520913``, ``#12345``
HASH_CODE_RE = compile_cjk_aware(r"(?<![\w#&])#[A-Za-z0-9][A-Za-z0-9_-]{2,}(?![\w])")
#: ``ORD-12345``, ``INV-2024-001``, ``HAT-123``, ``AB_12``
DASHED_CODE_RE = compile_cjk_aware(r"(?<![\w-])[A-Z][A-Z0-9]*(?:[-_][A-Z0-9]+)+(?![\w-])")
#: ``QX4TR8``, ``BX4471``, ``58TQ4Z``
UPPER_CODE_RE = compile_cjk_aware(r"(?<![\w-])[A-Z0-9]{4,}(?![\w-])")
#: letters-only codes announced by a word: ``booking code: KXPLMR``, ``code ABCXYZ``
ANNOUNCED_CODES_RE = compile_cjk_aware(
    r"\b(?:"
    + CODE_ANNOUNCING_WORDS
    + r")"
    + r"(?:\s+(?:"
    + CODE_ANNOUNCING_FILLERS
    + r")){0,3}[\s:*#]*"
    + r"((?:[A-Z0-9]{5,8})(?:(?:,\s*|\s*,?\s*(?:and|or|&)\s+)[A-Z0-9]{5,8}(?![\w-]))*)(?![\w-])",
)
_ANNOUNCED_CODE_RE = re.compile(r"[A-Z0-9]{5,8}")
#: ``ana_ruiz_2041``, ``store_credit_5519023``, ``user-12345``
SNAKE_ID_RE = compile_cjk_aware(r"(?<![\w-])[a-z][a-z0-9]*(?:[_-][a-z0-9]+)+(?![\w-])")
#: ``user12345``
LETTERS_DIGITS_ID_RE = compile_cjk_aware(r"(?<![\w-])[a-z]{2,}\d{3,}[a-z0-9]*(?![\w-])")
#: long random tokens: ``call_oIHazX6yQrB8hUwl4cRilFKj``, ``sk-abc...``
RANDOM_TOKEN_RE = compile_cjk_aware(r"(?<![\w-])[A-Za-z0-9][A-Za-z0-9_-]{11,}(?![\w-])")
HEX_ID_RE = compile_cjk_aware(r"(?<![\w-])[0-9a-f]{7,64}(?![\w-])")


def _uuid(m: re.Match[str]) -> list[Hit]:
    return _whole(m, m.group(0).lower())


def _hash_code(m: re.Match[str]) -> list[Hit]:
    body = m.group(0)[1:]
    if _DIGIT_RE.search(body):
        return _whole(m, body.upper())
    return []


def _dashed_code(m: re.Match[str]) -> list[Hit]:
    s = m.group(0)
    if _DIGIT_RE.search(s) and _UPPER_RE.search(s) and len(s) >= 4:
        return _whole(m, s)
    return []


def _upper_code(m: re.Match[str]) -> list[Hit]:
    if looks_like_code(m.group(0)):
        return _whole(m, m.group(0))
    return []


def _announced_codes(m: re.Match[str]) -> list[Hit]:
    base = m.start(1)
    hits: list[Hit] = []
    for item in _ANNOUNCED_CODE_RE.finditer(m.group(1)):
        s = item.group(0)
        if s in CONTEXT_STOPWORDS or s.isdigit() or not _UPPER_RE.search(s):
            continue
        hits.append((base + item.start(), base + item.end(), s, s))
    return hits


def _snake_id(m: re.Match[str]) -> list[Hit]:
    s = m.group(0)
    if sum(c.isdigit() for c in s) >= 3 and _LOWER_RE.search(s):
        return _whole(m, s)
    return []


def _letters_digits_id(m: re.Match[str]) -> list[Hit]:
    if m.group(0).upper() not in CODE_STOPWORDS:
        return _whole(m, m.group(0))
    return []


def _random_token(m: re.Match[str]) -> list[Hit]:
    s = m.group(0)
    if _DIGIT_RE.search(s) and _LOWER_RE.search(s) and _UPPER_RE.search(s) and sum(c.isdigit() for c in s) >= 2:
        return _whole(m, s)
    return []


def _hex_id(m: re.Match[str]) -> list[Hit]:
    s = m.group(0)
    if _DIGIT_RE.search(s) and _HEX_LETTER_RE.search(s) and sum(c.isdigit() for c in s) >= 3:
        return _whole(m, s)
    return []


# ---- names of people ---------------------------------------------------------------------------

_UPPER = "A-ZÀ-ÖØ-Þ\u0100-\u017f"
_LOWER = "a-zß-öø-ÿ\u0100-\u017f"
#: One capitalised word of a name: ``Sofia``, ``O'Brien``, ``McKay``, ``Lefèvre-Dupont``.
_NAME_WORD = rf"[{_UPPER}](?:[{_LOWER}]+(?:[A-Z][{_LOWER}]+)?|['’][{_UPPER}][{_LOWER}]+)(?:-[{_UPPER}][{_LOWER}]+)*"
#: A name of one to three words on one line, never glued to more letters, digits or a call's ``(``.
_FULL_NAME = rf"{_NAME_WORD}(?:[ \t]{_NAME_WORD}){{0,2}}(?![\w(])"
_FULL_NAME_RE = re.compile(_FULL_NAME)
_NAME_LIST = rf"{_FULL_NAME}(?:(?:,[ \t]*|[ \t]+(?:and|&)[ \t]+){_FULL_NAME})*"


def _by_first_letter(alternatives: tuple[str, ...]) -> str:
    """An alternation of lower-case fragments whose first letter may be capitalised, grouped by that
    letter: the regex tries one group per position instead of every fragment (it runs on every text)."""
    groups: dict[str, list[str]] = {}
    for a in alternatives:
        groups.setdefault(a[0], []).append(a[1:])
    return "|".join(
        f"[{c}{c.upper()}](?:" + "|".join(sorted(rest, key=len, reverse=True)) + ")" for c, rest in groups.items()
    )


#: Between a cue and the name: spaces, a colon or comma (in markdown bold), "is"/"was".
_CUE_GAP = r"[ \t]*(?:\*\*)?[:,]?(?:\*\*)?[ \t]*(?:(?i:is|was|are|were)[ \t]+)?"
#: ``my name is Ada Brandt``, ``passengers Lena Ortiz and Omar Ruiz``, ``an email from Omar``.
CUED_NAME_RE = re.compile(
    rf"(?<![A-Za-z])(?:{_by_first_letter(NAME_CUES)})(?![A-Za-z]){_CUE_GAP}(?P<names>{_NAME_LIST})"
)
#: ``Dr. Chen``, ``Ms Ruiz``: the title is part of the name as written.
TITLED_NAME_RE = re.compile(rf"(?<![A-Za-z])(?:{NAME_TITLES})\.?[ \t]+(?P<names>{_FULL_NAME})")
#: A signature: a name alone on its line after a closing (``Regards,\nOmar``) or a dash (``-- Omar``).
_CLOSING = rf"(?:[-–—]{{1,2}}|(?i:{SIGNATURE_CLOSINGS})[ \t]*[,.!]?)"
SIGNATURE_NAME_RE = re.compile(rf"(?m)^[ \t]*{_CLOSING}[ \t]*\n?[ \t]*(?P<names>{_FULL_NAME})[ \t]*[.!]?[ \t]*$")
#: ``我叫张伟。``: two or three Han characters after a cue, ending at punctuation, a space or the text's end.
CJK_NAME_RE = re.compile(rf"(?:{CJK_NAME_CUES})[ 　:：]?(?P<names>[\u4e00-\u9fff]{{2,3}})(?=[，。！？、；,.!?;\s]|$)")


def _name_words(surface: str) -> str:
    """``surface`` without the common words a name never starts or goes on with ("The", "Monday")."""
    words = surface.split()
    while words and words[0].lower() in NOT_NAME_WORDS:
        words.pop(0)
    for i, w in enumerate(words):
        if w.lower() in NOT_NAME_WORDS:
            words = words[:i]
            break
    return " ".join(words)


def _names(m: re.Match[str]) -> list[Hit]:
    base = m.start("names")
    hits: list[Hit] = []
    for one in _FULL_NAME_RE.finditer(m.group("names")):
        name = _name_words(one.group(0))
        if name:
            start = base + one.start() + one.group(0).index(name)
            hits.append((start, start + len(name), name, None))
    return hits


def _titled_name(m: re.Match[str]) -> list[Hit]:
    name = _name_words(m.group("names"))
    if not name or not m.group("names").startswith(name):
        return []  # "Dr. The ...": the title is not followed by a name
    end = m.start("names") + len(name)
    return [(m.start(), end, m.string[m.start() : end], None)]


def _cjk_name(m: re.Match[str]) -> list[Hit]:
    return [(m.start("names"), m.end("names"), m.group("names"), None)]


def _has_upper(t: str) -> bool:
    return _UPPER_RE.search(t) is not None


def _has_han(t: str) -> bool:
    return _HAN_RE.search(t) is not None


_HAN_RE = re.compile("[\u4e00-\u9fff]")


# ---- the table ----------------------------------------------------------------------------------


def _has_url_start(t: str) -> bool:
    return "://" in t or "www." in t.lower()


def _has_digit(t: str) -> bool:
    return _DIGIT_RE.search(t) is not None


@functools.cache  # one function per needle: the scanner runs each distinct check once per text
def _holds(needle: str) -> Callable[[str], bool]:
    return lambda t: needle in t


#: Every kind of fact, highest priority first.
PATTERNS: tuple[FactPattern, ...] = (
    FactPattern("url", URL_RE, _url, _has_url_start),
    FactPattern("email", EMAIL_RE, _email, _holds("@")),
    FactPattern("path", WINDOWS_PATH_RE, _windows_path, lambda t: ":" in t or "\\" in t),
    FactPattern("path", UNIX_PATH_RE, _unix_path, _holds("/")),
    FactPattern("path", RELATIVE_PATH_RE, _relative_path, _holds("/")),
    FactPattern("id", UUID_RE, _uuid, _holds("-")),
    FactPattern("date", ISO_DATETIME_RE, _iso_datetime, _has_digit),
    FactPattern("date", ISO_DATE_RE, _iso_date, _has_digit),
    FactPattern("date", NUMERIC_DATE_RE, _numeric_date, _has_digit),
    FactPattern("date", MONTH_DAY_YEAR_RE, _named_month_date(1, 2), _has_digit),
    FactPattern("date", DAY_MONTH_YEAR_RE, _named_month_date(2, 1), _has_digit),
    FactPattern("date", CJK_DATE_RE, _cjk_date, _has_digit),
    FactPattern("date", MONTH_YEAR_RE, _month_year, _has_digit),
    FactPattern("time", CLOCK_TIME_RE, _clock_time, _holds(":")),
    FactPattern("time", HOUR_AM_PM_RE, _hour_am_pm),
    FactPattern("amount", AMOUNT_BEFORE_RE, _amount_before),
    FactPattern("amount", AMOUNT_AFTER_RE, _amount_after),
    FactPattern("number", PHONE_RE, _phone),
    FactPattern("number", NUMBER_WITH_UNIT_RE, _number_with_unit),
    FactPattern("code", HASH_CODE_RE, _hash_code, _holds("#")),
    FactPattern("code", DASHED_CODE_RE, _dashed_code),
    FactPattern("code", UPPER_CODE_RE, _upper_code),
    FactPattern("code", ANNOUNCED_CODES_RE, _announced_codes),
    FactPattern("id", SNAKE_ID_RE, _snake_id),
    FactPattern("id", LETTERS_DIGITS_ID_RE, _letters_digits_id),
    FactPattern("id", RANDOM_TOKEN_RE, _random_token),
    FactPattern("id", HEX_ID_RE, _hex_id),
    FactPattern("number", BIG_NUMBER_RE, _big_number),
    FactPattern("name", TITLED_NAME_RE, _titled_name, _has_upper),
    FactPattern("name", CUED_NAME_RE, _names, _has_upper),
    FactPattern("name", SIGNATURE_NAME_RE, _names, _has_upper),
    FactPattern("name", CJK_NAME_RE, _cjk_name, _has_han),
)
