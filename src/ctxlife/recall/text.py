"""Text analysis for history search: words, CJK bigrams, stopwords, dates in a question.

Scripts written without spaces between words (Chinese, Japanese, Thai, Lao, Khmer, Myanmar; Korean
for good measure) are indexed as overlapping character bigrams, the way Lucene's CJK analyzer does:
"我们明天去爬山" becomes "我们 们明 明天 天去 去爬 爬山", so a two-character word in a question
("爬山") matches wherever it was written, with no segmenter and no dictionary. A run of one such
character stays a unigram ("《飘》"). Everything else is left to the index's word tokenizer
(SQLite FTS5 ``unicode61`` with Porter stemming), so "movies" matches "movie".

A question is turned into search terms by the same rule, minus English function words. Calendar
dates in a question ("on May 2nd", "4月27号", "2023-04-27", "5/2") are returned separately, as
(month, day) pairs, so the search can prefer what was said on that day.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Sequence
from datetime import date

# Characters of scripts that do not separate words with spaces.
_NO_SPACE_CLASS = (
    "\u0e00-\u0e7f"  # Thai
    "\u0e80-\u0eff"  # Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff\u31f0-\u31ff"  # Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Han
    "\uac00-\ud7af"  # Hangul syllables
    "\U00020000-\U0003134f"  # Han extensions
)
NO_SPACE_RUN = re.compile(f"[{_NO_SPACE_CLASS}]+")
TERM = re.compile(r"[^\W_]+")  # what FTS5's unicode61 tokenizer keeps: letters and digits

# English function words: frequent in every question, useless to rank by (and slow to search).
STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are aren as at be because been before
    being below between both but by can could couldn did didn do does doesn doing don down during each
    else ever few for from further get got had has have having he her here hers herself him himself his
    how i if in into is isn it its itself just ll me might more most must my myself no nor not now of off
    on once only or other our ours ourselves out over own re s same she should so some such t than that
    the their theirs them themselves then there these they this those through to too under until up us
    ve very was wasn we were weren what when where which while who whom why will with won would you your
    yours yourself yourselves remember recall earlier before ago once told tell said say asked ask
    mentioned mention shared share across along among around behind beside beyond onto toward towards upon
    within without
    """.split()
)

# Chinese function characters (particles, pronouns, "is/have/at", "once/ever" ...): a question bigram
# holding one is mostly a word boundary ("你给", "了我") or a function word ("什么"), not what the
# question is about. The index keeps them; only questions drop them.
CJK_FUNCTION_CHARS = frozenset("的了吗呢吧啊么我你他她它们是在有和就都也还很把被给对这那些个一不没什曾经过")
# Chinese words that ask for the past rather than say what it was about, as English's "tell", "remember",
# "mention" and "share" are stopwords: "告诉我……" asks the same as "……？".
CJK_STOPWORDS = frozenset("告诉 记得 提到 提醒 分享 知道 请问 想想 来着".split())

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH_NAME = "|".join(sorted(_MONTHS, key=len, reverse=True))
# Each pattern names the groups that hold the month and the day.
_DATE_PATTERNS = (
    # 2023-04-27, 2023/4/27, 2023年4月27日
    re.compile(r"(?<!\d)\d{4}\s*[-/.年]\s*(?P<month>\d{1,2})\s*[-/.月]\s*(?P<day>\d{1,2})(?!\d)"),
    # April 27th, Apr. 27
    re.compile(rf"\b(?P<month>{_MONTH_NAME})\.?\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\b", re.IGNORECASE),
    # 27th of April, 27 April
    re.compile(rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<month>{_MONTH_NAME})\b", re.IGNORECASE),
    # 4月27日, 4月27号
    re.compile(r"(?<!\d)(?P<month>\d{1,2})\s*月\s*(?P<day>\d{1,2})\s*[日号號]?"),
)


def normalize(text: str) -> str:
    """NFKC-normalized text (full-width letters and digits become ASCII)."""
    return unicodedata.normalize("NFKC", text)


def bigrams(run: str) -> list[str]:
    """Overlapping character bigrams of a run of no-space script (the run itself if one character)."""
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def index_text(text: str) -> str:
    """``text`` as the index should see it: no-space scripts rewritten as space-separated bigrams."""
    if text.isascii():
        return text  # already NFKC, and no no-space script: the common case, without a scan
    text = normalize(text)
    if not NO_SPACE_RUN.search(text):
        return text
    return NO_SPACE_RUN.sub(lambda m: " " + " ".join(bigrams(m.group())) + " ", text)


def query_terms(text: str, *, limit: int = 32) -> list[str]:
    """The search terms of a question: words and bigrams, lower-cased, without function words, once each."""
    seen: dict[str, None] = {}
    dropped: dict[str, None] = {}
    for term in TERM.findall(index_text(text).casefold()):
        # A lone ASCII letter says little ("a", "s" of "it's"); a lone digit may be all that tells "gym 5" from "gym 6".
        if term in STOPWORDS or (len(term) == 1 and term.isascii() and not term.isdigit()):
            continue
        if NO_SPACE_RUN.fullmatch(term) and (term in CJK_STOPWORDS or any(c in CJK_FUNCTION_CHARS for c in term)):
            dropped.setdefault(term, None)
            continue
        seen.setdefault(term, None)
        if len(seen) >= limit:
            break
    return list(seen) or list(dropped)[:limit]


_SUFFIXES = ("ations", "ation", "ings", "ing", "edly", "ed", "es", "ly", "s")


def stem(word: str) -> str:
    """A light English stem for finding a search term in a text ("flagged" -> "flag", "movies" -> "movi")."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
                word = word[:-1]
            return word
    return word


@functools.lru_cache(maxsize=4096)  # the same terms are looked for on every call of a conversation
def term_pattern(term: str) -> re.Pattern[str]:
    """Where a search term occurs in a case-folded text: a bigram anywhere, a word by its stem at a word start."""
    if NO_SPACE_RUN.match(term):
        return re.compile(re.escape(term))
    # The stem first, then a look back at the character before it: a pattern starting with the look-behind
    # is tried at every position (0.2 ms per term over a 10k tool result, 50x the literal scan).
    # A letter or digit before the stem means inside a word, unless it is of a no-space script: the index
    # splits "第3天" into 第 3 天 (index_text), so the 3 is a word of its own there too.
    # A number is found whole ("5" is not in "52"), as the index finds it; a word by its stem's start.
    literal = re.escape(stem(term))
    end = r"(?!\d)" if term.isdecimal() else ""
    return re.compile(literal + r"(?<![^\W_" + _NO_SPACE_CLASS + "]" + literal + ")" + end)


class TermCounts:
    """How often search terms occur in a case-folded text, as :func:`term_pattern` finds them.

    ``length``: how many terms the index sees in the text (BM25's document length).
    """

    __slots__ = ("lower", "length")

    def __init__(self, lower: str) -> None:
        self.lower = lower
        self.length = len(TERM.findall(index_text(lower)))

    def count(self, term: str) -> int:
        return count_term(self.lower, term)


def count_term(lower: str, term: str, *, first: bool = False) -> int:
    """How many times :func:`term_pattern` finds ``term`` in the case-folded ``lower`` (with ``first``:
    1 as soon as once), without compiling a pattern: questions bring new terms on every call.

    A word term matches where its stem starts a word: after a character that is not a letter or a
    digit (``[^\\W_]`` is exactly ``str.isalnum``) or is one of a script written without spaces, as
    the pattern's look-behind says; a number also ends where the next character is not a digit.
    """
    anywhere, literal = _term_literal(term)
    if anywhere:
        return min(lower.count(literal), 1) if first else lower.count(literal)  # a bigram, a lone character
    found, at, size = 0, lower.find(literal), len(literal)
    number = literal.isdecimal()
    while at >= 0:
        before = lower[at - 1] if at else " "
        starts = not before.isalnum() or (not before.isascii() and NO_SPACE_RUN.match(before))
        if starts and not (number and lower[at + size : at + size + 1].isdecimal()):
            found += 1
            if first:
                break
            at = lower.find(literal, at + size)
        else:
            at = lower.find(literal, at + 1)
    return found


def count_terms(lowers: Sequence[str], terms: Sequence[str]) -> list[list[int]]:
    """:func:`count_term` of each of ``terms`` (inner lists) in each case-folded text of ``lowers``.

    One scan per term over the texts joined by line breaks (a line break starts a word, as a text's
    start does, and ends a number): no term's text holds one, so no match runs across two texts.
    """
    joined = "\n".join(lowers)
    starts: list[int] = []
    at = 0
    for lower in lowers:
        starts.append(at)
        at += len(lower) + 1
    out = [[0] * len(terms) for _ in lowers]
    for column, term in enumerate(terms):
        for found in term_starts(joined, term):
            out[bisect.bisect_right(starts, found) - 1][column] += 1
    return out


def term_starts(lower: str, term: str) -> list[int]:
    """Where :func:`term_pattern` finds ``term`` in the case-folded ``lower`` (each match's start, as
    ``finditer`` gives them), without compiling a pattern: the pattern's look-behind over every script
    without spaces costs milliseconds to compile, and each question brings new terms."""
    anywhere, literal = _term_literal(term)
    out: list[int] = []
    size = len(literal)
    at = lower.find(literal)
    if anywhere:  # a bigram, a lone character: every occurrence, not overlapping
        while at >= 0:
            out.append(at)
            at = lower.find(literal, at + size)
        return out
    number = literal.isdecimal()
    while at >= 0:
        before = lower[at - 1] if at else " "
        starts = not before.isalnum() or (not before.isascii() and NO_SPACE_RUN.match(before))
        if starts and not (number and lower[at + size : at + size + 1].isdecimal()):
            out.append(at)
            at = lower.find(literal, at + size)
        else:
            at = lower.find(literal, at + 1)
    return out


@functools.lru_cache(maxsize=4096)
def _term_literal(term: str) -> tuple[bool, str]:
    """Whether :func:`term_pattern` finds ``term`` anywhere (a bigram), and the text every match holds."""
    if NO_SPACE_RUN.match(term):
        return True, term
    return False, stem(term)


def dates_in(text: str) -> list[tuple[int, int]]:
    """Calendar dates a question names, as ``(month, day)`` pairs, in order of appearance, once each."""
    text = normalize(text)
    found: list[tuple[int, int, int]] = []  # (position, month, day)
    for pattern in _DATE_PATTERNS:
        for match in pattern.finditer(text):
            month_text = match.group("month")
            month = int(month_text) if month_text.isdigit() else _MONTHS[month_text.lower()]
            day = int(match.group("day"))
            if _valid(month, day):
                found.append((match.start(), month, day))
    out: dict[tuple[int, int], None] = {}
    for _, month, day in sorted(found):
        out.setdefault((month, day), None)
    return list(out)


_CJK_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_ORDINAL_WORDS = {
    word: n
    for n, word in enumerate(
        ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"), start=1
    )
}
# "第3天", "第三天", "the second day", "the 3rd day", "on day 3": a day named by its place in the conversation.
_DAY_ORDINALS = (
    re.compile(r"第\s*(?P<n>\d{1,3}|[零一二两三四五六七八九十]{1,3})\s*天"),
    re.compile(rf"\bthe\s+(?P<n>{'|'.join(_ORDINAL_WORDS)}|\d{{1,3}}(?:st|nd|rd|th))\s+day\b", re.IGNORECASE),
    re.compile(r"\b(?:on|of)\s+day\s+(?P<n>\d{1,3})\b", re.IGNORECASE),
)
_WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# "last Tuesday", "上周二", "上个星期天": the latest such weekday before today.
_LAST_WEEKDAY = (
    re.compile(rf"\blast\s+(?P<w>{'|'.join(_WEEKDAY_NAMES)})\b", re.IGNORECASE),
    re.compile(r"上个?(?:周|星期|礼拜)(?P<w>[一二三四五六日天])"),
)
_CJK_WEEKDAYS = "一二三四五六"


# "yesterday" / "昨天": the conversation's day before today; "that day" / "那天": the day the context last named.
_YESTERDAY = re.compile(r"\byesterday\b|昨天|昨日", re.IGNORECASE)
_THAT_DAY = re.compile(r"\bthat\s+day\b|那天", re.IGNORECASE)


def names_yesterday(text: str) -> bool:
    """Whether a message says "yesterday" / "昨天"."""
    return bool(_YESTERDAY.search(normalize(text)))


def names_that_day(text: str) -> bool:
    """Whether a message says "that day" / "那天" (a day named before it)."""
    return bool(_THAT_DAY.search(normalize(text)))


def day_ordinals(text: str) -> list[int]:
    """The days a message names by their place (1 for "第1天" / "the first day"), in order, once each."""
    text = normalize(text)
    found: dict[int, None] = {}
    for pattern in _DAY_ORDINALS:
        for match in pattern.finditer(text):
            n = _number(match.group("n").lower())
            if n:
                found.setdefault(n, None)
    return list(found)


def last_weekdays(text: str) -> list[int]:
    """The weekdays a message names as "last Tuesday" / "上周二" (Monday 0 ... Sunday 6), once each."""
    found: dict[int, None] = {}
    for pattern in _LAST_WEEKDAY:
        for match in pattern.finditer(normalize(text)):
            name = match.group("w").lower()
            day = _WEEKDAY_NAMES.index(name) if name in _WEEKDAY_NAMES else _CJK_WEEKDAYS.find(name) % 7
            found.setdefault(day, None)  # 日 and 天 (not in the six) are Sunday
    return list(found)


def _number(text: str) -> int:
    """1-999 from digits ("3", "3rd"), an English ordinal ("third") or Chinese numerals ("三", "十二", "二十")."""
    digits = re.match(r"\d+", text)
    if digits:
        return int(digits.group())
    if text in _ORDINAL_WORDS:
        return _ORDINAL_WORDS[text]
    tens, _, ones = text.partition("十")
    if "十" not in text:
        return _CJK_DIGITS.get(text, 0) if len(text) == 1 else 0
    return (_CJK_DIGITS.get(tens, 0) if tens else 1) * 10 + (_CJK_DIGITS.get(ones, 0) if ones else 0)


def _valid(month: int, day: int) -> bool:
    try:
        date(2000, month, day)  # a leap year: 29 February is a date
    except ValueError:
        return False
    return True


# Words that say a message is about something said or done before ("do you remember", "last time",
# "you recommended", "上次", "之前说过"): the question needs the past, not only the recent turns.
_PAST_WORDS = re.compile(
    r"\b(?:remember|recall|remind|earlier|before|ago|previously|once|last\s+(?:time|week|month|year|night)|"
    r"yesterday|the\s+other\s+day|mentioned|mention|told|said|shared|asked|recommended|suggested|"
    r"did|do\s+i|have\s+i|had\s+i|was\s+(?:it|that|the)|were\s+(?:they|the)|what\s+was|"
    r"back\s+then|at\s+the\s+time|which\s+one|have\s+you|you\s+gave)\b|,\s*right\s*\?|"
    # "What's my favorite café?", "Which town did I plan to visit recently?" ask about the past; "My favorite
    # season is autumn.", "Recently, I've been learning to swim." tell the present.
    r"\b(?:recently|my\s+favou?rite)\b[^.!?]*\?|\b(?:what|which)(?:'s|\s+(?:is|was|are|were))\s+my\s+favou?rite\b",
    re.IGNORECASE,
)
_PAST_CJK = re.compile(
    r"记得|之前|以前|上次|那次|刚才|(?<!听)说过|提到|提过|讲过|推荐过|你推荐的|分享过|告诉过|曾|前几天|那天|昨天|还记|过的|"
    # A question about oneself ("我最喜欢哪家店？", "我喜欢哪些颜色？"): within one clause, not one that goes on
    # to ask the assistant ("我最近在学游泳，你有什么建议吗？").
    r"对吗|你给我|我(?:最|喜欢)[^，。！,.!你]*[?？]"
)
_QUESTION = re.compile(
    r"[?？]|^(?:what|which|who|whom|whose|when|where|why|how)\b|[吗呢]\s*$|什么|哪|几|多少|谁|怎么", re.IGNORECASE
)


def need_for_past(text: str) -> str:
    """How much a message needs what was said earlier: ``"past"`` (it refers to it: "do you remember",
    "last time", a calendar date, "上次"), ``"question"`` (it asks something), or ``"none"`` (small talk,
    a statement)."""
    text = normalize(text)
    if _PAST_WORDS.search(text) or _PAST_CJK.search(text) or dates_in(text):
        return "past"
    if _QUESTION.search(text.strip()):
        return "question"
    return "none"
