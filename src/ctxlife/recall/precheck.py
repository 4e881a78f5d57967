"""A turn that cannot pass recall's gain test, told before the search (the search is most of recall's cost).

``recall`` gives a turn that does not refer to the past a block only when the best passage's turn
covers the turn's words (their idf) better than the best recent turn of the context by ``min_gain``
of their total weight. No passage covers more than all of it, so when the recent turns already hold
more than ``1 - min_gain`` of it, no search can find a block, and none is made: the decision is the
one the search would have led to. The gate weighs each word at most as much as the rarest word the
best match holds; that cap is one of the turn's weights, so each is tried. Only words are bounded
this way; a turn with a term of a script written without spaces (a Chinese bigram) is searched, since
the gate weighs those by what the matches hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ctxlife.messages import is_inserted, is_system, text_of
from ctxlife.recall.history import HistorySearch, live_keys
from ctxlife.recall.text import NO_SPACE_RUN, count_term, query_terms


def recent_turns(messages: Sequence[dict[str, Any]], turn: int, terms: Iterable[str], recent: int) -> list[set[str]]:
    """The ``terms`` each recent turn holds: a message with the reply to it (not the next user message),
    among the last ``recent`` messages before and after ``turn`` that are neither system prompts nor
    inserted by ctxlife (the turns recall's gate compares with)."""
    # The last ``recent`` such messages only, each case-folded once (a context holds hundreds).
    kept = [m for i, m in enumerate(messages) if i != turn and not is_system(m) and not is_inserted(m)][-recent:]
    lowers = [(m.get("role") == "user", text_of(m).casefold()) for m in kept]
    said = [(asks, {t for t in terms if count_term(lower, t, first=True)}) for asks, lower in lowers]
    replies = [*(held if not asks else set() for asks, held in said[1:]), set()][: len(said)]
    return [held | reply for (_, held), reply in zip(said, replies, strict=True)]


def recent_weight(messages: Sequence[dict[str, Any]], turn: int, asked: dict[str, float], recent: int) -> float:
    """The weight of ``asked`` the best recent turn holds (:func:`recent_turns`)."""
    return max((sum(asked[t] for t in held) for held in recent_turns(messages, turn, asked, recent)), default=0.0)


def cannot_gain(
    search: HistorySearch,
    session_id: str,
    query: str,
    messages: Sequence[dict[str, Any]],
    turn: int,
    *,
    min_gain: float,
    recent: int,
) -> bool:
    """Whether no passage can bring ``min_gain`` of ``query``'s weight over the recent turns of ``messages``.

    The weights are the idf of the session's index brought up to date as :meth:`HistorySearch.passages`
    would (what ``messages`` shows held back), so the search that follows a False sees the same index.
    False also when it cannot be told without searching.
    """
    terms = query_terms(query)
    if not terms or any(NO_SPACE_RUN.fullmatch(t) for t in terms):
        return False
    visible = live_keys(messages)
    index = search.index(session_id, defer=lambda record: (record.role, record.text) in visible)
    asked = index.term_weights(terms)
    if not sum(asked.values()):
        return False
    turns = recent_turns(messages, turn, asked, recent)
    # The gate weighs a word at most as much as the rarest word the best match holds (``top``, one of
    # these weights, known only after the search): the turn is skipped only if it fails at every one.
    for top in set(asked.values()):
        capped = {t: min(w, top) for t, w in asked.items()}
        total = sum(capped.values())
        held = max((sum(capped[t] for t in terms) for terms in turns), default=0.0)
        if (total - held) / total >= min_gain:
            return False
    return True
