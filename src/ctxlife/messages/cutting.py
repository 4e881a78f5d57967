"""Where text may be cut: :func:`safe_cut` splits no word, character or emoji sequence, in any script.

Scripts written without spaces between words (:data:`CJK`) are cut between characters; an
alphabetic run inside them (an id such as ORD-88231) is kept whole.
"""

from __future__ import annotations

import re
import unicodedata

#: Scripts written without spaces between words (Han, kana, hangul, bopomofo), as a regex class body:
#: a Latin code or a number right next to one of their characters still stands on its own.
CJK = (
    r"\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3031-\u3035\u3038-\u303c\u3040-\u30ff\u3100-\u312f"
    r"\u3131-\u318f\u31a0-\u31bf\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af"
    r"\ud7b0-\ud7ff\uf900-\ufaff\U00020000-\U0003134f"
)


#: CJK punctuation and the full-width forms (a regex class body): they end a word like a space does.
CJK_PUNCTUATION = r"\u3000-\u303f\uff00-\uffef"


_CJK_RE = re.compile(f"[{CJK}]")


_JOINERS = frozenset("\u200d\u034f\u2060")  # zero-width joiner, combining grapheme joiner, word joiner


_BREAKS = frozenset(" \t\n\r\f\v\u3000。！？；，、：）】」』》…")


_ASCII_BREAKS = frozenset(",.;:!?)]}")  # a break only when no word goes on after it (not in 1,299.00 or a@b.com)


def _attached(char: str) -> bool:
    """Whether ``char`` belongs to the character before it (a combining mark, a joiner, a variation
    selector, a skin tone)."""
    code = ord(char)
    return (
        unicodedata.combining(char) != 0
        or char in _JOINERS
        or 0xFE00 <= code <= 0xFE0F
        or 0xE0100 <= code <= 0xE01EF
        or 0x1F3FB <= code <= 0x1F3FF
        or 0xDC00 <= code <= 0xDFFF  # the low half of a surrogate pair kept as two code points
        or unicodedata.category(char) in ("Mn", "Me")
    )


def safe_cut(text: str, index: int, *, backward: bool = True, reach: int = 40) -> int:
    """A cut point near ``index`` that splits no word, character or emoji sequence.

    Looks ``reach`` characters back (or forward) for a space, a line break or punctuation
    (Chinese and Japanese included) to cut after; in text without any (CJK runs, long
    tokens), cuts between two characters but never inside a combining sequence, a ZWJ emoji,
    a flag or a surrogate pair.
    """
    n = len(text)
    index = max(0, min(index, n))
    if index in (0, n):
        return index
    span = range(index, max(index - reach, 0), -1) if backward else range(index, min(index + reach, n))
    for i in span:
        before = text[i - 1]
        if (before in _BREAKS or (before in _ASCII_BREAKS and not _in_word(text[i]))) and not _attached(text[i]):
            return i
    step = -1 if backward else 1
    # Inside a run of letters and digits of an alphabetic script (an id such as ORD-88231 inside
    # Chinese text), cut at the run's edge; between two CJK characters is a fine place.
    i = index
    while 0 < i < n and _in_word(text[i - 1]) and _in_word(text[i]) and abs(i - index) < reach:
        i += step
    if not (0 < i < n and _in_word(text[i - 1]) and _in_word(text[i])):
        index = i
    i = index
    while 0 < i < n and (
        _attached(text[i]) or text[i - 1] in _JOINERS or _regional_pair(text, i) or _high_surrogate(text[i - 1])
    ):
        i += step
    return i


_WORD_PUNCT = frozenset("-_.@/'")


def _in_word(char: str) -> bool:
    """A character of a word in a script that separates words with spaces (Latin, Cyrillic, digits, ...)."""
    if char in _WORD_PUNCT:
        return True
    if not char.isalnum():
        return False
    return not _is_cjk(char)


def _is_cjk(char: str) -> bool:
    return _CJK_RE.match(char) is not None


def _regional_pair(text: str, i: int) -> bool:
    """Whether ``i`` falls between the two regional indicators of a flag."""
    if not (0x1F1E6 <= ord(text[i]) <= 0x1F1FF and 0x1F1E6 <= ord(text[i - 1]) <= 0x1F1FF):
        return False
    run = 0
    j = i - 1
    while j >= 0 and 0x1F1E6 <= ord(text[j]) <= 0x1F1FF:
        run += 1
        j -= 1
    return run % 2 == 1


def _high_surrogate(char: str) -> bool:
    return 0xD800 <= ord(char) <= 0xDBFF
