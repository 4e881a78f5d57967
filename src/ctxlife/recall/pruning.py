"""The best documents of a large index without scoring every match (MaxScore over FTS5's bm25), exactly.

FTS5's ``bm25()`` scores every document a query matches: at 100k messages a question's common
words match ~15k documents, and scoring them is most of what a search costs. A document's score is
a sum over the query's terms, and a term adds less than ``idf * (k1 + 1)`` to it (BM25's ceiling:
however often the term occurs, however short the document), times the tool weight for a tool result's
document, counted only for the terms some tool result holds (a chat history has none: its ceilings are
not inflated by a weight no document of it takes). So with the rarer terms ``R`` and the
common ones ``C``, a document holding none of ``R`` scores less than the sum of the ceilings of
``C``; when that is below the ``limit``-th best score among the documents holding some of ``R``
(scored by FTS5 with the whole query, so exactly as the full query scores them), no other document
can enter the result, and the common words' documents are never scored. When the ceilings do not
prove it, ``R`` grows; when ``R`` would match most of what the query matches, the caller runs the
full query. Nothing is kept between searches: the ceilings hold for any document, added or edited.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from typing import Any

#: FTS5's bm25 k1: a term adds less than ``idf * (k1 + 1)`` to a score.
_K1 = 1.2

#: Slack on the ceilings: the scores are sums in floating point.
_MARGIN = 1e-9


def ranked(
    db: sqlite3.Connection,
    terms: Sequence[str],
    limit: int,
    tool_weight: float,
    hits: dict[str, int],
    score: str,
    order: str,
    stride: int,
    tool_hits: dict[str, int] | None = None,
) -> list[tuple[Any, ...]] | None:
    """The rows ``(rowid, score)`` the full query (``terms`` OR-ed, ``ORDER BY score DESC, seq, rowid
    LIMIT limit``) returns, or None when the ceilings cannot prove them cheaply (run the full query).

    ``hits``: each term's document count; ``score`` and ``order``: the full query's SQL for the score
    (with one ``?``: ``tool_weight``) and its ORDER BY ... LIMIT ?; ``rowid % stride``: a document's
    record (its sequence number). ``tool_hits``: each term's count of tool results' documents (None:
    every term may be in one).
    """
    # A word no document holds adds nothing to any score (its frequency in each is 0): left out, it would
    # only start a round of rare terms that finds nothing.
    terms = [t for t in terms if hits[t]]
    if len(terms) < 2:
        return None  # nothing to leave out
    rows = _documents(db)
    ceiling = {t: idf(rows, hits[t]) * (_K1 + 1) * (1 + _MARGIN) for t in terms}
    in_tools = {t for t in terms if tool_hits is None or tool_hits.get(t, 1)}

    def most(some: Sequence[str]) -> float:
        """The highest score a document holding only ``some`` of the terms can have: a message's, or a
        tool result's (its score multiplied by the tool weight, from the terms tool results hold)."""
        plain = sum(ceiling[t] for t in some)
        return max(plain, tool_weight * sum(ceiling[t] for t in some if t in in_tools))

    by_ceiling = sorted(terms, key=lambda t: -ceiling[t])
    full = _any(terms)
    found: dict[int, float] = {}
    total = sum(hits[t] for t in terms)
    # Each round costs FTS5 a pass over every term's documents (bm25's idf), whatever it scores: the first
    # takes as many of the rarest terms as a document holding each once (an idf apiece) needs to outscore
    # every document without them, while they stay in under half the matches.
    rare = 1
    while (
        rare < len(by_ceiling) - 1
        and most(by_ceiling[rare:]) * (_K1 + 1) >= sum(ceiling[t] for t in by_ceiling[:rare])
        and sum(hits[t] for t in by_ceiling[: rare + 1]) * 2 <= total
    ):
        rare += 1
    while sum(hits[t] for t in by_ceiling[:rare]) * 2 <= total:
        kept = set(by_ceiling[:rare])
        common = [t for t in terms if t not in kept]
        # The documents holding a rare term, scored by the whole query (a NOT's phrases add nothing).
        expression = f"({full}) NOT (({_any(common)}) NOT ({_any([t for t in terms if t in kept])}))"
        found.update(
            db.execute(
                f"SELECT fts.rowid, {score} FROM fts WHERE fts MATCH ? {order}", (tool_weight, expression, limit)
            ).fetchall()
        )
        best = sorted(found.items(), key=lambda row: (-row[1], row[0] % stride, row[0]))[:limit]
        floor = best[-1][1] if len(best) >= limit else 0.0
        if most(common) < floor:
            return best
        if len(best) < limit:
            rare += 1  # fewer documents hold the rare terms than the result takes: the next rarest joins them
        while rare < len(by_ceiling) and most(by_ceiling[rare:]) >= floor > 0:
            rare += 1
        if rare >= len(by_ceiling):
            break
    return None  # the rare terms match most of what the query does: no cheaper than the full query


def idf(rows: int, hits: int) -> float:
    """FTS5's bm25 idf (with its floor)."""
    idf = math.log((rows - hits + 0.5) / (hits + 0.5)) if rows else 0.0
    return idf if idf > 0 else 1e-6


def _any(terms: Sequence[str]) -> str:
    return " OR ".join(f'"{t}"' for t in terms)


def _documents(db: sqlite3.Connection) -> int:
    """FTS5's document count, as its bm25 reads it (the first number of its ``averages`` record, id 1)."""
    return averages(db)[0]


def averages(db: sqlite3.Connection) -> tuple[int, int]:
    """FTS5's document count and token count (one column), as its bm25 reads them: its ``averages`` record (id 1)."""
    row = db.execute("SELECT block FROM fts_data WHERE id = 1").fetchone()
    if row is None or not row[0]:
        return 0, 0
    data = bytes(row[0])
    docs, at = _varint(data)
    return docs, (_varint(data, at)[0] if at < len(data) else 0)


def size_of(blob: bytes) -> int:
    """A document's token count (one column) from its ``fts_docsize`` record."""
    if not blob:
        return 0
    if blob[0] < 0x80:  # one byte: most documents hold under 128 tokens
        return int(blob[0])
    return _varint(bytes(blob))[0]


def _varint(data: bytes, at: int = 0) -> tuple[int, int]:
    """SQLite's variable-length integer at ``at`` (FTS5's records use it) and where the next starts."""
    value = 0
    for i in range(9):
        byte = data[at + i]
        if i == 8:
            return (value << 8) | byte, at + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return value, at + 9
